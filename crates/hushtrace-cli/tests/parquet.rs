//! `hushtrace convert --to parquet` (issue 33), read back with DuckDB and pyarrow from PyPI (the
//! virtualenv of `ci/sql-venv.sh`, created on first use; `HUSHTRACE_SQL_PYTHON` names another
//! Python that has both): row counts equal the Chrome conversion's and the report's, every
//! slice's start and duration equal the Chrome slice's to the nanosecond, parents link, a
//! two-host dataset groups by host in one glob, and the queries of docs/sql.md run.

mod common;

use common::{convert, convert_with, hushtrace, stderr};
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_ctf::{FieldType, Kind};
use serde_json::Value as J;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python with `duckdb` and `pyarrow`: `HUSHTRACE_SQL_PYTHON`, else the virtualenv of
/// `ci/sql-venv.sh` (created on first use). Panics, never skips, when it cannot be had.
fn sql_python() -> PathBuf {
    if let Some(p) = std::env::var_os("HUSHTRACE_SQL_PYTHON") {
        return p.into();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o = Command::new("bash")
        .arg(root.join("ci/sql-venv.sh"))
        .output()
        .expect("run bash ci/sql-venv.sh");
    assert!(
        o.status.success(),
        "ci/sql-venv.sh failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).expect("ci/sql-venv.sh prints UTF-8");
    PathBuf::from(
        out.lines()
            .last()
            .expect("ci/sql-venv.sh printed nothing")
            .trim(),
    )
}

/// Runs `script` (in tests/) with `args` under [`sql_python`]; returns its stdout as JSON.
fn python(script: &str, args: &[&Path]) -> J {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let o = Command::new(sql_python())
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Exports `trace` as host `host` into `out`, converts it to Chrome JSON and a JSON report in
/// `tmp`, and runs tests/parquet_check.py on them; returns its summary.
fn check(trace: &Path, out: &Path, host: &str, tmp: &Path) -> J {
    convert_with(trace, "parquet", out, &["--host", host]);
    let json = tmp.join(format!("{host}.json"));
    convert(trace, "chrome", &json);
    let r = hushtrace(&["report", trace.to_str().unwrap(), "--format", "json"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let report = tmp.join(format!("{host}.report.json"));
    std::fs::write(&report, &r.stdout).unwrap();
    let session = trace.file_name().unwrap();
    python(
        "parquet_check.py",
        &[out, Path::new(host), Path::new(session), &json, &report],
    )
}

/// The shared workload (`common::write_span_workload`: pids 100 and 200, spans, instants,
/// counters; thread 102 begins with an end whose begin is missing and reports 5 discarded
/// events and 2 lost packets), tags with quotes (`job "K"`), and pid 10: async spans across
/// threads, a request with two fetches as children.
fn write_workload(dir: &Path, n: u64) {
    common::write_span_workload(dir, n, |k| format!("job \"{k}\""), true);
    let mut t = SynthTrace::new(10, "svc");
    let (rb, re) = t.async_span("svc:request");
    let (fb, fe) = t.async_span("net:fetch");
    let begin = |c: u16, ts: u64, id: u64, parent: u64| SynthEvent::new(c, ts).u64(id).u64(parent);
    t.thread(11, "worker-1")
        .event(begin(rb, 100, 1, 0))
        .event(begin(fb, 200, 2, 1))
        .event(begin(fb, 300, 3, 1));
    t.thread(12, "worker-2")
        .event(SynthEvent::new(fe, 500).u64(2))
        .event(SynthEvent::new(fe, 800).u64(3))
        .event(SynthEvent::new(re, 1000).u64(1));
    t.write_session(dir).unwrap();
}

/// A traced Python program (pid 30): `py:function` definitions (one after its calls, as in
/// overwrite mode) and `py:call` spans: `app.main` [0, 1000] calls `app.work` twice, [100, 400]
/// and [500, 900], which calls `lib.parse` [150, 250]; an asyncio task of `Worker.work`
/// (`py:task`) lives [50, 950].
fn write_python(dir: &Path) {
    let mut t = SynthTrace::new(30, "python3");
    let def = t.instant(
        "py:function",
        &[
            ("f", FieldType::U32),
            ("module", FieldType::Str),
            ("qualname", FieldType::Str),
            ("file", FieldType::Str),
            ("line", FieldType::U32),
        ],
    );
    // Both ends of a call carry its function id, as the package records them.
    let f: &[(&str, FieldType)] = &[("f", FieldType::U32)];
    let cb = t.class("py:call", Kind::SpanBegin, Some(f));
    let ce = t.class("py:call", Kind::SpanEnd, Some(f));
    let d = |f: u32, m: &str, q: &str, line: u32, ts: u64| {
        SynthEvent::new(def, ts)
            .u32(f)
            .str(m)
            .str(q)
            .str(&format!("/src/{m}.py"))
            .u32(line)
    };
    let task_fields: &[(&str, FieldType)] = &[("id", FieldType::U64), ("f", FieldType::U32)];
    let tb = t.class("py:task", Kind::AsyncBegin, Some(task_fields));
    let te = t.class("py:task", Kind::AsyncEnd, Some(task_fields));
    let call = |c: u16, f: u32, ts: u64| SynthEvent::new(c, ts).u32(f);
    t.thread(30, "MainThread")
        .event(d(1, "app", "main", 10, 0))
        .event(d(2, "app", "Worker.work", 20, 0))
        .event(call(cb, 1, 0))
        .event(SynthEvent::new(tb, 50).u64(0xa).u32(2))
        .event(call(cb, 2, 100))
        .event(call(cb, 3, 150))
        .event(call(ce, 3, 250))
        .event(call(ce, 2, 400))
        .event(call(cb, 2, 500))
        .event(call(ce, 2, 900))
        .event(SynthEvent::new(te, 950).u64(0xa).u32(2))
        .event(call(ce, 1, 1000))
        .event(d(3, "lib", "parse", 7, 1001));
    t.write_session(dir).unwrap();
}

#[test]
fn parquet_equals_chrome_and_report_on_a_synthetic_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("synth");
    write_workload(&trace, 300);
    let out = dir.path().join("pq");
    let s = check(&trace, &out, "a", dir.path());
    // 2 slices per iteration on 3 threads, and the 3 async spans.
    assert_eq!(s["slices"], 3 * 2 * 300 + 3, "{s}");
    assert_eq!(s["ended"], 3 * 2 * 300 + 3, "{s}");
    assert_eq!(s["instants"], 3 * 300, "{s}");
    assert_eq!(s["counters"], 3 * 2 * 300, "{s}");
    // Every step under its job, both fetches under their request.
    assert_eq!(s["with_parent"], 3 * 300 + 2, "{s}");
    assert_eq!(
        (s["discarded"].as_u64(), s["lost_packets"].as_u64()),
        (Some(5), Some(2))
    );
}

#[test]
fn parquet_equals_chrome_and_report_on_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let o = hushtrace(&["demo", "-o", demo.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = check(&demo, &dir.path().join("pq"), "demo-host", dir.path());
    // As the Perfetto test counts them: 9551 slices, none left open.
    assert_eq!(s["slices"], s["ended"], "{s}");
    assert!(s["slices"].as_u64().unwrap() > 8000, "{s}");
}

#[test]
fn python_calls_carry_their_function() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("py");
    write_python(&trace);
    let out = dir.path().join("pq");
    let s = check(&trace, &out, "h", dir.path());
    assert_eq!(s["slices"], 5, "{s}");
    let q = python(
        "parquet_query.py",
        &[
            &out,
            Path::new(
                "select name, py_module, py_qualname, py_file, py_line, depth, dur_ns, self_ns \
                 from read_parquet('OUT/*/*/slices.parquet') order by start_ns",
            ),
        ],
    );
    assert_eq!(
        q,
        serde_json::json!([
            ["main", "app", "main", "/src/app.py", 10, 0, 1000, 300],
            [
                "Worker.work",
                "app",
                "Worker.work",
                "/src/app.py",
                20,
                0,
                900,
                900
            ],
            [
                "Worker.work",
                "app",
                "Worker.work",
                "/src/app.py",
                20,
                1,
                300,
                200
            ],
            ["parse", "lib", "parse", "/src/lib.py", 7, 2, 100, 100],
            [
                "Worker.work",
                "app",
                "Worker.work",
                "/src/app.py",
                20,
                1,
                400,
                400
            ],
        ])
    );
}

#[test]
fn two_hosts_group_by_host_in_one_glob() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("synth");
    write_workload(&trace, 20);
    let out = dir.path().join("fleet");
    check(&trace, &out, "a", dir.path());
    check(&trace, &out, "b", dir.path());
    let q = python(
        "parquet_query.py",
        &[
            &out,
            Path::new(
                "select host, session, count(*), sum(dur_ns) \
                 from read_parquet('OUT/*/*/slices.parquet') group by all order by host",
            ),
        ],
    );
    let one = 3 * 2 * 20 + 3;
    let total = q[0][3].clone();
    assert_eq!(
        q,
        serde_json::json!([["a", "synth", one, total], ["b", "synth", one, total]])
    );
    // The default host is the one the trace recorded (the synthetic metadata's).
    let plain = dir.path().join("plain");
    convert(&trace, "parquet", &plain);
    let hosts: Vec<String> = std::fs::read_dir(&plain)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let recorded = hushtrace_ctf::reader::Session::open(&trace).unwrap().traces[0]
        .desc
        .hostname
        .clone();
    assert_eq!(hosts, vec![format!("host={recorded}")]);
}

#[test]
fn bad_output_and_corrupt_traces_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("synth");
    write_workload(&trace, 5);
    // OUT is a file: no directory can be made there.
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let o = hushtrace(&[
        "convert",
        trace.to_str().unwrap(),
        "--to",
        "parquet",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("cannot write") && err.contains("file"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // A host name that cannot be a directory.
    let o = hushtrace(&[
        "convert",
        trace.to_str().unwrap(),
        "--to",
        "parquet",
        "-o",
        dir.path().join("o").to_str().unwrap(),
        "--host",
        "a/b",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("host name \"a/b\""), "{}", stderr(&o));
    // A stream cut in the middle of a packet, and garbage metadata.
    let stream = trace.join("100").join("stream_0");
    let bytes = std::fs::read(&stream).unwrap();
    std::fs::write(&stream, &bytes[..bytes.len() / 2 + 3]).unwrap();
    let out = dir.path().join("cut");
    let o = hushtrace(&[
        "convert",
        trace.to_str().unwrap(),
        "--to",
        "parquet",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    std::fs::write(trace.join("100").join("metadata"), b"garbage").unwrap();
    let o = hushtrace(&[
        "convert",
        trace.to_str().unwrap(),
        "--to",
        "parquet",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("metadata"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    // No partial file is left behind.
    let partial = walk(&out)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".partial"));
    assert_eq!(partial.count(), 0);
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn the_queries_of_docs_sql_md_run() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("synth");
    write_workload(&trace, 50);
    let py = dir.path().join("py");
    write_python(&py);
    let out = dir.path().join("fleet");
    for host in ["a", "b"] {
        convert_with(&trace, "parquet", &out, &["--host", host]);
    }
    convert_with(&py, "parquet", &out, &["--host", "a"]);
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/sql.md");
    let r = python("parquet_docs.py", &[&out, &doc]);
    let r = r.as_array().unwrap();
    assert!(r.len() >= 9, "{r:?}");
    for q in r {
        assert!(!q["rows"].as_array().unwrap().is_empty(), "no rows: {q}");
    }
    let rows = |start: &str| {
        r.iter()
            .find(|q| q["query"].as_str().unwrap().starts_with(start))
            .unwrap_or_else(|| panic!("no query starting {start}"))["rows"]
            .clone()
    };
    // Python: Worker.work's self time (200 + 400 ns) is the largest.
    let hot = rows("SELECT py_module");
    assert_eq!(
        hot[0],
        serde_json::json!(["app", "Worker.work", "/src/app.py", 20, 2, 600, 700])
    );
    // Per host: both hosts for the four span names of the workload, host a for the three
    // Python functions.
    let per_host = rows("SELECT category || ':' || name AS span, host");
    assert_eq!(per_host.as_array().unwrap().len(), 2 * 4 + 3, "{per_host}");
    // Losses: thread 102's, once per host.
    let losses = rows("SELECT host, session, stream,");
    let total: u64 = losses
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[4].as_u64().unwrap() + r[5].as_u64().unwrap())
        .sum();
    assert_eq!(total, 2 * (5 + 2), "{losses}");
    // The slowest jobs: ten of them, longest first.
    let slow = rows("SELECT host, session, pid, tid, thread_name");
    assert_eq!(slow.as_array().unwrap().len(), 10);
}

/// With a kernel trace (`record --kernel`: root and tracefs; fails, never skips, without them):
/// `sched` holds the switches, and the `thread_state` intervals of the slowest preempted
/// cycles, clipped to each cycle, are `report --slowest`'s.
#[test]
fn kernel_thread_state_equals_report_slowest() {
    if let Err(e) = hushtrace_kernel::tracefs::find_or_mount() {
        panic!("this test needs tracefs (run it as root): {e}");
    }
    let _l = hushtrace_testsupport::cross_process_lock("hushtrace-kernel-tests");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("k");
    let o = hushtrace(&[
        "record",
        "--kernel",
        "sched",
        "-o",
        dir.to_str().unwrap(),
        "--",
        common::testbin("kernel_workload").to_str().unwrap(),
        "preempt",
        "100",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = tmp.path().join("pq");
    let s = check(&dir, &out, "k", tmp.path());
    assert!(s["slices"].as_u64().unwrap() >= 100, "{s}");

    let session = hushtrace_ctf::reader::Session::open(&dir).unwrap();
    let k = hushtrace_cli::kernel_report::compute(&session, Some("rt:cycle"), 5).unwrap();
    let mut preempted = 0;
    for sp in &k.slowest {
        let x = sp.why.as_ref().expect("explained");
        preempted += u64::from(x.runnable_ns > 0);
        let (a, b) = (sp.start_ns, sp.start_ns + sp.duration_ns);
        let sql = format!(
            "select state, greatest(start_ns, {a}), least(coalesce(end_ns, {max}), {b}), cpu \
             from read_parquet('OUT/*/*/thread_state.parquet') \
             where tid = {tid} and state <> 'running' and start_ns < {b} \
             and coalesce(end_ns, {max}) > {a} order by start_ns, state desc",
            max = i64::MAX,
            tid = sp.tid
        );
        let got = python("parquet_query.py", &[&out, Path::new(&sql)]);
        let want: Vec<J> = x
            .intervals
            .iter()
            .map(|i| {
                let state = if i.runnable { "runnable" } else { "blocked" };
                serde_json::json!([state, i.start, i.end, i.cpu])
            })
            .collect();
        assert_eq!(got, J::Array(want), "{}", k.slowest_text());
    }
    assert!(
        preempted > 0,
        "no slow cycle was preempted:\n{}",
        k.slowest_text()
    );
    let sched = python(
        "parquet_query.py",
        &[
            &out,
            Path::new(
                "select count(*) filter (where event = 'switch'), \
                 count(*) filter (where event like 'wak%') \
                 from read_parquet('OUT/*/*/sched.parquet')",
            ),
        ],
    );
    assert!(sched[0][0].as_u64().unwrap() >= 200, "{sched}");

    // docs/sql.md's kernel queries: the slowest cycles' runnable and blocked time is the
    // report's, and the hog ran instead.
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/sql.md");
    let r = python("parquet_docs.py", &[&out, &doc, Path::new("kernel")]);
    let r = r.as_array().unwrap();
    assert_eq!(r.len(), 2, "{r:?}");
    let slow = r[0]["rows"].as_array().unwrap();
    for sp in &k.slowest {
        let x = sp.why.as_ref().unwrap();
        let row = slow
            .iter()
            .find(|row| row[2] == sp.start_ns && row[1] == sp.tid)
            .unwrap_or_else(|| panic!("{} not in {slow:?}", sp.start_ns));
        assert_eq!(
            (&row[3], &row[4], &row[5]),
            (
                &J::from(sp.duration_ns),
                &J::from(x.runnable_ns),
                &J::from(x.blocked_ns)
            ),
            "{row:?}"
        );
    }
    assert!(!r[1]["rows"].as_array().unwrap().is_empty(), "{r:?}");
}
