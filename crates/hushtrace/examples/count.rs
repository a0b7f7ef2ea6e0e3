//! Emits `bench:tick` events from several threads and prints what was written.
//!
//! `cargo run --release --example count -- <dir> <threads> <events_per_thread>`
//!
//! Prints one line of JSON: `{"written":W,"discarded":D}`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: count <dir> <threads> <events_per_thread>");
        std::process::exit(2);
    }
    let dir = &args[1];
    let (threads, n): (u32, u64) = match (args[2].parse(), args[3].parse()) {
        (Ok(t), Ok(n)) => (t, n),
        _ => {
            eprintln!("count: <threads> and <events_per_thread> must be non-negative integers");
            std::process::exit(2);
        }
    };
    let session = match hushtrace::Session::builder().output_dir(dir).start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("count: {e}");
            std::process::exit(1);
        }
    };
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            std::thread::spawn(move || {
                hushtrace::init_thread();
                for seq in 0..n {
                    hushtrace::event!("bench", "tick", thread = thread, seq = seq);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("worker thread panicked");
    }
    match session.stop() {
        Ok(stats) => println!(
            "{{\"written\":{},\"discarded\":{}}}",
            stats.events_written, stats.events_discarded
        ),
        Err(e) => {
            eprintln!("count: {e}");
            std::process::exit(1);
        }
    }
}
