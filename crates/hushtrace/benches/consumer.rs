//! The consumer's side of the cost (docs/BENCHMARKS.md, "The consumer"): what draining costs
//! per byte, and which event rates one and two producer threads sustain without a loss.
//!
//! ```text
//! cargo bench -p hushtrace --bench consumer -- cpu        # consumer CPU time per 100 MB
//! cargo bench -p hushtrace --bench consumer -- lossless   # zero-loss rate ladder
//! cargo bench -p hushtrace --bench consumer -- all
//! ```
//!
//! Everything runs in one process, one session after the other, in a directory on disk
//! (`HUSHTRACE_BENCH_OUT`, default `target/consumer-bench`), so two builds of this file (say,
//! before and after a consumer change) can be run alternately for a same-run comparison. When
//! `lttng-relayd` is on `PATH` the relay rows run too, against a relay daemon started here on
//! loopback ports.
//!
//! **cpu.** One producer thread emits two-`i32` events (12 bytes with compact headers) at a
//! fixed rate (`HUSHTRACE_BENCH_CPU_RATE`, default 8 M events/s, under the lossless rate so the
//! consumer is never saturated) for `HUSHTRACE_BENCH_SECS` seconds (default 3). The CPU time of
//! every thread the runtime started (`hushtrace-*` in `/proc/self/task/*/comm`, summed from
//! `schedstat`, nanoseconds) is read once the producer has stopped and the rings have been
//! drained, and divided by the bytes of packets the run wrote (`relay_thread_ms_per_100MB` is
//! the relay sender thread's share of it). Rows: files only; files and a
//! relay; each with the stream files written through the page cache and with `O_DIRECT`
//! (`SessionBuilder::direct_io` set for the session; `padded=` counts the packets padded to the
//! block size, so a row that says `O_DIRECT` with `padded=0` ran on a file system without it).
//!
//! **lossless.** A ladder of fixed total rates (from `HUSHTRACE_BENCH_START`, default the
//! step, in steps of `HUSHTRACE_BENCH_STEP`, default 4 M events/s, up to
//! `HUSHTRACE_BENCH_MAX`, default 96 M): at each step every configuration still in
//! the race runs three 2-second trials, interleaved with the others', and leaves the race at
//! its first trial with a discarded event; its result is the last step it passed three times.
//! Configurations: one and two producer threads (the total rate split between them) with the
//! default rings (512 KiB x 8) and with 4 MiB x 8 rings; and, with a relay, one thread with
//! default rings writing to disk and to the relay (the "relay besides disk" ratio); through
//! the page cache only, unless `HUSHTRACE_BENCH_IO` says `direct` or `both`.
//!
//! Every trial's files are removed after it, the relay daemon's copy included: dirty pages left
//! behind would throttle the trials after it (docs/BENCHMARKS.md §12).
//!
//! Selection: `HUSHTRACE_BENCH_IO=page|direct|both` (stream-file writes; `cpu` defaults to
//! `both`, `lossless` to `page`), `HUSHTRACE_BENCH_ONLY=<part of a row's name>` (e.g.
//! `2 threads, default`); `HUSHTRACE_BENCH_RINGS=524288x64,4194304x2` adds two-thread
//! lossless configurations with those rings (sub-buffer bytes x count);
//! `HUSHTRACE_BENCH_SCHED=inherit,fifo:1` runs every row once per consumer scheduling
//! (`SessionBuilder::consumer_sched`; default `inherit`). `HUSHTRACE_BENCH_KEEP=1` keeps the
//! last trial's trace (to see where its losses were: `babeltrace2` prints each discarded run
//! with its time).
//!
//! Without `--bench` (`cargo test --benches`) it runs one short trial of each kind as a smoke
//! test.

use hushtrace::ConsumerSched;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hushtrace::{Mode, Session};

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

