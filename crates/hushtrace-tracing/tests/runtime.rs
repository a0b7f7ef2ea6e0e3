//! A real tokio multi-thread program recorded through the layer: `#[instrument]` async
//! functions that await across worker threads, `spawn_blocking`, nested spans, `Span::record`,
//! events with every field kind and a message, and native async spans; converted to Chrome
//! JSON and read by babeltrace2.

mod common;

use serde_json::Value as Json;
use std::collections::HashMap;
use std::time::Duration;
use tracing::{info, info_span, instrument};

const TASKS: u64 = 16;
/// (pid, category, name, id) of an async slice.
type SliceKey = (u64, String, String, String);
const STEPS: u64 = 4;

#[instrument(target = "app", fields(total = tracing::field::Empty))]
async fn outer(task: u64) -> u64 {
    let mut total = 0;
    for step in 0..STEPS {
        total += inner(task, step).await;
    }
    tracing::Span::current().record("total", total);
    total
}

#[instrument(target = "app")]
async fn inner(task: u64, step: u64) -> u64 {
    // The timer wakes the task on whichever worker is free: it resumes elsewhere.
    tokio::time::sleep(Duration::from_micros(300)).await;
    info!(
        target: "app",
        u = 1u64,
        i = -2i64,
        f = 1.5f64,
        b = true,
        s = "text",
        d = ?[1, 2],
        disp = %"shown",
        task,
        step,
        "step {step} of task {task}"
    );
    tokio::task::yield_now().await;
    step
}

fn blocking(task: u64) {
    let _outer = info_span!(target: "app", "blocking", task).entered();
    let _inner = info_span!(target: "app", "blocking_inner").entered();
    info!(target: "app", task, "blocking work");
}

