//! A chain of forked processes, each tracing from three threads while it forks.
//!
//! `cargo run --release --example fork_tree -- <dir> <depth> <events>`
//!
//! Each process starts 2 threads; each of its 3 threads (main and the 2) emits
//! `event!("fork", "ev", depth = <u32>, seq = <u64 0..events>)`. While its threads are still
//! running, the main thread forks one child, which does the same, down to `<depth>` levels
//! (depth 3 = a chain of 4 processes). Every parent waits for its child. Each process stops its
//! (inherited) session before it exits, which writes `<dir>/<pid>.stats.json`; the top process
//! sums them and prints `{"processes":P,"written":W,"discarded":D}`.

use std::path::Path;
use std::sync::{Arc, Barrier};

fn emit(depth: u32, events: u64) {
    for seq in 0..events {
        hushtrace::event!("fork", "ev", depth = depth, seq = seq);
    }
}

/// Runs one level; returns when this process's work (and its child's) is done.
fn level(depth: u32, max_depth: u32, events: u64) {
    let started = Arc::new(Barrier::new(3));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let started = started.clone();
            std::thread::spawn(move || {
                hushtrace::init_thread();
                started.wait();
                emit(depth, events);
            })
        })
        .collect();
    started.wait(); // the two threads are running
    let child = if depth < max_depth {
        // SAFETY: fork in a multi-threaded process; the child only uses async-signal-safe
        // operations until it re-enters Rust code that hushtrace's fork handlers made safe
        // (tracer locks reset), plus std thread spawning, which glibc supports after fork.
        match unsafe { libc::fork() } {
            0 => {
                level(depth + 1, max_depth, events);
                return finish_child();
            }
            -1 => {
                eprintln!(
                    "fork_tree: fork failed: {}",
                    std::io::Error::last_os_error()
                );
                None
            }
            pid => Some(pid),
        }
    } else {
        None
    };
    emit(depth, events);
    for t in threads {
        t.join().expect("worker panicked");
    }
    if let Some(pid) = child {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            eprintln!("fork_tree: child {pid} failed (status {status})");
            std::process::exit(1);
        }
    }
}

/// A child process ends here: `exit()` runs hushtrace's exit handler, which stops the inherited
/// session and flushes this process's trace and statistics.
fn finish_child() {
    std::process::exit(0);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: fork_tree <dir> <depth> <events>");
        std::process::exit(2);
    }
    let (depth, events): (u32, u64) = match (args[2].parse(), args[3].parse()) {
        (Ok(d), Ok(e)) => (d, e),
        _ => {
            eprintln!("fork_tree: <depth> and <events> must be non-negative integers");
            std::process::exit(2);
        }
    };
    let dir = Path::new(&args[1]);
    let session = match hushtrace::Session::builder().output_dir(dir).start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fork_tree: {e}");
            std::process::exit(1);
        }
    };
    level(0, depth, events);
    if let Err(e) = session.stop() {
        eprintln!("fork_tree: {e}");
        std::process::exit(1);
    }
    let (mut p, mut w, mut d) = (0u64, 0u64, 0u64);
    for entry in std::fs::read_dir(dir).expect("read trace dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".stats.json") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let field = |k: &str| -> u64 {
            let key = format!("\"{k}\":");
            text.split(&key)
                .nth(1)
                .and_then(|r| r.split([',', '}']).next())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        p += 1;
        w += field("written");
        d += field("discarded");
    }
    println!("{{\"processes\":{p},\"written\":{w},\"discarded\":{d}}}");
}
