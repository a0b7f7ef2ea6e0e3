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

mod build;
pub use build::TimelineBuilder;

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

#[cfg(test)]
mod tests;
