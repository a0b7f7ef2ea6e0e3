//! aarch64: the generic timer's virtual count and signal-safe atomics.

/// The virtual count of the generic timer (`mrs cntvct_el0`).
#[inline(always)]
pub fn cycles() -> u64 {
    let v: u64;
    // SAFETY: cntvct_el0 is readable from EL0 on Linux (the kernel enables it for the vDSO);
    // the instruction only reads a system register.
    unsafe { core::arch::asm!("mrs {v}, cntvct_el0", v = out(reg) v, options(nomem, nostack)) };
    v
}

/// The generic timer runs at a fixed frequency by architecture.
pub fn counter_invariant() -> bool {
    true
}

/// Name of the cycle counter in the trace's clock description.
pub const COUNTER_SOURCE: &str = "cntvct";

/// Replaces `*p == old` by `new`; returns whether it replaced. A relaxed atomic: one LSE `cas`,
/// or an exclusive load/store pair whose store fails (and retries) if a signal handler ran in
/// between, because exception return clears the exclusive monitor. Either way atomic with
/// respect to signal handlers on this thread.
///
/// # Safety
/// `p` must be valid for reads and writes and 8-byte aligned, and no other thread may access
/// `*p` concurrently except through these primitives (the caller's contract is that only the
/// calling thread and its signal handlers touch it).
#[inline(always)]
pub unsafe fn local_cas(p: *mut u64, old: u64, new: u64) -> bool {
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
    // SAFETY: `p` is valid and 8-byte aligned (caller), as `AtomicU64::from_ptr` requires, and
    // not accessed non-atomically by another thread concurrently.
    let a = unsafe { AtomicU64::from_ptr(p) };
    a.compare_exchange(old, new, Relaxed, Relaxed).is_ok()
}

/// Adds `v` (wrapping), atomically with respect to signal handlers; see [`local_cas`].
///
/// # Safety
/// As for [`local_cas`].
#[inline(always)]
pub unsafe fn local_add(p: *mut u64, v: u64) {
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
    // SAFETY: as in `local_cas`.
    unsafe { AtomicU64::from_ptr(p) }.fetch_add(v, Relaxed);
}
