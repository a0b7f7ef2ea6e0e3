//! Signal-safe thread-local counters.
//!
//! A [`LocalU64`] is modified only by its owning thread (or by another thread once the owner is
//! known to be quiescent). Its read-modify-write operations are single instructions, so a signal
//! handler that interrupts the owner at any point sees — and leaves — a consistent value. The
//! instructions come from the platform layer (`platform::local_cas` / `local_add`): on x86_64 a
//! `cmpxchg`/`add` *without* the `lock` prefix, atomic with respect to the current CPU
//! (interrupts and signals arrive between instructions) at the cost of an ordinary instruction,
//! the trick LTTng-UST's per-CPU buffers use with `cmpxchg_local`; elsewhere (and under Miri)
//! relaxed atomics, which are correct but slower.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

#[cfg(not(hushtrace_loom))]
use crate::platform;
#[cfg(not(hushtrace_loom))]
use core::cell::UnsafeCell;

/// Under loom, relaxed loom atomics stand in for the local instructions (`primitive.rs`).
#[cfg(hushtrace_loom)]
pub(crate) use crate::primitive::LocalU64;

/// A 64-bit counter owned by one thread; see the module docs.
///
/// Invariant: only the owning thread calls the mutating methods, except while the owner is
/// quiescent (not inside a tracepoint and unable to enter one on this buffer), which the
/// runtime guarantees with its detach/quiesce protocol. The type is `Sync` (other threads read
/// it) and cannot check who writes, so the mutators are `unsafe fn`s whose callers state the
/// single-writer argument (in the ring: the producer or consumer key they hold).
///
/// `repr(C, align(8))`: the value is 8-byte aligned on every target, including 32-bit ones
/// where a `u64` alone is only 4-byte aligned. The platform primitives (a plain `cmpxchg` on
/// x86_64, `AtomicU64::from_ptr` elsewhere) and untorn volatile loads rely on it.
#[cfg(not(hushtrace_loom))]
#[derive(Debug, Default)]
#[repr(C, align(8))]
pub(crate) struct LocalU64(UnsafeCell<u64>);

#[cfg(not(hushtrace_loom))]
// SAFETY: mutation is confined to the owning thread (or to a single thread after quiescence, with
// the hand-over ordered by Release/Acquire on the buffer state), per the type invariant.
unsafe impl Sync for LocalU64 {}

#[cfg(not(hushtrace_loom))]
impl LocalU64 {
    pub(crate) const fn new(v: u64) -> Self {
        LocalU64(UnsafeCell::new(v))
    }

    #[inline(always)]
    pub(crate) fn get(&self) -> u64 {
        // SAFETY: a volatile read of a u64 that is 8-byte aligned (`repr(align(8))`) and owned
        // by this thread; concurrent writers only exist on the same thread (signal handlers),
        // and an aligned 8-byte load is a single instruction on 64-bit targets.
        unsafe { core::ptr::read_volatile(self.0.get()) }
    }

    /// Stores `v`.
    ///
    /// # Safety
    /// The caller is the single writer: the owning thread (or a signal handler nesting on
    /// it), or the one thread that took the counter over after the owner became quiescent,
    /// with that hand-over ordered by a Release/Acquire pair. (`LocalU64` is `Sync` so other
    /// threads may `get` it; the type cannot tell writers apart, so the mutators are unsafe.)
    #[inline(always)]
    pub(crate) unsafe fn set(&self, v: u64) {
        // SAFETY: a single writer (caller), so no other thread writes concurrently; an aligned
        // 8-byte store is a single instruction, so handlers on this thread see old or new.
        unsafe { core::ptr::write_volatile(self.0.get(), v) }
    }

    /// Replaces `old` by `new` if the value is still `old`, atomically with respect to signal
    /// handlers on the owning thread.
    ///
    /// # Safety
    /// As for [`LocalU64::set`]: the caller is the single writer.
    #[inline(always)]
    pub(crate) unsafe fn cas(&self, old: u64, new: u64) -> bool {
        // SAFETY: the pointer is valid for the lifetime of `self` and 8-byte aligned
        // (`repr(C, align(8))`), as `local_cas` requires; only the owning thread and its signal
        // handlers (or one thread after a quiescent hand-over) write it (caller).
        unsafe { platform::local_cas(self.0.get(), old, new) }
    }

