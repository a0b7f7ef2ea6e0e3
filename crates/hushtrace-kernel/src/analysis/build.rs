//! Building a [`Timeline`] as the kernel trace streams by, pruned of what no span can ask about
//! any more.

use super::*;

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
