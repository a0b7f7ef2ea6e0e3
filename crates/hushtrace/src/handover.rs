#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)
//! The packet hand-over of one ring: the only part of a buffer two threads write.
//!
//! Packets are numbered per stream; packet `s` lives in slot `s % n`. The producer owns
//! `committed` (packets `< committed` are complete), the consumer owns `consumed` (packets
//! `< consumed` are on disk and their slots free). Each side writes only its own cache line.
//!
//! Orderings: the producer's Release store of `committed` makes the packet bytes visible to the
//! consumer's Acquire load; the consumer's Release store of `consumed` orders its reads of a slot
//! before the producer's Acquire load that lets it overwrite the slot. Model-checked with loom in
//! `tests/loom.rs`.

use crate::primitive::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// Hand-over state of one ring of `n` slots.
#[derive(Debug)]
pub struct Handover {
    /// Packets `0 .. committed` are complete. Written by the producer only.
    committed: CachePadded<AtomicU64>,
    /// Packets `0 .. consumed` are released. Written by the consumer only. Invariant:
    /// `consumed <= committed` and `committed - consumed <= n`.
    consumed: CachePadded<AtomicU64>,
    n: u64,
}

impl Handover {
    /// A hand-over for `n` slots, empty.
    pub fn new(n: u64) -> Handover {
        Handover {
            committed: CachePadded::new(AtomicU64::new(0)),
            consumed: CachePadded::new(AtomicU64::new(0)),
            n,
        }
    }

    /// Producer: whether the slot of packet `seq` holds no unconsumed packet.
    #[inline]
    pub fn slot_free(&self, seq: u64) -> bool {
        seq - self.consumed.load(Ordering::Acquire) < self.n
    }

    /// Producer: packets `< upto` are complete.
    #[inline]
    pub fn publish(&self, upto: u64) {
        debug_assert!(upto >= self.committed.load(Ordering::Relaxed));
        self.committed.store(upto, Ordering::Release);
    }

    /// Consumer: the next packet ready to read, if any.
    #[inline]
    pub fn ready(&self) -> Option<u64> {
        let c = self.consumed.load(Ordering::Relaxed);
        (c < self.committed.load(Ordering::Acquire)).then_some(c)
    }

    /// Consumer: packet `seq` (the one [`Handover::ready`] returned) has been read.
    #[inline]
    pub fn release(&self, seq: u64) {
        debug_assert_eq!(seq, self.consumed.load(Ordering::Relaxed));
        self.consumed.store(seq + 1, Ordering::Release);
    }

    /// Consumer, quiescent producer only: number of complete packets.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Consumer, quiescent producer only (overwrite mode): packets before `seq` were
    /// overwritten; skip them.
    pub fn skip_to(&self, seq: u64) {
        if self.consumed.load(Ordering::Relaxed) < seq {
            self.consumed.store(seq, Ordering::Release);
        }
    }

    /// Fork child only (single thread): start over, empty.
    pub fn reset(&self) {
        self.committed.store(0, Ordering::Relaxed);
        self.consumed.store(0, Ordering::Relaxed);
    }
}
