//! Cost of `tracing` instrumentation recorded through the hushtrace layer, against the same
//! instrumentation recorded by `tracing-chrome` and against hushtrace's native macros, in one
//! run so the ratios compare like with like.
//!
//! ```text
//! cargo bench -p hushtrace-tracing --bench bridge
//! ```
//!
//! * `native_*`: `hushtrace::event!` (2 × u64), `span!` (1 × u64) begin+end, `async_span!`
//!   begin+end, in a session in overwrite mode (1 MiB × 8 sub-buffers: the hot path never takes
//!   the drop path; sub-buffer switches included, amortized).
//! * `bridge_*`: `tracing::info!(a, b)` and `info_span!("span", i).entered()` dropped (create,
//!   enter, exit, close), through `tracing_subscriber::registry().with(hushtrace_tracing::layer())`
//!   into the same session.
//! * `chrome_*`: the same through `registry().with(tracing-chrome)` (`include_args(true)`),
//!   writing to a temporary file (its writer thread receives an unbounded backlog).
//! * `floor_*`: the same through `registry().with(NoopLayer)`, a layer that does nothing: what
//!   `tracing` itself costs (macro, dispatch, registry), the least any layer can reach.
//! * `*_msg`: `tracing::info!(a, b, "a literal message")` through the no-op layer, the
//!   hushtrace layer and tracing-chrome.
//! * `bridge_span_deadline`: `bridge_span` with a deadline from the session's rules
//!   (`dl:span>3600s`, never reached): what a span's deadline check costs through the bridge.
//! * `*_child_span`: `info_span!("child", i).entered()` dropped inside an entered span (its
//!   contextual parent, which the bridge records), through the no-op and the hushtrace layer.
//! * `reads_*`: the same through `registry().with(ReadLayer)`, a layer that reads what any
//!   recording layer must and records nothing: it visits the fields (into a visitor that
//!   keeps nothing) and looks up a closing span's metadata in the registry.
//!
//! The three `tracing` subscribers are installed per batch with `tracing::dispatcher::with_default`
//! (set up outside the timed loop), so both pay the same scoped-dispatch lookup.
//!
//! Measured like `crates/hushtrace/benches/tracepoint.rs`: 1000 interleaved rounds of short
//! batches (2000 iterations; 100 for tracing-chrome), every case one batch per round; the table
//! shows per-iteration median, 10th percentile and minimum, and the ratios of the p10 column
//! (the undisturbed cost on a noisy machine). Criterion then measures every case again.
//! Without `--bench` (e.g. `cargo test --benches`) every case runs once as a smoke test.

use criterion::Criterion;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

type BenchFn = fn(u64) -> Duration;

static BRIDGE: OnceLock<Dispatch> = OnceLock::new();
static CHROME: OnceLock<Dispatch> = OnceLock::new();
static FLOOR: OnceLock<Dispatch> = OnceLock::new();
static READS: OnceLock<Dispatch> = OnceLock::new();

/// A layer that records nothing (every `Layer` method's default is a no-op).
struct NoopLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

/// A layer that visits every field and looks up a closing span's metadata, keeping nothing.
struct ReadLayer;

struct Discard;

impl tracing::field::Visit for Discard {
    fn record_u64(&mut self, _: &tracing::field::Field, v: u64) {
        black_box(v);
    }
    fn record_debug(&mut self, _: &tracing::field::Field, v: &dyn std::fmt::Debug) {
        black_box(v);
    }
}

impl<S> tracing_subscriber::Layer<S> for ReadLayer
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        event.record(&mut Discard);
    }
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        attrs.record(&mut Discard);
    }
    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        black_box(ctx.metadata(&id));
    }
}

fn timed(d: &Dispatch, iters: u64, f: impl Fn(u64)) -> Duration {
    tracing::dispatcher::with_default(d, || {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        t.elapsed()
    })
}

#[inline(never)]
fn native_event(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let (a, b) = (black_box(i), black_box(!i));
        hushtrace::event!("bench", "event", a = a, b = b);
    }
    t.elapsed()
}

