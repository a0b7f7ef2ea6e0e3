//! Span cost side by side: hushtrace against the Tracy profiler's client, in one run.
//!
//! ```text
//! cargo run --release --manifest-path benches/tracy/Cargo.toml
//! HUSHTRACE_BENCH_ROUNDS=3000 cargo run --release --manifest-path benches/tracy/Cargo.toml
//! ```
//!
//! Cases, each a loop of `iters` calls timed as a whole:
//!
//! * `floor`: `rdtsc` plus a 16-byte store into a pre-touched thread-local buffer (the same
//!   floor as `crates/hushtrace/benches/tracepoint.rs`: `hushtrace_testsupport::bench`);
//! * `hushtrace span!`: `hushtrace::span!` with one `u64` field, begin and end, in a session in
//!   overwrite mode (1 MiB x 8 sub-buffers: the consumer never writes while this runs);
//! * `tracy zone`: `tracy_client::span!` begin and end (a static source location; Tracy's
//!   `ZoneScoped`), with the client started and no profiler connected, so Tracy keeps the
//!   events in its memory as it does until a profiler connects;
//! * `tracy zone + value`: the same with one `u64` attached (`Span::emit_value`), the nearest
//!   to hushtrace's span with one field;
//! * `hushtrace event!`: two `u64` fields.
//!
//! Method: `HUSHTRACE_BENCH_ROUNDS` (default 1000) interleaved rounds in which every case runs
//! one batch of 2000 calls; the table gives the per-call time of the median, the 10th-percentile
//! and the fastest batch, and the ratios at p10 and at the fastest batch. Interleaving exposes
//! every case to the same background load; short batches are rarely preempted, so the p10 and
//! min columns are the undisturbed cost on a noisy machine.
//!
//! This is its own Cargo workspace (Tracy's client is C++ that `tracy-client-sys` compiles),
//! so the main workspace's builds and tests never compile Tracy.

use hushtrace_testsupport::bench::{floor_pretouch, floor_write, interleaved, percentile, BenchFn};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn run_floor(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        floor_write(black_box(i));
    }
    t.elapsed()
}

#[inline(never)]
fn run_hushtrace_span(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let _g = hushtrace::span!("bench", "span", i = black_box(i));
    }
    t.elapsed()
}

#[inline(never)]
fn run_tracy_zone(iters: u64) -> Duration {
    let t = Instant::now();
    for _ in 0..iters {
        let _z = tracy_client::span!("span");
    }
    t.elapsed()
}

#[inline(never)]
fn run_tracy_zone_value(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let z = tracy_client::span!("span");
        z.emit_value(black_box(i));
    }
    t.elapsed()
}

#[inline(never)]
fn run_hushtrace_event(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let (a, b) = (black_box(i), black_box(!i));
        hushtrace::event!("bench", "event", a = a, b = b);
    }
    t.elapsed()
}

/// Calls per batch.
const BATCH: u64 = 2000;

fn main() {
    let rounds: usize = match std::env::var("HUSHTRACE_BENCH_ROUNDS") {
        Ok(v) => match v.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("HUSHTRACE_BENCH_ROUNDS={v:?} is not a positive whole number");
                std::process::exit(2);
            }
        },
        Err(_) => 1000,
    };
    let dir = std::env::temp_dir().join(format!("hushtrace-bench-tracy-{}", std::process::id()));
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .mode(hushtrace::Mode::Overwrite)
        .subbuf_size(1 << 20)
        .num_subbufs(8)
        .start()
        .expect("start hushtrace session");
    hushtrace::init_thread();
    let _tracy = tracy_client::Client::start();

    let cases: [(&str, BenchFn); 5] = [
        ("floor: rdtsc + 16-byte store", run_floor),
        ("hushtrace span! begin + end, 1 u64", run_hushtrace_span),
        ("tracy zone begin + end", run_tracy_zone),
        ("tracy zone begin + end + 1 u64 value", run_tracy_zone_value),
        ("hushtrace event! 2 x u64", run_hushtrace_event),
    ];
    floor_pretouch();
    let per_case = interleaved(&cases, rounds, |_| BATCH);
    let stats = session.stop().expect("stop hushtrace session");
    let _ = std::fs::remove_dir_all(&dir);

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "span cost, ns per call: {rounds} interleaved rounds of {BATCH} calls per case \
         (load average {})",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "| case | batch p50 | batch p10 | fastest batch | x hushtrace span (p10) | x hushtrace span (fastest) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let span_p10 = percentile(&per_case[1], 0.1);
    let span_min = per_case[1][0];
    for ((what, _), v) in cases.iter().zip(&per_case) {
        println!(
            "| {what} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            percentile(v, 0.5),
            percentile(v, 0.1),
            v[0],
            percentile(v, 0.1) / span_p10,
            v[0] / span_min
        );
    }
    println!(
        "hushtrace: {} events written, {} discarded (overwrite mode keeps the newest)",
        stats.events_written, stats.events_discarded
    );
}
