//! `record --kernel` end to end, on the real kernel: a FIFO thread preempted by a hog, a
//! thread blocked on a pipe, the alignment of kernel switches with the spans, babeltrace2 on
//! the merged directory, the access error, and the clean-up after signals and SIGKILL.
//!
//! ftrace instances are global: these tests take an exclusive lock file so that (under
//! nextest, one process per test) they never run at the same time. They fail where tracefs
//! cannot be used (not root, no tracefs) or SCHED_FIFO is refused: run them as root.

mod common;

use common::{convert_with, hushtrace, kernel_events as all, testbin};
use hushtrace_cli::kernel_report;
use hushtrace_ctf::reader::Session;
use hushtrace_ctf::Kind;
use hushtrace_kernel::{Event, KernelTrace};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Serializes the tests that use tracefs (across processes). Panics where tracefs cannot be
/// used: these tests must run (as root, with tracefs), never pass by skipping.
fn tracefs_lock(test: &str) -> Option<std::fs::File> {
    if let Err(e) = hushtrace_kernel::tracefs::find_or_mount() {
        panic!("{test} needs tracefs (run as root): {e}");
    }
    Some(hushtrace_testsupport::cross_process_lock(
        "hushtrace-kernel-tests",
    ))
}

fn tracefs_usable() -> bool {
    hushtrace_kernel::tracefs::find_or_mount().is_ok()
}

/// `key=value` lines of a program's output.
fn values(out: &Output) -> HashMap<String, i64> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// Records `kernel_workload ARGS` with `--kernel CATS` (a failure when the workload could not
/// get what it needs: SCHED_FIFO refused, exit 3).
fn record(dir: &Path, cats: &str, args: &[&str]) -> Option<Output> {
    let bin = testbin("kernel_workload");
    let mut a = vec![
        "record",
        "--kernel",
        cats,
        "-o",
        dir.to_str().unwrap(),
        "--",
    ];
    a.push(bin.to_str().unwrap());
    a.extend_from_slice(args);
    let out = hushtrace(&a);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(3),
        "the workload was refused SCHED_FIFO or CPU pinning (run as root): {stderr}"
    );
    assert!(out.status.success(), "record failed: {stderr}");
    assert!(stderr.contains("hushtrace: kernel: "), "{stderr}");
    assert!(!stderr.contains("LOST"), "{stderr}");
    Some(out)
}

/// The ftrace instance of recorder `pid` (of this PID namespace), if it has one.
fn instance_of(pid: u32) -> Option<std::path::PathBuf> {
    let root = hushtrace_kernel::tracefs::find_or_mount().unwrap();
    let me = hushtrace_kernel::owner::Owner::current().unwrap();
    std::fs::read_dir(root.join("instances"))
        .unwrap()
        .flatten()
        .find(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            !n.ends_with("-sys")
                && hushtrace_kernel::owner::Owner::parse(&n)
                    .is_some_and(|o| o.pid == pid && o.ns == me.ns)
        })
        .map(|e| e.path())
}

fn no_instance_of(pid: u32) -> bool {
    instance_of(pid).is_none()
}

