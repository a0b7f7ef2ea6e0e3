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

/// A ring file's magic (bytes 0..8 of the file; see [`crate::ringfile`]).
pub const RING_MAGIC: [u8; 8] = *b"HTRING01";
/// The ring file format version this crate writes and reads.
pub const RING_VERSION: u32 = 1;
/// Ring file header: offset of the 8-byte magic [`RING_MAGIC`].
pub const RING_OFF_MAGIC: usize = 0;
/// Ring file header: offset of the `u32` version ([`RING_VERSION`]).
pub const RING_OFF_VERSION: usize = 8;
/// Ring file header: offset of the `u32` mode (0 discard, 1 overwrite).
pub const RING_OFF_MODE: usize = 12;
/// Ring file header: offset of the `u64` slot (sub-buffer) size in bytes.
pub const RING_OFF_SUBBUF_SIZE: usize = 16;
/// Ring file header: offset of the `u64` number of slots.
pub const RING_OFF_NUM_SUBBUFS: usize = 24;
/// Ring file header: offset of the `u64` stream instance id.
pub const RING_OFF_INSTANCE: usize = 32;
/// Ring file header: offset of the `u32` pid of the process that wrote the ring.
pub const RING_OFF_PID: usize = 40;
/// Bytes of the fixed part of a ring file's header (what [`RingFileHeader`] encodes); the
/// words the producer and consumer update while the ring lives follow at 64 and up.
pub const RING_FIXED_LEN: usize = 44;

/// The fixed part of a ring file's header, written once by the process creating the ring and
/// read by crash recovery: the one codec of both (the ring file's own header, not a packet's).
/// Little-endian, at the `RING_OFF_*` offsets:
///
/// | offset | field |
/// |---|---|
/// | 0 | magic `HTRING01` |
/// | 8 | version (`u32`, [`RING_VERSION`]) |
/// | 12 | mode (`u32`: 0 discard, 1 overwrite; any other value reads as discard) |
/// | 16 | `subbuf_size` (`u64`) |
/// | 24 | `num_subbufs` (`u64`) |
/// | 32 | `instance` (`u64`) |
/// | 40 | `pid` (`u32`) |
///
/// ```
/// use hushtrace_ctf::layout::*;
/// let h = RingFileHeader { overwrite: true, subbuf_size: 4096, num_subbufs: 4, instance: 7, pid: 42 };
/// let b = h.encode();
/// assert_eq!(&b[..8], b"HTRING01");
/// assert_eq!(RingFileHeader::decode(&b), Ok(h));
/// assert_eq!(RingFileHeader::decode(&b[..20]), Err(RingFileHeaderError::Short { len: 20 }));
/// assert_eq!(RingFileHeader::decode(b"\x7fELF"), Err(RingFileHeaderError::BadMagic));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingFileHeader {
    /// Overwrite mode (else discard).
    pub overwrite: bool,
    /// Bytes per slot.
    pub subbuf_size: u64,
    /// Slots.
    pub num_subbufs: u64,
    /// Stream instance id (the `stream_<instance>` file).
    pub instance: u64,
    /// The process that wrote the ring.
    pub pid: u32,
}

/// Why bytes are not a ring file header [`RingFileHeader::decode`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingFileHeaderError {
    /// Fewer than [`RING_FIXED_LEN`] bytes.
    Short {
        /// Bytes given.
        len: usize,
    },
    /// The bytes do not start with [`RING_MAGIC`].
    BadMagic,
    /// A ring file of another format version.
    Version(u32),
}

impl std::fmt::Display for RingFileHeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingFileHeaderError::Short { len } => write!(
                f,
                "not a hushtrace ring file ({len} bytes, shorter than its header)"
            ),
            RingFileHeaderError::BadMagic => f.write_str("not a hushtrace ring file (bad magic)"),
            RingFileHeaderError::Version(v) => write!(f, "unsupported ring file version {v}"),
        }
    }
}

impl std::error::Error for RingFileHeaderError {}

