//! Reading the complete events of the open packet from the consumer thread, without the
//! producer's help: the flush of idle threads (an event reaches the trace within the flush
//! interval although its packet never fills).
//!
//! # Protocol
//! The producer writes, when it opens packet `s`: the packet header, then `done = 0`, then
//! `open_seq = s` (Release); after each complete event at depth 1: `done = off` (Release). The
//! consumer loads `open_seq` (Acquire) → `s1`, `done` (Acquire) → `d`, `open_seq` again → `s2`.
//! The first Acquire makes `done = 0` of packet `s1` visible, so `d` was stored in packet `s1`
//! or later; the second makes that packet's `open_seq` store visible, so `s2` is at least the
//! packet `d` belongs to. `s1 == s2` therefore proves `d` belongs to packet `s1`, whose bytes
//! `[0, d)` the Acquire of `d` made visible. Those bytes are never written again until the
//! consumer releases the slot (after packet `s1` is committed and drained): the producer only
//! appends behind `d` and, when it finalizes, rewrites header fields (end time, sizes,
//! discarded count), which is why the header is copied with atomic byte loads.

#![allow(clippy::disallowed_methods)] // the consumer side: not the hot path

use super::Buffer;
use crate::primitive::{load_byte, Ordering};
use hushtrace_ctf::layout::{PacketHeader, PACKET_HEADER_LEN};
use hushtrace_ctf::ringfile::{OFF_DONE, OFF_OPEN_SEQ};

/// The complete part of a live ring's open packet.
#[derive(Debug)]
pub struct OpenPacket<'a> {
    /// Its sequence number in the ring.
    pub seq: u64,
    /// A copy of its header (packet header and context as written when it was opened).
    pub header: [u8; PACKET_HEADER_LEN],
    /// Its complete events: the bytes `[PACKET_HEADER_LEN, done)` of the packet.
    pub events: &'a [u8],
}

impl Buffer {
    /// Consumer thread, discard mode, buffer attached: the open packet's complete events, or
    /// `None` when no packet is open, none is complete, or the producer moved on meanwhile
    /// (try again later). The slice stays valid until the consumer drains that packet.
    pub(super) fn open_packet(&self) -> Option<OpenPacket<'_>> {
        let s1 = self.hdr_word(OFF_OPEN_SEQ).load(Ordering::Acquire);
        let done = self.hdr_word(OFF_DONE).load(Ordering::Acquire) as usize;
        let s2 = self.hdr_word(OFF_OPEN_SEQ).load(Ordering::Acquire);
        if s1 != s2 || done <= PACKET_HEADER_LEN || done > self.subbuf_size {
            return None;
        }
        // Only when every packet before `s1` was drained (the flush's packet goes between them
        // and the rest of `s1`) and `s1` is not committed yet (else the drain ships it; its
        // slot may even be reused: a buffer of an exited thread, or a recycled one). In this
        // order: `committed == s1`, then no packet ready, i.e. `consumed >= committed >= s1`;
        // only this thread moves `consumed`, so it is exactly `s1`.
        if self.handover.committed() != s1 || self.handover.ready().is_some() {
            return None;
        }
        let slot = (s1 % self.num_subbufs as u64) as usize;
        // SAFETY: `slot < num_subbufs`: inside the mapping.
        let base = unsafe { self.mem.add(slot * self.subbuf_size) };
        let mut header = [0u8; PACKET_HEADER_LEN];
        for (i, byte) in header.iter_mut().enumerate() {
            // SAFETY: inside the slot. Atomic loads: the producer may be finalizing the packet
            // (module docs).
            *byte = unsafe { load_byte(base.add(i)) };
        }
        if PacketHeader::decode(&header).map(|h| h.seq) != Some(s1) {
            return None;
        }
        // Loom: the event bytes read below must have been written before (their writes
        // happen-before the Acquire of `done`), and are not written again meanwhile.
        #[cfg(hushtrace_loom)]
        self.touch(slot, PACKET_HEADER_LEN, done - PACKET_HEADER_LEN, false);
        // SAFETY: bytes `[PACKET_HEADER_LEN, done)` of the open packet `s1` are complete and
        // not written again before the consumer (this thread) releases the slot (module docs).
        let events = unsafe {
            std::slice::from_raw_parts(base.add(PACKET_HEADER_LEN), done - PACKET_HEADER_LEN)
        };
        Some(OpenPacket {
            seq: s1,
            header,
            events,
        })
    }
}
