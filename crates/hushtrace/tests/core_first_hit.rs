//! Every tracepoint call is written, even when several threads hit a callsite for the first
//! time at once: the first hit publishes the field types, and a concurrent hit with the same
//! types records at once instead of waiting for it or dropping its event.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

/// Pushes 4 distinct callsites (every `event!` expansion is its own callsite).
macro_rules! push4 {
    ($v:ident) => {
        $v.push(|t| hushtrace::event!("first_hit", "ev", t = t, a = 1u32, b = "x"));
        $v.push(|t| hushtrace::event!("first_hit", "ev", t = t, a = 1u32, b = "x"));
        $v.push(|t| hushtrace::event!("first_hit", "ev", t = t, a = 1u32, b = "x"));
        $v.push(|t| hushtrace::event!("first_hit", "ev", t = t, a = 1u32, b = "x"));
    };
}

macro_rules! push16 {
    ($v:ident) => {
        push4!($v);
        push4!($v);
        push4!($v);
        push4!($v);
    };
}

/// 256 distinct callsites, each a fresh first hit.
fn callsites() -> Vec<fn(u64)> {
    let mut v: Vec<fn(u64)> = Vec::new();
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    push16!(v);
    v
}

/// A spinning barrier: the threads leave it within nanoseconds of each other (a blocking
/// barrier wakes them one by one, which would rarely make their first hits overlap).
struct Spin {
    arrived: AtomicUsize,
    n: usize,
}

impl Spin {
    fn wait(&self, round: usize) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        let mut spins = 0u32;
        while self.arrived.load(Ordering::Acquire) < self.n * (round + 1) {
            spins += 1;
            if spins.is_multiple_of(4096) {
                // The other thread may be descheduled (2 cores, other tests running).
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

#[test]
fn concurrent_first_hits_are_all_written() {
    const THREADS: usize = 2;
    let fns = callsites();
    assert_eq!(fns.len(), 256);
    let dir = common::temp_dir("first-hit");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .expect("start session");
    let spin = Spin {
        arrived: AtomicUsize::new(0),
        n: THREADS,
    };
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (fns, spin) = (&fns, &spin);
            s.spawn(move || {
                hushtrace::init_thread();
                for (round, f) in fns.iter().enumerate() {
                    spin.wait(round);
                    f(t as u64);
                }
            });
        }
    });
    let stats = session.stop().expect("stop session");
    let total = (THREADS * fns.len()) as u64;
    assert_eq!(
        (stats.events_written, stats.events_discarded),
        (total, 0),
        "every call is written, none dropped by a racing first hit: {stats:?}"
    );
    {
        let events = common::babeltrace(&dir, false);
        assert_eq!(events.len() as u64, total);
        assert!(events.iter().all(|e| e.name == "first_hit:ev"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
