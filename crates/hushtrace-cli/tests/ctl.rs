//! `hushtrace ctl` through the built binary (issue 20, point 6): `ctl PID list` shows the
//! process's tracepoints and their state; after `ctl PID stop`, `status` says the process is
//! stopped and `ctl PID start` starts the session again with the same settings; `ctl list`
//! says when no process is traced.

mod common;

use common::{hushtrace_status_env as hushtrace, temp};
use std::time::{Duration, Instant};

/// Waits (at most 30 s) until `f` holds.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn list_stop_status_start_again() {
    let dir = temp("ctl-restart");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(8192)
        .num_subbufs(4)
        .read_timer(Duration::from_millis(2))
        .start()
        .unwrap();
    hushtrace::event!("ctlt", "one", n = 1u32);
    hushtrace::event!("ctlt", "two", n = 2u32);
    let pid = std::process::id().to_string();

    // The tracepoints and their state, as `lttng list -u` shows them.
    let (code, _, err) = hushtrace(&["ctl", &pid, "disable", "ctlt:two"], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = hushtrace(&["ctl", &pid, "list"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("PID: {pid} - Name: ")) && out.contains("(running)"),
        "{out}"
    );
    assert!(
        out.contains("      ctlt:one (type: instant) [enabled]\n"),
        "{out}"
    );
    assert!(
        out.contains("      ctlt:two (type: instant) [disabled]\n"),
        "{out}"
    );

    // Stopped from outside: the socket stays, and says so.
    let (code, out, err) = hushtrace(&["ctl", &pid, "stop"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"stopping\":true"), "{out}");
    wait_for("the stop", || {
        dir.join(format!("{pid}.stats.json")).exists()
    });
    let mut status = String::new();
    wait_for("a stopped status", || {
        let (_, out, _) = hushtrace(&["ctl", &pid, "status"], &[]);
        status = out;
        status.contains("\"state\":\"stopped\"")
    });
    assert!(status.contains("\"ok\":true"), "{status}");
    let (code, out, _) = hushtrace(&["ctl", "list"], &[]);
    assert_eq!(code, 0);
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("{pid} ")) && l.ends_with(" stopped")),
        "{out}"
    );
    // A stopped process still lists its tracepoints; a second stop says it is stopped.
    let (code, out, err) = hushtrace(&["ctl", &pid, "list"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("(stopped)") && out.contains("ctlt:one"),
        "{out}"
    );
    let (code, out, _) = hushtrace(&["ctl", &pid, "stop"], &[]);
    assert_eq!(code, 1);
    assert!(out.contains("already stopped"), "{out}");

    // Started again, with the same settings, into a new trace directory.
    let (code, out, err) = hushtrace(&["ctl", &pid, "start"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"state\":\"running\""), "{out}");
    let (code, status, err) = hushtrace(&["ctl", &pid, "status"], &[]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "\"state\":\"running\"",
        "\"subbuf_size\":8192",
        "\"num_subbufs\":4",
        "\"read_timer_ms\":2",
        "\"mode\":\"discard\"",
    ] {
        assert!(status.contains(want), "{want} in {status}");
    }
    // A running session refuses a second start.
    let (code, out, _) = hushtrace(&["ctl", &pid, "start"], &[]);
    assert_eq!(code, 1);
    assert!(out.contains("running"), "{out}");
    hushtrace::event!("ctlt", "after", n = 3u32);
    let (code, _, err) = hushtrace(&["ctl", &pid, "stop"], &[]);
    assert_eq!(code, 0, "{err}");
    wait_for("the second stop", || {
        dir.join(format!("{pid}.1.stats.json")).exists()
    });
    let stats = std::fs::read_to_string(dir.join(format!("{pid}.1.stats.json"))).unwrap();
    assert!(stats.contains("\"written\":1,"), "{stats}");
    // The handle of the first session still reports its own statistics.
    let first = session.stop().unwrap();
    assert_eq!(first.events_written, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctl_list_says_when_no_process_is_traced() {
    let runtime = temp("ctl-none");
    std::fs::create_dir_all(&runtime).unwrap();
    let (code, out, err) = hushtrace(&["ctl", "list"], &[("XDG_RUNTIME_DIR", &runtime)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("no process of this user is traced"), "{err}");
    let _ = std::fs::remove_dir_all(&runtime);
}
