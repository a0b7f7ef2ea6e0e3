//! Exercises `HUSHTRACE_NO_SYSCALL_POLICY`: a no-syscall thread emits events while something
//! would still need a system call. Run it with `HUSHTRACE_CLOCK=monotonic`, which disables the
//! cycle counter so every timestamp would need `clock_gettime`.
//!
//! `HUSHTRACE_CLOCK=monotonic HUSHTRACE_NO_SYSCALL_POLICY=log cargo run -p hushtrace-testbins --bin policy_probe -- <dir> [--no-filter]`
//!
//! Prints `{"written":W,"discarded":D,"sigsys":S}`. With `--no-filter` the seccomp filter is not
//! installed (the `abort` policy needs the kernel to deliver SIGABRT).
#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: policy_probe <dir> [--no-filter]");
        std::process::exit(2);
    };
    let filter = !args.iter().any(|a| a == "--no-filter");
    let session = match hushtrace::Session::builder().output_dir(dir).start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("policy_probe: {e}");
            std::process::exit(1);
        }
    };
    let sigsys = Arc::new(AtomicU64::new(u64::MAX));
    let out = sigsys.clone();
    let t = std::thread::spawn(move || {
        hushtrace::set_thread_name("probe");
        hushtrace::set_thread_no_syscall();
        if filter {
            hushtrace::verify::trap_syscalls_on_this_thread().expect("seccomp");
        }
        for i in 0..10u32 {
            hushtrace::event!("probe", "ev", i = i);
        }
        out.store(hushtrace::verify::trapped_syscalls(), Ordering::SeqCst);
        if filter {
            // The one way off a thread the seccomp filter allows.
            #[allow(unsafe_code)]
            // SAFETY: no value on this thread's stack relies on its destructor running.
            unsafe {
                hushtrace::verify::exit_thread()
            };
        }
    });
    hushtrace::verify::join_raw(t);
    let stats = session.stop().expect("stop");
    println!(
        "{{\"written\":{},\"discarded\":{},\"sigsys\":{}}}",
        stats.events_written,
        stats.events_discarded,
        sigsys.load(Ordering::SeqCst)
    );
}
