//! Session starts: two threads starting at once (issue 18, point 6) and an output directory
//! that already holds a trace (issue 20, point 5).

mod common;

use common::temp_dir;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};

static SERIAL: Mutex<()> = Mutex::new(());

/// This process's ring directories on the tmpfs (`/dev/shm/hushtrace-<uid>/<pid>[.n]`).
fn my_ring_dirs() -> Vec<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let base = PathBuf::from(format!("/dev/shm/hushtrace-{}", unsafe { libc::geteuid() }));
    let me = std::process::id().to_string();
    let Ok(rd) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n == me || n.starts_with(&format!("{me}."))
        })
        .collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Two threads start a session at once, 20 times: exactly one wins; the loser returns
/// `AlreadyRunning` having created nothing (no trace directory, no ring directory) and never
/// removes the winner's control socket.
#[test]
fn concurrent_starts_have_one_winner_and_leave_no_debris() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    for round in 0..20 {
        let dir = temp_dir(&format!("race-{round}"));
        let barrier = Arc::new(Barrier::new(2));
        let starts: Vec<_> = (0..2)
            .map(|_| {
                let (b, d) = (barrier.clone(), dir.clone());
                std::thread::spawn(move || {
                    b.wait();
                    hushtrace::Session::builder()
                        .output_dir(&d)
                        .subbuf_size(4096)
                        .num_subbufs(2)
                        .start()
                })
            })
            .collect();
        let results: Vec<_> = starts.into_iter().map(|h| h.join().unwrap()).collect();
        let winners = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(winners, 1, "round {round}: {results:?}");
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(e, hushtrace::Error::AlreadyRunning),
                    "round {round}: {e}"
                );
            }
        }
        // One trace directory, one ring directory, and the winner's socket answers.
        let traces: Vec<String> = entries(&dir)
            .into_iter()
            .filter(|n| dir.join(n).is_dir())
            .collect();
        assert_eq!(traces.len(), 1, "round {round}: {traces:?}");
        let rings = my_ring_dirs();
        assert!(rings.len() <= 1, "round {round}: {rings:?}");
        let socket = hushtrace::control::socket_path(pid).unwrap();
        assert!(
            socket.exists(),
            "round {round}: the winner's socket is gone"
        );
        let pong = hushtrace::control::request(pid, "ping").unwrap();
        assert!(pong.contains("\"ok\":true"), "round {round}: {pong}");
        for s in results.into_iter().flatten() {
            s.stop().unwrap();
        }
        assert!(my_ring_dirs().is_empty(), "round {round}: rings left");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Runs a session in a forked child process (another process than this one) in `dir`.
fn trace_from_another_process(dir: &Path) {
    // SAFETY: the child starts a session, stops it and `_exit`s without returning into the
    // test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let code = match hushtrace::Session::builder()
            .output_dir(dir)
            .subbuf_size(4096)
            .num_subbufs(2)
            .start()
        {
            Ok(s) => {
                hushtrace::event!("old", "run", n = 1u32);
                i32::from(s.stop().is_err())
            }
            Err(_) => 3,
        };
        // SAFETY: leaving the child without running the harness's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut st = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "child: {st}"
    );
}

/// A directory holding another process's trace is refused, as `hushtrace record` refuses it
/// without `--force`/`--append`, with an error that says so; `append(true)` adds to it; a
/// directory this process wrote to before is accepted; the environment's sessions add to
/// their directory (every process of a recorded command writes there).
#[test]
fn a_directory_holding_a_trace_is_refused_unless_appending() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("existing");
    trace_from_another_process(&dir);
    let before = entries(&dir);
    assert_eq!(before.len(), 2, "{before:?}"); // <pid>/ and <pid>.stats.json
    let e = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("already holds a trace"), "{msg}");
    assert!(msg.contains("append"), "{msg}");
    assert_eq!(entries(&dir), before, "the refused start created nothing");

    // Appending adds this process's trace next to the old one.
    let s = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(2)
        .append(true)
        .start()
        .unwrap();
    s.stop().unwrap();
    assert_eq!(entries(&dir).len(), 4);
    // This process wrote there: a new session of it is accepted without `append`.
    let s = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(2)
        .start()
        .unwrap();
    s.stop().unwrap();
    assert_eq!(entries(&dir).len(), 6);

    // A trace named after this process's pid is its own (written before it exec'ed itself).
    let own = temp_dir("existing-own");
    let mine = own.join(format!("{}.7", std::process::id()));
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("metadata"), "/* CTF 1.8 */").unwrap();
    std::fs::set_permissions(&own, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let s = hushtrace::Session::builder()
        .output_dir(&own)
        .subbuf_size(4096)
        .num_subbufs(2)
        .start()
        .unwrap();
    s.stop().unwrap();
    let _ = std::fs::remove_dir_all(&own);

    // Sessions from the environment add to the directory.
    let other = temp_dir("existing-env");
    trace_from_another_process(&other);
    let lines = common::run_test_env(&[("HUSHTRACE_OUTPUT", other.to_str().unwrap())], 10);
    assert!(
        lines.iter().any(|l| l.contains("written")),
        "the environment's session did not start: {lines:?}"
    );
    assert_eq!(entries(&other).len(), 4, "{:?}", entries(&other));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}
