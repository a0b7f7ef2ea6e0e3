//! Session handles from C (`tests/c/sessions.c`): a second `ht_session_stop` of the same
//! handle and a pointer that is not a handle are errors, never a crash (issue 18, point 6);
//! `ht_session_start` refuses a directory holding another process's trace and
//! `ht_session_append` adds to it (issue 20, point 5).

#[path = "../../hushtrace/tests/common/mod.rs"]
mod common;
mod support;

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
