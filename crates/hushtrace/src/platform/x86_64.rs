//! x86_64: the time stamp counter and the non-locked read-modify-write instructions.

/// The time stamp counter (`rdtsc`). Not serializing: it may be read a few instructions early
/// or late, which is fine for event timestamps (the ring re-reads it when a signal handler
/// reserved in between, see `ring/reserve.rs`).
#[inline(always)]
pub fn cycles() -> u64 {
    // SAFETY: rdtsc is available on every x86_64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Whether the TSC ticks at a constant rate across frequency changes and idle states (CPUID
/// leaf 0x8000_0007, EDX bit 8 "invariant TSC").
pub fn counter_invariant() -> bool {
    // `__cpuid` is safe to call on x86_64 (CPUID exists on every x86_64 CPU).
    let max_ext = core::arch::x86_64::__cpuid(0x8000_0000).eax;
    if max_ext < 0x8000_0007 {
        return false;
    }
    // Leaf 0x80000007 exists (checked above).
    let r = core::arch::x86_64::__cpuid(0x8000_0007);
    r.edx & (1 << 8) != 0
}

/// Name of the cycle counter in the trace's clock description.
pub const COUNTER_SOURCE: &str = "tsc";

/// Replaces `*p == old` by `new` with one `cmpxchg` **without** the `lock` prefix: atomic with
/// respect to the current CPU (interrupts, hence signals, arrive between instructions), not
/// with respect to other CPUs. Returns whether it replaced.
///
/// # Safety
/// `p` must be valid for reads and writes and 8-byte aligned, and no other thread may access
/// `*p` concurrently: only the calling thread and its signal handlers (or one thread at a time,
/// with the hand-over ordered by a Release/Acquire pair).
#[inline(always)]
pub unsafe fn local_cas(p: *mut u64, old: u64, new: u64) -> bool {
    let prev: u64;
    // SAFETY: `p` is valid and aligned (caller). cmpxchg compares RAX with the memory operand
    // and stores `new` if equal; RAX receives the previous value. No lock prefix: atomic with
    // respect to this CPU only, which the caller's contract makes sufficient.
    unsafe {
        core::arch::asm!(
            "cmpxchg qword ptr [{p}], {new}",
            p = in(reg) p,
            new = in(reg) new,
            inout("rax") old => prev,
            options(nostack),
        );
    }
    prev == old
}

/// Adds `v` (wrapping) with one non-locked `add` to memory; see [`local_cas`].
///
/// # Safety
/// As for [`local_cas`].
#[inline(always)]
pub unsafe fn local_add(p: *mut u64, v: u64) {
    // SAFETY: as in `local_cas`; a single non-locked `add` to memory.
    unsafe {
        core::arch::asm!(
            "add qword ptr [{p}], {v}",
            p = in(reg) p,
            v = in(reg) v,
            options(nostack),
        );
    }
}
