//! The begin timestamps of the open `tracing` spans whose end has a deadline (issue 31), kept
//! from their creation to their close, on whichever threads those happen: a fixed table keyed
//! by the span's `tracing` id, written and read with atomics (no lock, allocation or system
//! call; callable on a no-syscall thread). Spans without a deadline never come here.
//!
//! A span's slot is within [`PROBES`] slots of its id's home. With more spans that have a
//! deadline open at once than fit (about [`SLOTS`], fewer when their ids collide), a span
//! finds no slot: its end is recorded but not checked (it can never be reported late
//! wrongly).

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots of the table: 16 bytes each, 64 KiB in all (untouched pages cost no memory).
pub(crate) const SLOTS: usize = 1 << 12;
/// Slots looked at from a span id's home.
pub(crate) const PROBES: usize = 16;

/// Slot keys: the span's `tracing` id (never 0), 0 when free.
static KEYS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Slot values: the begin's timestamp in clock ticks.
static STARTS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

#[inline]
fn slot(id: u64, k: usize) -> usize {
    let home = (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOTS.trailing_zeros())) as usize;
    (home + k) & (SLOTS - 1)
}

/// Keeps `start` for the span `id` (not 0); whether there was room.
///
/// `tracing` ids are unique among open spans, so a slot already keyed `id` is left over from
/// a closed span of the same id whose end did not take it (its deadline was removed while it
/// was open): it is reused, so that [`take`] never finds a stale start.
pub(crate) fn put(id: u64, start: u64) -> bool {
    let mut free = None;
    for k in 0..PROBES {
        let i = slot(id, k);
        match KEYS[i].load(Ordering::Relaxed) {
            key if key == id => {
                STARTS[i].store(start, Ordering::Relaxed);
                return true;
            }
            0 if free.is_none() => free = Some(i),
            _ => {}
        }
    }
    // Claim a free slot; another thread may claim it first: then the next free one.
    let Some(free) = free else {
        return false;
    };
    let first = free.wrapping_sub(slot(id, 0)) & (SLOTS - 1);
    for k in first..PROBES {
        let i = slot(id, k);
        // Acquire: pairs with `take`'s Release, so the previous owner's read of the start is
        // done before this store replaces it.
        if KEYS[i]
            .compare_exchange(0, id, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            STARTS[i].store(start, Ordering::Relaxed);
            return true;
        }
    }
    false
}

/// The begin timestamp kept for the span `id`, freeing its slot; 0 when none was kept.
///
/// The span's close happens after its creation returned (`tracing` hands the span from one to
/// the other), so the slot's key and start stored there are visible here.
pub(crate) fn take(id: u64) -> u64 {
    for k in 0..PROBES {
        let i = slot(id, k);
        if KEYS[i].load(Ordering::Relaxed) == id {
            let start = STARTS[i].load(Ordering::Relaxed);
            KEYS[i].store(0, Ordering::Release);
            return start;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_start_until_taken_once() {
        assert!(put(0x1_0001, 77));
        assert!(put(0x1_0002, 78));
        assert_eq!(take(0x1_0001), 77);
        assert_eq!(take(0x1_0001), 0, "taken already");
        assert_eq!(take(0x1_0002), 78);
        assert_eq!(take(0x1_0003), 0, "never kept");
    }

    #[test]
    fn a_left_over_slot_of_the_same_id_is_reused() {
        assert!(put(0x2_0001, 5));
        // Its close did not take it (the deadline went away); the id comes back.
        assert!(put(0x2_0001, 9));
        assert_eq!(take(0x2_0001), 9);
        assert_eq!(take(0x2_0001), 0, "no stale start left behind");
    }

    #[test]
    fn past_its_probes_a_span_is_not_kept() {
        // Ids whose home is the same slot: the first PROBES fill its probe window.
        let home = slot(0x3_0000, 0);
        let ids: Vec<u64> = (0x3_0000u64..)
            .filter(|&id| slot(id, 0) == home)
            .take(PROBES + 1)
            .collect();
        for (n, &id) in ids[..PROBES].iter().enumerate() {
            assert!(put(id, 100 + n as u64), "slot for the {n}th");
        }
        assert!(!put(ids[PROBES], 1), "no room left");
        assert_eq!(take(ids[PROBES]), 0);
        for (n, &id) in ids[..PROBES].iter().enumerate() {
            assert_eq!(take(id), 100 + n as u64);
        }
        assert!(put(ids[PROBES], 1), "room again");
        assert_eq!(take(ids[PROBES]), 1);
    }
}
