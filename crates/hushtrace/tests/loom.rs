//! Model check of the packet hand-over (`src/handover.rs`) with loom: every interleaving of one
//! producer filling slots and one consumer reading them, with loom's race detector on the slot
//! contents. Run with `ci/loom.sh` (`RUSTFLAGS="--cfg hushtrace_loom"`).
#![cfg(hushtrace_loom)]

use hushtrace::handover::Handover;
use loom::cell::UnsafeCell;
use loom::sync::Arc;

struct Ring {
    h: Handover,
    slots: [UnsafeCell<u64>; 2],
}

// SAFETY: the hand-over protocol gives each slot to one side at a time; loom checks it.
unsafe impl Sync for Ring {}

#[test]
fn producer_and_consumer_never_touch_the_same_slot_at_once() {
    loom::model(|| {
        let ring = Arc::new(Ring {
            h: Handover::new(2),
            slots: [UnsafeCell::new(u64::MAX), UnsafeCell::new(u64::MAX)],
        });
        let r = ring.clone();
        let producer = loom::thread::spawn(move || {
            let mut seq = 0u64;
            for _ in 0..4 {
                if r.h.slot_free(seq) {
                    // SAFETY: the slot is free; loom reports any overlapping access.
                    r.slots[(seq % 2) as usize].with_mut(|p| unsafe { *p = seq });
                    r.h.publish(seq + 1);
                    seq += 1;
                } else {
                    loom::thread::yield_now();
                }
            }
            seq
        });
        let mut next = 0u64;
        for _ in 0..4 {
            match ring.h.ready() {
                Some(c) => {
                    assert_eq!(c, next, "packets are consumed in order");
                    // SAFETY: the packet is committed and not released.
                    let v = ring.slots[(c % 2) as usize].with(|p| unsafe { *p });
                    assert_eq!(v, c, "the consumer saw a packet before it was complete");
                    ring.h.release(c);
                    next += 1;
                }
                None => loom::thread::yield_now(),
            }
        }
        let produced = producer.join().unwrap();
        assert!(next <= produced);
        assert!(produced - next <= 2, "more unconsumed packets than slots");
    });
}
