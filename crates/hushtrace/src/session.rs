//! Sessions: configuration, start and stop, statistics, and the process-wide session state.

use crate::consumer::Consumer;
use crate::context::{ThreadCtx, REGISTRY};
use crate::lock::SpinLock;
use crate::platform;
use crate::ring::{self, Buffer, Mode};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

/// Default sub-buffer (packet) size: 512 KiB.
pub const DEFAULT_SUBBUF_SIZE: usize = 512 * 1024;
/// Default number of sub-buffers per thread.
pub const DEFAULT_NUM_SUBBUFS: usize = 8;
/// Default consumer read timer.
pub const DEFAULT_READ_TIMER: Duration = Duration::from_millis(10);
/// Smallest accepted sub-buffer size.
pub const MIN_SUBBUF_SIZE: usize = 4096;

/// Errors of the tracer's control API. Tracepoints never fail: they count what they drop.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is invalid. `var` names the environment variable it came from.
    Config {
        /// The environment variable, if the value came from one.
        var: Option<&'static str>,
        /// The offending value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// The output directory or a trace file could not be created or written.
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A session is already running in this process.
    AlreadyRunning,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config {
                var: Some(var),
                value,
                reason,
            } => write!(f, "invalid {var}={value:?}: {reason}"),
            Error::Config {
                var: None,
                value,
                reason,
            } => write!(f, "invalid value {value:?}: {reason}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::AlreadyRunning => write!(f, "a hushtrace session is already running"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What a session recorded in this process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events written to the trace.
    pub events_written: u64,
    /// Events lost: dropped on a full buffer (discard mode), overwritten (overwrite mode),
    /// dropped by a nested tracepoint at a packet boundary, or lost to a write error.
    pub events_discarded: u64,
    /// This process's trace directory (`<output_dir>/<pid>`).
    pub trace_dir: PathBuf,
}

/// Settings of a session.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub output_dir: PathBuf,
    pub mode: Mode,
    pub subbuf_size: usize,
    pub num_subbufs: usize,
    pub read_timer: Duration,
}

/// Builds a [`Session`].
///
/// ```no_run
/// use std::time::Duration;
/// let session = hushtrace::Session::builder()
///     .output_dir("/tmp/my-trace")
///     .mode(hushtrace::Mode::Overwrite)
///     .subbuf_size(64 * 1024)
///     .num_subbufs(4)
///     .read_timer(Duration::from_millis(5))
///     .start()?;
/// hushtrace::event!("app", "hello", answer = 42u32);
/// let stats = session.stop()?;
/// println!("{} events", stats.events_written);
/// # Ok::<(), hushtrace::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SessionBuilder {
    cfg: Config,
}

impl SessionBuilder {
    /// Directory of the session; each process writes `<dir>/<pid>/`. Default `hushtrace-trace`.
    pub fn output_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cfg.output_dir = dir.into();
        self
    }
    /// Discard (default) or overwrite (flight recorder).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.cfg.mode = mode;
        self
    }
    /// Bytes per sub-buffer (one packet), at least 4096. Default 512 KiB.
    pub fn subbuf_size(mut self, bytes: usize) -> Self {
        self.cfg.subbuf_size = bytes;
        self
    }
    /// Sub-buffers per thread, at least 2. Default 8.
    pub fn num_subbufs(mut self, n: usize) -> Self {
        self.cfg.num_subbufs = n;
        self
    }
    /// How often the consumer looks for full sub-buffers. Default 10 ms.
    pub fn read_timer(mut self, every: Duration) -> Self {
        self.cfg.read_timer = every;
        self
    }

    /// Starts the session: calibrates the clock (about 20 ms, once per process), creates the
    /// output directory (0700), gives every known thread a buffer and starts the consumer.
    pub fn start(self) -> Result<Session, Error> {
        start(self.cfg)
    }
}

/// A running trace session. Dropping it stops it and flushes everything.
#[derive(Debug)]
pub struct Session {
    shared: Option<Arc<Shared>>,
}

