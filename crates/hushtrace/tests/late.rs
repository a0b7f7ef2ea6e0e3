//! Late spans (issue 31): a span that ends past its deadline (from the code or from
//! `on_late` rules) is captured by the consumer in `<dir>/late/<n>/<pid>/`, a trace that
//! babeltrace2 reads and that holds the late span, with a line in `<dir>/late/index.json`;
//! captures are bounded by `late_max` and `late_interval`, and counted in the statistics
//! file. No timing assertion: late spans sleep far past a 1 ms deadline, punctual ones have
//! an hour.

mod common;

use common::{babeltrace, temp_dir, wait_until};
use hushtrace::{verify, Mode, Session, SessionBuilder};
use hushtrace_testsupport::late::{index_lines, num, parse_flat, stats};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The keys of an index line, a contract.
const INDEX_KEYS: [&str; 8] = [
    "n",
    "span",
    "pid",
    "tid",
    "start_ns",
    "duration_ns",
    "deadline_ns",
    "dir",
];

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

fn builder(root: &Path, mode: Mode) -> SessionBuilder {
    Session::builder()
        .output_dir(root)
        .mode(mode)
        .subbuf_size(16 * 1024)
        .num_subbufs(4)
        .read_timer(Duration::from_millis(2))
        .late_interval(Duration::ZERO)
}

/// A span `late:cycle` that lasts far longer than a 1 ms deadline from the rules, one
/// `late:quick` with an hour from the code, and some events before.
fn one_late_cycle() {
    for i in 0..50u64 {
        hushtrace::event!("late", "before", i = i);
    }
    {
        let _q = hushtrace::span!(deadline = Duration::from_secs(3600), "late", "quick");
    }
    let _g = hushtrace::span!("late", "cycle", i = 7u64);
    std::thread::sleep(Duration::from_millis(30));
}

/// Checks capture `n` of the index against what `one_late_cycle` did, and that babeltrace2
/// reads its trace, which holds the late span; returns the capture's trace directory.
fn check_capture(root: &Path, line: &BTreeMap<String, String>, n: u64, tid: u32) -> PathBuf {
    let keys: Vec<&str> = line.keys().map(String::as_str).collect();
    let mut want = INDEX_KEYS.to_vec();
    want.sort_unstable();
    assert_eq!(keys, want, "index keys: {line:?}");
    assert_eq!(num(line, "n"), n);
    assert_eq!(line["span"], "late:cycle");
    assert_eq!(num(line, "pid"), u64::from(std::process::id()));
    assert_eq!(num(line, "tid"), u64::from(tid));
    assert_eq!(num(line, "deadline_ns"), 1_000_000);
    assert!(num(line, "duration_ns") > 1_000_000, "{line:?}");
    assert_eq!(line["dir"], format!("late/{n}"));
    let trace = root.join(&line["dir"]).join(std::process::id().to_string());
    // A complete trace of its interval for hushtrace's readers too (not a crashed process's).
    assert!(
        trace.join(".snapshot").is_file(),
        "no snapshot marker in {trace:?}"
    );
    let events = babeltrace(&trace, true);
    // The begin: babeltrace2 rounds the clock's cycles to ns its own way (a ns apart at
    // most), so the nearest event of the span is taken.
    let start_ns = i128::from(num(line, "start_ns"));
    let begin = events
        .iter()
        .filter(|e| e.name == "late:cycle")
        .min_by_key(|e| (e.ts_ns - start_ns).abs())
        .unwrap_or_else(|| panic!("no late:cycle in {events:?}"));
    assert!(
        (begin.ts_ns - start_ns).abs() <= 1,
        "{begin:?} vs {start_ns}"
    );
    assert_eq!(begin.vtid, tid);
    assert!(
        events.iter().any(|e| e.name == "late:before"),
        "no window before the span"
    );
    let late: Vec<_> = events
        .iter()
        .filter(|e| e.name == "hushtrace:late")
        .collect();
    assert!(
        late.iter().any(|e| e.fields["name"] == "cycle"
            && e.fields["category"] == "late"
            && e.int("deadline_ns") == 1_000_000
            && e.int("duration_ns") == i128::from(num(line, "duration_ns"))),
        "no hushtrace:late event for the span: {late:?}"
    );
    assert!(
        !late.iter().any(|e| e.fields["name"] == "quick"),
        "a punctual span was late: {late:?}"
    );
    trace
}

