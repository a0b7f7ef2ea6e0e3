//! The error type of the tracer's control API.

use super::Stats;
use std::fmt;
use std::path::PathBuf;

/// Errors of the tracer's control API. Tracepoints never fail: they count what they drop.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is invalid. `var` names the environment variable it came from.
    Config {
        /// The environment variable, if the value came from one.
        var: Option<&'static str>,
        /// The offending value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// The output directory or a trace file could not be created or written.
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A session is already running in this process.
    AlreadyRunning,
    /// Tracing is not implemented on this operating system (tracepoints are no-ops there).
    Unsupported,
    /// No session is running in this process.
    NotRunning,
    /// The operation needs overwrite mode (snapshots: the flight recorder); in discard mode
    /// the trace on disk is already current.
    NeedsOverwriteMode,
    /// The session stopped, but writing its trace failed: `stats` are what was written and
    /// lost (the failed packets are counted in `events_discarded`), the trace on disk is
    /// readable up to the last complete packet of each stream.
    Stop {
        /// What the session recorded.
        stats: Stats,
        /// The file that could not be written.
        path: PathBuf,
        /// The first error.
        source: std::io::Error,
    },
    /// The relay daemon (`lttng-relayd`) given with `relay(...)` / `HUSHTRACE_RELAY` could not
    /// be reached or refused the session when the session started.
    Relay {
        /// The relay's address (`net://HOST:CONTROL:DATA`).
        url: String,
        /// What went wrong.
        reason: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config {
                var: Some(var),
                value,
                reason,
            } => write!(f, "invalid {var}={value:?}: {reason}"),
            Error::Config {
                var: None,
                value,
                reason,
            } => write!(f, "invalid value {value:?}: {reason}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::AlreadyRunning => write!(f, "a hushtrace session is already running"),
            Error::Stop {
                stats,
                path,
                source,
            } => write!(
                f,
                "{}: {source} (the trace is readable up to the failure: {} events written, {} \
                 lost)",
                path.display(),
                stats.events_written,
                stats.events_discarded
            ),
            Error::Relay { url, reason } => write!(
                f,
                "cannot stream the session to the relay daemon at {url}: {reason} (is \
                 lttng-relayd running there? start it with `lttng-relayd -d`, or trace without \
                 a relay)"
            ),
            Error::NotRunning => write!(f, "no hushtrace session is running in this process"),
            Error::NeedsOverwriteMode => write!(
                f,
                "snapshots need a session in overwrite mode (the flight recorder); in discard \
                 mode the trace on disk is already current"
            ),
            Error::Unsupported => write!(
                f,
                "hushtrace cannot trace on this platform (unsupported platform: Linux only); \
                 tracepoints are no-ops"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Stop { source, .. } => Some(source),
            _ => None,
        }
    }
}