impl RingFileHeader {
    /// Decodes the fixed header at the start of `b` (a ring file's first bytes). The magic and
    /// the version are checked; the geometry is the caller's to judge.
    pub fn decode(b: &[u8]) -> Result<RingFileHeader, RingFileHeaderError> {
        let short = RingFileHeaderError::Short { len: b.len() };
        let Some(b) = b.get(..RING_FIXED_LEN) else {
            // A short input that is not even a prefix of the magic is foreign rather than cut.
            let n = b.len().min(RING_MAGIC.len());
            return Err(if b[..n] == RING_MAGIC[..n] {
                short
            } else {
                RingFileHeaderError::BadMagic
            });
        };
        if b[RING_OFF_MAGIC..RING_OFF_MAGIC + 8] != RING_MAGIC {
            return Err(RingFileHeaderError::BadMagic);
        }
        let version = read_u32(b, RING_OFF_VERSION).ok_or(short)?;
        if version != RING_VERSION {
            return Err(RingFileHeaderError::Version(version));
        }
        Ok(RingFileHeader {
            overwrite: read_u32(b, RING_OFF_MODE).ok_or(short)? == 1,
            subbuf_size: read_u64(b, RING_OFF_SUBBUF_SIZE).ok_or(short)?,
            num_subbufs: read_u64(b, RING_OFF_NUM_SUBBUFS).ok_or(short)?,
            instance: read_u64(b, RING_OFF_INSTANCE).ok_or(short)?,
            pid: read_u32(b, RING_OFF_PID).ok_or(short)?,
        })
    }

