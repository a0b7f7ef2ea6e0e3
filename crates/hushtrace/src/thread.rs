#![deny(clippy::disallowed_methods)] // hot path (with_current): no alloc, lock, sleep, syscall
//! The thread life cycle: the thread-local pointer to a thread's [`ThreadCtx`], registration
//! (on a thread's first tracepoint or `init_thread()`), and thread exit, which hands the
//! thread's buffer to the consumer.

use crate::consumer;
use crate::ctx::ThreadCtx;
use crate::platform::SignalBlock;
use crate::ring::BufState;
use crate::state;
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Sentinel in `CTX` for a thread whose context was torn down (thread exit in progress).
const DEAD: usize = 1;

thread_local! {
    /// Fast pointer to this thread's context: const-initialized, no destructor, so access is a
    /// single thread-pointer-relative load without lazy-init checks.
    static CTX: Cell<*const ThreadCtx> = const { Cell::new(std::ptr::null()) };
    /// Registration in progress on this thread (a nested tracepoint must not re-enter it).
    static REGISTERING: Cell<bool> = const { Cell::new(false) };
    /// Owns the context and runs thread-exit handling from its destructor. Touched only when the
    /// thread registers (where allocation and system calls are allowed).
    static GUARD: CtxGuard = const { CtxGuard(Cell::new(None)) };
}

struct CtxGuard(Cell<Option<Arc<ThreadCtx>>>);

impl Drop for CtxGuard {
    fn drop(&mut self) {
        if let Some(ctx) = self.0.take() {
            thread_exit(&ctx);
        }
    }
}

/// Runs `f` with the calling thread's context if it has one (no registration, no system
/// call: one thread-local load). The tracepoint fast path uses it.
#[inline(always)]
pub(crate) fn with_current<R>(f: impl FnOnce(&ThreadCtx) -> R) -> Option<R> {
    let p = CTX.try_with(|c| c.get()).ok()?;
    if (p as usize) <= DEAD {
        return None;
    }
    // SAFETY: a non-sentinel CTX pointer points into the Arc held by this thread's GUARD, which
    // lives until the thread's TLS destructors run; the guard's destructor resets CTX to DEAD
    // before it drops the Arc. The reference is confined to `f`, on this thread.
    Some(f(unsafe { &*p }))
}

/// Whether this thread is registering right now (a nested tracepoint must not re-enter).
pub(crate) fn registering() -> bool {
    REGISTERING.with(|r| r.get())
}

/// The calling thread's context, registering it first if needed. Allocation and system calls
/// allowed.
pub(crate) fn current() -> Option<Arc<ThreadCtx>> {
    if let Some(c) = GUARD
        .try_with(|g| {
            let c = g.0.take();
            g.0.set(c.clone());
            c
        })
        .ok()
        .flatten()
    {
        return Some(c);
    }
    register()
}

/// Registers the calling thread: context, TLS destructor, registry entry, and a buffer if a
/// session runs. `None` when the thread is exiting or already registering.
#[allow(clippy::disallowed_methods)] // a thread's first tracepoint: allocates and locks once
pub(crate) fn register() -> Option<Arc<ThreadCtx>> {
    if CTX.with(|c| c.get()) as usize == DEAD || REGISTERING.with(|r| r.replace(true)) {
        return None;
    }
    consumer::throttle_registration();
    // A signal handler that traces must not interrupt this thread while it holds the registry
    // lock (it would wait for it forever).
    let sig = SignalBlock::new();
    let ctx = Arc::new(ThreadCtx::for_current_thread());
    // Registers the TLS destructor now, while allocation is allowed.
    let ok = GUARD.try_with(|g| g.0.set(Some(ctx.clone()))).is_ok();
    if ok {
        CTX.with(|c| c.set(Arc::as_ptr(&ctx)));
        let mut reg = state::lock_registry(&sig);
        reg.threads.retain(|t| !t.dead.load(Ordering::Relaxed));
        reg.threads.push(ctx.clone());
        let session = reg.session.clone();
        if let Some(s) = &session {
            s.attach(&reg, &ctx);
        }
        drop(reg);
        if session.is_some() {
            consumer::ensure_running();
        }
    }
    REGISTERING.with(|r| r.set(false));
    ok.then_some(ctx)
}

fn thread_exit(ctx: &Arc<ThreadCtx>) {
    CTX.with(|c| c.set(DEAD as *const ThreadCtx));
    let sig = SignalBlock::new();
    let exited = {
        // Under the registry lock, which a stopping session holds while it detaches buffers:
        // either the stop detached ours (we see null) or we hand it over as Exited before the
        // stop can look at it.
        let mut reg = state::lock_registry(&sig);
        ctx.dead.store(true, Ordering::Relaxed);
        let b = ctx.buffer.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !b.is_null() {
            // SAFETY: a non-null attached buffer is alive in the session's buffer list; it is
            // only freed after being finished, which needs this hand-over first.
            unsafe { (*b).state.store(BufState::Exited, Ordering::Release) };
            state::exited_buffer_pending();
        }
        reg.threads.retain(|t| !Arc::ptr_eq(t, ctx));
        !b.is_null()
    };
    if exited {
        consumer::wake();
    }
}

/// A packet was handed over and this process has no consumer (the child of a fork): starts
/// one. The tracepoint path calls it (through `state::wake_consumer`'s answer) so that it does
/// not depend on the consumer module itself.
#[cold]
#[inline(never)]
pub(crate) fn start_consumer() {
    consumer::ensure_running();
}
