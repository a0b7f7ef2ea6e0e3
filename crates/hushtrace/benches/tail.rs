//! Tail latency of a single tracepoint, sub-buffer switches included: every `event!` (two `u64`
//! fields, 26 bytes on the wire) is timed on its own with the cycle counter, over 10 million
//! events per configuration, for a normal thread and a no-syscall thread, in discard mode (the
//! default: a full ring drops and counts) and overwrite mode (never drops), all in one run.
//!
//! ```text
//! cargo bench -p hushtrace --bench tail
//! HUSHTRACE_TAIL_EVENTS=50000000 cargo bench -p hushtrace --bench tail
//! ```
//!
//! Sessions use 64 KiB × 16 sub-buffers and the default read timer, so a 10 M-event run switches
//! sub-buffers thousands of times. Each configuration runs on a fresh thread (started after the
//! session, so the consumer thread keeps the default scheduling policy) that asks for
//! `SCHED_FIFO` priority 10 and carries on without it if refused. Nothing is pinned.
//!
//! Timing: `lfence; rdtsc; lfence` before and `rdtscp; lfence` after each tracepoint; cycles are
//! converted to ns with a calibration against `std::time::Instant`. The same timing around an
//! empty region is reported as the timer overhead (it is included in every other row). A control
//! row times the least a tracepoint could do with the same memory footprint (counter read plus a
//! 26-byte record stored into a pre-touched 1 MiB buffer, wrapping), so the machine's own noise
//! (interrupts, steal time, cache and TLB misses) can be told apart from the tracer's.
//!
//! Without `--bench` (e.g. `cargo test --benches`) it runs 100 000 events per configuration as a
//! smoke test.

use std::hint::black_box;
use std::time::{Duration, Instant};

use core::arch::x86_64::{__rdtscp, _mm_lfence, _rdtsc};
use hushtrace_testsupport::bench::{bench_dir, full_run, percentile};

/// Bytes per event: header (2-byte id + 8-byte timestamp) + two u64 fields.
const EVENT_BYTES: u64 = 10 + 16;
/// Sub-buffer (packet) size and count of the sessions: 4 MiB per thread, the default ring size
/// (512 KiB x 8), cut into smaller packets for more sub-buffer switches.
const SUBBUF: usize = 64 << 10;
const NUM_SUBBUFS: usize = 64;
/// Packet header bytes (see `hushtrace_ctf::layout::PACKET_HEADER_LEN`).
const PACKET_HEADER: u64 = hushtrace_ctf::layout::PACKET_HEADER_LEN as u64;

#[inline(always)]
fn start() -> u64 {
    // SAFETY: lfence and rdtsc exist on every x86_64 CPU; they only order instructions and read
    // the time-stamp counter.
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

#[inline(always)]
fn stop() -> u64 {
    let mut aux = 0u32;
    // SAFETY: rdtscp is available on every CPU this runs on (checked in `main`); it writes the
    // processor id into `aux`, a valid local.
    unsafe {
        let t = __rdtscp(&mut aux);
        _mm_lfence();
        t
    }
}

/// Cycle-counter ticks per nanosecond, measured against `Instant` over `d`.
fn ticks_per_ns(d: Duration) -> f64 {
    let (i0, c0) = (Instant::now(), start());
    std::thread::sleep(d);
    let (c1, i1) = (stop(), Instant::now());
    (c1 - c0) as f64 / (i1 - i0).as_nanos() as f64
}

/// Asks for SCHED_FIFO priority 10 on the calling thread; returns whether it was granted.
fn try_fifo() -> bool {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: pthread_self() is the calling thread; `param` is a valid sched_param.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) == 0 }
}

/// The one callsite of this bench (so the warm-up also publishes its field types).
#[inline(always)]
fn tracepoint(seq: u64, t0: u64) {
    hushtrace::event!("tail", "event", seq = seq, t0 = t0);
}

/// Times `lat.len()` tracepoints, one latency (in cycles) per slot.
#[inline(never)]
fn timed_events(lat: &mut [u32], first: u64) {
    for (i, slot) in lat.iter_mut().enumerate() {
        let t0 = start();
        tracepoint(first + i as u64, t0);
        let t1 = stop();
        *slot = (t1 - t0).min(u32::MAX as u64) as u32;
    }
}

