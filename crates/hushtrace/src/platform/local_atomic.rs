//! The signal-safe local primitives as relaxed atomics, for every architecture but x86_64 (and
//! for x86_64 under Miri): lock-free, hence atomic with respect to signal handlers on this
//! thread. On aarch64 the compare-and-swap is one LSE `cas`, or an exclusive load/store pair
//! whose store fails (and retries) if a signal handler ran in between, because exception return
//! clears the exclusive monitor.
//!
//! Needs 64-bit atomics (`target_has_atomic = "64"`); a target without them does not compile.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Replaces `*p == old` by `new` with a relaxed atomic compare-and-swap; returns whether it
/// replaced.
///
/// # Safety
/// `p` must be valid for reads and writes and 8-byte aligned, and no other thread may access
/// `*p` concurrently except through these primitives (the caller's contract is that only the
/// calling thread and its signal handlers touch it).
#[inline(always)]
pub unsafe fn local_cas(p: *mut u64, old: u64, new: u64) -> bool {
    // SAFETY: `p` is valid and 8-byte aligned (caller), as `AtomicU64::from_ptr` requires, and
    // not accessed non-atomically by another thread concurrently.
    let a = unsafe { AtomicU64::from_ptr(p) };
    a.compare_exchange(old, new, Relaxed, Relaxed).is_ok()
}

/// Adds `v` (wrapping) with a relaxed atomic add; see [`local_cas`].
///
/// # Safety
/// As for [`local_cas`].
#[inline(always)]
pub unsafe fn local_add(p: *mut u64, v: u64) {
    // SAFETY: as in `local_cas`.
    unsafe { AtomicU64::from_ptr(p) }.fetch_add(v, Relaxed);
}
