//! Kernel snapshots for the flight recorder (`record --kernel --mode overwrite`).
//!
//! In overwrite mode the instance's per-CPU buffers are rings (ftrace's `options/overwrite`):
//! the kernel keeps the newest events by itself and nothing reads them while the program runs.
//! A snapshot of the program (`hushtrace.snapshot()`, `hushtrace::snapshot()`, `hushtrace ctl
//! PID snapshot`) is written by the program's own consumer into
//! `<session>/snapshots/<n>/<pid>/`; `record` cannot be told directly, so [`Watcher`] looks for
//! new `<session>/snapshots/<n>` directories (every [`POLL`]) and writes the kernel's newest
//! events beside them, into `<session>/snapshots/<n>/kernel/` ([`Capture::snapshot`]):
//!
//! * tracing is paused while the buffers are read (so the copy ends at the snapshot's moment
//!   and always ends), then resumed: reading empties the kernel's rings, so each kernel snapshot
//!   holds the events since the previous one (at most the buffer size, `--kernel-buffer-kb`
//!   per CPU), and the events of the few milliseconds of the copy are in none;
//! * its metadata carries the clock of the program's snapshot (same clock name, UUID,
//!   frequency and offset), so babeltrace2 merges them and `report --slowest` on the snapshot
//!   directory explains late spans as on a full trace;
//! * the directory is locked while it is written ([`crate::recovery::RecordingLock`]):
//!   readers say "still being recorded" until it is done.
//!
//! The program's late-span captures (`record --on-late`, `DIR/late/<n>/<pid>/`) are watched
//! the same way: each gets the kernel's newest events in `DIR/late/<n>/kernel/`, on the
//! program's clock, so `report --late` says why the span was late. (In discard mode the
//! watcher does not run: every kernel event is in `DIR/kernel/`, and `report --late` reads
//! the capture's interval from there.)
//!
//! Snapshots written elsewhere (`ctl PID snapshot -o DIR`) are not seen and have no kernel
//! part. At the end `record` writes what the rings hold then into `<session>/kernel/`.
//!
//! Known limit: with the `syscalls` category, the system-call instance follows every task
//! `record` creates after its start, so the threads that copy a snapshot (created then) have
//! their own system calls recorded too.

use crate::capture::{Capture, Error};
use crate::ctf::KERNEL_DIR;
use crate::recovery::RecordingLock;
use crate::tracefs;
use hushtrace_ctf::metadata::ClockDesc;
use std::collections::HashSet;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often [`Watcher`] looks for new snapshot directories.
pub const POLL: Duration = Duration::from_millis(20);
/// How long a kernel snapshot waits for the program's snapshot metadata (for its clock).
const USER_METADATA_WAIT: Duration = Duration::from_secs(5);

/// What one kernel snapshot wrote.
#[derive(Clone, Debug)]
pub struct SnapshotSummary {
    /// `<snapshot>/kernel`.
    pub dir: PathBuf,
    /// Events written.
    pub events: u64,
    /// Events the kernel dropped (the rings overwrite their oldest events: the count of
    /// those overwritten since the previous read).
    pub lost: u64,
    /// The clock's note (same clock as the program's snapshot, or the recorder's own).
    pub clock_note: String,
    /// Reader errors.
    pub warnings: Vec<String>,
}

impl Capture {
    /// Writes what the kernel's rings hold now into `<snapshot_dir>/kernel/` (see the module
    /// docs). Only in overwrite mode.
    pub fn snapshot(&self, snapshot_dir: &Path) -> Result<SnapshotSummary, Error> {
        let dir = snapshot_dir.join(KERNEL_DIR);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::Other(format!("{}: {e}", dir.display())))?;
        let _lock = RecordingLock::take(&dir)?;
        // Readable from the first packet on, whatever happens to the recorder.
        self.write_metadata_in(&dir, None)?;
        let instances = self.instance_paths();
        for i in &instances {
            tracefs::write(&i.join("tracing_on"), "0")?;
        }
        let drained = self.drain_to(&dir);
        for i in &instances {
            tracefs::write(&i.join("tracing_on"), "1")?;
        }
        let (cpus, warnings) = drained?;
        let clock = wait_user_clock(snapshot_dir, USER_METADATA_WAIT);
        let clock_note = self.write_metadata_in(&dir, clock)?;
        Ok(SnapshotSummary {
            dir,
            events: cpus.iter().map(|c| c.events).sum(),
            lost: cpus.iter().map(|c| c.lost).sum(),
            clock_note,
            warnings,
        })
    }
}

