//! Cost of one tracepoint: hushtrace against a hand-written floor and against `fastrace` and
//! `tracing` + `tracing-chrome`, all in one criterion group of one run so that the ratios compare
//! like with like.
//!
//! ```text
//! cargo bench -p hushtrace --bench tracepoint          # criterion: 1 s warm-up, 3 s per case
//! cargo bench -p hushtrace --bench tracepoint -- --warm-up-time 3 --measurement-time 5
//! ```
//!
//! * `floor`: `rdtsc` plus a 16-byte store into a pre-touched thread-local buffer (index
//!   advanced and wrapped): the least any "timestamp + copy the payload into a per-thread buffer"
//!   tracer can do.
//! * `floor2`: two `rdtsc` and one 16-byte store (start and end) into the same buffer: the least
//!   any span that records its start and its end can cost, whatever its record layout (issue
//!   31.6; `docs/BENCHMARKS.md` section 17).
//! * `hushtrace_span*`: `span!` with one `u64` field, without and with a deadline (an hour:
//!   punctual, so the check is the one compare and never the late path), and without fields.
//! * `hushtrace_*`: a session in overwrite mode (1 MiB × 8 sub-buffers), so the hot path never
//!   takes the drop path and the consumer never writes while the bench runs; sub-buffer switches
//!   (one per ~40 000 events) are included, amortized. The no-syscall case runs on a dedicated
//!   thread that entered no-syscall mode before recording anything (a real-time thread's usage);
//!   batches are handed to it outside the timed region.
//! * `fastrace_*`: `LocalSpan`s / events under a root `Span` set as local parent, a fresh root
//!   every 1000 iterations (fastrace caps a local span queue at 10 240 entries and silently drops
//!   beyond), reporter that only counts. Properties are strings in fastrace, so the two `u64`
//!   fields are formatted.
//! * `tracing_*`: `tracing` with a `tracing-chrome` layer (`include_args(true)`, so the field
//!   values are recorded) writing to a temporary file.
//!
//! Every case is one `fn(iters) -> Duration` loop, measured twice in this run:
//!
//! 1. by criterion (`iter_custom`); the table shows the mean point estimate read back from
//!    criterion's `estimates.json` files written by this run. For the peers this includes
//!    competing with their own background threads (fastrace's collector, tracing-chrome's
//!    writer, which receives an unbounded backlog) on a 2-core machine;
//! 2. before that, by 1000 interleaved rounds in which every case runs one short batch (2000 iterations;
//!    1000 for fastrace, 100 for tracing); the table shows the per-iteration time of the median,
//!    the 10th-percentile and the fastest batch. Interleaving exposes all cases to the same background load,
//!    and short batches are rarely preempted, so the p10 and min columns are the undisturbed cost
//!    on a noisy machine; their ratios are the ones to compare.
//!
//! Without `--bench` (e.g. `cargo test --benches`) criterion runs every case once as a smoke
//! test and no table is printed.
//!
//! Temporary files go under `$HUSHTRACE_BENCH_DIR` (default: the system temporary directory) and
//! are removed at the end.

use criterion::Criterion;
use fastrace::collector::{Config, Reporter, SpanContext, SpanRecord};
use fastrace::local::LocalSpan;
use fastrace::{Event, Span};
use hushtrace_testsupport::bench::{
    bench_dir, floor2_write, floor_pretouch, floor_write, full_run, interleaved, percentile,
    BenchFn,
};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tracing_subscriber::prelude::*;

/// Criterion group name; also the directory under `target/criterion`.
const GROUP: &str = "tracepoint";

