//! `hushtrace report` with a kernel trace (`record --kernel`): for each span name, how much of
//! its time its thread was off the CPU, runnable (preempted, or woken and waiting for a CPU)
//! or blocked (sleeping), who ran instead and who woke it; and `report --slowest SPAN`: the
//! longest instances of a span, each with its off-CPU stretches and what took the CPU.

use crate::report::{fmt_duration, rfc3339};
use crate::spans::{Names, SpanStacks};
use hushtrace_ctf::reader::Session;
use hushtrace_ctf::Kind;
use hushtrace_kernel::analysis::{Actor, Explanation, Timeline};
use hushtrace_kernel::KernelTrace;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt::Write as _;

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

/// Computes the kernel part of the report of `session` (its kernel trace, if any, is in
/// `<session dir>/kernel`); `slowest`: the span name to list the `n` longest instances of.
pub fn compute(session: &Session, slowest: Option<&str>, n: usize) -> anyhow::Result<KernelReport> {
    let kernel = match hushtrace_kernel::kernel_dir(&session.dir) {
        Some(d) => {
            let k = KernelTrace::open(&d)?;
            let t = Timeline::build(&k)?;
            Some((k, t))
        }
        None => None,
    };
    let mut names = Names::for_session(session)?;
    let mut stacks = SpanStacks::default();
    let mut rows: HashMap<u32, SpanRow> = HashMap::new();
    let mut heap: BinaryHeap<Reverse<(i64, i64, u32, u32)>> = BinaryHeap::new();
    let mut slow_count = 0u64;
    let mut merged = session.merged()?;
    while let Some(ev) = merged.next()? {
        if !matches!(ev.event.class.kind, Kind::SpanBegin | Kind::SpanEnd) {
            continue;
        }
        let name = names.id(&ev);
        let Some(closed) = stacks.feed(&ev, name) else {
            continue;
        };
        let (pid, tid) = (ev.event.packet.vpid, ev.event.packet.vtid);
        let start = closed.start_ns as i64;
        let dur = closed.duration_ns as i64;
        if slowest == Some(names.name(name)) {
            slow_count += 1;
            heap.push(Reverse((dur, start, pid, tid)));
            if heap.len() > n {
                heap.pop();
            }
        }
        let Some((_, t)) = &kernel else { continue };
        if !t.knows(tid as i32) {
            continue;
        }
        let x = t.explain(tid as i32, start, start + dur);
        let row = rows.entry(name).or_insert_with(|| SpanRow {
            name: names.name(name).to_string(),
            ..SpanRow::default()
        });
        row.count += 1;
        row.total_ns += dur;
        row.runnable_ns += x.runnable_ns;
        row.blocked_ns += x.blocked_ns;
        row.irq_ns += x.irq_ns;
        merge_into(&mut row.ran_instead, described(t, &x.ran_instead));
        merge_into(&mut row.woken_by, described(t, &x.woken_by));
    }
    let mut rows: Vec<SpanRow> = rows.into_values().collect();
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
    let mut slow: Vec<SlowSpan> = heap
        .into_iter()
        .map(|Reverse((duration_ns, start_ns, pid, tid))| SlowSpan {
            pid,
            tid,
            start_ns,
            duration_ns,
            why: kernel
                .as_ref()
                .map(|(_, t)| t.explain(tid as i32, start_ns, start_ns + duration_ns)),
        })
        .collect();
    slow.sort_by(|a, b| {
        b.duration_ns
            .cmp(&a.duration_ns)
            .then(a.start_ns.cmp(&b.start_ns))
    });
    Ok(KernelReport {
        kernel,
        rows,
        slowest_of: slowest.map(|s| (s.to_string(), slow_count)),
        slowest: slow,
    })
}

