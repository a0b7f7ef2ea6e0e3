//! A real-time loop for the late-cycle test (issue 31): `rt:cycle` spans of 200 µs of work
//! every 1 ms, on one pinned thread in no-syscall mode under a seccomp filter that traps every
//! system call. Traced through the environment, as `hushtrace record` runs programs.
//!
//! `hushtrace record -o DIR --on-late 'rt:cycle>600us' -- rt_cycle SECONDS [--cpu N] [--fifo P]`
//!
//! * `--cpu N` (default 0): the CPU the loop is pinned to.
//! * `--fifo P`: the loop runs SCHED_FIFO at priority P (default: SCHED_OTHER, so that an
//!   ordinary CPU hog on the same CPU delays it).
//!
//! Before entering no-syscall mode it prints `rt_tid=T` (flushed: a test may start a hog when
//! it reads it). The period is kept by spinning on the cycle counter (calibrated first): no
//! sleep, no system call. At the end it prints `cycles=C` (spans ended), `slow_cycles=S`
//! (spans that took more than 3 times the work, as the loop measured them), and `sigsys=N`,
//! the system calls the loop's thread attempted under the filter (0 when the tracer keeps its
//! promise, late spans included). Exit code 3 when the pinning, SCHED_FIFO or the filter is
//! refused; 2 on a usage error.

#[path = "../sched.rs"]
mod sched;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The work of one cycle.
const WORK: Duration = Duration::from_micros(200);
/// The period of the loop.
const PERIOD: Duration = Duration::from_millis(1);

/// A cycle counter read without a system call.
#[cfg(target_arch = "x86_64")]
fn ticks() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64 (user-space access is not disabled on
    // Linux); it reads a counter and touches no memory.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

/// A cycle counter read without a system call (the vDSO's monotonic clock elsewhere).
#[cfg(not(target_arch = "x86_64"))]
fn ticks() -> u64 {
    use std::sync::OnceLock;
    static T0: OnceLock<Instant> = OnceLock::new();
    T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Ticks per microsecond, measured over 50 ms.
fn calibrate() -> f64 {
    let (t0, c0) = (Instant::now(), ticks());
    std::thread::sleep(Duration::from_millis(50));
    let (dt, dc) = (t0.elapsed(), ticks() - c0);
    dc as f64 / dt.as_secs_f64() / 1e6
}

fn gettid() -> i64 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

struct Args {
    seconds: u64,
    cpu: usize,
    fifo: Option<i32>,
}

fn args() -> Result<Args, String> {
    let usage = "usage: rt_cycle SECONDS [--cpu N] [--fifo PRIO]";
    let mut it = std::env::args().skip(1);
    let seconds = it
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| usage.to_string())?;
    let mut a = Args {
        seconds,
        cpu: 0,
        fifo: None,
    };
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| usage.to_string())?;
        match flag.as_str() {
            "--cpu" => a.cpu = v.parse().map_err(|_| usage.to_string())?,
            "--fifo" => a.fifo = Some(v.parse().map_err(|_| usage.to_string())?),
            _ => return Err(usage.to_string()),
        }
    }
    Ok(a)
}

/// What the loop's thread reports: spans ended, slow ones, trapped system calls.
#[derive(Default)]
struct Outcome {
    cycles: AtomicU64,
    slow: AtomicU64,
    sigsys: AtomicU64,
    failed: AtomicU64,
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let session = match hushtrace::start_from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rt_cycle: tracing disabled: {e}");
            None
        }
    };
    let per_us = calibrate();
    let work = (WORK.as_micros() as f64 * per_us) as u64;
    let period = (PERIOD.as_micros() as f64 * per_us) as u64;
    let cycles = a.seconds * (1_000_000 / PERIOD.as_micros() as u64);
    let out = Arc::new(Outcome::default());
    let o = out.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let rt = std::thread::Builder::new()
        .name("rt".into())
        .spawn(move || {
            if let Err(e) = sched::pin(a.cpu, a.fifo) {
                tx.send(Err(e)).ok();
                return;
            }
            hushtrace::set_thread_name("rt");
            // The thread's first event allocates its ring: before no-syscall mode.
            hushtrace::event!("rt", "ready");
            // The last system calls of this thread: the channel's wake-up, then the filter.
            tx.send(Ok(gettid())).ok();
            drop(tx);
            hushtrace::set_thread_no_syscall();
            if let Err(e) = hushtrace::verify::trap_syscalls_on_this_thread() {
                hushtrace::clear_thread_no_syscall();
                eprintln!("rt_cycle: cannot install the seccomp filter: {e}");
                o.failed.store(1, Ordering::SeqCst);
                return;
            }
            let mut next = ticks() + period;
            for _ in 0..cycles {
                let t0 = ticks();
                {
                    let _cycle = hushtrace::span!("rt", "cycle");
                    while ticks() - t0 < work {
                        std::hint::spin_loop();
                    }
                }
                if ticks() - t0 > 3 * work {
                    o.slow.fetch_add(1, Ordering::Relaxed);
                }
                o.cycles.fetch_add(1, Ordering::Relaxed);
                // A late cycle starts the next one at once, then the loop catches up.
                while ticks() < next {
                    std::hint::spin_loop();
                }
                next += period;
            }
            hushtrace::clear_thread_no_syscall();
            o.sigsys
                .store(hushtrace::verify::trapped_syscalls(), Ordering::SeqCst);
            drop(o);
            // SAFETY: every value of this thread's stack that has a destructor has been
            // dropped (the span guards, the Arc); the filter allows only this way out.
            unsafe { hushtrace::verify::exit_thread() };
        })
        .expect("spawn the loop's thread");
    match rx.recv() {
        Ok(Ok(tid)) => {
            use std::io::Write as _;
            println!("rt_tid={tid}");
            let _ = std::io::stdout().flush();
        }
        Ok(Err(e)) => {
            eprintln!("rt_cycle: {e}");
            std::process::exit(3);
        }
        Err(_) => {
            eprintln!("rt_cycle: the loop's thread ended before it was prepared");
            std::process::exit(3);
        }
    }
    hushtrace::verify::join_raw(rt);
    if let Some(s) = session {
        if let Err(e) = s.stop() {
            eprintln!("rt_cycle: {e}");
        }
    }
    if out.failed.load(Ordering::SeqCst) != 0 {
        std::process::exit(3);
    }
    println!(
        "cycles={}\nslow_cycles={}\nsigsys={}",
        out.cycles.load(Ordering::Relaxed),
        out.slow.load(Ordering::Relaxed),
        out.sigsys.load(Ordering::SeqCst)
    );
}
