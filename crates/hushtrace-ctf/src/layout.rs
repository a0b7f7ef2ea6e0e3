//! Binary layout of hushtrace packets and events.
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

/// Size of the compact event header: a `u32` of id (low byte) and timestamp low bits.
pub const COMPACT_HEADER_LEN: usize = 4;
/// Size of the extended event header: tag byte, `u16` id, `u64` timestamp.
pub const EXTENDED_HEADER_LEN: usize = 11;
/// First byte of an extended header (the compact form's ids stop below it).
pub const EXTENDED_TAG: u8 = 255;
/// Bits of the timestamp a compact header holds.
pub const COMPACT_TS_BITS: u32 = 24;

/// Whether an event with id `id` at `ts` cycles may have a compact header when the stream's
/// clock is at `prev` (the previous event's timestamp, or the packet's `timestamp_begin`):
/// the id fits in the low byte and `ts` is less than 2^24 cycles after `prev`. A writer may
/// compare against an older `prev` than the true one (it only chooses the extended form more
/// often); readers decode with the true one.
///
/// ```
/// use hushtrace_ctf::layout::compact_fits;
/// assert!(compact_fits(254, 1000 + (1 << 24) - 1, 1000));
/// assert!(!compact_fits(254, 1000 + (1 << 24), 1000));
/// assert!(!compact_fits(255, 1000, 1000));
/// assert!(!compact_fits(1, 999, 1000), "earlier than the clock: extended");
/// ```
#[inline(always)]
pub const fn compact_fits(id: u16, ts: u64, prev: u64) -> bool {
    id < EXTENDED_TAG as u16 && ts.wrapping_sub(prev) < 1 << COMPACT_TS_BITS
}

/// The compact header word of event `id` at `ts` (store it little-endian); only meaningful
/// when [`compact_fits`].
#[inline(always)]
pub const fn compact_word(id: u16, ts: u64) -> u32 {
    (ts as u32) << 8 | id as u32
}

/// The extended header of event `id` at `ts`: [`EXTENDED_TAG`], the `u16` id, the `u64`
/// timestamp, little-endian.
#[inline]
pub const fn extended_header(id: u16, ts: u64) -> [u8; EXTENDED_HEADER_LEN] {
    let (i, t) = (id.to_le_bytes(), ts.to_le_bytes());
    [
        EXTENDED_TAG,
        i[0],
        i[1],
        t[0],
        t[1],
        t[2],
        t[3],
        t[4],
        t[5],
        t[6],
        t[7],
    ]
}

/// Appends the header of event `id` at `ts` to `out`, in the compact form when it fits after
/// `prev` (see [`compact_fits`]), else extended. Returns the header's length.
pub fn push_event_header(out: &mut Vec<u8>, id: u16, ts: u64, prev: u64) -> usize {
    if compact_fits(id, ts, prev) {
        out.extend_from_slice(&compact_word(id, ts).to_le_bytes());
        COMPACT_HEADER_LEN
    } else {
        out.extend_from_slice(&extended_header(id, ts));
        EXTENDED_HEADER_LEN
    }
}

/// A decoded event header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventHeader {
    /// Event class id.
    pub id: u16,
    /// Timestamp in cycles, reconstructed against the stream's clock.
    pub ts: u64,
    /// Bytes of the header ([`COMPACT_HEADER_LEN`] or [`EXTENDED_HEADER_LEN`]); the fields
    /// follow.
    pub len: usize,
    /// Whether it is the compact form.
    pub compact: bool,
}

