//! `hushtrace report` with a kernel trace (`record --kernel`): for each span name, how much of
//! its time its thread was off the CPU, runnable (preempted, or woken and waiting for a CPU)
//! or blocked (sleeping), who ran instead and who woke it; and `report --slowest SPAN`: the
//! longest instances of a span, each with its off-CPU stretches and what took the CPU.

use crate::report::{fmt_duration, rfc3339};
use crate::spans::{Names, SpanStacks};
use hushtrace_ctf::reader::Session;
use hushtrace_ctf::Kind;
use hushtrace_kernel::analysis::{Actor, Explanation, Timeline, TimelineBuilder};
use hushtrace_kernel::recovery::{self, Part};
use hushtrace_kernel::KernelTrace;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt::Write as _;

mod render;
pub use render::{bar, BAR_WIDTH};

/// Off-CPU time of one span name, summed over its instances.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpanRow {
    /// `category:name`.
    pub name: String,
    /// Instances (on threads the kernel trace saw).
    pub count: u64,
    /// Their total duration, ns.
    pub total_ns: i64,
    /// Runnable but not running, ns.
    pub runnable_ns: i64,
    /// Sleeping, ns.
    pub blocked_ns: i64,
    /// In interrupt handlers on its CPU while running, ns.
    pub irq_ns: i64,
    /// Who ran while the thread was runnable (`comm/tid`), ns, largest first.
    pub ran_instead: Vec<(String, i64)>,
    /// Who woke it, ns of sleep, largest first.
    pub woken_by: Vec<(String, i64)>,
}

/// One of the slowest instances of a span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowSpan {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Start, ns since the epoch.
    pub start_ns: i64,
    /// Duration, ns.
    pub duration_ns: i64,
    /// What the scheduler did meanwhile (`None` without a kernel trace).
    pub why: Option<Explanation>,
}

/// The kernel part of a report.
#[derive(Debug)]
pub struct KernelReport {
    /// The kernel trace (`None` if the session has none).
    pub kernel: Option<(KernelTrace, Timeline)>,
    /// Where the kernel trace's events begin on every CPU (ns since the epoch) when some
    /// CPU's buffer lost events before its first one (a flight recorder's snapshot: per-CPU
    /// rings that wrapped at different times; see `recovery::complete_from`): spans before it
    /// are not explained (`why` is `None`).
    pub kernel_from_ns: Option<i64>,
    /// Why the session's kernel trace is not included (it has one, but it cannot be read:
    /// still being recorded, no metadata).
    pub kernel_missing: Option<String>,
    /// Per span name, by total off-CPU time, largest first.
    pub rows: Vec<SpanRow>,
    /// The span `--slowest` asked for, and how many instances it has.
    pub slowest_of: Option<(String, u64)>,
    /// Its slowest instances, longest first.
    pub slowest: Vec<SlowSpan>,
}

