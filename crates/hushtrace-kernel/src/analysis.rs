//! What the scheduler did to a thread during a window of time: when it was off the CPU,
//! whether it was runnable (preempted, or woken and waiting for a CPU) or blocked (sleeping),
//! who ran instead, who woke it, and which interrupts took its CPU while it ran.
//!
//! Built once from a [`KernelTrace`] (times converted to ns since the Unix epoch, the
//! user-space trace's unit), then queried per span with [`Timeline::explain`].

use crate::ctf::{KernelTrace, ReadError};
use crate::event::{Comm, Event, KEvent};
use crate::schema::softirq_name;
use std::collections::HashMap;
use std::sync::Arc;

/// A thread's time off the CPU: from its switch-out to its next switch-in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffCpu {
    /// Switched out, ns.
    pub start: i64,
    /// Woken (`sched_waking`), ns; `None` for a preemption or a missed wakeup.
    pub wake: Option<i64>,
    /// Switched back in, ns (`i64::MAX` if never in the trace).
    pub end: i64,
    /// The CPU it left.
    pub cpu: u32,
    /// The CPU it came back on (the one it waited for).
    pub back_cpu: u32,
    /// Still runnable when switched out.
    pub preempted: bool,
    /// Who woke it: a task id, or an interrupt's name.
    pub waker: Option<Actor>,
    /// The system call it was in when it went to sleep (`--kernel syscalls`).
    pub syscall: Option<Arc<str>>,
}

/// A task or an interrupt.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Actor {
    /// A task (thread) id; 0 is the idle task.
    Task(i32),
    /// An interrupt or softirq handler, by name.
    Irq(String),
}

#[derive(Clone, Copy, Debug)]
struct Run {
    tid: i32,
    start: i64,
    end: i64,
}

#[derive(Clone, Debug)]
struct IrqRun {
    name: String,
    start: i64,
    end: i64,
}

/// The scheduler's timeline.
#[derive(Debug, Default)]
pub struct Timeline {
    off: HashMap<i32, Vec<OffCpu>>,
    runs: HashMap<u32, Vec<Run>>,
    irqs: HashMap<u32, Vec<IrqRun>>,
    comms: HashMap<i32, Comm>,
    /// Events the kernel lost (the timeline may have gaps).
    pub lost: u64,
    /// Events read.
    pub events: u64,
    /// Tolerated defects of the kernel trace (a truncated last packet), for people.
    pub warnings: Vec<String>,
}

/// One stretch of a window the thread spent off the CPU, clipped to the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Runnable (preempted or waiting for a CPU after its wakeup) rather than sleeping.
    pub runnable: bool,
    /// The CPU concerned (left when blocked; waited for when runnable).
    pub cpu: u32,
    /// Who ran on that CPU meanwhile (runnable) or who woke it (blocked), with ns.
    pub by: Vec<(Actor, i64)>,
    /// Blocked: the system call it slept in, when the trace has the thread's system calls.
    pub syscall: Option<Arc<str>>,
}

/// What happened to a thread in a window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Explanation {
    /// Runnable but not running (preempted; woken and waiting), ns.
    pub runnable_ns: i64,
    /// Sleeping (blocked on I/O, a lock, a timer), ns.
    pub blocked_ns: i64,
    /// Spent in interrupt handlers on its CPU while it ran, ns.
    pub irq_ns: i64,
    /// The stretches, in time order.
    pub intervals: Vec<Interval>,
    /// Who ran while it was runnable, ns each, largest first.
    pub ran_instead: Vec<(Actor, i64)>,
    /// Who woke it from its sleeps, ns of sleep each, largest first.
    pub woken_by: Vec<(Actor, i64)>,
    /// Interrupt handlers that ran on its CPU while it ran, ns each, largest first.
    pub irqs: Vec<(Actor, i64)>,
}

impl Explanation {
    /// Off-CPU time: runnable + blocked.
    pub fn off_cpu_ns(&self) -> i64 {
        self.runnable_ns + self.blocked_ns
    }
}

