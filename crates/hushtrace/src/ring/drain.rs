//! The consumer's side of the hand-over: draining ready packets, the final pass over a
//! quiescent ring, and its recycling for another thread.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use super::{BufState, Buffer, Mode};
use crate::clock;
use crate::primitive::Ordering;

impl Buffer {
    /// Calls `write` for every packet ready for the consumer (in order) and releases each slot
    /// after it. Discard mode only while attached. Consumer thread only.
    pub(super) fn drain(&self, mut write: impl FnMut(&[u8], u64)) {
        while let Some(c) = self.handover.ready() {
            let slot = (c % self.num_subbufs as u64) as usize;
            let m = &self.meta[slot];
            let len = m.len.load(Ordering::Relaxed) as usize;
            #[cfg(hushtrace_loom)]
            self.touch(slot, 0, len, false);
            // SAFETY: packet `c` is committed and not yet consumed, so the producer does not
            // touch its slot; `len <= subbuf_size` (set by `finalize`).
            let bytes =
                unsafe { std::slice::from_raw_parts(self.mem.add(slot * self.subbuf_size), len) };
            write(bytes, m.events.load(Ordering::Relaxed));
            self.handover.release(c);
            self.hdr_word(hushtrace_ctf::ringfile::OFF_CONSUMED)
                .store(c + 1, Ordering::Release);
        }
    }

    /// Writes out everything a quiescent buffer holds: ready packets, the partly filled open
    /// packet, and an empty trailing packet when events were discarded after the last one (so the
    /// final discarded count is in the trace). In overwrite mode, only the newest `n` packets
    /// exist. Caller: the consumer, after the buffer became quiescent.
    pub(super) fn finish(&self, mut write: impl FnMut(&[u8], u64)) {
        let p = &*self.producer;
        let n = self.num_subbufs as u64;
        if self.mode == Mode::Overwrite {
            let open_slot_lost = u64::from(p.open.get());
            // The open packet's slot no longer holds packet `seq - n`.
            let oldest = self.handover.committed().saturating_sub(n - open_slot_lost);
            self.handover.skip_to(oldest);
        }
        self.drain(&mut write);
        let now = clock::cycles_or_fallback();
        if p.open.get() {
            if p.events.get() > 0 || p.discarded.get() != p.discarded_reported.get() {
                self.finalize(&clock::cycles_or_fallback);
            } else {
                p.open.set(false);
                p.end.set(0);
            }
        } else if p.discarded.get() != p.discarded_reported.get() && self.open_next(&|| now) {
            self.finalize(&clock::cycles_or_fallback);
        }
        self.drain(&mut write);
    }

    /// Events dropped in this stream so far (discarded plus overwritten).
    pub fn lost(&self) -> u64 {
        self.producer.discarded.get() + self.producer.overwritten.get()
    }

    /// Prepares a drained buffer for another thread: the stream (sequence numbers, cumulative
    /// discarded count) continues, so readers see one well-formed stream.
    pub(super) fn recycle(&self) {
        let p = &*self.producer;
        p.open.set(false);
        p.end.set(0);
        // SAFETY: the consumer (key) recycles a drained, quiescent buffer: the single writer.
        unsafe { p.off.set(0) };
        self.state.store(BufState::Pooled, Ordering::Release);
    }
}
