//! How a session is announced to the relay ([`SessionOptions`]), and the checks of its names and
//! paths before anything is sent.

use super::*;

/// How a session is announced to the relay.
///
/// ```
/// use hushtrace_relay::SessionOptions;
/// use std::time::Duration;
///
/// let opts = SessionOptions::new("my-trace", "host-a")
///     .base_path("my-trace")                     // <relay out>/host-a/my-trace/
///     .live_timer(Some(Duration::from_secs(1)))  // live viewers may attach
///     .io_timeout(Duration::from_secs(2));
/// assert!(opts.validate().is_ok());
/// assert!(SessionOptions::new("a/b", "h").validate().is_err());
/// ```
#[derive(Clone, Debug)]
pub struct SessionOptions {
    pub(super) session_name: String,
    pub(super) hostname: String,
    pub(super) base_path: String,
    pub(super) live_timer: Option<Duration>,
    pub(super) connect_timeout: Duration,
    pub(super) io_timeout: Duration,
    pub(super) creation_time: SystemTime,
    pub(super) max_in_flight: usize,
}

impl SessionOptions {
    /// A live session (live timer 1 s) named `session_name` from host `hostname`; timeouts
    /// 5 s; stored by the relay under `<output>/<hostname>/<session_name>-<date>-<time>/`.
    pub fn new(session_name: impl Into<String>, hostname: impl Into<String>) -> SessionOptions {
        SessionOptions {
            session_name: session_name.into(),
            hostname: hostname.into(),
            base_path: String::new(),
            live_timer: Some(Duration::from_secs(1)),
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(5),
            creation_time: SystemTime::now(),
            max_in_flight: DEFAULT_IN_FLIGHT,
        }
    }

    /// Stores the session under `<output>/<hostname>/<base_path>/` instead of the
    /// timestamped default. A relative path without `..`. A session re-created after a
    /// reconnection with the same base path would overwrite stream files of the same names:
    /// use a new path (or none) then.
    pub fn base_path(mut self, path: impl Into<String>) -> SessionOptions {
        self.base_path = path.into();
        self
    }

    /// The relay's live timer: `Some` makes the session visible to live viewers (the relay
    /// rounds it to microseconds, at least 1); `None`: not a live session.
    pub fn live_timer(mut self, every: Option<Duration>) -> SessionOptions {
        self.live_timer = every;
        self
    }

    /// Bound on establishing each connection (default 5 s).
    pub fn connect_timeout(mut self, t: Duration) -> SessionOptions {
        self.connect_timeout = t;
        self
    }

    /// Bound on every read and write once connected (default 5 s).
    pub fn io_timeout(mut self, t: Duration) -> SessionOptions {
        self.io_timeout = t;
        self
    }

    /// The creation time the relay records (and uses in the default directory name);
    /// default: when the options were made.
    pub fn creation_time(mut self, t: SystemTime) -> SessionOptions {
        self.creation_time = t;
        self
    }

    /// How many packets sent with [`RelayClient::send_packet_nowait`] may wait for their index
    /// acknowledgement (1 to [`MAX_IN_FLIGHT`]; default [`DEFAULT_IN_FLIGHT`]).
    pub fn max_in_flight(mut self, n: usize) -> SessionOptions {
        self.max_in_flight = n.clamp(1, MAX_IN_FLIGHT);
        self
    }

    /// Checks names, paths and timeouts against the relay's limits.
    pub fn validate(&self) -> Result<(), Error> {
        path_safe_name("session name", &self.session_name, wire::MAX_SESSION_NAME)?;
        path_safe_name("host name", &self.hostname, wire::MAX_HOSTNAME)?;
        if !self.base_path.is_empty() {
            relative_path("base path", &self.base_path, wire::MAX_BASE_PATH)?;
        }
        for (what, t) in [
            ("connect timeout", self.connect_timeout),
            ("I/O timeout", self.io_timeout),
        ] {
            if t.is_zero() {
                return Err(Error::InvalidArgument(format!(
                    "the {what} must not be zero"
                )));
            }
        }
        if let Some(t) = self.live_timer {
            if t.as_micros() > u128::from(u32::MAX) {
                return Err(Error::InvalidArgument(format!(
                    "live timer {t:?} exceeds the protocol's {} µs",
                    u32::MAX
                )));
            }
        }
        Ok(())
    }
}

pub(super) fn invalid(what: &str, value: &str, why: &str) -> Error {
    Error::InvalidArgument(format!("{what} {value:?} {why}"))
}

pub(super) fn path_safe_name(what: &str, v: &str, max_with_nul: usize) -> Result<(), Error> {
    if v.is_empty() {
        return Err(invalid(what, v, "is empty"));
    }
    if v.starts_with('.') || v.contains('/') || v.contains('\0') {
        return Err(invalid(
            what,
            v,
            "may not start with '.' or contain '/' or NUL (the relay uses it as a directory name)",
        ));
    }
    if v.len() + 1 > max_with_nul {
        return Err(invalid(
            what,
            v,
            &format!("is longer than the relay's {} bytes", max_with_nul - 1),
        ));
    }
    Ok(())
}

pub(super) fn relative_path(what: &str, v: &str, max_with_nul: usize) -> Result<(), Error> {
    if v.starts_with('/') || v.split('/').any(|c| c == ".." || c == ".") || v.contains('\0') {
        return Err(invalid(
            what,
            v,
            "must be a relative path without '.', '..' or NUL",
        ));
    }
    if v.len() + 1 > max_with_nul {
        return Err(invalid(
            what,
            v,
            &format!("is longer than the relay's {} bytes", max_with_nul - 1),
        ));
    }
    Ok(())
}