/// Decodes the event header at the start of `b` with the stream's clock at `prev` (the
/// previous event's timestamp, or the packet's `timestamp_begin` for its first event).
/// `None` when `b` is shorter than the header. Every byte pattern is a header: whether the id
/// names a known class is the caller's check.
///
/// ```
/// use hushtrace_ctf::layout::*;
/// let mut b = Vec::new();
/// push_event_header(&mut b, 7, 0x1_00ff_fff0, 0x1_00ff_ff00); // compact
/// push_event_header(&mut b, 300, 5, 0);                       // extended (id >= 255)
/// let h = parse_event_header(&b, 0x1_00ff_ff00).unwrap();
/// assert_eq!((h.id, h.ts, h.len), (7, 0x1_00ff_fff0, COMPACT_HEADER_LEN));
/// let h2 = parse_event_header(&b[h.len..], h.ts).unwrap();
/// assert_eq!((h2.id, h2.ts, h2.len), (300, 5, EXTENDED_HEADER_LEN));
/// assert_eq!(parse_event_header(&b[..3], 0), None);
/// ```
#[inline]
pub fn parse_event_header(b: &[u8], prev: u64) -> Option<EventHeader> {
    let word = read_u32(b, 0)?;
    let id = (word & 0xff) as u16;
    if id != EXTENDED_TAG as u16 {
        let mask = (1u64 << COMPACT_TS_BITS) - 1;
        let low = u64::from(word >> 8);
        let mut ts = (prev & !mask) | low;
        if low < prev & mask {
            ts = ts.wrapping_add(1 << COMPACT_TS_BITS);
        }
        return Some(EventHeader {
            id,
            ts,
            len: COMPACT_HEADER_LEN,
            compact: true,
        });
    }
    Some(EventHeader {
        id: read_u16(b, 1)?,
        ts: read_u64(b, 3)?,
        len: EXTENDED_HEADER_LEN,
        compact: false,
    })
}

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

/// A packet's header and context, decoded: the one codec every writer and reader of packet
/// headers uses (the event header's is [`push_event_header`] / [`parse_event_header`]).
///
/// ```
/// use hushtrace_ctf::layout::*;
/// let h = PacketHeader { seq: 3, timestamp_begin: 10, timestamp_end: 20, vtid: 7, ..Default::default() }
///     .with_len(PACKET_HEADER_LEN + 24);
/// let bytes = h.encode();
/// assert_eq!(read_u32(&bytes, OFF_MAGIC), Some(MAGIC));
/// assert_eq!(PacketHeader::decode(&bytes), Some(h));
/// assert_eq!(h.len(), PACKET_HEADER_LEN + 24);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketHeader {
    /// Trace UUID.
    pub uuid: [u8; 16],
    /// Stream instance id (names the stream file).
    pub stream_instance_id: u64,
    /// Packet start time, in clock cycles.
    pub timestamp_begin: u64,
    /// Packet end time, in clock cycles.
    pub timestamp_end: u64,
    /// Content size, in bits.
    pub content_size: u64,
    /// Packet size, in bits (always `content_size`: no padding).
    pub packet_size: u64,
    /// Per-stream sequence number.
    pub seq: u64,
    /// Cumulative events discarded in the stream.
    pub events_discarded: u64,
    /// Process id.
    pub vpid: u32,
    /// Thread id.
    pub vtid: u32,
    /// Thread name, NUL-padded.
    pub procname: [u8; PROCNAME_LEN],
    /// `pthread_t` of the thread.
    pub pthread_id: u64,
}

