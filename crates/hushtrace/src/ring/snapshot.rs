//! Reading a live ring from the consumer thread without stopping its producer: the snapshot
//! of the flight recorder and the `status` of `hushtrace ctl`.
//!
//! # The snapshot of a live overwrite-mode ring
//! A snapshot holds everything the thread recorded up to the moment it is taken, whatever
//! the thread is doing then (tracing, or blocked right after its last event): the newest
//! committed packets, and the complete events of the open packet as a packet of their own.
//! The open packet is read as the flush of idle threads reads it (`ring/flush.rs`): `open_seq`,
//! `done`, `open_seq` again (Acquire) name a packet `s` and its complete bytes `[0, done)`;
//! with `committed == s` the packets before it are the committed ones. The producer never
//! rewrites those bytes until it reuses the slot for packet `s + n` (it only appends behind
//! `done`, and its finalize rewrites header fields the copy replaces), which needs
//! `committed >= s + n`: as for the committed packets, a copy after which `committed` reached
//! that is dropped (seqlock style), and so is one whose header names another packet.
//! No system call, no request to the producer, no waiting.

#![allow(clippy::disallowed_methods)] // the consumer side: not the hot path

use super::{Buffer, ConsumerKey, Ident};
use crate::primitive::{fence, load_byte, Ordering};
use hushtrace_ctf::layout::{PacketEnd, PacketHeader, PACKET_HEADER_LEN};
use hushtrace_ctf::metadata::TraceDesc;
use hushtrace_ctf::ringfile::{OFF_DISCARDED, OFF_DONE, OFF_OPEN_SEQ};

impl Buffer {
    /// The identity the producer writes into its packets.
    pub(crate) fn ident(&self) -> Ident {
        self.producer.ident.get()
    }

    /// Consumer: records in the ring header what the flush of idle threads did to this stream
    /// (packets added, the packet shipped in part), for crash recovery.
    pub(crate) fn set_flush_state(
        &self,
        _key: &ConsumerKey,
        extra: u64,
        partial: Option<(u64, u64, u64)>,
    ) {
        use hushtrace_ctf::ringfile::{
            OFF_FLUSH_EXTRA, OFF_FLUSH_OFF, OFF_FLUSH_SEQ, OFF_FLUSH_TS,
        };
        let (seq1, off, ts) = partial.map_or((0, 0, 0), |(s, o, t)| (s + 1, o, t));
        self.hdr_word(OFF_FLUSH_OFF).store(off, Ordering::Relaxed);
        self.hdr_word(OFF_FLUSH_TS).store(ts, Ordering::Relaxed);
        self.hdr_word(OFF_FLUSH_EXTRA)
            .store(extra, Ordering::Relaxed);
        self.hdr_word(OFF_FLUSH_SEQ).store(seq1, Ordering::Release);
    }

    /// Consumer, live overwrite-mode ring: calls `write` with each of the newest committed
    /// packets (at most `num_subbufs - 1`: the producer's open slot is excluded), oldest
    /// first, with its event count, then with the complete events of the open packet as a
    /// packet of their own (module docs; `desc` gives the events' sizes). When the producer
    /// is switching packets at every try (a few), the open packet is left out.
    pub fn copy_newest(
        &self,
        _key: &ConsumerKey,
        desc: &TraceDesc,
        mut write: impl FnMut(&[u8], u64),
    ) {
        let mut copy = vec![0u8; self.subbuf_size];
        for _ in 0..8 {
            let s1 = self.hdr_word(OFF_OPEN_SEQ).load(Ordering::Acquire);
            let done = self.hdr_word(OFF_DONE).load(Ordering::Acquire) as usize;
            let s2 = self.hdr_word(OFF_OPEN_SEQ).load(Ordering::Acquire);
            if s1 != s2 || self.handover.committed() != s1 {
                // Between a packet's commit and the next one's opening: try again.
                std::hint::spin_loop();
                continue;
            }
            let n = self.num_subbufs as u64;
            self.copy_committed(s1.saturating_sub(n - 1), s1, &mut copy, &mut write);
            if let Some((len, events)) = self.copy_open(s1, done, desc, &mut copy) {
                write(&copy[..len], events);
            }
            return;
        }
        let committed = self.handover.committed();
        let first = committed.saturating_sub(self.num_subbufs as u64 - 1);
        self.copy_committed(first, committed, &mut copy, &mut write);
    }

