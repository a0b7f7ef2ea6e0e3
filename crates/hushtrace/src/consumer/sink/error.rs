//! What goes wrong in an output ([`super::Sink`]): the errors the consumer notes as the
//! session's or prints, with the messages users see.

use std::fmt;
use std::path::PathBuf;
#[cfg(feature = "relay")]
use std::time::Duration;

/// An output could not write a packet or end cleanly.
#[derive(Debug)]
pub(crate) enum SinkError {
    /// A stream file could not be written (the stream is cut back to its last complete
    /// packet).
    Write {
        /// The stream file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The relay session did not end cleanly: what the relay lacks was counted and said.
    #[cfg(feature = "relay")]
    Relay {
        /// The relay's address.
        url: String,
        /// What went wrong.
        failure: RelayFailure,
        /// Relay-only mode: the relay's copy is the trace (else the local trace is complete).
        relay_only: bool,
    },
}

/// Why the relay session did not end cleanly.
#[cfg(feature = "relay")]
#[derive(Debug)]
pub(crate) enum RelayFailure {
    /// The sender thread could not be started: nothing reached the relay.
    NoSender,
    /// The relay did not answer for this long at the end: the consumer stopped waiting.
    Stalled(Duration),
    /// Closing the relay session failed.
    Close(hushtrace_relay::Error),
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::Write { path, source } => write!(f, "{}: {source}", path.display()),
            #[cfg(feature = "relay")]
            SinkError::Relay {
                url,
                failure,
                relay_only,
            } => {
                write!(f, "relay {url}: {failure}")?;
                if !relay_only {
                    f.write_str(" (the local trace is complete)")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for SinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SinkError::Write { source, .. } => Some(source),
            #[cfg(feature = "relay")]
            SinkError::Relay { failure, .. } => match failure {
                RelayFailure::Close(e) => Some(e),
                RelayFailure::NoSender | RelayFailure::Stalled(_) => None,
            },
        }
    }
}

#[cfg(feature = "relay")]
impl fmt::Display for RelayFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RelayFailure::NoSender => f.write_str("cannot start the relay sender thread"),
            RelayFailure::Stalled(waited) => write!(
                f,
                "the relay did not answer for {} s: stopped waiting for it",
                waited.as_secs()
            ),
            RelayFailure::Close(e) => e.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages users see (on stderr or from `Session::stop`).
    #[test]
    fn messages() {
        let write = SinkError::Write {
            path: "/t/1/stream_3".into(),
            source: std::io::Error::from_raw_os_error(28),
        };
        assert!(
            write
                .to_string()
                .starts_with("/t/1/stream_3: No space left on device"),
            "{write}"
        );
        assert!(std::error::Error::source(&write).is_some());
    }

    #[cfg(feature = "relay")]
    #[test]
    fn relay_messages() {
        let stalled = |relay_only| SinkError::Relay {
            url: "net://h".into(),
            failure: RelayFailure::Stalled(Duration::from_secs(1)),
            relay_only,
        };
        assert_eq!(
            stalled(true).to_string(),
            "relay net://h: the relay did not answer for 1 s: stopped waiting for it"
        );
        assert_eq!(
            stalled(false).to_string(),
            "relay net://h: the relay did not answer for 1 s: stopped waiting for it \
             (the local trace is complete)"
        );
        let none = SinkError::Relay {
            url: "net://h".into(),
            failure: RelayFailure::NoSender,
            relay_only: true,
        };
        assert_eq!(
            none.to_string(),
            "relay net://h: cannot start the relay sender thread"
        );
    }
}
