//! The signal self-pipe hushtrace's crates share.
//!
//! A signal handler may do almost nothing: no allocation, no lock, no file removal, no thread
//! start. So each user of signals in hushtrace (the kernel recorder's forwarder in
//! `hushtrace-kernel`, the CLI's removal of a half-written output, the Python extension's
//! SIGTERM safety net) installs a C-level handler that only writes the signal's number to a
//! pipe ([`SignalPipe::notify`]), and does the work on a watcher thread that reads it
//! ([`Watch::wait`]).
//!
//! * [`SignalPipe`]: the pipe, kept in a `static` so the handler (a plain `extern "C" fn`) can
//!   reach it. [`SignalPipe::open`] makes it, again in the child of a `fork()` (the parent's
//!   watcher thread does not exist there); [`SignalPipe::shut`] ends the watcher's wait.
//! * [`catch`], [`disposition`], [`restore`]: installing a plain handler and putting the
//!   previous action back; [`die_by`]: ending the process by a signal as if it had not been
//!   caught.
//!
//! Only libc calls (`pipe2` through `std::io::pipe`, `fcntl`, `read`, `write`, `close`, `sigaction`,
//! `pthread_sigmask`, `raise`); no thread is started here, so a user that must start its
//! watcher in a fork child can start it the fork-safe way.
//!
//! ```
//! use hushtrace_signal::{catch, empty_set, restore, SignalPipe};
//! static PIPE: SignalPipe = SignalPipe::new();
//! extern "C" fn on_signal(sig: std::ffi::c_int) {
//!     PIPE.notify(sig);
//! }
//! let watch = PIPE.open().unwrap();
//! let prev = catch(libc::SIGUSR1, on_signal, empty_set(), libc::SA_RESTART).unwrap();
//! // SAFETY: sends a signal to this process; no memory is involved.
//! unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
//! assert_eq!(watch.wait(), Some(libc::SIGUSR1));
//! restore(libc::SIGUSR1, &prev);
//! PIPE.shut();
//! assert_eq!(watch.wait(), None);
//! watch.close();
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::c_int;
use std::io;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicI32, Ordering};

/// A pipe a signal handler writes signal numbers to and a watcher thread reads them from.
/// Keep it in a `static`: the handler has no other way to reach it.
#[derive(Debug)]
pub struct SignalPipe {
    /// The write end, non-blocking, the handler's (-1: none).
    wake: AtomicI32,
    /// The read end, the watcher's (-1: none).
    watch: AtomicI32,
}

impl Default for SignalPipe {
    fn default() -> SignalPipe {
        SignalPipe::new()
    }
}

impl SignalPipe {
    /// A pipe not yet open: [`notify`](SignalPipe::notify) does nothing until
    /// [`open`](SignalPipe::open).
    pub const fn new() -> SignalPipe {
        SignalPipe {
            wake: AtomicI32::new(-1),
            watch: AtomicI32::new(-1),
        }
    }

    /// Writes the number of signal `sig` to the pipe, if it is open. Async-signal-safe: an
    /// atomic load and `write(2)`, `errno` restored. A full pipe (wake-ups already pending)
    /// drops the byte instead of blocking the handler.
    pub fn notify(&self, sig: c_int) {
        let fd = self.wake.load(Ordering::Acquire);
        if fd < 0 {
            return;
        }
        // SAFETY: this thread's errno location, valid for the thread's life.
        let errno = unsafe { errno_location() };
        // SAFETY: `errno` is valid (above).
        let saved = unsafe { *errno };
        let b = sig as u8;
        // SAFETY: one byte from a live local to the pipe's non-blocking write end; a closed or
        // full pipe fails harmlessly.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
        // SAFETY: as above.
        unsafe { *errno = saved };
    }

