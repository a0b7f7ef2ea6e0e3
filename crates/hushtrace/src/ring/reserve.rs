//! The producer's reservation of an event: the signal-safe compare-and-swap in the open
//! packet, its compact or extended header, and the slow path that switches packets or drops
//! and counts the event.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use super::{Buffer, Mode};
use hushtrace_ctf::layout::*;

/// Outcome of [`Buffer::reserve_extended`].
enum Extended {
    /// Reserved and header written: the fields' address.
    Reserved(*mut u8),
    /// The event does not fit in the open packet.
    Full,
    /// A signal handler reserved in between: retry.
    Lost,
}

/// Outcome of a failed reservation.
#[derive(Debug)]
pub enum Full {
    /// The event was dropped and counted.
    Dropped,
}

impl Buffer {
    /// Reserves an event of class `id` with `body` bytes of fields, reads its timestamp and
    /// writes its header, atomically with respect to signal handlers on this thread: the
    /// timestamp is re-read if a handler reserved in between, so timestamps stay ordered in the
    /// stream. The header is compact when [`compact_fits`] against the stream's clock
    /// (`last_ts`), else extended; choosing the length and writing the header here keeps them
    /// in agreement. `depth` is the tracepoint nesting depth (1 = not nested). Returns the
    /// address of the `body` bytes for the fields.
    #[inline(always)]
    pub(super) fn reserve_event(
        &self,
        id: u16,
        body: usize,
        depth: u32,
        now: impl Fn() -> u64,
        on_commit: impl Fn(),
    ) -> Result<*mut u8, Full> {
        match self.reserve_in_open_packet(id, body, &now) {
            Some(r) => Ok(r),
            None => self.reserve_slow(id, body, depth, now, on_commit),
        }
    }

    /// The signal-safe reservation in the open packet, or `None` when the event does not fit
    /// (or no packet is open). A handler that reserves between our read of `off` and the
    /// compare-and-swap makes it fail, and we retry with a fresh timestamp.
    ///
    /// The compact header is the common case and a branch, not a select: the compare-and-swap
    /// then does not wait for the cycle counter (a well-predicted branch lets the CPU run
    /// ahead; a conditional move would make the reserved length depend on `rdtsc`'s result).
    #[inline(always)]
    fn reserve_in_open_packet(
        &self,
        id: u16,
        body: usize,
        now: &impl Fn() -> u64,
    ) -> Option<*mut u8> {
        let p = &*self.producer;
        loop {
            let o = p.off.get();
            let end = p.end.get();
            // Room for the smaller header first: a full packet costs no clock read.
            let len = (COMPACT_HEADER_LEN + body) as u64;
            if o + len > end {
                return None;
            }
            let last = p.last_ts.get();
            let ts = now();
            if !compact_fits(id, ts, last) {
                match self.reserve_extended(o, end, id, body, ts) {
                    Extended::Reserved(fields) => return Some(fields),
                    Extended::Full => return None,
                    Extended::Lost => continue,
                }
            }
            // SAFETY: producer side, single writer (`Producer` docs).
            if unsafe { p.off.cas(o, o + len) } {
                // SAFETY: `o + len <= end <= subbuf_size`: the `len` bytes at `o` are inside
                // the open slot, and ours (the compare-and-swap reserved them).
                let dst = unsafe { self.reserved(o, len, ts) };
                // SAFETY: as above; the header is the first COMPACT_HEADER_LEN of them.
                unsafe {
                    put_u32(dst, 0, compact_word(id, ts));
                    return Some(dst.add(COMPACT_HEADER_LEN));
                }
            }
        }
    }

    /// [`Self::reserve_in_open_packet`] for a compact header only, with no call out of line:
    /// `None`, with nothing reserved, when the event does not fit in the open packet or needs
    /// an extended header (the caller then takes [`Self::reserve_event`]'s path). For a
    /// specialised caller (`fixed.rs`) whose fast path stays free of calls.
    #[inline(always)]
    pub(super) fn reserve_compact(
        &self,
        id: u16,
        body: usize,
        now: impl Fn() -> u64,
    ) -> Option<*mut u8> {
        let p = &*self.producer;
        let len = (COMPACT_HEADER_LEN + body) as u64;
        loop {
            let o = p.off.get();
            if o + len > p.end.get() {
                return None;
            }
            let ts = now();
            if !compact_fits(id, ts, p.last_ts.get()) {
                return None;
            }
            // SAFETY: producer side, single writer (`Producer` docs).
            if unsafe { p.off.cas(o, o + len) } {
                // SAFETY: `o + len <= end <= subbuf_size`: the `len` bytes at `o` are inside
                // the open slot, and ours (the compare-and-swap reserved them); the header is
                // the first COMPACT_HEADER_LEN of them.
                unsafe {
                    let dst = self.reserved(o, len, ts);
                    put_u32(dst, 0, compact_word(id, ts));
                    return Some(dst.add(COMPACT_HEADER_LEN));
                }
            }
        }
    }