fn described(t: &Timeline, v: &[(Actor, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(a, ns)| (t.describe(a), *ns)).collect()
}

fn merge_into(dst: &mut Vec<(String, i64)>, src: Vec<(String, i64)>) {
    for (who, ns) in src {
        match dst.iter_mut().find(|(w, _)| *w == who) {
            Some((_, n)) => *n += ns,
            None => dst.push((who, ns)),
        }
    }
}

/// A span closed but not explained yet: the kernel trace has not been read far enough.
#[derive(Clone, Copy, Debug)]
struct Pending {
    name: u32,
    pid: u32,
    tid: u32,
    start: i64,
    dur: i64,
    /// One of the `--slowest` span's instances.
    slow: bool,
}

/// Kernel events pushed between two prunings of the timeline.
const PRUNE_EVERY: u64 = 1 << 16;

/// The kernel trace read alongside the spans: events are pushed into the timeline up to the
/// time of the span event being read, so that the timeline only ever holds the stretch of
/// time the open and pending spans cover.
struct KernelCursor {
    trace: KernelTrace,
    events: hushtrace_kernel::Events,
    next: Option<hushtrace_kernel::KEvent>,
    builder: TimelineBuilder,
    since_prune: u64,
    /// Where the trace's events begin on every CPU, ns (see [`KernelReport::kernel_from_ns`]).
    from: Option<i64>,
}

/// The session's kernel trace as a cursor (`None`: there is none), or why it cannot be read.
type Opened = Result<Option<KernelCursor>, String>;

impl KernelCursor {
    /// The kernel part of `session` ([`recovery::part`]): an error for a trace that opens but
    /// does not read, `Err` inside for one that cannot be read as it is (said in the report).
    fn open(session: &Session) -> anyhow::Result<Opened> {
        let d = match recovery::part(&session.dir) {
            Part::Readable(d) => d,
            Part::Unreadable(d, why) => {
                return Ok(Err(format!(
                    "the kernel trace {} is not included: {why}",
                    d.display()
                )))
            }
            Part::None => return Ok(Ok(None)),
        };
        let trace = KernelTrace::open(&d)?;
        let from = recovery::complete_from(&trace.dir)
            .map(|ts| trace.epoch_ns(ts).clamp(i64::MIN as i128, i64::MAX as i128) as i64);
        let mut events = trace.events()?;
        let next = events.next()?;
        // Only the traced processes' threads are explained (see `Timeline::build`).
        let roots: Vec<i32> = session
            .traces
            .iter()
            .filter_map(|t| i32::try_from(t.desc.vpid).ok())
            .collect();
        Ok(Ok(Some(KernelCursor {
            trace,
            events,
            next,
            builder: TimelineBuilder::new(Some(&roots)),
            since_prune: 0,
            from,
        })))
    }

    /// Whether a span starting at `start` ns is in the trace's window (see
    /// [`KernelReport::kernel_from_ns`]): spans before it are not explained.
    fn in_window(&self, start: i64) -> bool {
        self.from.is_none_or(|f| start >= f)
    }

    /// Pushes the kernel events up to `t` ns (all of them with `None`).
    fn advance(&mut self, t: Option<i64>) -> anyhow::Result<()> {
        while let Some(e) = &self.next {
            let ns = self.trace.ns(e.ts);
            if t.is_some_and(|t| ns > t) {
                break;
            }
            self.builder.push(ns, e);
            self.since_prune += 1;
            self.next = self.events.next()?;
        }
        Ok(())
    }

    /// The timeline once every event was read (the count of lost ones is then final).
    fn finish(mut self) -> (KernelTrace, Timeline) {
        let warnings = self
            .events
            .take_warnings()
            .iter()
            .map(|w| w.to_string())
            .collect();
        let lost = self.events.discarded();
        (self.trace, self.builder.finish(lost, warnings))
    }
}

/// Per span name, the rows; and the `--slowest` instances with their explanations.
#[derive(Default)]
struct Tally {
    rows: HashMap<u32, SpanRow>,
    heap: BinaryHeap<Reverse<(i64, i64, u32, u32)>>,
    /// Explanations of the instances in `heap`.
    why: HashMap<(i64, i64, u32, u32), Explanation>,
    n: usize,
}

impl Tally {
    fn slow(&mut self, key: (i64, i64, u32, u32)) {
        self.heap.push(Reverse(key));
        if self.heap.len() > self.n {
            if let Some(Reverse(k)) = self.heap.pop() {
                self.why.remove(&k);
            }
        }
    }

    fn explain(&mut self, t: &Timeline, p: Pending, names: &Names) {
        let key = (p.dur, p.start, p.pid, p.tid);
        if !t.knows(p.tid as i32) {
            return;
        }
        let x = t.explain(p.tid as i32, p.start, p.start + p.dur);
        let row = self.rows.entry(p.name).or_insert_with(|| SpanRow {
            name: names.name(p.name).to_string(),
            ..SpanRow::default()
        });
        row.count += 1;
        row.total_ns += p.dur;
        row.runnable_ns += x.runnable_ns;
        row.blocked_ns += x.blocked_ns;
        row.irq_ns += x.irq_ns;
        merge_into(&mut row.ran_instead, described(t, &x.ran_instead));
        merge_into(&mut row.woken_by, described(t, &x.woken_by));
        if p.slow && self.heap.iter().any(|Reverse(k)| *k == key) {
            self.why.insert(key, x);
        }
    }
}

/// Computes the kernel part of the report of `session` (its kernel trace, if any, is in
/// `<session dir>/kernel`); `slowest`: the span name to list the `n` longest instances of.
///
/// The kernel trace is read once, as a stream, in step with the spans: each span is explained
/// as soon as the kernel events up to its end (and its thread's return to a CPU) have been
/// read, and what no open or pending span can need is forgotten, so memory stays flat
/// whatever the size of the kernel trace.
pub fn compute(session: &Session, slowest: Option<&str>, n: usize) -> anyhow::Result<KernelReport> {
    compute_pruning(session, slowest, n, PRUNE_EVERY)
}

/// [`compute`], pruning the timeline every `prune_every` kernel events.
fn compute_pruning(
    session: &Session,
    slowest: Option<&str>,
    n: usize,
    prune_every: u64,
) -> anyhow::Result<KernelReport> {
    let (mut kernel, kernel_missing) = match KernelCursor::open(session)? {
        Ok(k) => (k, None),
        Err(why) => (None, Some(why)),
    };
    let from = kernel.as_ref().and_then(|k| k.from);
    let mut names = Names::for_session(session)?;
    let mut stacks = SpanStacks::default();
    let mut tally = Tally {
        n,
        ..Tally::default()
    };
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut slow_count = 0u64;
    let mut merged = session.merged()?;
    let streams = merged.streams().len();
    while let Some(ev) = merged.next()? {
        if !matches!(ev.event.class.kind, Kind::SpanBegin | Kind::SpanEnd) {
            continue;
        }
        let name = names.id(&ev);
        let now = ev.time_ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let closed = stacks.feed(&ev, name);
        let (pid, tid) = (ev.event.packet.vpid, ev.event.packet.vtid);
        if let Some(closed) = closed {
            let p = Pending {
                name,
                pid,
                tid,
                start: closed.start_ns as i64,
                dur: closed.duration_ns as i64,
                slow: slowest == Some(names.name(name)),
            };
            if p.slow {
                slow_count += 1;
                tally.slow((p.dur, p.start, pid, tid));
            }
            if kernel.as_ref().is_some_and(|k| k.in_window(p.start)) {
                pending.push_back(p);
            }
        }
        let Some(k) = &mut kernel else { continue };
        k.advance(Some(now))?;
        while let Some(p) = pending.front() {
            if !k.builder.settled(p.tid as i32, p.start + p.dur) {
                break;
            }
            let p = *p;
            pending.pop_front();
            tally.explain(k.builder.timeline(), p, &names);
        }
        if k.since_prune >= prune_every {
            k.since_prune = 0;
            // The earliest time an open or pending span may still ask about.
            let open = (0..streams)
                .flat_map(|s| stacks.open(s).iter().map(|o| o.start_ns as i64))
                .min();
            let waiting = pending.iter().map(|p| p.start).min();
            let before = [open, waiting, k.builder.cursor()]
                .into_iter()
                .flatten()
                .min();
            if let Some(before) = before {
                k.builder.prune(before);
            }
        }
    }
    let kernel = match kernel {
        Some(mut k) => {
            k.advance(None)?;
            let (trace, t) = k.finish();
            for p in pending.drain(..) {
                tally.explain(&t, p, &names);
            }
            Some((trace, t))
        }
        None => None,
    };
    let mut rows: Vec<SpanRow> = tally.rows.into_values().collect();
    for r in &mut rows {
        r.ran_instead
            .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        r.woken_by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }
    rows.sort_by(|a, b| {
        (b.runnable_ns + b.blocked_ns)
            .cmp(&(a.runnable_ns + a.blocked_ns))
            .then(a.name.cmp(&b.name))
    });
    let mut why = tally.why;
    let mut slow: Vec<SlowSpan> = tally
        .heap
        .into_iter()
        .map(|Reverse(key)| {
            let (duration_ns, start_ns, pid, tid) = key;
            SlowSpan {
                pid,
                tid,
                start_ns,
                duration_ns,
                why: kernel
                    .as_ref()
                    .filter(|_| from.is_none_or(|f| start_ns >= f))
                    .map(|(_, t)| {
                        why.remove(&key).unwrap_or_else(|| {
                            t.explain(tid as i32, start_ns, start_ns + duration_ns)
                        })
                    }),
            }
        })
        .collect();
    slow.sort_by(|a, b| {
        b.duration_ns
            .cmp(&a.duration_ns)
            .then(a.start_ns.cmp(&b.start_ns))
    });
    Ok(KernelReport {
        kernel,
        kernel_from_ns: from,
        kernel_missing,
        rows,
        slowest_of: slowest.map(|s| (s.to_string(), slow_count)),
        slowest: slow,
    })
}

#[cfg(test)]
mod tests;
