//! Binary layout of hushtrace packets and events, and the fixed header of a ring file.
//!
//! Everything is little-endian and byte-aligned (CTF `align = 8` bits), so no padding ever
//! appears between fields.
//!
//! A packet (one sub-buffer) is [`PACKET_HEADER_LEN`] bytes of header and context followed by
//! events. An event is a header followed by its fields in declaration order.
//! `packet_size == content_size` always: packets are written without padding.
//!
//! # Event header
//!
//! Two forms, told apart by the first byte:
//!
//! * **compact**, [`COMPACT_HEADER_LEN`] bytes: one little-endian `u32` holding the event id
//!   (`0..=254`) in its low byte and the low 24 bits of the timestamp above it;
//! * **extended**, [`EXTENDED_HEADER_LEN`] bytes: the byte [`EXTENDED_TAG`] (255), the `u16`
//!   id, the `u64` timestamp.
//!
//! Timestamps are clock cycles. A stream's clock starts at each packet's `timestamp_begin`; an
//! extended header sets it, a compact one updates its low 24 bits by the CTF rule (adding
//! 2^24 when the new low bits are smaller than the current ones). A writer may use the compact
//! form when the id is below 255 and the event is less than 2^24 cycles after the stream's
//! previous event (or the packet's `timestamp_begin`), see [`compact_fits`]; babeltrace2 reads
//! both forms from the metadata's variant ([`crate::metadata`]).
//!
//! # Codecs
//!
//! Each binary header has one codec here, used by every writer and reader: the event header
//! ([`push_event_header`] / [`parse_event_header`]), the packet header and context
//! ([`PacketHeader`], [`PacketEnd`]), and the fixed part of a ring file's header
//! ([`RingFileHeader`], written by the runtime, read by crash recovery).

mod event;
mod packet;
mod ring_header;
pub use event::{
    compact_fits, compact_word, extended_header, parse_event_header, push_event_header,
    EventHeader, COMPACT_HEADER_LEN, COMPACT_TS_BITS, EXTENDED_HEADER_LEN, EXTENDED_TAG,
};
pub use packet::{PacketEnd, PacketHeader};
pub use ring_header::{
    RingFileHeader, RingFileHeaderError, RING_FIXED_LEN, RING_MAGIC, RING_OFF_INSTANCE,
    RING_OFF_MAGIC, RING_OFF_MODE, RING_OFF_NUM_SUBBUFS, RING_OFF_PID, RING_OFF_SUBBUF_SIZE,
    RING_OFF_VERSION, RING_VERSION,
};

/// CTF packet magic number.
pub const MAGIC: u32 = 0xC1FC_1FC1;

/// Offset of the `u32` magic.
pub const OFF_MAGIC: usize = 0;
/// Offset of the 16-byte trace UUID.
pub const OFF_UUID: usize = 4;
/// Offset of the `u32` stream class id (always 0).
pub const OFF_STREAM_ID: usize = 20;
/// Offset of the `u64` stream instance id (one per stream file).
pub const OFF_STREAM_INSTANCE_ID: usize = 24;
/// Offset of the `u64` packet start time, in clock cycles.
pub const OFF_TIMESTAMP_BEGIN: usize = 32;
/// Offset of the `u64` packet end time, in clock cycles.
pub const OFF_TIMESTAMP_END: usize = 40;
/// Offset of the `u64` content size, in bits.
pub const OFF_CONTENT_SIZE: usize = 48;
/// Offset of the `u64` packet size, in bits.
pub const OFF_PACKET_SIZE: usize = 56;
/// Offset of the `u64` per-stream packet sequence number.
pub const OFF_PACKET_SEQ_NUM: usize = 64;
/// Offset of the `u64` cumulative count of events discarded in this stream.
pub const OFF_EVENTS_DISCARDED: usize = 72;
/// Offset of the `u32` process id (as seen in the process's pid namespace).
pub const OFF_VPID: usize = 80;
/// Offset of the `u32` CPU in a kernel trace's packets (`hushtrace-kernel`): the place of
/// [`OFF_VPID`], named `cpu_id` (LTTng's name) in that trace's metadata; the thread fields
/// after it are zero there.
pub const OFF_CPU_ID: usize = OFF_VPID;
/// Offset of the `u32` thread id.
pub const OFF_VTID: usize = 84;
/// Offset of the 16-byte NUL-padded thread name.
pub const OFF_PROCNAME: usize = 88;
/// Length of the thread name field.
pub const PROCNAME_LEN: usize = 16;
/// Offset of the `u64` `pthread_t` of the thread.
pub const OFF_PTHREAD_ID: usize = 104;
/// Size of packet header plus packet context.
pub const PACKET_HEADER_LEN: usize = 112;

/// Name of the metadata file in a trace directory.
pub const METADATA_FILE: &str = "metadata";
/// Prefix of stream file names in a trace directory (`stream_<instance id>`).
pub const STREAM_PREFIX: &str = "stream_";
/// In a process's trace directory: a file naming the directory that holds its ring files
/// (a private directory on a tmpfs when there is one, else a subdirectory of the trace
/// directory). Hidden (a leading dot), so that `babeltrace2`, which reads every other regular
/// file of a directory holding `metadata` as a CTF stream, skips it while the process runs or
/// after it was killed.
pub const RINGS_FILE: &str = ".rings";
/// The pointer file's name in traces of older versions (still read by recovery).
pub const LEGACY_RINGS_FILE: &str = "rings";
/// Per-process statistics file, written beside (not inside) the process's trace directory:
/// `<session dir>/<trace dir name>.stats.json`.
pub const STATS_SUFFIX: &str = ".stats.json";

/// Reads a little-endian `u64` at `off`; `None` when out of bounds.
#[inline]
pub fn read_u64(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Reads a little-endian `u32` at `off`; `None` when out of bounds.
#[inline]
pub fn read_u32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Reads a little-endian `u16` at `off`; `None` when out of bounds.
#[inline]
pub fn read_u16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

#[cfg(test)]
mod tests;