    /// Copies the committed packets `first..last` (each checked after its copy) to `write`.
    fn copy_committed(
        &self,
        first: u64,
        last: u64,
        copy: &mut [u8],
        write: &mut impl FnMut(&[u8], u64),
    ) {
        let n = self.num_subbufs as u64;
        // The packets that survived their copy, oldest first. A packet the producer reused
        // while it was copied is lost, and so is every older one (the producer overwrites in
        // order): the copies before it are dropped too, so the snapshot never has a gap, only
        // a later first packet. Written once the run is known (a snapshot path: allocates).
        #[allow(clippy::disallowed_methods)]
        let mut kept: Vec<(Vec<u8>, u64)> = Vec::new();
        for c in first..last {
            let slot = (c % n) as usize;
            let m = &self.meta[slot];
            let len = m.len.load(Ordering::Relaxed) as usize;
            let events = m.events.load(Ordering::Relaxed);
            if !(PACKET_HEADER_LEN..=self.subbuf_size).contains(&len) {
                kept.clear();
                continue;
            }
            self.copy_slot(slot, &mut copy[..len]);
            // The loads above happen-before the re-read of `committed`: if the producer had
            // opened packet `c + n` (which reuses this slot) by the end of the copy, we see it.
            fence(Ordering::Acquire);
            if self.handover.committed() >= c + n {
                kept.clear();
                continue;
            }
            if PacketHeader::decode(copy).map(|h| h.seq) != Some(c) {
                kept.clear();
                continue;
            }
            // Loom: the packet's bytes were all written before its commit, which the Acquire
            // of `committed` ordered before this read (the models do not lap the reader, whose
            // racing copies the checks above drop; loom cannot see those bytes' values).
            #[cfg(hushtrace_loom)]
            self.touch(slot, 0, len, false);
            #[allow(clippy::disallowed_methods)]
            kept.push((copy[..len].to_vec(), events));
        }
        for (packet, events) in &kept {
            write(packet, *events);
        }
    }

    /// Copies the complete events `[PACKET_HEADER_LEN, done)` of the open packet `seq` with its
    /// header into `copy`, completed as a finalized packet (sizes, end time, discarded count).
    /// Returns its length and event count, or `None` when it holds no complete event or the
    /// producer reused its slot during the copy.
    fn copy_open(
        &self,
        seq: u64,
        done: usize,
        desc: &TraceDesc,
        copy: &mut [u8],
    ) -> Option<(usize, u64)> {
        if done <= PACKET_HEADER_LEN || done > self.subbuf_size {
            return None;
        }
        let n = self.num_subbufs as u64;
        let discarded = self.hdr_word(OFF_DISCARDED).load(Ordering::Relaxed);
        self.copy_slot((seq % n) as usize, &mut copy[..done]);
        fence(Ordering::Acquire);
        if self.handover.committed() >= seq + n {
            return None;
        }
        let header = PacketHeader::decode(copy).filter(|h| h.seq == seq)?;
        // Loom: the complete events were written before the Release of `done` we read.
        #[cfg(hushtrace_loom)]
        self.touch(
            (seq % n) as usize,
            PACKET_HEADER_LEN,
            done - PACKET_HEADER_LEN,
            false,
        );
        let begin = header.timestamp_begin;
        let w = desc.walk_events(&copy[PACKET_HEADER_LEN..done], begin);
        if w.events == 0 {
            return None;
        }
        let len = PACKET_HEADER_LEN + w.len;
        // Closed as the producer's finalize would close it.
        PacketEnd {
            timestamp_end: w.max_ts.max(begin),
            len: len as u64,
            events_discarded: discarded,
        }
        .write_to(copy);
        Some((len, w.events))
    }

    /// Copies the first `out.len()` bytes of `slot` with atomic byte loads: the producer may be
    /// rewriting the slot (if it lapped the reader); such a copy is detected and dropped by
    /// the caller.
    fn copy_slot(&self, slot: usize, out: &mut [u8]) {
        debug_assert!(out.len() <= self.subbuf_size && slot < self.num_subbufs);
        for (i, byte) in out.iter_mut().enumerate() {
            // SAFETY: `slot * subbuf_size + i` is inside the mapping (`i < out.len() <=
            // subbuf_size`, `slot < num_subbufs`).
            *byte = unsafe { load_byte(self.mem.add(slot * self.subbuf_size + i)) };
        }
    }
}
