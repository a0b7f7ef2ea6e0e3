//! Session handles from C (`tests/c/sessions.c`): a second `ht_session_stop` of the same
//! handle and a pointer that is not a handle are errors, never a crash (issue 18, point 6);
//! `ht_session_start` refuses a directory holding another process's trace and
//! `ht_session_append` adds to it (issue 20, point 5); `ht_start_from_env` returns what
//! `hushtrace.h` says (issue 30).

#[path = "../../hushtrace/tests/common/mod.rs"]
mod common;
mod support;

use std::path::Path;
use support::{program, run_ok, trace_dir, Link};

#[test]
fn second_stop_is_an_error_and_existing_traces_need_append() {
    let exe = program("sessions.c", Link::Shared);
    let old = trace_dir("sessions-old");
    let fresh = trace_dir("sessions-fresh");
    run_ok(&exe, &["prepare", old.to_str().unwrap()], &[]);
    let out = run_ok(
        &exe,
        &["check", old.to_str().unwrap(), fresh.to_str().unwrap()],
        &[],
    );
    assert!(!out.contains("FAIL"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        11,
        "{out}"
    );
    let traces = |d: &std::path::Path| {
        std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.path().join("metadata").is_file())
            .count()
    };
    assert_eq!(traces(&old), 2, "the old trace and the appended one");
    assert_eq!(traces(&fresh), 2, "two sessions of one process");
    let _ = std::fs::remove_dir_all(&old);
    let _ = std::fs::remove_dir_all(&fresh);
}

/// `from_env.c`'s `ht_start_from_env()` result and last error under `vars`.
fn from_env(exe: &Path, vars: &[(&str, &str)]) -> (i32, String) {
    let out = run_ok(exe, &[], vars);
    let line = out.lines().next().unwrap_or_default();
    let (r, msg) = line.split_once(' ').unwrap_or((line, ""));
    let r = r.parse().unwrap_or_else(|_| panic!("no result in {out:?}"));
    (r, msg.to_string())
}

#[test]
fn start_from_env_returns_what_the_header_says() {
    let exe = program("from_env.c", Link::Shared);
    // No variable of the table set, or only empty ones: 1, nothing to do.
    assert_eq!(from_env(&exe, &[]), (1, String::new()));
    assert_eq!(
        from_env(&exe, &[("HUSHTRACE_MODE", "")]),
        (1, String::new())
    );
    // Another one set without HUSHTRACE_OUTPUT: an error naming both.
    let (r, msg) = from_env(&exe, &[("HUSHTRACE_RELAY", "net://collector")]);
    assert_eq!(r, -2, "HT_ERR_FAILED: {msg}");
    assert!(
        msg.contains("HUSHTRACE_RELAY") && msg.contains("without HUSHTRACE_OUTPUT"),
        "{msg}"
    );
    // A bad value: an error naming the variable, and nothing written.
    let dir = trace_dir("from-env");
    let d = dir.to_str().unwrap();
    let (r, msg) = from_env(
        &exe,
        &[("HUSHTRACE_OUTPUT", d), ("HUSHTRACE_MODE", "sometimes")],
    );
    assert_eq!(r, -2, "HT_ERR_FAILED: {msg}");
    assert!(msg.contains("HUSHTRACE_MODE"), "{msg}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
    // HUSHTRACE_OUTPUT: 0, and the session started records until exit().
    assert_eq!(
        from_env(&exe, &[("HUSHTRACE_OUTPUT", d)]),
        (0, String::new())
    );
    let events = common::babeltrace(&dir, false);
    assert_eq!(
        events.iter().filter(|e| e.name == "env:after").count(),
        1,
        "{events:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