fn overlap(a: i64, b: i64, c: i64, d: i64) -> i64 {
    (b.min(d) - a.max(c)).max(0)
}

fn add(v: &mut Vec<(Actor, i64)>, who: Actor, ns: i64) {
    if ns <= 0 {
        return;
    }
    match v.iter_mut().find(|(a, _)| *a == who) {
        Some((_, n)) => *n += ns,
        None => v.push((who, ns)),
    }
}

fn sort_desc(v: &mut [(Actor, i64)]) {
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
}

impl Timeline {
    /// Builds the timeline of a kernel trace, reading its events as a stream (memory grows
    /// with the scheduling activity kept, not with the trace's size).
    ///
    /// With `roots` (the traced processes' pids), only what explanations of their threads
    /// need is kept: the off-CPU stretches of the roots and of the tasks they fork (threads
    /// included, followed through `sched_process_fork`), who ran while one of them waited
    /// for a CPU, and the interrupts that hit one of them. Memory then grows with the traced
    /// program's scheduling, not with the machine's over the whole trace.
    pub fn build(k: &KernelTrace, roots: Option<&[i32]>) -> Result<Timeline, ReadError> {
        let mut events = k.events()?;
        let mut b = TimelineBuilder::new(roots);
        while let Some(e) = events.next()? {
            b.push(k.ns(e.ts), &e);
        }
        let warnings = events
            .take_warnings()
            .iter()
            .map(|w| w.to_string())
            .collect();
        Ok(b.finish(events.discarded(), warnings))
    }

    /// The timeline of `events` (in time order, each with its time in ns), `lost` events
    /// missing.
    pub fn from_events(events: impl IntoIterator<Item = (i64, KEvent)>, lost: u64) -> Timeline {
        let mut b = TimelineBuilder::new(None);
        for (ns, e) in events {
            b.push(ns, &e);
        }
        b.finish(lost, Vec::new())
    }

    /// The command name last seen for task `tid` (`"swapper"` for the idle task).
    pub fn comm(&self, tid: i32) -> &str {
        if tid == 0 {
            return "swapper";
        }
        self.comms.get(&tid).map_or("?", |s| s.as_str())
    }

    /// `"comm/tid"`, or the interrupt's name.
    pub fn describe(&self, a: &Actor) -> String {
        match a {
            Actor::Task(0) => "idle".into(),
            Actor::Task(t) => format!("{}/{t}", self.comm(*t)),
            Actor::Irq(n) => n.clone(),
        }
    }

    /// Whether the trace saw task `tid` switch at all.
    pub fn knows(&self, tid: i32) -> bool {
        self.off.contains_key(&tid)
    }

    /// The off-CPU stretches of task `tid`, in time order.
    pub fn off_cpu(&self, tid: i32) -> &[OffCpu] {
        self.off.get(&tid).map_or(&[], |v| v.as_slice())
    }

    fn runs_in(&self, cpu: u32, a: i64, b: i64) -> impl Iterator<Item = &Run> {
        let v = self.runs.get(&cpu).map_or(&[][..], |v| v.as_slice());
        // Runs on one CPU do not overlap: the first that may overlap starts before `a` at most
        // one position earlier than the first starting at or after `a`.
        let i = v.partition_point(|r| r.start < a).saturating_sub(1);
        v[i..].iter().take_while(move |r| r.start < b)
    }

    fn irqs_in(&self, cpu: u32, a: i64, b: i64) -> impl Iterator<Item = &IrqRun> {
        let v = self.irqs.get(&cpu).map_or(&[][..], |v| v.as_slice());
        let i = v.partition_point(|r| r.start < a).saturating_sub(4);
        v[i..].iter().take_while(move |r| r.start < b)
    }