#[test]
fn kernel_preemption_is_attributed_to_the_hog_and_aligned_with_the_spans() {
    let Some(_lock) = tracefs_lock("kernel_preemption") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let Some(out) = record(&dir, "sched,irq", &["preempt", "150"]) else {
        return;
    };
    let v = values(&out);
    let (cycle, hog, measured) = (v["cycle_tid"], v["hog_tid"], v["hog_in_spans_ns"]);
    assert!(measured > 0, "the hog never preempted the cycles");

    // The report: the cycles' off-CPU time is preemption by the hog, as the program measured.
    let session = Session::open(&dir).unwrap();
    let k = kernel_report::compute(&session, Some("rt:cycle"), 5).unwrap();
    let row = k
        .rows
        .iter()
        .find(|r| r.name == "rt:cycle")
        .expect("rt:cycle row");
    assert_eq!(row.count, 150);
    // The cycles' runnable time goes to the hog first, as much as the program measured its
    // bursts inside them. (Anything else that ran instead, a threaded interrupt handler at
    // a higher real-time priority for instance, is listed after it.)
    let (top, ns) = &row.ran_instead[0];
    assert_eq!(top, &format!("hog/{hog}"), "{}", k.to_text());
    let err = (*ns - measured).abs() as f64 / measured as f64;
    assert!(
        err < 0.05,
        "hog ran {ns} ns inside the cycles, the program measured {measured} ns ({:.1}% off)\n{}",
        err * 100.0,
        k.to_text()
    );
    assert!(row.blocked_ns < row.runnable_ns / 20, "{}", k.to_text());
    // --slowest: the longest cycles, each explained by the hog.
    assert_eq!(k.slowest.len(), 5);
    let text = k.slowest_text();
    assert!(text.contains(&format!("ran instead hog/{hog}")), "{text}");
    // The report explains spans while it streams the kernel trace (forgetting what no span
    // needs any more): the same answers as the whole timeline built first.
    let kt = KernelTrace::open(&dir.join("kernel")).unwrap();
    let whole = hushtrace_kernel::analysis::Timeline::build(
        &kt,
        Some(&[session.traces[0].desc.vpid as i32]),
    )
    .unwrap();
    for sp in &k.slowest {
        let x = whole.explain(sp.tid as i32, sp.start_ns, sp.start_ns + sp.duration_ns);
        let y = sp.why.as_ref().unwrap();
        assert_eq!(
            (x.runnable_ns, x.blocked_ns, &x.ran_instead, &x.woken_by),
            (y.runnable_ns, y.blocked_ns, &y.ran_instead, &y.woken_by)
        );
    }
    let o = hushtrace(&[
        "report",
        dir.to_str().unwrap(),
        "--slowest",
        "rt:cycle",
        "-n",
        "3",
    ]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("The 3 longest rt:cycle (of 150)"), "{s}");
    assert!(
        s.contains("#-") || s.contains("-#"),
        "no preemption in the bars: {s}"
    );
    let o = hushtrace(&["report", dir.to_str().unwrap()]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("Off-CPU time per span"), "{s}");
    let o = hushtrace(&["report", dir.to_str().unwrap(), "--format", "json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kernel"]["spans"][0]["name"], "rt:cycle");
    assert_eq!(j["kernel"]["spans"][0]["runnable_ns"], row.runnable_ns);
    assert!(
        j["spans"].is_array(),
        "the rest of the report is still there"
    );

    // Alignment: every switch into sleep (the 300 µs pause right after each span's end)
    // falls after that span's end and before the next span's begin: a kernel clock off by a
    // few µs would put some inside. Preemptions fall inside the span open at that moment,
    // except when the hog woke in the few µs the thread runs between two spans.
    let mut spans = Vec::new();
    let mut open = None;
    let mut merged = session.merged().unwrap();
    while let Some(ev) = merged.next().unwrap() {
        if ev.event.packet.vtid as i64 != cycle {
            continue;
        }
        match ev.event.class.kind {
            Kind::SpanBegin => open = Some(ev.time_ns),
            Kind::SpanEnd => spans.push((open.take().unwrap(), ev.time_ns)),
            _ => {}
        }
    }
    assert_eq!(spans.len(), 150);
    let kt = KernelTrace::open(&dir.join("kernel")).unwrap();
    // One clock: the kernel trace's is the program trace's (x86-tsc: same counter, same
    // calibration; mono: the same CLOCK_MONOTONIC), so babeltrace2 merges them as one.
    let user = &session.traces[0].desc;
    assert_eq!(kt.clock.uuid, user.clock_uuid);
    let (kc, uc) = (&kt.clock.desc, &user.clock);
    assert_eq!(
        (kc.freq, kc.offset_s, kc.offset),
        (uc.freq, uc.offset_s, uc.offset)
    );
    let (mut inside, mut between, mut sleeps) = (0, 0, 0);
    let (kevents, _) = all(&kt);
    for e in &kevents {
        let Event::SchedSwitch(s) = &e.event else {
            continue;
        };
        if i64::from(s.prev_tid) != cycle {
            continue;
        }
        let t = kt.epoch_ns(e.ts);
        let within = spans.iter().any(|&(b, en)| b <= t && t <= en);
        if s.preempted() {
            if within {
                inside += 1;
            } else {
                between += 1;
            }
        } else {
            let last_end = spans.iter().filter(|&&(_, en)| en <= t).map(|s| s.1).max();
            assert!(!within, "a sleep at {t} inside a span");
            if let Some(end) = last_end {
                assert!(
                    t - end < 5_000_000,
                    "a sleep {} ns after its span's end",
                    t - end
                );
            }
            sleeps += 1;
        }
    }
    assert!(sleeps >= 140, "{sleeps} sleeps");
    assert!(
        inside > 0 && between <= inside / 4,
        "{inside} preemptions inside spans, {between} between"
    );

    // convert --to perfetto: per-CPU ftrace bundles, checked with Perfetto's own protos.
    let switches = kevents
        .iter()
        .filter(|e| e.name() == "sched_switch")
        .count();
    let pf = tmp.path().join("t.perfetto-trace");
    convert_with(&dir, "perfetto", &pf, &["-q"]);
    let py = hushtrace_testsupport::perfetto_python();
    let check = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernel_perfetto_check.py");
    let o = Command::new(&py)
        .arg(&check)
        .arg(&pf)
        .arg(switches.to_string())
        .arg(cycle.to_string())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // convert --to chrome: CPU 0 shows the hog and the cycle thread running.
    let cj = tmp.path().join("t.json");
    convert_with(&dir, "chrome", &cj, &["-q"]);
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&cj).unwrap()).unwrap();
    let kpid = hushtrace_cli::kernel_convert::CHROME_KERNEL_PID;
    let on_cpu0: Vec<&str> = j["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["pid"] == kpid && e["tid"] == 0 && e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(on_cpu0.contains(&format!("hog/{hog}").as_str()));
    assert!(on_cpu0.contains(&format!("cycle/{cycle}").as_str()));

    // babeltrace2 reads the session directory, kernel streams included, without a word on
    // stderr, and merges both by time.
    let text = hushtrace_testsupport::babeltrace(&dir);
    assert!(text.contains("sched_switch"), "no kernel events");
    assert!(text.contains("rt:cycle"), "no user-space events");
    assert!(no_instance_of(std::process::id()));
}

