//! Workloads for the `record --kernel` tests and benchmark (`crates/hushtrace-cli/tests/kernel.rs`).
//!
//! * `kernel_workload preempt CYCLES`: a SCHED_FIFO (priority 10) thread runs `rt:cycle` spans
//!   of 1 ms of CPU time each, sleeping 300 µs between them; a SCHED_FIFO (priority 20) `hog`
//!   thread on the same CPU (both pinned to CPU 0) wakes every 7 ms and spins 2 ms, preempting
//!   it. Prints `cycle_tid=`, `hog_tid=`, `hog_in_spans_ns=` (the wall time of the hog's
//!   bursts that began while the cycle thread was inside a span: the delay it caused, as the
//!   program measures itself) and `wall_minus_cpu_ns=` (the cycles' wall time minus their CPU
//!   time: that delay plus interrupts plus any time the hypervisor took the CPU away, which
//!   no kernel trace can see). Exit code 3 when SCHED_FIFO or the pinning is refused.
//! * `kernel_workload block`: an `io:wait` span around a pipe read that a `writer` thread
//!   satisfies after sleeping 20 ms. Prints `reader_tid=`, `writer_tid=`, `measured_ns=`.
//! * `kernel_workload pingpong N`: two threads pass a byte back and forth through two pipes N
//!   times, each round trip in a `pp:round` span. Prints `ns_per_round=`.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether the cycle thread is inside an `rt:cycle` span.
static IN_SPAN: AtomicBool = AtomicBool::new(false);
/// Wall time of the hog's bursts that started while the cycle thread was inside a span.
static HOG_IN_SPANS_NS: AtomicI64 = AtomicI64::new(0);

fn now_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn gettid() -> i64 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// Pins the calling thread to CPU 0 and makes it SCHED_FIFO at `prio`.
fn rt_on_cpu0(prio: i32) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and the calls get valid pointers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "sched_setaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        let p = libc::sched_param {
            sched_priority: prio,
        };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
            return Err(format!(
                "sched_setscheduler: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

fn preempt(cycles: u64) -> i32 {
    let done = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let d = done.clone();
    let hog = std::thread::Builder::new()
        .name("hog".into())
        .spawn(move || {
            let r = rt_on_cpu0(20);
            tx.send((gettid(), r.clone())).ok();
            if r.is_err() {
                return;
            }
            let nap = libc::timespec {
                tv_sec: 0,
                tv_nsec: 7_000_000,
            };
            while !d.load(Ordering::Relaxed) {
                // SAFETY: `nap` is a valid timespec; the remainder is not wanted.
                unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
                // From the return of nanosleep to the next call: all of this run of the thread
                // but the kernel's own switch and wake-up paths. The cycle thread cannot run
                // meanwhile (same CPU, lower priority): if it is inside a span, this whole run
                // delays that span.
                let t0 = now_ns(libc::CLOCK_MONOTONIC);
                let in_span = IN_SPAN.load(Ordering::Relaxed);
                let mut t1 = t0;
                while t1 - t0 < 2_000_000 {
                    t1 = now_ns(libc::CLOCK_MONOTONIC);
                }
                if in_span {
                    let t2 = now_ns(libc::CLOCK_MONOTONIC);
                    HOG_IN_SPANS_NS.fetch_add(t2 - t0, Ordering::Relaxed);
                }
            }
        })
        .expect("spawn hog");
    let (hog_tid, r) = rx.recv().expect("hog started");
    if let Err(e) = r {
        eprintln!("kernel_workload: {e}");
        return 3;
    }
    let cycle = std::thread::Builder::new()
        .name("cycle".into())
        .spawn(move || {
            if let Err(e) = rt_on_cpu0(10) {
                eprintln!("kernel_workload: {e}");
                return None;
            }
            // The thread's first event allocates its ring: not inside a measured span.
            hushtrace::event!("rt", "ready");
            let mut off = 0i64;
            for _ in 0..cycles {
                {
                    let _g = hushtrace::span!("rt", "cycle");
                    IN_SPAN.store(true, Ordering::Relaxed);
                    let (w0, c0) = (
                        now_ns(libc::CLOCK_MONOTONIC),
                        now_ns(libc::CLOCK_THREAD_CPUTIME_ID),
                    );
                    let mut c = c0;
                    while c - c0 < 1_000_000 {
                        c = now_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                    }
                    let w1 = now_ns(libc::CLOCK_MONOTONIC);
                    off += (w1 - w0) - (c - c0);
                    IN_SPAN.store(false, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_micros(300));
            }
            Some((gettid(), off))
        })
        .expect("spawn cycle");
    let res = cycle.join().expect("cycle thread");
    done.store(true, Ordering::Relaxed);
    hog.join().expect("hog thread");
    match res {
        Some((tid, off)) => {
            println!(
                "cycle_tid={tid}\nhog_tid={hog_tid}\nhog_in_spans_ns={}\nwall_minus_cpu_ns={off}",
                HOG_IN_SPANS_NS.load(Ordering::Relaxed)
            );
            0
        }
        None => 3,
    }
}

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    (fds[0], fds[1])
}

fn rd(fd: i32) {
    let mut b = 0u8;
    // SAFETY: `b` is a valid one-byte buffer.
    let n = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
    assert_eq!(n, 1, "read");
}

fn wr(fd: i32) {
    let b = 1u8;
    // SAFETY: `b` is a valid one-byte buffer.
    let n = unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    assert_eq!(n, 1, "write");
}

fn block() -> i32 {
    let (r, w) = pipe();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::Builder::new()
        .name("reader".into())
        .spawn(move || {
            let _g = hushtrace::span!("io", "wait");
            let t0 = now_ns(libc::CLOCK_MONOTONIC);
            ready_tx.send(()).ok();
            rd(r);
            (gettid(), now_ns(libc::CLOCK_MONOTONIC) - t0)
        })
        .expect("spawn reader");
    let writer = std::thread::Builder::new()
        .name("writer".into())
        .spawn(move || {
            ready_rx.recv().ok();
            std::thread::sleep(Duration::from_millis(20));
            wr(w);
            gettid()
        })
        .expect("spawn writer");
    let (reader_tid, ns) = reader.join().expect("reader");
    let writer_tid = writer.join().expect("writer");
    println!("reader_tid={reader_tid}\nwriter_tid={writer_tid}\nmeasured_ns={ns}");
    0
}

fn pingpong(n: u64) -> i32 {
    let (a_r, a_w) = pipe();
    let (b_r, b_w) = pipe();
    let pong = std::thread::spawn(move || {
        for _ in 0..n {
            rd(a_r);
            wr(b_w);
        }
    });
    let t0 = Instant::now();
    for _ in 0..n {
        let _g = hushtrace::span!("pp", "round");
        wr(a_w);
        rd(b_r);
    }
    let ns = t0.elapsed().as_nanos() as u64;
    pong.join().expect("pong");
    println!("ns_per_round={}", ns / n.max(1));
    0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let session = match hushtrace::start_from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kernel_workload: {e}");
            std::process::exit(1);
        }
    };
    let num = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let code = match args.first().map(String::as_str) {
        Some("preempt") => preempt(num(1, 150)),
        Some("block") => block(),
        Some("pingpong") => pingpong(num(1, 100_000)),
        _ => {
            eprintln!("usage: kernel_workload preempt [CYCLES] | block | pingpong [N]");
            2
        }
    };
    if let Some(s) = session {
        if let Err(e) = s.stop() {
            eprintln!("kernel_workload: {e}");
            std::process::exit(1);
        }
    }
    std::process::exit(code);
}