fn capture_in(mode: Mode, tag: &str) {
    let root = temp_dir(tag);
    let session = builder(&root, mode)
        .on_late("late:cycle>1ms")
        .start()
        .expect("start");
    one_late_cycle();
    wait_until("a late-span capture", || index_lines(&root).len() == 1);
    let lines = index_lines(&root);
    // `ctl PID status` counts it (answered by the consumer after the pass that wrote the line).
    let status = hushtrace::control::request(std::process::id(), "status").expect("status");
    assert!(
        status.contains("\"late_spans\":1,\"late_captured\":1,\"late_not_captured\":0"),
        "{status}"
    );
    session.stop().expect("stop");
    check_capture(&root, &lines[0], 1, gettid());
    let s = stats(&root);
    assert_eq!(
        (
            num(&s, "late_spans"),
            num(&s, "late_captured"),
            num(&s, "late_not_captured")
        ),
        (1, 1, 0),
        "{s:?}"
    );
}

#[test]
fn overwrite_mode_captures_the_late_span_and_the_time_before() {
    capture_in(Mode::Overwrite, "late-overwrite");
}

#[test]
fn discard_mode_captures_the_packets_around_the_late_span() {
    capture_in(Mode::Discard, "late-discard");
}

#[test]
fn a_deadline_in_the_code_is_enough() {
    let root = temp_dir("late-code");
    let session = builder(&root, Mode::Overwrite).start().expect("start");
    for i in 0..3u64 {
        hushtrace::event!("late", "before", i = i);
    }
    {
        let _g = hushtrace::span!(deadline = Duration::from_millis(1), "late", "cycle");
        std::thread::sleep(Duration::from_millis(30));
    }
    wait_until("a late-span capture", || index_lines(&root).len() == 1);
    let lines = index_lines(&root);
    session.stop().expect("stop");
    check_capture(&root, &lines[0], 1, gettid());
}

#[test]
fn rules_win_over_the_code() {
    let root = temp_dir("late-rules-win");
    // The code says 1 ms, the rules an hour: not late.
    let session = builder(&root, Mode::Discard)
        .on_late("late:*>1h")
        .start()
        .unwrap_err();
    assert!(session.to_string().contains("late:*>1h"), "{session}");
    let session = builder(&root, Mode::Discard)
        .on_late("late:*>3600s")
        .start()
        .expect("start");
    {
        let _g = hushtrace::span!(deadline = Duration::from_millis(1), "late", "cycle");
        std::thread::sleep(Duration::from_millis(10));
    }
    session.stop().expect("stop");
    let s = stats(&root);
    assert_eq!(num(&s, "late_spans"), 0, "{s:?}");
    assert!(index_lines(&root).is_empty());
}

/// `late_max` and `late_interval`: later late spans are counted, not captured.
fn bounded(max: u64, interval: Duration, tag: &str) -> BTreeMap<String, String> {
    let root = temp_dir(tag);
    let session = builder(&root, Mode::Discard)
        .on_late("late:cycle>1ms")
        .late_max(max)
        .late_interval(interval)
        .start()
        .expect("start");
    for _ in 0..5 {
        let _g = hushtrace::span!("late", "cycle");
        std::thread::sleep(Duration::from_millis(5));
    }
    session.stop().expect("stop");
    let s = stats(&root);
    let lines = index_lines(&root);
    assert_eq!(
        lines.len() as u64,
        num(&s, "late_captured"),
        "{s:?} {lines:?}"
    );
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(num(l, "n"), i as u64 + 1);
        assert_eq!(l["span"], "late:cycle");
        babeltrace(
            &root.join(&l["dir"]).join(std::process::id().to_string()),
            true,
        );
    }
    s
}

#[test]
fn late_max_bounds_the_captures() {
    let s = bounded(2, Duration::ZERO, "late-max");
    assert_eq!(
        (
            num(&s, "late_spans"),
            num(&s, "late_captured"),
            num(&s, "late_not_captured")
        ),
        (5, 2, 3),
        "{s:?}"
    );
}

#[test]
fn late_interval_spaces_the_captures() {
    let s = bounded(16, Duration::from_secs(3600), "late-interval");
    assert_eq!(
        (
            num(&s, "late_spans"),
            num(&s, "late_captured"),
            num(&s, "late_not_captured")
        ),
        (5, 1, 4),
        "{s:?}"
    );
}

