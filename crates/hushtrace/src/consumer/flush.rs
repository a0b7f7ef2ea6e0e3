//! The flush of idle threads (discard mode, when an output wants it or the session set a
//! flush interval): an event reaches the outputs within about one interval although its packet
//! never fills.
//!
//! The flush ships the complete events of an open packet as a packet of their own, and when
//! the producer later finalizes that packet, only its remaining events are written, under the
//! same header with its begin time moved to the last shipped event. Every packet written after
//! a flushed one has its `packet_seq_num` raised by the number of packets the flush added
//! (`extra`), so each stream's sequence numbers still rise by one per packet (readers count
//! gaps as lost packets), and nothing is written twice
//! (`hushtrace_ctf::partial`, shared with crash recovery). Timestamps stay ordered: events
//! are placed in a packet in timestamp order, and a flushed packet ends at its last event's
//! timestamp, where the next part begins.

use super::sink::Packet;
use super::Consumer;
use crate::clock;
use crate::ring::{BufState, Buffer, ConsumerKey, Mode};
use hushtrace_ctf::layout::{PacketHeader, PACKET_HEADER_LEN};
use hushtrace_ctf::partial::{Renumber, Shipped};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// What the flush did to one stream (buffer instance).
#[derive(Debug, Default)]
pub(super) struct StreamOut {
    /// Packets added so far, and the open packet shipped in part.
    pub renumber: Renumber,
    /// Events of that packet shipped already.
    pub shipped_events: u64,
    /// `events_discarded` of the last packet written.
    pub discarded: u64,
    /// `done` seen by the last flush pass (for idle detection: live beacons).
    pub last_done: Option<(u64, usize)>,
}

impl Consumer {
    /// Ships the complete events of each live buffer's open packet that were not shipped yet
    /// as a packet of their own, and sends live beacons for streams with nothing new.
    pub(super) fn flush_open_packets(&mut self, bufs: &[Arc<Buffer>]) {
        let every = self.shared.cfg.flush_interval;
        let wanted = self.sinks.iter().any(|s| s.wants_flush()) || self.shared.cfg.flush_explicit;
        if !wanted || every.is_zero() || self.shared.cfg.mode != Mode::Discard {
            return;
        }
        // Twice per interval: an event waits at most about one interval.
        if self.last_flush.elapsed() < every / 2 {
            return;
        }
        self.last_flush = Instant::now();
        // Read before any `done`: no event completed after this time is in a flushed packet.
        let now = clock::cycles_or_fallback();
        let mut idle = Vec::new();
        for b in bufs {
            if self.flush_one(b) == Flushed::Idle {
                idle.push(b.instance);
            }
        }
        for s in &mut self.sinks {
            for &instance in &idle {
                s.beacon(instance, now);
            }
        }
    }

    /// Ships the complete events of `b`'s open packet not shipped yet (see
    /// [`Consumer::flush_open_packets`]; also a late-span capture's, `late.rs`).
    pub(super) fn flush_one(&mut self, b: &Buffer) -> Flushed {
        if b.state.load(Ordering::Acquire) != BufState::Attached {
            return Flushed::Idle;
        }
        let Some(open) = ConsumerKey::new(&self.right, b).open_packet() else {
            return Flushed::Idle;
        };
        let st = self.out.entry(b.instance).or_default();
        if st.renumber.shipped.is_some_and(|p| p.seq != open.seq) {
            return Flushed::NotNow; // the earlier packet's rest is not written yet
        }
        let done = (open.seq, PACKET_HEADER_LEN + open.events.len());
        let moved = st.last_done != Some(done);
        st.last_done = Some(done);
        let prev = st.renumber.shipped.filter(|p| p.seq == open.seq);
        let from = prev.map_or(PACKET_HEADER_LEN, |p| p.off);
        let body = open.events.get(from - PACKET_HEADER_LEN..).unwrap_or(&[]);
        let Some(mut h) = PacketHeader::decode(&open.header) else {
            return Flushed::NotNow;
        };
        // The stream's clock where `body` starts: the packet's begin time, or the last
        // event shipped of it (compact headers are relative to it).
        let begin = prev.map_or(h.timestamp_begin, |p| p.last_ts);
        let w = self.desc.walk_events(body, begin);
        let (len, n, last_ts) = (w.len, w.events, w.clock.max(begin));
        if n == 0 {
            return if moved {
                Flushed::NotNow
            } else {
                Flushed::Idle
            };
        }
        h.timestamp_begin = begin;
        h.timestamp_end = last_ts;
        h.seq = open.seq + st.renumber.extra;
        h.events_discarded = st.discarded;
        let header = h.with_len(PACKET_HEADER_LEN + len).encode();
        st.renumber.extra += 1;
        st.renumber.shipped = Some(Shipped {
            seq: open.seq,
            off: from + len,
            last_ts,
        });
        st.shipped_events += n;
        ConsumerKey::new(&self.right, b).set_flush_state(
            st.renumber.extra,
            Some((open.seq, (from + len) as u64, last_ts)),
        );
        self.deliver(&Packet {
            instance: b.instance,
            header: &header,
            body: &body[..len],
            events: n,
        });
        Flushed::Shipped
    }
}

/// What [`Consumer::flush_one`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flushed {
    /// Nothing to ship: the stream is idle (a beacon may say so).
    Idle,
    /// Nothing shipped now (the open packet moved, or an earlier part is still pending).
    NotNow,
    /// Complete events were shipped.
    Shipped,
}
