//! A control application that runs until it is stopped, traced from the environment: the
//! program of the README's flight recorder section.
//!
//! ```sh
//! cargo build --example control_app
//! HUSHTRACE_OUTPUT=/var/tmp/fr HUSHTRACE_MODE=overwrite ./target/debug/examples/control_app &
//! hushtrace ctl $! snapshot        # ... then Ctrl-C or `kill $!` to end it
//! ```
//!
//! `control_app [seconds]` (default: until SIGINT or SIGTERM). A `control` thread in
//! no-syscall mode runs a 1 kHz loop of `span!("ctl", "cycle", n)` with an
//! `event!("ctl", "sample", value)` and a `counter!("ctl", "error", e)`; a cycle over its 1 ms
//! deadline takes a flight-recorder snapshot (`hushtrace::snapshot()`, overwrite mode only; at
//! most one a second). A
//! `io` thread traces `span!("io", "poll")` every 10 ms. The session comes from
//! `hushtrace::start_from_env()` (`HUSHTRACE_OUTPUT`, `HUSHTRACE_MODE`, ...); without it the
//! program runs untraced. On SIGINT/SIGTERM (or after `seconds`) it stops the session and
//! prints `{"cycles":C,"written":W,"discarded":D,"snapshots":S}`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::Relaxed);
}

fn main() {
    let seconds: Option<u64> = match std::env::args().nth(1) {
        None => None,
        Some(a) => match a.parse() {
            Ok(s) => Some(s),
            Err(_) => {
                eprintln!("usage: control_app [seconds]  (default: until SIGINT or SIGTERM)");
                std::process::exit(2);
            }
        },
    };
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
    let session = match hushtrace::start_from_env() {
        Ok(Some(s)) => Some(s),
        Ok(None) => {
            eprintln!("control_app: HUSHTRACE_OUTPUT is not set: running untraced");
            None
        }
        Err(e) => {
            eprintln!("control_app: {e}");
            std::process::exit(1);
        }
    };
    eprintln!(
        "control_app: pid {} running{}; stop it with Ctrl-C or `kill {}`",
        std::process::id(),
        seconds.map_or(String::new(), |s| format!(" for {s} s")),
        std::process::id()
    );

    let cycles = Arc::new(AtomicU64::new(0));
    let snapshots = Arc::new(AtomicU64::new(0));
    let control = {
        let (cycles, snapshots) = (cycles.clone(), snapshots.clone());
        std::thread::spawn(move || control_loop(&cycles, &snapshots))
    };
    let io = std::thread::spawn(|| {
        hushtrace::set_thread_name("io");
        let mut polls = 0u64;
        while !STOP.load(Ordering::Relaxed) {
            let _p = hushtrace::span!("io", "poll", polls = polls);
            polls += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let start = Instant::now();
    while !STOP.load(Ordering::Relaxed) {
        if seconds.is_some_and(|s| start.elapsed() >= Duration::from_secs(s)) {
            STOP.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    control.join().expect("control thread");
    io.join().expect("io thread");
    let (written, discarded) = match session.map(|s| s.stop()) {
        Some(Ok(st)) => (st.events_written, st.events_discarded),
        Some(Err(e)) => {
            eprintln!("control_app: {e}");
            std::process::exit(1);
        }
        None => (0, 0),
    };
    println!(
        "{{\"cycles\":{},\"written\":{written},\"discarded\":{discarded},\"snapshots\":{}}}",
        cycles.load(Ordering::Relaxed),
        snapshots.load(Ordering::Relaxed)
    );
}

/// The real-time loop: no system call from tracing once in no-syscall mode (sleeping between
/// cycles is the application's own).
fn control_loop(cycles: &AtomicU64, snapshots: &AtomicU64) {
    hushtrace::set_thread_name("control");
    let _rt = hushtrace::NoSyscallGuard::new();
    let (mut position, target) = (0.0f64, 1.0f64);
    let period = Duration::from_millis(1);
    let mut next = Instant::now() + period;
    let mut n = 0u64;
    let mut last_snapshot = None;
    while !STOP.load(Ordering::Relaxed) {
        let began = Instant::now();
        {
            let _c = hushtrace::span!("ctl", "cycle", n = n);
            let error = target - position;
            position += 0.01 * error + (n % 7) as f64 * 1e-4;
            hushtrace::event!("ctl", "sample", value = position);
            hushtrace::counter!("ctl", "error", error);
        }
        // A missed deadline: keep what led to it (at most one snapshot a second).
        let late = began.elapsed() > period;
        if late && last_snapshot.is_none_or(|t: Instant| t.elapsed() > Duration::from_secs(1)) {
            last_snapshot = Some(began);
            if hushtrace::snapshot().is_ok() {
                snapshots.fetch_add(1, Ordering::Relaxed);
            }
        }
        n += 1;
        cycles.store(n, Ordering::Relaxed);
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next += period;
    }
}