    /// What happened to task `tid` between `a` and `b` (ns since the epoch).
    pub fn explain(&self, tid: i32, a: i64, b: i64) -> Explanation {
        let mut x = Explanation::default();
        let offs = self.off_cpu(tid);
        let first = offs.partition_point(|o| o.end <= a);
        // Where it ran just before the first stretch (for interrupts while on the CPU).
        let mut on_cpu_since = a;
        let mut on_cpu = match offs.get(first) {
            Some(o) if o.start <= a => None,
            Some(o) => Some(o.cpu),
            None => first.checked_sub(1).map(|i| offs[i].back_cpu),
        };
        for o in offs[first..].iter().take_while(|o| o.start < b) {
            if let Some(cpu) = on_cpu.take() {
                self.add_irqs(&mut x, cpu, on_cpu_since, o.start.min(b));
            }
            let (sleep_end, run_start) = match (o.preempted, o.wake) {
                (true, _) => (o.start, o.start),
                (false, Some(w)) => (w, w),
                (false, None) => (o.end, o.end),
            };
            let blocked = overlap(o.start, sleep_end, a, b);
            if blocked > 0 {
                x.blocked_ns += blocked;
                let mut by = Vec::new();
                if let Some(w) = &o.waker {
                    add(&mut by, w.clone(), blocked);
                    add(&mut x.woken_by, w.clone(), blocked);
                }
                x.intervals.push(Interval {
                    start: o.start.max(a),
                    end: sleep_end.min(b),
                    runnable: false,
                    cpu: o.cpu,
                    by,
                    syscall: o.syscall.clone(),
                });
            }
            let runnable = overlap(run_start, o.end, a, b);
            if runnable > 0 {
                x.runnable_ns += runnable;
                let (s, e) = (run_start.max(a), o.end.min(b));
                let mut by = Vec::new();
                for r in self.runs_in(o.back_cpu, s, e).filter(|r| r.tid != tid) {
                    add(&mut by, Actor::Task(r.tid), overlap(r.start, r.end, s, e));
                }
                for (who, ns) in &by {
                    add(&mut x.ran_instead, who.clone(), *ns);
                }
                sort_desc(&mut by);
                x.intervals.push(Interval {
                    start: s,
                    end: e,
                    runnable: true,
                    cpu: o.back_cpu,
                    by,
                    syscall: None,
                });
            }
            if o.end < b {
                on_cpu = Some(o.back_cpu);
                on_cpu_since = o.end;
            }
        }
        if let Some(cpu) = on_cpu {
            self.add_irqs(&mut x, cpu, on_cpu_since, b);
        }
        sort_desc(&mut x.ran_instead);
        sort_desc(&mut x.woken_by);
        sort_desc(&mut x.irqs);
        x
    }

    fn add_irqs(&self, x: &mut Explanation, cpu: u32, a: i64, b: i64) {
        for r in self.irqs_in(cpu, a, b) {
            let ns = overlap(r.start, r.end, a, b);
            if ns > 0 {
                x.irq_ns += ns;
                add(&mut x.irqs, Actor::Irq(r.name.clone()), ns);
            }
        }
    }
}

/// Builds a [`Timeline`] one event at a time, and answers questions while it does: a reader
/// that explains spans as the kernel trace streams by ([`TimelineBuilder::settled`],
/// [`TimelineBuilder::timeline`]) and forgets what no span can ask about any more
/// ([`TimelineBuilder::prune`]) keeps its memory flat whatever the trace's size.
#[derive(Debug, Default)]
pub struct TimelineBuilder {
    t: Timeline,
    /// Per CPU: the running task and since when.
    cur: HashMap<u32, (i32, i64)>,
    /// Per CPU: the interrupt handlers in progress.
    in_irq: HashMap<u32, Vec<(String, i64)>>,
    last: Option<i64>,
    /// The tasks whose stretches are kept (`None`: all).
    followed: Option<std::collections::HashSet<i32>>,
    /// The system call each followed task is in (from its entry to its exit).
    in_syscall: HashMap<i32, Arc<str>>,
    /// Followed tasks now off the CPU and runnable (preempted, or woken): while there is
    /// one, who runs is kept.
    waiting: std::collections::HashSet<i32>,
}

