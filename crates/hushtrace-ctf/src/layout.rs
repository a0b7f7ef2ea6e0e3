//! Binary layout of hushtrace packets and events.
//!
//! Everything is little-endian and byte-aligned (CTF `align = 8` bits), so no padding ever
//! appears between fields.
//!
//! A packet (one sub-buffer) is [`PACKET_HEADER_LEN`] bytes of header and context followed by
//! events. An event is [`EVENT_HEADER_LEN`] bytes of header (`u16` id, `u64` timestamp in clock
//! cycles) followed by its fields in declaration order. `packet_size == content_size` always:
//! packets are written without padding.

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

/// Offset of the `u16` event id inside an event.
pub const OFF_EVENT_ID: usize = 0;
/// Offset of the `u64` timestamp inside an event.
pub const OFF_EVENT_TIMESTAMP: usize = 2;
/// Size of the event header.
pub const EVENT_HEADER_LEN: usize = 10;

/// Name of the metadata file in a trace directory.
pub const METADATA_FILE: &str = "metadata";
/// Prefix of stream file names in a trace directory (`stream_<instance id>`).
pub const STREAM_PREFIX: &str = "stream_";
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
