//! The report as text: aligned tables, durations, dates, names in natural order.

use super::*;

/// Formats epoch nanoseconds as an RFC 3339 date and time in UTC with nanoseconds:
/// `2026-11-30T06:28:00.123456789Z`.
///
/// ```
/// use hushtrace_cli::report::rfc3339;
/// assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000Z");
/// assert_eq!(rfc3339(1_700_000_000_123_456_789), "2023-11-14T22:13:20.123456789Z");
/// ```
pub fn rfc3339(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{frac:09}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// Compares names with their digit runs as numbers: `main.rs:7` before `main.rs:10`.
///
/// ```
/// use hushtrace_cli::report::natural_cmp;
/// let mut v = vec!["main.rs:10", "main.rs:7", "a:b", "main.rs:007x", "main.rs:7"];
/// v.sort_by(|a, b| natural_cmp(a, b));
/// assert_eq!(v, ["a:b", "main.rs:7", "main.rs:7", "main.rs:007x", "main.rs:10"]);
/// ```
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut x, mut y) = (a, b);
    loop {
        let (Some(cx), Some(cy)) = (x.chars().next(), y.chars().next()) else {
            return x.len().cmp(&y.len()).then_with(|| a.cmp(b));
        };
        if cx.is_ascii_digit() && cy.is_ascii_digit() {
            let nx = x.len() - x.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let ny = y.len() - y.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let (dx, dy) = (&x[..nx], &y[..ny]);
            let (tx, ty) = (dx.trim_start_matches('0'), dy.trim_start_matches('0'));
            let o = tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty));
            if o != Ordering::Equal {
                return o;
            }
            x = &x[nx..];
            y = &y[ny..];
        } else {
            if cx != cy {
                return cx.cmp(&cy);
            }
            x = &x[cx.len_utf8()..];
            y = &y[cy.len_utf8()..];
        }
    }
}

/// Formats a duration for people: `850 ns`, `12.345 µs`, `3.200 ms`, `1.500 s`.
///
/// ```
/// use hushtrace_cli::report::fmt_duration;
/// assert_eq!(fmt_duration(850), "850 ns");
/// assert_eq!(fmt_duration(12_345), "12.345 µs");
/// assert_eq!(fmt_duration(1_500_000_000), "1.500 s");
/// ```
pub fn fmt_duration(ns: i64) -> String {
    let a = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    let (unit, div) = match a {
        0..=999 => return format!("{ns} ns"),
        1_000..=999_999 => ("µs", 1_000),
        1_000_000..=999_999_999 => ("ms", 1_000_000),
        _ => ("s", 1_000_000_000),
    };
    format!("{sign}{}.{:03} {unit}", a / div, a % div * 1000 / div)
}

/// Renders an aligned table: first column left-aligned, the others right-aligned.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.zip(&widths).enumerate() {
            let pad = w.saturating_sub(c.chars().count());
            if i == 0 {
                l.push_str(c);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str("  ");
                l.push_str(&" ".repeat(pad));
                l.push_str(c);
            }
        }
        s.push_str(l.trim_end());
        s.push('\n');
    };
    line(&mut headers.iter().copied());
    for r in rows {
        line(&mut r.iter().map(|c| c.as_str()));
    }
    s
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

impl Report {
    /// The report as text for a terminal.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let threads: usize = self.processes.iter().map(|p| p.threads.len()).sum();
        let _ = writeln!(
            s,
            "Trace {}: {} process(es), {} thread(s), {} events",
            self.dir,
            self.processes.len(),
            threads,
            self.events
        );
        match (&self.start_time, &self.end_time) {
            (Some(start), Some(end)) => {
                let _ = writeln!(
                    s,
                    "Time range: {start} .. {end} ({})\n",
                    fmt_duration(self.duration_ns)
                );
            }
            _ => match &self.elsewhere {
                Some(e) => {
                    let _ = writeln!(s, "{e}\n");
                }
                None => s.push_str("The trace is empty: it holds no events.\n\n"),
            },
        }