impl TimelineBuilder {
    /// A builder following `roots` and what they fork (see [`Timeline::build`]; `None`: every
    /// task).
    pub fn new(roots: Option<&[i32]>) -> TimelineBuilder {
        TimelineBuilder {
            followed: roots.map(|r| r.iter().copied().collect()),
            ..TimelineBuilder::default()
        }
    }

    /// The timeline so far (stretches still open end with the trace).
    pub fn timeline(&self) -> &Timeline {
        &self.t
    }

    /// Time of the last event pushed, ns.
    pub fn cursor(&self) -> Option<i64> {
        self.last
    }

    /// Whether what [`Timeline::explain`] says of task `tid` up to `end` can no longer change:
    /// events up to `end` have been pushed, and its stretch off the CPU across `end` (if any)
    /// has ended (the CPU it came back on is known). An interrupt still in progress at `end`
    /// is not counted.
    pub fn settled(&self, tid: i32, end: i64) -> bool {
        self.last.is_some_and(|l| l > end)
            && self
                .t
                .off
                .get(&tid)
                .and_then(|v| v.last())
                .is_none_or(|o| o.end != i64::MAX || o.start >= end)
    }

    /// Forgets what ended before `before` (ns): no explanation of a window starting at or
    /// after it needs it. For each task, the last stretch before it is kept (where the task
    /// ran).
    pub fn prune(&mut self, before: i64) {
        for v in self.t.off.values_mut() {
            let n = v
                .iter()
                .take_while(|o| o.end != i64::MAX && o.end < before)
                .count();
            v.drain(..n.saturating_sub(1));
        }
        for v in self.t.runs.values_mut() {
            let n = v.iter().take_while(|r| r.end < before).count();
            v.drain(..n);
        }
        for v in self.t.irqs.values_mut() {
            let n = v.iter().take_while(|r| r.end < before).count();
            v.drain(..n);
        }
    }

    fn follows(&self, tid: i32) -> bool {
        self.followed.as_ref().is_none_or(|f| f.contains(&tid))
    }