#[inline(never)]
fn native_span(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let _g = hushtrace::span!("bench", "span", i = black_box(i));
    }
    t.elapsed()
}

#[inline(never)]
fn native_async_span(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let _g = hushtrace::async_span!("bench", "async_span", i = black_box(i));
    }
    t.elapsed()
}

#[inline(never)]
fn bridge_event(iters: u64) -> Duration {
    timed(BRIDGE.get().unwrap(), iters, |i| {
        let (a, b) = (black_box(i), black_box(!i));
        tracing::info!(a, b);
    })
}

#[inline(never)]
fn bridge_span(iters: u64) -> Duration {
    timed(BRIDGE.get().unwrap(), iters, |i| {
        let _s = tracing::info_span!("span", i = black_box(i)).entered();
    })
}

/// `bridge_span` with a deadline from the session's rules (`dl:span>3600s`): punctual, so the
/// close pays the check (the start kept and taken, one compare), never the late path.
#[inline(never)]
fn bridge_span_deadline(iters: u64) -> Duration {
    timed(BRIDGE.get().unwrap(), iters, |i| {
        let _s = tracing::info_span!(target: "dl", "span", i = black_box(i)).entered();
    })
}

#[inline(never)]
fn floor_event(iters: u64) -> Duration {
    timed(FLOOR.get().unwrap(), iters, |i| {
        let (a, b) = (black_box(i), black_box(!i));
        tracing::info!(a, b);
    })
}

#[inline(never)]
fn floor_span(iters: u64) -> Duration {
    timed(FLOOR.get().unwrap(), iters, |i| {
        let _s = tracing::info_span!("span", i = black_box(i)).entered();
    })
}

/// Like [`timed`], with a span entered around the batch: the spans `f` creates are its
/// children (`tracing`'s contextual parent, the current span).
fn timed_in_parent(d: &Dispatch, iters: u64, f: impl Fn(u64)) -> Duration {
    tracing::dispatcher::with_default(d, || {
        let _parent = tracing::info_span!("parent").entered();
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        t.elapsed()
    })
}

#[inline(never)]
fn floor_child_span(iters: u64) -> Duration {
    timed_in_parent(FLOOR.get().unwrap(), iters, |i| {
        let _s = tracing::info_span!("child", i = black_box(i)).entered();
    })
}

#[inline(never)]
fn bridge_child_span(iters: u64) -> Duration {
    timed_in_parent(BRIDGE.get().unwrap(), iters, |i| {
        let _s = tracing::info_span!("child", i = black_box(i)).entered();
    })
}

#[inline(never)]
fn reads_event(iters: u64) -> Duration {
    timed(READS.get().unwrap(), iters, |i| {
        let (a, b) = (black_box(i), black_box(!i));
        tracing::info!(a, b);
    })
}

#[inline(never)]
fn reads_span(iters: u64) -> Duration {
    timed(READS.get().unwrap(), iters, |i| {
        let _s = tracing::info_span!("span", i = black_box(i)).entered();
    })
}

#[inline(never)]
fn floor_msg(iters: u64) -> Duration {
    timed(FLOOR.get().unwrap(), iters, |i| {
        let (a, b) = (black_box(i), black_box(!i));
        tracing::info!(a, b, "a literal message");
    })
}

#[inline(never)]
fn bridge_msg(iters: u64) -> Duration {
    timed(BRIDGE.get().unwrap(), iters, |i| {
        let (a, b) = (black_box(i), black_box(!i));
        tracing::info!(a, b, "a literal message");
    })
}

#[inline(never)]
fn chrome_msg(iters: u64) -> Duration {
    timed(CHROME.get().unwrap(), iters, |i| {
        let (a, b) = (black_box(i), black_box(!i));
        tracing::info!(a, b, "a literal message");
    })
}

