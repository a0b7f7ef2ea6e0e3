//! The public session API: build, start and stop a session; `start_from_env`.

use crate::config::{Config, Error, Raw, Stats};
use crate::consumer::{self, Consumer};
use crate::ctx::ThreadCtx;
use crate::platform::{self, SignalBlock};
use crate::ring::{BufState, Buffer, Mode};
use crate::state::{self, SessionControl, Shared};
use crate::tracedir::Dir;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

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
    /// Add to a directory that already holds a trace ([`SessionBuilder::append`]).
    append: bool,
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
    /// Bytes per sub-buffer (one packet), 4 KiB to 256 MiB. Default 512 KiB.
    pub fn subbuf_size(mut self, bytes: usize) -> Self {
        self.cfg.subbuf_size = bytes;
        self
    }
    /// Sub-buffers per thread, 2 to 4096. Default 8.
    pub fn num_subbufs(mut self, n: usize) -> Self {
        self.cfg.num_subbufs = n;
        self
    }
    /// How often the consumer looks for full sub-buffers, 1 ms to 60 s. Default 10 ms.
    pub fn read_timer(mut self, every: Duration) -> Self {
        self.cfg.read_timer = every;
        self
    }
    /// Also streams the session to an LTTng relay daemon (`lttng-relayd`) at
    /// `net://HOST[:CONTROL_PORT[:DATA_PORT]]` (ports default to 5342 and 5343), besides the
    /// local directory, which stays complete. Each process appears on the relay under
    /// `<host>/<session>/<trace dir name>/`; follow it live with
    /// `babeltrace2 --input-format=lttng-live net://HOST:5344/host/<host>/<session>`. If the
    /// relay cannot be reached, [`SessionBuilder::start`] fails with [`Error::Relay`]; a
    /// connection lost later is retried with backoff, and packets that could not be delivered
    /// are counted as discarded.
    ///
    /// ```
    /// let err = hushtrace::Session::builder().relay("http://x").validate().unwrap_err();
    /// assert!(err.to_string().contains("http://x"));
    /// ```
    pub fn relay(mut self, url: &str) -> Self {
        self.cfg.set_relay(url);
        self
    }
    /// Sends the event streams only to the relay, not to the local directory (which then
    /// holds the metadata and the statistics file only): the relay *instead of* the disk, for
    /// machines whose disk is slow, small or not to be written. Packets the relay could not
    /// get are lost (and counted). Needs [`SessionBuilder::relay`]; `HUSHTRACE_RELAY_ONLY=1`.
    ///
    /// ```
    /// let err = hushtrace::Session::builder().relay_only(true).validate().unwrap_err();
    /// assert!(err.to_string().contains("needs a relay"));
    /// assert!(hushtrace::Session::builder().relay("net://127.0.0.1").relay_only(true)
    ///     .validate().is_ok());
    /// ```
    pub fn relay_only(mut self, only: bool) -> Self {
        self.cfg.relay_only = only;
        self
    }
    /// Writes the stream files with `O_DIRECT` where the file system supports it (Linux): the
    /// device reads each packet from the ring itself, with no copy into the page cache, and
    /// every packet is padded with zeros to the block size (its `packet_size` covers the
    /// padding, its `content_size` the events). The consumer then waits for the disk, so the
    /// rings must hold more than the disk's worst stall (docs/BENCHMARKS.md §12). A file system
    /// without `O_DIRECT` (and macOS) writes through the page cache. Default: false (the page
    /// cache). Sessions started from the environment take it from `HUSHTRACE_DIRECT_IO`; a
    /// builder session, like every builder setting, only from here. The control status says
    /// `"direct_io":true|false`.
    ///
    /// ```
    /// let b = hushtrace::Session::builder()
    ///     .output_dir("/tmp/my-trace")
    ///     .subbuf_size(4 << 20)
    ///     .direct_io(true);
    /// assert!(b.validate().is_ok());
    /// ```
    pub fn direct_io(mut self, direct: bool) -> Self {
        self.cfg.direct_io = direct;
        self
    }
    /// How the consumer thread (and the relay sender it starts) is scheduled; see
    /// [`ConsumerSched`](crate::ConsumerSched). Default: as the thread that started the
    /// session. Sessions started from the environment take it from `HUSHTRACE_CONSUMER_SCHED`. The
    /// control status says `"consumer_sched":"fifo:10"` and, if the kernel refused it,
    /// `"consumer_sched_error"`.
    ///
    /// ```
    /// use hushtrace::ConsumerSched;
    /// let b = hushtrace::Session::builder()
    ///     .output_dir("/tmp/my-trace")
    ///     .consumer_sched(ConsumerSched::Fifo(1))
    ///     .consumer_cpus([0]);
    /// assert!(b.validate().is_ok());
    /// let bad = hushtrace::Session::builder().consumer_sched(ConsumerSched::Nice(20));
    /// assert!(bad.validate().unwrap_err().to_string().contains("-20 to 19"));
    /// ```
    pub fn consumer_sched(mut self, sched: crate::ConsumerSched) -> Self {
        self.cfg.consumer_sched = sched;
        self
    }
    /// The CPUs the consumer thread (and the relay sender) may run on: a housekeeping core,
    /// away from the cores of real-time threads. Default: those of the thread that started the
    /// session.
    /// Sessions started from the environment take it from `HUSHTRACE_CONSUMER_CPUS`. An empty
    /// list or a CPU above 1023 is refused by [`SessionBuilder::validate`]; a CPU that is not
    /// online is reported like a refused [`SessionBuilder::consumer_sched`].
    pub fn consumer_cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut cpus: Vec<usize> = cpus.into_iter().collect();
        cpus.sort_unstable();
        cpus.dedup();
        self.cfg.consumer_cpus = Some(cpus);
        self
    }
    /// The session's name on the relay. Default: the output directory's name.
    pub fn relay_session_name(mut self, name: impl Into<String>) -> Self {
        self.cfg.relay_session = Some(name.into());
        self
    }
    /// The host name the relay files the session under. Default: this machine's host name.
    pub fn relay_host_name(mut self, name: impl Into<String>) -> Self {
        self.cfg.relay_host = Some(name.into());
        self
    }
    /// An event of a thread that then goes idle is written out (to the stream files and the
    /// relay) within about this time, instead of waiting for its packet to fill: the consumer
    /// ships the complete events of a packet left open this long as a packet of their own.
    /// Discard mode only. Zero turns it off. Default: 1 s for sessions with a relay, off for
    /// local-only sessions unless set here or by `HUSHTRACE_FLUSH_MS` (crash recovery of a
    /// flushed stream is exact only outside rare full-ring races; see the README).
    pub fn flush_interval(mut self, every: Duration) -> Self {
        self.cfg.flush_interval = every;
        self.cfg.flush_explicit = true;
        self
    }

    /// Adds this process's trace to an output directory that already holds a trace of other
    /// processes (as `hushtrace record --append` does). Without it, [`SessionBuilder::start`]
    /// refuses such a directory, as `hushtrace record` does without `--force`/`--append`:
    /// `hushtrace report` would merge the old and the new processes into one trace. A
    /// directory this process (or the process it was forked from) wrote a session to before is
    /// always accepted: each session gets a new `<pid>.<n>` directory in it. Sessions started
    /// from the environment ([`crate::start_from_env`]) always add to their directory: every
    /// process of a recorded command writes its part there, and `hushtrace record` checks the
    /// directory once, before the command starts.
    ///
    /// ```no_run
    /// let first = hushtrace::Session::builder().output_dir("/tmp/t").start()?;
    /// first.stop()?;
    /// // Another program, later:
    /// let err = hushtrace::Session::builder().output_dir("/tmp/t").start().unwrap_err();
    /// assert!(err.to_string().contains("already holds a trace"));
    /// let s = hushtrace::Session::builder().output_dir("/tmp/t").append(true).start()?;
    /// # Ok::<(), hushtrace::Error>(())
    /// ```
    pub fn append(mut self, append: bool) -> Self {
        self.append = append;
        self
    }

    /// Checks the settings against the limits without starting anything: the same check
    /// [`SessionBuilder::start`] makes (`hushtrace record` uses it to refuse bad flags).
    ///
    /// ```
    /// let err = hushtrace::Session::builder().num_subbufs(65536).validate().unwrap_err();
    /// assert!(err.to_string().contains("4096"));
    /// ```
    pub fn validate(&self) -> Result<(), Error> {
        self.cfg.validate(&Raw::default())
    }

    /// Starts the session: calibrates the clock (about 20 ms, once per process), creates the
    /// output directory (mode 0700) and this process's trace directory, writes the metadata,
    /// starts the consumer thread and gives every registered thread a buffer.
    /// Refuses a directory that already holds a trace of other processes unless
    /// [`SessionBuilder::append`] is set.
    pub fn start(self) -> Result<Session, Error> {
        let existing = if self.append {
            Existing::Append
        } else {
            Existing::Refuse
        };
        start_with(self.cfg, &Raw::default(), existing)
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
            cfg: Config::default(),
            append: false,
        }
    }

    /// This process's trace directory.
    pub fn trace_dir(&self) -> PathBuf {
        self.shared
            .as_ref()
            .map(|s| s.inner.lock().trace_dir.clone())
            .unwrap_or_default()
    }

    /// The session's buffer mode (fixed for its life).
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("hushtrace-doc-mode-{}", std::process::id()));
    /// let s = hushtrace::Session::builder()
    ///     .output_dir(&dir)
    ///     .mode(hushtrace::Mode::Overwrite)
    ///     .start()?;
    /// assert_eq!(s.mode(), hushtrace::Mode::Overwrite);
    /// s.stop()?;
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), hushtrace::Error>(())
    /// ```
    pub fn mode(&self) -> Mode {
        self.shared
            .as_ref()
            .map_or(Config::default().mode, |s| s.cfg.mode)
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

static INSTALL: Once = Once::new();

/// Process exit (`exit()`, return from `main`): stops the session so the trace is complete. If
/// another thread is inside `stop()` right now, waits (up to 15 s: the stop's own bound) for it
/// to finish writing, rather than letting the process end under it.
extern "C" fn at_exit() {
    if let Some(s) = state::current_session() {
        let _ = stop_shared(&s);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while state::stop_in_progress() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What a session start does with an output directory that already holds a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Existing {
    /// Refuses it (unless this process wrote there before).
    Refuse,
    /// Adds this process's trace to it.
    Append,
}

/// The process starting a session right now (its pid), or 0. Claimed before the start touches
/// the file system, so of two concurrent starts exactly one goes on and the other returns
/// [`Error::AlreadyRunning`] having created nothing (no directory, ring or socket). A pid
/// rather than a flag: the child of a fork taken while another thread of its parent was
/// starting inherits a claim that is not its own, and takes it over.
static STARTING: AtomicU32 = AtomicU32::new(0);

/// The claim on [`STARTING`], released when dropped.
#[derive(Debug)]
struct StartClaim(());

impl StartClaim {
    fn take() -> Result<StartClaim, Error> {
        let me = platform::getpid();
        let mut cur = STARTING.load(Ordering::Acquire);
        loop {
            if cur == me {
                return Err(Error::AlreadyRunning);
            }
            // 0, or the claim of the process this one was forked from.
            match STARTING.compare_exchange(cur, me, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(StartClaim(())),
                Err(now) => cur = now,
            }
        }
    }
}

impl Drop for StartClaim {
    fn drop(&mut self) {
        STARTING.store(0, Ordering::Release);
    }
}

/// Output directories this process (or the one it was forked from) started sessions in.
static USED_ROOTS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// The session layer's side of the consumer's control answers (`ctl PID stop`, `ctl PID
/// start`): handed to the consumer in every session's [`Shared`].
#[derive(Debug)]
struct Control;

impl SessionControl for Control {
    fn stop(&self, s: &Arc<Shared>) {
        let _ = stop_shared(s);
    }

    fn start(&self, cfg: Config) -> Result<(), Error> {
        // The process keeps the session (no handle): it stops at exit or by `ctl stop`. It
        // goes on in the directory the stopped session wrote.
        start_with(cfg, &Raw::default(), Existing::Append).map(|mut s| drop(s.shared.take()))
    }
}

fn start_with(mut cfg: Config, raw: &Raw, existing: Existing) -> Result<Session, Error> {
    if !platform::SUPPORTED {
        return Err(Error::Unsupported);
    }
    cfg.starter_sched = platform::thread_sched();
    cfg.validate(raw)?;
    check_memory(&cfg)?;
    crate::nosyscall::load_policy()?;
    INSTALL.call_once(|| {
        hushtrace_core::assign_ids();
        crate::fork::install();
        platform::atexit(at_exit);
    });
    // Decide who starts before touching the file system.
    let _claim = StartClaim::take()?;
    if state::current_session().is_some() {
        return Err(Error::AlreadyRunning);
    }
    let mut root = Dir::open_root(&cfg.output_dir).map_err(|source| Error::Io {
        path: cfg.output_dir.clone(),
        source,
    })?;
    // Only the holder of the start claim touches `USED_ROOTS`: `try_lock` fails only in the
    // child of a fork taken while a thread of the parent held it (then: not known as used).
    let used = |p: &std::path::Path| {
        USED_ROOTS
            .try_lock()
            .is_ok_and(|roots| roots.iter().any(|u| u == p))
    };
    if existing == Existing::Refuse && !used(root.path()) {
        refuse_existing_trace(&mut root)?;
    }
    crate::ringdir::clean_stale();
    for (pattern, on) in &cfg.globs {
        hushtrace_core::set_enabled(pattern, *on);
    }
    crate::clock::calibrate();
    let root_path = root.path().to_path_buf();
    let shared = Arc::new(Shared::new(cfg, root, &Control));
    let mut consumer = Consumer::create(shared.clone())?;
    consumer.connect()?;
    {
        let sig = SignalBlock::new();
        let mut reg = state::lock_registry(&sig);
        if reg.session.is_some() {
            return Err(Error::AlreadyRunning);
        }
        reg.threads.retain(|t| !t.dead.load(Ordering::Relaxed));
        for t in reg.threads.clone() {
            shared.attach(&reg, &t);
        }
        *shared.consumer.lock() = Some(consumer::spawn(consumer)?);
        state::install_session(&mut reg, shared.clone());
    }
    if let Ok(mut roots) = USED_ROOTS.try_lock() {
        if !roots.contains(&root_path) {
            roots.push(root_path);
        }
    }
    Ok(Session {
        shared: Some(shared),
    })
}

/// Refuses an output directory that holds a trace (a process trace directory with a
/// `metadata` file, or a statistics file), as `hushtrace record` does without `--force` or
/// `--append`. Traces named after this process's pid (`<pid>`, `<pid>.<n>`) are its own: an
/// earlier session of the program before it `exec`ed itself.
fn refuse_existing_trace(root: &mut Dir) -> Result<(), Error> {
    let entries = root.entries().map_err(|source| Error::Io {
        path: root.path().to_path_buf(),
        source,
    })?;
    let me = platform::getpid().to_string();
    let mine = |name: &str| {
        let trace = hushtrace_ctf::stats::trace_name(name).unwrap_or(name);
        trace.split('.').next() == Some(me.as_str())
    };
    let mut found: Vec<String> = entries
        .into_iter()
        .filter(|(name, is_dir)| {
            if mine(name) {
                false
            } else if *is_dir {
                std::fs::symlink_metadata(
                    root.path()
                        .join(name)
                        .join(hushtrace_ctf::layout::METADATA_FILE),
                )
                .is_ok()
            } else {
                hushtrace_ctf::stats::trace_name(name).is_some()
            }
        })
        .map(|(name, _)| name)
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    found.sort();
    let shown = found.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    let more = if found.len() > 5 { ", ..." } else { "" };
    Err(Error::Io {
        path: root.path().to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "already holds a trace ({shown}{more}): choose a new directory, remove the old \
                 trace, or add to it with SessionBuilder::append(true) (ht_session_append in \
                 C), as `hushtrace record` requires --force or --append"
            ),
        ),
    })
}

/// Refuses rings that cannot work on this machine: larger than half its memory, or, for the
/// threads already in no-syscall mode, more than `RLIMIT_MEMLOCK` lets the process lock.
fn check_memory(cfg: &Config) -> Result<(), Error> {
    let ring = cfg.subbuf_size * cfg.num_subbufs;
    if let Some(mem) = platform::physical_memory() {
        if ring as u64 > mem / 2 {
            return Err(Error::Config {
                var: None,
                value: format!("{} x {} bytes", cfg.num_subbufs, cfg.subbuf_size),
                reason: format!(
                    "a ring of {ring} bytes per thread exceeds half of this machine's memory \
                     ({mem} bytes)"
                ),
            });
        }
    }
    let rt_threads = {
        let sig = SignalBlock::new();
        let reg = state::lock_registry(&sig);
        reg.threads
            .iter()
            .filter(|t| !t.dead.load(Ordering::Relaxed) && t.in_no_syscall())
            .count()
    };
    if let Some(limit) = platform::memlock_limit() {
        if rt_threads > 0 && (ring * rt_threads) as u64 > limit {
            return Err(
                crate::nosyscall::memlock_error(ring * rt_threads).expect("a memlock limit is set")
            );
        }
    }
    Ok(())
}

/// Waits until none of the threads whose buffers were detached is inside a tracepoint. A
/// thread still inside one after a 10 s grace period (stopped by a debugger or SIGSTOP, or
/// starved) keeps its buffer for good: it is marked Leaked, never read and never unmapped, so
/// the thread cannot write into freed memory; its events are lost.
fn quiesce(detached: &[(Arc<ThreadCtx>, *const Buffer)]) {
    // The calling thread is not inside a tracepoint; if it is the only one with a buffer (a
    // single-threaded program, a fork child), there is nothing to wait for and no barrier to
    // issue.
    let me = crate::thread::with_current(|c| c as *const ThreadCtx).unwrap_or(std::ptr::null());
    if detached
        .iter()
        .all(|(t, _)| std::ptr::eq(Arc::as_ptr(t), me))
    {
        return;
    }
    if !platform::membarrier() {
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
                .store(BufState::Leaked, Ordering::Release);
        }
    }
}

