//! The `hushtrace` binary on synthetic traces: convert, report, flamegraph, usage errors.

mod common;

use common::{convert, hushtrace, stderr};
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_ctf::FieldType;
use serde_json::Value as J;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Two processes (parent 100 with two threads, "forked" child 200), spans with fields, nested
/// spans with exact durations, instants and a counter.
///
/// Per thread `tid` of pid `p`, for k in 0..n: outer span `work:job` [base + 1000k, +600],
/// inner `work:step` [+100, +300] (fields n = k, tag = "job k"), instant `app:mark` at +400
/// (field ok = true), counter `mem:used` = k * 10 at +500.
fn write_workload(dir: &Path, n: u64) {
    for (pid, tids) in [(100u32, vec![101u32, 102]), (200, vec![200])] {
        let mut t = SynthTrace::new(pid, &format!("proc{pid}"));
        t.packet_bytes = 300;
        let (job_b, job_e) = t.span("work:job", &[]);
        let (step_b, step_e) = t.span(
            "work:step",
            &[("n", FieldType::U64), ("tag", FieldType::Str)],
        );
        let mark = t.instant("app:mark", &[("ok", FieldType::Bool)]);
        let mem = t.counter("mem:used", FieldType::I64);
        for (i, &tid) in tids.iter().enumerate() {
            let th = t.thread(tid, &format!("t{tid}"));
            let base = 1_000_000 + pid as u64 * 7 + i as u64 * 13;
            for k in 0..n {
                let s = base + 1000 * k;
                th.event(SynthEvent::new(job_b, s));
                th.event(
                    SynthEvent::new(step_b, s + 100)
                        .u64(k)
                        .str(&format!("job {k}")),
                );
                th.event(SynthEvent::new(step_e, s + 300));
                th.event(SynthEvent::new(mark, s + 400).bool(true));
                th.event(SynthEvent::new(mem, s + 500).i64(k as i64 * 10));
                th.event(SynthEvent::new(job_e, s + 600));
            }
        }
        t.write_session(dir).unwrap();
    }
}

fn convert_to_json(dir: &Path, out: &Path) -> J {
    convert(dir, "chrome", out);
    let bytes = std::fs::read(out).unwrap();
    let bytes = if out.extension().is_some_and(|e| e == "gz") {
        gunzip(&bytes)
    } else {
        bytes
    };
    serde_json::from_slice(&bytes).unwrap()
}

fn gunzip(gz: &[u8]) -> Vec<u8> {
    // An independent decoder: the system's `gzip -dc`.
    use std::io::Write;
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(gz).unwrap();
    child.wait_with_output().unwrap().stdout
}

#[test]
fn convert_writes_chrome_json_with_pairs_pids_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    write_workload(dir.path(), 40);
    let out = dir.path().join("trace.json");
    let json = convert_to_json(dir.path(), &out);
    assert_eq!(json["displayTimeUnit"], "ns");
    let events = json["traceEvents"].as_array().unwrap();

    let mut counts: HashMap<(String, String), usize> = HashMap::new();
    let mut stacks: HashMap<(u64, u64), Vec<String>> = HashMap::new();
    let mut last_ts: HashMap<(u64, u64), f64> = HashMap::new();
    let mut names_m = Vec::new();
    for e in events {
        let ph = e["ph"].as_str().unwrap().to_string();
        let name = e["name"].as_str().unwrap().to_string();
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        if ph == "M" {
            names_m.push((name, key, e["args"]["name"].as_str().unwrap().to_string()));
            continue;
        }
        *counts.entry((ph.clone(), name.clone())).or_default() += 1;
        let ts = e["ts"].as_f64().unwrap();
        assert!(ts >= *last_ts.get(&key).unwrap_or(&0.0));
        last_ts.insert(key, ts);
        assert_eq!(
            e["cat"],
            if name == "mem:used" {
                "mem"
            } else if name == "mark" {
                "app"
            } else {
                "work"
            }
        );
        // The thread ids belong to the right process.
        let (pid, tid) = key;
        assert!(
            matches!((pid, tid), (100, 101) | (100, 102) | (200, 200)),
            "{e}"
        );
        match ph.as_str() {
            "B" => {
                stacks.entry(key).or_default().push(name.clone());
                if name == "step" {
                    let n = e["args"]["n"].as_u64().unwrap();
                    assert_eq!(e["args"]["tag"], format!("job {n}"));
                }
            }
            "E" => assert_eq!(
                stacks.get_mut(&key).and_then(|s| s.pop()),
                Some(name.clone())
            ),
            "i" => {
                assert_eq!(e["s"], "t");
                assert_eq!(e["args"]["ok"], true);
            }
            "C" => assert!(e["args"]["value"].as_i64().unwrap() % 10 == 0),
            other => panic!("unexpected ph {other}"),
        }
    }
    assert!(
        stacks.values().all(|s| s.is_empty()),
        "unclosed: {stacks:?}"
    );
    // 3 threads x 40 iterations.
    for (ph, name) in [
        ("B", "job"),
        ("E", "job"),
        ("B", "step"),
        ("E", "step"),
        ("i", "mark"),
        ("C", "mem:used"),
    ] {
        assert_eq!(
            counts[&(ph.to_string(), name.to_string())],
            120,
            "{ph} {name}"
        );
    }
    let mut m: Vec<_> = names_m
        .iter()
        .map(|(n, (p, t), v)| (n.as_str(), *p, *t, v.as_str()))
        .collect();
    m.sort();
    assert_eq!(
        m,
        [
            ("process_name", 100, 0, "proc100"),
            ("process_name", 200, 0, "proc200"),
            ("thread_name", 100, 101, "t101"),
            ("thread_name", 100, 102, "t102"),
            ("thread_name", 200, 200, "t200"),
        ]
    );
    // ts: microseconds since the first event (issue 20.4), ns precision in the text, the origin
    // in otherData. The synthetic clock starts at 1_700_000_000 s; the first event is at
    // 1_000_700 ns, pid 200's first inner step begins at 1_001_400 + 100 ns.
    let raw = std::fs::read_to_string(&out).unwrap();
    assert!(
        raw.contains("\"name\":\"step\",\"cat\":\"work\",\"ph\":\"B\",\"ts\":0.800,\"pid\":200,"),
        "relative, three decimals"
    );
    assert_eq!(
        json["otherData"]["ts_origin_unix_ns"],
        "1700000000001000700"
    );
    assert_eq!(
        json["otherData"]["ts_origin"],
        "2023-11-14T22:13:20.001000700Z"
    );
}

