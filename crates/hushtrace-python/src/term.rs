//! The SIGTERM safety net.
//!
//! `hushtrace._process` handles SIGTERM (how `multiprocessing`'s `Pool.terminate()` ends its
//! workers) with a Python handler that writes the trace and then dies of the signal. CPython
//! runs a Python handler only when its main thread next checks for signals, so a main thread
//! blocked in a call the signal did not interrupt never runs it. That happens when the signal
//! went to another thread, or arrived just before the call blocked, as in a multiprocessing
//! semaphore's acquire. The process, which untraced would have died at once, then lives on, and
//! the pool's parent waits for it forever.
//!
//! So SIGTERM also goes through this module's C-level handler, installed in place of
//! CPython's. It calls CPython's (the Python handler is scheduled as before) and wakes a
//! watcher thread. The watcher gives the Python handler [`GRACE`] to start ([`handler_started`]).
//! If it has not started by then, the watcher restores the default action and sends SIGTERM
//! again: the process dies of it as it would untraced, its rings left for `hushtrace recover`.
//! A later `signal.signal(SIGTERM, ...)` puts CPython's handler back and the net is gone, as
//! the program asked.

use hushtrace_signal::{catch, die_by, disposition, SignalPipe};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the Python handler has to start before the watcher ends the process.
pub const GRACE: Duration = Duration::from_secs(2);

/// The self-pipe the handler wakes the watcher through (`hushtrace-signal`'s, shared with the
/// kernel recorder and the CLI).
static PIPE: SignalPipe = SignalPipe::new();
/// CPython's C-level SIGTERM handler (`sa_handler`), called first by ours; 0: none.
static CPYTHON_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// The Python handler started since the last SIGTERM.
static STARTED: AtomicBool = AtomicBool::new(false);

/// The C-level handler: CPython's, then a byte to the watcher. Async-signal-safe: atomic
/// loads, CPython's own handler (made for this) and [`SignalPipe::notify`]; `errno` is
/// restored.
extern "C" fn on_term(sig: c_int) {
    // SAFETY: reading this thread's errno location.
    let saved = unsafe { *libc::__errno_location() };
    let h = CPYTHON_HANDLER.load(Ordering::Acquire);
    if h != 0 {
        // SAFETY: `h` is the `sa_handler` CPython installed for SIGTERM (a plain handler: its
        // `sa_flags` had no SA_SIGINFO, checked in `install`), called as the kernel would.
        let f: extern "C" fn(c_int) =
            unsafe { std::mem::transmute::<usize, extern "C" fn(c_int)>(h) };
        f(sig);
    }
    PIPE.notify(sig);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// The Python handler (`hushtrace._process._on_sigterm`) started: the watcher leaves the
/// process to it.
pub fn handler_started() {
    STARTED.store(true, Ordering::Release);
}

/// Puts the net under the Python SIGTERM handler just installed (CPython's C handler in place),
/// and starts its watcher thread. Called again in the child of a `fork()`, where the watcher
/// did not survive: a new pipe and watcher, the handler kept. Does nothing when SIGTERM's
/// handler is not CPython's (default, ignored, or a `SA_SIGINFO` handler of another library).
pub fn install() -> std::io::Result<()> {
    let old = disposition(libc::SIGTERM)?;
    let ours = on_term as extern "C" fn(c_int) as usize;
    let current = old.sa_sigaction;
    if current != ours {
        if current == libc::SIG_DFL
            || current == libc::SIG_IGN
            || old.sa_flags & libc::SA_SIGINFO != 0
        {
            return Ok(());
        }
        CPYTHON_HANDLER.store(current, Ordering::Release);
    }
    STARTED.store(false, Ordering::Release);
    // The pipe of a previous install (the parent's, in a fork child) is closed by `open`: its
    // watcher is not in this process.
    let watch = PIPE.open()?;
    // Not `std::thread::spawn`: this runs in fork children too, where the standard library's
    // thread start can block forever on a lock a vanished parent thread held (the runtime's
    // fork protocol, ARCHITECTURE.md "Fork").
    hushtrace::spawn_fork_safe(Box::new(move || watch_term(watch)))?;
    if current != ours {
        // Our plain handler with CPython's mask and flags (not SA_SIGINFO, checked above).
        catch(libc::SIGTERM, on_term, old.sa_mask, old.sa_flags)?;
    }
    Ok(())
}

/// The watcher: after each SIGTERM, waits up to [`GRACE`] for the Python handler to start;
/// if it did not, the default action and SIGTERM again.
fn watch_term(watch: hushtrace_signal::Watch) {
    // Named for `ps -L` and debuggers, with the kernel call (no std thread API on this thread).
    // SAFETY: a NUL-terminated name of at most 16 bytes, read by the call only.
    unsafe {
        libc::prctl(
            libc::PR_SET_NAME,
            c"hushtrace-sigte".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    // This thread takes SIGTERM like any other (the final one included).
    // SAFETY: a zeroed set, then SIGTERM added, unblocked for this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    // `None`: closed, or replaced (not expected in this process).
    while watch.wait().is_some() {
        let deadline = Instant::now() + GRACE;
        while !STARTED.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if STARTED.swap(false, Ordering::AcqRel) {
            continue; // the Python handler runs; it ends the process itself
        }
        // SIGTERM's default action, and SIGTERM again, which this thread does not block: the
        // process ends as it would untraced.
        die_by(libc::SIGTERM);
    }
}
