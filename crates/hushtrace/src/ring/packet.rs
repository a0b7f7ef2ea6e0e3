//! The producer's packet switches: opening a packet (its header), closing it and handing it
//! to the consumer, the thread name of the open packet, and the fork child's reset of a ring.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use super::memory::RING_HEADER_LEN;
use super::{Buffer, Ident, Mode};
use crate::platform;
use crate::primitive::{compiler_fence, Ordering};
use hushtrace_ctf::layout::*;

impl Buffer {
    /// Sets the identity used for the next packets (owner, or before publication), and the
    /// thread name of the open packet: a thread renamed just after it started (before its
    /// first packet was handed over) is never seen under its old name.
    pub(super) fn set_ident(&self, ident: Ident) {
        self.producer.ident.set(ident);
        if self.producer.open.get() {
            let base = self.producer.base.get();
            for (i, b) in ident.procname.iter().enumerate() {
                // SAFETY: a packet is open, so `base` is its slot, which starts with its header
                // (PACKET_HEADER_LEN > OFF_PROCNAME + 16 bytes); we are its producer (the key).
                // Relaxed byte stores, as a snapshot may read the open packet at the same time
                // (byte loads, `primitive::load_byte`).
                unsafe { crate::primitive::store_byte(base.add(OFF_PROCNAME + i), *b) };
            }
        }
    }

    /// Closes the open packet and hands it to the consumer. Signal-safe with respect to
    /// handlers on the owning thread: `end` is cleared first, so a handler arriving meanwhile
    /// cannot reserve in the packet being closed (its event is dropped and counted), and the
    /// offset, counts and end timestamp are read after that.
    pub(super) fn finalize(&self, now: &impl Fn() -> u64) {
        let p = &*self.producer;
        p.end.set(0);
        compiler_fence(Ordering::SeqCst);
        let len = p.off.get();
        let base = p.base.get();
        let seq = p.seq.get();
        let discarded = p.discarded.get();
        let events = p.events.get();
        let ts_end = now();
        #[cfg(hushtrace_loom)]
        self.touch(
            (seq % self.num_subbufs as u64) as usize,
            0,
            PACKET_HEADER_LEN,
            true,
        );
        // SAFETY: `base` is the open slot, at least PACKET_HEADER_LEN bytes, owned by the
        // producer until the hand-over below.
        // The codec's words (constant offsets): four plain stores.
        let end = PacketEnd {
            timestamp_end: ts_end,
            len,
            events_discarded: discarded,
        };
        for (off, v) in end.words() {
            // SAFETY: as above; `off + 8 <= PACKET_HEADER_LEN`.
            unsafe { put_u64(base, off, v) };
        }
        let m = &self.meta[(seq % self.num_subbufs as u64) as usize];
        m.events.store(events, Ordering::Relaxed);
        m.len.store(len, Ordering::Relaxed);
        p.discarded_reported.set(discarded);
        p.open.set(false);
        p.seq.set(seq + 1);
        // Release: the packet bytes and `meta` above happen-before the consumer's Acquire load.
        self.handover.publish(seq + 1);
    }