    /// The encoded fixed header: magic, version and every field at its offset. A writer whose
    /// header page is shared memory stores it with one unaligned write of the array.
    pub fn encode(&self) -> [u8; RING_FIXED_LEN] {
        let mut b = [0u8; RING_FIXED_LEN];
        b[RING_OFF_MAGIC..RING_OFF_MAGIC + 8].copy_from_slice(&RING_MAGIC);
        let u32s = [
            (RING_OFF_VERSION, RING_VERSION),
            (RING_OFF_MODE, u32::from(self.overwrite)),
            (RING_OFF_PID, self.pid),
        ];
        for (off, v) in u32s {
            b[off..off + 4].copy_from_slice(&v.to_le_bytes());
        }
        let u64s = [
            (RING_OFF_SUBBUF_SIZE, self.subbuf_size),
            (RING_OFF_NUM_SUBBUFS, self.num_subbufs),
            (RING_OFF_INSTANCE, self.instance),
        ];
        for (off, v) in u64s {
            b[off..off + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
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
        assert_eq!(h.procname_lossy(), "worker-thread");
        let full = PacketHeader {
            procname: *b"sixteen-byte-nam",
            ..h
        };
        assert_eq!(
            full.procname_lossy(),
            "sixteen-byte-nam",
            "no NUL: all 16 bytes"
        );
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
        assert_eq!(PacketHeader::magic(&bad), Some(MAGIC ^ 1));
        assert_eq!(PacketHeader::magic(&b[..3]), None);
        assert_eq!(PacketHeader::stream_id(&b), Some(0));
        assert_eq!(PacketHeader::stream_id(&b[..OFF_STREAM_ID + 3]), None);
        let mut other = b;
        other[OFF_STREAM_ID] = 5;
        assert_eq!(PacketHeader::stream_id(&other), Some(5));
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

    fn ring_sample() -> RingFileHeader {
        RingFileHeader {
            overwrite: true,
            subbuf_size: 65536,
            num_subbufs: 8,
            instance: 42,
            pid: 1234,
        }
    }

    #[test]
    fn ring_file_header_roundtrips_at_the_documented_offsets() {
        for overwrite in [false, true] {
            let h = RingFileHeader {
                overwrite,
                ..ring_sample()
            };
            let b = h.encode();
            assert_eq!(RingFileHeader::decode(&b), Ok(h));
            assert_eq!(&b[RING_OFF_MAGIC..RING_OFF_MAGIC + 8], b"HTRING01");
            assert_eq!(read_u32(&b, RING_OFF_VERSION), Some(RING_VERSION));
            assert_eq!(read_u32(&b, RING_OFF_MODE), Some(u32::from(overwrite)));
            assert_eq!(read_u64(&b, RING_OFF_SUBBUF_SIZE), Some(65536));
            assert_eq!(read_u64(&b, RING_OFF_NUM_SUBBUFS), Some(8));
            assert_eq!(read_u64(&b, RING_OFF_INSTANCE), Some(42));
            assert_eq!(read_u32(&b, RING_OFF_PID), Some(1234));
        }
        // The fields tile the fixed part (which ends before the first live word: a
        // compile-time check in `ringfile`).
        assert_eq!(RING_OFF_PID + 4, RING_FIXED_LEN);
        // A whole header page decodes from its start; what follows is not read.
        let mut page = vec![0xeeu8; 4096];
        page[..RING_FIXED_LEN].copy_from_slice(&ring_sample().encode());
        assert_eq!(RingFileHeader::decode(&page), Ok(ring_sample()));
    }

    /// The bytes the runtime wrote before the codec existed (`ring.rs`' `write_ring_header`
    /// storing at the literal offsets 8, 12, 16, 24, 32, 40), hard-coded: ring files of older
    /// versions still decode to the same values.
    #[test]
    fn ring_file_header_written_by_the_literal_offset_code_decodes_the_same() {
        #[rustfmt::skip]
        let old: [u8; 48] = [
            b'H', b'T', b'R', b'I', b'N', b'G', b'0', b'1', // magic
            1, 0, 0, 0,                                     // version 1
            1, 0, 0, 0,                                     // mode: overwrite
            0x00, 0x00, 0x01, 0, 0, 0, 0, 0,                // subbuf_size 65536
            8, 0, 0, 0, 0, 0, 0, 0,                         // num_subbufs 8
            42, 0, 0, 0, 0, 0, 0, 0,                        // instance 42
            0xd2, 0x04, 0, 0,                               // pid 1234
            0, 0, 0, 0,                                     // (unused)
        ];
        assert_eq!(RingFileHeader::decode(&old), Ok(ring_sample()));
        assert_eq!(ring_sample().encode()[..], old[..RING_FIXED_LEN]);
        let mut discard = old;
        discard[RING_OFF_MODE] = 0;
        let h = RingFileHeader::decode(&discard).unwrap();
        assert!(!h.overwrite);
        // Any mode but 1 read as discard, as before.
        discard[RING_OFF_MODE] = 7;
        assert!(!RingFileHeader::decode(&discard).unwrap().overwrite);
    }

    #[test]
    fn short_or_foreign_ring_file_headers_are_clear_errors() {
        let b = ring_sample().encode();
        for n in [0, 1, 8, RING_FIXED_LEN - 1] {
            let e = RingFileHeader::decode(&b[..n]).unwrap_err();
            assert_eq!(e, RingFileHeaderError::Short { len: n });
            assert!(e.to_string().contains("shorter than its header"), "{e}");
        }
        // Foreign files: short or not, a wrong magic is named as such.
        assert_eq!(
            RingFileHeader::decode(b"\x7fELF"),
            Err(RingFileHeaderError::BadMagic)
        );
        let mut elf = [0u8; 4096];
        elf[..4].copy_from_slice(b"\x7fELF");
        let e = RingFileHeader::decode(&elf).unwrap_err();
        assert_eq!(e, RingFileHeaderError::BadMagic);
        assert_eq!(e.to_string(), "not a hushtrace ring file (bad magic)");
        let mut v2 = b;
        v2[RING_OFF_VERSION] = 2;
        let e = RingFileHeader::decode(&v2).unwrap_err();
        assert_eq!(e, RingFileHeaderError::Version(2));
        assert_eq!(e.to_string(), "unsupported ring file version 2");
        let mut magic = b;
        magic[7] = b'2';
        assert_eq!(
            RingFileHeader::decode(&magic),
            Err(RingFileHeaderError::BadMagic)
        );
    }
}
