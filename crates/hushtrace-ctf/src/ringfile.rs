//! Ring files: a thread's ring buffer in shared memory that outlives the process, and its
//! recovery after a crash.
//!
//! A traced process keeps each thread's ring in a file-backed shared mapping: the file
//! `ring_<instance>` in its ring directory (see [`RINGS_FILE`]). A process that stops cleanly
//! drains its rings and deletes the files; after a crash (SIGKILL, `abort()`, a fault, `exit`
//! without stop) they stay, and [`recover_ring`] turns one into ordinary CTF packets appended
//! to the process's `stream_<instance>` file: every committed packet the consumer had not
//! written yet, plus the open packet up to its last complete event.
//!
//! # Layout (little-endian)
//!
//! A [`HEADER_LEN`]-byte header (its fixed part, offsets 0 to 44, through the codec
//! [`RingFileHeader`]; the live words through the `OFF_*` offsets below), then `num_subbufs` slots of `subbuf_size` bytes (one packet
//! each, packet `s` in slot `s % num_subbufs`).
//!
//! | offset | field | written by |
//! |---|---|---|
//! | 0 | magic `HTRING01` | creator |
//! | 8 | version (u32, 1), mode (u32: 0 discard, 1 overwrite) | creator |
//! | 16 | subbuf_size, num_subbufs, instance (u64 each) | creator |
//! | 40 | pid (u32) | creator |
//! | 64 | `done`: bytes of the open packet holding complete events (0: none) | producer, per event |
//! | 72 | `open_seq`: sequence number of the open packet | producer, per packet |
//! | 80 | `discarded`, `overwritten` (u64 each): the stream's counts | producer, when they change |
//! | 128 | `consumed`: packets below it are in the stream file | consumer |
//! | 136 | flush state: packets added, the packet shipped in part (seq + 1, offset, last time) | consumer |
//! | 192 | `clean` (u64): 1 once the consumer drained the ring at a clean stop | consumer |

use crate::error::ErrorKind;
use crate::file::{self, Dir};
use crate::layout::*;
use crate::metadata::TraceDesc;
use crate::partial::{rest_of_packet, Renumber, Shipped};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

mod ring;
mod session;
pub use ring::{recover_ring, Recovered};
pub use session::{read_pointer_file, recover_session, unrecovered_rings, ProcessRecovery};

/// Bytes before the first slot (one page).
pub const HEADER_LEN: usize = 4096;
/// Offset of the producer's `done` word.
pub const OFF_DONE: usize = 64;
// The fixed part ([`RingFileHeader`]) ends before the live words.
const _: () = assert!(RING_FIXED_LEN <= OFF_DONE);
/// Offset of the producer's `open_seq` word.
pub const OFF_OPEN_SEQ: usize = 72;
/// Offset of the stream's cumulative discarded count.
pub const OFF_DISCARDED: usize = 80;
/// Offset of the stream's overwritten-events count.
pub const OFF_OVERWRITTEN: usize = 88;
/// Offset of the consumer's `consumed` word.
pub const OFF_CONSUMED: usize = 128;
/// Offset of the consumer's flush state: packets the flush of idle threads added to the stream
/// (ring sequence numbers are raised by it in the stream file).
pub const OFF_FLUSH_EXTRA: usize = 136;
/// The open packet the flush shipped in part: its ring sequence number plus one (0: none).
pub const OFF_FLUSH_SEQ: usize = 144;
/// How far (bytes from the packet start) that packet was shipped.
pub const OFF_FLUSH_OFF: usize = 152;
/// The last shipped event's timestamp (where the rest begins).
pub const OFF_FLUSH_TS: usize = 160;
/// Offset of the `clean` flag.
pub const OFF_CLEAN: usize = 192;
/// Prefix of ring file names (`ring_<instance>`).
pub const RING_PREFIX: &str = "ring_";
pub use crate::layout::{LEGACY_RINGS_FILE, RINGS_FILE, RING_MAGIC};

/// In a ring directory: the types mirror (see `hushtrace_core::mirror`).
pub const TYPES_FILE: &str = "types";

/// The fixed part of a ring file's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingHeader {
    /// 1 for overwrite mode.
    pub overwrite: bool,
    /// Bytes per slot.
    pub subbuf_size: usize,
    /// Slots.
    pub num_subbufs: usize,
    /// Stream instance id (the `stream_<instance>` file).
    pub instance: u64,
    /// The process that wrote the ring.
    pub pid: u32,
    /// Complete bytes of the open packet.
    pub done: u64,
    /// Sequence number of the open packet.
    pub open_seq: u64,
    /// Events discarded in the stream.
    pub discarded: u64,
    /// Events overwritten in the stream.
    pub overwritten: u64,
    /// Packets already in the stream file.
    pub consumed: u64,
    /// Drained at a clean stop: nothing to recover.
    pub clean: bool,
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    read_u64(b, off).unwrap_or(0)
}

impl RingHeader {
    /// Parses a header page ([`HEADER_LEN`] bytes: the fixed part through [`RingFileHeader`],
    /// then the live words); errors say what is wrong.
    pub fn parse(b: &[u8]) -> Result<RingHeader, String> {
        let fixed = RingFileHeader::decode(b).map_err(|e| e.to_string())?;
        if b.len() < HEADER_LEN {
            return Err(RingFileHeaderError::Short { len: b.len() }.to_string());
        }
        let RingFileHeader {
            overwrite,
            subbuf_size,
            num_subbufs,
            instance,
            pid,
        } = fixed;
        if !(4096..=1 << 30).contains(&subbuf_size) || !(2..=1 << 16).contains(&num_subbufs) {
            return Err(format!(
                "implausible ring geometry: {num_subbufs} slots of {subbuf_size} bytes"
            ));
        }
        Ok(RingHeader {
            overwrite,
            subbuf_size: subbuf_size as usize,
            num_subbufs: num_subbufs as usize,
            instance,
            pid,
            done: u64_at(b, OFF_DONE),
            open_seq: u64_at(b, OFF_OPEN_SEQ),
            discarded: u64_at(b, OFF_DISCARDED),
            overwritten: u64_at(b, OFF_OVERWRITTEN),
            consumed: u64_at(b, OFF_CONSUMED),
            clean: u64_at(b, OFF_CLEAN) == 1,
        })
    }
}
