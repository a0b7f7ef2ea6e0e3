//! Record shapes: the small ones (recorded by monomorphic recorders) and longer ones (recorded
//! with run-time types) keep every value and its type; one callsite recording several sets of
//! types (a generic function), more than the variants kept per callsite, records each with
//! its own; spans and `Span::record` likewise; a no-syscall thread records a set of types
//! registered before as such and a new one as strings.

mod common;

use serde_json::{json, Value as Json};
use tracing::field::Empty;
use tracing::{info, info_span, Level, Value};

fn one<T: Value>(v: T) {
    tracing::event!(name: "one", target: "shapes", Level::INFO, v);
}

fn two<A: Value, B: Value>(a: A, b: B) {
    tracing::event!(name: "two", target: "shapes", Level::WARN, a, b);
}

fn nosys<T: Value>(v: T) {
    tracing::event!(name: "nosys", target: "shapes", Level::INFO, v);
}

/// The `args` of the instants named `name`, in trace order.
fn args_of(events: &[Json], name: &str) -> Vec<Json> {
    events
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] == name)
        .map(|e| {
            let mut a = e["args"].clone();
            // Not compared: the span id is the registry's.
            a.as_object_mut().unwrap().remove("span_id");
            a
        })
        .collect()
}

#[test]
fn every_shape_keeps_its_values_and_types() {
    let dir = common::trace_dir("shapes");
    let session = common::start_session(&dir);
    common::install_layer();

    info!(name: "msg", target: "shapes", "only a message");
    info!(name: "u", target: "shapes", u = 7u64);
    info!(name: "if", target: "shapes", i = -7i64, f = 2.5f64);
    info!(name: "msg2", target: "shapes", b = true, s = "text", "message {}", 3);
    info!(name: "three", target: "shapes", x = 1u64, y = 2u64, z = 3u64);
    info!(name: "wide", target: "shapes", big = u128::MAX, small = 5u128, neg = -5i128);
    info!(name: "fmt", target: "shapes", d = ?vec![1, 2], e = %"disp", "m");
    for _ in 0..2 {
        one(5u64);
        one(true);
        one("s");
        one(2.5f64);
        one(-3i32);
    }
    // 10 sets of types at one callsite: more than the variants kept per callsite (8).
    two(1u64, 2u64);
    two(1u64, false);
    two(1u64, "b");
    two(1u64, 0.5f64);
    two(1u64, -1i64);
    two(true, 2u64);
    two(true, false);
    two("a", "b");
    two(0.5f64, -1i64);
    two(-1i64, 0.5f64);
    two(1u64, 2u64);
    two(-1i64, 0.5f64);

    drop(info_span!(target: "shapes", "sp0").entered());
    drop(info_span!(target: "shapes", "sp2", a = 1u64, b = "x").entered());
    let s = info_span!(target: "shapes", "sp_rec", n = Empty, m = 1u64);
    s.record("n", 5u64);
    s.record("n", "five");
    drop(s);

    nosys(1u64);
    std::thread::spawn(|| {
        hushtrace::set_thread_no_syscall();
        assert!(hushtrace::thread_in_no_syscall());
        nosys(2u64);
        nosys(true);
        nosys(1.5f64);
        hushtrace::clear_thread_no_syscall();
    })
    .join()
    .unwrap();

    let stats = session.stop().unwrap();
    assert_eq!(stats.events_discarded, 0);
    let events = common::chrome_events(&dir);
    let one_of = |name: &str| {
        let a = args_of(&events, name);
        assert_eq!(a.len(), 1, "{name}: {a:?}");
        a[0].clone()
    };

    assert_eq!(
        one_of("msg"),
        json!({"level": "INFO", "message": "only a message"})
    );
    assert_eq!(one_of("u"), json!({"level": "INFO", "u": 7}));
    assert_eq!(one_of("if"), json!({"level": "INFO", "i": -7, "f": 2.5}));
    assert_eq!(
        one_of("msg2"),
        json!({"level": "INFO", "message": "message 3", "b": true, "s": "text"})
    );
    assert_eq!(
        one_of("three"),
        json!({"level": "INFO", "x": 1, "y": 2, "z": 3})
    );
    assert_eq!(
        one_of("wide"),
        json!({"level": "INFO", "big": u128::MAX.to_string(), "small": 5, "neg": -5})
    );
    assert_eq!(
        one_of("fmt"),
        json!({"level": "INFO", "message": "m", "d": "[1, 2]", "e": "disp"})
    );

    let one_vals: Vec<Json> = args_of(&events, "one")
        .into_iter()
        .map(|a| a["v"].clone())
        .collect();
    let once = [json!(5), json!(true), json!("s"), json!(2.5), json!(-3)];
    assert_eq!(one_vals, [once.clone(), once].concat());
    assert!(args_of(&events, "one").iter().all(|a| a["level"] == "INFO"));

    let two_vals: Vec<(Json, Json)> = args_of(&events, "two")
        .into_iter()
        .map(|a| (a["a"].clone(), a["b"].clone()))
        .collect();
    let expected: Vec<(Json, Json)> = vec![
        (json!(1), json!(2)),
        (json!(1), json!(false)),
        (json!(1), json!("b")),
        (json!(1), json!(0.5)),
        (json!(1), json!(-1)),
        (json!(true), json!(2)),
        (json!(true), json!(false)),
        (json!("a"), json!("b")),
        (json!(0.5), json!(-1)),
        (json!(-1), json!(0.5)),
        (json!(1), json!(2)),
        (json!(-1), json!(0.5)),
    ];
    assert_eq!(two_vals, expected);
    assert!(args_of(&events, "two").iter().all(|a| a["level"] == "WARN"));

    // Spans: one begin with the fields, one end; records with the span's fields.
    let begins = |name: &str| -> Vec<Json> {
        events
            .iter()
            .filter(|e| e["ph"] == "b" && e["name"] == name)
            .map(|e| e["args"].clone())
            .collect()
    };
    let ends = |name: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "e" && e["name"] == name)
            .count()
    };
    for (name, fields) in [
        ("sp0", json!({})),
        ("sp2", json!({"a": 1, "b": "x"})),
        ("sp_rec", json!({"n": "", "m": 1})),
    ] {
        let b = begins(name);
        assert_eq!(b.len(), 1, "{name}");
        assert_eq!(ends(name), 1, "{name}");
        let mut args = b[0].clone();
        assert!(args["id"].is_u64(), "{name}: {args}");
        assert_eq!(args["parent"], 0, "{name}: a root: {args}");
        args.as_object_mut().unwrap().remove("id");
        args.as_object_mut().unwrap().remove("parent");
        assert_eq!(args, fields, "{name}");
    }
    assert_eq!(
        args_of(&events, "sp_rec"),
        vec![json!({"n": 5, "m": ""}), json!({"n": "five", "m": ""})]
    );

    // The no-syscall thread: u64 was registered before (kept a number); bool and f64 were
    // not (recorded as strings, without registering).
    let nosys_vals: Vec<Json> = args_of(&events, "nosys")
        .into_iter()
        .map(|a| a["v"].clone())
        .collect();
    assert_eq!(
        nosys_vals,
        vec![json!(1), json!(2), json!("true"), json!("1.5")]
    );

    assert_eq!(common::babeltrace2_events(&dir), events.len());
    let _ = std::fs::remove_dir_all(&dir);
}