#[inline(never)]
fn chrome_event(iters: u64) -> Duration {
    timed(CHROME.get().unwrap(), iters, |i| {
        let (a, b) = (black_box(i), black_box(!i));
        tracing::info!(a, b);
    })
}

#[inline(never)]
fn chrome_span(iters: u64) -> Duration {
    timed(CHROME.get().unwrap(), iters, |i| {
        let _s = tracing::info_span!("span", i = black_box(i)).entered();
    })
}

const BENCHES: [(&str, &str, BenchFn); 17] = [
    ("native_event", "hushtrace event!, 2 x u64", native_event),
    (
        "floor_event",
        "tracing info!(a, b) -> no-op layer",
        floor_event,
    ),
    (
        "reads_event",
        "tracing info!(a, b) -> layer visiting, no record",
        reads_event,
    ),
    (
        "bridge_event",
        "tracing info!(a, b) -> hushtrace layer",
        bridge_event,
    ),
    (
        "chrome_event",
        "tracing info!(a, b) -> tracing-chrome",
        chrome_event,
    ),
    (
        "floor_msg",
        "tracing info!(a, b, \"literal\") -> no-op layer",
        floor_msg,
    ),
    (
        "bridge_msg",
        "tracing info!(a, b, \"literal\") -> hushtrace layer",
        bridge_msg,
    ),
    (
        "chrome_msg",
        "tracing info!(a, b, \"literal\") -> tracing-chrome",
        chrome_msg,
    ),
    ("native_span", "hushtrace span!(i) begin+end", native_span),
    (
        "native_async_span",
        "hushtrace async_span!(i) begin+end",
        native_async_span,
    ),
    (
        "floor_span",
        "tracing info_span!(i) enter+exit -> no-op layer",
        floor_span,
    ),
    (
        "reads_span",
        "tracing info_span!(i) enter+exit -> reads, no record",
        reads_span,
    ),
    (
        "bridge_span",
        "tracing info_span!(i) enter+exit -> hushtrace layer",
        bridge_span,
    ),
    (
        "bridge_span_deadline",
        "the same with a deadline (rules, punctual) -> hushtrace",
        bridge_span_deadline,
    ),
    (
        "chrome_span",
        "tracing info_span!(i) enter+exit -> tracing-chrome",
        chrome_span,
    ),
    (
        "floor_child_span",
        "the same in an entered span -> no-op layer",
        floor_child_span,
    ),
    (
        "bridge_child_span",
        "the same in an entered span -> hushtrace layer",
        bridge_child_span,
    ),
];

fn batch_iters(id: &str) -> u64 {
    if id.starts_with("chrome") {
        100
    } else {
        2000
    }
}

/// Per bench, the sorted per-iteration times (ns) of `rounds` interleaved batches.
fn interleaved(rounds: usize) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::with_capacity(rounds); BENCHES.len()];
    for (id, _, f) in BENCHES {
        f(batch_iters(id)); // warm-up (registers the bridge's callsites)
    }
    for _ in 0..rounds {
        for (k, (id, _, f)) in BENCHES.iter().enumerate() {
            let n = batch_iters(id);
            out[k].push(f(n).as_nanos() as f64 / n as f64);
        }
    }
    for v in &mut out {
        v.sort_by(f64::total_cmp);
    }
    out
}

