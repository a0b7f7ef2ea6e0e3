//! Issue 20.3 for native async spans: `async_span!` records the current async span (the one
//! whose future `in_span` is polling, on whichever tokio worker) as its parent, or the explicit
//! `parent:` (a span, an id, or `None` for a root); the flame graph nests them.

mod common;

use hushtrace::{async_span, InSpanExt};
use hushtrace_ctf::reader::{Session, Value};
use hushtrace_ctf::Kind;
use std::collections::HashMap;
use std::time::Duration;

#[test]
fn native_async_spans_record_current_or_explicit_parents() {
    let dir = common::trace_dir("native-parents");
    let session = common::start_session(&dir);
    let rt = common::tokio_runtime();
    // (name, id, parent the span reports)
    let ids = rt.block_on(async {
        let request = async_span!("native", "request", n = 1u64);
        let request_id = request.id();
        assert_ne!(request_id, 0);
        assert_eq!(request.parent(), 0, "no current span outside in_span");
        let task = async move {
            tokio::time::sleep(Duration::from_micros(200)).await; // resumes on any worker
            let fetch = async_span!("native", "fetch");
            let fetch_id = fetch.id();
            let parse_id = async move {
                tokio::time::sleep(Duration::from_micros(200)).await;
                let parse = async_span!("native", "parse", bytes = 3u64);
                assert_eq!(parse.parent(), hushtrace::AsyncSpan::current_id());
                parse.id()
            }
            .in_span(fetch)
            .await;
            // Back in request's future: its span is current again.
            assert_eq!(hushtrace::AsyncSpan::current_id(), request_id);
            let root = async_span!(parent: None, "native", "detached");
            assert_eq!(root.parent(), 0);
            (fetch_id, parse_id)
        };
        let (fetch_id, parse_id) = tokio::spawn(task.in_span(request)).await.unwrap();
        assert_eq!(
            hushtrace::AsyncSpan::current_id(),
            0,
            "restored after the poll"
        );

        let a = async_span!("native", "a");
        let b = async_span!(parent: &a, "native", "b");
        let c = async_span!(parent: a.id(), "native", "c", x = 2u64);
        assert_eq!((b.parent(), c.parent()), (a.id(), a.id()));
        vec![
            ("fetch", fetch_id, request_id),
            ("parse", parse_id, fetch_id),
            ("b", b.id(), a.id()),
            ("c", c.id(), a.id()),
        ]
    });
    drop(rt);
    session.stop().unwrap();

    // The trace has the same parents.
    let s = Session::open(&dir).unwrap();
    let mut merged = s.merged().unwrap();
    let mut parents: HashMap<u64, (String, u64)> = HashMap::new();
    while let Some(ev) = merged.next().unwrap() {
        if ev.event.class.kind != Kind::AsyncBegin {
            continue;
        }
        let fields = ev.event.class.fields.as_ref().unwrap();
        assert_eq!(fields[1].0, "parent");
        let (Some(Value::U64(id)), Some(Value::U64(parent))) =
            (ev.event.field(0), ev.event.field(1))
        else {
            panic!("begin without id and parent");
        };
        parents.insert(id, (ev.event.class.name.clone(), parent));
    }
    assert_eq!(parents.len(), 7);
    for (name, id, parent) in ids {
        assert_eq!(parents[&id], (format!("native:{name}"), parent));
    }
    let roots: Vec<&str> = parents
        .values()
        .filter(|(_, p)| *p == 0)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(roots.len(), 3, "{roots:?}"); // request, detached, a

    let folded = hushtrace_cli::flame::folded(&s, false).unwrap();
    assert!(
        folded
            .iter()
            .any(|l| l.starts_with("native:request;native:fetch;native:parse ")),
        "{folded:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
