//! All process-wide state of the tracer, in one place: the thread registry, the running
//! session's shared state (buffer pool, counters, consumer handle), the flags the fast and cold
//! paths read, and the no-syscall policy. Every lock of the tracer is defined here, and the
//! fork handlers take exactly the locks [`fork_prepare`] lists from this module, so adding
//! state here cannot silently skip the `pthread_atfork` handlers.
//!
//! Lock order: registry, then a session's `consumer`, then its `inner`. Every holder blocks
//! asynchronous signals first ([`lock_registry`] takes the proof), so a signal handler that
//! traces can never wait for a lock its own thread holds.

use crate::config::{Config, Error, Policy, Stats};
use crate::ctx::ThreadCtx;
use crate::lock::{SpinGuard, SpinLock};
use crate::platform::{self, SignalBlock};
use crate::ring::{BufState, Buffer, ProducerKey};
use crate::tracedir::Dir;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// The registry

/// Threads known to the tracer and the running session of this process.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub threads: Vec<Arc<ThreadCtx>>,
    pub session: Option<Arc<Shared>>,
}

/// The registry lock: taken by thread registration and exit, session start/stop, mode changes
/// and the fork prepare handler. Never on the tracepoint fast path.
static REGISTRY: SpinLock<Registry> = SpinLock::new(Registry {
    threads: Vec::new(),
    session: None,
});

/// Proof that the registry lock is held.
pub(crate) type RegistryGuard<'a> = SpinGuard<'a, Registry>;

/// Takes the registry lock. The [`SignalBlock`] argument proves asynchronous signals are
/// blocked on this thread while it is held.
pub(crate) fn lock_registry(_signals_blocked: &SignalBlock) -> RegistryGuard<'_> {
    REGISTRY.lock()
}

/// Takes the registry lock if it is free: for a tracepoint's cold path, which may run in a
/// signal handler that interrupted this very thread while it held the lock.
pub(crate) fn try_lock_registry() -> Option<RegistryGuard<'static>> {
    REGISTRY.try_lock()
}

/// The running session, if any (takes the registry lock briefly).
pub(crate) fn current_session() -> Option<Arc<Shared>> {
    let sig = SignalBlock::new();
    let s = lock_registry(&sig).session.clone();
    s
}

// ---------------------------------------------------------------------------------------------
// The session's shared state

/// The consumer thread of a process.
#[derive(Debug)]
pub(crate) struct ConsumerThread {
    /// The process that started it (a fork child's inherited handle is not its own).
    pub pid: u32,
    pub thread: platform::RawThread,
}

/// What the consumer asks of the session layer above it: `hushtrace ctl PID stop` and `ctl PID
/// start`. The session layer implements it and hands it down as a value ([`Shared::control`]),
/// so the consumer calls up only through what it was given, and the modules import downwards
/// only (no global hook: a fork child's consumer finds it in the `Shared` it inherited).
pub(crate) trait SessionControl: Send + Sync + std::fmt::Debug {
    /// Stops session `s` as `Session::stop` does, on the calling thread. It waits for the
    /// consumer thread to end: never call it there.
    fn stop(&self, s: &Arc<Shared>);
    /// Starts a session with `cfg` that the process keeps (no handle): it stops at exit or on
    /// the next `ctl PID stop`. It adds to the output directory of `cfg`.
    fn start(&self, cfg: Config) -> Result<(), Error>;
}

/// The parts of a session's state that need a lock (control paths only).
#[derive(Debug)]
pub(crate) struct Inner {
    /// Trace UUID of this process's trace (changes in a fork child).
    pub uuid: [u8; 16],
    /// Every buffer of this session in this process (attached, exited, pooled...).
    pub buffers: Vec<Arc<Buffer>>,
    /// This process's trace directory, once the consumer created it.
    pub trace_dir: PathBuf,
    /// The first I/O error of the session, reported by `stop()`.
    pub io_error: Option<String>,
    /// The statistics of the stop, for a second `stop()`.
    pub final_stats: Option<Stats>,
    /// The session root, resolved and opened once at start (see `tracedir.rs`).
    pub root: Dir,
    /// Where this process's ring files go (a private directory on tmpfs, else the trace
    /// directory); `None`: rings in anonymous memory (not crash-persistent).
    pub rings: Option<Dir>,
    /// Outcomes of the last snapshot requests: (request number, path or error).
    pub snapshot_results: Vec<(u64, Result<PathBuf, String>)>,
}

