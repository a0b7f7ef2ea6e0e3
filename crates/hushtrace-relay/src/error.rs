//! Errors of the relay client.

use std::fmt;
use std::io;

/// What went wrong talking to a relay daemon. Every message names the connection or command
/// and the problem.
///
/// [`Error::connection_lost`] tells the caller whether the client is finished (drop it and
/// connect a new one) or whether only this call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A connection could not be established (refused, unreachable, name not resolved,
    /// timed out).
    Connect {
        /// `"control"` or `"data"`.
        connection: &'static str,
        /// The `host:port` tried.
        addr: String,
        /// The system's error.
        source: io::Error,
    },
    /// Reading or writing failed (reset, broken pipe, ...).
    Io {
        /// The command or transfer in progress.
        during: &'static str,
        /// The system's error.
        source: io::Error,
    },
    /// The relay did not answer (or accept bytes) within the I/O timeout.
    Timeout {
        /// The command or transfer in progress.
        during: &'static str,
    },
    /// The relay closed the connection.
    Closed {
        /// The command or transfer in progress.
        during: &'static str,
    },
    /// The relay answered something the protocol does not allow.
    Protocol {
        /// The command whose reply was malformed.
        during: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The relay speaks a protocol version this client cannot use.
    Version {
        /// The relay's major version.
        major: u32,
        /// The relay's minor version.
        minor: u32,
    },
    /// The relay answered a command with an error code (`enum lttng_error_code`).
    Refused {
        /// The command refused.
        during: &'static str,
        /// The relay's code (e.g. 11 = unknown error, 12 = fatal).
        code: u32,
    },
    /// An argument was rejected before anything was sent (name too long, unsafe path, unknown
    /// or closed stream, malformed packet).
    InvalidArgument(String),
    /// An earlier error ended this client's connection; nothing was sent.
    Broken {
        /// The earlier error.
        cause: String,
    },
}

impl Error {
    /// `true` when the client can no longer be used: connect a new one (which re-announces
    /// the session and streams) and count what this call carried as lost. `false` for errors
    /// that concern only this call ([`Error::InvalidArgument`], [`Error::Refused`]).
    pub fn connection_lost(&self) -> bool {
        !matches!(self, Error::InvalidArgument(_) | Error::Refused { .. })
    }

    pub(crate) fn io(during: &'static str, e: io::Error) -> Error {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout { during },
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => Error::Closed { during },
            _ => Error::Io { during, source: e },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect {
                connection,
                addr,
                source,
            } => write!(
                f,
                "cannot open the relay {connection} connection to {addr}: {source} \
                 (is lttng-relayd running and listening there?)"
            ),
            Error::Io { during, source } => {
                write!(f, "relay connection failed during {during}: {source}")
            }
            Error::Timeout { during } => write!(f, "relay did not respond in time during {during}"),
            Error::Closed { during } => write!(f, "relay closed the connection during {during}"),
            Error::Protocol { during, detail } => {
                write!(f, "relay answered garbage to {during}: {detail}")
            }
            Error::Version { major, minor } => write!(
                f,
                "relay speaks protocol {major}.{minor}; this client needs 2.{} or later \
                 (lttng-relayd from LTTng 2.11+)",
                crate::wire::MIN_PROTOCOL_MINOR
            ),
            Error::Refused { during, code } => {
                write!(f, "relay refused {during} (lttng error code {code})")
            }
            Error::InvalidArgument(s) => f.write_str(s),
            Error::Broken { cause } => {
                write!(
                    f,
                    "relay connection unusable after an earlier error: {cause}"
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connect { source, .. } | Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<crate::index::PacketError> for Error {
    /// Bytes that are not one hushtrace packet, given to a send: the caller's mistake.
    fn from(e: crate::index::PacketError) -> Error {
        Error::InvalidArgument(format!("not a hushtrace packet: {e}"))
    }
}
