//! Per-thread context: identity caches (vpid, vtid, procname, pthread id), the attached buffer,
//! the nesting depth and the no-syscall flag; the thread registry; the tracepoint write path.

use crate::clock;
use crate::lock::SpinLock;
use crate::platform;
use crate::ring::{self, Buffer, Ident};
use crate::session::{self, Shared};
use hushtrace_core::{Callsite, Field, FieldType};
use hushtrace_ctf::layout::EVENT_HEADER_LEN;
use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::Arc;

/// Per-thread tracer state. Shared (`Arc`) between the thread's TLS and the registry.
///
/// Invariants: the `Cell` fields are accessed only by the owning thread, or — in the child of a
/// `fork()` — by the fork handler running on the only thread left; `depth` is written only by
/// the owner and read by a stopping session to wait for quiescence.
#[derive(Debug)]
pub(crate) struct ThreadCtx {
    /// Tracepoint nesting depth (signal handlers nest).
    depth: AtomicU32,
    /// Attached buffer (owned by the session's buffer list), or null.
    pub buffer: AtomicPtr<Buffer>,
    /// No-syscall mode. Written by the owner under the registry lock, read by session starts.
    pub no_syscall: AtomicBool,
    /// Identity caches.
    pub ident: Cell<Ident>,
    /// Violations already logged (bit per [`Violation`]), for the `log` policy.
    logged: Cell<u32>,
    /// A violation to record once the tracepoint that hit it has finished its own record.
    pending: Cell<Option<&'static str>>,
    /// Thread exited, or did not survive a fork.
    pub dead: AtomicBool,
}

// SAFETY: see the type invariants: `Cell` fields are single-threaded by construction.
unsafe impl Sync for ThreadCtx {}
// SAFETY: as above; the value is moved between threads only inside `Arc`.
unsafe impl Send for ThreadCtx {}

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

/// Threads known to the tracer and the running session of this process.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub threads: Vec<Arc<ThreadCtx>>,
    pub session: Option<Arc<Shared>>,
}

/// The registry lock: taken by thread registration and exit, session start/stop, mode changes
/// and the fork prepare handler. Never on the tracepoint fast path.
pub(crate) static REGISTRY: SpinLock<Registry> = SpinLock::new(Registry {
    threads: Vec::new(),
    session: None,
});

/// Something a no-syscall thread would have needed a system call for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Violation {
    /// A timestamp with no usable cycle counter.
    ClockGettime = 0,
    /// A buffer that was not allocated before the thread entered the mode.
    BufferAllocation = 1,
}

impl Violation {
    pub(crate) fn what(self) -> &'static str {
        match self {
            Violation::ClockGettime => "clock_gettime",
            Violation::BufferAllocation => "buffer_allocation",
        }
    }
}

impl ThreadCtx {
    fn new(no_syscall: bool) -> ThreadCtx {
        ThreadCtx {
            depth: AtomicU32::new(0),
            buffer: AtomicPtr::new(std::ptr::null_mut()),
            no_syscall: AtomicBool::new(no_syscall),
            ident: Cell::new(current_ident()),
            logged: Cell::new(0),
            pending: Cell::new(None),
            dead: AtomicBool::new(false),
        }
    }

    /// Whether the owner is inside a tracepoint.
    pub fn depth(&self) -> u32 {
        self.depth.load(Ordering::Acquire)
    }

    #[inline(always)]
    fn in_no_syscall(&self) -> bool {
        self.no_syscall.load(Ordering::Relaxed)
    }

    /// Timestamp for an event of this thread.
    #[inline(always)]
    fn now(&self) -> u64 {
        if clock::counter_usable() {
            clock::cycles()
        } else {
            self.fallback_now()
        }
    }

    #[cold]
    fn fallback_now(&self) -> u64 {
        if self.in_no_syscall() {
            self.violation(Violation::ClockGettime);
            0
        } else {
            clock::fallback_now()
        }
    }

    /// Applies the no-syscall policy. Makes no system call except for `abort`.
    #[cold]
    fn violation(&self, v: Violation) {
        match crate::nosyscall::policy() {
            crate::Policy::Zero => {}
            crate::Policy::Abort => platform::abort(),
            crate::Policy::Log => {
                let bit = 1u32 << v as u32;
                if self.logged.get() & bit == 0 {
                    self.logged.set(self.logged.get() | bit);
                    // Recorded after the current event (see `write`), not nested inside it.
                    self.pending.set(Some(v.what()));
                }
            }
        }
    }