    /// Opens packet `seq` if its slot is free (or overwritable). No system call.
    pub(super) fn open_next(&self, now: &impl Fn() -> u64) -> bool {
        let p = &*self.producer;
        let seq = p.seq.get();
        let slot = (seq % self.num_subbufs as u64) as usize;
        // Acquire: the consumer's reads of the slot happen-before our overwriting it.
        if !self.handover.slot_free(seq) {
            match self.mode {
                Mode::Discard => return false,
                Mode::Overwrite => {
                    let lost = self.meta[slot].events.load(Ordering::Relaxed);
                    p.overwritten.set(p.overwritten.get() + lost);
                    self.hdr_word(hushtrace_ctf::ringfile::OFF_OVERWRITTEN)
                        .store(p.overwritten.get(), Ordering::Relaxed);
                }
            }
        }
        let ts_begin = now();
        // SAFETY: slot index < num_subbufs, so the slot is inside the mapping.
        let base = unsafe { self.mem.add(slot * self.subbuf_size) };
        let id = p.ident.get();
        #[cfg(hushtrace_loom)]
        self.touch(slot, 0, PACKET_HEADER_LEN, true);
        let header = PacketHeader {
            uuid: p.uuid.get(),
            stream_instance_id: self.instance,
            timestamp_begin: ts_begin,
            seq,
            vpid: id.vpid,
            vtid: id.vtid,
            procname: id.procname,
            pthread_id: id.pthread,
            // Not finalized (sizes, end time 0): a crash leaves a packet `recover` must cut
            // itself; `finalize` stores the `PacketEnd`.
            ..PacketHeader::default()
        };
        // SAFETY: the slot is free (checked above) and at least PACKET_HEADER_LEN bytes long;
        // one unaligned write of the encoded header.
        unsafe { (base as *mut [u8; PACKET_HEADER_LEN]).write_unaligned(header.encode()) };
        p.base.set(base);
        // SAFETY: producer side, single writer (`Producer` docs).
        unsafe {
            p.off.set(PACKET_HEADER_LEN as u64);
            // The packet's first event is relative to its begin time.
            p.last_ts.set(ts_begin);
            p.events.set(0);
        }
        self.hdr_word(hushtrace_ctf::ringfile::OFF_DONE)
            .store(0, Ordering::Relaxed);
        // Release, after `done = 0` and the header: a consumer that Acquire-loads this
        // sequence number then reads `done` of this packet or a later one (`ring/flush.rs`).
        self.hdr_word(hushtrace_ctf::ringfile::OFF_OPEN_SEQ)
            .store(seq, Ordering::Release);
        p.open.set(true);
        // Everything above is in place before a signal handler can reserve in this packet.
        compiler_fence(Ordering::SeqCst);
        p.end.set(self.subbuf_size as u64);
        true
    }

    /// Owner, outside any tracepoint of its own (`depth == 1` for this call): closes the open
    /// packet now if it holds events, so a snapshot requested by this thread includes its
    /// newest events. No system call (the consumer is not woken).
    pub(super) fn close_open_packet(&self, now: impl Fn() -> u64) {
        let p = &*self.producer;
        if p.open.get() && p.events.get() > 0 {
            self.finalize(&now);
            self.open_next(&now);
        }
    }

    /// O(`num_subbufs`) reset of the forking thread's buffer in the child of a `fork()`: the
    /// inherited packets belong to the parent, which writes them; the child starts a new, empty
    /// stream. Only stores: async-signal-safe.
    pub(super) fn reset_after_fork(&self, uuid: [u8; 16], ident: Ident) {
        if self.file_backed {
            // The parent's ring file was not inherited (MADV_DONTFORK): put private memory at
            // the same address so this thread keeps a ring of its own (not crash-persistent).
            // SAFETY: `hdr..hdr+len` is this buffer's reserved range.
            let ok =
                unsafe { platform::remap_private(self.hdr, RING_HEADER_LEN + self.capacity()) };
            if !ok {
                platform::abort();
            }
        }
        let p = &*self.producer;
        // SAFETY: the fork child's only thread, the buffer's producer (key): the single writer.
        unsafe {
            p.off.set(0);
            p.last_ts.set(0);
            p.events.set(0);
            p.discarded.set(0);
        }
        p.overwritten.set(0);
        p.end.set(0);
        p.open.set(false);
        p.seq.set(0);
        p.discarded_reported.set(0);
        p.ident.set(ident);
        p.uuid.set(uuid);
        self.reset_late();
        for m in self.meta.iter() {
            m.events.store(0, Ordering::Relaxed);
            m.len.store(0, Ordering::Relaxed);
        }
        self.handover.reset();
    }
}

/// # Safety
/// `base + off .. base + off + 8` must be writable.
#[inline(always)]
pub(super) unsafe fn put_u64(base: *mut u8, off: usize, v: u64) {
    // SAFETY: guaranteed by the caller; unaligned write.
    unsafe { (base.add(off) as *mut [u8; 8]).write_unaligned(v.to_le_bytes()) }
}
