//! Removing a half-written output when the command is interrupted.
//!
//! `convert` and `flamegraph` write `<out>.partial` and rename it when done. Ctrl-C (`SIGINT`),
//! `SIGTERM` or `SIGHUP` used to end the process with the temporary file left behind (up to the
//! size of the whole output). [`watch`] catches those signals with the self-pipe of
//! `hushtrace-signal` and waits for them on a thread of its own: on one, it removes the file
//! registered with [`remove_on_interrupt`], if any, and ends the process by the same signal, as
//! if it had not been caught.

use hushtrace_signal::{catch, die_by, empty_set, SignalPipe};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

/// The file to remove if a signal comes now.
static PARTIAL: Mutex<Option<PathBuf>> = Mutex::new(None);
static WATCH: Once = Once::new();
/// The self-pipe the handler writes the signal number to.
static PIPE: SignalPipe = SignalPipe::new();

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(sig: libc::c_int) {
    PIPE.notify(sig);
}

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

/// Starts the watcher (once). Call it before the command starts writing its output.
pub fn watch() {
    WATCH.call_once(|| {
        let Ok(watch) = PIPE.open() else {
            return; // signals keep their default action: the file may stay behind
        };
        let spawned = std::thread::Builder::new()
            .name("interrupt".into())
            .spawn(move || {
                if let Some(sig) = watch.wait() {
                    if let Some(p) = PARTIAL.lock().unwrap_or_else(|e| e.into_inner()).take() {
                        let _ = std::fs::remove_file(p);
                    }
                    die_by(sig);
                }
            });
        if spawned.is_err() {
            // No watcher: the signals keep their default action.
            PIPE.shut();
            return;
        }
        for sig in SIGNALS {
            let _ = catch(sig, on_signal, empty_set(), libc::SA_RESTART);
        }
    });
}
