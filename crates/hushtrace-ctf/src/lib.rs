//! The on-disk format of hushtrace: CTF 1.8.
//!
//! * [`layout`]: byte offsets of the packet header/context and the event header, shared by the
//!   writer in the `hushtrace` runtime and by the reader.
//! * [`metadata`]: the TSDL `metadata` text describing a trace.
//! * [`partial`]: the rest of a packet the flush of idle threads shipped in part, and the
//!   renumbering after it (live consumer and crash recovery).
//! * [`reader`]: a streaming reader for traces hushtrace writes, with errors that name the file,
//!   the byte offset and the problem.
//! * [`ringfile`]: rings in shared memory that outlive a crashed process, and their recovery.
//! * [`file`]: the one safe way to open trace files (no symbolic link followed, regular files
//!   only, reads bounded by `fstat` and a limit, outputs 0600), for every reader and writer.
//! * [`stats`]: the per-process statistics file `<pid>.stats.json` (writer and parser).
//! * `synth` (Cargo feature `synth`, off by default): writes synthetic traces in the same format,
//!   for tests, fuzzing and benchmarks.
//!
//! ```
//! use hushtrace_ctf::layout::{PACKET_HEADER_LEN, COMPACT_HEADER_LEN, EXTENDED_HEADER_LEN};
//! assert_eq!(PACKET_HEADER_LEN, 112);
//! assert_eq!((COMPACT_HEADER_LEN, EXTENDED_HEADER_LEN), (4, 11));
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]

mod error;
pub mod file;
pub mod layout;
mod liveness;
pub mod metadata;
pub mod partial;
pub mod reader;
pub mod ringfile;
pub mod stats;
#[cfg(feature = "synth")]
pub mod synth;

pub use hushtrace_core::{FieldType, Kind};
