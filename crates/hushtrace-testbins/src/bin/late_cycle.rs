//! Test helper (`crates/hushtrace/tests/late.rs`; `record --on-late` tests may use it too): a
//! "real-time loop" configured only by the environment (`HUSHTRACE_ON_LATE`, ...).
//!
//! `late_cycle [late] [ms]`: calls `hushtrace::start_from_env()` (a failure is printed as
//! `start: err: <message>` and the program exits 0 untraced), then runs `late` cycles (default
//! 3) of a span `rt:cycle` that sleeps `ms` milliseconds (default 20), each followed by a
//! `rt:quick` span that returns at once, with a few `rt:tick` events before each; stops the
//! session and prints `alive`.
#![forbid(unsafe_code)]

fn main() {
    let mut args = std::env::args().skip(1);
    let late: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let session = match hushtrace::start_from_env() {
        Ok(s) => s,
        Err(e) => {
            println!("start: err: {e}");
            println!("alive");
            return;
        }
    };
    for i in 0..late {
        for k in 0..10u64 {
            hushtrace::event!("rt", "tick", i = i, k = k);
        }
        {
            let _g = hushtrace::span!("rt", "cycle", i = i);
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        let _q = hushtrace::span!("rt", "quick", i = i);
    }
    if let Some(s) = session {
        if let Err(e) = s.stop() {
            println!("stop: err: {e}");
        }
    }
    println!("alive");
}
