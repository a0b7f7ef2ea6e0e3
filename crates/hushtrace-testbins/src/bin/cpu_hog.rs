//! A CPU hog for the late-cycle test (issue 31): pinned to one CPU, it spins there at given
//! moments, taking the CPU from whatever runs on it (a real-time loop's cycles come late).
//!
//! `cpu_hog --cpu N --length MS [--burst US --gap US] [--fifo PRIO] AT_MS...`
//!
//! * `--cpu N`: the CPU it is pinned to;
//! * `--length MS`: how long each episode lasts;
//! * `--burst US --gap US`: within an episode, spin `US` µs then sleep `US` µs, again and
//!   again (default: spin the whole episode). A SCHED_FIFO hog waking in bursts catches a
//!   loop's short spans wherever they fall in its period;
//! * `--fifo PRIO`: runs SCHED_FIFO at that priority (above a SCHED_FIFO loop's, to preempt
//!   it; default SCHED_OTHER, which shares the CPU with an ordinary loop);
//! * `AT_MS...`: when the episodes begin, in ms after the start, in increasing order.
//!
//! Its thread is named `hog` (what `report --late` names as who ran instead). It prints
//! `hog_tid=T` at the start, then for each episode `episode=I start_ns=S end_ns=E` (ns since
//! the Unix epoch, CLOCK_REALTIME, the unit of `late/index.json`). Exit code 3 when the
//! pinning or SCHED_FIFO is refused; 2 on a usage error.

#[path = "../sched.rs"]
mod sched;

use std::io::Write as _;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn epoch_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn gettid() -> i64 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

fn prctl_name(name: &str) {
    let c = std::ffi::CString::new(name).expect("no NUL");
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes (longer ones are
    // cut by the kernel); `c` lives across the call.
    unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr(), 0, 0, 0) };
}

fn main() {
    let usage = "usage: cpu_hog --cpu N --length MS [--burst US --gap US] [--fifo PRIO] AT_MS...";
    let fail = |msg: &str| -> ! {
        eprintln!("{msg}");
        std::process::exit(2)
    };
    let (mut cpu, mut length, mut fifo, mut at) = (None, None, None, Vec::new());
    let (mut burst, mut gap) = (None, 0u64);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| fail(usage));
        match a.as_str() {
            "--cpu" => cpu = Some(value().parse::<usize>().unwrap_or_else(|_| fail(usage))),
            "--length" => length = Some(value().parse::<u64>().unwrap_or_else(|_| fail(usage))),
            "--burst" => burst = Some(value().parse::<u64>().unwrap_or_else(|_| fail(usage))),
            "--gap" => gap = value().parse::<u64>().unwrap_or_else(|_| fail(usage)),
            "--fifo" => fifo = Some(value().parse::<i32>().unwrap_or_else(|_| fail(usage))),
            ms => at.push(ms.parse::<u64>().unwrap_or_else(|_| fail(usage))),
        }
    }
    let (Some(cpu), Some(length)) = (cpu, length) else {
        fail(usage)
    };
    if at.is_empty() || at.windows(2).any(|w| w[0] >= w[1]) {
        fail(usage);
    }
    prctl_name("hog");
    if let Err(e) = sched::pin(cpu, fifo) {
        eprintln!("cpu_hog: {e}");
        std::process::exit(3);
    }
    println!("hog_tid={}", gettid());
    let _ = std::io::stdout().flush();
    let t0 = Instant::now();
    for (i, ms) in at.iter().enumerate() {
        let when = t0 + Duration::from_millis(*ms);
        if let Some(d) = when.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let start = epoch_ns();
        let episode = Instant::now();
        let length = Duration::from_millis(length);
        let burst = burst.map_or(length, Duration::from_micros);
        while episode.elapsed() < length {
            let b = Instant::now();
            while b.elapsed() < burst && episode.elapsed() < length {
                std::hint::spin_loop();
            }
            if gap > 0 && episode.elapsed() < length {
                std::thread::sleep(Duration::from_micros(gap));
            }
        }
        println!("episode={i} start_ns={start} end_ns={}", epoch_ns());
        let _ = std::io::stdout().flush();
    }
}