    /// The extended-header branch of [`Self::reserve_in_open_packet`], for an event at `ts`
    /// whose reservation read `off == o` and `end`: rare (an event id from 255, or the first
    /// event after a pause of 2^24 cycles), so out of line.
    #[cold]
    #[inline(never)]
    fn reserve_extended(&self, o: u64, end: u64, id: u16, body: usize, ts: u64) -> Extended {
        let len = (EXTENDED_HEADER_LEN + body) as u64;
        if o + len > end {
            return Extended::Full;
        }
        // SAFETY: producer side, single writer (`Producer` docs).
        if !unsafe { self.producer.off.cas(o, o + len) } {
            return Extended::Lost;
        }
        // SAFETY: `o + len <= end <= subbuf_size`: the `len` bytes at `o` are inside the open
        // slot, and ours (the compare-and-swap reserved them).
        let dst = unsafe { self.reserved(o, len, ts) };
        // SAFETY: as above; the header is the first EXTENDED_HEADER_LEN of them.
        unsafe {
            (dst as *mut [u8; EXTENDED_HEADER_LEN]).write_unaligned(extended_header(id, ts));
            Extended::Reserved(dst.add(EXTENDED_HEADER_LEN))
        }
    }

    /// After a successful compare-and-swap from `o`: records the event (`last_ts`, count) and
    /// returns its address in the open slot.
    ///
    /// # Safety
    /// The caller reserved bytes at offset `o` of the open packet with the compare-and-swap.
    #[inline(always)]
    unsafe fn reserved(&self, o: u64, _len: u64, ts: u64) -> *mut u8 {
        let p = &*self.producer;
        // `ts` is now the stream's newest timestamp; a handler that nests from here on reads
        // an older `last_ts` (see its docs).
        // SAFETY: producer side, single writer (`Producer` docs).
        unsafe {
            p.last_ts.set(ts);
            p.events.add(1);
        }
        // The caller writes the event's bytes into the open slot.
        #[cfg(hushtrace_loom)]
        self.touch(
            (p.base.get() as usize - self.mem as usize) / self.subbuf_size,
            o as usize,
            _len as usize,
            true,
        );
        // SAFETY: the caller reserved offset `o` of the open slot `base`.
        unsafe { p.base.get().add(o as usize) }
    }

    #[cold]
    #[inline(never)]
    fn reserve_slow(
        &self,
        id: u16,
        body: usize,
        depth: u32,
        now: impl Fn() -> u64,
        on_commit: impl Fn(),
    ) -> Result<*mut u8, Full> {
        let p = &*self.producer;
        // A nested (signal-handler) event must not switch packets under the interrupted one;
        // an event too large for an empty packet (with either header) is dropped.
        if depth > 1 || EXTENDED_HEADER_LEN + body > self.subbuf_size - PACKET_HEADER_LEN {
            // SAFETY: producer side, single writer (`Producer` docs).
            unsafe { p.discarded.add(1) };
            self.mirror_discarded();
            return Err(Full::Dropped);
        }
        // Signal handlers may fill the fresh packet before this thread reserves in it (a storm
        // of signals, each handler recording one event, while this thread makes only a few
        // instructions of progress between them): then close that packet too and open
        // another, at most once per slot, so the interrupted event is not dropped merely
        // because handlers were faster.
        let mut committed = false;
        let mut r = Err(Full::Dropped);
        for _ in 0..self.num_subbufs {
            if p.open.get() {
                self.finalize(&now);
                committed = true;
            }
            if !self.open_next(&now) {
                break;
            }
            if let Some(ok) = self.reserve_in_open_packet(id, body, &now) {
                r = Ok(ok);
                break;
            }
        }
        if r.is_err() {
            // SAFETY: producer side, single writer (`Producer` docs).
            unsafe { p.discarded.add(1) };
            self.mirror_discarded();
        }
        // Wake the consumer (discard mode only: an attached overwrite-mode ring is read only
        // when it stops) and only now: signals pending on the wake-up's system call are
        // delivered while a packet is open, so their events are not dropped.
        if committed && self.mode == Mode::Discard {
            on_commit();
        }
        r
    }

    /// Counts one event dropped before reaching the ring (owner only, signal-safe).
    pub(super) fn count_dropped(&self) {
        // SAFETY: the key holder is the producer, the single writer.
        unsafe { self.producer.discarded.add(1) };
        self.mirror_discarded();
    }
}

/// # Safety
/// `base + off .. base + off + 4` must be writable.
#[inline(always)]
unsafe fn put_u32(base: *mut u8, off: usize, v: u32) {
    // SAFETY: guaranteed by the caller; unaligned write.
    unsafe { (base.add(off) as *mut [u8; 4]).write_unaligned(v.to_le_bytes()) }
}