    /// Adds `v` (wrapping), atomically with respect to signal handlers on the owning thread.
    ///
    /// # Safety
    /// As for [`LocalU64::set`]: the caller is the single writer.
    #[inline(always)]
    pub(crate) unsafe fn add(&self, v: u64) {
        // SAFETY: as in `cas`.
        unsafe { platform::local_add(self.0.get(), v) }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests, not the hot path
mod tests {
    use super::LocalU64;
    use std::cell::Cell;

    // The tests are single-threaded (or hand over after a Release/Acquire pair): every caller
    // is the single writer the mutators require.
    fn cas(c: &LocalU64, old: u64, new: u64) -> bool {
        // SAFETY: single writer (module note above).
        unsafe { c.cas(old, new) }
    }
    fn add(c: &LocalU64, v: u64) {
        // SAFETY: single writer.
        unsafe { c.add(v) }
    }
    fn set(c: &LocalU64, v: u64) {
        // SAFETY: single writer.
        unsafe { c.set(v) }
    }

    #[test]
    fn ops() {
        let c = LocalU64::new(5);
        assert!(cas(&c, 5, 7));
        assert!(!cas(&c, 5, 9));
        assert_eq!(c.get(), 7);
        add(&c, 3);
        assert_eq!(c.get(), 10);
        set(&c, 1);
        assert_eq!(c.get(), 1);
        add(&c, u64::MAX);
        assert_eq!(c.get(), 0, "add wraps");
        assert_eq!(LocalU64::default().get(), 0);
    }

    #[test]
    fn aligned_to_eight_bytes_everywhere() {
        assert_eq!(core::mem::align_of::<LocalU64>(), 8);
        assert_eq!(core::mem::size_of::<LocalU64>(), 8);
        #[allow(dead_code)]
        struct Packed(u8, LocalU64, u32, LocalU64);
        let p = Packed(0, LocalU64::new(1), 0, LocalU64::new(2));
        assert_eq!(&p.1 as *const LocalU64 as usize % 8, 0);
        assert_eq!(&p.3 as *const LocalU64 as usize % 8, 0);
    }

    /// The reservation loop of `ring/reserve.rs` in miniature: read the offset, compute, then
    /// compare-and-swap; a nested closure plays the signal handler that interrupts between the
    /// read and the CAS and reserves on its own.
    fn reserve(off: &LocalU64, len: u64, interrupt: &dyn Fn()) -> (u64, u32) {
        let mut tries = 0;
        loop {
            tries += 1;
            let o = off.get();
            interrupt();
            if cas(off, o, o + len) {
                return (o, tries);
            }
        }
    }

    #[test]
    fn a_handler_between_read_and_cas_gets_its_own_bytes() {
        let off = LocalU64::new(100);
        let handler_got = Cell::new(None);
        let fired = Cell::new(false);
        let handler = || {
            if !fired.replace(true) {
                // The "handler" reserves 8 bytes with no interruption of its own.
                handler_got.set(Some(reserve(&off, 8, &|| {}).0));
            }
        };
        let (mine, tries) = reserve(&off, 16, &handler);
        assert_eq!(handler_got.get(), Some(100), "the handler reserved first");
        assert_eq!(mine, 108, "the interrupted reservation retried after it");
        assert_eq!(tries, 2);
        assert_eq!(off.get(), 124);
    }

    #[test]
    fn nested_handlers_and_counters_lose_no_update() {
        // Three levels: the thread, a handler interrupting it, a handler interrupting that one.
        let off = LocalU64::new(0);
        let events = LocalU64::new(0);
        let depth = Cell::new(0u32);
        let ranges = std::cell::RefCell::new(Vec::new());
        fn step(
            off: &LocalU64,
            events: &LocalU64,
            depth: &Cell<u32>,
            ranges: &std::cell::RefCell<Vec<(u64, u64)>>,
            len: u64,
        ) {
            depth.set(depth.get() + 1);
            let d = depth.get();
            // A signal arrives once per reservation (a retry is not interrupted again).
            let fired = Cell::new(false);
            let nested = || {
                if d < 3 && !fired.replace(true) {
                    step(off, events, depth, ranges, len + 1);
                }
            };
            let (o, _) = reserve(off, len, &nested);
            add(events, 1);
            ranges.borrow_mut().push((o, o + len));
            depth.set(d - 1);
        }
        let n = if cfg!(miri) { 20 } else { 1000 };
        for _ in 0..n {
            step(&off, &events, &depth, &ranges, 4);
        }
        let mut r = ranges.into_inner();
        assert_eq!(events.get(), r.len() as u64);
        assert_eq!(r.len(), 3 * n);
        // The reserved ranges tile [0, off) exactly: no overlap, no gap.
        r.sort();
        let mut end = 0;
        for (a, b) in r {
            assert_eq!(a, end);
            end = b;
        }
        assert_eq!(end, off.get());
        assert_eq!(off.get(), n as u64 * (4 + 5 + 6));
    }

    #[test]
    fn hand_over_to_another_thread_after_quiescence() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let c = std::sync::Arc::new((LocalU64::new(0), AtomicBool::new(false)));
        let producer = {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..100 {
                    add(&c.0, 1);
                }
                // Release: the owner's updates happen-before the other thread's Acquire.
                c.1.store(true, Ordering::Release);
            })
        };
        while !c.1.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        assert_eq!(c.0.get(), 100);
        assert!(cas(&c.0, 100, 0));
        producer.join().unwrap();
    }
}
