//! Late spans (issue 31): the few words a thread writes when one of its spans ends past its
//! deadline, read by the consumer at its next tick. Only the producer writes them (a relaxed
//! store per word, then a Release store of `seq`): no lock, no system call, no shared line
//! written in the steady state (the words sit on their own cache line, written only by a late
//! span).
//!
//! A signal handler that ends a late span on the same thread while the thread is between the
//! counter's load and store in [`Buffer::note_late`] shares its slot: one of the two is kept
//! (its `hushtrace:late` event is in the ring either way).
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use super::{Buffer, ConsumerKey, ProducerKey};
use crate::primitive::{fence, AtomicU64, Ordering};
use crate::relaxed::RelaxedU64;

/// Late spans kept for the consumer between two of its ticks; older ones are counted, not kept.
pub(crate) const LATE_SLOTS: usize = 8;

/// One late span as its thread noted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LateSpan {
    /// The span's end callsite id.
    pub callsite: u16,
    /// Begin and end timestamps (trace clock ticks).
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// The deadline, in ticks.
    pub deadline: u64,
}

/// The late-span words of one ring: a counter and the newest [`LATE_SLOTS`] late spans.
#[derive(Debug, Default)]
pub(crate) struct LateSlots {
    /// Late spans noted so far (the slot of the `k`-th is `k % LATE_SLOTS`).
    seq: AtomicU64,
    /// Per slot: callsite id, start, end, deadline.
    slots: [[RelaxedU64; 4]; LATE_SLOTS],
}

impl Buffer {
    /// Notes a late span (producer side; see the module docs).
    fn note_late(&self, span: LateSpan) {
        let l = &self.late;
        let k = l.seq.load(Ordering::Relaxed);
        let slot = &l.slots[(k % LATE_SLOTS as u64) as usize];
        slot[0].set(u64::from(span.callsite));
        slot[1].set(span.start);
        slot[2].set(span.end);
        slot[3].set(span.deadline);
        l.seq.store(k + 1, Ordering::Release);
    }

    /// Calls `f` with each late span noted since the consumer saw `seen` of them; returns the
    /// new count and how many were overwritten before they could be read.
    fn late_since(&self, seen: u64, mut f: impl FnMut(LateSpan)) -> (u64, u64) {
        let l = &self.late;
        let now = l.seq.load(Ordering::Acquire);
        if now <= seen {
            // A fork child's reset (or nothing new).
            return (now, 0);
        }
        let from = seen.max(now.saturating_sub(LATE_SLOTS as u64));
        let mut read = [None; LATE_SLOTS];
        for (i, k) in (from..now).enumerate() {
            let s = &l.slots[(k % LATE_SLOTS as u64) as usize];
            read[i] = Some(LateSpan {
                callsite: s[0].get() as u16,
                start: s[1].get(),
                end: s[2].get(),
                deadline: s[3].get(),
            });
        }
        // A slot read while the producer rewrote it (its `k + LATE_SLOTS`-th late span began)
        // is dropped and counted: the producer's Release of `seq` after the words, our Acquire
        // fence before reading `seq` again.
        fence(Ordering::Acquire);
        let after = l.seq.load(Ordering::Relaxed);
        let mut missed = from - seen;
        for (i, k) in (from..now).enumerate() {
            match read[i] {
                Some(span) if after < k + LATE_SLOTS as u64 => f(span),
                _ => missed += 1,
            }
        }
        (now, missed)
    }

    /// Forgets the late spans (fork child; the producer alone).
    pub(super) fn reset_late(&self) {
        self.late.seq.store(0, Ordering::Relaxed);
    }
}

impl ProducerKey<'_> {
    /// Notes a late span for the consumer (see the module docs).
    #[inline]
    pub fn note_late(&self, span: LateSpan) {
        self.ring.note_late(span)
    }
}

impl ConsumerKey<'_> {
    /// The late spans noted since `seen`; see `Buffer::late_since`.
    pub fn late_since(&self, seen: u64, f: impl FnMut(LateSpan)) -> (u64, u64) {
        self.ring.late_since(seen, f)
    }
}
