//! Every other architecture, and Miri: no usable cycle counter (timestamps come from the
//! fallback clock); the local primitives are `local_atomic.rs`'s relaxed atomics.

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
