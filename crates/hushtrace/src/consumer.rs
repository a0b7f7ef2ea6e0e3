//! The in-process consumer: a thread that wakes on the read timer (or when a thread that allows
//! system calls hands over a packet), writes full packets to one stream file per buffer, drains
//! and recycles the buffers of exited threads, keeps the TSDL metadata current and, when the
//! session stops, flushes everything.

use crate::config::Error;
use crate::platform::{self, SignalBlock};
use crate::ring::{BufState, Buffer, Mode};
use crate::state::{self, ConsumerThread, Shared};
use hushtrace_core::callsites;
use hushtrace_ctf::layout::{METADATA_FILE, STATS_SUFFIX, STREAM_PREFIX};
use hushtrace_ctf::metadata::{to_tsdl, EventClass, TraceDesc};
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Name of the consumer thread.
pub(crate) const CONSUMER_THREAD_NAME: &str = "hushtrace-consumer";

/// Buffers of exited threads kept for reuse; beyond this they are freed.
const POOL_MAX: usize = 64;

#[derive(Debug)]
pub(crate) struct Consumer {
    shared: Arc<Shared>,
    dir: PathBuf,
    files: HashMap<u64, File>,
    types_gen: Option<u64>,
}

fn create_file(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

impl Consumer {
    /// Creates this process's trace directory (`<output>/<pid>`, or `<pid>.<n>` if an earlier
    /// process with the same pid — e.g. before an `exec` — already has it) and writes the
    /// metadata.
    pub(crate) fn create(shared: Arc<Shared>) -> Result<Consumer, Error> {
        let root = shared.cfg.output_dir.clone();
        create_private_dir(&root)?;
        let pid = shared.pid.load(Ordering::Relaxed);
        let mut n = 0;
        let dir = loop {
            let name = if n == 0 {
                pid.to_string()
            } else {
                format!("{pid}.{n}")
            };
            let d = root.join(name);
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o700).create(&d) {
                Ok(()) => break d,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(source) => return Err(Error::Io { path: d, source }),
            }
        };
        shared.inner.lock().trace_dir = dir.clone();
        let mut c = Consumer {
            shared,
            dir,
            files: HashMap::new(),
            types_gen: None,
        };
        c.write_metadata()?;
        Ok(c)
    }

    fn write_metadata(&mut self) -> Result<(), Error> {
        let gen = hushtrace_core::types_generation();
        let events = callsites()
            .iter()
            .enumerate()
            .map(|(i, cs)| EventClass {
                id: i as u16,
                name: cs.full_name(),
                kind: cs.kind,
                fields: cs.types().map(|t| {
                    cs.field_names
                        .iter()
                        .map(|n| n.to_string())
                        .zip(t)
                        .collect()
                }),
            })
            .collect();
        let desc = TraceDesc {
            uuid: self.shared.inner.lock().uuid,
            clock_uuid: self.shared.clock_uuid,
            clock: crate::clock::calibrate().clone(),
            vpid: self.shared.pid.load(Ordering::Relaxed),
            procname: std::fs::read_to_string("/proc/self/comm")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            hostname: platform::hostname(),
            events,
        };
        let text = to_tsdl(&desc);
        let tmp = self.dir.join(".metadata.tmp");
        let path = self.dir.join(METADATA_FILE);
        let io = |p: &Path, source| Error::Io {
            path: p.to_path_buf(),
            source,
        };
        let _ = std::fs::remove_file(&tmp);
        let mut f = create_file(&tmp).map_err(|e| io(&tmp, e))?;
        f.write_all(text.as_bytes()).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        self.types_gen = Some(gen);
        Ok(())
    }

    fn note_error(&self, e: impl std::fmt::Display) {
        self.shared.note_error(e);
    }

    /// Writes one packet of `b` to its stream file (created on first use). A failure is
    /// recorded as the session's I/O error and the packet's events are counted lost; the slot is
    /// released either way.
    fn write_packet(&mut self, b: &Buffer, bytes: &[u8], events: u64) {
        use std::collections::hash_map::Entry;
        let r = match self.files.entry(b.instance) {
            Entry::Occupied(o) => o
                .into_mut()
                .write_all(bytes)
                .map_err(|e| format!("{}: {e}", self.dir.display())),
            Entry::Vacant(v) => {
                let path = self.dir.join(format!("{STREAM_PREFIX}{}", b.instance));
                create_file(&path)
                    .and_then(|f| v.insert(f).write_all(bytes))
                    .map_err(|e| format!("{}: {e}", path.display()))
            }
        };
        match r {
            Ok(()) => self.shared.written.fetch_add(events, Ordering::Relaxed),
            Err(msg) => {
                self.note_error(msg);
                self.shared.lost.fetch_add(events, Ordering::Relaxed)
            }
        };
    }

    /// One pass over all buffers. `last` = the session is stopping and every buffer is
    /// quiescent.
    fn cycle(&mut self, last: bool) {
        if self.types_gen != Some(hushtrace_core::types_generation()) {
            if let Err(e) = self.write_metadata() {
                self.note_error(e);
            }
        }
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        for b in &bufs {
            match b.state.load(Ordering::Acquire) {
                BufState::Attached if last => b.finish(|p, n| self.write_packet(b, p, n)),
                BufState::Attached if self.shared.cfg.mode == Mode::Discard => {
                    b.drain(|p, n| self.write_packet(b, p, n));
                }
                BufState::Exited => {
                    b.finish(|p, n| self.write_packet(b, p, n));
                    b.recycle();
                    state::exited_buffer_done();
                }
                // Only once the stop has quiesced the producers (it sets `stop` after that).
                BufState::Detached if last => b.finish(|p, n| self.write_packet(b, p, n)),
                _ => {}
            }
        }
        // Free abandoned buffers and pooled buffers beyond the pool size; their loss counts
        // move to the session (abandoned ones belong to the parent process: not counted).
        let mut retired = Vec::new();
        let mut inner = self.shared.inner.lock();
        let mut pooled = 0;
        inner.buffers.retain(|b| {
            let keep = match b.state.load(Ordering::Acquire) {
                BufState::Abandoned => false,
                BufState::Pooled => {
                    pooled += 1;
                    pooled <= POOL_MAX
                }
                _ => true,
            };
            if !keep {
                retired.push(b.clone());
            }
            keep
        });
        drop(inner);
        for b in retired {
            if b.state.load(Ordering::Acquire) == BufState::Pooled {
                self.shared.lost.fetch_add(b.lost(), Ordering::Relaxed);
                self.files.remove(&b.instance);
            }
            // Unmapped here, outside the lock.
            drop(b);
        }
    }

    fn write_stats(&mut self) {
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = self.dir.with_file_name(format!("{name}{STATS_SUFFIX}"));
        let body = format!(
            "{{\"pid\":{},\"written\":{},\"discarded\":{}}}\n",
            self.shared.pid.load(Ordering::Relaxed),
            self.shared.written.load(Ordering::Relaxed),
            self.shared.total_lost()
        );
        let r = create_file(&path).and_then(|mut f| f.write_all(body.as_bytes()));
        if let Err(e) = r {
            self.note_error(format!("{}: {e}", path.display()));
        }
    }

    /// The consumer loop; returns after the final flush once the session's stop flag is set.
    pub(crate) fn run(mut self) {
        let timer = self.shared.cfg.read_timer;
        if std::thread::current().name() == Some(CONSUMER_THREAD_NAME) {
            // Application signal handlers (which may trace) must never run on this thread.
            platform::block_signals_forever();
        }
        loop {
            let stopping = self.shared.stop.load(Ordering::Acquire);
            self.cycle(stopping);
            if stopping {
                break;
            }
            std::thread::park_timeout(timer);
        }
        if let Err(e) = self.write_metadata() {
            self.note_error(e);
        }
        for f in self.files.values_mut() {
            let _ = f.flush();
        }
        self.write_stats();
    }
}