/// Issue 13.3: `--relative-time` gives microseconds since the first event (pid 100 tid 101 at
/// 1_000_700 ns), as the default did before timestamps became absolute.
#[test]
fn convert_relative_time_counts_from_the_first_event() {
    let dir = tempfile::tempdir().unwrap();
    write_workload(dir.path(), 2);
    let out = dir.path().join("rel.json");
    let o = hushtrace(&[
        "convert",
        dir.path().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--relative-time",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let raw = std::fs::read_to_string(&out).unwrap();
    assert!(
        raw.contains("\"ph\":\"B\",\"ts\":0.800,\"pid\":200,"),
        "{}",
        &raw[..raw.len().min(2000)]
    );
    assert!(raw.contains("\"ts\":0.000,"));
}

/// Issue 13.3: `displayTimeUnit` comes before the events (Perfetto's importer flags it late).
#[test]
fn convert_writes_display_time_unit_first() {
    let dir = tempfile::tempdir().unwrap();
    write_workload(dir.path(), 2);
    let out = dir.path().join("t.json");
    convert_to_json(dir.path(), &out);
    let raw = std::fs::read_to_string(&out).unwrap();
    assert!(
        raw.starts_with("{\"displayTimeUnit\":\"ns\",\"otherData\":{"),
        "{}",
        &raw[..80]
    );
    assert_eq!(raw.matches("displayTimeUnit").count(), 1);
}

/// Issue 13.3: counters keep their category: `net:errors` and `disk:errors` are two tracks
/// (Perfetto names a JSON counter track after the event name and the argument key).
#[test]
fn convert_counters_keep_their_category() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(7, "app");
    let net = t.counter("net:errors", FieldType::U64);
    let disk = t.counter("disk:errors", FieldType::U64);
    t.thread(7, "main")
        .event(SynthEvent::new(net, 10).u64(1))
        .event(SynthEvent::new(disk, 20).u64(5))
        .event(SynthEvent::new(net, 30).u64(2));
    t.write_session(dir.path()).unwrap();
    let json = convert_to_json(dir.path(), &dir.path().join("c.json"));
    let mut tracks: HashMap<String, Vec<u64>> = HashMap::new();
    for e in json["traceEvents"].as_array().unwrap() {
        if e["ph"] == "C" {
            let args = e["args"].as_object().unwrap();
            for (k, v) in args {
                let track = format!("{} {k}", e["name"].as_str().unwrap());
                tracks.entry(track).or_default().push(v.as_u64().unwrap());
            }
        }
    }
    let mut tracks: Vec<_> = tracks.into_iter().collect();
    tracks.sort();
    assert_eq!(
        tracks,
        [
            ("disk:errors value".to_string(), vec![5]),
            ("net:errors value".to_string(), vec![1, 2])
        ]
    );
}

/// Issue 13.3: `hushtrace convert -o - | head` ends quietly with status 0 when the reader
/// closes the pipe early.
#[test]
fn convert_to_a_closed_pipe_ends_quietly() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    // About 3 MB of JSON: far more than a pipe holds.
    write_workload(dir.path(), 5000);
    for extra in [&[][..], &["--quiet"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hushtrace"))
            .args(["convert", dir.path().to_str().unwrap(), "-o", "-"])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut head = [0u8; 100];
        stdout.read_exact(&mut head).unwrap();
        drop(stdout);
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{extra:?}");
    }
}

#[test]
fn convert_gzip_and_stdout() {
    let dir = tempfile::tempdir().unwrap();
    write_workload(dir.path(), 3);
    let plain = convert_to_json(dir.path(), &dir.path().join("a.json"));
    let gz = convert_to_json(dir.path(), &dir.path().join("a.json.gz"));
    assert_eq!(plain, gz);
    let o = hushtrace(&[
        "convert",
        dir.path().to_str().unwrap(),
        "--to",
        "chrome",
        "-o",
        "-",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plain, stdout);
}

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

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["frobnicate"][..],
        &["convert"][..],
        &["convert", "/tmp", "--to", "svg", "-o", "x"][..],
        &["record", "-o", "/tmp/x"][..],
        &["report", "/tmp", "--format", "yaml"][..],
        &[][..],
    ] {
        let o = hushtrace(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).is_empty());
    }
    for sub in ["record", "convert", "report", "flamegraph"] {
        let o = hushtrace(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: hushtrace"));
    }
}