/// The clock of the program's trace in `snapshot_dir` (`<pid>/metadata`, written last by
/// its consumer), waited for at most `wait`.
fn wait_user_clock(snapshot_dir: &Path, wait: Duration) -> Option<(ClockDesc, [u8; 16])> {
    let t0 = Instant::now();
    loop {
        let has_metadata = std::fs::read_dir(snapshot_dir).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name() != KERNEL_DIR && e.path().join("metadata").is_file())
        });
        if has_metadata {
            if let Ok(s) = hushtrace_ctf::reader::Session::open(snapshot_dir) {
                if let Some(t) = s.traces.first() {
                    return Some((t.desc.clock.clone(), t.desc.clock_uuid));
                }
            }
        }
        if t0.elapsed() >= wait {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Watches `<session>/snapshots/` and `<session>/late/` and takes a kernel snapshot beside
/// every new program snapshot or late-span capture, until [`Watcher::stop`].
#[derive(Debug)]
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The directories under `<session>` whose numbered subdirectories get a kernel part: the
/// program's snapshots, and its late-span captures (`record --on-late`, written by its
/// consumer into `<session>/late/<n>/<pid>/`).
pub const WATCHED: [&str; 2] = ["snapshots", "late"];

/// The numbered snapshot and capture directories under `<session>/snapshots/` and
/// `<session>/late/`.
fn snapshot_dirs(session: &Path) -> HashSet<PathBuf> {
    WATCHED
        .iter()
        .flat_map(|w| std::fs::read_dir(session.join(w)).into_iter().flatten())
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// Oldest first: by parent (`late` before `snapshots`), then by number (`2` before `10`).
fn by_number(a: &PathBuf, b: &PathBuf) -> std::cmp::Ordering {
    let key = |p: &PathBuf| {
        let n = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u64>().ok());
        (
            p.parent().map(Path::to_path_buf),
            n.unwrap_or(u64::MAX),
            p.clone(),
        )
    };
    key(a).cmp(&key(b))
}

impl Watcher {
    /// Starts watching `session` (snapshot and capture directories there now are not this
    /// recording's: left alone). `done` is called with each snapshot's directory and outcome.
    pub fn start(
        capture: Arc<Capture>,
        session: PathBuf,
        done: impl Fn(&Path, Result<SnapshotSummary, Error>) + Send + 'static,
    ) -> std::io::Result<Watcher> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let mut seen = snapshot_dirs(&session);
        let thread = std::thread::Builder::new()
            .name("hushtrace-ksnap".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    let mut new: Vec<PathBuf> =
                        snapshot_dirs(&session).difference(&seen).cloned().collect();
                    new.sort_by(by_number);
                    for d in new {
                        done(&d, capture.snapshot(&d));
                        seen.insert(d);
                    }
                    std::thread::sleep(POLL);
                }
            })?;
        Ok(Watcher {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops watching (a snapshot being written is finished first).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_and_late_captures_are_watched_oldest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let s = tmp.path();
        for d in ["snapshots/1", "late/10", "late/2", "late/1"] {
            std::fs::create_dir_all(s.join(d)).unwrap();
        }
        // The index of the captures is a file, not a capture.
        std::fs::write(s.join("late/index.json"), "").unwrap();
        let mut v: Vec<PathBuf> = snapshot_dirs(s).into_iter().collect();
        v.sort_by(by_number);
        let rel: Vec<String> = v
            .iter()
            .map(|p| p.strip_prefix(s).unwrap().display().to_string())
            .collect();
        assert_eq!(rel, ["late/1", "late/2", "late/10", "snapshots/1"]);
    }
}