        let mut rows = Vec::new();
        for p in &self.processes {
            rows.push(vec![
                format!("process {}", p.name),
                p.pid.to_string(),
                String::new(),
                p.events.to_string(),
                p.discarded.to_string(),
                p.lost_packets.to_string(),
                opt(p.stats_written),
                opt(p.stats_discarded),
            ]);
            for t in &p.threads {
                rows.push(vec![
                    format!("  thread {}", t.name),
                    p.pid.to_string(),
                    t.tid.to_string(),
                    t.events.to_string(),
                    t.discarded.to_string(),
                    t.lost_packets.to_string(),
                    String::new(),
                    String::new(),
                ]);
            }
        }
        s.push_str(&table(
            &[
                "PROCESS / THREAD",
                "PID",
                "TID",
                "EVENTS",
                "DISCARDED",
                "LOST PKTS",
                "WRITTEN*",
                "DISCARDED*",
            ],
            &rows,
        ));
        s.push_str("(* from the process's stats file; - without one)\n");
        if self.processes.iter().any(|p| p.lost_packets > 0) {
            s.push_str(
                "LOST PKTS: whole packets missing from the trace (gaps in packet_seq_num: \
                 overwritten in overwrite mode, or lost to a failed write); their events are \
                 not in EVENTS\n",
            );
        }
        for p in &self.processes {
            let note = match p.origin.as_str() {
                "relay copy" => {
                    "the relay's copy: the relay does not store statistics files; \
                                 the traced machine's trace directory has them"
                }
                "snapshot" => "a snapshot: the newest contents of its buffers when it was taken",
                "recovered" => {
                    "recovered: it ended without stopping, and `hushtrace recover` \
                                added what its buffers held"
                }
                _ => continue,
            };
            let _ = writeln!(s, "process {} ({}): {note}", p.pid, p.name);
        }
        for p in self.processes.iter().filter(|p| !p.complete) {
            let _ = writeln!(
                s,
                "INCOMPLETE: process {} ({}) did not stop tracing (no stats file): it crashed, \
                 was killed or is still running; events still in its buffers are missing",
                p.pid, p.name
            );
        }
        s.push('\n');

        if !self.spans.is_empty() {
            let rows: Vec<Vec<String>> = self
                .spans
                .iter()
                .map(|r| {
                    vec![
                        format!("{}{}", r.name, r.kind.suffix()),
                        r.count.to_string(),
                        fmt_duration(r.total_ns),
                        fmt_duration(r.mean_ns),
                        fmt_duration(r.p50_ns),
                        fmt_duration(r.p99_ns),
                        fmt_duration(r.p99_9_ns),
                        fmt_duration(r.p99_99_ns),
                        fmt_duration(r.max_ns),
                    ]
                })
                .collect();
            s.push_str(&table(
                &[
                    "SPAN", "COUNT", "TOTAL", "MEAN", "P50", "P99", "P99.9", "P99.99", "MAX",
                ],
                &rows,
            ));
            s.push('\n');
        }
        if !self.instants.is_empty() {
            let rows: Vec<Vec<String>> = self
                .instants
                .iter()
                .map(|r| vec![r.name.clone(), r.count.to_string()])
                .collect();
            s.push_str(&table(&["EVENT", "COUNT"], &rows));
            s.push('\n');
        }
        if !self.counters.is_empty() {
            let rows: Vec<Vec<String>> = self
                .counters
                .iter()
                .map(|r| {
                    let v = |v: f64| {
                        if r.boolean {
                            (v != 0.0).to_string()
                        } else {
                            num(v)
                        }
                    };
                    vec![
                        r.name.clone(),
                        r.count.to_string(),
                        v(r.min),
                        v(r.max),
                        v(r.last),
                    ]
                })
                .collect();
            s.push_str(&table(&["COUNTER", "COUNT", "MIN", "MAX", "LAST"], &rows));
            s.push('\n');
        }
        if self.unclosed_spans + self.unmatched_ends > 0 {
            let _ = writeln!(
                s,
                "{} span(s) not ended in the trace, {} end(s) without a begin (lost data)",
                self.unclosed_spans, self.unmatched_ends
            );
        }
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        s
    }
}
