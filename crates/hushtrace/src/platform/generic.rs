//! Every other architecture, and Miri: no usable cycle counter (timestamps come from the
//! fallback clock) and the local primitives as ordinary relaxed atomics.
//!
//! Needs 64-bit atomics (`target_has_atomic = "64"`); a target without them does not compile.

/// Under Miri: a process-wide counter that advances by one per read (deterministic, no clock,
/// no inline assembly); it is never used for timestamps because [`counter_invariant`] is false.
#[cfg(miri)]
#[inline(always)]
pub fn cycles() -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    COUNTER.fetch_add(1, Relaxed)
}

/// Without a known counter: the monotonic clock in nanoseconds (a system call or vDSO call);
/// unused for timestamps because [`counter_invariant`] is false.
#[cfg(not(miri))]
#[inline(always)]
pub fn cycles() -> u64 {
    super::monotonic_ns()
}

/// No invariant cycle counter is known here: the clock uses `clock_gettime`.
pub fn counter_invariant() -> bool {
    false
}

/// Name of the cycle counter in the trace's clock description (none here).
pub const COUNTER_SOURCE: &str = "none";

/// Replaces `*p == old` by `new` with a relaxed atomic compare-and-swap (lock-free, hence
/// async-signal-safe); returns whether it replaced.
///
/// # Safety
/// `p` must be valid for reads and writes and 8-byte aligned, and no other thread may access
/// `*p` concurrently except through these primitives.
#[inline(always)]
pub unsafe fn local_cas(p: *mut u64, old: u64, new: u64) -> bool {
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
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
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
    // SAFETY: as in `local_cas`.
    unsafe { AtomicU64::from_ptr(p) }.fetch_add(v, Relaxed);
}
