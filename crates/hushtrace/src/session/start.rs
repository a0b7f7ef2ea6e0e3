//! Starting a session: one start at a time, the checks (memory, an existing trace), the
//! output and trace directories, the consumer, a buffer for every registered thread.

use super::stop::{at_exit, stop_shared, INSTALL};
use super::Session;
use crate::config::{Config, Error, Raw};
use crate::consumer::{self, Consumer};
use crate::platform::{self, SignalBlock};
use crate::state::{self, SessionControl, Shared};
use crate::tracedir::Dir;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// What a session start does with an output directory that already holds a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Existing {
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

pub(super) fn start_with(mut cfg: Config, raw: &Raw, existing: Existing) -> Result<Session, Error> {
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
    crate::late::apply_rules(&cfg.late.rules);
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