impl Session {
    /// A builder with the default settings.
    pub fn builder() -> SessionBuilder {
        SessionBuilder {
            cfg: Config {
                output_dir: PathBuf::from("hushtrace-trace"),
                mode: Mode::Discard,
                subbuf_size: DEFAULT_SUBBUF_SIZE,
                num_subbufs: DEFAULT_NUM_SUBBUFS,
                read_timer: DEFAULT_READ_TIMER,
            },
        }
    }

    /// This process's trace directory.
    pub fn trace_dir(&self) -> PathBuf {
        self.shared
            .as_ref()
            .map(|s| s.trace_dir.lock().clone())
            .unwrap_or_default()
    }

    /// Stops the session: detaches every buffer, waits until no thread is inside a tracepoint,
    /// writes all packets (full and partial), the metadata and the per-process statistics.
    pub fn stop(mut self) -> Result<Stats, Error> {
        let s = self.shared.take().expect("session present until stop");
        stop_shared(&s)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(s) = self.shared.take() {
            let _ = stop_shared(&s);
        }
    }
}

/// The consumer thread of a process.
#[derive(Debug)]
pub(crate) struct ConsumerThread {
    pub pid: u32,
    pub join: JoinHandle<()>,
}

/// State shared by the session handle, the consumer and the fork handlers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub cfg: Config,
    /// Process id this state currently describes (changes in a fork child).
    pub pid: AtomicU32,
    /// Trace UUID of this process's trace (changes in a fork child).
    pub uuid: SpinLock<[u8; 16]>,
    pub clock_uuid: [u8; 16],
    /// Every buffer of this session in this process (attached, exited, pooled...).
    pub buffers: SpinLock<Vec<Arc<Buffer>>>,
    pub next_instance: AtomicU64,
    /// Events written to disk.
    pub written: AtomicU64,
    /// Events lost outside any buffer count (no buffer, write errors, retired buffers).
    pub lost: AtomicU64,
    pub stop: AtomicBool,
    pub consumer: SpinLock<Option<ConsumerThread>>,
    pub trace_dir: SpinLock<PathBuf>,
    pub io_error: SpinLock<Option<String>>,
    pub final_stats: SpinLock<Option<Stats>>,
    consumer_failed: AtomicBool,
}

/// Whether a session is running in this process (a hint for cold paths).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The consumer thread's handle for wake-ups (leaked box; null when there is none).
static WAKE: AtomicPtr<Thread> = AtomicPtr::new(std::ptr::null_mut());
/// Whether this process has a consumer thread.
static CONSUMER_ALIVE: AtomicBool = AtomicBool::new(false);

pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Events lost by tracepoints outside any ring (no buffer, registration impossible) during the
/// running session of this process. Reset at session start and in a fork child.
static LOST_OUTSIDE_RINGS: AtomicU64 = AtomicU64::new(0);

/// Buffers of exited threads not yet drained and recycled by the consumer.
pub(crate) static EXITED_PENDING: AtomicUsize = AtomicUsize::new(0);
/// Above this many undrained buffers of exited threads, registering a new thread waits briefly
/// for the consumer, which bounds memory and open files when threads come and go faster than
/// the consumer runs.
const EXITED_HIGH_WATER: usize = 64;

