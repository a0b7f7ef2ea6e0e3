//! aarch64: the generic timer's virtual count (the local primitives are `local_atomic.rs`'s).

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
