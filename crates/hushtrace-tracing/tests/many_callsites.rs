//! Issue 18.8: a program with 10,000 distinct `tracing` callsites. Every event is recorded or
//! counted as discarded, never silently dropped (`written + discarded == emitted`); the trace
//! holds what was written. (Past about 8,200 callsites the bridge used to record nothing and
//! count nothing: `written 81920 discarded 0`.)
//!
//! The callsites are made at run time (a leaked `Metadata` per callsite, registered with
//! `tracing_core::callsite::register`), as 10,000 macro invocations would be at compile time.

mod common;

use std::sync::OnceLock;
use std::time::Instant;
use tracing_core::callsite::{Callsite, Identifier};
use tracing_core::field::{FieldSet, Value};
use tracing_core::metadata::Kind;
use tracing_core::{Event, Interest, Level, Metadata};

const CALLSITES: usize = 10_000;
const EVENTS_EACH: u64 = 2;

/// A callsite made at run time.
struct DynCallsite {
    meta: OnceLock<Metadata<'static>>,
}

impl Callsite for DynCallsite {
    fn set_interest(&self, _: Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        self.meta.get().expect("set before registration")
    }
}

fn make_callsite(i: usize) -> &'static Metadata<'static> {
    let cs: &'static DynCallsite = Box::leak(Box::new(DynCallsite {
        meta: OnceLock::new(),
    }));
    let name: &'static str = Box::leak(format!("event many.rs:{i}").into_boxed_str());
    let fields = FieldSet::new(&["n", "message"], Identifier(cs));
    let _ = cs.meta.set(Metadata::new(
        name,
        "many",
        Level::INFO,
        Some("many.rs"),
        Some(i as u32),
        Some("many"),
        fields,
        Kind::EVENT,
    ));
    tracing_core::callsite::register(cs);
    cs.meta.get().unwrap()
}

fn emit(meta: &'static Metadata<'static>, n: u64) {
    let fields = meta.fields();
    let nf = fields.field("n").unwrap();
    let mf = fields.field("message").unwrap();
    let msg = format_args!("hello");
    let values: [(&tracing_core::field::Field, Option<&dyn Value>); 2] = [
        (&nf, Some(&n as &dyn Value)),
        (&mf, Some(&msg as &dyn Value)),
    ];
    Event::dispatch(meta, &fields.value_set(&values));
}

#[test]
fn ten_thousand_callsites_are_recorded_or_counted() {
    let (written, discarded) = run(CALLSITES);
    // They fit (the registry held 16,384 entries, two per callsite: 8,192 callsites).
    assert_eq!((written, discarded), (CALLSITES as u64 * EVENTS_EACH, 0));
}

/// More callsites than the registry holds: the events of the ones beyond are counted as
/// discarded (a warning said so once), the others recorded (with every field a string when
/// only their first, all-strings variant could be registered).
#[test]
fn callsites_beyond_the_registry_are_counted_as_discarded() {
    let n = hushtrace_core::MAX_REGISTERED + 2000;
    let (written, discarded) = run(n);
    assert!(
        discarded >= 2 * 2000,
        "{written} written, {discarded} discarded"
    );
    assert!(written >= 2 * 25_000, "{written} written");
}

/// Registers `callsites` callsites, emits `EVENTS_EACH` events of each; checks that every
/// event is written or counted as discarded and that the trace holds the written ones.
/// Returns (written, discarded).
fn run(callsites: usize) -> (u64, u64) {
    let dir = common::trace_dir("many");
    let session = common::start_session(&dir);
    common::install_layer();
    let mut metas = Vec::with_capacity(callsites);
    let mut t = Instant::now();
    for i in 0..callsites {
        metas.push(make_callsite(i));
        if (i + 1) % 2048 == 0 {
            eprintln!(
                "callsites {}..{}: registered in {:?}",
                i + 1 - 2047,
                i + 1,
                t.elapsed()
            );
            t = Instant::now();
        }
    }
    let t = Instant::now();
    for (i, m) in metas.iter().enumerate() {
        for k in 0..EVENTS_EACH {
            emit(m, i as u64 * 10 + k);
        }
    }
    let emitted = callsites as u64 * EVENTS_EACH;
    eprintln!(
        "{emitted} events (first records included) in {:?}",
        t.elapsed()
    );
    let stats = session.stop().unwrap();
    eprintln!(
        "emitted {emitted}, written {}, discarded {}",
        stats.events_written, stats.events_discarded
    );
    assert_eq!(
        stats.events_written + stats.events_discarded,
        emitted,
        "{stats:?}"
    );
    // The trace holds what was written.
    let session = hushtrace_ctf::reader::Session::open(&dir).unwrap();
    let mut m = session.merged().unwrap();
    let mut read = 0u64;
    while m.next().unwrap().is_some() {
        read += 1;
    }
    assert_eq!(read, stats.events_written);
    let _ = std::fs::remove_dir_all(&dir);
    (stats.events_written, stats.events_discarded)
}
