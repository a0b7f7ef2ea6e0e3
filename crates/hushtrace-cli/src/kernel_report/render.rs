//! The kernel report rendered: its JSON member, the text tables and the slowest instances' bars.

use super::*;

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
///     intervals: vec![Interval { start: 130, end: 160, runnable: true, cpu: 0, by: vec![],
///                                syscall: None }],
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
        if let (Some(why), Some(obj)) = (&self.kernel_missing, report.as_object_mut()) {
            obj.insert("kernel".into(), serde_json::json!({ "error": why }));
        }
        report
    }

    /// The off-CPU section of the text report (empty without a kernel trace).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        if let Some(why) = &self.kernel_missing {
            let _ = writeln!(s, "\nKernel: {why}");
        }
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
                if let (Some(f), Some(_)) = (self.kernel_from_ns, timeline) {
                    let _ = write!(
                        s,
                        ": before the kernel trace (its events begin on every CPU at {}: older \
                         ones were overwritten or lost)",
                        rfc3339(f)
                    );
                }
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
                    "       +{} .. +{} {} {}{} on CPU {}{}{}",
                    fmt_duration(iv.start - sp.start_ns),
                    fmt_duration(iv.end - sp.start_ns),
                    if iv.runnable { "runnable" } else { "blocked" },
                    fmt_duration(iv.end - iv.start),
                    match &iv.syscall {
                        Some(call) => format!(" in {call}"),
                        None => String::new(),
                    },
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
        if let Some(why) = &self.kernel_missing {
            let _ = writeln!(s, "({why})");
        } else if self.kernel.is_none() {
            s.push_str(
                "(no kernel trace: record with `hushtrace record --kernel` to see why they \
                 were late)\n",
            );
        }
        s
    }
}
