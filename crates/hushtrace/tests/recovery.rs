//! Issue 18.5: the directory of a running or killed process is a CTF trace `babeltrace2`
//! reads, before and after `recover`: the ring pointer file (and anything else that is not a
//! stream) is kept out of the files `babeltrace2` takes for streams (it reads every regular
//! file not starting with `.` of a directory holding `metadata`); it used to fail on the
//! pointer file with "Invalid CTF magic number".

mod common;
mod killed_child;

use common::{babeltrace, shared_counter, temp_dir};
use hushtrace_ctf::ringfile::recover_session;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const EVENTS: u64 = 3000;

/// The child: records `EVENTS` events, says so, and waits to be killed.
fn child(dir: &Path, returned: &AtomicU64) -> ! {
    let builder = hushtrace::Session::builder()
        .output_dir(dir)
        .subbuf_size(4096)
        .num_subbufs(64)
        .read_timer(Duration::from_millis(2));
    killed_child::record_and_wait_for_kill(builder, EVENTS, returned)
}

/// `rec:seq` events babeltrace2 prints for `dir` (failing the test if babeltrace2 fails).
fn bt_count(dir: &Path) -> usize {
    babeltrace(dir, true)
        .iter()
        .filter(|e| e.name == "rec:seq")
        .count()
}

/// The process trace directory under `session` (the one with a `metadata`).
fn trace_dir(session: &Path) -> Option<PathBuf> {
    std::fs::read_dir(session)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("metadata").is_file())
}

/// Kills and reaps the child when the test ends, also when it fails.
struct Child(libc::pid_t);

impl Child {
    fn kill(&mut self) {
        if self.0 > 0 {
            // SAFETY: killing and reaping our own child, once.
            unsafe {
                libc::kill(self.0, libc::SIGKILL);
                libc::waitpid(self.0, std::ptr::null_mut(), 0);
            }
            self.0 = 0;
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn babeltrace2_reads_a_running_and_a_killed_process_before_and_after_recovery() {
    let dir = temp_dir("bt-killed");
    let returned = shared_counter();
    // SAFETY: the child only traces and waits to be killed (see `child`); it never returns.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        child(&dir, returned);
    }
    let mut child_guard = Child(pid);
    // Wait for the events to have returned and some packets to be in a stream file.
    let deadline = Instant::now() + Duration::from_secs(30);
    let td = loop {
        let td = trace_dir(&dir);
        let has_stream = td.as_ref().is_some_and(|t| {
            std::fs::read_dir(t).unwrap().flatten().any(|e| {
                e.file_name().to_string_lossy().starts_with("stream_")
                    && e.metadata().is_ok_and(|m| m.len() > 0)
            })
        });
        if returned.load(Ordering::SeqCst) == EVENTS && has_stream {
            break td.unwrap();
        }
        assert!(Instant::now() < deadline, "the child never wrote a stream");
        std::thread::sleep(Duration::from_millis(10));
    };
    let pointer = td.join(hushtrace_ctf::ringfile::RINGS_FILE);
    assert!(
        pointer.is_file(),
        "the ring pointer file {pointer:?} exists"
    );
    // Running: babeltrace2 reads what is in the files so far.
    let running = bt_count(&td);
    child_guard.kill();
    // Killed, before recovery: the stream files hold complete packets only, and the reader
    // says that recovery would add the rest.
    let before = bt_count(&td);
    let r = hushtrace_ctf::reader::Session::open(&dir).unwrap();
    assert!(
        r.warnings
            .iter()
            .any(|w| w.message.contains("`hushtrace recover` adds")),
        "{:?}",
        r.warnings
    );
    let done = recover_session(&dir).unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    let after = bt_count(&td);
    let session_wide = bt_count(&dir);
    eprintln!("rec:seq events: running {running:?}, killed {before:?}, recovered {after:?}");
    assert!(before <= after);
    assert_eq!(after, session_wide);
    let discarded = done[0].recovered.discarded as usize;
    assert_eq!(after + discarded, EVENTS as usize, "{done:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
