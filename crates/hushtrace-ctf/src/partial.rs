//! The rest of a packet that the flush of idle threads shipped in part, and the renumbering of
//! a stream's packets after it: one pure function ([`rest_of_packet`]) used by the live
//! consumer and by crash recovery ([`crate::ringfile`]), so both write the same bytes.
//!
//! The flush ships the complete events of an open packet as a packet of its own. When the
//! producer later finalizes that packet, the stream gets only its remaining events, under the
//! same header with its begin time moved to the last shipped event (and its end time never
//! before it). Every packet after a flushed one has its `packet_seq_num` raised by the number
//! of packets the flush added (`extra`), so sequence numbers still rise by one per packet
//! (readers count gaps as lost packets) and nothing is written twice.
//!
//! ```
//! use hushtrace_ctf::layout::{PacketHeader, PACKET_HEADER_LEN};
//! use hushtrace_ctf::partial::{rest_of_packet, Renumber, Shipped};
//! let mut p = PacketHeader { seq: 4, timestamp_begin: 10, timestamp_end: 50, ..Default::default() }
//!     .with_len(PACKET_HEADER_LEN + 30)
//!     .encode()
//!     .to_vec();
//! p.extend_from_slice(&[7; 30]);
//! let shipped = Shipped { seq: 4, off: PACKET_HEADER_LEN + 10, last_ts: 20 };
//! let rest = rest_of_packet(&p, &Renumber { extra: 2, shipped: Some(shipped) });
//! let h = PacketHeader::decode(&rest.header).unwrap();
//! assert_eq!((h.seq, h.timestamp_begin, h.timestamp_end), (6, 20, 50));
//! assert_eq!(rest.body, PACKET_HEADER_LEN + 10..PACKET_HEADER_LEN + 30);
//! assert_eq!(h.content_size, (PACKET_HEADER_LEN as u64 + 20) * 8);
//! assert!(rest.cut);
//! ```

use crate::layout::{PacketHeader, PACKET_HEADER_LEN};
use std::ops::Range;

/// What the flush shipped of one open packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shipped {
    /// The packet's sequence number in the ring.
    pub seq: u64,
    /// How far it was shipped: bytes from the packet start (header included).
    pub off: usize,
    /// The last shipped event's timestamp: where the rest begins.
    pub last_ts: u64,
}

/// What the flush changed in one stream so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Renumber {
    /// Packets the flush added (raises every later packet's sequence number).
    pub extra: u64,
    /// The open packet shipped in part, if any.
    pub shipped: Option<Shipped>,
}

impl Renumber {
    /// Whether packet `seq` of the ring goes to the stream file as it is (the common case:
    /// no flush ever happened in this stream).
    pub fn unchanged(&self, seq: u64) -> bool {
        self.extra == 0 && self.shipped.is_none_or(|s| s.seq != seq)
    }
}

/// Packet `p` as its stream file gets it: [`Rest::header`] followed by `p[body]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rest {
    /// The packet header and context, renumbered (and, when cut, with the rest's begin and end
    /// times and sizes).
    pub header: [u8; PACKET_HEADER_LEN],
    /// The bytes of `p` after the header that the stream gets.
    pub body: Range<usize>,
    /// Whether the flush had shipped the packet's start (the caller subtracts the shipped
    /// events from its count).
    pub cut: bool,
}

