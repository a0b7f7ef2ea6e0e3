//! Issue 20.3 and 20.4 on synthetic traces, through the built `hushtrace` binary: async spans
//! with parents nest in Chrome JSON (the root's id and category), lie on a few named Perfetto
//! lanes (decoded with Perfetto's own protos by `tests/perfetto_async_check.py`, in the
//! virtualenv of `ci/perfetto-venv.sh`), and draw as nested flame graph frames; Chrome JSON
//! timestamps keep nanoseconds when read as doubles.

mod common;

use common::{convert, hushtrace, stderr};
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use serde_json::{json, Value as J};
use std::path::Path;
use std::process::Command;

/// pid 10, begins on thread 11 and ends on thread 12 (times in ns from the trace's clock start):
/// request 1 [100, 1000] with fetch 2 [200, 500] and fetch 3 [300, 800] (concurrent siblings);
/// request 4 [1100, 1500] with fetch 5 [1200, 1800], which outlives its parent (possible with
/// `async_span!(parent: ...)`).
fn write_tree(dir: &Path) {
    let mut t = SynthTrace::new(10, "svc");
    let (rb, re) = t.async_span("svc:request");
    let (fb, fe) = t.async_span("net:fetch");
    let begin = |c: u16, ts: u64, id: u64, parent: u64| SynthEvent::new(c, ts).u64(id).u64(parent);
    t.thread(11, "worker-1")
        .event(begin(rb, 100, 1, 0))
        .event(begin(fb, 200, 2, 1))
        .event(begin(fb, 300, 3, 1))
        .event(begin(rb, 1100, 4, 0))
        .event(begin(fb, 1200, 5, 4));
    t.thread(12, "worker-2")
        .event(SynthEvent::new(fe, 500).u64(2))
        .event(SynthEvent::new(fe, 800).u64(3))
        .event(SynthEvent::new(re, 1000).u64(1))
        .event(SynthEvent::new(re, 1500).u64(4))
        .event(SynthEvent::new(fe, 1800).u64(5));
    t.write_session(dir).unwrap();
}

#[test]
fn chrome_nests_async_children_under_their_root() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    write_tree(&trace);
    let out = dir.path().join("t.json");
    convert(&trace, "chrome", &out);
    let doc: J = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let evs: Vec<&J> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] != "M")
        .collect();
    assert_eq!(evs.len(), 10);
    // (ph, name, cat, id2.local, args.id, args.category)
    let got: Vec<(String, String, String, String, u64, J)> = evs
        .iter()
        .map(|e| {
            (
                e["ph"].as_str().unwrap().into(),
                e["name"].as_str().unwrap().into(),
                e["cat"].as_str().unwrap().into(),
                e["id2"]["local"].as_str().unwrap().into(),
                e["args"]["id"].as_u64().unwrap(),
                e["args"]["category"].clone(),
            )
        })
        .collect();
    let row = |ph: &str, name: &str, cat: &str, root: &str, id: u64, own: J| {
        (ph.into(), name.into(), cat.into(), root.into(), id, own)
    };
    assert_eq!(
        got,
        vec![
            row("b", "request", "svc", "0x1", 1, J::Null),
            row("b", "fetch", "svc", "0x1", 2, json!("net")),
            row("b", "fetch", "svc", "0x1", 3, json!("net")),
            row("e", "fetch", "svc", "0x1", 2, json!("net")),
            row("e", "fetch", "svc", "0x1", 3, json!("net")),
            row("e", "request", "svc", "0x1", 1, J::Null),
            row("b", "request", "svc", "0x4", 4, J::Null),
            row("b", "fetch", "svc", "0x4", 5, json!("net")),
            row("e", "request", "svc", "0x4", 4, J::Null),
            row("e", "fetch", "svc", "0x4", 5, json!("net")),
        ]
    );
    // The parent is kept in the begin's args.
    assert_eq!(evs[1]["args"]["parent"], 1);
}

