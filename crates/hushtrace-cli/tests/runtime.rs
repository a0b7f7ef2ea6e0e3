//! End to end with the real runtime: `hushtrace record` a program using
//! `hushtrace::start_from_env()` (`traced_app` of `crates/hushtrace-testbins`, forking a child),
//! then convert and report; and `hushtrace demo`.

mod common;

use common::{convert, hushtrace, testbin, text};
use serde_json::Value as J;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn chrome(dir: &Path) -> Vec<J> {
    let out = dir.join("trace.json");
    convert(dir, "chrome", &out);
    let j: J = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    j["traceEvents"].as_array().unwrap().clone()
}

/// Checks B/E pairing per pid/tid and returns counts per (ph, cat:name) and the pids per name.
type Counts = HashMap<(String, String), u64>;
type Pids = HashMap<String, Vec<u64>>;

fn check_pairs(events: &[J]) -> (Counts, Pids) {
    let mut counts = HashMap::new();
    let mut pids: HashMap<String, Vec<u64>> = HashMap::new();
    let mut stacks: HashMap<(u64, u64), Vec<String>> = HashMap::new();
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        if ph == "M" {
            continue;
        }
        // Counters are named "cat:name" already (issue 13.3).
        let name = if ph == "C" {
            e["name"].as_str().unwrap().to_string()
        } else {
            format!(
                "{}:{}",
                e["cat"].as_str().unwrap(),
                e["name"].as_str().unwrap()
            )
        };
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        *counts.entry((ph.to_string(), name.clone())).or_default() += 1;
        let p = pids.entry(name.clone()).or_default();
        if !p.contains(&key.0) {
            p.push(key.0);
        }
        match ph {
            "B" => stacks.entry(key).or_default().push(name),
            "E" => assert_eq!(
                stacks.get_mut(&key).and_then(|s| s.pop()),
                Some(name),
                "{e}"
            ),
            _ => {}
        }
    }
    assert!(stacks.values().all(|s| s.is_empty()), "{stacks:?}");
    (counts, pids)
}

#[test]
fn record_convert_report_with_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s");
    let app = testbin("traced_app");
    let o = hushtrace(&[
        "record",
        "-o",
        session.to_str().unwrap(),
        "--subbuf-size",
        "8192",
        // 512 KiB per thread: small packets, but room for the whole run (~60 KB a thread) if
        // the consumer is not scheduled for a while on a loaded machine.
        "--num-subbufs",
        "64",
        "--",
        app.to_str().unwrap(),
        "3",
        "500",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("events written"), "{stdout}");

    let events = chrome(&session);
    let (counts, pids) = check_pairs(&events);
    for (ph, name, n) in [
        ("B", "app:job", 1500),
        ("E", "app:job", 1500),
        ("B", "app:step", 1500),
        ("i", "app:tick", 1500),
        ("C", "app:depth", 1500),
        ("B", "child:job", 500),
    ] {
        assert_eq!(
            counts.get(&(ph.to_string(), name.to_string())),
            Some(&n),
            "{ph} {name}"
        );
    }
    // The forked child has its own pid.
    assert_eq!(pids["app:job"].len(), 1);
    assert_eq!(pids["child:job"].len(), 1);
    assert_ne!(pids["app:job"], pids["child:job"]);
    // Field values survive.
    let mut jobs: Vec<u64> = events
        .iter()
        .filter(|e| e["name"] == "job" && e["cat"] == "app" && e["ph"] == "B")
        .map(|e| e["args"]["job"].as_u64().unwrap())
        .collect();
    jobs.sort();
    assert_eq!(jobs, (0..500).flat_map(|j| [j, j, j]).collect::<Vec<_>>());
    assert!(events
        .iter()
        .any(|e| e["name"] == "step" && e["args"]["name"] == "inner"));

    let o = hushtrace(&["report", session.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success());
    let r: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["processes"].as_array().unwrap().len(), 2);
    let written: u64 = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["stats_written"].as_u64().unwrap())
        .sum();
    assert_eq!(written, r["events"].as_u64().unwrap());
    assert_eq!(r["unclosed_spans"], 0);
}