pub(crate) fn stop_shared(s: &Arc<Shared>) -> Result<Stats, Error> {
    let _stopping = state::stopping();
    let sig = SignalBlock::new();
    let detached = {
        let mut reg = state::lock_registry(&sig);
        match &reg.session {
            Some(cur) if Arc::ptr_eq(cur, s) => {}
            _ => {
                drop(reg);
                // Another thread (`hushtrace ctl PID stop`, exit) is stopping this session:
                // its statistics are there once it is done.
                let deadline = Instant::now() + Duration::from_secs(15);
                while s.inner.lock().final_stats.is_none()
                    && state::stops_in_progress() > 1
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                return s.inner.lock().final_stats.clone().ok_or(Error::Config {
                    var: None,
                    value: "stop".into(),
                    reason: "this session was never started in this process".into(),
                });
            }
        }
        state::remove_session(&mut reg);
        // Threads that did not survive a fork are skipped: their buffers are abandoned.
        let mut detached = Vec::new();
        for t in reg
            .threads
            .iter()
            .filter(|t| !t.dead.load(Ordering::Relaxed))
        {
            let b = t.buffer.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !b.is_null() {
                // SAFETY: attached buffers are alive in the session's buffer list.
                unsafe { &*b }.state.transition(
                    BufState::Attached,
                    BufState::Detached,
                    Ordering::AcqRel,
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
            state::unpark_consumer();
            h.thread.join();
        }
        // No consumer, or a handle inherited across fork() that names a thread of the parent
        // (never joined): run the final pass here.
        _ => match Consumer::create(s.clone()) {
            Ok(c) => c.run(),
            Err(e) => s.note_error(e),
        },
    }
    state::clear_consumer();
    let stats = Stats {
        events_written: s.written.load(Ordering::Relaxed),
        events_discarded: s.total_lost(),
        trace_dir: s.inner.lock().trace_dir.clone(),
    };
    let mut inner = s.inner.lock();
    for b in inner.buffers.drain(..) {
        if b.state.load(Ordering::Acquire) == BufState::Leaked {
            std::mem::forget(b); // its thread may still write to it
        }
    }
    inner.final_stats = Some(stats.clone());
    if let Some(e) = inner.io_error.clone() {
        return Err(Error::Stop {
            stats,
            path: inner.trace_dir.clone(),
            source: std::io::Error::other(e),
        });
    }
    Ok(stats)
}

/// Starts a session configured by the environment, if `HUSHTRACE_OUTPUT=<dir>` is set:
/// `HUSHTRACE_MODE` (`discard`|`overwrite`), `HUSHTRACE_SUBBUF_SIZE` (bytes, `k`/`M` suffixes),
/// `HUSHTRACE_NUM_SUBBUFS`, `HUSHTRACE_READ_TIMER_MS`, `HUSHTRACE_DIRECT_IO` (`1`: as
/// [`SessionBuilder::direct_io`]), `HUSHTRACE_CONSUMER_SCHED` and `HUSHTRACE_CONSUMER_CPUS` (as
/// [`SessionBuilder::consumer_sched`] and [`SessionBuilder::consumer_cpus`]) and `HUSHTRACE_NO_SYSCALL_POLICY` (the table is
/// [`crate::env`]; a [`SessionBuilder`] session reads none of the per-session ones). A bad value is an error naming the variable and the value;
/// the program can carry on untraced. Without `HUSHTRACE_OUTPUT`, nothing starts (`Ok(None)`),
/// but another `HUSHTRACE_*` variable that is set (`HUSHTRACE_RELAY` alone, say) is an error
/// saying that `HUSHTRACE_OUTPUT` is missing.
///
/// ```
/// // Without HUSHTRACE_OUTPUT nothing starts.
/// std::env::remove_var("HUSHTRACE_OUTPUT");
/// assert!(hushtrace::start_from_env().unwrap().is_none());
/// std::env::set_var("HUSHTRACE_RELAY", "net://collector");
/// let err = hushtrace::start_from_env().unwrap_err().to_string();
/// assert!(err.contains("HUSHTRACE_RELAY") && err.contains("without HUSHTRACE_OUTPUT"), "{err}");
/// # std::env::remove_var("HUSHTRACE_RELAY");
/// ```
pub fn start_from_env() -> Result<Option<Session>, Error> {
    match Config::from_env()? {
        None => Ok(None),
        Some((cfg, raw)) => start_with(cfg, &raw, Existing::Append).map(Some),
    }
}
