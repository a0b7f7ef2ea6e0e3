//! Keeping `record` alive long enough to write the kernel trace and remove its instances when
//! it is interrupted: SIGINT (a terminal's Ctrl-C, which the program receives too), SIGTERM
//! and SIGHUP are caught while the program runs; SIGTERM and SIGHUP are passed on to the
//! recorder's children, so the program ends and `record` finishes normally. (SIGKILL cannot
//! be caught: then the guard process removes the instances, see [`crate::capture`].)

use std::io::Read;
use std::os::unix::io::IntoRawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;

/// The writing end of the self-pipe the handler writes the signal number to.
static PIPE_W: AtomicI32 = AtomicI32::new(-1);
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_W.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; `b` is a valid one-byte buffer.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// Catches the signals until dropped (the previous handlers are restored then).
#[derive(Debug)]
pub struct Forwarder {
    thread: Option<JoinHandle<Vec<i32>>>,
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl Forwarder {
    /// Installs the handlers. Install them before [`crate::Capture::start`]: the thread that
    /// waits for signals then exists before the system-call instance starts following this
    /// process's new tasks, and is not traced. The guard process is never signalled.
    pub fn install() -> std::io::Result<Forwarder> {
        // Both ends close-on-exec: the traced program inherits neither.
        let (mut rd, wr) = std::io::pipe()?;
        PIPE_W.store(wr.into_raw_fd(), Ordering::Relaxed);
        let thread = std::thread::Builder::new()
            .name("hushtrace-sig".into())
            .spawn(move || {
                let mut got = Vec::new();
                let mut b = [0u8; 1];
                while let Ok(1) = rd.read(&mut b) {
                    let sig = i32::from(b[0]);
                    got.push(sig);
                    if sig != libc::SIGINT {
                        for pid in children() {
                            if !is_guard(pid) {
                                // SAFETY: sends a signal; no memory is involved.
                                unsafe { libc::kill(pid as i32, sig) };
                            }
                        }
                    }
                }
                got
            })?;
        let mut old = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is a valid starting value; the handler is an
            // `extern "C" fn(c_int)` that only calls write(2); `prev` is valid to write.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &sa, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Ok(Forwarder {
            thread: Some(thread),
            old,
        })
    }

    /// Restores the handlers and returns the signals received.
    pub fn finish(mut self) -> Vec<i32> {
        self.restore()
    }

    fn restore(&mut self) -> Vec<i32> {
        for (sig, prev) in self.old.drain(..) {
            // SAFETY: `prev` is the action sigaction returned for `sig`.
            unsafe { libc::sigaction(sig, &prev, std::ptr::null_mut()) };
        }
        let fd = PIPE_W.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: `fd` is the pipe's writing end, created by `install` and closed once.
            unsafe { libc::close(fd) };
        }
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Whether child `pid` is the guard process of [`crate::capture`].
fn is_guard(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        c.split(|&b| b == 0)
            .any(|a| a == crate::capture::GUARD_NAME.as_bytes())
    })
}

/// This process's children (`/proc/self/task/*/children`).
fn children() -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc/self/task") {
        for t in rd.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    out
}