/// State shared by the session handle, the consumer and the fork handlers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub cfg: Config,
    /// Process id this state currently describes (changes in a fork child).
    pub pid: AtomicU32,
    pub clock_uuid: [u8; 16],
    pub next_instance: AtomicU64,
    /// Events written to disk.
    pub written: AtomicU64,
    /// Events lost outside any buffer count (no buffer, write errors, retired buffers).
    pub lost: AtomicU64,
    /// Set by a stop once every producer is quiescent: the consumer's last cycle.
    pub stop: AtomicBool,
    /// The consumer could not start (its error is in `io_error`): do not retry.
    pub consumer_failed: AtomicBool,
    pub consumer: SpinLock<Option<ConsumerThread>>,
    pub inner: SpinLock<Inner>,
    /// The session layer's stop and start, for the control answers of the consumer.
    pub control: &'static dyn SessionControl,
}

/// A lock the fork handlers take and release.
trait ForkLock {
    fn take(&self);
    /// # Safety
    /// The caller took the lock with [`ForkLock::take`].
    unsafe fn release(&self);
}

impl<T> ForkLock for SpinLock<T> {
    fn take(&self) {
        self.lock_forever();
    }
    unsafe fn release(&self) {
        // SAFETY: forwarded contract.
        unsafe { self.force_unlock() }
    }
}

impl Shared {
    pub(crate) fn new(cfg: Config, root: Dir, control: &'static dyn SessionControl) -> Shared {
        Shared {
            cfg,
            pid: AtomicU32::new(platform::getpid()),
            clock_uuid: boot_clock_uuid(),
            next_instance: AtomicU64::new(0),
            written: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            consumer_failed: AtomicBool::new(false),
            consumer: SpinLock::new(None),
            inner: SpinLock::new(Inner {
                uuid: platform::random_uuid(),
                buffers: Vec::new(),
                trace_dir: PathBuf::new(),
                io_error: None,
                final_stats: None,
                root,
                rings: None,
                snapshot_results: Vec::new(),
            }),
            control,
        }
    }

    /// Every lock of a session, in lock order. The fork handlers take and release exactly
    /// these: a lock added to `Shared` must be added here.
    fn locks(&self) -> [&dyn ForkLock; 2] {
        [&self.consumer, &self.inner]
    }

    /// Gives `ctx` a buffer (from the pool or new). The registry guard proves the caller holds
    /// the lock under which attachments happen (so a stop cannot detach meanwhile).
    pub(crate) fn attach(&self, _reg: &RegistryGuard<'_>, ctx: &ThreadCtx) {
        if !ctx.buffer.load(Ordering::Relaxed).is_null() || ctx.dead.load(Ordering::Relaxed) {
            return;
        }
        let mut inner = self.inner.lock();
        let pooled = inner
            .buffers
            .iter()
            .find(|b| {
                b.state
                    .transition(BufState::Pooled, BufState::Attached, Ordering::Acquire)
            })
            .cloned();
        let buf = match pooled {
            Some(b) => b,
            None => {
                let inst = self.next_instance.fetch_add(1, Ordering::Relaxed);
                let (size, n, mode, uuid) = (
                    self.cfg.subbuf_size,
                    self.cfg.num_subbufs,
                    self.cfg.mode,
                    inner.uuid,
                );
                // A ring file (crash-persistent) when the consumer made a ring directory;
                // anonymous memory otherwise, or if the file cannot be made.
                let in_file = inner
                    .rings
                    .as_mut()
                    .and_then(|d| crate::ringdir::new_ring(d, inst, size, n, mode, uuid));
                match in_file.or_else(|| Buffer::new(size, n, mode, inst, uuid)) {
                    Some(b) => {
                        let b = Arc::new(b);
                        inner.buffers.push(b.clone());
                        b
                    }
                    None => return,
                }
            }
        };
        drop(inner);
        // SAFETY: the buffer is not published to any thread yet (a pooled buffer's previous
        // thread exited; a new one is ours): the caller prepares it as its producer.
        let key = unsafe { ProducerKey::new(&buf) };
        key.set_ident(ctx.ident.get());
        if ctx.no_syscall.load(Ordering::Relaxed) {
            key.prefault();
        }
        // Release: the buffer's initialization happens-before the owner's Acquire load.
        ctx.buffer
            .store(Arc::as_ptr(&buf) as *mut Buffer, Ordering::Release);
    }