    /// Adds event `e` at `ts` ns (events in time order).
    pub fn push(&mut self, ts: i64, e: &KEvent) {
        let keep_runs = self.followed.is_none() || !self.waiting.is_empty();
        let keep_irq = self
            .cur
            .get(&e.cpu)
            .is_none_or(|&(tid, _)| self.follows(tid));
        let follows_prev = match &e.event {
            Event::SchedSwitch(s) => self.follows(s.prev_tid),
            _ => false,
        };
        let t = &mut self.t;
        t.events += 1;
        self.last = Some(self.last.map_or(ts, |l| l.max(ts)));
        let cpu = e.cpu;
        let irq = |in_irq: &mut HashMap<u32, Vec<(String, i64)>>, name: String| {
            in_irq.entry(cpu).or_default().push((name, ts))
        };
        match &e.event {
            Event::SchedSwitch(s) => {
                let (prev, next) = (s.prev_tid, s.next_tid);
                t.comms.insert(prev, s.prev_comm);
                t.comms.insert(next, s.next_comm);
                let since = match self.cur.get(&cpu) {
                    Some(&(tid, since)) if tid == prev => since,
                    _ => ts,
                };
                if ts > since && keep_runs {
                    t.runs.entry(cpu).or_default().push(Run {
                        tid: prev,
                        start: since,
                        end: ts,
                    });
                }
                // Already running on another CPU by our reckoning: this switch-out and that
                // switch-in are inverted (clocks of two CPUs a hair apart): not a stretch off
                // the CPU.
                let elsewhere = self
                    .cur
                    .iter()
                    .any(|(&c, &(tid, _))| c != cpu && tid == prev);
                if let Some(o) = t.off.get_mut(&prev).and_then(|v| v.last_mut()) {
                    if o.end == i64::MAX {
                        // Its switch-in was never seen (lost events, inversion): unknown, so
                        // the stretch is left empty rather than unbounded.
                        o.end = o.start;
                    }
                }
                if prev != 0 && !elsewhere && follows_prev {
                    if s.preempted() {
                        self.waiting.insert(prev);
                    }
                    t.off.entry(prev).or_default().push(OffCpu {
                        start: ts,
                        wake: None,
                        end: i64::MAX,
                        cpu,
                        back_cpu: cpu,
                        preempted: s.preempted(),
                        waker: None,
                        syscall: (!s.preempted())
                            .then(|| self.in_syscall.get(&prev).cloned())
                            .flatten(),
                    });
                }
                if let Some(o) = t.off.get_mut(&next).and_then(|v| v.last_mut()) {
                    if o.end == i64::MAX {
                        o.end = ts;
                        o.back_cpu = cpu;
                    }
                }
                self.waiting.remove(&next);
                self.cur.insert(cpu, (next, ts));
            }
            Event::SchedWaking(w) | Event::SchedWakeup(w) => {
                t.comms.entry(w.tid).or_insert(w.comm);
                let waker = match self.in_irq.get(&cpu).and_then(|v| v.last()) {
                    Some((name, _)) => Some(Actor::Irq(name.clone())),
                    None => self.cur.get(&cpu).map(|&(tid, _)| Actor::Task(tid)),
                };
                if let Some(o) = t.off.get_mut(&w.tid).and_then(|v| v.last_mut()) {
                    if o.end == i64::MAX && !o.preempted && o.wake.is_none() {
                        o.wake = Some(ts);
                        o.waker = waker;
                        self.waiting.insert(w.tid);
                    }
                }
            }
            Event::SyscallEntry { call, tid, .. }
                if self.followed.as_ref().is_none_or(|f| f.contains(tid)) =>
            {
                self.in_syscall.insert(*tid, call.clone());
            }
            Event::SyscallExit { tid, .. }
            | Event::SchedProcessExit(crate::event::ProcessExit { tid, .. }) => {
                // exit_group never returns: the task's exit ends its call too.
                self.in_syscall.remove(tid);
            }
            Event::SchedProcessFork(f) => {
                if let Some(set) = &mut self.followed {
                    if set.contains(&f.parent_tid) {
                        set.insert(f.child_tid);
                    }
                }
            }
            Event::IrqHandlerEntry { irq: n, name } => {
                irq(&mut self.in_irq, format!("irq {n} {name}"))
            }
            Event::SoftirqEntry { vec } => {
                irq(&mut self.in_irq, format!("softirq {}", softirq_name(*vec)))
            }
            Event::VectorEntry { which, .. } => irq(&mut self.in_irq, which.describe().into()),
            Event::IrqHandlerExit { .. } | Event::SoftirqExit { .. } | Event::VectorExit { .. } => {
                let done = self.in_irq.get_mut(&cpu).and_then(|v| v.pop());
                if let Some((name, start)) = done.filter(|_| keep_irq) {
                    // Kept in start order (a nested handler ends first).
                    let v = t.irqs.entry(cpu).or_default();
                    let at = v.partition_point(|r| r.start <= start);
                    v.insert(
                        at,
                        IrqRun {
                            name,
                            start,
                            end: ts,
                        },
                    );
                }
            }
            _ => {}
        }
    }

    /// The timeline, `lost` events missing, with the reader's `warnings`: stretches still
    /// open end with the trace.
    pub fn finish(self, lost: u64, warnings: Vec<String>) -> Timeline {
        let mut t = self.t;
        t.lost = lost;
        t.warnings = warnings;
        let last = self.last.unwrap_or(i64::MIN);
        for (cpu, (tid, since)) in self.cur {
            if last > since {
                t.runs.entry(cpu).or_default().push(Run {
                    tid,
                    start: since,
                    end: last,
                });
            }
        }
        // Stretches still open when the trace ends end with it.
        for v in t.off.values_mut() {
            for o in v.iter_mut().filter(|o| o.end == i64::MAX) {
                o.end = last.max(o.start);
            }
        }
        for v in t.runs.values_mut() {
            v.sort_by_key(|r| r.start);
        }
        for v in t.irqs.values_mut() {
            v.sort_by_key(|r| r.start);
        }
        t
    }
}

#[cfg(test)]
mod tests {
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
}
