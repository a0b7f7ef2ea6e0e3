//! `hushtrace report` and `hushtrace flamegraph` on synthetic traces: known durations, discarded
//! and lost counts, tail percentiles, an empty trace; SVG, folded and per-thread flame graphs.

use super::*;

#[test]
fn report_numbers_equal_known_durations() {
    let dir = tempfile::tempdir().unwrap();
    write_workload(dir.path(), 100);
    let o = hushtrace(&["report", dir.path().to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["events"], 3 * 100 * 6);
    let span = |name: &str| {
        r["spans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let job = span("work:job");
    assert_eq!(job["count"], 300);
    assert_eq!(job["total_ns"], 300 * 600);
    for k in [
        "mean_ns",
        "p50_ns",
        "p99_ns",
        "p99_9_ns",
        "p99_99_ns",
        "max_ns",
        "min_ns",
    ] {
        assert_eq!(job[k], 600, "{k}");
    }
    let step = span("work:step");
    assert_eq!(
        (step["count"].clone(), step["max_ns"].clone()),
        (J::from(300), J::from(200))
    );
    assert_eq!(r["instants"][0]["name"], "app:mark");
    assert_eq!(r["instants"][0]["count"], 300);
    let c = &r["counters"][0];
    assert_eq!(
        (
            c["count"].as_u64(),
            c["min"].as_f64(),
            c["max"].as_f64(),
            c["last"].as_f64()
        ),
        (Some(300), Some(0.0), Some(990.0), Some(990.0))
    );
    // Time range: from pid 100 tid 101 at 1_000_700 to pid 200's last job end.
    let start = 1_700_000_000i64 * 1_000_000_000 + 1_000_700;
    assert_eq!(r["start_ns"], start);
    assert_eq!(
        r["end_ns"],
        1_700_000_000i64 * 1_000_000_000 + 1_001_400 + 99_000 + 600
    );
    let procs = r["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2);
    assert_eq!(procs[0]["pid"], 100);
    assert_eq!(procs[0]["events"], 1200);
    assert_eq!(procs[0]["stats_written"], 1200);
    assert_eq!(procs[0]["threads"].as_array().unwrap().len(), 2);
    assert_eq!(procs[1]["threads"][0]["tid"], 200);
    assert_eq!(r["unclosed_spans"], 0);

    let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("work:job"), "{text}");
    assert!(text.contains("600 ns"), "{text}");
    assert!(text.contains("thread t102"), "{text}");
}

#[test]
fn report_counts_discarded_and_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(5, "lossy");
    let id = t.instant("x:y", &[]);
    let th = t.thread(6, "t");
    for k in 0..10 {
        th.event(SynthEvent::new(id, k));
    }
    th.discarded = 17;
    th.lost_packets = 2;
    t.write_session(dir.path()).unwrap();
    let o = hushtrace(&["report", dir.path().to_str().unwrap(), "--format", "json"]);
    let r: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["processes"][0]["threads"][0]["discarded"], 17);
    assert_eq!(r["processes"][0]["threads"][0]["lost_packets"], 2);
    assert_eq!(r["processes"][0]["stats_discarded"], 17);
}

#[test]
fn flamegraph_writes_svg() {
    let dir = tempfile::tempdir().unwrap();
    write_workload(dir.path(), 5);
    let svg = dir.path().join("f.svg");
    for extra in [&[][..], &["--per-process"][..]] {
        let mut args = vec![
            "flamegraph",
            dir.path().to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = hushtrace(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<?xml"), "{}", &text[..100]);
        assert!(text.contains("work:step"));
        assert_eq!(text.contains("proc200 (200)"), !extra.is_empty());
    }
}

/// Issue 13.5: `--folded` writes folded stacks (to stdout with `-o -`, or a file) and
/// `--per-thread` adds a root frame per thread; durations are exact (self time per stack).
#[test]
fn flamegraph_folded_and_per_thread() {
    let dir = tempfile::tempdir().unwrap();
    write_workload(dir.path(), 5);
    let d = dir.path().to_str().unwrap();
    let o = hushtrace(&["flamegraph", d, "--folded", "-o", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // 3 threads x 5 jobs: job self time 600 - 200, step 200.
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "work:job 6000\nwork:job;work:step 3000\n"
    );
    let o = hushtrace(&["flamegraph", d, "--folded", "--per-thread", "-o", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "t101 (100/101);work:job 2000",
            "t101 (100/101);work:job;work:step 1000",
            "t102 (100/102);work:job 2000",
            "t102 (100/102);work:job;work:step 1000",
            "t200 (200/200);work:job 2000",
            "t200 (200/200);work:job;work:step 1000",
        ]
    );
    let file = dir.path().join("f.folded");
    let o = hushtrace(&["flamegraph", d, "--folded", "-o", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 2);
    let svg = dir.path().join("t.svg");
    let o = hushtrace(&["flamegraph", d, "--per-thread", "-o", svg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains("t102 (100/102)"));
    let o = hushtrace(&["flamegraph", d, "--per-thread", "--per-process", "-o", "-"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Issue 13.4: percentiles up to p99.99 from a histogram (flat memory), in text and JSON; the
/// start time as an RFC 3339 date and time.
#[test]
fn report_tail_percentiles_and_rfc3339_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(9, "rt");
    let (b, e) = t.span("rt:cycle", &[]);
    let th = t.thread(9, "loop");
    // Durations 1..=20000 ns, plus one outlier of 5 ms.
    let mut ts = 0u64;
    for d in (1..=20_000u64).chain([5_000_000]) {
        th.event(SynthEvent::new(b, ts))
            .event(SynthEvent::new(e, ts + d));
        ts += d + 10;
    }
    t.write_session(dir.path()).unwrap();
    let o = hushtrace(&["report", dir.path().to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: J = serde_json::from_slice(&o.stdout).unwrap();
    let s = &r["spans"][0];
    assert_eq!(s["count"], 20_001);
    assert_eq!(s["max_ns"], 5_000_000);
    assert_eq!(s["min_ns"], 1);
    // Nearest ranks 10001, 19801, 19981, 19999, within 0.1%.
    for (k, want) in [
        ("p50_ns", 10_001i64),
        ("p99_ns", 19_801),
        ("p99_9_ns", 19_981),
        ("p99_99_ns", 19_999),
    ] {
        let got = s[k].as_i64().unwrap();
        assert!((got - want).abs() * 1000 <= want, "{k}: {got} vs {want}");
    }
    // The synthetic clock starts at 1_700_000_000 s since the epoch.
    assert_eq!(r["start_time"], "2023-11-14T22:13:20.000000000Z");
    assert_eq!(r["start_ns"], 1_700_000_000_000_000_000i64);
    let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("Time range: 2023-11-14T22:13:20.000000000Z .. 2023-11-14T22:13:20."),
        "{text}"
    );
    for h in ["P50", "P99", "P99.9", "P99.99", "MAX", "5.000 ms"] {
        assert!(text.contains(h), "{h} not in {text}");
    }
}

/// Issue 13.4: a trace without events says so instead of printing a time range at the epoch.
#[test]
fn report_of_an_empty_trace_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(4, "idle");
    t.instant("x:y", &[]);
    t.thread(4, "main");
    t.write_session(dir.path()).unwrap();
    let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("The trace is empty: it holds no events."),
        "{text}"
    );
    assert!(!text.contains("1970"), "{text}");
    let o = hushtrace(&["report", dir.path().to_str().unwrap(), "--format", "json"]);
    let r: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["events"], 0);
    assert_eq!(r["start_time"], J::Null);
}