/// CPU time, in ns, of the threads the runtime started in this process: all of them, and the
/// relay sender thread's share of it.
fn runtime_cpu_ns() -> (u64, u64) {
    let (mut total, mut relay) = (0, 0);
    for t in std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("hushtrace") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        let ns = stat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        total += ns;
        if comm.trim_end() == "hushtrace-relay" {
            relay += ns;
        }
    }
    (total, relay)
}

/// Bytes of the stream files under `dir` (all processes).
fn stream_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            total += stream_bytes(&p);
        } else if e.file_name().to_string_lossy().starts_with("stream_") {
            total += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    total
}

/// Whether every stream file under `dir` is a sequence of whole packets (each packet's
/// `packet_size`, in bits at byte 56 of its header, leads to the next one and to the end):
/// `Some((packets, padded))`, the packets whose `packet_size` exceeds their `content_size`
/// (byte 48) counted as padded (`O_DIRECT` stream files); `None` when a file is not.
fn packet_check(dir: &Path) -> Option<(u64, u64)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Some((0, 0));
    };
    let (mut packets, mut padded) = (0, 0);
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            let (n, pad) = packet_check(&p)?;
            packets += n;
            padded += pad;
            continue;
        }
        if !e.file_name().to_string_lossy().starts_with("stream_") {
            continue;
        }
        let b = std::fs::read(&p).ok()?;
        let mut off = 0usize;
        while off + 64 <= b.len() {
            let content = u64::from_le_bytes(b[off + 48..off + 56].try_into().unwrap());
            let bits = u64::from_le_bytes(b[off + 56..off + 64].try_into().unwrap());
            if bits == 0 || bits % 8 != 0 || content > bits {
                return None;
            }
            packets += 1;
            padded += u64::from(content < bits);
            off += (bits / 8) as usize;
        }
        if off != b.len() {
            return None;
        }
    }
    Some((packets, padded))
}

/// One configuration of a trial.
#[derive(Clone, Copy)]
struct Config {
    name: &'static str,
    threads: usize,
    subbuf: usize,
    subbufs: usize,
    relay: bool,
    /// `SessionBuilder::direct_io` for the session: `None` leaves the builder's default.
    direct: Option<bool>,
    /// `SessionBuilder::consumer_sched` for the session.
    sched: ConsumerSched,
}

/// What a trial measured.
struct Trial {
    emitted: u64,
    written: u64,
    discarded: u64,
    stream_bytes: u64,
    /// Runtime threads' CPU time, ns (read after the producers stopped and the rings drained).
    runtime_cpu_ns: u64,
    /// The relay sender thread's share of `runtime_cpu_ns`.
    relay_cpu_ns: u64,
    achieved: f64,
    /// Packets in the stream files and how many of them are padded (`O_DIRECT`); `None` when
    /// a stream file was not a sequence of whole packets.
    packets: Option<(u64, u64)>,
}

/// Runs `cfg` at `rate` total events/s for `secs` seconds in a fresh session under `out`.
/// The relay daemon of the relay rows: its URL and where it writes the traces it receives.
struct Relay {
    url: String,
    traces: PathBuf,
}