/// The rest of packet `p` (a finalized packet as the ring holds it, or the complete part of
/// an open one) after what `r` says the flush did to its stream:
///
/// * its `packet_seq_num` raised by `r.extra`;
/// * if `r.shipped` names it, only the bytes from `shipped.off` on (clamped to the packet:
///   an offset inside the header keeps every event, one past the end keeps none), its
///   `timestamp_begin` the last shipped event's time, its `timestamp_end` never earlier than
///   that, its sizes those of the rest.
///
/// Every other header field is kept. A `p` shorter than a packet header is returned as an
/// empty rest of a zeroed header (never a panic): the callers only pass packets.
pub fn rest_of_packet(p: &[u8], r: &Renumber) -> Rest {
    let Some(mut h) = PacketHeader::decode(p) else {
        return Rest {
            header: [0; PACKET_HEADER_LEN],
            body: 0..0,
            cut: false,
        };
    };
    let seq = h.seq;
    let mut from = PACKET_HEADER_LEN;
    let shipped = r.shipped.filter(|s| s.seq == seq);
    if let Some(s) = shipped {
        from = s.off.clamp(PACKET_HEADER_LEN, p.len());
        h.timestamp_begin = s.last_ts;
        h.timestamp_end = h.timestamp_end.max(s.last_ts);
    }
    h.seq = seq.wrapping_add(r.extra);
    let body = from..p.len();
    let h = h.with_len(PACKET_HEADER_LEN + body.len());
    let mut header = [0u8; PACKET_HEADER_LEN];
    // Bytes the codec does not model (none today) are kept as the ring wrote them.
    header.copy_from_slice(&p[..PACKET_HEADER_LEN]);
    h.write_to(&mut header);
    Rest {
        header,
        body,
        cut: shipped.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{MAGIC, OFF_MAGIC};

    fn packet(seq: u64, begin: u64, end: u64, body: &[u8]) -> Vec<u8> {
        let mut p = PacketHeader {
            seq,
            timestamp_begin: begin,
            timestamp_end: end,
            events_discarded: 3,
            vtid: 42,
            ..PacketHeader::default()
        }
        .with_len(PACKET_HEADER_LEN + body.len())
        .encode()
        .to_vec();
        p.extend_from_slice(body);
        p
    }

    /// Renumbering by `extra` after events of packet `seq` were shipped up to `off`, the last
    /// of them at `last_ts`.
    fn shipped(extra: u64, seq: u64, off: usize, last_ts: u64) -> Renumber {
        Renumber {
            extra,
            shipped: Some(Shipped { seq, off, last_ts }),
        }
    }

    fn join(p: &[u8], r: &Rest) -> Vec<u8> {
        let mut v = r.header.to_vec();
        v.extend_from_slice(&p[r.body.clone()]);
        v
    }

    #[test]
    fn no_flush_keeps_the_packet_byte_for_byte() {
        let p = packet(9, 100, 200, b"abcdef");
        let r = Renumber::default();
        assert!(r.unchanged(9));
        let rest = rest_of_packet(&p, &r);
        assert_eq!(join(&p, &rest), p);
        assert!(!rest.cut);
    }

    #[test]
    fn extra_renumbers_only() {
        let p = packet(9, 100, 200, b"abcdef");
        let r = Renumber {
            extra: 5,
            shipped: None,
        };
        assert!(!r.unchanged(9));
        let rest = rest_of_packet(&p, &r);
        let h = PacketHeader::decode(&rest.header).unwrap();
        assert_eq!(h.seq, 14);
        assert_eq!((h.timestamp_begin, h.timestamp_end), (100, 200));
        assert_eq!(h.content_size, p.len() as u64 * 8);
        assert_eq!(h.events_discarded, 3);
        assert_eq!(h.vtid, 42);
        assert_eq!(rest.body, PACKET_HEADER_LEN..p.len());
    }

    #[test]
    fn shipped_start_is_cut_and_the_clock_moves_to_the_last_shipped_event() {
        let p = packet(9, 100, 200, b"abcdef");
        let r = shipped(1, 9, PACKET_HEADER_LEN + 4, 150);
        let rest = rest_of_packet(&p, &r);
        assert!(rest.cut);
        let out = join(&p, &rest);
        assert_eq!(&out[PACKET_HEADER_LEN..], b"ef");
        let h = PacketHeader::decode(&out).unwrap();
        assert_eq!((h.seq, h.timestamp_begin, h.timestamp_end), (10, 150, 200));
        assert_eq!(h.content_size, out.len() as u64 * 8);
        assert_eq!(h.packet_size, h.content_size);
        assert_eq!(read_magic(&out), Some(MAGIC));
    }

    fn read_magic(b: &[u8]) -> Option<u32> {
        crate::layout::read_u32(b, OFF_MAGIC)
    }

    /// The live path used to clamp the end time, recovery did not: both clamp now.
    #[test]
    fn end_time_is_never_before_the_new_begin() {
        let p = packet(2, 100, 120, b"xyz");
        let r = shipped(0, 2, PACKET_HEADER_LEN + 3, 130);
        let h = PacketHeader::decode(&rest_of_packet(&p, &r).header).unwrap();
        assert_eq!((h.timestamp_begin, h.timestamp_end), (130, 130));
    }

    #[test]
    fn shipped_for_another_packet_only_renumbers() {
        let p = packet(3, 100, 200, b"abc");
        let r = shipped(2, 4, PACKET_HEADER_LEN + 1, 150);
        assert!(!r.unchanged(3));
        let rest = rest_of_packet(&p, &r);
        assert!(!rest.cut);
        assert_eq!(rest.body, PACKET_HEADER_LEN..p.len());
        let h = PacketHeader::decode(&rest.header).unwrap();
        assert_eq!((h.seq, h.timestamp_begin), (5, 100));
    }

    #[test]
    fn offsets_out_of_the_packet_are_clamped() {
        let p = packet(1, 100, 200, b"abcd");
        let at = |off| rest_of_packet(&p, &shipped(0, 1, off, 110));
        // Inside the header: every event is kept.
        assert_eq!(at(3).body, PACKET_HEADER_LEN..p.len());
        // Exactly at the end, and past it: an empty rest (a header-only packet).
        for off in [p.len(), p.len() + 100, usize::MAX] {
            let r = at(off);
            assert_eq!(r.body, p.len()..p.len());
            let h = PacketHeader::decode(&r.header).unwrap();
            assert_eq!(h.content_size, PACKET_HEADER_LEN as u64 * 8);
        }
    }

    #[test]
    fn short_input_is_an_empty_rest_not_a_panic() {
        let r = rest_of_packet(&[1, 2, 3], &Renumber::default());
        assert_eq!(r.body, 0..0);
        assert!(!r.cut);
    }

    #[test]
    fn sequence_numbers_wrap_instead_of_overflowing() {
        let p = packet(u64::MAX, 1, 2, b"");
        let r = Renumber {
            extra: 2,
            shipped: None,
        };
        let h = PacketHeader::decode(&rest_of_packet(&p, &r).header).unwrap();
        assert_eq!(h.seq, 1);
    }
}
