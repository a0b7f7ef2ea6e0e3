//! Atomics of the ring (its hand-over, buffer state, slot metadata, the header-page words of the
//! flush and snapshot protocols, their fences, and the relaxed producer fields of
//! `relaxed.rs`), swapped for `loom`'s under `--cfg hushtrace_loom` so the ring's
//! protocols can be model-checked (`ci/loom.sh`, `tests/loom.rs`).
//!
//! Under that cfg this module also provides the loom stand-in of [`crate::local::LocalU64`]:
//! relaxed loom atomics, which is what the signal-safe local instructions are with respect to
//! other threads (loom has no signals; the same-thread atomicity is covered by `local.rs`'s
//! unit tests).
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

#[cfg(hushtrace_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};
#[cfg(not(hushtrace_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// A compiler-only fence: orders the ring's stores with respect to a signal handler on the
/// same thread (the producer's packet switch). Loom has no signals, and a compiler fence
/// orders nothing between threads, so both builds use std's.
pub(crate) use std::sync::atomic::compiler_fence;

/// The 64-bit word of the ring header page at `ptr`, as an atomic (the `done`, `open_seq`,
/// `consumed`, discarded, flush words of `hushtrace_ctf::ringfile`, shared with `recover`
/// through the mapping). Under loom the ring keeps those words in loom atomics of its own
/// instead (`Buffer::hdr_word`), so this is the normal build's only.
///
/// # Safety
/// `ptr` is 8-aligned and valid for reads and writes for `'a`, and accessed only atomically
/// during `'a`.
#[cfg(not(hushtrace_loom))]
#[inline(always)]
pub(crate) unsafe fn atomic_u64_at<'a>(ptr: *mut u64) -> &'a AtomicU64 {
    // SAFETY: forwarded contract.
    unsafe { AtomicU64::from_ptr(ptr) }
}

/// Loads the packet byte at `ptr` with a relaxed atomic load: the consumer's copies of a slot
/// the producer may be writing (the open packet's header in the flush, the snapshot's copies,
/// validated afterwards by the protocol words). Packet bytes are not loom-visible memory in
/// either build (loom sees them through the ring's cells, `ring/memory.rs`), so this is std's atomic
/// in both: no data race in the loom build either.
///
/// # Safety
/// `ptr` is valid for reads.
#[inline(always)]
pub(crate) unsafe fn load_byte(ptr: *mut u8) -> u8 {
    // SAFETY: valid (caller), and every byte is a valid `AtomicU8`.
    unsafe { std::sync::atomic::AtomicU8::from_ptr(ptr) }.load(Ordering::Relaxed)
}

/// Writes the packet byte at `ptr` (a relaxed atomic store), for a byte a reader may load at
/// the same time with [`load_byte`] (the open packet's thread name, rewritten on a rename).
///
/// # Safety
/// `ptr` is valid for writes.
#[inline(always)]
pub(crate) unsafe fn store_byte(ptr: *mut u8, v: u8) {
    // SAFETY: valid (caller), and every byte is a valid `AtomicU8`.
    unsafe { std::sync::atomic::AtomicU8::from_ptr(ptr) }.store(v, Ordering::Relaxed);
}

/// Writes the packet byte at `ptr` without changing it (an atomic add of 0): faults the page
/// in and breaks copy-on-write while packets in it may be written or read (`prefault`).
///
/// # Safety
/// `ptr` is valid for reads and writes.
#[inline(always)]
pub(crate) unsafe fn touch_byte(ptr: *mut u8) {
    // SAFETY: valid (caller), and every byte is a valid `AtomicU8`.
    unsafe { std::sync::atomic::AtomicU8::from_ptr(ptr) }.fetch_add(0, Ordering::Relaxed);
}

/// `LocalU64` under loom: a relaxed loom atomic with the same methods.
#[cfg(hushtrace_loom)]
#[derive(Debug, Default)]
pub(crate) struct LocalU64(AtomicU64);

#[cfg(hushtrace_loom)]
impl LocalU64 {
    pub(crate) fn new(v: u64) -> Self {
        LocalU64(AtomicU64::new(v))
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    /// # Safety
    /// As in the normal build: the caller is the single writer.
    pub(crate) unsafe fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed)
    }
    /// # Safety
    /// As in the normal build: the caller is the single writer.
    pub(crate) unsafe fn cas(&self, old: u64, new: u64) -> bool {
        self.0
            .compare_exchange(old, new, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
    /// # Safety
    /// As in the normal build: the caller is the single writer.
    pub(crate) unsafe fn add(&self, v: u64) {
        self.0.fetch_add(v, Ordering::Relaxed);
    }
}