    /// Called by the producer after it handed a full packet to the consumer.
    #[inline]
    fn after_commit(&self) {
        if !self.in_no_syscall() {
            session::wake_consumer();
        }
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

fn register() -> Option<Arc<ThreadCtx>> {
    if CTX.with(|c| c.get()) as usize == DEAD || REGISTERING.with(|r| r.replace(true)) {
        return None;
    }
    session::throttle_registration();
    // A signal handler that traces must not interrupt this thread while it holds the registry
    // lock (it would wait for it forever).
    let _sig = platform::SignalBlock::new();
    let ctx = Arc::new(ThreadCtx::new(false));
    // Registers the TLS destructor now, while allocation is allowed.
    let ok = GUARD.try_with(|g| g.0.set(Some(ctx.clone()))).is_ok();
    if ok {
        CTX.with(|c| c.set(Arc::as_ptr(&ctx)));
        let mut reg = REGISTRY.lock();
        reg.threads.retain(|t| !t.dead.load(Ordering::Relaxed));
        reg.threads.push(ctx.clone());
        let session = reg.session.clone();
        if let Some(s) = &session {
            s.attach(&ctx);
        }
        drop(reg);
        if session.is_some() {
            session::ensure_consumer();
        }
    }
    REGISTERING.with(|r| r.set(false));
    ok.then_some(ctx)
}

fn thread_exit(ctx: &Arc<ThreadCtx>) {
    CTX.with(|c| c.set(DEAD as *const ThreadCtx));
    let _sig = platform::SignalBlock::new();
    let exited = {
        // Under the registry lock, which a stopping session holds while it detaches buffers:
        // either the stop detached ours (we see null) or we hand it over as EXITED before the
        // stop can look at it.
        let mut reg = REGISTRY.lock();
        ctx.dead.store(true, Ordering::Relaxed);
        let b = ctx.buffer.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !b.is_null() {
            // SAFETY: a non-null attached buffer is alive in the session's buffer list; it is
            // only freed after being finished, which needs this hand-over first.
            unsafe { (*b).state.store(ring::state::EXITED, Ordering::Release) };
            session::EXITED_PENDING.fetch_add(1, Ordering::Relaxed);
        }
        reg.threads.retain(|t| !Arc::ptr_eq(t, ctx));
        !b.is_null()
    };
    if exited {
        session::wake_consumer();
    }
}

/// Runs `f` with the calling thread's context if it has one (no registration).
pub(crate) fn with_current<R>(f: impl FnOnce(&ThreadCtx) -> R) -> Option<R> {
    let p = CTX.try_with(|c| c.get()).ok()?;
    if (p as usize) <= DEAD {
        return None;
    }
    // SAFETY: a non-sentinel CTX pointer points into the Arc held by this thread's GUARD, which
    // outlives every use on this thread (the guard's destructor resets CTX first).
    Some(f(unsafe { &*p }))
}

/// A record payload: a tuple of [`Field`]s with its type signature known at compile time.
pub trait Payload {
    /// Field types in order.
    const TYPES: &'static [FieldType];
    /// `Callsite::signature_of(TYPES)`.
    const SIG: u64;
    /// Encoded size.
    fn encoded_len(&self) -> usize;
    /// # Safety
    /// `dst` must be valid for `self.encoded_len()` bytes.
    unsafe fn encode(&self, dst: *mut u8);
}

macro_rules! impl_payload {
    ($(($($t:ident $i:tt),*)),* $(,)?) => {$(
        impl<$($t: Field),*> Payload for ($($t,)*) {
            const TYPES: &'static [FieldType] = &[$($t::TYPE),*];
            const SIG: u64 = Callsite::signature_of(Self::TYPES);
            #[inline(always)]
            #[allow(clippy::unused_unit)]
            fn encoded_len(&self) -> usize { 0 $(+ self.$i.encoded_len())* }
            #[inline(always)]
            #[allow(unused_variables, unused_mut, unused_assignments)]
            unsafe fn encode(&self, dst: *mut u8) {
                let mut p = dst;
                $(
                    // SAFETY: the caller provides `encoded_len()` bytes, the sum of the fields' sizes.
                    unsafe { self.$i.encode(p); p = p.add(self.$i.encoded_len()); }
                )*
            }
        }
    )*};
}

impl_payload! {
    (),
    (A 0),
    (A 0, B 1),
    (A 0, B 1, C 2),
    (A 0, B 1, C 2, D 3),
    (A 0, B 1, C 2, D 3, E 4),
    (A 0, B 1, C 2, D 3, E 4, F 5),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11),
}

/// Records one event. `interest` is the value the caller loaded from the callsite state (non-zero).
/// Returns whether the event was written. No lock, no allocation, no system call on a thread in
/// no-syscall mode (see the crate docs for the one exception: the first packet hand-over after a
/// `fork()` on a thread that allows system calls restarts the consumer).
#[inline(always)]
pub fn emit<P: Payload>(cs: &'static Callsite, interest: u64, payload: P) -> bool {
    if interest != P::SIG && !cs.publish_types(P::SIG, P::TYPES) {
        // Another thread is publishing this callsite's types right now, or a generic callsite
        // was instantiated with other types: drop, but count.
        drop_event();
        return false;
    }
    let p = CTX.with(|c| c.get());
    if (p as usize) <= DEAD {
        return emit_unregistered(cs, payload);
    }
    // SAFETY: see `with_current`.
    let ctx = unsafe { &*p };
    write(ctx, cs.state.cached_id(), &payload)
}

#[inline(always)]
fn write<P: Payload>(ctx: &ThreadCtx, id: u16, payload: &P) -> bool {
    // Net-zero if a signal handler interrupts this read-modify-write: the handler restores the
    // value before returning.
    let d = ctx.depth.load(Ordering::Relaxed) + 1;
    ctx.depth.store(d, Ordering::Relaxed);
    // Compiler-only fence: a stopping session pairs it with membarrier(2), which makes the depth
    // store visible before it reads `depth` (asymmetric fence, as in liburcu's urcu-memb).
    compiler_fence(Ordering::SeqCst);
    let mut buf = ctx.buffer.load(Ordering::Acquire);
    if buf.is_null() {
        buf = no_buffer(ctx);
    }
    let ok = if buf.is_null() {
        false
    } else {
        // SAFETY: an attached buffer stays alive while `depth > 0` (the stop protocol waits).
        let buf = unsafe { &*buf };
        let len = EVENT_HEADER_LEN + payload.encoded_len();
        match buf.reserve(len, d, || ctx.now(), || ctx.after_commit()) {
            Ok((dst, ts)) => {
                // SAFETY: `reserve` returned `len` writable bytes at `dst`.
                unsafe {
                    (dst as *mut [u8; 2]).write_unaligned(id.to_le_bytes());
                    ring::put_u64(dst, 2, ts);
                    payload.encode(dst.add(EVENT_HEADER_LEN));
                }
                true
            }
            Err(_) => false,
        }
    };
    compiler_fence(Ordering::SeqCst);
    ctx.depth.store(d - 1, Ordering::Release);
    // Only the clock fallback produces loggable violations on a thread with a buffer; checking
    // it first keeps the common path to one predictable branch on an already loaded flag.
    if d == 1 && !clock::counter_usable() {
        if let Some(what) = ctx.pending.take() {
            crate::nosyscall::log_violation(what);
        }
    }
    ok
}

/// A tracepoint found no buffer attached. Returns a buffer attached now (a thread that allows
/// system calls and missed the session start), or null when the event is lost or there is no
/// session.
#[cold]
#[inline(never)]
fn no_buffer(ctx: &ThreadCtx) -> *mut Buffer {
    if !session::active() {
        return std::ptr::null_mut();
    }
    if !ctx.in_no_syscall() && ctx.depth() <= 1 && !REGISTERING.with(|r| r.get()) {
        // try_lock: this may run in a signal handler that interrupted this very thread while
        // it held the registry lock.
        if let Some(reg) = REGISTRY.try_lock() {
            if let (Some(s), Some(me)) = (
                reg.session.clone(),
                reg.threads.iter().find(|t| std::ptr::eq(&***t, ctx)),
            ) {
                s.attach(me);
            }
        }
        let b = ctx.buffer.load(Ordering::Acquire);
        if !b.is_null() {
            return b;
        }
    }
    session::count_lost(1);
    if ctx.in_no_syscall() {
        ctx.violation(Violation::BufferAllocation);
    }
    std::ptr::null_mut()
}

/// Counts an event that is dropped before reaching a ring: in the thread's stream when it has
/// a buffer (so the CTF discarded count shows it), else in the session.
#[cold]
#[inline(never)]
fn drop_event() {
    let p = CTX.with(|c| c.get());
    if (p as usize) <= DEAD {
        if session::active() {
            session::count_lost(1);
        }
        return;
    }
    // SAFETY: see `with_current`.
    let ctx = unsafe { &*p };
    let d = ctx.depth.load(Ordering::Relaxed) + 1;
    ctx.depth.store(d, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    let buf = ctx.buffer.load(Ordering::Acquire);
    if !buf.is_null() {
        // SAFETY: attached buffers stay alive while `depth > 0`.
        unsafe { (*buf).count_dropped() };
    } else if session::active() {
        session::count_lost(1);
    }
    compiler_fence(Ordering::SeqCst);
    ctx.depth.store(d - 1, Ordering::Release);
}

#[cold]
#[inline(never)]
fn emit_unregistered<P: Payload>(cs: &'static Callsite, payload: P) -> bool {
    if !session::active() {
        return false;
    }
    match register() {
        Some(ctx) => write(&ctx, cs.state.cached_id(), &payload),
        None => {
            session::count_lost(1);
            false
        }
    }
}

/// Records a no-syscall violation event on the current thread (nested inside the tracepoint
/// that hit it). `what` names the system call that was needed.
pub(crate) fn record_violation(cs: &'static Callsite, what: &'static str) {
    let interest = cs.state.interest();
    if interest != 0 {
        emit(cs, interest, (what,));
    }
}
