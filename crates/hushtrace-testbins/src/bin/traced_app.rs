//! A small program traced through `hushtrace::start_from_env()`, for `hushtrace record` tests
//! (`crates/hushtrace-cli/tests/runtime.rs`).
//!
//! `traced_app <threads> <jobs>`: each thread runs `<jobs>` `app:job` spans (field `job`)
//! containing an `app:step` span, an `app:tick` instant and an `app:depth` counter; then the
//! process forks a child that runs `<jobs>` `child:job` spans. Without `HUSHTRACE_OUTPUT` it runs
//! untraced.

fn work(jobs: u64, cat_child: bool) {
    for job in 0..jobs {
        if cat_child {
            let _g = hushtrace::span!("child", "job", job = job);
            continue;
        }
        let _g = hushtrace::span!("app", "job", job = job);
        {
            let _s = hushtrace::span!("app", "step", name = "inner");
        }
        hushtrace::event!("app", "tick", job = job);
        hushtrace::counter!("app", "depth", job);
    }
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (threads, jobs) = match args[..] {
        [t, j] => (t, j),
        _ => {
            eprintln!("usage: traced_app <threads> <jobs>");
            std::process::exit(2);
        }
    };
    let session = match hushtrace::start_from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("traced_app: {e}");
            std::process::exit(1);
        }
    };
    let handles: Vec<_> = (0..threads)
        .map(|_| std::thread::spawn(move || work(jobs, false)))
        .collect();
    for h in handles {
        h.join().expect("worker panicked");
    }
    // SAFETY: fork() has no memory-safety preconditions; the child only traces and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        work(jobs, true);
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if let Some(s) = session {
        if let Err(e) = s.stop() {
            eprintln!("traced_app: {e}");
            std::process::exit(1);
        }
    }
    std::process::exit(
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            0
        } else {
            1
        },
    );
}
