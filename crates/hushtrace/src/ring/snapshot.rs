//! Reading a live ring from the consumer thread without stopping its producer: the snapshot
//! of the flight recorder and the `status` of `hushtrace ctl`.

use super::{Buffer, Ident};
use hushtrace_ctf::layout::{read_u64, OFF_PACKET_SEQ_NUM, PACKET_HEADER_LEN};
use std::sync::atomic::{fence, AtomicU8, Ordering};

impl Buffer {
    /// The identity the producer writes into its packets.
    pub(crate) fn ident(&self) -> Ident {
        self.producer.ident.get()
    }

    /// Asks the producer to close its open packet at its next event (consumer thread; no
    /// effect on an idle producer). A store of 0 to `end`, which the producer only compares
    /// against: a reservation already past that check completes in the packet (it had room),
    /// and the next one takes the slow path, which closes the packet and opens another. If the
    /// producer itself sets `end` at the same moment (opening a packet) the request is simply
    /// lost, which is harmless.
    pub(crate) fn request_switch(&self) {
        self.producer.end.set(0);
    }

    /// Consumer: records in the ring header what the flush of idle threads did to this stream
    /// (packets added, the packet shipped in part), for crash recovery.
    pub(crate) fn set_flush_state(&self, extra: u64, partial: Option<(u64, u64, u64)>) {
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

    /// Owner, outside any tracepoint of its own (`depth == 1` for this call): closes the open
    /// packet now if it holds events, so a snapshot requested by this thread includes its
    /// newest events. No system call (the consumer is not woken).
    pub(crate) fn close_open_packet(&self, now: impl Fn() -> u64) {
        let p = &*self.producer;
        if p.open.get() && p.events.get() > 0 {
            self.finalize(&now);
            self.open_next(&now);
        }
    }

    /// Consumer, live overwrite-mode ring: calls `write` with each of the newest committed
    /// packets (at most `num_subbufs - 1`: the producer's open slot is excluded), oldest
    /// first, with its event count. Packets the producer started to overwrite during the copy
    /// are left out (checked after the copy, seqlock style).
    pub(crate) fn copy_newest(&self, mut write: impl FnMut(&[u8], u64)) {
        let n = self.num_subbufs as u64;
        let committed = self.handover.committed();
        let first = committed.saturating_sub(n - 1);
        let mut copy = vec![0u8; self.subbuf_size];
        for c in first..committed {
            let slot = (c % n) as usize;
            let m = &self.meta[slot];
            let len = m.len.load(Ordering::Relaxed) as usize;
            let events = m.events.load(Ordering::Relaxed);
            if !(PACKET_HEADER_LEN..=self.subbuf_size).contains(&len) {
                continue;
            }
            for (i, byte) in copy[..len].iter_mut().enumerate() {
                // SAFETY: `slot * subbuf_size + i` is inside the mapping (`i < len <=
                // subbuf_size`, `slot < num_subbufs`), and a byte is always a valid AtomicU8.
                // Atomic loads: the producer may be rewriting this slot if it lapped us; such a
                // copy is detected and dropped below.
                *byte = unsafe { AtomicU8::from_ptr(self.mem.add(slot * self.subbuf_size + i)) }
                    .load(Ordering::Relaxed);
            }
            // The loads above happen-before the re-read of `committed`: if the producer had
            // opened packet `c + n` (which reuses this slot) by the end of the copy, we see it.
            fence(Ordering::Acquire);
            if self.handover.committed() >= c + n {
                continue;
            }
            if read_u64(&copy, OFF_PACKET_SEQ_NUM) != Some(c) {
                continue;
            }
            write(&copy[..len], events);
        }
    }
}
