//! The public session API: build, start and stop a session; `start_from_env`.
//!
//! [`Session`] and `start_from_env` are here; the builder is `session/builder.rs`, the start
//! (claim, checks, output directory, consumer) `session/start.rs`, the stop (detach, quiescence,
//! final pass, the stop at process exit) `session/stop.rs`.

mod builder;
mod start;
mod stop;

pub use builder::SessionBuilder;
use start::{start_with, Existing};
pub(crate) use stop::stop_shared;

use crate::config::{Config, Error, Stats};
use crate::ring::Mode;
use crate::state::Shared;
use std::path::PathBuf;
use std::sync::Arc;

/// A running trace session. Dropping it stops it and flushes everything.
#[derive(Debug)]
pub struct Session {
    shared: Option<Arc<Shared>>,
}

impl Session {
    /// A builder with the default settings.
    pub fn builder() -> SessionBuilder {
        SessionBuilder {
            cfg: Config::default(),
            append: false,
        }
    }

    /// This process's trace directory.
    pub fn trace_dir(&self) -> PathBuf {
        self.shared
            .as_ref()
            .map(|s| s.inner.lock().trace_dir.clone())
            .unwrap_or_default()
    }

    /// The session's buffer mode (fixed for its life).
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("hushtrace-doc-mode-{}", std::process::id()));
    /// let s = hushtrace::Session::builder()
    ///     .output_dir(&dir)
    ///     .mode(hushtrace::Mode::Overwrite)
    ///     .start()?;
    /// assert_eq!(s.mode(), hushtrace::Mode::Overwrite);
    /// s.stop()?;
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), hushtrace::Error>(())
    /// ```
    pub fn mode(&self) -> Mode {
        self.shared
            .as_ref()
            .map_or(Config::default().mode, |s| s.cfg.mode)
    }

    /// Stops the session: detaches every buffer, waits until no thread is inside a tracepoint,
    /// writes all packets (full and partial), the metadata and the per-process statistics.
    pub fn stop(mut self) -> Result<Stats, Error> {
        let s = self.shared.take().expect("session present until stop");
        stop_shared(&s)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(s) = self.shared.take() {
            let _ = stop_shared(&s);
        }
    }
}

/// Starts a session configured by the environment, if `HUSHTRACE_OUTPUT=<dir>` is set:
/// `HUSHTRACE_MODE` (`discard`|`overwrite`), `HUSHTRACE_SUBBUF_SIZE` (bytes, `k`/`M` suffixes),
/// `HUSHTRACE_NUM_SUBBUFS`, `HUSHTRACE_READ_TIMER_MS`, `HUSHTRACE_DIRECT_IO` (`1`: as
/// [`SessionBuilder::direct_io`]), `HUSHTRACE_CONSUMER_SCHED` and `HUSHTRACE_CONSUMER_CPUS` (as
/// [`SessionBuilder::consumer_sched`] and [`SessionBuilder::consumer_cpus`]) and `HUSHTRACE_NO_SYSCALL_POLICY` (the table is
/// [`crate::env`]; a [`SessionBuilder`] session reads none of the per-session ones). A bad value is an error naming the variable and the value;
/// the program can carry on untraced. Without `HUSHTRACE_OUTPUT`, nothing starts (`Ok(None)`),
/// but another `HUSHTRACE_*` variable that is set (`HUSHTRACE_RELAY` alone, say) is an error
/// saying that `HUSHTRACE_OUTPUT` is missing.
///
/// ```
/// // Without HUSHTRACE_OUTPUT nothing starts.
/// std::env::remove_var("HUSHTRACE_OUTPUT");
/// assert!(hushtrace::start_from_env().unwrap().is_none());
/// std::env::set_var("HUSHTRACE_RELAY", "net://collector");
/// let err = hushtrace::start_from_env().unwrap_err().to_string();
/// assert!(err.contains("HUSHTRACE_RELAY") && err.contains("without HUSHTRACE_OUTPUT"), "{err}");
/// # std::env::remove_var("HUSHTRACE_RELAY");
/// ```
pub fn start_from_env() -> Result<Option<Session>, Error> {
    match Config::from_env()? {
        None => Ok(None),
        Some((cfg, raw)) => start_with(cfg, &raw, Existing::Append).map(Some),
    }
}
