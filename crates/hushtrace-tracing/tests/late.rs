//! Deadlines on `tracing` spans (issue 31): a span of the bridge whose `target:name` matches a
//! session's `on_late` rule is checked when it closes (its duration: creation to close, as
//! the bridge records its begin and end), and a late one is captured by the consumer in
//! `<dir>/late/<n>/<pid>/` like a native span, with a line in `<dir>/late/index.json` and the
//! statistics file's counters. No timing assertion: late spans sleep far past a 1 ms
//! deadline, punctual ones have an hour.

mod common;

use common::trace_dir;
use hushtrace::{verify, Mode, Session};
use hushtrace_testsupport::late::{index_lines, num, stats};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing_subscriber::layer::SubscriberExt;

/// The statistics file's late-span counters (`<root>/<pid>.stats.json`).
fn late_counters(root: &Path) -> (u64, u64, u64) {
    let s = stats(root);
    (
        num(&s, "late_spans"),
        num(&s, "late_captured"),
        num(&s, "late_not_captured"),
    )
}

/// Waits (at most 20 s) until `cond` holds.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A session in `mode` with the deadline `rules`, captures not rate-limited.
fn session(root: &Path, mode: Mode, rules: &str) -> Session {
    Session::builder()
        .output_dir(root)
        .mode(mode)
        .subbuf_size(16 * 1024)
        .num_subbufs(4)
        .read_timer(Duration::from_millis(2))
        .late_interval(Duration::ZERO)
        .on_late(rules)
        .start()
        .expect("start the session")
}

/// Runs `f` with hushtrace's layer as the thread's subscriber.
fn with_layer(f: impl FnOnce()) {
    let subscriber = tracing_subscriber::registry().with(hushtrace_tracing::layer());
    tracing::subscriber::with_default(subscriber, f);
}

