//! A streaming reader for the traces hushtrace writes.
//!
//! The reader understands exactly what the `hushtrace` runtime writes (see [`crate::layout`] and
//! [`crate::metadata`]), not CTF in general:
//!
//! * [`parse_metadata`] parses the TSDL text in the shape [`crate::metadata::to_tsdl`] emits and
//!   rejects anything else as "not a hushtrace trace", naming the file and line.
//! * [`Session::open`] discovers the per-process traces of a session directory
//!   (`<dir>/<pid>/metadata`, `<dir>/<pid>/stream_<k>`, `<dir>/<pid>.stats.json`).
//! * [`StreamReader`] walks one stream file packet by packet through one reusable window of
//!   [`WINDOW_BYTES`] (at most [`MAX_EVENT_BYTES`]), so memory per stream stays bounded whatever
//!   the packet headers claim, and decodes events into borrowed [`EventRef`]s. It counts packets
//!   lost to overwrite mode or failed writes from the packet sequence numbers.
//! * [`Merged`] is a k-way merge of every stream of every process by wall-clock time.
//!
//! Only regular files are read: a trace file name that is a symbolic link, a FIFO or a device
//! is an error naming it (never followed, never waited on).
//!
//! Every problem with the input is an [`Error`] naming the file, the byte offset (or metadata
//! line) and what was wrong; the reader never panics on bad input and never returns partial
//! output silently. The one tolerated defect is a truncated last packet (a process killed while
//! its consumer was writing): its whole events are read and a [`Warning`] is recorded.
//!
//! ```
//! use hushtrace_ctf::reader::Session;
//! use hushtrace_ctf::synth::{SynthTrace, SynthEvent};
//!
//! let dir = std::env::temp_dir().join(format!("hushtrace-reader-doc-{}", std::process::id()));
//! let mut t = SynthTrace::new(100, "app");
//! let tick = t.instant("demo:tick", &[("n", hushtrace_ctf::FieldType::U32)]);
//! t.thread(101, "worker").event(SynthEvent::new(tick, 5).u32(7));
//! t.write_session(&dir).unwrap();
//!
//! let session = Session::open(&dir).unwrap();
//! let mut merged = session.merged().unwrap();
//! let mut n = 0;
//! while let Some(ev) = merged.next().unwrap() {
//!     assert_eq!(ev.event.class.name, "demo:tick");
//!     assert_eq!(ev.event.packet.vtid, 101);
//!     n += 1;
//! }
//! assert_eq!(n, 1);
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod merge;
mod session;
mod stream;
mod tsdl;

use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::error::{Error, ErrorKind, Location};

pub use merge::{Merged, MergedEvent, MAX_OPEN_STREAMS};
pub use session::{
    Origin, ProcessStats, ProcessTrace, Session, KERNEL_TRACE_DIR, RECOVERED_MARKER,
    SNAPSHOT_MARKER,
};
pub use stream::{
    EventRef, Fields, PacketContext, StreamReader, MAX_EVENT_BYTES, MAX_PACKET_BYTES, WINDOW_BYTES,
};
pub use tsdl::{
    parse_kernel_metadata, parse_metadata, read_kernel_metadata, read_metadata, MAX_METADATA_BYTES,
};

/// A tolerated defect in the input (for example a truncated last packet), for the caller to
/// print.
///
/// ```
/// use hushtrace_ctf::reader::{Location, Warning};
/// let w = Warning { path: "/t/1/stream_0".into(), offset: 224, location: Location::Offset(224),
///                   message: "truncated last packet".into() };
/// assert_eq!(w.to_string(), "/t/1/stream_0: byte offset 224: truncated last packet");
/// let w = Warning { path: "/t/1".into(), offset: 0, location: Location::File,
///                   message: "incomplete trace".into() };
/// assert_eq!(w.to_string(), "/t/1: incomplete trace");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// Byte offset in it (0 when the warning is about the whole file or directory).
    pub offset: u64,
    /// Where in it: [`Location::Offset`] of `offset`, or [`Location::File`] for the whole.
    pub location: Location,
    /// What was found and what the reader did about it.
    pub message: String,
}

impl Warning {
    /// A warning at byte `offset` of `path`.
    fn new(path: &Path, offset: u64, message: String) -> Self {
        Warning {
            path: path.to_path_buf(),
            offset,
            location: Location::Offset(offset),
            message,
        }
    }

    /// A warning about the file or directory `path` as a whole.
    fn about(path: &Path, message: String) -> Self {
        Warning {
            path: path.to_path_buf(),
            offset: 0,
            location: Location::File,
            message,
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}: {}",
            self.path.display(),
            self.location,
            self.message
        )
    }
}

/// A decoded field value: [`hushtrace_core::Value`], the type the runtime's dynamic write path
/// takes, so a value written comes back equal. Each integer keeps its declared width (a
/// `uint16_t` field is [`Value::U16`]; [`Value::as_u64`] and [`Value::as_i64`] widen); strings
/// borrow from the packet buffer.
///
/// ```
/// use hushtrace_ctf::reader::Value;
/// assert_eq!(Value::I32(-3).as_f64(), Some(-3.0));
/// assert_eq!(Value::U8(3).as_u64(), Some(3));
/// assert_eq!(Value::Str("x").to_string(), "\"x\"");
/// ```
pub use hushtrace_core::Value;