#[test]
fn kernel_blocking_on_a_pipe_is_reported_as_blocked() {
    let Some(_lock) = tracefs_lock("kernel_blocking") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let Some(out) = record(&dir, "sched,syscalls", &["block"]) else {
        return;
    };
    let v = values(&out);
    // --kernel syscalls: the program's system calls (its read on the pipe among them), and
    // none of the recorder's own.
    let kt = KernelTrace::open(&dir.join("kernel")).unwrap();
    let reader = v["reader_tid"];
    let (kevents, _) = all(&kt);
    // By name, as LTTng names them: syscall_entry_read.
    let sys: Vec<(i64, i64, String)> = kevents
        .iter()
        .filter_map(|e| match &e.event {
            Event::SyscallEntry { tid, id, call } => {
                Some((i64::from(*tid), *id, e.name().into_owned() + "/" + call))
            }
            _ => None,
        })
        .collect();
    assert!(
        sys.iter().any(|(tid, id, name)| *tid == reader
            && *id == libc::SYS_read
            && name == "syscall_entry_read/read"),
        "no read(2) of the reader thread among {} system calls",
        sys.len()
    );
    // The program's tasks: its process and what it forked (threads included), transitively.
    let mut program = vec![Session::open(&dir).unwrap().traces[0].desc.vpid as i64];
    for e in &kevents {
        if let Event::SchedProcessFork(f) = &e.event {
            if program.contains(&i64::from(f.parent_tid)) {
                program.push(f.child_tid.into());
            }
        }
    }
    assert!(program.contains(&reader) && program.contains(&v["writer_tid"]));
    let foreign: Vec<i64> = sys
        .iter()
        .map(|(tid, _, _)| *tid)
        .filter(|t| !program.contains(t))
        .collect();
    assert!(
        foreign.is_empty(),
        "system calls of other tasks: {foreign:?}"
    );
    let (writer, measured) = (v["writer_tid"], v["measured_ns"]);
    let session = Session::open(&dir).unwrap();
    let k = kernel_report::compute(&session, None, 0).unwrap();
    let row = k
        .rows
        .iter()
        .find(|r| r.name == "io:wait")
        .expect("io:wait row");
    assert_eq!(row.count, 1);
    // Blocked for (about) the writer's 20 ms sleep, runnable for what a loaded machine made
    // it wait for a CPU (before its read, and after the writer woke it): together, what the
    // program measured around its read.
    let off = row.blocked_ns + row.runnable_ns;
    assert!(row.blocked_ns >= off / 2, "{}", k.to_text());
    let err = (off - measured).abs() as f64 / measured as f64;
    assert!(
        err < 0.05,
        "off CPU {off} ns vs measured {measured} ns\n{}",
        k.to_text()
    );
    // Who woke it: the writer, or, when the wake-up went through an interrupt or the idle
    // task's context (seen on a loaded two-core machine), the idle task.
    let waker = &row.woken_by[0].0;
    assert!(
        *waker == format!("writer/{writer}") || waker == "idle",
        "woken by {waker}\n{}",
        k.to_text()
    );
    // --slowest says in which system call the thread slept: its read on the pipe.
    let o = hushtrace(&["report", dir.to_str().unwrap(), "--slowest", "io:wait"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains(" blocked ") && l.contains(" in read on CPU ")),
        "{text}"
    );
    // babeltrace2 reads the system calls by name beside the program's events.
    let text = hushtrace_testsupport::babeltrace(&dir);
    assert!(
        text.contains("syscall_entry_read: "),
        "no named system call"
    );
    assert!(text.contains("io:wait"), "no user-space events");
}

