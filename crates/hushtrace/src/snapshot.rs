//! Snapshots of the flight recorder: the newest contents of every thread's ring, written as a
//! complete CTF trace without stopping tracing.
//!
//! [`snapshot`] only raises a request (one atomic add; on a thread that allows system calls it
//! also wakes the consumer): it is safe in a no-syscall thread — a control loop that misses a
//! deadline calls it and carries on. The consumer writes the snapshot within one read-timer
//! period to `<session dir>/snapshots/<n>/<pid>/`; [`Snapshot::wait`] (system calls) returns
//! where it went.

use crate::config::Error;
use crate::state;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A snapshot request (see [`snapshot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "wait() tells where the snapshot went, or why it failed"]
pub struct Snapshot {
    number: u64,
}

impl Snapshot {
    /// The request's number in this process (from 1): the snapshot goes to
    /// `<session dir>/snapshots/<number>/<pid>/`.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Waits (up to `timeout`) until the consumer has written this snapshot; returns its
    /// directory, or the error the consumer met. System calls: not from a no-syscall thread.
    pub fn wait(&self, timeout: Duration) -> Result<PathBuf, Error> {
        let deadline = Instant::now() + timeout;
        while state::snapshots_done() < self.number {
            if Instant::now() >= deadline {
                return Err(Error::Io {
                    path: PathBuf::from(format!("snapshot {}", self.number)),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("not written within {timeout:?} (is the consumer running?)"),
                    ),
                });
            }
            state::unpark_consumer();
            std::thread::sleep(Duration::from_millis(1));
        }
        let s = state::current_session().ok_or(Error::NotRunning)?;
        let inner = s.inner.lock();
        let outcome = inner
            .snapshot_results
            .iter()
            .rev()
            .find(|(n, _)| *n >= self.number)
            .map(|(_, r)| r.clone());
        drop(inner);
        match outcome {
            Some(Ok(path)) => Ok(path),
            Some(Err(e)) => Err(Error::Io {
                path: PathBuf::from(format!("snapshot {}", self.number)),
                source: std::io::Error::other(e),
            }),
            None => Err(Error::NotRunning),
        }
    }
}

/// Requests a snapshot of every thread's ring (overwrite mode). No system call and no
/// allocation on a thread in no-syscall mode: it raises a flag the consumer acts on within
/// one read-timer period. On other threads it also wakes the consumer.
///
/// ```no_run
/// let session = hushtrace::Session::builder()
///     .mode(hushtrace::Mode::Overwrite)
///     .output_dir("/tmp/flight")
///     .start()?;
/// // ... a deadline was missed:
/// let snap = hushtrace::snapshot()?;
/// println!("snapshot in {}", snap.wait(std::time::Duration::from_secs(5))?.display());
/// # Ok::<(), hushtrace::Error>(())
/// ```
pub fn snapshot() -> Result<Snapshot, Error> {
    if !state::active() {
        return Err(Error::NotRunning);
    }
    if !state::overwrite_mode() {
        return Err(Error::NeedsOverwriteMode);
    }
    // The calling thread's own newest events go in for sure: close its open packet now (no
    // system call). Every thread's open packet is also read as it is when the consumer takes
    // the snapshot (`ring/snapshot.rs`): an idle thread's newest events are in it too.
    crate::write::close_own_packet();
    let number = state::request_snapshot();
    if !crate::nosyscall::thread_in_no_syscall() {
        state::unpark_consumer();
    }
    Ok(Snapshot { number })
}