/// Called before a new thread registers (system calls allowed): if the consumer is behind on
/// exited threads, wake it and wait up to 200 ms for it to catch up.
pub(crate) fn throttle_registration() {
    if !active() || EXITED_PENDING.load(Ordering::Relaxed) <= EXITED_HIGH_WATER {
        return;
    }
    wake_consumer();
    let deadline = Instant::now() + Duration::from_millis(200);
    while EXITED_PENDING.load(Ordering::Relaxed) > EXITED_HIGH_WATER / 2
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Adds to the session's lost count. Lock-free: tracepoints call it, possibly from a signal
/// handler that interrupted the registry lock's holder (cold paths only).
pub(crate) fn count_lost(n: u64) {
    LOST_OUTSIDE_RINGS.fetch_add(n, Ordering::Relaxed);
}

/// Wakes the consumer after a packet hand-over (threads that allow system calls only). In the
/// child of a fork, where the consumer did not survive, starts a new one first.
pub(crate) fn wake_consumer() {
    if !CONSUMER_ALIVE.load(Ordering::Acquire) {
        ensure_consumer();
        return;
    }
    let t = WAKE.load(Ordering::Acquire);
    if !t.is_null() {
        // SAFETY: WAKE points to a leaked `Thread` that is never freed.
        unsafe { (*t).unpark() };
    }
}

/// Starts the consumer if this process has a session but no consumer (the child of a fork).
#[cold]
pub(crate) fn ensure_consumer() {
    if CONSUMER_ALIVE.load(Ordering::Acquire) {
        return;
    }
    let _sig = platform::SignalBlock::new();
    let s = match REGISTRY.lock().session.clone() {
        Some(s) => s,
        None => return,
    };
    if s.consumer_failed.load(Ordering::Relaxed) {
        return;
    }
    let mut slot = s.consumer.lock();
    if CONSUMER_ALIVE.load(Ordering::Acquire) {
        return;
    }
    match Consumer::create(s.clone()) {
        Ok(c) => *slot = Some(spawn_consumer(c)),
        Err(e) => {
            *s.io_error.lock() = Some(e.to_string());
            s.consumer_failed.store(true, Ordering::Relaxed);
        }
    }
}

fn spawn_consumer(c: Consumer) -> ConsumerThread {
    let join = std::thread::Builder::new()
        .name(crate::consumer::CONSUMER_THREAD_NAME.into())
        .spawn(move || c.run())
        .expect("spawn hushtrace consumer thread");
    let t = Box::into_raw(Box::new(join.thread().clone()));
    WAKE.store(t, Ordering::Release);
    CONSUMER_ALIVE.store(true, Ordering::Release);
    ConsumerThread {
        pid: platform::getpid(),
        join,
    }
}

impl Shared {
    /// Gives `ctx` a buffer (from the pool or new). Caller holds the registry lock.
    pub(crate) fn attach(&self, ctx: &Arc<ThreadCtx>) {
        if !ctx.buffer.load(Ordering::Relaxed).is_null() || ctx.dead.load(Ordering::Relaxed) {
            return;
        }
        let mut bufs = self.buffers.lock();
        let pooled = bufs.iter().find(|b| {
            b.state
                .compare_exchange(
                    ring::state::POOLED,
                    ring::state::ATTACHED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
        });
        let buf = match pooled {
            Some(b) => b.clone(),
            None => {
                let uuid = *self.uuid.lock();
                let inst = self.next_instance.fetch_add(1, Ordering::Relaxed);
                match Buffer::new(
                    self.cfg.subbuf_size,
                    self.cfg.num_subbufs,
                    self.cfg.mode,
                    inst,
                    uuid,
                ) {
                    Some(b) => {
                        let b = Arc::new(b);
                        bufs.push(b.clone());
                        b
                    }
                    None => return,
                }
            }
        };
        drop(bufs);
        buf.set_ident(ctx.ident.get());
        if ctx.no_syscall.load(Ordering::Relaxed) {
            buf.prefault();
        }
        // Release: the buffer's initialization happens-before the owner's Acquire load.
        ctx.buffer
            .store(Arc::as_ptr(&buf) as *mut Buffer, Ordering::Release);
    }

    /// Events lost in buffers plus outside them.
    pub(crate) fn total_lost(&self) -> u64 {
        let in_buffers: u64 = self
            .buffers
            .lock()
            .iter()
            .filter(|b| b.state.load(Ordering::Acquire) != ring::state::ABANDONED)
            .map(|b| b.lost())
            .sum();
        in_buffers + self.lost.load(Ordering::Relaxed) + LOST_OUTSIDE_RINGS.load(Ordering::Relaxed)
    }
}

/// Checks a configuration. `raw` gives, for values read from the environment, the variable
/// and the text it held, so errors quote what the user wrote.
fn validate(cfg: &Config, raw: &[(&'static str, String)]) -> Result<(), Error> {
    let var = |v: &'static str| raw.iter().find(|(n, _)| *n == v).map(|(n, _)| *n);
    let value = |v: &'static str, parsed: usize| {
        raw.iter()
            .find(|(n, _)| *n == v)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| parsed.to_string())
    };
    if cfg.subbuf_size < MIN_SUBBUF_SIZE || cfg.subbuf_size > (1 << 30) {
        return Err(Error::Config {
            var: var("HUSHTRACE_SUBBUF_SIZE"),
            value: value("HUSHTRACE_SUBBUF_SIZE", cfg.subbuf_size),
            reason: format!("sub-buffer size must be between {MIN_SUBBUF_SIZE} and 1 GiB"),
        });
    }
    if cfg.num_subbufs < 2 || cfg.num_subbufs > 1 << 16 {
        return Err(Error::Config {
            var: var("HUSHTRACE_NUM_SUBBUFS"),
            value: value("HUSHTRACE_NUM_SUBBUFS", cfg.num_subbufs),
            reason: "the number of sub-buffers must be between 2 and 65536".into(),
        });
    }
    if cfg.read_timer.is_zero() {
        return Err(Error::Config {
            var: None,
            value: "0".into(),
            reason: "the read timer must be positive".into(),
        });
    }
    Ok(())
}

static INSTALL: Once = Once::new();

extern "C" fn at_exit() {
    let s = REGISTRY.lock().session.clone();
    if let Some(s) = s {
        let _ = stop_shared(&s);
    }
}

pub(crate) fn start_with(cfg: Config, raw: &[(&'static str, String)]) -> Result<Session, Error> {
    validate(&cfg, raw)?;
    crate::nosyscall::load_policy()?;
    INSTALL.call_once(|| {
        hushtrace_core::assign_ids();
        crate::fork::install();
        platform::atexit(at_exit);
    });
    if REGISTRY.lock().session.is_some() {
        return Err(Error::AlreadyRunning);
    }
    crate::clock::calibrate();
    let shared = Arc::new(Shared {
        cfg,
        pid: AtomicU32::new(platform::getpid()),
        uuid: SpinLock::new(platform::random_uuid()),
        clock_uuid: boot_clock_uuid(),
        buffers: SpinLock::new(Vec::new()),
        next_instance: AtomicU64::new(0),
        written: AtomicU64::new(0),
        lost: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        consumer: SpinLock::new(None),
        trace_dir: SpinLock::new(PathBuf::new()),
        io_error: SpinLock::new(None),
        final_stats: SpinLock::new(None),
        consumer_failed: AtomicBool::new(false),
    });
    let consumer = Consumer::create(shared.clone())?;
    {
        let _sig = platform::SignalBlock::new();
        let mut reg = REGISTRY.lock();
        if reg.session.is_some() {
            return Err(Error::AlreadyRunning);
        }
        reg.threads.retain(|t| !t.dead.load(Ordering::Relaxed));
        for t in reg.threads.clone() {
            shared.attach(&t);
        }
        LOST_OUTSIDE_RINGS.store(0, Ordering::Relaxed);
        EXITED_PENDING.store(0, Ordering::Relaxed);
        reg.session = Some(shared.clone());
        *shared.consumer.lock() = Some(spawn_consumer(consumer));
        ACTIVE.store(true, Ordering::Release);
    }
    Ok(Session {
        shared: Some(shared),
    })
}

pub(crate) fn start(cfg: Config) -> Result<Session, Error> {
    start_with(cfg, &[])
}

/// The clock UUID: the kernel boot id, so every process of a session (and every session of
/// this boot) shares one clock and readers can merge them.
fn boot_clock_uuid() -> [u8; 16] {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .and_then(|s| hushtrace_ctf::metadata::parse_uuid(s.trim()))
        .unwrap_or([0x68; 16])
}

/// Waits until none of the threads whose buffers were detached is inside a tracepoint. A
/// thread still inside one after a 10 s grace period (stopped by a debugger or SIGSTOP, or
/// starved) keeps its buffer for good: it is marked LEAKED, never read and never unmapped, so
/// the thread cannot write into freed memory; its events are lost.
fn quiesce(detached: &[(Arc<ThreadCtx>, *const Buffer)]) {
    if !platform::membarrier_global() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for (t, b) in detached {
        while t.depth() != 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        if t.depth() != 0 {
            // SAFETY: the buffer is alive in the session's list (not cleared yet).
            unsafe { &**b }
                .state
                .store(ring::state::LEAKED, Ordering::Release);
        }
    }
}

pub(crate) fn stop_shared(s: &Arc<Shared>) -> Result<Stats, Error> {
    let _sig = platform::SignalBlock::new();
    let detached = {
        let mut reg = REGISTRY.lock();
        match &reg.session {
            Some(cur) if Arc::ptr_eq(cur, s) => {}
            _ => {
                drop(reg);
                return s.final_stats.lock().clone().ok_or(Error::Config {
                    var: None,
                    value: "stop".into(),
                    reason: "this session was never started in this process".into(),
                });
            }
        }
        reg.session = None;
        ACTIVE.store(false, Ordering::Release);
        // Threads that did not survive a fork are skipped: their buffers are abandoned.
        let mut detached = Vec::new();
        for t in reg
            .threads
            .iter()
            .filter(|t| !t.dead.load(Ordering::Relaxed))
        {
            let b = t.buffer.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !b.is_null() {
                // SAFETY: attached buffers are alive in `s.buffers`.
                let _ = unsafe { &*b }.state.compare_exchange(
                    ring::state::ATTACHED,
                    ring::state::DETACHED,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
                detached.push((t.clone(), b as *const Buffer));
            }
        }
        detached
    };
    quiesce(&detached);
    s.stop.store(true, Ordering::Release);
    let handle = s.consumer.lock().take();
    let mine = platform::getpid();
    match handle {
        Some(h) if h.pid == mine => {
            h.join.thread().unpark();
            let _ = h.join.join();
        }
        other => {
            std::mem::forget(other);
            Consumer::create(s.clone())?.run();
        }
    }
    CONSUMER_ALIVE.store(false, Ordering::Release);
    WAKE.store(std::ptr::null_mut(), Ordering::Release);
    let stats = Stats {
        events_written: s.written.load(Ordering::Relaxed),
        events_discarded: s.total_lost(),
        trace_dir: s.trace_dir.lock().clone(),
    };
    for b in s.buffers.lock().drain(..) {
        if b.state.load(Ordering::Acquire) == ring::state::LEAKED {
            std::mem::forget(b); // its thread may still write to it
        }
    }
    *s.final_stats.lock() = Some(stats.clone());
    if let Some(e) = s.io_error.lock().clone() {
        return Err(Error::Io {
            path: stats.trace_dir.clone(),
            source: std::io::Error::other(e),
        });
    }
    Ok(stats)
}

/// Fork-child reset of the session state (see `fork.rs`). Async-signal-safe: stores and
/// `getpid`/`getrandom` only; no allocation or free (inherited handles are leaked).
pub(crate) fn reset_in_child(s: &Shared, me: Option<&ThreadCtx>, uuid: [u8; 16]) {
    s.pid.store(platform::getpid(), Ordering::Relaxed);
    // SAFETY: the fork prepare handler took these locks and the child handler owns them.
    unsafe {
        *s.uuid.get_unchecked() = uuid;
        if let Some(h) = s.consumer.get_unchecked().take() {
            std::mem::forget(h);
        }
        let mine = me
            .map(|c| c.buffer.load(Ordering::Relaxed) as *const Buffer)
            .unwrap_or(std::ptr::null());
        for b in s.buffers.get_unchecked().iter() {
            if !std::ptr::eq(Arc::as_ptr(b), mine) {
                b.state.store(ring::state::ABANDONED, Ordering::Relaxed);
            }
        }
    }
    s.written.store(0, Ordering::Relaxed);
    s.lost.store(0, Ordering::Relaxed);
    LOST_OUTSIDE_RINGS.store(0, Ordering::Relaxed);
    EXITED_PENDING.store(0, Ordering::Relaxed);
    WAKE.store(std::ptr::null_mut(), Ordering::Relaxed);
    CONSUMER_ALIVE.store(false, Ordering::Relaxed);
}

/// Parses a size with an optional `k`/`K`/`m`/`M` suffix (powers of 1024).
fn parse_size(var: &'static str, v: &str) -> Result<usize, Error> {
    let t = v.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1024),
        Some('m' | 'M') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| Error::Config {
            var: Some(var),
            value: v.to_string(),
            reason: "expected a positive integer, optionally with a k or M suffix".into(),
        })
}

/// Starts a session configured by the environment, if `HUSHTRACE_OUTPUT=<dir>` is set:
/// `HUSHTRACE_MODE` (`discard`|`overwrite`), `HUSHTRACE_SUBBUF_SIZE` (bytes, `k`/`M` suffixes),
/// `HUSHTRACE_NUM_SUBBUFS`, `HUSHTRACE_READ_TIMER_MS`, and `HUSHTRACE_NO_SYSCALL_POLICY`.
/// A bad value is an error naming the variable and the value; the program can carry on
/// untraced.
///
/// ```
/// // Without HUSHTRACE_OUTPUT nothing starts.
/// std::env::remove_var("HUSHTRACE_OUTPUT");
/// assert!(hushtrace::start_from_env().unwrap().is_none());
/// ```
pub fn start_from_env() -> Result<Option<Session>, Error> {
    let dir = match std::env::var_os("HUSHTRACE_OUTPUT") {
        Some(d) if !d.is_empty() => d,
        _ => return Ok(None),
    };
    let mut b = Session::builder().output_dir(PathBuf::from(dir));
    let mut raw = Vec::new();
    if let Ok(m) = std::env::var("HUSHTRACE_MODE") {
        b = b.mode(match m.trim() {
            "discard" => Mode::Discard,
            "overwrite" => Mode::Overwrite,
            _ => {
                return Err(Error::Config {
                    var: Some("HUSHTRACE_MODE"),
                    value: m,
                    reason: "expected `discard` or `overwrite`".into(),
                })
            }
        });
    }
    if let Ok(v) = std::env::var("HUSHTRACE_SUBBUF_SIZE") {
        b = b.subbuf_size(parse_size("HUSHTRACE_SUBBUF_SIZE", &v)?);
        raw.push(("HUSHTRACE_SUBBUF_SIZE", v));
    }
    if let Ok(v) = std::env::var("HUSHTRACE_NUM_SUBBUFS") {
        b = b.num_subbufs(parse_size("HUSHTRACE_NUM_SUBBUFS", &v)?);
        raw.push(("HUSHTRACE_NUM_SUBBUFS", v));
    }
    if let Ok(v) = std::env::var("HUSHTRACE_READ_TIMER_MS") {
        let ms = parse_size("HUSHTRACE_READ_TIMER_MS", &v)?;
        if ms == 0 {
            return Err(Error::Config {
                var: Some("HUSHTRACE_READ_TIMER_MS"),
                value: v,
                reason: "the read timer must be at least 1 ms".into(),
            });
        }
        b = b.read_timer(Duration::from_millis(ms as u64));
    }
    start_with(b.cfg, &raw).map(Some)
}

/// Creates `dir` (and parents) with mode 0700; refuses a path that is a symlink or not a
/// directory.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    let io = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    let md = std::fs::symlink_metadata(dir).map_err(io)?;
    if !md.is_dir() {
        return Err(io(std::io::Error::other(
            "not a directory (symbolic links are not followed)",
        )));
    }
    Ok(())
}
