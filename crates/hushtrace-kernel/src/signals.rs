//! Keeping `record` alive long enough to write the kernel trace and remove its instances when
//! it is interrupted: SIGINT (a terminal's Ctrl-C, which the program receives too), SIGTERM
//! and SIGHUP are caught while the program runs; SIGTERM and SIGHUP are passed on to the
//! recorder's children, so the program ends and `record` finishes normally. (SIGKILL cannot
//! be caught: then the guard process removes the instances, see [`crate::capture`].)

use hushtrace_signal::{catch, empty_set, restore, SignalPipe};
use std::thread::JoinHandle;

/// The self-pipe the handler writes the signal number to.
static PIPE: SignalPipe = SignalPipe::new();
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(sig: libc::c_int) {
    PIPE.notify(sig);
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
        let watch = PIPE.open()?;
        let thread = std::thread::Builder::new()
            .name("hushtrace-sig".into())
            .spawn(move || {
                let mut got = Vec::new();
                while let Some(sig) = watch.wait() {
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
                watch.close();
                got
            });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                PIPE.shut();
                return Err(e);
            }
        };
        let old = SIGNALS
            .into_iter()
            .filter_map(|sig| {
                let prev = catch(sig, on_signal, empty_set(), libc::SA_RESTART).ok()?;
                Some((sig, prev))
            })
            .collect();
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
            restore(sig, &prev);
        }
        PIPE.shut();
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