/// Runs `cfg` at `rate` total events/s for `secs` seconds in a fresh session under `out`. The
/// trial's files are removed afterwards, the relay's copy too (with a relay), so no trial
/// leaves dirty pages behind for the next one to be throttled on: every row measures the same
/// thing, bursts into the page cache.
fn trial(cfg: Config, rate: u64, secs: f64, out: &Path, relay: Option<&Relay>) -> Trial {
    let _ = std::fs::remove_dir_all(out);
    let mut b = Session::builder()
        .output_dir(out)
        .mode(Mode::Discard)
        .subbuf_size(cfg.subbuf)
        .num_subbufs(cfg.subbufs);
    if let Some(d) = cfg.direct {
        b = b.direct_io(d);
    }
    b = b.consumer_sched(cfg.sched);
    if cfg.relay {
        b = b.relay(&relay.expect("a relay configuration without a relay").url);
    }
    let session = b.start().expect("start the session");
    let cpu_before = runtime_cpu_ns();
    let per_thread = rate as f64 / cfg.threads as f64;
    let go = Arc::new(Barrier::new(cfg.threads + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..cfg.threads)
        .map(|_| {
            let (go, stop) = (go.clone(), stop.clone());
            std::thread::Builder::new()
                .name("bench-producer".into())
                .spawn(move || {
                    hushtrace::init_thread();
                    go.wait();
                    let started = Instant::now();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let due = (started.elapsed().as_secs_f64() * per_thread) as u64;
                        while n < due {
                            for _ in 0..256 {
                                hushtrace::event!(
                                    "bench",
                                    "ints",
                                    a = n as i32,
                                    b = (2 * n) as i32
                                );
                                n += 1;
                            }
                        }
                        std::hint::spin_loop();
                    }
                    (n, started.elapsed().as_secs_f64())
                })
                .expect("spawn a producer")
        })
        .collect();
    go.wait();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let mut emitted = 0;
    let mut elapsed: f64 = 0.0;
    for p in producers {
        let (n, e) = p.join().expect("producer");
        emitted += n;
        elapsed = elapsed.max(e);
    }
    // Full packets drain on the read timer; give it a few periods, then read the CPU time
    // before the stop (which ends the runtime's threads).
    std::thread::sleep(Duration::from_millis(200));
    let (cpu_after, relay_after) = runtime_cpu_ns();
    let runtime_cpu_ns = cpu_after - cpu_before.0;
    let relay_cpu_ns = relay_after - cpu_before.1;
    let stats = session.stop().expect("stop the session");
    let t = Trial {
        emitted,
        written: stats.events_written,
        discarded: stats.events_discarded,
        stream_bytes: stream_bytes(out),
        runtime_cpu_ns,
        relay_cpu_ns,
        achieved: emitted as f64 / elapsed.max(1e-9),
        packets: packet_check(out),
    };
    if std::env::var_os("HUSHTRACE_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(out);
    }
    if let (true, Some(r)) = (cfg.relay, relay) {
        for e in std::fs::read_dir(&r.traces).into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    t
}

const DEFAULT_RINGS: (usize, usize) = (512 << 10, 8);
const BIG_RINGS: (usize, usize) = (4 << 20, 8);

/// A configuration's name with its stream-file writes (`O_DIRECT` or the page cache).
fn label(cfg: &Config) -> String {
    let name = match cfg.direct {
        Some(true) => format!("{}, O_DIRECT", cfg.name),
        Some(false) => format!("{}, page cache", cfg.name),
        None => cfg.name.to_string(),
    };
    match cfg.sched {
        ConsumerSched::Inherit => name,
        s => format!("{name}, consumer {s}"),
    }
}

/// The consumer schedulings to measure (`HUSHTRACE_BENCH_SCHED`: a comma-separated list of
/// `SessionBuilder::consumer_sched` texts, e.g. `inherit,fifo:1`; default `inherit`).
fn scheds() -> Vec<ConsumerSched> {
    std::env::var("HUSHTRACE_BENCH_SCHED")
        .unwrap_or_default()
        .split(',')
        .map(|s| {
            s.parse()
                .unwrap_or_else(|e| panic!("HUSHTRACE_BENCH_SCHED: {s:?}: {e}"))
        })
        .collect()
}

/// The stream-file writes to measure (`HUSHTRACE_BENCH_IO`: `page`, `direct` or `both`), each
/// set with `SessionBuilder::direct_io` (builder sessions do not read `HUSHTRACE_DIRECT_IO`,
/// so there is no mode that leaves it to the environment).
fn io_modes(default: &str) -> Vec<Option<bool>> {
    match std::env::var("HUSHTRACE_BENCH_IO")
        .as_deref()
        .unwrap_or(default)
    {
        "page" => vec![Some(false)],
        "direct" => vec![Some(true)],
        "both" => vec![Some(false), Some(true)],
        other => panic!("HUSHTRACE_BENCH_IO={other:?}: expected page, direct or both"),
    }
}

/// Whether configuration `name` is measured (`HUSHTRACE_BENCH_ONLY`: a part of its name).
fn selected(name: &str) -> bool {
    std::env::var("HUSHTRACE_BENCH_ONLY").map_or(true, |only| name.contains(&only))
}

fn cpu(out: &Path, relay: Option<&Relay>, smoke: bool) {
    let rate = env_u64("HUSHTRACE_BENCH_CPU_RATE", 8_000_000);
    let secs = if smoke {
        0.2
    } else {
        env_u64("HUSHTRACE_BENCH_SECS", 3) as f64
    };
    let base = Config {
        name: "files",
        threads: 1,
        subbuf: DEFAULT_RINGS.0,
        subbufs: DEFAULT_RINGS.1,
        relay: false,
        direct: None,
        sched: ConsumerSched::Inherit,
    };
    let scheds = scheds();
    let mut rows = vec![];
    for relayed in [false, true] {
        if relayed && relay.is_none() {
            continue;
        }
        for direct in io_modes("both") {
            for &sched in &scheds {
                rows.push(Config {
                    name: if relayed { "files + relay" } else { "files" },
                    relay: relayed,
                    direct,
                    sched,
                    ..base
                });
            }
        }
    }
    rows.retain(|c| selected(&label(c)));
    for cfg in rows {
        let t = trial(cfg, rate, secs, out, relay);
        // With a relay the packets go out twice; the bytes are counted once (the payload,
        // padding included in O_DIRECT stream files).
        let mb = t.stream_bytes as f64 / 1e6;
        let (packets, padded) = t.packets.unwrap_or_else(|| {
            panic!(
                "{}: the stream files are not whole packets (bytes {})",
                label(&cfg),
                t.stream_bytes
            )
        });
        println!(
            "cpu {:<27} rate={rate} emitted={} written={} discarded={} MB={mb:.1} \
             runtime_cpu_ms={:.1} cpu_ms_per_100MB={:.1} relay_thread_ms_per_100MB={:.1} \
             ns_per_event={:.2} packets={packets} padded={padded}",
            label(&cfg),
            t.emitted,
            t.written,
            t.discarded,
            t.runtime_cpu_ns as f64 / 1e6,
            t.runtime_cpu_ns as f64 / 1e6 / mb.max(1e-9) * 100.0,
            t.relay_cpu_ns as f64 / 1e6 / mb.max(1e-9) * 100.0,
            t.runtime_cpu_ns as f64 / t.written.max(1) as f64,
        );
    }
}

fn lossless(out: &Path, relay: Option<&Relay>, smoke: bool) {
    let step = env_u64("HUSHTRACE_BENCH_STEP", 4_000_000);
    let max = env_u64("HUSHTRACE_BENCH_MAX", 96_000_000);
    let secs = if smoke { 0.2 } else { 2.0 };
    let mut configs = vec![];
    for (rings, (subbuf, subbufs)) in [("default rings", DEFAULT_RINGS), ("4 MiB x 8", BIG_RINGS)] {
        for threads in [1, 2] {
            configs.push(Config {
                name: match (threads, rings) {
                    (1, "default rings") => "1 thread, default rings",
                    (2, "default rings") => "2 threads, default rings",
                    (1, _) => "1 thread, 4 MiB x 8",
                    _ => "2 threads, 4 MiB x 8",
                },
                threads,
                subbuf,
                subbufs,
                relay: false,
                direct: None,
                sched: ConsumerSched::Inherit,
            });
        }
    }
    // Extra ring geometries (`HUSHTRACE_BENCH_RINGS=<subbuf>x<n>,...`), two threads each: to
    // tell a ring's footprint from its packet size.
    for g in std::env::var("HUSHTRACE_BENCH_RINGS")
        .unwrap_or_default()
        .split(',')
        .filter(|g| !g.is_empty())
    {
        let (subbuf, subbufs) = g
            .split_once('x')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .unwrap_or_else(|| panic!("HUSHTRACE_BENCH_RINGS: {g:?} is not <bytes>x<count>"));
        configs.push(Config {
            name: Box::leak(format!("2 threads, {subbuf} x {subbufs}").into_boxed_str()),
            threads: 2,
            subbuf,
            subbufs,
            relay: false,
            direct: None,
            sched: ConsumerSched::Inherit,
        });
    }
    if relay.is_some() {
        configs.push(Config {
            name: "1 thread, disk + relay",
            relay: true,
            ..configs[0]
        });
    }
    let scheds = scheds();
    let configs: Vec<Config> = io_modes("page")
        .into_iter()
        .flat_map(|direct| configs.iter().map(move |c| Config { direct, ..*c }))
        .flat_map(|c| scheds.iter().map(move |&sched| Config { sched, ..c }))
        .filter(|c| selected(&label(c)))
        .collect();
    let mut best = vec![0u64; configs.len()];
    let mut racing = vec![true; configs.len()];
    let mut rate = env_u64("HUSHTRACE_BENCH_START", step);
    let trials = if smoke { 1 } else { 3 };
    while racing.iter().any(|&r| r) && rate <= max {
        for _ in 0..trials {
            for (i, cfg) in configs.iter().enumerate() {
                if !racing[i] {
                    continue;
                }
                let t = trial(*cfg, rate, secs, out, relay);
                println!(
                    "trial {:<40} rate={rate} emitted={} written={} discarded={} achieved={:.0} \
                     runtime_cpu_ms_per_100MB={:.1}",
                    label(cfg),
                    t.emitted,
                    t.written,
                    t.discarded,
                    t.achieved,
                    t.runtime_cpu_ns as f64 / 1e6 / (t.stream_bytes as f64 / 1e8).max(1e-9)
                );
                assert!(
                    t.packets.is_some(),
                    "{}: stream files not whole packets",
                    label(cfg)
                );
                // A trial that could not even emit at the rate (the producer fell behind) is
                // a loss too: the rate was not sustained.
                if t.discarded > 0 || (!smoke && t.achieved < rate as f64 * 0.97) {
                    racing[i] = false;
                }
            }
        }
        for i in 0..configs.len() {
            if racing[i] {
                best[i] = rate;
            }
        }
        if smoke {
            break;
        }
        rate += step;
    }
    for (i, cfg) in configs.iter().enumerate() {
        println!(
            "lossless {:<40} {:>5.1} M events/s (ratio to the first: {:.2})",
            label(cfg),
            best[i] as f64 / 1e6,
            best[i] as f64 / best[0].max(1) as f64
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let smoke = !args.iter().any(|a| a == "--bench");
    let what = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
        .unwrap_or("all");
    let out = std::env::var_os("HUSHTRACE_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/consumer-bench")
        });
    let relayd = hushtrace_testsupport::which("lttng-relayd")
        .filter(|_| !smoke)
        .map(|_| hushtrace_testsupport::Relayd::start());
    let relay = relayd.as_ref().map(|r| Relay {
        url: r.url(),
        traces: r.traces(),
    });
    println!(
        "consumer bench: {what}{} (load average {})",
        if smoke { " (smoke test)" } else { "" },
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    match what {
        "cpu" => cpu(&out, relay.as_ref(), smoke),
        "lossless" => lossless(&out, relay.as_ref(), smoke),
        "all" => {
            cpu(&out, relay.as_ref(), smoke);
            lossless(&out, relay.as_ref(), smoke);
        }
        other => {
            eprintln!("consumer bench: unknown part {other:?} (cpu, lossless, all)");
            std::process::exit(2);
        }
    }
}