#[test]
fn kernel_mono_clock_when_the_runtime_does_not_use_the_cycle_counter() {
    let Some(_lock) = tracefs_lock("kernel_mono") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let out = Command::new(env!("CARGO_BIN_EXE_hushtrace"))
        .args(["record", "--kernel", "-o", dir.to_str().unwrap(), "--"])
        .arg(testbin("kernel_workload"))
        .arg("block")
        .env("HUSHTRACE_CLOCK", "monotonic")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("clock mono"), "{stderr}");
    let kt = KernelTrace::open(&dir.join("kernel")).unwrap();
    assert_eq!(kt.trace_clock, "mono");
    let session = Session::open(&dir).unwrap();
    assert_eq!(kt.clock.uuid, session.traces[0].desc.clock_uuid);
    let (kc, uc) = (&kt.clock.desc, &session.traces[0].desc.clock);
    assert_eq!(
        (kc.freq, kc.offset_s, kc.offset),
        (uc.freq, uc.offset_s, uc.offset)
    );
    let v = values(&out);
    let k = kernel_report::compute(&session, None, 0).unwrap();
    let row = k
        .rows
        .iter()
        .find(|r| r.name == "io:wait")
        .expect("io:wait row");
    let off = row.blocked_ns + row.runnable_ns;
    let measured = v["measured_ns"];
    assert!(
        (off - measured).abs() as f64 / (measured as f64) < 0.05,
        "{}",
        k.to_text()
    );
    hushtrace_testsupport::babeltrace(&dir);
}