// ---------------------------------------------------------------------------------------------
// Life cycle of the consumer thread

/// Starts the consumer thread of this process.
pub(crate) fn spawn(c: Consumer) -> ConsumerThread {
    let join = std::thread::Builder::new()
        .name(CONSUMER_THREAD_NAME.into())
        .spawn(move || c.run())
        .expect("spawn hushtrace consumer thread");
    state::set_consumer(join.thread().clone());
    ConsumerThread {
        pid: platform::getpid(),
        join,
    }
}

/// Wakes the consumer after a packet hand-over (threads that allow system calls only). In the
/// child of a fork, where the consumer did not survive, starts a new one first.
pub(crate) fn wake() {
    if !state::consumer_alive() {
        ensure_running();
        return;
    }
    state::unpark_consumer();
}

/// Starts the consumer if this process has a session but no consumer (the child of a fork).
#[cold]
pub(crate) fn ensure_running() {
    if state::consumer_alive() {
        return;
    }
    let Some(s) = state::current_session() else {
        return;
    };
    if s.consumer_failed.load(Ordering::Relaxed) {
        return;
    }
    let _sig = SignalBlock::new();
    let mut slot = s.consumer.lock();
    if state::consumer_alive() {
        return;
    }
    match Consumer::create(s.clone()) {
        Ok(c) => *slot = Some(spawn(c)),
        Err(e) => {
            s.note_error(e);
            s.consumer_failed.store(true, Ordering::Relaxed);
        }
    }
}

/// Above this many undrained buffers of exited threads, registering a new thread waits briefly
/// for the consumer, which bounds memory and open files when threads come and go faster than
/// the consumer runs.
const EXITED_HIGH_WATER: usize = 64;

/// Called before a new thread registers (system calls allowed): if the consumer is behind on
/// exited threads, wake it and wait up to 200 ms for it to catch up.
pub(crate) fn throttle_registration() {
    if !state::active() || state::exited_pending() <= EXITED_HIGH_WATER {
        return;
    }
    wake();
    let deadline = Instant::now() + Duration::from_millis(200);
    while state::exited_pending() > EXITED_HIGH_WATER / 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Creates `dir` (and parents) with mode 0700; refuses a path that is a symlink or not a
/// directory.
fn create_private_dir(dir: &Path) -> Result<(), Error> {
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