    /// Makes a new pipe (both ends close-on-exec: a program this process runs inherits
    /// neither) and returns its read end for the watcher. The previous pipe's ends, if any,
    /// are closed: in the child of a `fork()`, they are copies of the parent's, whose watcher
    /// is not in this process.
    pub fn open(&'static self) -> io::Result<Watch> {
        // Close-on-exec, and no lock taken (`pipe2(2)` on Linux): usable in a fork child.
        let (rd, wr) = io::pipe()?;
        let (rd, wr) = (rd.into_raw_fd(), wr.into_raw_fd());
        // SAFETY: `wr` is the write end just made, owned by this pipe from now on.
        unsafe { libc::fcntl(wr, libc::F_SETFL, libc::O_NONBLOCK) };
        let old_wake = self.wake.swap(wr, Ordering::AcqRel);
        let old_watch = self.watch.swap(rd, Ordering::AcqRel);
        for fd in [old_wake, old_watch] {
            if fd >= 0 {
                // SAFETY: a descriptor this pipe made and no thread of this process uses now.
                unsafe { libc::close(fd) };
            }
        }
        Ok(Watch { pipe: self, fd: rd })
    }

    /// Closes the write end: the handler writes nothing more, and the watcher's
    /// [`Watch::wait`] returns `None` once it has read the numbers already written.
    pub fn shut(&self) {
        let fd = self.wake.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            // SAFETY: the write end `open` made, taken out of the pipe: closed once.
            unsafe { libc::close(fd) };
        }
    }
}

/// The read end of a [`SignalPipe`], the watcher thread's.
#[derive(Debug, Clone, Copy)]
pub struct Watch {
    pipe: &'static SignalPipe,
    fd: c_int,
}

impl Watch {
    /// Blocks until a signal number is written and returns it (an interrupted read is
    /// retried); `None` once the pipe is shut, or replaced by a later
    /// [`open`](SignalPipe::open).
    pub fn wait(&self) -> Option<c_int> {
        loop {
            let mut b = 0u8;
            // SAFETY: reads one byte into a live local.
            let n = unsafe { libc::read(self.fd, (&mut b as *mut u8).cast(), 1) };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if n != 1 || self.pipe.watch.load(Ordering::Acquire) != self.fd {
                return None;
            }
            return Some(c_int::from(b));
        }
    }

    /// Closes the read end if it is still the pipe's (the watcher's last act once
    /// [`wait`](Watch::wait) returned `None`).
    pub fn close(self) {
        if self
            .pipe
            .watch
            .compare_exchange(self.fd, -1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: the read end, taken out of the pipe: closed once.
            unsafe { libc::close(self.fd) };
        }
    }
}

/// This thread's `errno`.
///
/// # Safety
///
/// The pointer is valid on this thread only, for as long as the thread lives.
#[cfg(any(target_os = "linux", target_os = "android"))]
unsafe fn errno_location() -> *mut c_int {
    // SAFETY: no precondition; the caller keeps the pointer on this thread.
    unsafe { libc::__errno_location() }
}

/// This thread's `errno`.
///
/// # Safety
///
/// The pointer is valid on this thread only, for as long as the thread lives.
#[cfg(target_vendor = "apple")]
unsafe fn errno_location() -> *mut c_int {
    // SAFETY: no precondition; the caller keeps the pointer on this thread.
    unsafe { libc::__error() }
}

/// An empty signal set (for [`catch`]'s `mask`).
pub fn empty_set() -> libc::sigset_t {
    // SAFETY: a zeroed `sigset_t` is valid storage for sigemptyset, which initializes it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    }
}