    /// Events lost in buffers plus outside them. Buffers whose thread may still write to them
    /// (abandoned after a fork, leaked after a stop's grace period) are not read.
    pub(crate) fn total_lost(&self) -> u64 {
        let in_buffers: u64 = self
            .inner
            .lock()
            .buffers
            .iter()
            .filter(|b| {
                !matches!(
                    b.state.load(Ordering::Acquire),
                    BufState::Abandoned | BufState::Leaked
                )
            })
            .map(|b| b.lost())
            .sum();
        in_buffers + self.lost.load(Ordering::Relaxed) + LOST_OUTSIDE_RINGS.load(Ordering::Relaxed)
    }

    /// Records the session's first I/O error.
    pub(crate) fn note_error(&self, e: impl std::fmt::Display) {
        let mut inner = self.inner.lock();
        if inner.io_error.is_none() {
            inner.io_error = Some(e.to_string());
        }
    }
}

/// The clock UUID: the kernel boot id, so every process of a session (and every session of
/// this boot) shares one clock and readers can merge them.
pub(crate) fn boot_clock_uuid() -> [u8; 16] {
    platform::boot_id()
        .and_then(|s| hushtrace_ctf::metadata::parse_uuid(&s))
        .unwrap_or([0x68; 16])
}

// ---------------------------------------------------------------------------------------------
// The process name