#[test]
fn demo_writes_everything() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let o = hushtrace(&["demo", "-o", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("ui.perfetto.dev"), "{stdout}");
    assert!(stdout.contains("babeltrace2"), "{stdout}");
    assert!(stdout.contains("demo:job"), "{stdout}");
    assert!(std::fs::read_to_string(out.join("flame.svg"))
        .unwrap()
        .contains("demo:kernel"));
    let j: J = serde_json::from_slice(&std::fs::read(out.join("trace.json")).unwrap()).unwrap();
    let (counts, pids) = check_pairs(j["traceEvents"].as_array().unwrap());
    assert_eq!(counts[&("B".to_string(), "demo:job".to_string())], 900);
    assert_eq!(counts[&("B".to_string(), "rt:cycle".to_string())], 2000);
    assert_eq!(counts[&("B".to_string(), "child:batch".to_string())], 50);
    assert_ne!(pids["demo:job"], pids["child:batch"]);
    // Running it again over its own output is fine.
    let o = hushtrace(&["demo", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Events per vpid in babeltrace2's text output of `path`, which must read with no diagnostic.
fn babeltrace_by_vpid(path: &Path) -> std::collections::BTreeMap<u64, u64> {
    let mut by = std::collections::BTreeMap::new();
    for line in hushtrace_testsupport::babeltrace(path).lines() {
        let vpid = line
            .split("vpid = ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no vpid in {line}"));
        *by.entry(vpid).or_insert(0) += 1;
    }
    by
}

/// `record --relay` streams every process of the run (the forked child too) to a real
/// `lttng-relayd` under the names given, and the relay's copy holds exactly the events of the
/// local trace; with `--relay-only` the relay gets the same events and the local directory no
/// event stream.
#[test]
fn record_streams_to_a_relay() {
    let relay = hushtrace_testsupport::Relayd::start();
    let dir = tempfile::tempdir().unwrap();
    let app = testbin("traced_app");
    let url = relay.url();
    let run = |name: &str, only: bool| -> PathBuf {
        let session = dir.path().join(name);
        let mut args = vec![
            "record",
            "-o",
            session.to_str().unwrap(),
            "--relay",
            &url,
            "--relay-host",
            "hushcli",
        ];
        if only {
            args.push("--relay-only");
        }
        args.extend(["--", app.to_str().unwrap(), "2", "300"]);
        let o = hushtrace(&args);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{stdout}\n{}\nrelayd: {}",
            String::from_utf8_lossy(&o.stderr),
            relay.stderr()
        );
        assert!(
            stdout.contains(&format!("streamed to the relay at {url} as hushcli/{name}")),
            "{stdout}"
        );
        session
    };
    let session = run("clisess", false);
    let local = babeltrace_by_vpid(&session);
    let remote = babeltrace_by_vpid(&relay.session_dir("hushcli", "clisess"));
    assert_eq!(local.len(), 2, "parent and forked child: {local:?}");
    assert!(local.values().all(|&n| n > 0), "{local:?}");
    assert_eq!(
        remote, local,
        "the relay's copy differs from the local trace"
    );

    let session = run("clionly", true);
    let only = babeltrace_by_vpid(&relay.session_dir("hushcli", "clionly"));
    let mut want: Vec<u64> = local.values().copied().collect();
    let mut got: Vec<u64> = only.values().copied().collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "relay-only: the relay's copy per process");
    for e in std::fs::read_dir(&session).unwrap().flatten() {
        if e.path().is_dir() {
            for f in std::fs::read_dir(e.path()).unwrap().flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                assert!(!name.starts_with("stream_"), "local stream {name}");
            }
        }
    }
}