/// Untimed tracepoints (warm-up), same callsite.
#[inline(never)]
fn untimed_events(n: u64) {
    for i in 0..n {
        tracepoint(i, black_box(i));
    }
}

/// The timer alone, around an empty region.
#[inline(never)]
fn timed_nothing(lat: &mut [u32]) {
    for slot in lat.iter_mut() {
        let t0 = start();
        black_box(t0);
        let t1 = stop();
        *slot = (t1 - t0).min(u32::MAX as u64) as u32;
    }
}

/// The control: what a tracepoint can at least cost, with the same memory footprint as a
/// session's ring: read the counter and store a 26-byte record at the next offset of a
/// pre-touched `SUBBUF * NUM_SUBBUFS` buffer, wrapping at the end.
#[inline(never)]
fn timed_control(lat: &mut [u32]) {
    let mut ring = vec![0u8; SUBBUF * NUM_SUBBUFS];
    ring.iter_mut().for_each(|b| *b = black_box(1));
    let cap = ring.len() - EVENT_BYTES as usize;
    let mut off = 0usize;
    for (i, slot) in lat.iter_mut().enumerate() {
        let t0 = start();
        // SAFETY: as in `start`.
        let ts = unsafe { _rdtsc() };
        let rec = &mut ring[off..off + EVENT_BYTES as usize];
        rec[..2].copy_from_slice(&7u16.to_le_bytes());
        rec[2..10].copy_from_slice(&ts.to_le_bytes());
        rec[10..18].copy_from_slice(&(i as u64).to_le_bytes());
        rec[18..26].copy_from_slice(&t0.to_le_bytes());
        off += EVENT_BYTES as usize;
        if off > cap {
            off = 0;
        }
        let t1 = stop();
        *slot = (t1 - t0).min(u32::MAX as u64) as u32;
    }
    black_box(&ring);
}

/// Percentiles of sorted latencies, in ns.
struct Dist {
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    p9999: f64,
    max: f64,
    mean: f64,
}

fn dist(lat: &mut [u32], tpn: f64) -> Dist {
    lat.sort_unstable();
    let n = lat.len();
    let at = |q: f64| percentile(lat, q) as f64 / tpn;
    let sum: u64 = lat.iter().map(|&x| x as u64).sum();
    Dist {
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        p999: at(0.999),
        p9999: at(0.9999),
        max: lat[n - 1] as f64 / tpn,
        mean: sum as f64 / n as f64 / tpn,
    }
}

struct Row {
    name: String,
    d: Dist,
    fifo: bool,
    written: u64,
    discarded: u64,
    switches: u64,
}

fn run(
    name: &str,
    dir: &std::path::Path,
    mode: hushtrace::Mode,
    no_syscall: bool,
    lat: &mut [u32],
    warmup: u64,
    tpn: f64,
) -> Row {
    let session = hushtrace::Session::builder()
        .output_dir(dir.join(name))
        .mode(mode)
        .subbuf_size(SUBBUF)
        .num_subbufs(NUM_SUBBUFS)
        .start()
        .expect("start hushtrace session");
    let fifo = std::thread::scope(|s| {
        s.spawn(|| {
            hushtrace::init_thread();
            let fifo = try_fifo();
            if no_syscall {
                hushtrace::set_thread_no_syscall();
            }
            untimed_events(warmup);
            timed_events(lat, warmup);
            if no_syscall {
                hushtrace::clear_thread_no_syscall();
            }
            fifo
        })
        .join()
        .expect("measuring thread")
    });
    let stats = session.stop().expect("stop hushtrace session");
    let total = warmup + lat.len() as u64;
    assert_eq!(
        stats.events_written + stats.events_discarded,
        total,
        "{name}: every event must be written or counted"
    );
    // Events that went into a packet: all of them in overwrite mode (old packets are overwritten
    // later), only the written ones in discard mode.
    let accepted = match mode {
        hushtrace::Mode::Overwrite => total,
        hushtrace::Mode::Discard => stats.events_written,
    };
    let per_packet = (SUBBUF as u64 - PACKET_HEADER) / EVENT_BYTES;
    Row {
        name: name.to_string(),
        d: dist(lat, tpn),
        fifo,
        written: stats.events_written,
        discarded: stats.events_discarded,
        switches: accepted / per_packet,
    }
}