impl PacketHeader {
    /// Decodes the first [`PACKET_HEADER_LEN`] bytes of `b`; `None` when it is shorter. The
    /// magic and the stream id are not checked (see [`PacketHeader::magic_ok`]).
    pub fn decode(b: &[u8]) -> Option<PacketHeader> {
        let b = b.get(..PACKET_HEADER_LEN)?;
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[OFF_UUID..OFF_UUID + 16]);
        let mut procname = [0u8; PROCNAME_LEN];
        procname.copy_from_slice(&b[OFF_PROCNAME..OFF_PROCNAME + PROCNAME_LEN]);
        Some(PacketHeader {
            uuid,
            stream_instance_id: read_u64(b, OFF_STREAM_INSTANCE_ID)?,
            timestamp_begin: read_u64(b, OFF_TIMESTAMP_BEGIN)?,
            timestamp_end: read_u64(b, OFF_TIMESTAMP_END)?,
            content_size: read_u64(b, OFF_CONTENT_SIZE)?,
            packet_size: read_u64(b, OFF_PACKET_SIZE)?,
            seq: read_u64(b, OFF_PACKET_SEQ_NUM)?,
            events_discarded: read_u64(b, OFF_EVENTS_DISCARDED)?,
            vpid: read_u32(b, OFF_VPID)?,
            vtid: read_u32(b, OFF_VTID)?,
            procname,
            pthread_id: read_u64(b, OFF_PTHREAD_ID)?,
        })
    }

    /// The header with the fields of `end` set (end time, both sizes, discarded count).
    pub fn with_end(mut self, end: PacketEnd) -> PacketHeader {
        self.timestamp_end = end.timestamp_end;
        self.events_discarded = end.events_discarded;
        self.with_len(end.len as usize)
    }

    /// The fields a packet's writer sets when it closes it, as this header has them.
    pub fn end(&self) -> PacketEnd {
        PacketEnd {
            timestamp_end: self.timestamp_end,
            len: self.content_size / 8,
            events_discarded: self.events_discarded,
        }
    }

    /// Whether `b` starts with the packet magic.
    pub fn magic_ok(b: &[u8]) -> bool {
        read_u32(b, OFF_MAGIC) == Some(MAGIC)
    }

    /// The same header with both sizes set for a packet of `bytes` bytes (header included).
    pub fn with_len(mut self, bytes: usize) -> PacketHeader {
        self.content_size = bytes as u64 * 8;
        self.packet_size = self.content_size;
        self
    }

    /// The packet's length in bytes (`content_size / 8`).
    pub fn len(&self) -> usize {
        (self.content_size / 8) as usize
    }

    /// Whether the packet holds no byte (not even its header): a header never finalized.
    pub fn is_empty(&self) -> bool {
        self.content_size == 0
    }

    /// Writes the header (magic, stream id 0 and every field) over the first
    /// [`PACKET_HEADER_LEN`] bytes of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than [`PACKET_HEADER_LEN`].
    #[inline]
    pub fn write_to(&self, out: &mut [u8]) {
        let out = &mut out[..PACKET_HEADER_LEN];
        out[OFF_MAGIC..OFF_MAGIC + 4].copy_from_slice(&MAGIC.to_le_bytes());
        out[OFF_UUID..OFF_UUID + 16].copy_from_slice(&self.uuid);
        out[OFF_STREAM_ID..OFF_STREAM_ID + 4].copy_from_slice(&0u32.to_le_bytes());
        let u64s = [
            (OFF_STREAM_INSTANCE_ID, self.stream_instance_id),
            (OFF_TIMESTAMP_BEGIN, self.timestamp_begin),
            (OFF_TIMESTAMP_END, self.timestamp_end),
            (OFF_CONTENT_SIZE, self.content_size),
            (OFF_PACKET_SIZE, self.packet_size),
            (OFF_PACKET_SEQ_NUM, self.seq),
            (OFF_EVENTS_DISCARDED, self.events_discarded),
            (OFF_PTHREAD_ID, self.pthread_id),
        ];
        for (off, v) in u64s {
            out[off..off + 8].copy_from_slice(&v.to_le_bytes());
        }
        out[OFF_VPID..OFF_VPID + 4].copy_from_slice(&self.vpid.to_le_bytes());
        out[OFF_VTID..OFF_VTID + 4].copy_from_slice(&self.vtid.to_le_bytes());
        out[OFF_PROCNAME..OFF_PROCNAME + PROCNAME_LEN].copy_from_slice(&self.procname);
    }

    /// The encoded header. A writer whose packet memory other threads may read stores it
    /// with one unaligned write of the array.
    #[inline]
    pub fn encode(&self) -> [u8; PACKET_HEADER_LEN] {
        let mut b = [0u8; PACKET_HEADER_LEN];
        self.write_to(&mut b);
        b
    }
}

/// The fields the writer of a packet sets when it closes the packet, which it opened with both
/// sizes 0 (not finalized: what crash recovery cuts itself): the end time, both sizes, the
/// stream's discarded count. [`PacketHeader::with_end`] sets them in a decoded header;
/// [`PacketEnd::words`] gives them as stores for a writer whose packet memory other threads
/// read (the runtime's ring, at every packet switch), [`PacketEnd::write_to`] into bytes.
///
/// ```
/// use hushtrace_ctf::layout::*;
/// let end = PacketEnd { timestamp_end: 99, len: 200, events_discarded: 3 };
/// let mut b = PacketHeader { seq: 1, ..Default::default() }.encode().to_vec();
/// b.resize(200, 0);
/// end.write_to(&mut b);
/// let h = PacketHeader::decode(&b).unwrap();
/// assert_eq!((h.timestamp_end, h.len(), h.events_discarded, h.seq), (99, 200, 3, 1));
/// assert_eq!(h.end(), end);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketEnd {
    /// Packet end time, in clock cycles.
    pub timestamp_end: u64,
    /// The packet's length in bytes, header included (both sizes are `len * 8` bits).
    pub len: u64,
    /// Cumulative events discarded in the stream.
    pub events_discarded: u64,
}