#[test]
fn perfetto_lays_async_slices_on_named_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    write_tree(&trace);
    let pf = dir.path().join("t.perfetto-trace");
    convert(&trace, "perfetto", &pf);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_async_check.py");
    let o = Command::new(hushtrace_testsupport::perfetto_python())
        .arg(script)
        .arg(&pf)
        .arg("--slices")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let s: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["lanes"], json!({"10": ["request", "request 2"]}), "{s}");
    assert_eq!(s["unclosed"], 0);
    // Absolute ns: the synthetic clock starts at 1_700_000_000 s.
    let t0: u64 = 1_700_000_000_000_000_000;
    let sl = |lane: &str, name: &str, b: u64, e: u64, id: J, parent: J, depth: u64| {
        json!([
            lane,
            name,
            if name == "request" { "svc" } else { "net" },
            t0 + b,
            t0 + e,
            id,
            parent,
            depth
        ])
    };
    assert_eq!(
        s["slices"],
        json!([
            sl("request", "request", 100, 1000, json!(1), json!(0), 0),
            sl("request", "fetch", 200, 500, json!(2), json!(1), 1),
            // A second child while the first is open: the next lane of the pool.
            sl("request 2", "fetch", 300, 800, json!(3), json!(1), 0),
            // Lane "request" is free again: reused.
            sl("request", "request", 1100, 1500, json!(4), json!(0), 0),
            sl("request", "fetch", 1200, 1500, json!(5), json!(4), 1),
            // The child outlives its parent: it ends with it on the lane and continues.
            sl("request", "fetch", 1500, 1800, J::Null, J::Null, 0),
        ]),
        "{s}"
    );
}

#[test]
fn flamegraph_draws_async_spans_nested_by_parent() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    write_tree(&trace);
    let folded = dir.path().join("t.folded");
    let o = hushtrace(&[
        "flamegraph",
        trace.to_str().unwrap(),
        "--folded",
        "-o",
        folded.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // request 1: 900 ns, of which its children 300 + 500: self 100; request 4: 400 ns, all
    // its own (its child, 600 ns, ended after it).
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "svc:request 500\nsvc:request;net:fetch 1400\n"
    );
    let o = hushtrace(&[
        "flamegraph",
        trace.to_str().unwrap(),
        "--per-thread",
        "--folded",
        "-o",
        "-",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "svc (10);svc:request 500\nsvc (10);svc:request;net:fetch 1400\n"
    );
    let svg = dir.path().join("t.svg");
    let o = hushtrace(&[
        "flamegraph",
        trace.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("net:fetch") && svg.contains("svc:request"));
}

/// Issue 20.4: a span's duration read from the default Chrome JSON with `f64` (as every JSON
/// reader does) is the CTF's to the nanosecond, at today's epoch times. Absolute microseconds
/// since 1970 keep only a quarter of a microsecond in a double.
#[test]
fn chrome_durations_read_as_doubles_keep_nanoseconds() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let mut t = SynthTrace::new(7, "app");
    let (b, e) = t.span("demo:item", &[]);
    // 2026-12-01: the synthetic clock starts at 1_700_000_000 s; add 96 million seconds.
    let base: u64 = 96_150_968_200_426_488;
    let mut want = Vec::new();
    {
        let th = t.thread(7, "main");
        let mut ts = base;
        for k in 0..500u64 {
            let d = 1_000 + k * 7 % 1_000 + k; // 1,000 .. 2,500 ns, all residues mod 250
            th.event(SynthEvent::new(b, ts))
                .event(SynthEvent::new(e, ts + d));
            want.push(d as i64);
            ts += d + 333;
        }
    }
    t.write_session(&trace).unwrap();
    let out = dir.path().join("t.json");
    convert(&trace, "chrome", &out);
    let doc: J = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let mut open = None;
    let mut got = Vec::new();
    for ev in doc["traceEvents"].as_array().unwrap() {
        match ev["ph"].as_str().unwrap() {
            "B" => open = Some(ev["ts"].as_f64().unwrap()),
            "E" => {
                let d = ev["ts"].as_f64().unwrap() - open.take().unwrap();
                got.push((d * 1000.0).round() as i64);
            }
            _ => {}
        }
    }
    assert_eq!(got, want);
    // The origin, stated in otherData, puts the trace back on the absolute clock.
    let origin: u64 = doc["otherData"]["ts_origin_unix_ns"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(origin, 1_700_000_000_000_000_000 + base);
    assert_eq!(
        doc["otherData"]["ts_origin"],
        "2026-12-01T18:49:28.200426488Z"
    );
    // `--relative-time` is still accepted and writes the same.
    let rel = dir.path().join("rel.json");
    let o = hushtrace(&[
        "convert",
        trace.to_str().unwrap(),
        "-o",
        rel.to_str().unwrap(),
        "--relative-time",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&rel).unwrap(), std::fs::read(&out).unwrap());
}
