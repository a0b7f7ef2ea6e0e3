//! Errors reading a trace: the file, where in it, and what was wrong (re-exported by
//! [`crate::reader`]). Below the reader and the file layer, which both report them.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Where in the input a problem was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// Nowhere more precise than the file (or directory) itself.
    File,
    /// A byte offset in a binary file.
    Offset(u64),
    /// A 1-based line of a metadata file.
    Line(usize),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File => Ok(()),
            Location::Offset(o) => write!(f, ": byte offset {o}"),
            Location::Line(l) => write!(f, ":{l}"),
        }
    }
}

/// What was wrong with the input.
#[derive(Debug)]
pub enum ErrorKind {
    /// The file could not be read (missing, permission denied, I/O error...).
    Io(io::Error),
    /// The metadata is not the TSDL hushtrace writes.
    NotHushtrace(String),
    /// A stream file does not match its metadata.
    Corrupt(String),
    /// A session directory holds no hushtrace trace.
    NoTraces,
}

/// An error reading a trace: the file, where in it, and what was wrong.
///
/// ```
/// use hushtrace_ctf::reader::{Error, ErrorKind, Location};
/// let e = Error::corrupt("/t/1/stream_0", 112, "unknown event id 9");
/// assert_eq!(e.to_string(), "/t/1/stream_0: byte offset 112: corrupt trace: unknown event id 9");
/// assert!(matches!(e.kind, ErrorKind::Corrupt(_)));
/// assert_eq!(e.location, Location::Offset(112));
/// ```
#[derive(Debug)]
pub struct Error {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// Where in it.
    pub location: Location,
    /// What was wrong.
    pub kind: ErrorKind,
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, e: io::Error) -> Self {
        Error {
            path: path.into(),
            location: Location::File,
            kind: ErrorKind::Io(e),
        }
    }

    /// Corrupt stream data at byte `offset` of `path`.
    pub fn corrupt(path: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        Error {
            path: path.into(),
            location: Location::Offset(offset),
            kind: ErrorKind::Corrupt(what.into()),
        }
    }

    /// Metadata that is not what hushtrace writes, at `location` of `path`.
    pub fn not_hushtrace(
        path: impl Into<PathBuf>,
        location: Location,
        what: impl Into<String>,
    ) -> Self {
        Error {
            path: path.into(),
            location,
            kind: ErrorKind::NotHushtrace(what.into()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}: {}", self.path.display(), self.location, self.kind)
    }
}

/// What was wrong, without the path and location.
impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Io(e) => write!(f, "{e}"),
            ErrorKind::NotHushtrace(w) => write!(f, "not a hushtrace trace: {w}"),
            ErrorKind::Corrupt(w) => write!(f, "corrupt trace: {w}"),
            ErrorKind::NoTraces => {
                write!(
                    f,
                    "no hushtrace trace here (expected <pid>/metadata and <pid>/stream_*)"
                )
            }
        }
    }
}

// `source()` stays `None`: the I/O error's text is already part of `Display`, and reporters that
// print the whole chain would otherwise repeat it. The `io::Error` itself is in `kind`.
impl std::error::Error for Error {}
