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
//!   floor as `crates/hushtrace/benches/tracepoint.rs`);
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

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Slots of the floor's thread-local buffer (a power of two).
const FLOOR_SLOTS: usize = 1 << 16;

thread_local! {
    static FLOOR_IDX: Cell<usize> = const { Cell::new(0) };
    static FLOOR_BUF: [Cell<[u64; 2]>; FLOOR_SLOTS] =
        const { [const { Cell::new([0; 2]) }; FLOOR_SLOTS] };
}

/// The floor: read the cycle counter and store it with one payload word into the next 16-byte
/// slot of a thread-local buffer.
#[inline(always)]
fn floor_write(v: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc exists on every x86_64 CPU and only reads the time-stamp counter.
    let ts = unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    let ts = v;
    let i = FLOOR_IDX.with(|c| c.get());
    FLOOR_BUF.with(|b| b[i].set([ts, v]));
    FLOOR_IDX.with(|c| c.set((i + 1) & (FLOOR_SLOTS - 1)));
}

type BenchFn = fn(u64) -> Duration;

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
    for _ in 0..FLOOR_SLOTS {
        floor_write(0); // touches every page of the floor's buffer before timing
    }
    for (_, f) in &cases {
        f(BATCH); // warm-up: first-use registration, ring and queue pages touched
    }
    let mut per_case = vec![Vec::with_capacity(rounds); cases.len()];
    for _ in 0..rounds {
        for (k, (_, f)) in cases.iter().enumerate() {
            per_case[k].push(f(BATCH).as_nanos() as f64 / BATCH as f64);
        }
    }
    for v in &mut per_case {
        v.sort_by(f64::total_cmp);
    }
    let stats = session.stop().expect("stop hushtrace session");
    let _ = std::fs::remove_dir_all(&dir);

    let pct = |v: &[f64], q: f64| v[((q * v.len() as f64) as usize).min(v.len() - 1)];
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
    let span_p10 = pct(&per_case[1], 0.1);
    let span_min = per_case[1][0];
    for ((what, _), v) in cases.iter().zip(&per_case) {
        println!(
            "| {what} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            pct(v, 0.5),
            pct(v, 0.1),
            v[0],
            pct(v, 0.1) / span_p10,
            v[0] / span_min
        );
    }
    println!(
        "hushtrace: {} events written, {} discarded (overwrite mode keeps the newest)",
        stats.events_written, stats.events_discarded
    );
}