/// The events of a capture's trace as babeltrace2 prints them (it must read it; warnings are
/// allowed, as for the runtime's captures: a capture may start inside a packet sequence).
fn capture_lines(root: &Path, line: &BTreeMap<String, String>) -> Vec<String> {
    let trace = root.join(&line["dir"]).join(std::process::id().to_string());
    assert!(
        trace.join(".snapshot").is_file(),
        "no snapshot marker in {trace:?}"
    );
    let out = Command::new("babeltrace2")
        .arg(&trace)
        .output()
        .expect("babeltrace2 is required (apt-get install -y babeltrace2)");
    assert!(
        out.status.success(),
        "babeltrace2 {trace:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('['))
        .map(str::to_string)
        .collect()
}

/// The value of field `name` in a babeltrace2 line (`name = value`), quotes removed.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name} = "))? + name.len() + 4;
    let rest = &line[at..];
    let end = rest.find([',', ' ', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

/// Checks index line `line` (capture `n`) names the late span `span` (`category:name`) of
/// `deadline_ns`, and that its trace holds the span's begin (with `id = span_id`) and its
/// `hushtrace:late` event; returns the thread ids (`vtid`) of the begin and of the late event.
fn check_capture(
    root: &Path,
    line: &BTreeMap<String, String>,
    n: u64,
    span: &str,
    deadline_ns: u64,
) -> (String, String) {
    assert_eq!(num(line, "n"), n, "{line:?}");
    assert_eq!(line["span"], span, "{line:?}");
    assert_eq!(num(line, "pid"), u64::from(std::process::id()));
    assert_eq!(num(line, "deadline_ns"), deadline_ns);
    assert!(num(line, "duration_ns") > deadline_ns, "{line:?}");
    assert_eq!(line["dir"], format!("late/{n}"));
    let events = capture_lines(root, line);
    let (category, name) = span.rsplit_once(':').unwrap();
    let begin = events
        .iter()
        .find(|l| l.contains(&format!(" {span}: ")) && field(l, "parent").is_some())
        .unwrap_or_else(|| panic!("no begin of {span} in {events:#?}"));
    let late = events
        .iter()
        .find(|l| {
            l.contains(" hushtrace:late: ")
                && field(l, "category") == Some(category)
                && field(l, "name") == Some(name)
                && field(l, "duration_ns") == Some(line["duration_ns"].as_str())
        })
        .unwrap_or_else(|| panic!("no hushtrace:late for {span} as {line:?} in {events:#?}"));
    assert_eq!(
        field(late, "deadline_ns").map(str::to_string),
        Some(deadline_ns.to_string()),
        "{late}"
    );
    assert_eq!(
        field(late, "vtid").map(str::to_string),
        Some(line["tid"].clone()),
        "the index names the thread that ended the span: {late}"
    );
    let vtid = |l: &str| field(l, "vtid").unwrap().to_string();
    (vtid(begin), vtid(late))
}

/// Lines of `hushtrace:late` events in a capture.
fn late_events(lines: &[String]) -> Vec<&String> {
    lines
        .iter()
        .filter(|l| l.contains(" hushtrace:late: "))
        .collect()
}

fn late_span_captured_in(mode: Mode, tag: &str) {
    let root = trace_dir(tag);
    // A glob on the name; a punctual span with an hour; a slow span no rule names.
    let s = session(&root, mode, "rt:cyc*>1ms,rt:quick>3600s");
    with_layer(|| {
        for i in 0..20u64 {
            tracing::info!(target: "rt", i, "before");
        }
        drop(tracing::info_span!(target: "rt", "quick", i = 1u64));
        {
            let _slow = tracing::info_span!(target: "other", "cycle", i = 2u64).entered();
            std::thread::sleep(Duration::from_millis(20));
        }
        let _late = tracing::info_span!(target: "rt", "cycle", i = 7u64).entered();
        std::thread::sleep(Duration::from_millis(30));
    });
    wait_until("a late-span capture", || index_lines(&root).len() == 1);
    s.stop().expect("stop");
    let lines = index_lines(&root);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let (begin_tid, late_tid) = check_capture(&root, &lines[0], 1, "rt:cycle", 1_000_000);
    assert_eq!(begin_tid, late_tid, "begun and ended on this thread");
    let events = capture_lines(&root, &lines[0]);
    assert_eq!(late_events(&events).len(), 1, "{events:#?}");
    assert!(
        events.iter().any(|l| l.contains(" rt:event ")),
        "no events before the span: {events:#?}"
    );
    assert_eq!(late_counters(&root), (1, 1, 0));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_late_tracing_span_is_captured_in_overwrite_mode() {
    late_span_captured_in(Mode::Overwrite, "late-overwrite");
}

#[test]
fn a_late_tracing_span_is_captured_in_discard_mode() {
    late_span_captured_in(Mode::Discard, "late-discard");
}

#[test]
fn punctual_and_unnamed_spans_are_not_late() {
    let root = trace_dir("late-punctual");
    let s = session(&root, Mode::Discard, "rt:*>3600s");
    with_layer(|| {
        for i in 0..3u64 {
            let _g = tracing::info_span!(target: "rt", "cycle", i).entered();
            std::thread::sleep(Duration::from_millis(5));
        }
        let _other = tracing::info_span!(target: "other", "cycle").entered();
        std::thread::sleep(Duration::from_millis(20));
    });
    s.stop().expect("stop");
    assert_eq!(late_counters(&root), (0, 0, 0));
    assert!(index_lines(&root).is_empty());
    assert!(!root.join("late").exists(), "a capture without a late span");
    let _ = std::fs::remove_dir_all(&root);
}

/// A span created on one thread and closed on another (a tokio task's span moving between
/// workers): its duration runs from creation to close, and the thread that closes it notes it.
/// Overwrite mode: the capture is a snapshot of every ring, so it holds the begin, still in
/// the creating thread's open packet.
#[test]
fn a_span_closed_on_another_thread_is_checked_there() {
    let root = trace_dir("late-moved");
    let s = session(&root, Mode::Overwrite, "rt:moved>1ms");
    let subscriber = tracing_subscriber::registry().with(hushtrace_tracing::layer());
    let dispatch = tracing::Dispatch::new(subscriber);
    let span = tracing::dispatcher::with_default(
        &dispatch,
        || tracing::info_span!(target: "rt", "moved", i = 3u64),
    );
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        drop(span);
    })
    .join()
    .unwrap();
    drop(dispatch);
    s.stop().expect("stop");
    let lines = index_lines(&root);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let (begin_tid, late_tid) = check_capture(&root, &lines[0], 1, "rt:moved", 1_000_000);
    assert_ne!(begin_tid, late_tid, "ended on the other thread");
    assert_eq!(late_counters(&root), (1, 1, 0));
    let _ = std::fs::remove_dir_all(&root);
}

/// A target with `::` (a module path) is matched by a glob's category part with a wildcard,
/// as `hushtrace::enable` globs are; several late spans, each captured.
#[test]
fn rules_match_module_path_targets_with_globs() {
    let root = trace_dir("late-glob");
    let s = session(&root, Mode::Discard, "my_app*:handle>1ms");
    with_layer(|| {
        for i in 0..2u64 {
            let _g = tracing::info_span!(target: "my_app::net", "handle", i).entered();
            std::thread::sleep(Duration::from_millis(10));
        }
        let _no = tracing::info_span!(target: "my_app::net", "other").entered();
        std::thread::sleep(Duration::from_millis(10));
    });
    s.stop().expect("stop");
    let lines = index_lines(&root);
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (i, l) in lines.iter().enumerate() {
        check_capture(&root, l, i as u64 + 1, "my_app::net:handle", 1_000_000);
    }
    assert_eq!(late_counters(&root), (2, 2, 0));
    let _ = std::fs::remove_dir_all(&root);
}

/// A `tracing` span with a deadline, created and closed by `f`'s thread: `rt:cycle` with one
/// field, ending once `go` is set (spinning).
fn spin_cycle(go: &AtomicBool) {
    let _g = tracing::info_span!(target: "rt", "cycle", i = 7u64).entered();
    while !go.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
}

/// A thread in no-syscall mode under a seccomp filter creates and closes a late `tracing`
/// span: the bridge's deadline path (the start kept and taken, the check, the late note) makes
/// no system call, and the consumer captures the span.
#[test]
fn a_no_syscall_thread_closes_a_late_tracing_span_without_a_system_call() {
    let root = trace_dir("late-seccomp");
    let s = session(&root, Mode::Overwrite, "rt:cycle>1ms");
    let ready = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let trapped = Arc::new(AtomicU64::new(u64::MAX));
    let (r2, g2, d2, tr2) = (ready.clone(), go.clone(), done.clone(), trapped.clone());
    let th = std::thread::spawn(move || {
        let default = tracing::subscriber::set_default(
            tracing_subscriber::registry().with(hushtrace_tracing::layer()),
        );
        // The callsite registered, its typed variant published and tracing's per-thread state
        // made before the mode (a no-syscall thread never registers).
        spin_cycle(&AtomicBool::new(true));
        hushtrace::set_thread_no_syscall();
        let before = verify::trapped_syscalls();
        verify::trap_syscalls_on_this_thread().expect("seccomp");
        r2.store(true, Ordering::Release);
        spin_cycle(&g2);
        tr2.store(verify::trapped_syscalls() - before, Ordering::SeqCst);
        while !d2.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        hushtrace::clear_thread_no_syscall();
        drop(default);
        // SAFETY: nothing on this thread's stack relies on its destructor running (the
        // subscriber's guard is dropped above).
        unsafe { verify::exit_thread() };
    });
    wait_until("the thread in no-syscall mode", || {
        ready.load(Ordering::Acquire)
    });
    std::thread::sleep(Duration::from_millis(30));
    go.store(true, Ordering::Release);
    wait_until("a late-span capture", || !index_lines(&root).is_empty());
    done.store(true, Ordering::Release);
    verify::join_raw(th);
    assert_eq!(
        trapped.load(Ordering::SeqCst),
        0,
        "system calls on the no-syscall thread: first {:?}",
        verify::first_trapped_syscall()
    );
    s.stop().expect("stop");
    // The warm-up span is punctual unless the machine stalled it past 1 ms: the late one is
    // the last line.
    let lines = index_lines(&root);
    let last = lines.last().unwrap();
    check_capture(&root, last, lines.len() as u64, "rt:cycle", 1_000_000);
    let _ = std::fs::remove_dir_all(&root);
}
