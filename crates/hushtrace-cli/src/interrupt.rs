//! Removing a half-written output when the command is interrupted.
//!
//! `convert` and `flamegraph` write `<out>.partial` and rename it when done. Ctrl-C (`SIGINT`),
//! `SIGTERM` or `SIGHUP` used to end the process with the temporary file left behind (up to the
//! size of the whole output). [`watch`] blocks those signals in the calling thread (and so in
//! every thread it starts later) and waits for them on a thread of its own: on one, it removes
//! the file registered with [`remove_on_interrupt`], if any, and ends the process by the same
//! signal, as if it had not been caught.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

/// The file to remove if a signal comes now.
static PARTIAL: Mutex<Option<PathBuf>> = Mutex::new(None);
static WATCH: Once = Once::new();

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// While alive, an interruption removes the registered file; dropping it unregisters the file
/// (call it once the file is renamed or removed).
#[derive(Debug)]
#[must_use = "the file is unregistered when this is dropped"]
pub struct Registered(());

impl Drop for Registered {
    fn drop(&mut self) {
        *PARTIAL.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Registers `path` as the file to remove when the command is interrupted, starting the
/// watcher if [`watch`] has not.
pub fn remove_on_interrupt(path: &Path) -> Registered {
    watch();
    *PARTIAL.lock().unwrap_or_else(|e| e.into_inner()) = Some(path.to_path_buf());
    Registered(())
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is a valid value to pass to sigemptyset, which initializes
    // it; sigaddset takes valid signal numbers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Starts the watcher (once). Call it on the main thread before any other thread starts, so
/// every thread has the signals blocked and only the watcher receives them.
pub fn watch() {
    WATCH.call_once(|| {
        let set = signal_set();
        // SAFETY: `set` is an initialized signal set; a null old-set pointer is allowed.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if r != 0 {
            return; // signals keep their default action: the file may stay behind
        }
        let spawned = std::thread::Builder::new()
            .name("interrupt".into())
            .spawn(move || loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is initialized and `sig` is a valid out-pointer.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    continue;
                }
                if let Some(p) = PARTIAL.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = std::fs::remove_file(p);
                }
                die_by(sig);
            });
        if spawned.is_err() {
            // No watcher: unblock again rather than ignore the signals.
            // SAFETY: as above.
            unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
        }
    });
}

/// Ends the process by signal `sig` with its default action, as if it had not been caught (so
/// the shell sees the signal), or with status 128 + `sig` if that does not end it.
fn die_by(sig: libc::c_int) -> ! {
    // SAFETY: restoring the default disposition and unblocking a signal in this thread only
    // changes how it is delivered; raise() sends it to this thread, whose default action for
    // these three signals ends the process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut one: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}
