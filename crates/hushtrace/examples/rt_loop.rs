//! A real-time control loop traced in no-syscall mode, with the kernel as the witness.
//!
//! `cargo run --release --example rt_loop -- <dir> <iterations>`
//!
//! A thread switches to SCHED_FIFO where the process may, enters no-syscall mode, installs a
//! seccomp filter that traps every system call, then runs `<iterations>` iterations, each a
//! `span!("rt", "cycle", i = ...)` around an `event!("rt", "sample", value = ...)`. The main
//! thread then stops the session and prints one line of JSON:
//! `{"written":W,"discarded":D,"sigsys":S}` — S is the number of system calls the thread
//! attempted while filtered, which must be 0.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn try_sched_fifo() -> bool {
    // SAFETY: pthread_setschedparam on the calling thread with a valid priority; failure (EPERM
    // without CAP_SYS_NICE / RLIMIT_RTPRIO) is reported and ignored.
    unsafe {
        let param = libc::sched_param { sched_priority: 10 };
        libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) == 0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: rt_loop <dir> <iterations>");
        std::process::exit(2);
    }
    let iterations: u64 = match args[2].parse() {
        Ok(n) => n,
        Err(_) => {
            eprintln!("rt_loop: <iterations> must be a non-negative integer");
            std::process::exit(2);
        }
    };
    let session = match hushtrace::Session::builder().output_dir(&args[1]).start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rt_loop: {e}");
            std::process::exit(1);
        }
    };
    let sigsys = Arc::new(AtomicU64::new(u64::MAX));
    let out = sigsys.clone();
    let rt = std::thread::spawn(move || {
        hushtrace::set_thread_name("rt-loop");
        let fifo = try_sched_fifo();
        hushtrace::set_thread_no_syscall();
        if let Err(e) = hushtrace::verify::trap_syscalls_on_this_thread() {
            eprintln!("rt_loop: cannot install the seccomp filter: {e}");
            // SAFETY: no value on this thread's stack relies on its destructor running.
            unsafe { hushtrace::verify::exit_thread() };
        }
        // From here on, any system call made by this thread is trapped and counted.
        let mut state = 0.0f64;
        for i in 0..iterations {
            let _cycle = hushtrace::span!("rt", "cycle", i = i);
            state = 0.9 * state + (i % 100) as f64 * 0.1;
            hushtrace::event!("rt", "sample", value = state);
        }
        hushtrace::clear_thread_no_syscall();
        out.store(hushtrace::verify::trapped_syscalls(), Ordering::SeqCst);
        let _ = fifo;
        // SAFETY: no value on this thread's stack relies on its destructor running.
        unsafe { hushtrace::verify::exit_thread() };
    });
    hushtrace::verify::join_raw(rt);
    let s = sigsys.load(Ordering::SeqCst);
    match session.stop() {
        Ok(stats) => println!(
            "{{\"written\":{},\"discarded\":{},\"sigsys\":{}}}",
            stats.events_written, stats.events_discarded, s
        ),
        Err(e) => {
            eprintln!("rt_loop: {e}");
            std::process::exit(1);
        }
    }
}
