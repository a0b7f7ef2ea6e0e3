//! Test helper (`crates/hushtrace/tests/core_signals_registration.rs`): signal handlers that
//! trace while their thread is registering with the tracer (allocating its buffer under the
//! tracer's locks).
//!
//! `test_signal_register <dir> <rounds>`: starts a session in `<dir>`; for each round, spawns a
//! thread whose first tracepoint (which registers it) runs while another thread keeps sending
//! it SIGUSR1, whose handler emits `event!("sigreg", "handler", n = <u32>)`. Prints one line of
//! JSON: `{"emitted":E,"handled":H,"written":W,"discarded":D}` where E counts every tracepoint
//! call (thread events plus handler invocations).

use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

static HANDLED: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_sigusr1(_sig: libc::c_int) {
    let n = HANDLED.fetch_add(1, Ordering::Relaxed);
    hushtrace::event!("sigreg", "handler", n = n);
}

fn install_handler() {
    // SAFETY: a zeroed sigaction is a valid starting value; we set a handler of the right
    // signature, an empty mask and SA_RESTART.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigusr1 as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        if libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) != 0 {
            eprintln!("sigaction failed");
            std::process::exit(2);
        }
    }
}

const EVENTS_PER_THREAD: u64 = 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: test_signal_register <dir> <rounds>");
        std::process::exit(2);
    }
    let rounds: u64 = args[2].parse().expect("rounds");
    install_handler();
    let session = hushtrace::Session::builder()
        .output_dir(&args[1])
        .subbuf_size(4096)
        .num_subbufs(4)
        .start()
        .unwrap_or_else(|e| {
            eprintln!("test_signal_register: {e}");
            std::process::exit(1)
        });
    for _ in 0..rounds {
        let started = Arc::new(AtomicBool::new(false));
        let go = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(AtomicBool::new(false));
        let (st, g, d, s) = (started.clone(), go.clone(), done.clone(), stopped.clone());
        let t = std::thread::spawn(move || {
            st.store(true, Ordering::Release);
            while !g.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // Registration happens in the first tracepoint, with signals arriving.
            for seq in 0..EVENTS_PER_THREAD {
                hushtrace::event!("sigreg", "thread", seq = seq);
            }
            d.store(true, Ordering::Release);
            while !s.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        let pthread = t.as_pthread_t();
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        go.store(true, Ordering::Release);
        while !done.load(Ordering::Acquire) {
            let before = HANDLED.load(Ordering::Relaxed);
            // SAFETY: the thread stays alive until `stopped` is set below.
            unsafe { libc::pthread_kill(pthread, libc::SIGUSR1) };
            let t0 = Instant::now();
            while HANDLED.load(Ordering::Relaxed) == before
                && t0.elapsed() < Duration::from_micros(50)
                && !done.load(Ordering::Acquire)
            {
                std::hint::spin_loop();
            }
        }
        stopped.store(true, Ordering::Release);
        t.join().expect("round thread");
    }
    let handled = u64::from(HANDLED.load(Ordering::Relaxed));
    match session.stop() {
        Ok(st) => println!(
            "{{\"emitted\":{},\"handled\":{handled},\"written\":{},\"discarded\":{}}}",
            rounds * EVENTS_PER_THREAD + handled,
            st.events_written,
            st.events_discarded
        ),
        Err(e) => {
            eprintln!("test_signal_register: {e}");
            std::process::exit(1);
        }
    }
}
