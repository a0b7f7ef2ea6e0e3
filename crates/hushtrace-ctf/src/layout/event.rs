//! The event header codec: the compact and extended forms, written and parsed.

use super::*;

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