/// Benches in table order: (criterion id, description).
const BENCHES: &[(&str, &str)] = &[
    ("floor", "floor: rdtsc + 16-byte store to TLS buffer"),
    ("floor2", "two-timestamp floor: 2 x rdtsc + 16-byte store"),
    ("hushtrace_event", "hushtrace event!, 2 x u64, enabled"),
    (
        "hushtrace_event_disabled",
        "hushtrace event!, 2 x u64, disabled",
    ),
    ("hushtrace_span", "hushtrace span! begin+end, 1 x u64"),
    (
        "hushtrace_span_deadline",
        "hushtrace span!(deadline) begin+end, 1 x u64",
    ),
    (
        "hushtrace_span_nofield",
        "hushtrace span! begin+end, no field",
    ),
    (
        "hushtrace_event_no_syscall",
        "hushtrace event!, 2 x u64, no-syscall thread",
    ),
    ("fastrace_event", "fastrace LocalSpan::add_event, 2 props"),
    ("fastrace_span", "fastrace LocalSpan enter+drop, 1 prop"),
    (
        "fastrace_span_noprop",
        "fastrace LocalSpan enter+drop, no prop",
    ),
    ("tracing_event", "tracing info!(a, b) -> tracing-chrome"),
    (
        "tracing_span",
        "tracing info_span!(i) enter+exit -> tracing-chrome",
    ),
];

/// A fastrace reporter that only counts what it receives.
struct CountingReporter(Arc<AtomicU64>);

impl Reporter for CountingReporter {
    fn report(&mut self, spans: Vec<SpanRecord>) {
        let n: usize = spans.iter().map(|s| 1 + s.events.len()).sum();
        self.0.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// fastrace spans per root span: under its 10 240-entry local queue limit, so nothing is dropped.
const FASTRACE_BATCH: u64 = 1000;

/// Runs `f` `iters` times under fastrace root spans of `FASTRACE_BATCH` iterations each and
/// returns the elapsed time (root creation and submission amortized in).
fn fastrace_iters(iters: u64, mut f: impl FnMut(u64)) -> Duration {
    let start = Instant::now();
    let mut done = 0;
    while done < iters {
        let n = FASTRACE_BATCH.min(iters - done);
        let root = Span::root("root", SpanContext::random());
        {
            let _parent = root.set_local_parent();
            for i in done..done + n {
                f(black_box(i));
            }
        }
        drop(root);
        done += n;
    }
    start.elapsed()
}

/// Where criterion writes its results: the same lookup criterion does.
fn criterion_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(h);
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(t).join("criterion");
    }
    // The bench executable is <target>/<profile>/deps/<name>-<hash>.
    std::env::current_exe()
        .ok()
        .and_then(|e| e.ancestors().nth(3).map(|t| t.join("criterion")))
        .filter(|d| d.is_dir())
        .unwrap_or_else(|| PathBuf::from("target/criterion"))
}

/// Reads `<estimate>.point_estimate` (in ns) from a criterion `estimates.json` written at or after
/// `since`.
fn read_estimate(path: &Path, since: SystemTime, estimate: &str) -> Option<f64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    if modified < since {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let at = text.find(&format!("\"{estimate}\""))?;
    let rest = &text[at..];
    let pe = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let num: String = rest[pe..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
        .collect();
    num.parse().ok()
}

fn print_table(since: SystemTime, batches: &[Vec<f64>]) {
    let dir = criterion_dir().join(GROUP);
    let est = |id: &str, which: &str| {
        read_estimate(&dir.join(id).join("new/estimates.json"), since, which)
    };
    let floor_mean = est("floor", "mean");
    // `floor` and `floor2` are the first two cases.
    let (floor_p10, floor_min) = (percentile(&batches[0], 0.1), batches[0][0]);
    let (floor2_p10, floor2_min) = (percentile(&batches[1], 0.1), batches[1][0]);
    println!();
    println!(
        "tracepoint cost, ns per iteration, this run. criterion: mean point estimate; batches: \
         {} interleaved rounds, per-batch ns/iter at p50 and p10; x floor: one-timestamp floor, \
         x floor2: two-timestamp floor",
        batches[0].len()
    );
    println!(
        "{:<50} {:>9} {:>7} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7}",
        "bench",
        "crit mean",
        "x floor",
        "batch p50",
        "batch p10",
        "batch min",
        "x floor",
        "x floor",
        "x floor2",
        "x floor2"
    );
    println!(
        "{:<50} {:>17} {:>29} {:>7} {:>7} {:>7} {:>7}",
        "", "", "", "(p10)", "(min)", "(p10)", "(min)"
    );
    for ((id, what), b) in BENCHES.iter().zip(batches) {
        let crit = match est(id, "mean") {
            Some(mean) => format!(
                "{mean:>9.2} {:>7}",
                floor_mean.map_or("-".to_string(), |f| format!("{:.2}", mean / f))
            ),
            None => format!("{:>9} {:>7}", "-", "-"),
        };
        let p10 = percentile(b, 0.1);
        println!(
            "{what:<50} {crit} {:>9.2} {p10:>9.2} {:>9.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2}",
            percentile(b, 0.5),
            b[0],
            p10 / floor_p10,
            b[0] / floor_min,
            p10 / floor2_p10,
            b[0] / floor2_min
        );
    }
    println!("(criterion results under {})", dir.display());
}

#[inline(never)]
fn run_floor(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        floor_write(black_box(i));
    }
    t.elapsed()
}

