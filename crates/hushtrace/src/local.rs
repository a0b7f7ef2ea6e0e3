//! Signal-safe thread-local counters.
//!
//! A [`LocalU64`] is modified only by its owning thread (or by another thread once the owner is
//! known to be quiescent). Its read-modify-write operations are single instructions, so a signal
//! handler that interrupts the owner at any point sees — and leaves — a consistent value. On
//! x86_64 that is a `cmpxchg`/`add` *without* the `lock` prefix: atomic with respect to the
//! current CPU (interrupts and signals arrive between instructions) at the cost of an ordinary
//! instruction, the trick LTTng-UST's per-CPU buffers use with `cmpxchg_local`. Elsewhere the
//! operations fall back to (locked) atomics, which are correct but slower.

use core::cell::UnsafeCell;

/// A 64-bit counter owned by one thread; see the module docs.
///
/// Invariant: only the owning thread calls the mutating methods, except while the owner is
/// quiescent (not inside a tracepoint and unable to enter one on this buffer), which the
/// runtime guarantees with its detach/quiesce protocol.
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct LocalU64(UnsafeCell<u64>);

// SAFETY: mutation is confined to the owning thread (or to a single thread after quiescence, with
// the hand-over ordered by Release/Acquire on the buffer state), per the type invariant.
unsafe impl Sync for LocalU64 {}

impl LocalU64 {
    pub(crate) const fn new(v: u64) -> Self {
        LocalU64(UnsafeCell::new(v))
    }

    #[inline(always)]
    pub(crate) fn get(&self) -> u64 {
        // SAFETY: a volatile read of an aligned u64 owned by this thread; concurrent writers only
        // exist on the same thread (signal handlers), and an aligned 8-byte load is not torn.
        unsafe { core::ptr::read_volatile(self.0.get()) }
    }

    #[inline(always)]
    pub(crate) fn set(&self, v: u64) {
        // SAFETY: see `get`.
        unsafe { core::ptr::write_volatile(self.0.get(), v) }
    }

    /// Replaces `old` by `new` if the value is still `old`, atomically with respect to signal
    /// handlers on the owning thread.
    #[inline(always)]
    pub(crate) fn cas(&self, old: u64, new: u64) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let prev: u64;
            // SAFETY: `self.0.get()` is a valid, aligned u64 owned by this thread. cmpxchg
            // compares RAX with the memory operand and stores `new` if equal; RAX receives the
            // previous value. No lock prefix: atomic with respect to this CPU only, see module docs.
            unsafe {
                core::arch::asm!(
                    "cmpxchg qword ptr [{p}], {new}",
                    p = in(reg) self.0.get(),
                    new = in(reg) new,
                    inout("rax") old => prev,
                    options(nostack),
                );
            }
            prev == old
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: the cell is aligned for u64 and only accessed atomically on this target.
            let a = unsafe { core::sync::atomic::AtomicU64::from_ptr(self.0.get()) };
            a.compare_exchange(
                old,
                new,
                core::sync::atomic::Ordering::Relaxed,
                core::sync::atomic::Ordering::Relaxed,
            )
            .is_ok()
        }
    }

    /// Adds `v`, atomically with respect to signal handlers on the owning thread.
    #[inline(always)]
    pub(crate) fn add(&self, v: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as in `cas`; a single non-locked `add` to memory.
            unsafe {
                core::arch::asm!(
                    "add qword ptr [{p}], {v}",
                    p = in(reg) self.0.get(),
                    v = in(reg) v,
                    options(nostack),
                );
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: as in `cas`.
            let a = unsafe { core::sync::atomic::AtomicU64::from_ptr(self.0.get()) };
            a.fetch_add(v, core::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LocalU64;

    #[test]
    fn ops() {
        let c = LocalU64::new(5);
        assert!(c.cas(5, 7));
        assert!(!c.cas(5, 9));
        assert_eq!(c.get(), 7);
        c.add(3);
        assert_eq!(c.get(), 10);
        c.set(1);
        assert_eq!(c.get(), 1);
    }
}
