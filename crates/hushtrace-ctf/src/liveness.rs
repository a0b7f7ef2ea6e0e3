//! Whether the process that wrote a ring may still write to it: recovery leaves the rings of
//! such a process alone, and recovers those of a process that is gone or dead.
//!
//! A process killed (or ended) but not yet reaped by its parent is a zombie: `/proc/<pid>`
//! still exists, yet it runs no code and its memory is gone, so its rings are final and must be
//! recovered (a parent that runs `hushtrace recover` before it waits for its killed child, a
//! supervisor, a test). The thread group leader alone being a zombie is not enough: when the
//! main thread of a process ends by itself (`pthread_exit`) its other threads go on tracing.
//! So a process may run unless every one of its threads is a zombie or dead.

use std::io::ErrorKind;
use std::path::Path;

/// Whether process `pid` may still run (see the module docs): its `/proc/<pid>` exists and one
/// of its threads is not a zombie. Any doubt (an entry that cannot be read or parsed) counts as
/// running, which only delays a recovery; so does a reused pid. Pid 0 is never a process.
pub(crate) fn may_run(pid: u32) -> bool {
    may_run_in(Path::new("/proc"), pid)
}

/// [`may_run`] with the proc file system at `proc`.
fn may_run_in(proc: &Path, pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    let dir = proc.join(pid.to_string());
    match std::fs::symlink_metadata(&dir) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return false,
        Err(_) => return true,
    }
    let tasks = match std::fs::read_dir(dir.join("task")) {
        Ok(t) => t,
        // Reaped meanwhile.
        Err(e) if e.kind() == ErrorKind::NotFound && !dir.exists() => return false,
        Err(_) => return true,
    };
    for t in tasks {
        let Ok(t) = t else {
            return true;
        };
        match std::fs::read(t.path().join("stat")) {
            Ok(stat) if state(&stat).is_some_and(|s| s == b'Z' || s == b'X') => {}
            // The thread ended and was released meanwhile.
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            _ => return true,
        }
    }
    false
}

/// The state letter of a `/proc/<pid>/stat` line (`pid (comm) S ...`): the first field after
/// the last `)`, as the command name may hold spaces and parentheses.
fn state(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat[close + 1..]
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A fake proc file system: process `pid` with the threads `(tid, stat state)`.
    fn fake(tasks: &[(u32, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (tid, st) in tasks {
            let d = root.path().join("42").join("task").join(tid.to_string());
            fs::create_dir_all(&d).unwrap();
            // A command name with spaces and a parenthesis, as `comm` may be.
            fs::write(
                d.join("stat"),
                format!("{tid} (a (b) c) {st} 1 42 42 0 -1\n"),
            )
            .unwrap();
        }
        fs::create_dir_all(root.path().join("42").join("task")).unwrap();
        root
    }

    #[test]
    fn state_is_read_after_the_last_parenthesis() {
        assert_eq!(state(b"7 (x) R 1 2"), Some(b'R'));
        assert_eq!(state(b"7 (a) Z) S 1"), Some(b'S'));
        assert_eq!(state(b"7 (x)"), None);
        assert_eq!(state(b"no parenthesis"), None);
    }

    #[test]
    fn a_process_runs_unless_all_its_threads_are_zombies() {
        // Running, sleeping, stopped: it may write to its rings.
        for st in ["R", "S", "D", "T", "t"] {
            let p = fake(&[(42, st)]);
            assert!(may_run_in(p.path(), 42), "{st}");
        }
        // Killed, not reaped: a zombie (or dead) leader without other threads.
        for st in ["Z", "X"] {
            let p = fake(&[(42, st)]);
            assert!(!may_run_in(p.path(), 42), "{st}");
        }
        // The main thread ended (a zombie leader) while another thread goes on.
        let p = fake(&[(42, "Z"), (43, "R")]);
        assert!(may_run_in(p.path(), 42));
        let p = fake(&[(42, "Z"), (43, "Z")]);
        assert!(!may_run_in(p.path(), 42));
        // Gone; pid 0.
        assert!(!may_run_in(p.path(), 7));
        assert!(!may_run_in(p.path(), 0));
    }

    #[test]
    fn doubt_counts_as_running() {
        // A thread whose stat cannot be parsed.
        let p = fake(&[(42, "Z")]);
        fs::create_dir_all(p.path().join("42/task/44")).unwrap();
        fs::write(p.path().join("42/task/44/stat"), b"garbage").unwrap();
        assert!(may_run_in(p.path(), 42));
        // A process directory without a task list.
        let p = tempfile::tempdir().unwrap();
        fs::create_dir_all(p.path().join("42")).unwrap();
        assert!(may_run_in(p.path(), 42));
    }

    #[test]
    fn this_process_runs() {
        assert!(may_run(std::process::id()));
    }
}
