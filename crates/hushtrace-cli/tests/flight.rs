//! `hushtrace ctl` and `hushtrace recover` against real traced processes (issue 10).

mod common;

use common::{hushtrace_status as hushtrace, temp};
use std::time::Duration;

#[test]
fn ctl_controls_a_running_program() {
    let dir = temp("ctl");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .mode(hushtrace::Mode::Overwrite)
        .read_timer(Duration::from_millis(2))
        .start()
        .unwrap();
    hushtrace::event!("cli", "ev", n = 1u32);
    let pid = std::process::id().to_string();
    let (code, out, err) = hushtrace(&["ctl", &pid, "status"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"mode\":\"overwrite\""), "{out}");
    let (code, out, _) = hushtrace(&["ctl", "list"]);
    assert_eq!(code, 0);
    assert!(
        out.lines().any(|l| l.starts_with(&format!("{pid} "))),
        "{out}"
    );
    let (code, out, err) = hushtrace(&["ctl", dir.to_str().unwrap(), "disable", "cli:*"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"matched\":"), "{out}");
    let snap = temp("ctl-snap");
    let (code, out, err) = hushtrace(&["ctl", &pid, "snapshot", "-o", snap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"path\":"), "{out}");
    // Usage errors and dead targets: clear messages, non-zero status.
    let (code, _, err) = hushtrace(&["ctl", &pid, "launch"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("usage"), "{err}");
    let (code, _, err) = hushtrace(&["ctl", "999999999", "status"]);
    assert_eq!(code, 1);
    assert!(err.contains("no process 999999999"), "{err}");
    session.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&snap);
}

#[test]
fn recover_and_report_after_a_kill() {
    let dir = temp("recover");
    // SAFETY: the child traces and is killed; it never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let _s = hushtrace::Session::builder()
            .output_dir(&dir)
            .mode(hushtrace::Mode::Overwrite)
            .subbuf_size(4096)
            .start()
            .unwrap();
        for seq in 0..3000u64 {
            hushtrace::event!("cli", "seq", seq = seq);
        }
        // SAFETY: the child dies without stopping its session, as a crash would.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    let d = dir.to_str().unwrap();
    // report recovers first by itself and says so.
    let (code, out, err) = hushtrace(&["report", d, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("recovered") && err.contains("hushtrace recover"),
        "{err}"
    );
    assert!(out.contains("cli:seq"), "{out}");
    // Idempotent.
    let (code, out, err) = hushtrace(&["recover", d]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing to recover"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
