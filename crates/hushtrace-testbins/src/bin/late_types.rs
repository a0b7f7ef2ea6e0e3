//! A program whose callsites become known one after another, for the relay tests of
//! `crates/hushtrace-cli/tests/relay_copy.rs`: each phase hits callsites never hit before and
//! then pauses, so a relay sink sends one metadata update per phase.
//!
//! `late_types <pause ms>`: phase 1 `late:first` (u64), phase 2 `late:second` spans (a string
//! field) and a `late:level` counter, then a forked child with its own new callsite
//! `late:child` (f64) and `late:first`, then phase 3 in the parent `late:third` (bool). Traced
//! through `hushtrace::start_from_env()`.

fn pause(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let session = match hushtrace::start_from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("late_types: {e}");
            std::process::exit(1);
        }
    };
    for i in 0..100u64 {
        hushtrace::event!("late", "first", i = i);
    }
    pause(ms);
    for i in 0..50u64 {
        let _s = hushtrace::span!("late", "second", what = "phase two");
        hushtrace::counter!("late", "level", i);
    }
    pause(ms);
    // SAFETY: fork() has no memory-safety preconditions; the child only traces and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        for i in 0..30u64 {
            hushtrace::event!("late", "first", i = i);
            pause(1);
            hushtrace::event!("late", "child", x = i as f64 * 0.5);
        }
        pause(ms);
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    for i in 0..20u64 {
        hushtrace::event!("late", "third", odd = i % 2 == 1);
    }
    pause(ms);
    if let Some(s) = session {
        if let Err(e) = s.stop() {
            eprintln!("late_types: {e}");
            std::process::exit(1);
        }
    }
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    std::process::exit(if ok { 0 } else { 1 });
}
