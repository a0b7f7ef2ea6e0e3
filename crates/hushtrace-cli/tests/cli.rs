//! The `hushtrace` binary on synthetic traces: convert here; report and flamegraph in
//! `cli/report.rs`; usage errors and `record` in `cli/usage.rs`.

mod common;
#[path = "cli/report.rs"]
mod report;
#[path = "cli/usage.rs"]
mod usage;

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