/// The action for signal `sig` now.
pub fn disposition(sig: c_int) -> io::Result<libc::sigaction> {
    // SAFETY: a zeroed `sigaction` is a valid out-parameter.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: reads the disposition of `sig` into `old`.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Installs `handler` for signal `sig`, a plain handler (`SA_SIGINFO` is cleared from
/// `flags`) run with the signals of `mask` blocked; returns the previous action, for
/// [`restore`]. The handler must be async-signal-safe, as [`SignalPipe::notify`] is.
pub fn catch(
    sig: c_int,
    handler: extern "C" fn(c_int),
    mask: libc::sigset_t,
    flags: c_int,
) -> io::Result<libc::sigaction> {
    // SAFETY: a zeroed `sigaction` then filled: a plain handler, `mask`, `flags`.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as usize;
    act.sa_mask = mask;
    act.sa_flags = flags & !libc::SA_SIGINFO;
    // SAFETY: a zeroed `sigaction` is a valid out-parameter.
    let mut prev: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: installs `act` (a plain `extern "C" fn(c_int)` handler) for `sig`.
    if unsafe { libc::sigaction(sig, &act, &mut prev) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(prev)
}

/// Puts back action `prev` for signal `sig` (one [`catch`] or [`disposition`] returned).
pub fn restore(sig: c_int, prev: &libc::sigaction) {
    // SAFETY: `prev` is an action the kernel returned for `sig`.
    unsafe { libc::sigaction(sig, prev, std::ptr::null_mut()) };
}

/// Ends the process by signal `sig` with its default action, as if it had not been caught (a
/// parent sees the signal), or with status 128 + `sig` if that does not end it.
pub fn die_by(sig: c_int) -> ! {
    // SAFETY: a zeroed `sigaction` is SIG_DFL with no flags and an empty mask.
    let dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    restore(sig, &dfl);
    let mut one = empty_set();
    // SAFETY: adds a signal number to an initialized set, then unblocks it in this thread only
    // and sends it to this thread, whose default action for it ends the process.
    unsafe {
        libc::sigaddset(&mut one, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_reaches_the_watcher_and_errno_is_kept() {
        static PIPE: SignalPipe = SignalPipe::new();
        extern "C" fn on_signal(sig: c_int) {
            PIPE.notify(sig);
        }
        let watch = PIPE.open().unwrap();
        let prev = catch(libc::SIGUSR2, on_signal, empty_set(), libc::SA_RESTART).unwrap();
        assert_eq!(
            disposition(libc::SIGUSR2).unwrap().sa_sigaction,
            on_signal as extern "C" fn(c_int) as usize
        );
        // SAFETY: this thread's errno location, used on this thread.
        unsafe { *errno_location() = libc::EAGAIN };
        // SAFETY: raise(3) sends SIGUSR2 to this thread, whose handler runs before it returns.
        unsafe { libc::raise(libc::SIGUSR2) };
        // SAFETY: as above.
        assert_eq!(unsafe { *errno_location() }, libc::EAGAIN, "errno restored");
        assert_eq!(watch.wait(), Some(libc::SIGUSR2));
        restore(libc::SIGUSR2, &prev);
        assert_eq!(
            disposition(libc::SIGUSR2).unwrap().sa_sigaction,
            prev.sa_sigaction
        );
        PIPE.shut();
        assert_eq!(watch.wait(), None);
        watch.close();
    }

    #[test]
    fn a_full_pipe_drops_wake_ups_instead_of_blocking() {
        static PIPE: SignalPipe = SignalPipe::new();
        let watch = PIPE.open().unwrap();
        // Far more than a pipe holds (64 KiB on Linux): notify must never block.
        for _ in 0..200_000 {
            PIPE.notify(libc::SIGHUP);
        }
        assert_eq!(watch.wait(), Some(libc::SIGHUP));
        PIPE.shut();
        watch.close();
    }

    #[test]
    fn opening_again_replaces_the_pipe_and_ends_the_old_watch() {
        static PIPE: SignalPipe = SignalPipe::new();
        let old = PIPE.open().unwrap();
        PIPE.notify(libc::SIGTERM);
        // As in a fork child: a new pipe, the old one's ends closed.
        let new = PIPE.open().unwrap();
        old.close(); // not the pipe's any more: closes nothing
        PIPE.notify(libc::SIGINT);
        assert_eq!(
            new.wait(),
            Some(libc::SIGINT),
            "the old pipe's pending byte is gone"
        );
        PIPE.shut();
        assert_eq!(new.wait(), None);
        new.close();
    }
}