/// The name [`set_process_name`] gave this process's trace (a leaked `String`), or null: the
/// kernel's name (`/proc/self/comm`). A pointer, not a lock: a fork child reads it in its
/// consumer whatever another thread of the parent was doing at the fork.
static PROCESS_NAME: std::sync::atomic::AtomicPtr<String> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Names this process in its trace (the metadata's `procname`, which converters show as the
/// process's name) instead of the kernel's name. Each call leaks the previous name (a few
/// bytes; a process is renamed a handful of times).
pub fn set_process_name(name: &str) {
    let p = Box::into_raw(Box::new(name.to_string()));
    PROCESS_NAME.store(p, Ordering::Release);
}

/// The process name for the trace: [`set_process_name`]'s, else the kernel's.
pub(crate) fn process_name() -> String {
    let p = PROCESS_NAME.load(Ordering::Acquire);
    if p.is_null() {
        return platform::process_name();
    }
    // SAFETY: a `String` leaked by `set_process_name`, never freed.
    unsafe { (*p).clone() }
}

// ---------------------------------------------------------------------------------------------
// Process-wide flags and counters (lock-free)

/// Whether a session is running in this process (a hint for cold paths).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether the running session is in overwrite mode (read without a lock by `snapshot()`).
static OVERWRITE: AtomicBool = AtomicBool::new(false);
/// The consumer's wake-up word (a futex): bumped by every wake-up, so a wake-up that comes
/// while the consumer is busy makes its next wait return at once.
static WAKE: AtomicU32 = AtomicU32::new(0);
/// Whether this process has a consumer thread.
static CONSUMER_ALIVE: AtomicBool = AtomicBool::new(false);
/// Events lost by tracepoints outside any ring (no buffer, registration impossible) during the
/// running session of this process. Reset at session start and in a fork child.
static LOST_OUTSIDE_RINGS: AtomicU64 = AtomicU64::new(0);
/// Buffers of exited threads not yet drained and recycled by the consumer.
static EXITED_PENDING: AtomicUsize = AtomicUsize::new(0);
/// Where this process starts looking for a free `<pid>.<n>` trace directory name: past the
/// ones its earlier sessions used (reset in a fork child, whose pid is new).
static NEXT_SUFFIX: AtomicU64 = AtomicU64::new(0);

/// The first trace directory suffix to try.
pub(crate) fn next_suffix() -> u64 {
    NEXT_SUFFIX.load(Ordering::Relaxed)
}

/// Records the next trace directory suffix to try.
pub(crate) fn set_next_suffix(n: u64) {
    NEXT_SUFFIX.store(n, Ordering::Relaxed);
}

/// Snapshots requested by [`crate::snapshot`] (a counter: request `n` is the `n`-th) and
/// taken by the consumer. Raising a request is one atomic add: no system call.
static SNAPSHOTS_REQUESTED: AtomicU64 = AtomicU64::new(0);
static SNAPSHOTS_TAKEN: AtomicU64 = AtomicU64::new(0);

/// Raises a snapshot request; returns its number (from 1).
pub(crate) fn request_snapshot() -> u64 {
    SNAPSHOTS_REQUESTED.fetch_add(1, Ordering::AcqRel) + 1
}

/// Consumer: the requests not yet taken (`taken + 1 ..= requested`).
pub(crate) fn pending_snapshots() -> (u64, u64) {
    (
        SNAPSHOTS_TAKEN.load(Ordering::Acquire),
        SNAPSHOTS_REQUESTED.load(Ordering::Acquire),
    )
}

/// Consumer: requests up to `n` are done (their outcome is in `Inner::snapshot_results`).
pub(crate) fn snapshots_taken(n: u64) {
    SNAPSHOTS_TAKEN.store(n, Ordering::Release);
}

/// How many snapshot requests the consumer has answered.
pub(crate) fn snapshots_done() -> u64 {
    SNAPSHOTS_TAKEN.load(Ordering::Acquire)
}

/// Stops in progress (a process exit waits for them, so the trace is complete).
static STOPPING: AtomicUsize = AtomicUsize::new(0);
/// The no-syscall policy: 0 = not loaded yet (acts as `Zero`), else `Policy as u8 + 1`.
static POLICY: AtomicU8 = AtomicU8::new(0);

pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Whether the running session is in overwrite mode (no lock, no system call).
pub(crate) fn overwrite_mode() -> bool {
    OVERWRITE.load(Ordering::Relaxed)
}

/// Publishes `s` as the running session. Caller holds the registry lock.
pub(crate) fn install_session(reg: &mut RegistryGuard<'_>, s: Arc<Shared>) {
    OVERWRITE.store(
        s.cfg.mode == crate::ring::Mode::Overwrite,
        Ordering::Relaxed,
    );
    LOST_OUTSIDE_RINGS.store(0, Ordering::Relaxed);
    EXITED_PENDING.store(0, Ordering::Relaxed);
    reg.session = Some(s);
    ACTIVE.store(true, Ordering::Release);
}

/// Removes the running session. Caller holds the registry lock.
pub(crate) fn remove_session(reg: &mut RegistryGuard<'_>) -> Option<Arc<Shared>> {
    ACTIVE.store(false, Ordering::Release);
    reg.session.take()
}

/// Marks a stop in progress until the returned guard drops.
pub(crate) fn stopping() -> StopInProgress {
    STOPPING.fetch_add(1, Ordering::AcqRel);
    StopInProgress(())
}

/// A stop in progress (see [`stopping`]).
#[derive(Debug)]
pub(crate) struct StopInProgress(());

impl Drop for StopInProgress {
    fn drop(&mut self) {
        STOPPING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether some thread is inside a stop.
pub(crate) fn stop_in_progress() -> bool {
    STOPPING.load(Ordering::Acquire) != 0
}

/// How many threads are inside a stop.
pub(crate) fn stops_in_progress() -> usize {
    STOPPING.load(Ordering::Acquire)
}

/// Adds to the session's lost count. Lock-free: tracepoints call it, possibly from a signal
/// handler that interrupted the registry lock's holder (cold paths only).
pub(crate) fn count_lost(n: u64) {
    LOST_OUTSIDE_RINGS.fetch_add(n, Ordering::Relaxed);
}

/// A thread exited with a buffer the consumer must drain.
pub(crate) fn exited_buffer_pending() {
    EXITED_PENDING.fetch_add(1, Ordering::Relaxed);
}

/// The consumer drained and recycled an exited thread's buffer.
pub(crate) fn exited_buffer_done() {
    let _ = EXITED_PENDING.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
}

/// Buffers of exited threads not yet drained.
pub(crate) fn exited_pending() -> usize {
    EXITED_PENDING.load(Ordering::Relaxed)
}

/// Whether this process has a running consumer thread.
pub(crate) fn consumer_alive() -> bool {
    CONSUMER_ALIVE.load(Ordering::Acquire)
}

/// Records that this process has a consumer thread.
pub(crate) fn set_consumer_alive() {
    CONSUMER_ALIVE.store(true, Ordering::Release);
}

/// The consumer thread ended.
pub(crate) fn clear_consumer() {
    CONSUMER_ALIVE.store(false, Ordering::Release);
}

/// Wakes this process's consumer if it has one (a system call: threads that allow them
/// only); false when it has none (the child of a fork: the caller starts one). No lock, no
/// allocation.
pub(crate) fn wake_consumer() -> bool {
    if !consumer_alive() {
        return false;
    }
    unpark_consumer();
    true
}

/// Wakes the consumer (a system call: threads that allow them only). No lock, no allocation.
pub(crate) fn unpark_consumer() {
    WAKE.fetch_add(1, Ordering::Release);
    platform::futex_wake(&WAKE);
}

/// The consumer's wake-up token: read it before a pass over the buffers, then
/// [`wait_for_wakeup`] with it.
pub(crate) fn wakeup_token() -> u32 {
    WAKE.load(Ordering::Acquire)
}

/// Consumer: sleeps up to `timeout`, or until a wake-up after `token` was taken.
pub(crate) fn wait_for_wakeup(token: u32, timeout: Duration) {
    platform::futex_wait(&WAKE, token, timeout);
}

/// The policy in force (a relaxed load; no system call).
pub(crate) fn policy() -> Policy {
    match POLICY.load(Ordering::Relaxed) {
        0 => Policy::Zero,
        v => Policy::from_u8(v - 1),
    }
}

/// Whether a policy was loaded yet.
pub(crate) fn policy_loaded() -> bool {
    POLICY.load(Ordering::Relaxed) != 0
}

pub(crate) fn set_policy(p: Policy) {
    POLICY.store(p as u8 + 1, Ordering::Relaxed);
}

// ---------------------------------------------------------------------------------------------
// Fork

/// Proof that [`fork_prepare`] took every tracer lock on this thread.
#[derive(Debug)]
pub(crate) struct ForkLocked(());

/// `pthread_atfork` prepare: takes every tracer lock, in lock order, so no lock is inherited
/// held by a thread that will not exist in the child.
pub(crate) fn fork_prepare() -> ForkLocked {
    REGISTRY.lock_forever();
    // SAFETY: we hold the registry lock (just taken).
    if let Some(s) = unsafe { REGISTRY.get_unchecked() }.session.as_ref() {
        for l in s.locks() {
            l.take();
        }
    }
    // Last: the callsite registration lock of hushtrace-core (registrations and globs).
    hushtrace_core::lock_for_fork();
    ForkLocked(())
}

/// Re-creates the proof that [`fork_prepare`] forgot (`pthread_atfork` handlers cannot pass
/// values from prepare to parent/child).
///
/// # Safety
/// Only in a `pthread_atfork` parent or child handler, after `fork_prepare` ran on this thread
/// and before `fork_release`.
pub(crate) unsafe fn fork_locked_unchecked() -> ForkLocked {
    ForkLocked(())
}

/// The registry, while the fork handlers own every lock.
fn forked_registry(_locked: &mut ForkLocked) -> &mut Registry {
    // SAFETY: `ForkLocked` proves this thread holds the registry lock (taken by `fork_prepare`
    // and not yet released); borrowing the proof mutably makes this the only reference.
    unsafe { REGISTRY.get_unchecked() }
}

/// Releases what [`fork_prepare`] took (parent and child handlers).
pub(crate) fn fork_release(mut locked: ForkLocked) {
    // SAFETY: `fork_prepare` took it on this thread (`ForkLocked`).
    unsafe { hushtrace_core::unlock_after_fork() };
    if let Some(s) = forked_registry(&mut locked).session.as_ref() {
        for l in s.locks().into_iter().rev() {
            // SAFETY: `fork_prepare` took each of these on this thread (`ForkLocked`).
            unsafe { l.release() };
        }
    }
    // SAFETY: taken by `fork_prepare` (`ForkLocked`).
    unsafe { REGISTRY.force_unlock() };
}

/// The fork child's reset of all tracer state, on the child's only thread (`me` is its context,
/// if registered). Async-signal-safe: stores and `getpid`/`gettid` only; no allocation or free
/// (inherited handles are leaked). O(threads + num_subbufs).
pub(crate) fn reset_in_child(locked: &mut ForkLocked, me: Option<&ThreadCtx>, uuid: [u8; 16]) {
    let reg = forked_registry(locked);
    for t in reg.threads.iter() {
        if !me.is_some_and(|m| std::ptr::eq(&**t, m)) {
            t.dead.store(true, Ordering::Relaxed);
            t.buffer.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
    }
    if let Some(c) = me {
        c.refresh_ids_after_fork();
    }
    LOST_OUTSIDE_RINGS.store(0, Ordering::Relaxed);
    EXITED_PENDING.store(0, Ordering::Relaxed);
    NEXT_SUFFIX.store(0, Ordering::Relaxed);
    STOPPING.store(0, Ordering::Relaxed);
    SNAPSHOTS_REQUESTED.store(0, Ordering::Relaxed);
    SNAPSHOTS_TAKEN.store(0, Ordering::Relaxed);
    CONSUMER_ALIVE.store(false, Ordering::Relaxed);
    let Some(s) = reg.session.as_ref() else {
        return;
    };
    let mine = me.map_or(std::ptr::null_mut(), |c| c.buffer.load(Ordering::Relaxed));
    s.pid.store(platform::getpid(), Ordering::Relaxed);
    s.written.store(0, Ordering::Relaxed);
    s.lost.store(0, Ordering::Relaxed);
    // SAFETY: `ForkLocked` proves the prepare handler took these locks on this thread, the
    // only one in the child.
    let (consumer, inner) = unsafe { (s.consumer.get_unchecked(), s.inner.get_unchecked()) };
    inner.uuid = uuid;
    // The consumer handle names a thread of the parent: dropped without joining (a plain
    // pthread_t, no destructor, no free).
    *consumer = None;
    for b in inner.buffers.iter() {
        if !std::ptr::eq(Arc::as_ptr(b), mine) {
            b.state.store(BufState::Abandoned, Ordering::Relaxed);
            b.forget_mapping_after_fork();
        }
    }
    // The types mirror is a MADV_DONTFORK mapping the child did not inherit.
    hushtrace_core::mirror::forget_types_mirror();
    // The parent's ring directory is the parent's: the child's consumer makes its own.
    if let Some(d) = inner.rings.take() {
        std::mem::forget(d); // no close, no free in the fork child handler
    }
    if let (Some(c), false) = (me, mine.is_null()) {
        // SAFETY: our attached buffer is alive (in the session's list) and this thread is its
        // owner (the producer key); the reset only stores.
        unsafe { ProducerKey::new(&*mine) }.reset_after_fork(uuid, c.ident.get());
    }
}