#[test]
fn bad_late_settings_are_refused_naming_them() {
    let root = temp_dir("late-bad");
    let e = builder(&root, Mode::Discard)
        .on_late("rt:cycle>15xs")
        .start()
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "invalid value \"rt:cycle>15xs\": deadline rule 'rt:cycle>15xs': unknown unit 'xs' \
         (expected ns, us, ms or s)"
    );
    let e = builder(&root, Mode::Discard)
        .late_window(Duration::from_secs(7200))
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 3600s"), "{e}");
    for v in [
        "HUSHTRACE_ON_LATE",
        "HUSHTRACE_LATE_MAX",
        "HUSHTRACE_LATE_INTERVAL",
        "HUSHTRACE_LATE_WINDOW",
    ] {
        assert!(hushtrace::env::VARS.iter().any(|x| x.name == v), "{v}");
    }
}

/// A thread in no-syscall mode under a seccomp filter ends a late span: no system call, and
/// the consumer captures it.
#[test]
fn a_no_syscall_thread_ends_a_late_span_without_a_system_call() {
    let root = temp_dir("late-seccomp");
    let session = builder(&root, Mode::Overwrite)
        .on_late("late:cycle>1ms")
        .start()
        .expect("start");
    let ready = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicU32::new(0));
    let trapped = Arc::new(AtomicU64::new(u64::MAX));
    let (r2, g2, d2, t2, tr2) = (
        ready.clone(),
        go.clone(),
        done.clone(),
        tid.clone(),
        trapped.clone(),
    );
    let th = std::thread::spawn(move || {
        hushtrace::set_thread_name("rt-late");
        t2.store(gettid(), Ordering::SeqCst);
        // Every callsite hit once before the mode (types published), none late.
        one_late_cycle_spin(&AtomicBool::new(true));
        hushtrace::set_thread_no_syscall();
        let before = verify::trapped_syscalls();
        verify::trap_syscalls_on_this_thread().expect("seccomp");
        r2.store(true, Ordering::Release);
        one_late_cycle_spin(&g2);
        tr2.store(verify::trapped_syscalls() - before, Ordering::SeqCst);
        // The thread stays (in the mode) until the capture is written.
        while !d2.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        hushtrace::clear_thread_no_syscall();
        // SAFETY: no value on this thread's stack relies on its destructor running.
        unsafe { verify::exit_thread() };
    });
    wait_until("the thread in no-syscall mode", || {
        ready.load(Ordering::Acquire)
    });
    std::thread::sleep(Duration::from_millis(30));
    go.store(true, Ordering::Release);
    wait_until("a late-span capture", || index_lines(&root).len() == 1);
    done.store(true, Ordering::Release);
    verify::join_raw(th);
    assert_eq!(
        trapped.load(Ordering::SeqCst),
        0,
        "system calls on the no-syscall thread: first {:?}",
        verify::first_trapped_syscall()
    );
    let lines = index_lines(&root);
    session.stop().expect("stop");
    check_capture(&root, &lines[0], 1, tid.load(Ordering::SeqCst));
}

/// `one_late_cycle` without sleeping: the span ends once `go` is set (spinning).
fn one_late_cycle_spin(go: &AtomicBool) {
    for i in 0..50u64 {
        hushtrace::event!("late", "before", i = i);
    }
    {
        let _q = hushtrace::span!(deadline = Duration::from_secs(3600), "late", "quick");
    }
    let _g = hushtrace::span!("late", "cycle", i = 7u64);
    while !go.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
}

/// An async span with a deadline, ended late on another thread: noted there, captured.
#[test]
fn an_async_span_ended_late_on_another_thread_is_captured() {
    let root = temp_dir("late-async");
    let session = builder(&root, Mode::Overwrite).start().expect("start");
    let quick = hushtrace::async_span!(deadline = Duration::from_secs(3600), "late", "fast");
    drop(quick);
    let span = hushtrace::async_span!(deadline = Duration::from_millis(1), "late", "request");
    let id = span.id();
    let ender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        drop(span);
        gettid()
    });
    let tid = ender.join().unwrap();
    wait_until("a late-span capture", || index_lines(&root).len() == 1);
    let lines = index_lines(&root);
    session.stop().expect("stop");
    let l = &lines[0];
    assert_eq!(l["span"], "late:request");
    assert_eq!(num(l, "tid"), u64::from(tid));
    assert_eq!(num(l, "deadline_ns"), 1_000_000);
    let events = babeltrace(
        &root.join(&l["dir"]).join(std::process::id().to_string()),
        true,
    );
    let late: Vec<_> = events
        .iter()
        .filter(|e| e.name == "hushtrace:late")
        .collect();
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0].fields["name"], "request");
    assert_eq!(late[0].vtid, tid);
    assert!(
        events
            .iter()
            .any(|e| e.name == "late:request" && e.int("id") == i128::from(id)),
        "no begin of the async span: {events:?}"
    );
}

