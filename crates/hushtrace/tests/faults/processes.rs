//! Exit and fork: `exit()` during another thread's `stop()`, and forks while threads start and
//! exit, never hang and leave readable traces.

use super::*;
use std::time::Instant;

/// 9.8: `exit()` while another thread is inside `stop()` still leaves a readable trace.
#[test]
fn exit_during_another_threads_stop_leaves_a_readable_trace() {
    for round in 0..20u64 {
        let dir = temp_dir(&format!("fault-exitstop-{round}"));
        let d2 = dir.clone();
        in_child(Duration::from_secs(30), move || {
            let s = hushtrace::Session::builder()
                .output_dir(&d2)
                .subbuf_size(4096)
                .start()
                .map_err(|e| e.to_string())?;
            emit(3000);
            let _stopper = std::thread::spawn(move || {
                let _ = s.stop();
            });
            // Not synchronisation: each round exits at another point of the stop (the race
            // under test).
            std::thread::sleep(Duration::from_micros(round * 150));
            // SAFETY: exit runs the atexit handlers (the tracer's flush) while `t` may be
            // inside stop().
            unsafe { libc::exit(0) }
        });
        babeltrace(&dir, true);
        let tdir = trace_dirs(&dir);
        assert_eq!(tdir.len(), 1, "round {round}: {tdir:?}");
        assert!(tdir[0].join("metadata").is_file(), "round {round}");
    }
}

/// 9.2: forks while other threads start and exit must not hang the children: not on a lock
/// another thread held at fork time (the consumer thread the child starts), not in exit-time
/// stop. Each child traces enough to hand packets over (which starts its consumer thread),
/// then `exit()`s (flushing its trace). The child starts no `std::thread` of its own: std's
/// thread start takes a lock (`stack_overflow::thread_info`) that a parent thread starting at
/// the moment of the fork leaves held forever in the child, which is exactly why the tracer
/// starts its thread with `pthread_create` directly.
/// `HUSHTRACE_STRESS_FORKS` sets the number of forks (default 300; `ci/stress.sh` runs
/// thousands); the longest child lifetime is printed.
#[test]
fn forks_under_thread_churn_never_hang() {
    let forks: u64 = std::env::var("HUSHTRACE_STRESS_FORKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    in_child(Duration::from_secs(60 + forks / 5), move || {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = temp_dir("fault-forkchurn");
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .subbuf_size(4096)
            .num_subbufs(4)
            .start()
            .map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let spawners: Vec<_> = (0..3)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::spawn(|| emit(20)).join().unwrap();
                    }
                })
            })
            .collect();
        let mut worst = Duration::ZERO;
        let mut hung = Vec::new();
        for _ in 0..forks {
            let t0 = Instant::now();
            // SAFETY: the child traces, starts one thread and exits; it never returns here.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                emit(600); // > 3 packets of 4 KiB: the child starts its consumer thread
                           // SAFETY: exit runs the tracer's flush.
                unsafe { libc::exit(0) };
            }
            let deadline = Duration::from_secs(20);
            loop {
                let mut st = 0;
                // SAFETY: polling our own child.
                let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
                if r == pid {
                    break;
                }
                if t0.elapsed() > deadline {
                    if hung.is_empty() {
                        let stacks = common::thread_stacks(pid);
                        eprintln!("child {pid} hung:\n{stacks}");
                    }
                    hung.push(pid);
                    // SAFETY: our own child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            worst = worst.max(t0.elapsed());
        }
        stop.store(true, Ordering::Relaxed);
        for t in spawners {
            t.join().unwrap();
        }
        let parent = s.stop().map_err(|e| e.to_string())?;
        eprintln!("{forks} forks under thread churn: longest child lifetime {worst:?}");
        check!(hung.is_empty(), "children hung: {hung:?}");
        // Every child flushed a complete account of its 600 events at exit.
        let mut children = 0;
        for e in std::fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_suffix(".stats.json") else {
                continue;
            };
            if parent.trace_dir.ends_with(pid) {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).map_err(|e| e.to_string())?;
            let st = hushtrace_ctf::stats::ProcessStats::parse(&text)
                .ok_or_else(|| format!("bad stats {name}: {text}"))?;
            check!(st.written + st.discarded == 600, "child {pid}: {text}");
            children += 1;
        }
        check!(
            children == forks,
            "{children} children wrote stats, {forks} forked"
        );
        Ok(())
    });
}