#[inline(never)]
fn run_floor2(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        floor2_write(black_box(i));
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

#[inline(never)]
fn run_hushtrace_event_disabled(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let (a, b) = (black_box(i), black_box(!i));
        hushtrace::event!("bench_off", "event", a = a, b = b);
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

/// A deadline far from reached: every span ends punctual (one compare, never the late path).
#[inline(never)]
fn run_hushtrace_span_deadline(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let _g = hushtrace::span!(
            deadline = Duration::from_secs(3600),
            "bench",
            "span_deadline",
            i = black_box(i)
        );
    }
    t.elapsed()
}

#[inline(never)]
fn run_hushtrace_span_nofield(iters: u64) -> Duration {
    let t = Instant::now();
    for _ in 0..iters {
        let _g = hushtrace::span!("bench", "span_nofield");
    }
    t.elapsed()
}

/// Same as `run_hushtrace_event` (own callsite), run by a thread that entered no-syscall mode
/// before it recorded anything and stays in it (see [`no_syscall_worker`]).
#[inline(never)]
fn no_syscall_events(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let (a, b) = (black_box(i), black_box(!i));
        hushtrace::event!("bench", "event_no_syscall", a = a, b = b);
    }
    t.elapsed()
}

/// Requests to and results from the no-syscall thread.
type Worker = (mpsc::Sender<u64>, mpsc::Receiver<Duration>);

static NO_SYSCALL_WORKER: Mutex<Option<Worker>> = Mutex::new(None);

/// Starts the no-syscall thread: it enters the mode once, then times batches of
/// [`no_syscall_events`] on request (the hand-over is outside the timed region).
fn no_syscall_worker() -> std::thread::JoinHandle<()> {
    let (req_tx, req_rx) = mpsc::channel::<u64>();
    let (res_tx, res_rx) = mpsc::channel::<Duration>();
    let handle = std::thread::spawn(move || {
        hushtrace::set_thread_no_syscall();
        for iters in req_rx {
            if res_tx.send(no_syscall_events(iters)).is_err() {
                break;
            }
        }
        hushtrace::clear_thread_no_syscall();
    });
    *NO_SYSCALL_WORKER.lock().unwrap() = Some((req_tx, res_rx));
    handle
}

fn run_hushtrace_event_no_syscall(iters: u64) -> Duration {
    let guard = NO_SYSCALL_WORKER.lock().unwrap();
    let (tx, rx) = guard.as_ref().expect("no-syscall worker running");
    tx.send(iters).expect("no-syscall worker alive");
    rx.recv().expect("no-syscall worker result")
}

#[inline(never)]
fn run_fastrace_event(iters: u64) -> Duration {
    fastrace_iters(iters, |i| {
        LocalSpan::add_event(
            Event::new("event").with_properties(|| [("a", i.to_string()), ("b", (!i).to_string())]),
        )
    })
}

#[inline(never)]
fn run_fastrace_span(iters: u64) -> Duration {
    fastrace_iters(iters, |i| {
        let _s = LocalSpan::enter_with_local_parent("span").with_property(|| ("i", i.to_string()));
    })
}

#[inline(never)]
fn run_fastrace_span_noprop(iters: u64) -> Duration {
    fastrace_iters(iters, |_| {
        let _s = LocalSpan::enter_with_local_parent("span");
    })
}

