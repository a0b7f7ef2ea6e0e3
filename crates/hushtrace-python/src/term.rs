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

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the Python handler has to start before the watcher ends the process.
pub const GRACE: Duration = Duration::from_secs(2);

/// The pipe's write end the handler wakes the watcher through (-1: none).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// The pipe's read end, the watcher's (-1: none).
static WATCH_FD: AtomicI32 = AtomicI32::new(-1);
/// CPython's C-level SIGTERM handler (`sa_handler`), called first by ours; 0: none.
static CPYTHON_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// The Python handler started since the last SIGTERM.
static STARTED: AtomicBool = AtomicBool::new(false);

/// The C-level handler: CPython's, then a byte to the watcher. Async-signal-safe: atomic
/// loads, CPython's own handler (made for this) and `write`; `errno` is restored.
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
    let fd = WAKE_FD.load(Ordering::Acquire);
    if fd >= 0 {
        let b = 1u8;
        // SAFETY: one byte from a live local to the pipe's non-blocking write end; a full pipe
        // (a wake-up already pending) fails harmlessly.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
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
    // SAFETY: a zeroed `sigaction` is a valid out-parameter.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: reads SIGTERM's disposition into `old`.
    if unsafe { libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
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
    let mut fds = [-1; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fds[1]` is the write end just made.
    unsafe { libc::fcntl(fds[1], libc::F_SETFL, libc::O_NONBLOCK) };
    STARTED.store(false, Ordering::Release);
    // The pipe of a previous install (the parent's, in a fork child) is closed: its watcher is
    // not in this process.
    let old_wake = WAKE_FD.swap(fds[1], Ordering::AcqRel);
    let old_watch = WATCH_FD.swap(fds[0], Ordering::AcqRel);
    for fd in [old_wake, old_watch] {
        if fd >= 0 {
            // SAFETY: a descriptor this module made and no thread of this process uses now.
            unsafe { libc::close(fd) };
        }
    }
    let watch_fd = fds[0];
    // Not `std::thread::spawn`: this runs in fork children too, where the standard library's
    // thread start can block forever on a lock a vanished parent thread held (the runtime's
    // fork protocol, ARCHITECTURE.md "Fork").
    hushtrace::spawn_fork_safe(Box::new(move || watch(watch_fd)))?;
    if current != ours {
        // SAFETY: a zeroed `sigaction` then filled: our plain handler with CPython's mask and
        // flags (not SA_SIGINFO, checked above).
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = ours;
        act.sa_mask = old.sa_mask;
        act.sa_flags = old.sa_flags;
        // SAFETY: installs `act` for SIGTERM.
        if unsafe { libc::sigaction(libc::SIGTERM, &act, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The watcher: after each SIGTERM, waits up to [`GRACE`] for the Python handler to start;
/// if it did not, the default action and SIGTERM again.
fn watch(fd: c_int) {
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
    loop {
        let mut b = 0u8;
        // SAFETY: reads one byte into a live local from this module's pipe.
        let n = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 || WATCH_FD.load(Ordering::Acquire) != fd {
            return; // closed, or replaced (not expected in this process)
        }
        let deadline = Instant::now() + GRACE;
        while !STARTED.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if STARTED.swap(false, Ordering::AcqRel) {
            continue; // the Python handler runs; it ends the process itself
        }
        // SAFETY: a zeroed `sigaction` is SIG_DFL with no flags; then SIGTERM to this process,
        // which this thread does not block: the process ends as it would untraced.
        unsafe {
            let dfl: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGTERM, &dfl, std::ptr::null_mut());
            libc::kill(libc::getpid(), libc::SIGTERM);
        }
    }
}