#[test]
fn missing_or_unreadable_trace_exits_1_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    for sub in ["report", "convert", "flamegraph"] {
        let mut args = vec![sub, missing.to_str().unwrap()];
        if sub != "report" {
            args.extend(["-o", "/dev/null"]);
        }
        let o = hushtrace(&args);
        assert_eq!(o.status.code(), Some(1), "{sub}");
        assert!(
            stderr(&o).contains(missing.to_str().unwrap()),
            "{}",
            stderr(&o)
        );
    }
    // Corrupt stream: error names the file and offset, and no partial output is left.
    write_workload(dir.path(), 2);
    let stream = dir.path().join("100/stream_0");
    let mut b = std::fs::read(&stream).unwrap();
    b[112] = 0xee;
    std::fs::write(&stream, b).unwrap();
    let out = dir.path().join("out.json");
    let o = hushtrace(&[
        "convert",
        dir.path().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("stream_0: byte offset 112"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    assert!(!dir.path().join("out.json.partial").exists());
}

#[test]
fn record_sets_environment_and_returns_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("session");
    let o = hushtrace(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--mode",
        "overwrite",
        "--num-subbufs",
        "8",
        "--",
        "sh",
        "-c",
        "env | grep ^HUSHTRACE_ | sort; exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("HUSHTRACE_MODE=overwrite\nHUSHTRACE_NUM_SUBBUFS=8\nHUSHTRACE_OUTPUT="),
        "{text}"
    );
    assert!(!text.contains("HUSHTRACE_SUBBUF_SIZE"), "{text}");
    assert!(
        text.contains(&format!("trace: {}", out.display())),
        "{text}"
    );
}

/// Output to an existing non-regular file (a FIFO here, `/dev/null` in practice) is written in
/// place, never replaced by renaming a temporary file over it.
#[test]
fn convert_to_a_fifo_keeps_the_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    write_workload(dir.path(), 3);
    let fifo = dir.path().join("pipe");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let o = hushtrace(&[
        "convert",
        dir.path().to_str().unwrap(),
        "-o",
        fifo.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = reader.join().unwrap();
    let _: J = serde_json::from_slice(&bytes).unwrap();
    let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(ft.is_fifo(), "the FIFO was replaced");
    assert!(!dir.path().join("pipe.partial").exists());
}

/// Issue 13.6: `record` into a directory that already holds a trace refuses (naming the
/// directory, what it holds and the two flags) without running the command; `--force`
/// replaces the trace (and only the trace), `--append` adds to it.
#[test]
fn record_refuses_a_directory_with_a_trace_unless_force_or_append() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("session");
    write_workload(&out, 1);
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let record = |extra: &[&str]| {
        let mut args = vec!["record", "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend(["--", "sh", "-c", &script]);
        hushtrace(&args)
    };

    let o = record(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    for needle in [
        out.to_str().unwrap(),
        "already holds a trace",
        "2 process trace(s): 100, 200",
        "--force",
        "--append",
    ] {
        assert!(err.contains(needle), "{needle} not in {err}");
    }
    assert!(!marker.exists(), "the command ran");
    assert!(out.join("100/metadata").exists());

    let o = record(&["--append"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(marker.exists());
    assert!(out.join("100/metadata").exists() && out.join("200.stats.json").exists());

    std::fs::remove_file(&marker).unwrap();
    let o = record(&["--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(marker.exists());
    for gone in ["100", "200", "100.stats.json", "200.stats.json"] {
        assert!(!out.join(gone).exists(), "{gone} left behind");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );

    // Both at once is a usage error; an empty or missing directory needs neither.
    let o = record(&["--force", "--append"]);
    assert_eq!(o.status.code(), Some(2));
    let o = record(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
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