fn print_table(batches: &[Vec<f64>]) {
    let at = |v: &Vec<f64>, p: f64| v[((v.len() - 1) as f64 * p) as usize];
    println!(
        "\n{:<52} {:>10} {:>10} {:>10}",
        "case", "median", "p10", "min"
    );
    for ((_, desc, _), v) in BENCHES.iter().zip(batches) {
        println!(
            "{:<52} {:>8.1}ns {:>8.1}ns {:>8.1}ns",
            desc,
            at(v, 0.5),
            at(v, 0.1),
            v[0]
        );
    }
    let p10 = |id: &str| {
        let k = BENCHES.iter().position(|b| b.0 == id).unwrap();
        at(&batches[k], 0.1)
    };
    println!("\nratios (p10):");
    for (a, b) in [
        ("chrome_event", "bridge_event"),
        ("bridge_event", "native_event"),
        ("chrome_event", "floor_event"),
        ("bridge_event", "floor_event"),
        ("bridge_event", "reads_event"),
        ("chrome_msg", "bridge_msg"),
        ("bridge_msg", "floor_msg"),
        ("chrome_span", "bridge_span"),
        ("bridge_span", "native_span"),
        ("bridge_span_deadline", "bridge_span"),
        ("bridge_span", "native_async_span"),
        ("chrome_span", "floor_span"),
        ("bridge_span", "floor_span"),
        ("bridge_span", "reads_span"),
        ("bridge_child_span", "floor_child_span"),
    ] {
        println!("  {a} / {b} = {:.1}", p10(a) / p10(b));
    }
    println!(
        "layer's own cost (p10 difference to the floor): event {:.1}ns, span {:.1}ns",
        p10("bridge_event") - p10("floor_event"),
        p10("bridge_span") - p10("floor_span")
    );
    println!(
        "  of which reading (reads - floor): event {:.1}ns, span {:.1}ns",
        p10("reads_event") - p10("floor_event"),
        p10("reads_span") - p10("floor_span")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test");
    let dir: PathBuf = std::env::var_os("HUSHTRACE_BENCH_DIR")
        .map_or_else(std::env::temp_dir, PathBuf::from)
        .join(format!("hushtrace-bridge-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create bench directory");

    let session = hushtrace::Session::builder()
        .output_dir(dir.join("hushtrace"))
        .mode(hushtrace::Mode::Overwrite)
        .subbuf_size(1 << 20)
        .num_subbufs(8)
        .on_late("dl:span>3600s")
        .start()
        .expect("start hushtrace session");
    hushtrace::init_thread();

    let chrome_file = dir.join("chrome.json");
    let (chrome, chrome_guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(&chrome_file)
        .include_args(true)
        .build();
    let _ = CHROME.set(Dispatch::new(tracing_subscriber::registry().with(chrome)));
    let _ = FLOOR.set(Dispatch::new(
        tracing_subscriber::registry().with(NoopLayer),
    ));
    let _ = READS.set(Dispatch::new(
        tracing_subscriber::registry().with(ReadLayer),
    ));
    let _ = BRIDGE.set(Dispatch::new(
        tracing_subscriber::registry().with(hushtrace_tracing::layer()),
    ));

    // For a profiler: `HUSHTRACE_BENCH_ONLY=bridge_event` runs that case alone for a while.
    if let Ok(only) = std::env::var("HUSHTRACE_BENCH_ONLY") {
        let (id, _, f) = BENCHES
            .iter()
            .find(|b| b.0 == only)
            .expect("HUSHTRACE_BENCH_ONLY names a case");
        let n = batch_iters(id);
        let t = Instant::now();
        let mut batches = 0u64;
        while t.elapsed() < Duration::from_secs(5) {
            f(n);
            batches += 1;
        }
        println!(
            "{id}: {:.1}ns",
            t.elapsed().as_nanos() as f64 / (batches * n) as f64
        );
        let _ = session.stop();
        drop(chrome_guard);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }

    let batches = interleaved(if full { 1000 } else { 1 });

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    // `HUSHTRACE_BENCH_TABLE_ONLY=1`: the interleaved table without criterion's estimates.
    if std::env::var_os("HUSHTRACE_BENCH_TABLE_ONLY").is_none() {
        let mut g = c.benchmark_group("bridge");
        for (id, _, f) in BENCHES {
            g.bench_function(id, |b| b.iter_custom(f));
        }
        g.finish();
    }
    c.final_summary();

    let stats = session.stop().expect("stop hushtrace session");
    drop(chrome_guard);
    if full {
        print_table(&batches);
        println!(
            "hushtrace session (overwrite, 1 MiB x 8): {} events kept, {} overwritten",
            stats.events_written, stats.events_discarded
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