/// A relay that is not listening, or an address that is not one, is refused before the command
/// runs (exit 2, naming the flag), so no process starts untraced or without its relay.
#[test]
fn record_refuses_a_bad_or_unreachable_relay() {
    let dir = tempfile::tempdir().unwrap();
    let port = hushtrace_testsupport::free_port(); // nothing listens there
    let marker = dir.path().join("ran");
    for (url, says) in [
        (format!("net://127.0.0.1:{port}:{port}"), "cannot reach"),
        ("tcp://127.0.0.1".to_string(), "invalid relay address"),
    ] {
        let session = dir.path().join("s");
        let o = hushtrace(&[
            "record",
            "-o",
            session.to_str().unwrap(),
            "--relay",
            &url,
            "--",
            "touch",
            marker.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{url}: {stderr}");
        assert!(
            stderr.contains("--relay") && stderr.contains(says),
            "{url}: {stderr}"
        );
        assert!(!marker.exists(), "{url}: the command ran");
    }
    // --relay-session without --relay is a usage error too.
    let o = hushtrace(&["record", "-o", "x", "--relay-session", "s", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Packets of every stream file under `dir`: `(packets, padded)`, padded meaning
/// `packet_size` beyond `content_size`. Each file must split into whole packets
/// (`hushtrace_relay::split_packets`, what the relay client sends them by).
fn packets_and_padding(dir: &Path) -> (u64, u64) {
    let (mut packets, mut padded) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            let (n, pad) = packets_and_padding(&p);
            packets += n;
            padded += pad;
            continue;
        }
        if !e.file_name().to_string_lossy().starts_with("stream_") {
            continue;
        }
        let b = std::fs::read(&p).unwrap();
        for r in hushtrace_relay::split_packets(&b) {
            let (_, ix) = r.unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            packets += 1;
            padded += u64::from(ix.content_size_bits < ix.packet_size_bits);
        }
    }
    (packets, padded)
}

#[test]
fn record_direct_io_pads_packets_and_the_trace_reads_whole() {
    // Under the cargo target directory: a disk file system (a temporary directory may be a
    // tmpfs, which refuses O_DIRECT on older kernels).
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("record-direct-io");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let app = testbin("traced_app");
    let run = |name: &str, direct: bool| {
        let session = root.join(name);
        let s = session.to_str().unwrap();
        let mut args = vec!["record", "-o", s, "--num-subbufs", "64"];
        if direct {
            args.push("--direct-io");
        }
        args.extend(["--", app.to_str().unwrap(), "2", "300"]);
        let o = hushtrace(&args);
        assert!(
            o.status.success(),
            "{}\n{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        (session, text(&o.stderr))
    };
    let (page, _) = run("page", false);
    let (direct, stderr) = run("direct", true);
    let (n, pad) = packets_and_padding(&page);
    assert!(n > 0);
    assert_eq!(pad, 0, "without --direct-io no packet is padded");
    let (n, pad) = packets_and_padding(&direct);
    assert!(
        !stderr.contains("refuses O_DIRECT"),
        "the trace directory's file system refuses O_DIRECT; this test needs one that takes it \
         (ext4): {stderr}"
    );
    assert!(
        pad > 0 && pad == n,
        "--direct-io pads every packet: {pad} of {n}"
    );
    // The same events either way, read through the padding.
    let count = |dir: &Path| {
        let events = chrome(dir);
        check_pairs(&events).0
    };
    assert_eq!(count(&page), count(&direct));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn record_consumer_sched_reaches_the_program_and_bad_values_are_refused_before_it_runs() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("record-consumer-sched");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let app = testbin("traced_app");
    let app = app.to_str().unwrap();
    let count = |session: &Path, flags: &[&str]| {
        let s = session.to_str().unwrap();
        let mut args = vec!["record", "-o", s];
        args.extend(flags);
        args.extend(["--", app, "2", "300"]);
        let o = hushtrace(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        // A refused setting would be said on the program's stderr; nice 4 is always allowed.
        assert!(
            !text(&o.stderr).contains("keeps its scheduling"),
            "{}",
            text(&o.stderr)
        );
        check_pairs(&chrome(session)).0
    };
    let plain = count(&root.join("plain"), &[]);
    let set = count(
        &root.join("set"),
        &["--consumer-sched", "nice:4", "--consumer-cpus", "0"],
    );
    assert!(plain.values().sum::<u64>() > 0);
    assert_eq!(plain, set);
    // A bad value is refused by the CLI (exit code 2), naming the flag; the program never runs.
    for (flag, bad) in [("--consumer-sched", "fifo:0"), ("--consumer-cpus", "1-0")] {
        let session = root.join("bad");
        let o = hushtrace(&[
            "record",
            "-o",
            session.to_str().unwrap(),
            flag,
            bad,
            "--",
            app,
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains(flag), "{}", text(&o.stderr));
        assert!(!session.exists());
    }
    let _ = std::fs::remove_dir_all(&root);
}