fn main() {
    let full = full_run();
    let n: usize = std::env::var("HUSHTRACE_TAIL_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 10_000_000 } else { 100_000 });
    let warmup = (n / 10) as u64;
    // CPUID leaf 0x80000001, EDX bit 27: RDTSCP.
    assert!(
        core::arch::x86_64::__cpuid(0x8000_0000).eax >= 0x8000_0001
            && core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 27) != 0,
        "this bench needs rdtscp"
    );
    let dir = bench_dir("tail");

    let tpn = ticks_per_ns(Duration::from_millis(if full { 200 } else { 20 }));
    // Preallocated and touched before any timing.
    let mut lat = vec![1u32; n];
    lat.iter_mut().for_each(|x| *x = black_box(0));

    timed_nothing(&mut lat);
    let timer = dist(&mut lat, tpn);
    let control = std::thread::scope(|s| {
        s.spawn(|| {
            let fifo = try_fifo();
            timed_control(&mut lat);
            fifo
        })
        .join()
        .expect("control thread")
    });
    let control = (dist(&mut lat, tpn), control);

    let configs = [
        ("discard/normal", hushtrace::Mode::Discard, false),
        ("discard/no-syscall", hushtrace::Mode::Discard, true),
        ("overwrite/normal", hushtrace::Mode::Overwrite, false),
        ("overwrite/no-syscall", hushtrace::Mode::Overwrite, true),
    ];
    let rows: Vec<Row> = configs
        .iter()
        .map(|&(name, mode, ns)| run(name, &dir, mode, ns, &mut lat, warmup, tpn))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);

    println!();
    println!(
        "per-tracepoint latency, ns ({n} timed events per row after {warmup} untimed; \
         subbuf {} KiB x {NUM_SUBBUFS}; counter {:.3} ticks/ns; SCHED_FIFO {})",
        SUBBUF >> 10,
        tpn,
        if control.1 && rows.iter().all(|r| r.fifo) {
            "granted"
        } else if rows.iter().any(|r| r.fifo) {
            "partly granted"
        } else {
            "refused"
        }
    );
    println!(
        "{:<22} {:>7} {:>7} {:>7} {:>8} {:>9} {:>9} {:>7} {:>9} {:>9} {:>10} {:>10} {:>9}",
        "mode/thread",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "max",
        "mean",
        "p99.9/p50",
        "(net)",
        "written",
        "discarded",
        "switches"
    );
    let line = |name: &str, d: &Dist| {
        let net = if d.p50 > timer.p50 {
            format!("{:.2}", (d.p999 - timer.p50) / (d.p50 - timer.p50))
        } else {
            "-".to_string()
        };
        format!(
            "{name:<22} {:>7.1} {:>7.1} {:>7.1} {:>8.1} {:>9.1} {:>9.0} {:>7.1} {:>9.2} {net:>9}",
            d.p50,
            d.p90,
            d.p99,
            d.p999,
            d.p9999,
            d.max,
            d.mean,
            d.p999 / d.p50,
        )
    };
    println!("{}", line("timer only (empty)", &timer));
    println!("{}", line("control: 26 B to ring", &control.0));
    for r in &rows {
        println!(
            "{} {:>10} {:>10} {:>9}",
            line(&r.name, &r.d),
            r.written,
            r.discarded,
            r.switches
        );
    }
    println!(
        "(net: both percentiles minus the timer's p50. written/discarded/switches cover the whole \
         session, warm-up included; in overwrite mode `written` is what the newest {NUM_SUBBUFS} \
         packets kept and `discarded` what was overwritten; switches = events that went into a \
         packet / {} events per packet)",
        (SUBBUF as u64 - PACKET_HEADER) / EVENT_BYTES
    );
}