#[inline(never)]
fn run_tracing_event(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let (a, b) = (black_box(i), black_box(!i));
        tracing::info!(a, b);
    }
    t.elapsed()
}

#[inline(never)]
fn run_tracing_span(iters: u64) -> Duration {
    let t = Instant::now();
    for i in 0..iters {
        let _s = tracing::info_span!("span", i = black_box(i)).entered();
    }
    t.elapsed()
}

/// Iterations per batch of the interleaved measurement, by bench (short enough that most
/// batches are not preempted; fastrace's batch matches its root-span batch).
fn batch_iters(id: &str) -> u64 {
    if id.starts_with("fastrace") {
        FASTRACE_BATCH
    } else if id.starts_with("tracing") {
        100
    } else {
        2000
    }
}

/// Rounds of the interleaved measurement (`hushtrace_testsupport::bench::interleaved`): every
/// bench runs one batch per round.
const ROUNDS: usize = 1000;

fn main() {
    let full = full_run();
    let dir = bench_dir("tracepoint");
    std::fs::create_dir_all(&dir).expect("create bench directory");

    let session = hushtrace::Session::builder()
        .output_dir(dir.join("hushtrace"))
        .mode(hushtrace::Mode::Overwrite)
        .subbuf_size(1 << 20)
        .num_subbufs(8)
        .start()
        .expect("start hushtrace session");
    hushtrace::init_thread();
    hushtrace::disable("bench_off:*");

    let reported = Arc::new(AtomicU64::new(0));
    fastrace::set_reporter(
        CountingReporter(reported.clone()),
        Config::default().report_interval(Duration::from_millis(10)),
    );

    let chrome_file = dir.join("chrome.json");
    let (chrome, chrome_guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(&chrome_file)
        .include_args(true)
        .build();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(chrome))
        .expect("set the tracing subscriber");

    floor_pretouch();
    let worker = no_syscall_worker();

    let benches: [(&str, BenchFn); 13] = [
        ("floor", run_floor),
        ("floor2", run_floor2),
        ("hushtrace_event", run_hushtrace_event),
        ("hushtrace_event_disabled", run_hushtrace_event_disabled),
        ("hushtrace_span", run_hushtrace_span),
        ("hushtrace_span_deadline", run_hushtrace_span_deadline),
        ("hushtrace_span_nofield", run_hushtrace_span_nofield),
        ("hushtrace_event_no_syscall", run_hushtrace_event_no_syscall),
        ("fastrace_event", run_fastrace_event),
        ("fastrace_span", run_fastrace_span),
        ("fastrace_span_noprop", run_fastrace_span_noprop),
        ("tracing_event", run_tracing_event),
        ("tracing_span", run_tracing_span),
    ];
    debug_assert!(benches.iter().zip(BENCHES).all(|(a, b)| a.0 == b.0));

    // Before criterion: its long runs leave tracing-chrome's writer thread and fastrace's
    // collector with a backlog that would compete with these short batches for the CPUs.
    let batches = interleaved(&benches, if full { ROUNDS } else { 2 }, batch_iters);

    let since = SystemTime::now();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    {
        let mut g = c.benchmark_group(GROUP);
        for (id, f) in benches {
            g.bench_function(id, |b| b.iter_custom(f));
        }
        g.finish();
    }
    c.final_summary();

    NO_SYSCALL_WORKER.lock().unwrap().take();
    worker.join().expect("no-syscall worker");

    let stats = session.stop().expect("stop hushtrace session");
    fastrace::flush();
    drop(chrome_guard);
    let chrome_bytes = std::fs::metadata(&chrome_file).map_or(0, |m| m.len());

    if full {
        print_table(since, &batches);
    }
    println!(
        "hushtrace session (overwrite, 1 MiB x 8): {} events kept, {} overwritten",
        stats.events_written, stats.events_discarded
    );
    println!(
        "fastrace reporter received {} records; tracing-chrome wrote {:.1} MB",
        reported.load(Ordering::Relaxed),
        chrome_bytes as f64 / 1e6
    );
    let _ = std::fs::remove_dir_all(&dir);
}
