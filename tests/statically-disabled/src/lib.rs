//! Code instrumented with hushtrace, built with `default-features = false`.

/// Instrumented work: spans, events of every field type, a counter.
pub fn work(n: u64, name: &str) -> u64 {
    let _outer = hushtrace::span!("app", "work", n = n);
    let mut acc = 0u64;
    for i in 0..n {
        let _s = hushtrace::span!("app", "step", i = i, name = name);
        acc = acc.wrapping_add(i * 3);
        hushtrace::event!(
            "app",
            "value",
            acc = acc,
            ok = true,
            ratio = 0.5f64,
            label = "x"
        );
        hushtrace::counter!("app", "acc", acc);
    }
    acc
}