fn pct(part: i64, whole: i64) -> String {
    if whole <= 0 {
        return "0%".into();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

fn list(v: &[(String, i64)], max: usize) -> String {
    let mut s: Vec<String> = v
        .iter()
        .take(max)
        .map(|(w, ns)| format!("{w} {}", fmt_duration(*ns)))
        .collect();
    if v.len() > max {
        s.push(format!("{} more", v.len() - max));
    }
    s.join(", ")
}

/// Columns of the [`bar`].
pub const BAR_WIDTH: usize = 60;

/// The span drawn as a bar of [`BAR_WIDTH`] columns: `#` on the CPU, `-` runnable (waiting
/// for the CPU), `.` blocked (sleeping); each column shows the state that filled most of it.
///
/// ```
/// use hushtrace_cli::kernel_report::{bar, SlowSpan};
/// use hushtrace_kernel::analysis::{Explanation, Interval};
/// let x = Explanation {
///     runnable_ns: 30,
///     intervals: vec![Interval { start: 130, end: 160, runnable: true, cpu: 0, by: vec![] }],
///     ..Default::default()
/// };
/// let sp = SlowSpan { pid: 1, tid: 1, start_ns: 100, duration_ns: 60, why: None };
/// assert_eq!(bar(&sp, &x), format!("|{}{}|", "#".repeat(30), "-".repeat(30)));
/// ```
pub fn bar(sp: &SlowSpan, x: &Explanation) -> String {
    let w = BAR_WIDTH as i64;
    let dur = sp.duration_ns.max(1);
    let mut s = String::with_capacity(BAR_WIDTH + 2);
    s.push('|');
    for c in 0..w {
        let a = sp.start_ns + dur * c / w;
        let b = (sp.start_ns + dur * (c + 1) / w).max(a + 1);
        let (mut run, mut blk) = (0, 0);
        for iv in &x.intervals {
            let o = (iv.end.min(b) - iv.start.max(a)).max(0);
            if iv.runnable {
                run += o;
            } else {
                blk += o;
            }
        }
        let on = (b - a) - run - blk;
        s.push(if on >= run && on >= blk {
            '#'
        } else if run >= blk {
            '-'
        } else {
            '.'
        });
    }
    s.push('|');
    s
}

impl KernelReport {
    /// `report` (the JSON value of the rest of the report) with a `"kernel"` member added
    /// when the session has a kernel trace: its directory, clock, event and lost counts, and
    /// the per-span rows.
    pub fn with_json(&self, mut report: serde_json::Value) -> serde_json::Value {
        if let (Some((k, t)), Some(obj)) = (&self.kernel, report.as_object_mut()) {
            obj.insert(
                "kernel".into(),
                serde_json::json!({
                    "dir": k.dir.display().to_string(),
                    "trace_clock": k.trace_clock,
                    "clock_note": k.clock.note,
                    "events": t.events,
                    "lost": t.lost,
                    "cpus": k.cpus,
                    "spans": self.rows,
                }),
            );
        }
        report
    }

    /// The off-CPU section of the text report (empty without a kernel trace).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let Some((k, t)) = &self.kernel else {
            return s;
        };
        let _ = writeln!(
            s,
            "\nKernel ({}): {} events on {} CPU(s), clock {}{}",
            k.dir.display(),
            t.events,
            k.cpus.len(),
            k.trace_clock,
            if t.lost > 0 {
                format!(", {} events LOST (the timeline has gaps)", t.lost)
            } else {
                String::new()
            }
        );
        for w in &t.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        if self.rows.is_empty() {
            s.push_str("  no span ran on a thread the kernel trace saw\n");
            return s;
        }
        s.push_str(
            "Off-CPU time per span (runnable: preempted, or woken and waiting for a CPU; \
             blocked: sleeping):\n",
        );
        for r in &self.rows {
            let off = r.runnable_ns + r.blocked_ns;
            let _ = writeln!(
                s,
                "  {}: {} spans, {} in all; off CPU {} ({}): runnable {}, blocked {}; \
                 interrupts {}",
                r.name,
                r.count,
                fmt_duration(r.total_ns),
                fmt_duration(off),
                pct(off, r.total_ns),
                fmt_duration(r.runnable_ns),
                fmt_duration(r.blocked_ns),
                fmt_duration(r.irq_ns)
            );
            if !r.ran_instead.is_empty() {
                let _ = writeln!(s, "      ran instead: {}", list(&r.ran_instead, 5));
            }
            if !r.woken_by.is_empty() {
                let _ = writeln!(s, "      woken by: {}", list(&r.woken_by, 5));
            }
        }
        s
    }

    /// The `--slowest` listing.
    pub fn slowest_text(&self) -> String {
        let mut s = String::new();
        let Some((name, count)) = &self.slowest_of else {
            return s;
        };
        if *count == 0 {
            let _ = writeln!(s, "No span named {name:?} in the trace.");
            return s;
        }
        let legend = if self.kernel.is_some() {
            "; bars: # on the CPU, - runnable (waiting for the CPU), . blocked (sleeping)"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "The {} longest {name} (of {count}){legend}:",
            self.slowest.len()
        );
        let timeline = self.kernel.as_ref().map(|(_, t)| t);
        for (i, sp) in self.slowest.iter().enumerate() {
            let _ = write!(
                s,
                "{:3}. {} at {} (pid {}, tid {})",
                i + 1,
                fmt_duration(sp.duration_ns),
                rfc3339(sp.start_ns),
                sp.pid,
                sp.tid
            );
            let (Some(x), Some(t)) = (&sp.why, timeline) else {
                s.push('\n');
                continue;
            };
            let _ = writeln!(
                s,
                ": on CPU {}, runnable {}, blocked {}, interrupts {}",
                fmt_duration(sp.duration_ns - x.off_cpu_ns()),
                fmt_duration(x.runnable_ns),
                fmt_duration(x.blocked_ns),
                fmt_duration(x.irq_ns)
            );
            let _ = writeln!(s, "       {}", bar(sp, x));
            for iv in &x.intervals {
                let who = described(t, &iv.by);
                let _ = writeln!(
                    s,
                    "       +{} .. +{} {} {} on CPU {}{}{}",
                    fmt_duration(iv.start - sp.start_ns),
                    fmt_duration(iv.end - sp.start_ns),
                    if iv.runnable { "runnable" } else { "blocked" },
                    fmt_duration(iv.end - iv.start),
                    iv.cpu,
                    if who.is_empty() {
                        ""
                    } else if iv.runnable {
                        ": ran instead "
                    } else {
                        ": woken by "
                    },
                    list(&who, 4)
                );
            }
            if !x.irqs.is_empty() {
                let _ = writeln!(s, "       interrupts: {}", list(&described(t, &x.irqs), 4));
            }
        }
        if self.kernel.is_none() {
            s.push_str(
                "(no kernel trace: record with `hushtrace record --kernel` to see why they \
                 were late)\n",
            );
        }
        s
    }
}
