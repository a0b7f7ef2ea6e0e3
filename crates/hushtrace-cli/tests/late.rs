//! `record --on-late`, `--late-max`, `--late-interval`, `--late-window` (checked before the
//! program runs, then handed to it in the environment) and `report --late` on a session
//! built from pieces: captures written as the program's consumer writes them (a process
//! trace in `late/<n>/<pid>/`, a line in `late/index.json`), one with its own kernel part
//! (overwrite mode), one explained from the session's `kernel/` (discard mode).

mod common;

use common::{hushtrace, stderr, text};
use hushtrace_ctf::reader::Session;
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_kernel::ctf::{to_tsdl, KernelMeta, StreamWriter};
use hushtrace_kernel::event::{Comm, SchedSwitch, Wake};
use hushtrace_kernel::schema::ClassTable;
use hushtrace_kernel::{Event, KEvent, KernelTrace};
use std::path::Path;
use std::sync::Arc;

const PID: u32 = 10;
const TID: i32 = 11;
const HOG: i32 = 500;
const WAKER: i32 = 77;

#[test]
fn a_bad_on_late_spec_is_refused_before_the_program_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let marker = tmp.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let cases: [(&[&str], &str); 4] = [
        (
            &["--on-late", "rt:cycle>1ms", "--on-late", "rt:cycle>15xs"],
            "--on-late: deadline rule 'rt:cycle>15xs': unknown unit 'xs' (expected ns, us, ms or s)",
        ),
        (
            &["--on-late", "rt:cycle"],
            "--on-late: deadline rule 'rt:cycle': expected GLOB>DURATION",
        ),
        (&["--late-interval", "1"], "--late-interval: '1' is not a duration"),
        (&["--late-window", "0ms"], "--late-window: '0ms': the duration must be at least 1 ns"),
    ];
    for (flags, msg) in cases {
        let mut args = vec!["record", "-o", dir.to_str().unwrap()];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", &touch]);
        let o = hushtrace(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(msg), "{flags:?}: {err}");
        assert!(!marker.exists(), "{flags:?}: the program ran");
        assert!(!dir.exists(), "{flags:?}: the output directory was created");
    }
    // --late-max takes a count (clap's own usage error).
    let o = hushtrace(&[
        "record",
        "-o",
        dir.to_str().unwrap(),
        "--late-max",
        "x",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn the_late_flags_reach_the_program_in_its_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let show = "echo \"rules=$HUSHTRACE_ON_LATE max=$HUSHTRACE_LATE_MAX \
                interval=$HUSHTRACE_LATE_INTERVAL window=$HUSHTRACE_LATE_WINDOW\"";
    let o = hushtrace(&[
        "record",
        "-o",
        dir.to_str().unwrap(),
        "--on-late",
        "rt:cycle>1.5ms",
        "--on-late",
        "app:*>2ms,db:query>250us",
        "--late-max",
        "3",
        "--late-interval",
        "500ms",
        "--late-window",
        "20ms",
        "--",
        "sh",
        "-c",
        show,
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(
        out.contains(
            "rules=rt:cycle>1500us,app:*>2ms,db:query>250us max=3 interval=500ms window=20ms"
        ),
        "{out}"
    );
    // Without the flags, nothing is set (the program's own deadlines and defaults apply).
    let o = hushtrace(&[
        "record",
        "-o",
        dir.to_str().unwrap(),
        "--force",
        "--",
        "sh",
        "-c",
        show,
    ]);
    let out = text(&o.stdout);
    assert!(out.contains("rules= max= interval= window="), "{out}");
}

fn switch(ts: u64, cpu: u32, prev: (i32, &[u8], i64), next: (i32, &[u8])) -> KEvent {
    KEvent {
        ts,
        cpu,
        event: Event::SchedSwitch(SchedSwitch {
            prev_comm: Comm::new(prev.1),
            prev_tid: prev.0,
            prev_prio: 120,
            prev_state: prev.2,
            next_comm: Comm::new(next.1),
            next_tid: next.0,
            next_prio: 120,
        }),
    }
}

/// Writes kernel trace `kdir` with the clock of the process trace in `user_session`: the
/// events of each CPU, in time order.
fn kernel(kdir: &Path, user_session: &Path, cpus: &[Vec<KEvent>]) -> KernelTrace {
    let user = Session::open(user_session).unwrap().traces[0].desc.clone();
    std::fs::create_dir_all(kdir).unwrap();
    let mut meta = KernelMeta::synthetic(&user);
    meta.classes = Arc::new(ClassTable::new(vec!["futex".into()]));
    meta.categories = "sched,irq,syscalls".into();
    std::fs::write(kdir.join("metadata"), to_tsdl(&meta)).unwrap();
    for (cpu, events) in cpus.iter().enumerate() {
        let cpu = cpu as u32;
        let p = kdir.join(format!("channel0_{cpu}"));
        let mut w = StreamWriter::create(&p, meta.uuid, cpu.into(), cpu)
            .unwrap()
            .with_classes(meta.classes.clone());
        for e in events {
            w.write(e).unwrap();
        }
        w.flush().unwrap();
    }
    KernelTrace::open(kdir).unwrap()
}

/// The process trace of a capture (`<dir>/<pid>/`): the late span itself, from `b` to `e` ns.
fn capture_trace(dir: &Path, b: u64, e: u64) {
    let mut t = SynthTrace::new(PID, "rtapp");
    t.write_stats = false;
    let (sb, se) = t.span("rt:cycle", &[]);
    t.thread(TID as u32, "rt")
        .event(SynthEvent::new(sb, b))
        .event(SynthEvent::new(se, e));
    t.write_session(dir).unwrap();
}

/// A session with two captures of `rt:cycle` (deadline 600 µs), and the statistics file's
/// counters; returns the index lines written.
fn session(dir: &Path) -> Vec<serde_json::Value> {
    // The session's own trace (discard mode: all of it), and its statistics.
    capture_trace(dir, 9_000_000, 14_000_000);
    std::fs::write(
        dir.join(format!("{PID}.stats.json")),
        format!(
            "{{\"pid\":{PID},\"written\":2,\"discarded\":0,\"late_spans\":12,\
             \"late_captured\":2,\"late_not_captured\":10}}\n"
        ),
    )
    .unwrap();
    // Capture 1, overwrite mode: its own kernel part. The thread runs from 0.5 ms, takes an
    // interrupt at 1.2 ms, is preempted by the hog from 1.4 ms to 2.3 ms; the span runs from
    // 1 ms to 2.5 ms.
    let c1 = dir.join("late/1");
    capture_trace(&c1, 1_000_000, 2_500_000);
    let k1 = kernel(
        &c1.join("kernel"),
        &c1,
        &[vec![
            switch(500_000, 0, (0, b"swapper/0", 0), (TID, b"rt")),
            KEvent {
                ts: 1_200_000,
                cpu: 0,
                event: Event::IrqHandlerEntry {
                    irq: 30,
                    name: "eth0".into(),
                },
            },
            KEvent {
                ts: 1_250_000,
                cpu: 0,
                event: Event::IrqHandlerExit { irq: 30, ret: 1 },
            },
            switch(1_400_000, 0, (TID, b"rt", 0), (HOG, b"hog")),
            switch(2_300_000, 0, (HOG, b"hog", 1), (TID, b"rt")),
            switch(3_000_000, 0, (TID, b"rt", 1), (0, b"swapper/0")),
        ]],
    );
    // Capture 2, discard mode: explained from the session's kernel trace. The thread enters
    // futex at 9.5 ms, sleeps from 10.5 ms, is woken at 12 ms by `waker` (on CPU 1) and runs
    // again at 12.0001 ms; the span runs from 10 ms to 13 ms.
    let c2 = dir.join("late/2");
    capture_trace(&c2, 10_000_000, 13_000_000);
    let futex: Arc<str> = "futex".into();
    let kd = kernel(
        &dir.join("kernel"),
        dir,
        &[
            vec![
                switch(9_000_000, 0, (0, b"swapper/0", 0), (TID, b"rt")),
                KEvent {
                    ts: 9_500_000,
                    cpu: 0,
                    event: Event::SyscallEntry {
                        call: futex.clone(),
                        tid: TID,
                        id: 202,
                    },
                },
                switch(10_500_000, 0, (TID, b"rt", 1), (0, b"swapper/0")),
                switch(12_000_100, 0, (0, b"swapper/0", 0), (TID, b"rt")),
                KEvent {
                    ts: 12_100_000,
                    cpu: 0,
                    event: Event::SyscallExit {
                        call: futex,
                        tid: TID,
                        id: 202,
                        ret: 0,
                    },
                },
                switch(14_000_000, 0, (TID, b"rt", 1), (0, b"swapper/0")),
            ],
            vec![
                switch(8_000_000, 1, (0, b"swapper/1", 0), (WAKER, b"waker")),
                KEvent {
                    ts: 12_000_000,
                    cpu: 1,
                    event: Event::SchedWaking(Wake {
                        comm: Comm::new(b"rt"),
                        tid: TID,
                        prio: 120,
                        target_cpu: 0,
                    }),
                },
                switch(14_500_000, 1, (WAKER, b"waker", 1), (0, b"swapper/1")),
            ],
        ],
    );
    let lines = vec![
        serde_json::json!({"n": 1, "span": "rt:cycle", "pid": PID, "tid": TID,
            "start_ns": k1.ns(1_000_000), "duration_ns": 1_500_000, "deadline_ns": 600_000,
            "dir": "late/1"}),
        serde_json::json!({"n": 2, "span": "rt:cycle", "pid": PID, "tid": TID,
            "start_ns": kd.ns(10_000_000), "duration_ns": 3_000_000, "deadline_ns": 600_000,
            "dir": "late/2"}),
    ];
    let index: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("late/index.json"), index).unwrap();
    lines
}

#[test]
fn report_late_says_who_ran_instead_and_where_the_thread_slept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let lines = session(&dir);
    let d = dir.to_str().unwrap();

    let o = hushtrace(&["report", "--late", d, "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        j["counters"],
        serde_json::json!([{"pid": PID, "late_spans": 12, "late_captured": 2,
                            "late_not_captured": 10}])
    );
    let caps = j["captures"].as_array().unwrap();
    assert_eq!(caps.len(), 2);
    for (c, line) in caps.iter().zip(&lines) {
        for (k, v) in line.as_object().unwrap() {
            assert_eq!(&c[k], v, "{k}");
        }
    }
    // Capture 1: preempted by the hog for 900 µs, an interrupt of 50 µs while it ran.
    let c = &caps[0];
    assert_eq!(c["late_by_ns"], 900_000);
    let k = &c["kernel"];
    assert!(
        k["kernel_dir"].as_str().unwrap().ends_with("late/1/kernel"),
        "{k}"
    );
    assert_eq!(
        (
            &k["running_ns"],
            &k["runnable_ns"],
            &k["blocked_ns"],
            &k["irq_ns"]
        ),
        (
            &serde_json::json!(600_000),
            &serde_json::json!(900_000),
            &serde_json::json!(0),
            &serde_json::json!(50_000)
        )
    );
    assert_eq!(
        k["ran_instead"],
        serde_json::json!([{"name": "hog", "tid": HOG, "ns": 900_000}])
    );
    assert_eq!(
        k["interrupts"],
        serde_json::json!([{"name": "irq 30 eth0", "tid": null, "ns": 50_000}])
    );
    assert_eq!(
        k["stretches"],
        serde_json::json!([{"from_ns": 400_000, "to_ns": 1_300_000, "state": "runnable",
            "cpu": 0, "syscall": null, "by": [{"name": "hog", "tid": HOG, "ns": 900_000}]}])
    );
    assert_eq!(c["kernel_note"], serde_json::Value::Null);
    // Capture 2: no kernel part of its own, the session's: asleep in futex for 1.5 ms, woken
    // by `waker`, then 100 ns waiting for its CPU.
    let k = &caps[1]["kernel"];
    assert!(
        k["kernel_dir"].as_str().unwrap().ends_with("t/kernel"),
        "{k}"
    );
    assert_eq!(k["blocked_ns"], 1_500_000);
    assert_eq!(k["runnable_ns"], 100);
    assert_eq!(k["running_ns"], 3_000_000 - 1_500_100);
    assert_eq!(
        k["woken_by"],
        serde_json::json!([{"name": "waker", "tid": WAKER, "ns": 1_500_000}])
    );
    assert_eq!(
        k["blocked_in"],
        serde_json::json!([{"name": "futex", "tid": null, "ns": 1_500_000}])
    );
    assert_eq!(k["stretches"][0]["syscall"], "futex");

    // The text says the same.
    let o = hushtrace(&["report", "--late", d]);
    let s = text(&o.stdout);
    assert!(o.status.success(), "{s}{}", stderr(&o));
    for want in [
        "Late spans in ",
        "process 10: 12 late spans, 2 captured, 10 not captured",
        "1. rt:cycle took 1.500 ms against a deadline of 600.000 µs (late by 900.000 µs)",
        "(pid 10, tid 11): late/1",
        "ran instead: hog/500 900.000 µs",
        "interrupts: irq 30 eth0 50.000 µs",
        "2. rt:cycle took 3.000 ms",
        "blocked in: futex 1.500 ms",
        "woken by: waker/77 1.500 ms",
        "+500.000 µs .. +2.000 ms blocked 1.500 ms in futex on CPU 0: woken by waker/77",
    ] {
        assert!(s.contains(want), "{want:?} missing:\n{s}");
    }
    // The plain report shows the counters too, in text and in JSON.
    let o = hushtrace(&["report", d]);
    let s = text(&o.stdout);
    assert!(
        s.contains("Late spans (see `hushtrace report --late")
            && s.contains("process 10: 12 late spans, 2 captured, 10 not captured"),
        "{s}"
    );
    let o = hushtrace(&["report", d, "--format", "json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["late"][0]["late_not_captured"], 10);
}

#[test]
fn report_late_names_what_is_wrong_with_its_input() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    session(&dir);
    let d = dir.to_str().unwrap();
    let index = dir.join("late/index.json");
    let good = std::fs::read_to_string(&index).unwrap();
    let fails = |want: &str| {
        let o = hushtrace(&["report", "--late", d]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{want}: {err}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    // A garbled line, a missing key, a path outside the session.
    std::fs::write(&index, format!("{good}{{\"n\":3,\"span\n")).unwrap();
    fails("index.json line 3: not a capture's entry");
    std::fs::write(&index, good.replace(",\"tid\":11", "")).unwrap();
    fails("missing field `tid`");
    std::fs::write(&index, good.replace("late/2", "../elsewhere")).unwrap();
    fails("capture 2: its directory \"../elsewhere\" is not a path inside the session");
    // A capture directory missing.
    std::fs::write(&index, &good).unwrap();
    std::fs::remove_dir_all(dir.join("late/2")).unwrap();
    fails("capture 2: ");
    fails("late/2: No such file or directory");
    // No index at all (and no counters): nothing was captured, said as such.
    std::fs::remove_dir_all(dir.join("late")).unwrap();
    std::fs::remove_file(dir.join(format!("{PID}.stats.json"))).unwrap();
    fails("late/index.json: no such file");
    // A kernel trace that does not cover the span is said, not taken for time on the CPU.
    let dir2 = tmp.path().join("u");
    session(&dir2);
    let index = dir2.join("late/index.json");
    let moved = std::fs::read_to_string(&index)
        .unwrap()
        .replace("\"duration_ns\":3000000", "\"duration_ns\":30000000");
    std::fs::write(&index, moved).unwrap();
    let o = hushtrace(&[
        "report",
        "--late",
        dir2.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["captures"][1]["kernel"], serde_json::Value::Null);
    let note = j["captures"][1]["kernel_note"].as_str().unwrap();
    assert!(note.contains("does not cover the span"), "{note}");
}
