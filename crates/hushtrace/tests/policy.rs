//! `HUSHTRACE_NO_SYSCALL_POLICY`: what a no-syscall thread does when a timestamp would need
//! `clock_gettime` (forced with `HUSHTRACE_CLOCK=monotonic`). Each case runs
//! `policy_probe` (`crates/hushtrace-testbins`) in its own process.

mod common;

use common::{babeltrace, temp_dir, testbin_path};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

fn probe(policy: &str, extra: &[&str]) -> (Output, std::path::PathBuf) {
    let dir = temp_dir(&format!("policy-{policy}"));
    let exe = testbin_path("policy_probe");
    let out = Command::new(exe)
        .arg(&dir)
        .args(extra)
        .env("HUSHTRACE_CLOCK", "monotonic")
        .env("HUSHTRACE_NO_SYSCALL_POLICY", policy)
        .output()
        .expect("run policy_probe");
    (out, dir)
}

fn json_field(out: &Output, k: &str) -> u64 {
    let s = String::from_utf8_lossy(&out.stdout);
    let key = format!("\"{k}\":");
    s.split(&key)
        .nth(1)
        .and_then(|r| r.split([',', '}']).next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {k} in {s:?}"))
}

#[test]
fn zero_policy_records_zero_timestamps_without_syscalls() {
    let (out, dir) = probe("zero", &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json_field(&out, "sigsys"), 0);
    assert_eq!(json_field(&out, "written"), 10);
    let events = babeltrace(&dir, false);
    let probe: Vec<_> = events.iter().filter(|e| e.name == "probe:ev").collect();
    assert_eq!(probe.len(), 10);
    // Timestamp 0 is the clock's origin: every event prints the same time.
    assert!(probe.iter().all(|e| e.ts_ns == probe[0].ts_ns));
    assert!(events
        .iter()
        .all(|e| e.name != "hushtrace:no_syscall_violation"));
}

#[test]
fn log_policy_records_a_violation_event_without_syscalls() {
    let (out, dir) = probe("log", &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json_field(&out, "sigsys"), 0);
    let events = babeltrace(&dir, false);
    let v: Vec<_> = events
        .iter()
        .filter(|e| e.name == "hushtrace:no_syscall_violation")
        .collect();
    assert_eq!(v.len(), 1, "one violation event per thread and kind");
    assert_eq!(v[0].fields["what"], "clock_gettime");
    assert_eq!(v[0].procname, "probe");
    assert_eq!(events.iter().filter(|e| e.name == "probe:ev").count(), 10);
}

#[test]
fn abort_policy_aborts_the_process() {
    let (out, _dir) = probe("abort", &["--no-filter"]);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "expected SIGABRT: {out:?}"
    );
}

#[test]
fn unknown_policy_is_a_clear_startup_error() {
    let (out, _dir) = probe("sometimes", &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("HUSHTRACE_NO_SYSCALL_POLICY") && err.contains("sometimes"),
        "{err}"
    );
}
