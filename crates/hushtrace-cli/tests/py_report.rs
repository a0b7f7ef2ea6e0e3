//! `hushtrace report` on a Python trace with asyncio tasks (a synthetic one, as the Python
//! package writes them): a coroutine's calls (`py:call`, one per resumption) and its tasks'
//! lifetimes (`py:task` async slices), both named after the coroutine's function, are two rows
//! with their own counts and totals, not one row mixing both.

mod common;

use common::{hushtrace, stderr, text};
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_ctf::{FieldType, Kind};
use serde_json::Value as J;
use std::path::Path;

/// pid 10: two tasks of `__main__:worker`, [100, 1100] and [200, 1700] ns, each resumed three
/// times for 10 ns (the two tasks' resumptions interleave on the thread), and a plain function
/// `__main__:helper` called once for 5 ns.
fn write_python_trace(dir: &Path) {
    let mut t = SynthTrace::new(10, "python3");
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
    let task_fields: &[(&str, FieldType)] = &[("id", FieldType::U64), ("f", FieldType::U32)];
    let tb = t.class("py:task", Kind::AsyncBegin, Some(task_fields));
    let te = t.class("py:task", Kind::AsyncEnd, Some(task_fields));
    let define = |ts: u64, f: u32, q: &str| {
        SynthEvent::new(def, ts)
            .u32(f)
            .str("__main__")
            .str(q)
            .str("prog.py")
            .u32(f)
    };
    let call = |class: u16, ts: u64, f: u32| SynthEvent::new(class, ts).u32(f);
    let task = |class: u16, ts: u64, id: u64| SynthEvent::new(class, ts).u64(id).u32(1);
    let th = t.thread(10, "python3");
    th.event(define(10, 1, "worker"))
        .event(define(11, 2, "helper"));
    th.event(task(tb, 100, 0xa)).event(task(tb, 200, 0xb));
    for (i, start) in [300u64, 500, 700, 900, 1000, 1600].into_iter().enumerate() {
        th.event(call(cb, start, 1)).event(call(ce, start + 10, 1));
        if i == 4 {
            th.event(task(te, 1100, 0xa));
        }
    }
    th.event(call(cb, 1650, 2)).event(call(ce, 1655, 2));
    th.event(task(te, 1700, 0xb));
    t.write_session(dir).unwrap();
}

#[test]
fn a_coroutines_calls_and_its_tasks_are_separate_rows() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    write_python_trace(&trace);
    let d = trace.to_str().unwrap();

    let o = hushtrace(&["report", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = text(&o.stdout);
    // (row name, count) of the SPAN table's rows.
    let rows: Vec<(String, String)> = out
        .lines()
        .filter(|l| l.starts_with("__main__:"))
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            match cells.as_slice() {
                [name, "(task)", count, ..] => (format!("{name} (task)"), count.to_string()),
                [name, count, ..] => (name.to_string(), count.to_string()),
                _ => panic!("row {l:?}"),
            }
        })
        .collect();
    let want = |n: &str, c: &str| (n.to_string(), c.to_string());
    assert_eq!(
        rows,
        [
            want("__main__:worker (task)", "2"),
            want("__main__:worker", "6"),
            want("__main__:helper", "1"),
        ],
        "{out}"
    );

    let o = hushtrace(&["report", d, "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: J = serde_json::from_slice(&o.stdout).unwrap();
    let rows: Vec<(&str, &str, u64, i64)> = report["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["kind"].as_str().unwrap(),
                r["count"].as_u64().unwrap(),
                r["total_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    // By total time: the tasks' lifetimes (1000 + 1500 ns), the six resumptions (10 ns each),
    // the helper's call.
    assert_eq!(
        rows,
        [
            ("__main__:worker", "task", 2, 2500),
            ("__main__:worker", "span", 6, 60),
            ("__main__:helper", "span", 1, 5),
        ]
    );
    // The resumptions of one thread's coroutines do not overlap: their total fits in the
    // trace's time range (a row merged with the tasks' lifetimes would not); every slice does.
    let duration = report["duration_ns"].as_i64().unwrap();
    assert!(rows[1].3 <= duration, "{rows:?} vs {duration}");
    let spans = report["spans"].as_array().unwrap();
    assert!(spans
        .iter()
        .all(|r| r["max_ns"].as_i64().unwrap() <= duration));
}
