//! Filters: `tracing`'s (a global `EnvFilter` and a per-layer filter) and hushtrace's globs
//! (also a glob set before the callsite registers) decide what is recorded; a filtered-out
//! level records nothing.

mod common;

use tracing::{debug, info, info_span, trace, warn};
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::prelude::*;

/// The two tests share the process's one session under `cargo test` (nextest runs each in its
/// own process).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn filters_and_globs_apply() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::trace_dir("filters");
    let session = common::start_session(&dir);
    // A glob set before any tracing callsite exists.
    hushtrace::disable("muted:*");
    tracing_subscriber::registry()
        .with(EnvFilter::new("debug,noisy=warn"))
        .with(hushtrace_tracing::layer().with_filter(LevelFilter::INFO))
        .init();

    for i in 0..10u64 {
        trace!(target: "app", i, "trace: global filter");
        debug!(target: "app", i, "debug: per-layer filter");
        info!(target: "noisy", i, "info: EnvFilter directive");
        info!(target: "muted", i, "info: hushtrace glob");
        let _s = info_span!(target: "muted", "muted_span", i).entered();
        info!(target: "app", i, "kept");
        warn!(target: "noisy", i, "kept");
    }
    // Globs change at run time, for callsites registered already.
    hushtrace::disable("app:*");
    info!(target: "app", "after disable");
    hushtrace::enable("muted:*");
    info!(target: "muted", "after enable");

    session.stop().unwrap();
    let events = common::chrome_events(&dir);
    let messages: Vec<&str> = events
        .iter()
        .map(|e| e["args"]["message"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(messages.iter().filter(|m| **m == "kept").count(), 20);
    assert_eq!(messages.iter().filter(|m| **m == "after enable").count(), 1);
    assert_eq!(events.len(), 21, "{messages:?}");
    assert!(events.iter().all(|e| e["ph"] == "i"));
    assert!(events
        .iter()
        .all(|e| e["args"]["level"] == "INFO" || e["args"]["level"] == "WARN"));
    assert_eq!(common::babeltrace2_events(&dir), 21);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_session_nothing_is_recorded_and_nothing_breaks() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let subscriber = tracing_subscriber::registry().with(hushtrace_tracing::layer());
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..100u64 {
            let span = info_span!(target: "nosession", "no_session", x = tracing::field::Empty);
            span.record("x", i);
            span.in_scope(|| info!(target: "nosession", a = 1.5, b = ?Some(i), "no session"));
        }
    });
    // The layer saw the callsites: it registered them with hushtrace (the span's begin, record
    // and end, the event; at least one variant each) ...
    assert!(hushtrace::enable("nosession:*") >= 4);
    // ... and recorded nothing: no trace was written, and a session started afterwards finds
    // nothing left over from them.
    let dir = common::trace_dir("no-session");
    let session = common::start_session(&dir);
    let stats = session.stop().unwrap();
    assert_eq!(stats.events_written, 0);
    assert_eq!(stats.events_discarded, 0);
    if let Ok(s) = hushtrace_ctf::reader::Session::open(&dir) {
        let mut merged = s.merged().unwrap();
        assert!(merged.next().unwrap().is_none(), "an event was recorded");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
