//! A Rust program killed with SIGKILL: `hushtrace recover` gives back every event it recorded
//! before the kill, also those of a callsite it registered at run time after its consumer last
//! wrote the metadata, and also while its parent has not reaped it yet (a zombie). A process
//! whose main thread ended while another thread goes on tracing is left alone.
//!
//! No timing: the child says on a pipe how many events it recorded, after recording them; its
//! consumer sleeps (a 60 s read timer, less than a packet of events) so the metadata written at
//! session start never lists the registered callsite.

use hushtrace::{FieldType, Kind, Value};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_hushtrace");
/// Events the child records before it reports.
const EVENTS: u64 = 1000;

fn hushtrace(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What the forked child does after it reported on the pipe.
#[derive(Clone, Copy)]
enum Then {
    /// Keeps running (sleeps) until killed.
    Wait,
    /// Its main thread ends (the `exit` system call) while a second thread records and sleeps.
    MainThreadExits,
}

/// Forks a child that traces into `dir` (registering `late:ev` after the session started),
/// records [`EVENTS`] events of it, writes one byte on a pipe and then does `then`. Returns
/// its pid once the byte was read.
fn traced_child(dir: &Path, then: Then) -> libc::pid_t {
    let mut fds = [0i32; 2];
    // SAFETY: a two-int array for pipe(2).
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only traces, reports and waits to be killed; it never returns into
    // the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let s = hushtrace::Session::builder()
            .output_dir(dir)
            .read_timer(Duration::from_secs(60))
            .start()
            .unwrap();
        std::mem::forget(s);
        let record = move |fd: i32| {
            let cs =
                hushtrace::register_callsite("late", "ev", Kind::Instant, &[("n", FieldType::U64)])
                    .unwrap();
            for n in 0..EVENTS {
                assert!(cs.record(&[Value::U64(n)]));
            }
            // SAFETY: one byte from a live buffer to the pipe's write end.
            assert_eq!(unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) }, 1);
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        };
        match then {
            Then::Wait => record(fds[1]),
            Then::MainThreadExits => {
                let fd = fds[1];
                std::thread::spawn(move || record(fd));
                // SAFETY: the exit system call ends the calling (main) thread only, without
                // unwinding (`pthread_exit` would unwind into the test harness's frames); the
                // process goes on with the other thread.
                unsafe { libc::syscall(libc::SYS_exit, 0) };
                unreachable!("the main thread ended");
            }
        }
    }
    // SAFETY: closing our copy of the write end, then reading one byte into a live buffer.
    unsafe { libc::close(fds[1]) };
    let mut b = [0u8; 1];
    // SAFETY: as above.
    assert_eq!(unsafe { libc::read(fds[0], b.as_mut_ptr().cast(), 1) }, 1);
    // SAFETY: our read end, no longer used.
    unsafe { libc::close(fds[0]) };
    pid
}

/// SIGKILLs `pid` and waits until it is dead without reaping it (`WNOWAIT`: a zombie).
fn kill_leaving_a_zombie(pid: libc::pid_t) {
    // SAFETY: signalling and waiting for our own child.
    unsafe {
        assert_eq!(libc::kill(pid, libc::SIGKILL), 0);
        let mut info: libc::siginfo_t = std::mem::zeroed();
        assert_eq!(
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT
            ),
            0
        );
    }
}

fn reap(pid: libc::pid_t) {
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
}

/// `late:ev`'s count in `hushtrace report --format json`, and the process's origin.
fn late_events(dir: &Path) -> (u64, String) {
    let o = hushtrace(&["report", "--format", "json", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rep: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = rep["instants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "late:ev")
        .and_then(|i| i["count"].as_u64())
        .unwrap_or(0);
    let origin = rep["processes"][0]["origin"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (n, origin)
}

fn recovers_every_event(reaped: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    let pid = traced_child(&dir, Then::Wait);
    kill_leaving_a_zombie(pid);
    if reaped {
        reap(pid);
    }
    let o = hushtrace(&["recover", dir.to_str().unwrap()]);
    if !reaped {
        reap(pid);
    }
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains(&format!("process {pid}: recovered")), "{out}");
    assert!(!out.contains("left alone"), "{out}");
    assert_eq!(late_events(&dir), (EVENTS, "recovered".to_string()));
}

#[test]
fn a_killed_process_gives_back_its_registered_events() {
    recovers_every_event(true);
}

#[test]
fn a_killed_process_not_reaped_yet_is_recovered() {
    recovers_every_event(false);
}

#[test]
fn a_process_whose_main_thread_ended_is_left_alone_until_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    let pid = traced_child(&dir, Then::MainThreadExits);
    // Its main thread is a zombie (or about to be), the recording thread runs: not recovered.
    let o = hushtrace(&["recover", dir.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        out.contains(&format!("left alone: process {pid} still runs")),
        "{out}"
    );
    kill_leaving_a_zombie(pid);
    let o = hushtrace(&["recover", dir.to_str().unwrap()]);
    reap(pid);
    let out = text(&o.stdout);
    assert!(out.contains(&format!("process {pid}: recovered")), "{out}");
    assert!(!out.contains("left alone"), "{out}");
    assert_eq!(late_events(&dir), (EVENTS, "recovered".to_string()));
}
