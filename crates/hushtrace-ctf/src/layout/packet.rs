//! The packet header and context codec: [`PacketHeader`], and [`PacketEnd`] for the fields closing
//! a packet sets.

use super::*;

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
        let b: &[u8; PACKET_HEADER_LEN] = b.get(..PACKET_HEADER_LEN)?.try_into().ok()?;
        Some(PacketHeader::from_bytes(b))
    }

    /// Decodes a whole encoded header (infallible: every byte pattern is a header; the magic
    /// and the stream id are the caller's checks, as for [`PacketHeader::decode`]).
    pub fn from_bytes(b: &[u8; PACKET_HEADER_LEN]) -> PacketHeader {
        let u64_at = |off: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[off..off + 8]);
            u64::from_le_bytes(w)
        };
        let u32_at = |off: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&b[off..off + 4]);
            u32::from_le_bytes(w)
        };
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[OFF_UUID..OFF_UUID + 16]);
        let mut procname = [0u8; PROCNAME_LEN];
        procname.copy_from_slice(&b[OFF_PROCNAME..OFF_PROCNAME + PROCNAME_LEN]);
        PacketHeader {
            uuid,
            stream_instance_id: u64_at(OFF_STREAM_INSTANCE_ID),
            timestamp_begin: u64_at(OFF_TIMESTAMP_BEGIN),
            timestamp_end: u64_at(OFF_TIMESTAMP_END),
            content_size: u64_at(OFF_CONTENT_SIZE),
            packet_size: u64_at(OFF_PACKET_SIZE),
            seq: u64_at(OFF_PACKET_SEQ_NUM),
            events_discarded: u64_at(OFF_EVENTS_DISCARDED),
            vpid: u32_at(OFF_VPID),
            vtid: u32_at(OFF_VTID),
            procname,
            pthread_id: u64_at(OFF_PTHREAD_ID),
        }
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
        Self::magic(b) == Some(MAGIC)
    }

    /// The `u32` at the magic's place in `b` (for a reader naming what it found instead);
    /// `None` when `b` is shorter.
    pub fn magic(b: &[u8]) -> Option<u32> {
        read_u32(b, OFF_MAGIC)
    }

    /// The stream class id in the packet header at the start of `b` (hushtrace writes 0,
    /// the only stream class of its metadata; a reader checks it); `None` when `b` is shorter.
    pub fn stream_id(b: &[u8]) -> Option<u32> {
        read_u32(b, OFF_STREAM_ID)
    }

    /// The thread name, up to its first NUL (invalid UTF-8 replaced).
    pub fn procname_lossy(&self) -> String {
        let n = self
            .procname
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(PROCNAME_LEN);
        String::from_utf8_lossy(&self.procname[..n]).into_owned()
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
