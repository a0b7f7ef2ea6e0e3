//! `report --late` as text, and the late-span counters in the plain `report`.

use super::*;
use crate::report::{fmt_duration, rfc3339};
use std::fmt::Write as _;

/// `name/tid 1.2ms, ...` (the interrupts and system calls without a tid), at most `max`.
fn list(v: &[Who], max: usize) -> String {
    let mut s: Vec<String> = v
        .iter()
        .take(max)
        .map(|w| match w.tid {
            Some(0) => format!("idle {}", fmt_duration(w.ns)),
            Some(t) => format!("{}/{t} {}", w.name, fmt_duration(w.ns)),
            None => format!("{} {}", w.name, fmt_duration(w.ns)),
        })
        .collect();
    if v.len() > max {
        s.push(format!("{} more", v.len() - max));
    }
    s.join(", ")
}

/// The counters, one line per process (empty without any).
pub fn counters_text(counters: &[LateCounters]) -> String {
    let mut s = String::new();
    for c in counters {
        let _ = writeln!(
            s,
            "  process {}: {} late spans, {} captured, {} not captured",
            c.pid, c.late_spans, c.late_captured, c.late_not_captured
        );
    }
    s
}

impl LateReport {
    /// The text report.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        let _ = writeln!(
            s,
            "Late spans in {}: {} captured",
            self.dir,
            self.captures.len()
        );
        s.push_str(&counters_text(&self.counters));
        if self.captures.iter().any(|c| c.kernel.is_some()) {
            s.push_str(
                "(bars: # on the CPU, - runnable (waiting for the CPU), . blocked (sleeping))\n",
            );
        }
        for c in &self.captures {
            let e = &c.entry;
            let _ = writeln!(
                s,
                "{:3}. {} took {} against a deadline of {} (late by {}) at {} (pid {}, tid {}): {}",
                e.n,
                e.span,
                fmt_duration(e.duration_ns),
                fmt_duration(e.deadline_ns),
                fmt_duration(c.late_by_ns),
                rfc3339(e.start_ns),
                e.pid,
                e.tid,
                e.dir
            );
            if let Some(note) = &c.kernel_note {
                let _ = writeln!(s, "     {note}");
            }
            let Some(k) = &c.kernel else { continue };
            let _ = writeln!(
                s,
                "     running {}, runnable {}, blocked {}, interrupts {}{}",
                fmt_duration(k.running_ns),
                fmt_duration(k.runnable_ns),
                fmt_duration(k.blocked_ns),
                fmt_duration(k.irq_ns),
                if k.never_switched {
                    " (never switched out: on the CPU throughout)"
                } else {
                    ""
                }
            );
            let _ = writeln!(s, "     {}", k.bar);
            if !k.ran_instead.is_empty() {
                let _ = writeln!(s, "     ran instead: {}", list(&k.ran_instead, 5));
            }
            if !k.blocked_in.is_empty() {
                let _ = writeln!(s, "     blocked in: {}", list(&k.blocked_in, 5));
            }
            if !k.woken_by.is_empty() {
                let _ = writeln!(s, "     woken by: {}", list(&k.woken_by, 5));
            }
            if !k.interrupts.is_empty() {
                let _ = writeln!(s, "     interrupts: {}", list(&k.interrupts, 5));
            }
            for st in &k.stretches {
                let _ = writeln!(
                    s,
                    "       +{} .. +{} {} {}{} on CPU {}{}{}",
                    fmt_duration(st.from_ns),
                    fmt_duration(st.to_ns),
                    st.state,
                    fmt_duration(st.to_ns - st.from_ns),
                    match &st.syscall {
                        Some(call) => format!(" in {call}"),
                        None => String::new(),
                    },
                    st.cpu,
                    match (st.by.is_empty(), st.state) {
                        (true, _) => "",
                        (false, "runnable") => ": ran instead ",
                        (false, _) => ": woken by ",
                    },
                    list(&st.by, 4)
                );
            }
            let _ = writeln!(s, "     kernel events: {}", k.kernel_dir);
        }
        s
    }
}
