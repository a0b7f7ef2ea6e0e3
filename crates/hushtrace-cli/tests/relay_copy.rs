//! Issue 20.1: what `lttng-relayd` stores is a trace hushtrace's own commands read. A program
//! whose callsites become known one phase after another (`late_types` of
//! `crates/hushtrace-testbins`: metadata updates, a forked child) is recorded through a real
//! relay; `report`, `convert --to chrome|perfetto` and `flamegraph` give the same counts on the
//! relay's copy as on the local trace, and a `--relay-only` session's local directory says
//! where its events are.

mod common;

use common::{hushtrace, testbin, text, BIN};
use serde_json::Value as J;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Everything the commands count, for one trace directory.
#[derive(Debug, PartialEq)]
struct Counts {
    /// report: events per pid, spans, instants and counters (name, count).
    report: Vec<(String, u64)>,
    /// convert's "N events, P process(es), T thread(s)" for chrome and perfetto.
    converted: Vec<String>,
    /// Chrome JSON: trace events by phase.
    chrome_phases: Vec<(String, usize)>,
    /// flamegraph --folded, per process.
    folded: String,
}

fn counts(dir: &Path, scratch: &Path) -> Counts {
    let d = dir.to_str().unwrap();
    let o = hushtrace(&["report", d, "--format", "json"]);
    assert!(o.status.success(), "report {d}: {}", text(&o.stderr));
    let r: J = serde_json::from_slice(&o.stdout).unwrap();
    let mut report = vec![("events".to_string(), r["events"].as_u64().unwrap())];
    for p in r["processes"].as_array().unwrap() {
        // Pids differ between runs but not between a run's two copies.
        report.push((format!("pid {}", p["pid"]), p["events"].as_u64().unwrap()));
        assert_eq!(p["complete"], true, "{d}: {p}");
    }
    for section in ["spans", "instants", "counters"] {
        for x in r[section].as_array().unwrap() {
            report.push((
                format!("{section} {}", x["name"].as_str().unwrap()),
                x["count"].as_u64().unwrap(),
            ));
        }
    }
    let warnings = r["warnings"].as_array().unwrap();
    assert!(warnings.is_empty(), "{d}: {warnings:?}");

    let mut converted = Vec::new();
    let mut chrome_phases = Vec::new();
    for (to, ext) in [("chrome", "json"), ("perfetto", "perfetto-trace")] {
        let out = scratch.join(format!("out.{ext}"));
        let o = hushtrace(&["convert", d, "--to", to, "-o", out.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert!(o.status.success(), "convert {d} --to {to}: {err}");
        assert!(!err.contains("warning"), "convert {d} --to {to}: {err}");
        let line = err
            .lines()
            .find_map(|l| l.split_once(": ").filter(|_| l.starts_with("wrote ")))
            .unwrap_or_else(|| panic!("no summary: {err}"))
            .1
            .to_string();
        converted.push(format!("{to}: {line}"));
        if to == "chrome" {
            let j: J = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
            let mut by: std::collections::BTreeMap<String, usize> = Default::default();
            for e in j["traceEvents"].as_array().unwrap() {
                *by.entry(e["ph"].as_str().unwrap_or("?").to_string())
                    .or_default() += 1;
            }
            chrome_phases = by.into_iter().collect();
        }
    }
    let o = hushtrace(&["flamegraph", d, "--folded", "--per-process", "-o", "-"]);
    assert!(o.status.success(), "flamegraph {d}: {}", text(&o.stderr));
    let svg = scratch.join("flame.svg");
    let s = hushtrace(&["flamegraph", d, "-o", svg.to_str().unwrap()]);
    assert!(s.status.success(), "flamegraph {d}: {}", text(&s.stderr));
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains("late:second"));
    Counts {
        report,
        converted,
        chrome_phases,
        folded: text(&o.stdout),
    }
}

/// Lines that are exactly the CTF signature, in a metadata file.
fn signatures(metadata: &Path) -> usize {
    std::fs::read_to_string(metadata)
        .unwrap()
        .lines()
        .filter(|l| *l == "/* CTF 1.8 */")
        .count()
}

#[test]
fn relay_copies_read_like_the_local_trace() {
    let relay = hushtrace_testsupport::Relayd::start();
    let dir = tempfile::tempdir().unwrap();
    let app = testbin("late_types");
    let url = relay.url();
    let record = |name: &str, only: bool| -> PathBuf {
        let session = dir.path().join(name);
        let mut cmd = Command::new(BIN);
        cmd.args(["record", "-o", session.to_str().unwrap(), "--relay", &url])
            .args(["--relay-host", "hushrelay"]);
        if only {
            cmd.arg("--relay-only");
        }
        // A short read timer: each phase's new types reach the relay as their own update.
        let o = cmd
            .env("HUSHTRACE_READ_TIMER_MS", "5")
            .arg("--")
            .arg(&app)
            .arg("60")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}\n{}\nrelayd: {}",
            text(&o.stdout),
            text(&o.stderr),
            relay.stderr()
        );
        session
    };

    let local = record("updates", false);
    let copy = relay.session_dir("hushrelay", "updates");
    // The relay's metadata really is a sequence of updates (the parent's callsites became
    // known in phases after the header went out).
    let metas: Vec<usize> = std::fs::read_dir(&copy)
        .unwrap()
        .flatten()
        .map(|e| signatures(&e.path().join("metadata")))
        .collect();
    assert_eq!(metas.len(), 2, "parent and forked child: {metas:?}");
    // (Usually 4 in the parent: the header, then one update per phase; a busy machine can merge
    // phases.)
    assert!(
        metas.iter().any(|&n| n >= 2),
        "no metadata update appended: {metas:?}"
    );

    let scratch = tempfile::tempdir().unwrap();
    let want = counts(&local, scratch.path());
    let got = counts(&copy, scratch.path());
    assert_eq!(
        got, want,
        "the relay's copy reads differently from the local trace"
    );
    assert!(want.report[0].1 > 0, "{want:?}");

    // The relay's copy is not called incomplete: it never has statistics files.
    let o = hushtrace(&["report", copy.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(
        !out.contains("INCOMPLETE") && o.stderr.is_empty(),
        "{out}{}",
        text(&o.stderr)
    );
    assert!(out.contains("the relay's copy"), "{out}");

    // Relay only: the local directory says where the events are, the relay's copy has them.
    let only = record("onlyrelay", true);
    let o = hushtrace(&["report", only.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(!out.contains("The trace is empty"), "{out}");
    assert!(
        out.contains("only to an LTTng relay") && out.contains("/onlyrelay/"),
        "{out}"
    );
    // convert says so too, instead of a silently empty output.
    let json = scratch.path().join("only.json");
    let o = hushtrace(&[
        "convert",
        only.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("only to an LTTng relay"), "{err}");
    let got = counts(&relay.session_dir("hushrelay", "onlyrelay"), scratch.path());
    assert_eq!(got.report[0], want.report[0], "{got:?}");
    assert_eq!(got.folded.lines().count(), want.folded.lines().count());
}