#[test]
fn tokio_program_is_recorded_right() {
    let dir = common::trace_dir("runtime");
    let session = common::start_session(&dir);
    common::install_layer();

    let rt = common::tokio_runtime();
    rt.block_on(async {
        let mut handles = Vec::new();
        for task in 0..TASKS {
            handles.push(tokio::spawn(outer(task)));
            handles.push(tokio::spawn(async move {
                tokio::task::spawn_blocking(move || blocking(task))
                    .await
                    .unwrap();
                0
            }));
            handles.push(tokio::spawn(hushtrace::InSpanExt::in_span(
                async move {
                    tokio::time::sleep(Duration::from_micros(300)).await;
                    tokio::task::yield_now().await;
                    task
                },
                hushtrace::async_span!("native", "request", task = task),
            )));
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    drop(rt);
    let stats = session.stop().unwrap();
    assert_eq!(stats.events_discarded, 0);

    let events = common::chrome_events(&dir);
    let count = |f: &dyn Fn(&Json) -> bool| events.iter().filter(|e| f(e)).count() as u64;

    // Every async span: exactly one begin and one end per (pid, cat, name, id).
    let mut slices: HashMap<SliceKey, (u64, u64, Option<Json>)> = HashMap::new();
    let mut moved = 0;
    let mut begin_tid: HashMap<(u64, String), u64> = HashMap::new();
    for e in &events {
        let ph = e["ph"].as_str().unwrap();
        if ph != "b" && ph != "e" {
            continue;
        }
        assert!(e["id2"]["local"].is_string(), "async event without id: {e}");
        let id = e["args"]["id"]
            .as_u64()
            .expect("async event without id")
            .to_string();
        let key = (
            e["pid"].as_u64().unwrap(),
            e["cat"].as_str().unwrap().to_string(),
            e["name"].as_str().unwrap().to_string(),
            id.clone(),
        );
        let s = slices.entry(key).or_default();
        let tid = e["tid"].as_u64().unwrap();
        if ph == "b" {
            s.0 += 1;
            s.2 = Some(e["args"].clone());
            begin_tid.insert((e["pid"].as_u64().unwrap(), id), tid);
        } else {
            assert_eq!(s.0, s.1 + 1, "end before begin: {e}");
            s.1 += 1;
            if begin_tid[&(e["pid"].as_u64().unwrap(), id)] != tid {
                moved += 1;
            }
        }
    }
    for (k, (b, e, _)) in &slices {
        assert_eq!((*b, *e), (1, 1), "{k:?}");
    }
    let spans_named = |cat: &str, name: &str| {
        slices
            .iter()
            .filter(|(k, _)| k.1 == cat && k.2 == name)
            .map(|(_, v)| v.2.clone().unwrap())
            .collect::<Vec<_>>()
    };
    let outer_spans = spans_named("app", "outer");
    assert_eq!(outer_spans.len() as u64, TASKS);
    let mut tasks: Vec<u64> = outer_spans
        .iter()
        .map(|a| a["task"].as_i64().unwrap() as u64)
        .collect();
    tasks.sort();
    assert_eq!(tasks, (0..TASKS).collect::<Vec<_>>());
    assert!(outer_spans
        .iter()
        .all(|a| a["total"] == "" && a["id"].is_u64()));
    let inner_spans = spans_named("app", "inner");
    assert_eq!(inner_spans.len() as u64, TASKS * STEPS);
    assert!(
        inner_spans
            .iter()
            .all(|a| a["task"].is_i64() || a["task"].is_u64())
            && inner_spans.iter().all(|a| a["step"].is_number())
    );
    assert_eq!(spans_named("app", "blocking").len() as u64, TASKS);
    assert_eq!(spans_named("app", "blocking_inner").len() as u64, TASKS);
    let native = spans_named("native", "request");
    assert_eq!(native.len() as u64, TASKS);
    assert!(native.iter().all(|a| a["task"].is_number()));

    // Parents (issue 20.3): an inner span's parent is the outer span of its task, blocking's
    // inner span's is blocking; outer, blocking and the native spans are roots.
    let outer_of_task: HashMap<u64, u64> = outer_spans
        .iter()
        .map(|a| (a["task"].as_u64().unwrap(), a["id"].as_u64().unwrap()))
        .collect();
    for a in &inner_spans {
        let task = a["task"].as_u64().unwrap();
        assert_eq!(a["parent"], outer_of_task[&task], "{a}");
    }
    let blocking_ids: Vec<u64> = spans_named("app", "blocking")
        .iter()
        .map(|a| a["id"].as_u64().unwrap())
        .collect();
    assert!(spans_named("app", "blocking_inner")
        .iter()
        .all(|a| blocking_ids.contains(&a["parent"].as_u64().unwrap())));
    for a in outer_spans.iter().chain(&native) {
        assert_eq!(a["parent"], 0, "{a}");
    }
    // In Chrome JSON a child shares its root's async id (nestable async events).
    let chrome_id = |name: &str, id: u64| {
        events
            .iter()
            .find(|e| e["ph"] == "b" && e["name"] == name && e["args"]["id"] == id)
            .map(|e| e["id2"]["local"].as_str().unwrap().to_string())
            .unwrap()
    };
    for a in &inner_spans {
        let parent = a["parent"].as_u64().unwrap();
        assert_eq!(
            chrome_id("inner", a["id"].as_u64().unwrap()),
            chrome_id("outer", parent)
        );
    }
    assert!(
        moved > 0,
        "no span ended on another thread than it began on"
    );

    // Per-thread B/E (none from the bridge) stay balanced.
    let mut depth: HashMap<u64, i64> = HashMap::new();
    for e in &events {
        let d = depth.entry(e["tid"].as_u64().unwrap()).or_default();
        match e["ph"].as_str().unwrap() {
            "B" => *d += 1,
            "E" => {
                *d -= 1;
                assert!(*d >= 0);
            }
            _ => {}
        }
    }
    assert!(depth.values().all(|&d| d == 0));

    // Events: exact counts, typed fields, message and level.
    let steps: Vec<&Json> = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["args"]["s"] == "text")
        .collect();
    assert_eq!(steps.len() as u64, TASKS * STEPS);
    for e in &steps {
        let a = &e["args"];
        assert_eq!(e["cat"], "app");
        assert!(e["name"].as_str().unwrap().starts_with("event "), "{e}");
        assert_eq!(a["level"], "INFO");
        assert_eq!(a["u"], 1);
        assert_eq!(a["i"], -2);
        assert_eq!(a["f"], 1.5);
        assert_eq!(a["b"], true);
        assert_eq!(a["d"], "[1, 2]");
        assert_eq!(a["disp"], "shown");
        let (t, s) = (a["task"].as_i64().unwrap(), a["step"].as_i64().unwrap());
        assert_eq!(a["message"], format!("step {s} of task {t}"));
    }
    assert_eq!(
        count(&|e| e["ph"] == "i" && e["args"]["message"] == "blocking work"),
        TASKS
    );
    // Span::record: one instant per outer span with the recorded total.
    let records: Vec<&Json> = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] == "outer")
        .collect();
    assert_eq!(records.len() as u64, TASKS);
    let sum: u64 = (0..STEPS).sum();
    assert!(records
        .iter()
        .all(|e| e["args"]["total"] == sum && e["args"]["span_id"].is_u64()));
    let instants = TASKS * STEPS + TASKS + TASKS;
    assert_eq!(count(&|e| e["ph"] == "i"), instants);
    let slices_total = TASKS * (1 + STEPS + 2 + 1);
    assert_eq!(slices.len() as u64, slices_total);
    assert_eq!(events.len() as u64, instants + 2 * slices_total);

    assert_eq!(
        common::babeltrace2_events(&dir) as u64,
        instants + 2 * slices_total
    );

    // The report counts each async span once, with its duration from creation to close.
    let session = hushtrace_ctf::reader::Session::open(&dir).unwrap();
    let report = hushtrace_cli::report::compute(&session).unwrap();
    let span = |name: &str| report.spans.iter().find(|s| s.name == name).unwrap();
    assert_eq!(span("app:outer").count, TASKS);
    assert_eq!(span("app:inner").count, TASKS * STEPS);
    assert_eq!(span("native:request").count, TASKS);
    // Each inner span sleeps 300 µs; an outer span holds STEPS of them.
    assert!(span("app:inner").min_ns >= 300_000);
    assert!(span("app:outer").min_ns >= STEPS as i64 * 300_000);
    let _ = std::fs::remove_dir_all(&dir);
}
