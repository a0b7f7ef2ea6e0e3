//! Atomics of the ring (its hand-over, buffer state, slot metadata and the relaxed producer
//! fields of `relaxed.rs`), swapped for `loom`'s under `--cfg hushtrace_loom` so the ring's
//! protocols can be model-checked (`ci/loom.sh`, `tests/loom.rs`).
//!
//! Under that cfg this module also provides the loom stand-in of [`crate::local::LocalU64`]:
//! relaxed loom atomics, which is what the signal-safe local instructions are with respect to
//! other threads (loom has no signals; the same-thread atomicity is covered by `local.rs`'s
//! unit tests).

#[cfg(hushtrace_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};
#[cfg(not(hushtrace_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

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
