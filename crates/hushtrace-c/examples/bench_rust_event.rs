//! The Rust side of `crates/hushtrace-c/bench/run.sh`: the same event as the C benchmark (two
//! 32-bit ints) with `hushtrace::event!`, `n` times per round, written to disk. Prints
//! `rust <min ns> <median ns> written <w> discarded <d>`.
//!
//! Usage: `bench_rust_event <dir> <n> <rounds>`

use hushtrace_rt as hushtrace;
use std::time::{Duration, Instant};

fn main() -> Result<(), hushtrace::Error> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, n, rounds] = &args[..] else {
        eprintln!("usage: bench_rust_event <dir> <n> <rounds>");
        std::process::exit(2);
    };
    let n: u64 = n.parse().expect("n");
    let rounds: usize = rounds.parse().expect("rounds");
    let session = hushtrace::Session::builder().output_dir(dir).start()?;
    hushtrace::init_thread();
    let mut per = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t0 = Instant::now();
        for i in 0..n {
            hushtrace::event!("htbench", "ints", a = i as i32, b = (2 * i) as i32);
        }
        per.push(t0.elapsed().as_nanos() as f64 / n as f64);
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = session.stop()?;
    per.sort_by(f64::total_cmp);
    println!(
        "rust {:.2} {:.2} written {} discarded {}",
        per[0],
        per[rounds / 2],
        stats.events_written,
        stats.events_discarded
    );
    Ok(())
}