impl PacketEnd {
    /// The header words closing a packet sets: `(offset, value)`, each a little-endian `u64`
    /// at `packet + offset`. Constant offsets: a writer storing them itself compiles to as
    /// many plain stores.
    #[inline(always)]
    pub const fn words(&self) -> [(usize, u64); 4] {
        let bits = self.len.wrapping_mul(8);
        [
            (OFF_TIMESTAMP_END, self.timestamp_end),
            (OFF_CONTENT_SIZE, bits),
            (OFF_PACKET_SIZE, bits),
            (OFF_EVENTS_DISCARDED, self.events_discarded),
        ]
    }

    /// Stores [`PacketEnd::words`] into the header at the start of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than [`PACKET_HEADER_LEN`].
    #[inline]
    pub fn write_to(&self, out: &mut [u8]) {
        let out = &mut out[..PACKET_HEADER_LEN];
        for (off, v) in self.words() {
            out[off..off + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 24;

    fn roundtrip(id: u16, ts: u64, prev: u64) -> EventHeader {
        let mut b = Vec::new();
        let n = push_event_header(&mut b, id, ts, prev);
        assert_eq!(n, b.len());
        let h = parse_event_header(&b, prev).unwrap();
        assert_eq!(
            (h.id, h.ts, h.len),
            (id, ts, n),
            "id {id} ts {ts:#x} prev {prev:#x}"
        );
        h
    }

    #[test]
    fn delta_just_below_two_to_the_24_is_compact_and_two_to_the_24_is_extended() {
        for prev in [0, 1, M - 1, M, 5 * M + 12_345, u64::MAX / 2, u64::MAX - M] {
            assert!(roundtrip(3, prev + M - 1, prev).compact, "prev {prev:#x}");
            assert!(!roundtrip(3, prev + M, prev).compact, "prev {prev:#x}");
            assert!(roundtrip(3, prev, prev).compact, "delta 0");
        }
    }

    #[test]
    fn low_bits_wrapping_carry_into_the_high_bits() {
        // Current low bits near the top: the next event's low bits are smaller, so the
        // decoder adds 2^24.
        let prev = 7 * M + (M - 2);
        let h = roundtrip(1, 8 * M + 5, prev);
        assert!(h.compact);
        // Exactly at the wrap and one below it.
        assert!(roundtrip(1, 8 * M, prev).compact);
        assert!(roundtrip(1, 8 * M - 1, prev).compact);
        // The whole 64-bit range wraps the same way (wrapping arithmetic, as babeltrace2).
        let h = roundtrip(2, 3, u64::MAX - 1);
        assert!(h.compact);
    }

    #[test]
    fn id_255_and_up_and_going_backwards_are_extended() {
        assert!(!roundtrip(255, 10, 10).compact);
        assert!(!roundtrip(u16::MAX, 10, 10).compact);
        assert!(roundtrip(254, 10, 10).compact);
        assert!(!roundtrip(4, 9, 10).compact, "earlier than the clock");
    }

    #[test]
    fn compact_word_layout() {
        // id in the low byte, the timestamp's low 24 bits above it, little-endian.
        assert_eq!(
            compact_word(0xab, 0x7712_3456).to_le_bytes(),
            [0xab, 0x56, 0x34, 0x12]
        );
        let mut b = Vec::new();
        push_event_header(&mut b, 0x1234, 0x0102_0304_0506_0708, 0);
        assert_eq!(
            b,
            [255, 0x34, 0x12, 8, 7, 6, 5, 4, 3, 2, 1],
            "tag, u16 id, u64 timestamp"
        );
    }

    #[test]
    fn short_input_is_none() {
        assert_eq!(parse_event_header(&[], 0), None);
        assert_eq!(parse_event_header(&[1, 2, 3], 0), None);
        assert!(parse_event_header(&[1, 2, 3, 4], 0).is_some());
        assert_eq!(
            parse_event_header(&[255, 1, 0, 0, 0, 0, 0, 0, 0, 0], 0),
            None
        );
        assert!(parse_event_header(&[255; 11], 0).is_some());
    }

    fn sample() -> PacketHeader {
        PacketHeader {
            uuid: [7; 16],
            stream_instance_id: 0x0102_0304_0506_0708,
            timestamp_begin: 11,
            timestamp_end: 12,
            content_size: 13,
            packet_size: 14,
            seq: 15,
            events_discarded: 16,
            vpid: 17,
            vtid: 18,
            procname: *b"worker-thread\0\0\0",
            pthread_id: 19,
        }
    }

    #[test]
    fn packet_header_roundtrips_at_the_documented_offsets() {
        let h = sample();
        let b = h.encode();
        assert_eq!(PacketHeader::decode(&b), Some(h));
        assert!(PacketHeader::magic_ok(&b));
        assert_eq!(&b[OFF_MAGIC..OFF_MAGIC + 4], &MAGIC.to_le_bytes());
        assert_eq!(&b[OFF_UUID..OFF_UUID + 16], &[7; 16]);
        assert_eq!(read_u32(&b, OFF_STREAM_ID), Some(0));
        for (off, v) in [
            (OFF_STREAM_INSTANCE_ID, 0x0102_0304_0506_0708),
            (OFF_TIMESTAMP_BEGIN, 11),
            (OFF_TIMESTAMP_END, 12),
            (OFF_CONTENT_SIZE, 13),
            (OFF_PACKET_SIZE, 14),
            (OFF_PACKET_SEQ_NUM, 15),
            (OFF_EVENTS_DISCARDED, 16),
            (OFF_PTHREAD_ID, 19),
        ] {
            assert_eq!(read_u64(&b, off), Some(v), "offset {off}");
        }
        assert_eq!(read_u32(&b, OFF_VPID), Some(17));
        assert_eq!(read_u32(&b, OFF_VTID), Some(18));
        assert_eq!(&b[OFF_PROCNAME..OFF_PROCNAME + 13], b"worker-thread");
        // The fields tile the header: no gap, no overlap.
        assert_eq!(OFF_PTHREAD_ID + 8, PACKET_HEADER_LEN);
        // write_to leaves the bytes after the header alone.
        let mut big = [0xeeu8; PACKET_HEADER_LEN + 4];
        h.write_to(&mut big);
        assert_eq!(&big[..PACKET_HEADER_LEN], &b[..]);
        assert_eq!(big[PACKET_HEADER_LEN..], [0xee; 4]);
    }

    #[test]
    fn short_or_foreign_packet_headers() {
        let b = sample().encode();
        assert_eq!(PacketHeader::decode(&b[..PACKET_HEADER_LEN - 1]), None);
        assert_eq!(PacketHeader::decode(&[]), None);
        assert!(!PacketHeader::magic_ok(&b[..3]));
        let mut bad = b;
        bad[0] ^= 1;
        assert!(!PacketHeader::magic_ok(&bad));
        // Any bytes decode (the magic is the caller's check).
        assert!(PacketHeader::decode(&bad).is_some());
    }

    #[test]
    fn packet_end_stores_exactly_its_fields() {
        let h = sample();
        let end = PacketEnd {
            timestamp_end: 900,
            len: 4096,
            events_discarded: 5,
        };
        let mut b = h.encode();
        end.write_to(&mut b);
        // The words and the decoded header's setter agree; nothing else changed.
        assert_eq!(PacketHeader::decode(&b), Some(h.with_end(end)));
        assert_eq!(h.with_end(end).end(), end);
        let mut by_words = h.encode();
        for (off, v) in end.words() {
            by_words[off..off + 8].copy_from_slice(&v.to_le_bytes());
        }
        assert_eq!(by_words, b);
        let changed: Vec<usize> = (0..PACKET_HEADER_LEN)
            .filter(|&i| h.encode()[i] != b[i])
            .collect();
        assert!(changed
            .iter()
            .all(|&i| (OFF_TIMESTAMP_END..OFF_PACKET_SEQ_NUM).contains(&i)
                || (OFF_EVENTS_DISCARDED..OFF_EVENTS_DISCARDED + 8).contains(&i)));
        assert_eq!(h.with_end(end).len(), 4096);
        assert_eq!(h.with_end(end).packet_size, 4096 * 8);
    }
}