#[test]
fn kernel_buffer_overflow_is_counted_and_shown() {
    let Some(_lock) = tracefs_lock("kernel_overflow") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    // Two pages per CPU against a context switch every few µs: the buffers overflow between
    // two reads.
    let out = Command::new(env!("CARGO_BIN_EXE_hushtrace"))
        .args(["record", "--kernel", "--kernel-buffer-kb", "8", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(testbin("kernel_workload"))
        .args(["pingpong", "50000"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(" LOST (per-CPU buffers full"), "{stderr}");
    let kt = KernelTrace::open(&dir.join("kernel")).unwrap();
    let (_, discarded) = all(&kt);
    assert!(discarded > 0);
    let o = hushtrace(&["report", dir.to_str().unwrap()]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains(&format!("{discarded} events LOST")), "{s}");
}

#[test]
fn kernel_without_tracefs_access_is_exit_2_before_the_program_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_hushtrace"))
        .args(["record", "--kernel", "-o"])
        .arg(tmp.path().join("t"))
        .args(["--", "touch"])
        .arg(&marker)
        .env("HUSHTRACE_TRACEFS", tmp.path().join("no-tracefs"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no tracefs there"), "{stderr}");
    assert!(!marker.exists(), "the program ran");
    // Not root: as `nobody` (where setpriv exists and `nobody` may run the binary).
    if tracefs_usable() && hushtrace_testsupport::which("setpriv").is_some() {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_hushtrace"))
            .args(["record", "--kernel", "-o", "/nonexistent/x", "--", "touch"])
            .arg(&marker)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("hushtrace: error:") {
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains("needs write access to tracefs"), "{stderr}");
            assert!(!marker.exists(), "the program ran");
        } else {
            println!("not run as nobody: {stderr}");
        }
    }
    let out = hushtrace(&[
        "record",
        "--kernel",
        "disk",
        "-o",
        "/nonexistent/x",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown category \"disk\""));
}

fn wait_until(mut f: impl FnMut() -> bool, secs: u64) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

#[test]
fn kernel_instances_are_removed_after_signals_and_sigkill() {
    let Some(_lock) = tracefs_lock("kernel_signals") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = hushtrace_kernel::tracefs::find_or_mount().unwrap();
    let spawn = |name: &str, secs: &str| {
        Command::new(env!("CARGO_BIN_EXE_hushtrace"))
            .args(["record", "--kernel", "-o"])
            .arg(tmp.path().join(name))
            .args(["--", "sleep", secs])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Recording, and the program (`sleep`) started: record's signal handling is in place.
    let started = |pid: u32| {
        let sleeping = || {
            let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            kids.split_whitespace().any(|k| {
                std::fs::read_to_string(format!("/proc/{k}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            })
        };
        wait_until(|| instance_of(pid).is_some() && sleeping(), 10)
    };

    // SIGTERM to record: passed on to the program, which ends; the trace is complete.
    let c = spawn("term", "30");
    assert!(started(c.id()));
    // SAFETY: signals our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let out = c.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{stderr}");
    assert!(stderr.contains("received SIGTERM"), "{stderr}");
    assert!(
        tmp.path().join("term/kernel/metadata").is_file(),
        "{stderr}"
    );
    KernelTrace::open(&tmp.path().join("term/kernel")).unwrap();

    // The program crashes: record reports it, and the kernel trace is complete all the same.
    let out = Command::new(env!("CARGO_BIN_EXE_hushtrace"))
        .args(["record", "--kernel", "-o"])
        .arg(tmp.path().join("crash"))
        .args(["--", "sh", "-c", "kill -SEGV $$"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128 + libc::SIGSEGV));
    KernelTrace::open(&tmp.path().join("crash/kernel")).unwrap();

    // SIGKILL to record: its guard process removes the instance at once.
    let mut c = spawn("kill", "3");
    let pid = c.id();
    assert!(started(pid));
    c.kill().unwrap();
    c.wait().unwrap();
    assert!(
        wait_until(|| no_instance_of(pid), 5),
        "instance of the killed recorder {pid} still there"
    );

    // A stale instance of a dead recorder (guard killed too): `recover` removes it.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let me = hushtrace_kernel::owner::Owner::current().unwrap();
    let name = hushtrace_kernel::owner::Owner {
        pid: dead_pid,
        ..me
    }
    .instance_name("");
    let stale = root.join("instances").join(&name);
    std::fs::create_dir(&stale).unwrap();
    let o = hushtrace(&["recover", tmp.path().join("term").to_str().unwrap()]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains(&format!("removed the ftrace instance {name}")),
        "{s}"
    );
    assert!(!stale.exists());
}
