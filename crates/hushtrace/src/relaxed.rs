//! Plain values that a signal handler on the owning thread may read or write while the owner is
//! between two instructions: atomics accessed with `Relaxed`, which compile to the same loads
//! and stores as plain fields, but make the cross-context access defined behaviour (and let
//! another thread read them for statistics without a data race).
//!
//! The `get`/`set` spelling keeps the ring's code readable; ordering with respect to signal
//! handlers on the same thread comes from `compiler_fence`s at the call sites, and ordering
//! with other threads from the Release/Acquire pairs of the hand-over and the buffer state.
//!
//! The atomics come from [`crate::primitive`], so a loom build (`--cfg hushtrace_loom`) checks
//! that every cross-thread read of these fields is ordered by those pairs. (That is why `new`
//! is not a `const fn`: loom's atomics are created at run time.)
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::primitive::{AtomicBool, AtomicPtr, AtomicU64, Ordering::Relaxed};

/// A `u64` read and written with relaxed atomics.
#[derive(Debug, Default)]
pub(crate) struct RelaxedU64(AtomicU64);

impl RelaxedU64 {
    pub(crate) fn new(v: u64) -> Self {
        RelaxedU64(AtomicU64::new(v))
    }
    #[inline(always)]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    #[inline(always)]
    pub(crate) fn set(&self, v: u64) {
        self.0.store(v, Relaxed)
    }
}

/// A `bool` read and written with relaxed atomics.
#[derive(Debug, Default)]
pub(crate) struct RelaxedBool(AtomicBool);

impl RelaxedBool {
    pub(crate) fn new(v: bool) -> Self {
        RelaxedBool(AtomicBool::new(v))
    }
    #[inline(always)]
    pub(crate) fn get(&self) -> bool {
        self.0.load(Relaxed)
    }
    #[inline(always)]
    pub(crate) fn set(&self, v: bool) {
        self.0.store(v, Relaxed)
    }
}

/// A raw pointer read and written with relaxed atomics.
#[derive(Debug)]
pub(crate) struct RelaxedPtr<T>(AtomicPtr<T>);

impl<T> RelaxedPtr<T> {
    pub(crate) fn new(v: *mut T) -> Self {
        RelaxedPtr(AtomicPtr::new(v))
    }
    #[inline(always)]
    pub(crate) fn get(&self) -> *mut T {
        self.0.load(Relaxed)
    }
    #[inline(always)]
    pub(crate) fn set(&self, v: *mut T) {
        self.0.store(v, Relaxed)
    }
}

/// 16 bytes (a UUID or a thread name) as two relaxed `u64` words. A reader racing a writer may
/// see a mix of old and new words; writers of the values stored here are serialised by the
/// registry lock with signals blocked, and readers on other threads only read them for packet
/// headers after a Release/Acquire hand-over.
#[derive(Debug, Default)]
pub(crate) struct Relaxed16([AtomicU64; 2]);

impl Relaxed16 {
    pub(crate) fn new(v: [u8; 16]) -> Self {
        let r = Relaxed16::default();
        r.set(v);
        r
    }
    #[inline(always)]
    pub(crate) fn get(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.0[0].load(Relaxed).to_le_bytes());
        out[8..].copy_from_slice(&self.0[1].load(Relaxed).to_le_bytes());
        out
    }
    #[inline(always)]
    pub(crate) fn set(&self, v: [u8; 16]) {
        let (a, b) = v.split_at(8);
        self.0[0].store(
            u64::from_le_bytes(a.try_into().unwrap_or_default()),
            Relaxed,
        );
        self.0[1].store(
            u64::from_le_bytes(b.try_into().unwrap_or_default()),
            Relaxed,
        );
    }
}
