//! `hushtrace convert --to perfetto` (issue 13.1), checked with Perfetto's own definitions:
//! `tests/perfetto_check.py` decodes the output with the Python modules generated from
//! Perfetto's `.proto` files (the `perfetto` PyPI package, in the virtualenv that
//! `ci/perfetto-venv.sh` creates on first use) and compares slices per thread, names, pids,
//! tids, instants, counters, fields and timestamps with the Chrome conversion of the same trace.
//!
//! `HUSHTRACE_PERFETTO_PYTHON` names another Python that has the `perfetto` package.

mod common;

use common::{convert, hushtrace, stderr};
use serde_json::Value as J;
use std::path::Path;
use std::process::Command;

/// Converts `dir` both ways and runs the Perfetto-side check; returns its summary and the two
/// file sizes (perfetto, chrome).
fn check(dir: &Path, out: &Path) -> (J, u64, u64) {
    let pf = out.join("trace.perfetto-trace");
    let json = out.join("trace.json");
    convert(dir, "perfetto", &pf);
    convert(dir, "chrome", &json);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_check.py");
    let o = Command::new(hushtrace_testsupport::perfetto_python())
        .arg(script)
        .arg(&pf)
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: J = serde_json::from_slice(&o.stdout).unwrap();
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    (summary, size(&pf), size(&json))
}

/// The shared workload (`common::write_span_workload`), tags `job K`, no losses.
fn write_workload(dir: &Path, n: u64) {
    common::write_span_workload(dir, n, |k| format!("job {k}"), false);
}

#[test]
fn perfetto_matches_chrome_on_a_synthetic_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    write_workload(&trace, 200);
    let (s, pf, json) = check(&trace, dir.path());
    assert_eq!(
        s["processes"],
        serde_json::json!({"100": "proc100", "200": "proc200"})
    );
    assert_eq!(
        s["threads"],
        serde_json::json!({"100/101": "t101", "100/102": "t102", "200/200": "t200"})
    );
    // Two slices per iteration on every thread, one instant, one sample per counter track.
    for t in ["100/101", "100/102", "200/200"] {
        assert_eq!(s["slices"][t], 400, "{t}");
        assert_eq!(s["instants"][t], 200, "{t}");
    }
    assert_eq!(
        s["counters"],
        serde_json::json!({"100/disk:errors": 400, "100/net:errors": 400,
                           "200/disk:errors": 200, "200/net:errors": 200})
    );
    // Absolute timestamps in ns: the synthetic clock starts at 1_700_000_000 s; the first
    // slice to end on pid 200 is the first inner step, [base + 100, base + 300].
    let base: u64 = 1_700_000_000_000_000_000 + 1_000_000 + 1400;
    assert_eq!(
        s["first_slice"]["200/200"],
        serde_json::json!(["step", "work", base + 100, base + 300])
    );
    // Field-heavy (four fields per step, f64s take 9 bytes in protobuf): about 1/3.8 of the
    // JSON (whose timestamps, relative since issue 20.4, are short).
    assert!(
        pf * 7 <= json * 2,
        "perfetto {pf} bytes is more than 2/7 of the JSON's {json}"
    );
}

#[test]
fn perfetto_matches_chrome_on_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let o = hushtrace(&["demo", "-o", demo.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (s, pf, json) = check(&demo, dir.path());
    let slices: u64 = s["slices"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    // demo:job 900 + parse 900 + compute 900 + kernel 3600 + rt:cycle 2000 + child:batch 50
    // + child:item 400 + demo:fork 1.
    assert_eq!(slices, 8751, "{s}");
    assert_eq!(s["processes"].as_object().unwrap().len(), 2, "{s}");
    assert_eq!(s["threads"].as_object().unwrap().len(), 6, "{s}");
    assert!(pf * 4 <= json, "perfetto {pf} bytes, JSON {json}");
}

/// The output streams to stdout like the JSON, and a closed pipe ends quietly.
#[test]
fn perfetto_to_stdout_equals_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    write_workload(&trace, 3);
    let file = dir.path().join("t.pftrace");
    convert(&trace, "perfetto", &file);
    let o = hushtrace(&[
        "convert",
        trace.to_str().unwrap(),
        "--to",
        "perfetto",
        "-o",
        "-",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, std::fs::read(&file).unwrap());
}