/// A late span that ends just before the session stops is still captured, by the consumer's
/// last pass, in both modes.
#[test]
fn a_late_span_right_before_the_stop_is_captured() {
    for (mode, tag) in [
        (Mode::Overwrite, "late-stop-ow"),
        (Mode::Discard, "late-stop-d"),
    ] {
        let root = temp_dir(tag);
        // A read timer of a minute: the consumer's only pass after the span is the stop's.
        let session = builder(&root, mode)
            .read_timer(Duration::from_secs(60))
            .on_late("late:cycle>1ms")
            .start()
            .expect("start");
        one_late_cycle();
        session.stop().expect("stop");
        let lines = index_lines(&root);
        assert_eq!(lines.len(), 1, "{mode:?}: {lines:?}");
        check_capture(&root, &lines[0], 1, gettid());
    }
}

/// `late_cycle` (hushtrace-testbins) traced by the environment only, as `hushtrace record
/// --on-late` runs a program: its first stdout line, and the trace root.
fn run_late_cycle(tag: &str, vars: &[(&str, &str)]) -> (Vec<String>, PathBuf) {
    let root = temp_dir(tag);
    let mut cmd = std::process::Command::new(common::testbin_path("late_cycle"));
    for (k, _) in std::env::vars() {
        if k.starts_with("HUSHTRACE_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("HUSHTRACE_OUTPUT", &root)
        .envs(vars.iter().copied());
    let out = cmd.output().expect("run late_cycle");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "late_cycle: {stdout}");
    (stdout.lines().map(str::to_string).collect(), root)
}

#[test]
fn the_environment_sets_rules_and_bounds() {
    for mode in ["overwrite", "discard"] {
        let (lines, root) = run_late_cycle(
            &format!("late-env-{mode}"),
            &[
                ("HUSHTRACE_MODE", mode),
                ("HUSHTRACE_ON_LATE", "rt:cycle>1ms,rt:quick>3600s"),
                ("HUSHTRACE_LATE_MAX", "2"),
                ("HUSHTRACE_LATE_INTERVAL", "0"),
                ("HUSHTRACE_LATE_WINDOW", "50ms"),
            ],
        );
        assert_eq!(lines, vec!["alive"], "{mode}");
        let index = index_lines(&root);
        assert_eq!(index.len(), 2, "{mode}: {index:?}");
        let pid = num(&index[0], "pid");
        for (i, l) in index.iter().enumerate() {
            assert_eq!(num(l, "n"), i as u64 + 1);
            assert_eq!(l["span"], "rt:cycle");
            assert_eq!(num(l, "deadline_ns"), 1_000_000);
            let events = babeltrace(&root.join(&l["dir"]).join(pid.to_string()), true);
            assert!(
                events.iter().any(|e| e.name == "hushtrace:late"
                    && e.fields["name"] == "cycle"
                    && e.int("duration_ns") == i128::from(num(l, "duration_ns"))),
                "{mode}: capture {} lacks its late span",
                l["dir"]
            );
        }
        let s = parse_flat(
            &std::fs::read_to_string(root.join(format!("{pid}.stats.json"))).expect("stats"),
        );
        assert_eq!(
            (
                num(&s, "late_spans"),
                num(&s, "late_captured"),
                num(&s, "late_not_captured")
            ),
            (3, 2, 1),
            "{mode}: {s:?}"
        );
    }
}

#[test]
fn bad_variables_stop_the_start_naming_them() {
    for (var, value, reason) in [
        ("HUSHTRACE_ON_LATE", "rt:cycle>15xs", "unknown unit 'xs'"),
        ("HUSHTRACE_ON_LATE", "rt:cycle", "expected GLOB>DURATION"),
        ("HUSHTRACE_LATE_MAX", "-1", "whole number"),
        ("HUSHTRACE_LATE_INTERVAL", "1 hour", "duration with a unit"),
        ("HUSHTRACE_LATE_WINDOW", "100", "duration with a unit"),
    ] {
        let (lines, root) = run_late_cycle("late-env-bad", &[(var, value)]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with(&format!("start: err: invalid {var}={value:?}: "))
                && lines[0].contains(reason),
            "{var}={value}: {lines:?}"
        );
        assert!(!root.join("late").exists());
    }
}
