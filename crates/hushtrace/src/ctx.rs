//! The per-thread tracer context: identity caches, the attached buffer, the nesting depth and
//! the no-syscall flags. A plain data type; the thread registry and thread-local storage that
//! own it are in `state.rs` and `thread.rs`.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::platform;
use crate::ring::{AtomicIdent, Buffer, Ident};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Something a no-syscall thread would have needed a system call for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Violation {
    /// A timestamp with no usable cycle counter.
    ClockGettime = 1,
    /// A buffer that was not allocated before the thread entered the mode.
    BufferAllocation = 2,
}

impl Violation {
    pub(crate) fn what(self) -> &'static str {
        match self {
            Violation::ClockGettime => "clock_gettime",
            Violation::BufferAllocation => "buffer_allocation",
        }
    }

    fn from_u8(v: u8) -> Option<Violation> {
        match v {
            1 => Some(Violation::ClockGettime),
            2 => Some(Violation::BufferAllocation),
            _ => None,
        }
    }
}

/// Per-thread tracer state, shared (`Arc`) between the thread's TLS and the registry.
///
/// Every field is an atomic, so other threads may read it; who may *write* which field:
/// * `depth`, `logged`, `pending`: the owner only (and signal handlers nesting on it, which
///   restore `depth` before they return). A stopping session reads `depth` to wait for
///   quiescence.
/// * `buffer`: set by whoever holds the registry lock (attach at session start or
///   registration), swapped to null under the registry lock by a stop, a thread exit or the fork
///   child handler; the owner loads it on every tracepoint.
/// * `ident`: under the registry lock (registration, `set_thread_name`), or by the fork child
///   handler, which owns every lock.
/// * `no_syscall`: by the owner only (`set_thread_no_syscall` stores it under the registry
///   lock so a concurrent session start sees it; `clear_thread_no_syscall` without); read by
///   session starts under the lock.
/// * `dead`: under the registry lock (thread exit, fork child handler).
/// * `binding_word`: the owner only (`fixed::FastThread::set_word`).
#[derive(Debug)]
pub(crate) struct ThreadCtx {
    /// Tracepoint nesting depth (signal handlers nest).
    depth: AtomicU32,
    /// Attached buffer (owned by the session's buffer list), or null.
    pub buffer: AtomicPtr<Buffer>,
    /// No-syscall mode.
    pub no_syscall: AtomicBool,
    /// Identity caches.
    pub ident: AtomicIdent,
    /// Violations already logged (bit per [`Violation`]), for the `log` policy.
    logged: AtomicU8,
    /// A violation to record once the tracepoint that hit it has finished its own record
    /// (0 = none).
    pending: AtomicU8,
    /// Thread exited, or did not survive a fork.
    pub dead: AtomicBool,
    /// A language binding's own word for this thread (`fixed.rs`); owner only.
    pub binding_word: AtomicU64,
}

impl ThreadCtx {
    /// A context for the calling thread (system calls: registration path only).
    pub(crate) fn for_current_thread() -> ThreadCtx {
        ThreadCtx {
            depth: AtomicU32::new(0),
            buffer: AtomicPtr::new(std::ptr::null_mut()),
            no_syscall: AtomicBool::new(false),
            ident: AtomicIdent::new(current_ident()),
            logged: AtomicU8::new(0),
            pending: AtomicU8::new(0),
            dead: AtomicBool::new(false),
            binding_word: AtomicU64::new(0),
        }
    }

    /// The nesting depth: non-zero while the owner is inside a tracepoint.
    pub(crate) fn depth(&self) -> u32 {
        self.depth.load(Ordering::Acquire)
    }

    /// Owner: enters a tracepoint; returns the new depth. Net-zero if a signal handler
    /// interrupts this read-modify-write: the handler restores the value before returning.
    #[inline(always)]
    pub(crate) fn enter(&self) -> u32 {
        let d = self.depth.load(Ordering::Relaxed) + 1;
        self.depth.store(d, Ordering::Relaxed);
        d
    }

    /// Owner: leaves the tracepoint entered at depth `d`.
    #[inline(always)]
    pub(crate) fn leave(&self, d: u32) {
        self.depth.store(d - 1, Ordering::Release);
    }

    #[inline(always)]
    pub(crate) fn in_no_syscall(&self) -> bool {
        self.no_syscall.load(Ordering::Relaxed)
    }

    /// Owner: notes a violation for the `log` policy, once per thread and kind; returns whether
    /// it is new.
    pub(crate) fn note_violation(&self, v: Violation) -> bool {
        let bit = 1u8 << v as u8;
        let seen = self.logged.load(Ordering::Relaxed);
        if seen & bit != 0 {
            return false;
        }
        self.logged.store(seen | bit, Ordering::Relaxed);
        self.pending.store(v as u8, Ordering::Relaxed);
        true
    }

    /// Owner: takes the violation noted by [`ThreadCtx::note_violation`], if any.
    pub(crate) fn take_pending(&self) -> Option<Violation> {
        Violation::from_u8(self.pending.swap(0, Ordering::Relaxed))
    }

    /// Fork child handler: the forking thread's new identity.
    pub(crate) fn refresh_ids_after_fork(&self) {
        let mut id = self.ident.get();
        id.vpid = platform::getpid();
        id.vtid = platform::gettid();
        id.pthread = platform::pthread_self();
        self.ident.set(id);
    }
}

/// The identity of the calling thread (system calls: registration path only).
pub(crate) fn current_ident() -> Ident {
    Ident {
        vpid: platform::getpid(),
        vtid: platform::gettid(),
        procname: platform::thread_name(),
        pthread: platform::pthread_self(),
    }
}
