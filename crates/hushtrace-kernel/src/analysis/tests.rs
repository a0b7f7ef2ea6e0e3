use super::*;
use crate::event::{SchedSwitch, Wake};

fn comm(tid: i32) -> Comm {
    Comm::new(format!("t{tid}").as_bytes())
}

fn sw(ts: u64, cpu: u32, prev: i32, state: i64, next: i32) -> KEvent {
    KEvent {
        ts,
        cpu,
        event: Event::SchedSwitch(SchedSwitch {
            prev_comm: comm(prev),
            prev_tid: prev,
            prev_prio: 120,
            prev_state: state,
            next_comm: comm(next),
            next_tid: next,
            next_prio: 120,
        }),
    }
}

fn waking(ts: u64, cpu: u32, tid: i32) -> KEvent {
    KEvent {
        ts,
        cpu,
        event: Event::SchedWaking(Wake {
            comm: comm(tid),
            tid,
            prio: 120,
            target_cpu: cpu as i32,
        }),
    }
}

/// The timeline of `events`, their times taken as ns.
fn build(events: Vec<KEvent>) -> Timeline {
    Timeline::from_events(events.into_iter().map(|e| (e.ts as i64, e)), 0)
}

#[test]
fn preemption_and_blocking_are_told_apart() {
    // Task 10 runs on CPU 0 from 100; preempted by 20 at 200 (state R) until 300;
    // sleeps at 400 (state S), woken by 20 at 600, back on the CPU at 650.
    let t = build(vec![
        sw(100, 0, 0, 0, 10),
        sw(200, 0, 10, 0, 20),
        sw(300, 0, 20, 1, 10),
        sw(400, 0, 10, 1, 20),
        waking(600, 0, 10),
        sw(650, 0, 20, 0, 10),
        sw(900, 0, 10, 1, 0),
    ]);
    let x = t.explain(10, 150, 700);
    assert_eq!(x.runnable_ns, 100 + 50);
    assert_eq!(x.blocked_ns, 200);
    assert_eq!(x.ran_instead, [(Actor::Task(20), 150)]);
    assert_eq!(x.woken_by, [(Actor::Task(20), 200)]);
    assert_eq!(x.intervals.len(), 3);
    assert_eq!((x.intervals[0].start, x.intervals[0].end), (200, 300));
    assert!(x.intervals[0].runnable && !x.intervals[1].runnable);
    // A window inside one stretch is clipped to it.
    let x = t.explain(10, 250, 260);
    assert_eq!((x.runnable_ns, x.blocked_ns), (10, 0));
    // A window with the thread on the CPU throughout.
    assert_eq!(t.explain(10, 310, 390), Explanation::default());
    assert_eq!(t.describe(&Actor::Task(20)), "t20/20");
}

#[test]
fn inverted_and_missing_switches_never_leave_a_stretch_open() {
    // Task 10 switched in on CPU 1 at 100 a hair before its switch-out on CPU 0 (at 101)
    // is stamped; later its switch-in at 300 is lost (a switch-out at 400 follows).
    let t = build(vec![
        sw(50, 0, 0, 0, 10),
        sw(100, 1, 0, 0, 10),
        sw(101, 0, 10, 0, 0),
        sw(200, 1, 10, 0, 20),
        sw(400, 1, 10, 1, 0),
        sw(1000, 1, 0, 0, 30),
    ]);
    let offs = t.off_cpu(10);
    assert!(
        offs.iter().all(|o| o.end != i64::MAX && o.end >= o.start),
        "{offs:?}"
    );
    let x = t.explain(10, 0, 1000);
    assert!(x.off_cpu_ns() <= 1000, "{x:?}");
    assert!(
        x.ran_instead.iter().all(|(a, _)| *a != Actor::Task(10)),
        "{x:?}"
    );
}
