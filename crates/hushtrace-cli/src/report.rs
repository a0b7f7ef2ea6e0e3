//! Summary statistics of a trace: time range, per process and thread counts, span durations,
//! instants and counters.
//!
//! Span durations go into one HDR histogram per span name (3 significant digits: exact below
//! 2,048 ns, within 0.1% above), so memory stays flat however many spans there are; count,
//! total, min and max are exact. Everything else is constant per name or thread.

use crate::spans::{AsyncSpans, Names, SpanStacks};
use hushtrace_ctf::reader::{Error, Origin, Session};
use hushtrace_ctf::Kind;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

mod text;
pub use text::{fmt_duration, natural_cmp, rfc3339, table};

/// The whole report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// The session directory.
    pub dir: String,
    /// Time of the first event, ns since the Unix epoch (0 without events).
    pub start_ns: i64,
    /// Time of the first event as an RFC 3339 date and time in UTC (ns precision); `None`
    /// without events.
    pub start_time: Option<String>,
    /// Time of the last event, RFC 3339 (UTC); `None` without events.
    pub end_time: Option<String>,
    /// Time of the last event, ns since the Unix epoch.
    pub end_ns: i64,
    /// `end_ns - start_ns`.
    pub duration_ns: i64,
    /// Events read.
    pub events: u64,
    /// Per process, ordered by pid.
    pub processes: Vec<ProcessReport>,
    /// Per span name and kind, by total time descending.
    pub spans: Vec<SpanReport>,
    /// Per instant event name.
    pub instants: Vec<InstantReport>,
    /// Per counter name.
    pub counters: Vec<CounterReport>,
    /// Spans begun but never ended in the trace.
    pub unclosed_spans: u64,
    /// Span ends whose begin is not in the trace.
    pub unmatched_ends: u64,
    /// Where the events are when this directory holds none although its processes wrote
    /// some (a relay-only session: they went to the relay).
    pub elsewhere: Option<String>,
    /// Reader warnings.
    pub warnings: Vec<String>,
}

/// One process.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcessReport {
    /// Process id.
    pub pid: u32,
    /// Process name (from the metadata).
    pub name: String,
    /// Events read from the trace.
    pub events: u64,
    /// Events discarded, from packet contexts (CTF `events_discarded`).
    pub discarded: u64,
    /// Whole packets missing from the trace, from packet sequence numbers: overwritten in
    /// overwrite mode (a stream starting after sequence number 0) or lost to a failed write.
    pub lost_packets: u64,
    /// Whether the trace holds everything: the process stopped tracing and wrote its
    /// statistics file, or the directory never has one (a relay's copy, a snapshot, a
    /// recovered trace: see `origin`). `false`: it crashed, was killed or still runs, and the
    /// events still in its buffers are missing.
    pub complete: bool,
    /// Who wrote the directory: `recorded` (the process), `relay copy`, `snapshot` or
    /// `recovered`.
    pub origin: String,
    /// Events written, from the statistics file (absent if the process did not stop cleanly).
    pub stats_written: Option<u64>,
    /// Events discarded, from the statistics file.
    pub stats_discarded: Option<u64>,
    /// Per thread, ordered by tid.
    pub threads: Vec<ThreadReport>,
}

/// One thread.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ThreadReport {
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub name: String,
    /// Events read.
    pub events: u64,
    /// Events discarded, from packet contexts (CTF `events_discarded`).
    pub discarded: u64,
    /// Whole packets missing before this thread's packets (sequence number gaps).
    pub lost_packets: u64,
}

/// What a span row measures: spans of one name and kind are one row, so a name used both by
/// thread spans and async spans (a Python coroutine's resumptions and its asyncio task's
/// lifetime) gives two rows, each with its own count and durations.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    /// Thread spans (begin and end on one thread, nested): also a traced Python function's
    /// calls, each resumption of a generator or coroutine one span.
    Span,
    /// Async spans (matched by id, on any thread).
    Async,
    /// Python asyncio tasks (`py:task` async spans, named after their coroutine's
    /// function): creation to the coroutine's end.
    Task,
}

impl SpanKind {
    /// The suffix of the row's name in the text report (none for thread spans).
    pub fn suffix(self) -> &'static str {
        match self {
            SpanKind::Span => "",
            SpanKind::Async => " (async)",
            SpanKind::Task => " (task)",
        }
    }
}

/// Durations of one span name and kind, in ns.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SpanReport {
    /// `"category:name"`.
    pub name: String,
    /// Thread spans, async spans or Python tasks.
    pub kind: SpanKind,
    /// Spans closed.
    pub count: u64,
    /// Sum of durations.
    pub total_ns: i64,
    /// Mean duration (rounded down).
    pub mean_ns: i64,
    /// Median (from the histogram: within 0.1%, never above the max).
    pub p50_ns: i64,
    /// 99th percentile.
    pub p99_ns: i64,
    /// 99.9th percentile.
    pub p99_9_ns: i64,
    /// 99.99th percentile.
    pub p99_99_ns: i64,
    /// Shortest.
    pub min_ns: i64,
    /// Longest.
    pub max_ns: i64,
}

/// One instant event name.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct InstantReport {
    /// `"category:name"`.
    pub name: String,
    /// Occurrences.
    pub count: u64,
}

/// One counter name.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CounterReport {
    /// `"category:name"`.
    pub name: String,
    /// Samples.
    pub count: u64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Last value in time order.
    pub last: f64,
    /// Whether the counter's values are `bool` (min, max and last are then 0 or 1).
    pub boolean: bool,
}

#[derive(Default)]
struct ThreadAcc {
    name: String,
    events: u64,
    discarded: u64,
    lost_packets: u64,
}

/// Per stream: last packet seen, discarded count and lost packets attributed so far.
#[derive(Default, Clone)]
struct StreamAcc {
    packet_offset: Option<u64>,
    discarded: u64,
    lost_packets: u64,
    thread: (u32, u32),
}

fn clamp(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Durations of one span name: exact count, total, min, max; percentiles from a histogram.
struct SpanAcc {
    hist: hdrhistogram::Histogram<u64>,
    count: u64,
    total: i128,
    min: i64,
    max: i64,
}

impl SpanAcc {
    fn new() -> Self {
        SpanAcc {
            // 3 significant digits, growing as large values come (memory: a few KB per decade).
            hist: hdrhistogram::Histogram::new(3).expect("3 significant digits are valid"),
            count: 0,
            total: 0,
            min: i64::MAX,
            max: i64::MIN,
        }
    }

    fn record(&mut self, ns: i64) {
        self.count += 1;
        self.total += ns as i128;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        // Negative durations (a clock stepping back in a damaged trace) count as 0; the
        // histogram grows by itself, so recording cannot fail.
        let _ = self.hist.record(ns.max(0) as u64);
    }

    /// The value at quantile `q`, never above the exact max (a bucket's top can be).
    fn quantile(&self, q: f64) -> i64 {
        let v = i64::try_from(self.hist.value_at_quantile(q)).unwrap_or(i64::MAX);
        v.min(self.max).max(self.min)
    }
}

/// Reads the whole session and computes the report.
pub fn compute(session: &Session) -> Result<Report, Error> {
    let mut merged = session.merged()?;
    let mut names = Names::for_session(session)?;
    let mut stacks = SpanStacks::default();
    let mut asyncs = AsyncSpans::default();
    let mut durations: HashMap<(u32, SpanKind), SpanAcc> = HashMap::new();
    let mut instants: BTreeMap<u32, u64> = BTreeMap::new();
    let mut counters: BTreeMap<u32, CounterReport> = BTreeMap::new();
    let mut threads: BTreeMap<(u32, u32), ThreadAcc> = BTreeMap::new();
    let mut streams: Vec<StreamAcc> = vec![StreamAcc::default(); merged.streams().len()];
    let (mut start, mut end, mut events) = (None, 0i128, 0u64);

    while let Some(ev) = merged.next()? {
        events += 1;
        start.get_or_insert(ev.time_ns);
        end = end.max(ev.time_ns);
        let p = ev.event.packet;
        let key = (p.vpid, p.vtid);
        let th = threads.entry(key).or_insert_with(|| ThreadAcc {
            name: p.procname.clone(),
            ..Default::default()
        });
        th.events += 1;
        let sa = &mut streams[ev.stream];
        if sa.packet_offset != Some(p.offset) {
            sa.packet_offset = Some(p.offset);
            if th.name != p.procname {
                th.name.clone_from(&p.procname); // renamed while traced: the last name
            }
            th.discarded = th
                .discarded
                .saturating_add(p.events_discarded.saturating_sub(sa.discarded));
            sa.discarded = sa.discarded.max(p.events_discarded);
            // Packets missing before this one were most likely this thread's (a stream is
            // one thread's until its buffer is recycled).
            th.lost_packets = th.lost_packets.saturating_add(p.lost_before);
            sa.lost_packets = sa.lost_packets.saturating_add(p.lost_before);
            sa.thread = key;
        }
        let name = names.id(&ev);
        match ev.event.class.kind {
            // Python function definitions are not events of the program (see `pyfuncs`).
            Kind::Instant if crate::pyfuncs::is_definition(&ev) => {}
            Kind::Instant => *instants.entry(name).or_default() += 1,
            Kind::Counter => {
                let field = ev.event.field(0);
                let boolean = matches!(field, Some(hushtrace_ctf::reader::Value::Bool(_)));
                let v = field.and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
                let c = counters.entry(name).or_insert_with(|| CounterReport {
                    name: names.name(name).to_string(),
                    count: 0,
                    min: v,
                    max: v,
                    last: v,
                    boolean,
                });
                c.count += 1;
                c.min = c.min.min(v);
                c.max = c.max.max(v);
                c.last = v;
            }
            Kind::SpanBegin | Kind::SpanEnd | Kind::AsyncBegin | Kind::AsyncEnd => {
                // Thread spans nest per thread; async spans match by id (counted once).
                let (closed, kind) = match ev.event.class.kind {
                    Kind::AsyncBegin | Kind::AsyncEnd if crate::pyfuncs::is_task(&ev) => {
                        (asyncs.feed(&ev, name), SpanKind::Task)
                    }
                    Kind::AsyncBegin | Kind::AsyncEnd => (asyncs.feed(&ev, name), SpanKind::Async),
                    _ => (stacks.feed(&ev, name), SpanKind::Span),
                };
                if let Some(closed) = closed {
                    durations
                        .entry((closed.name, kind))
                        .or_insert_with(SpanAcc::new)
                        .record(clamp(closed.duration_ns));
                }
            }
        }
    }
    stacks.finish();

    // Discards and lost packets seen in packets without events (not seen above) go to the
    // stream's last thread.
    for ((_, s), acc) in merged.streams().iter().zip(&streams) {
        if let Some(th) = threads.get_mut(&acc.thread) {
            th.discarded = th
                .discarded
                .saturating_add(s.events_discarded().saturating_sub(acc.discarded));
            th.lost_packets = th
                .lost_packets
                .saturating_add(s.lost_packets().saturating_sub(acc.lost_packets));
        }
    }

    let mut processes: Vec<ProcessReport> = Vec::new();
    for ((pid, tid), th) in threads {
        if processes.last().map(|p| p.pid) != Some(pid) {
            let trace = session.traces.iter().find(|t| t.desc.vpid == pid);
            processes.push(ProcessReport {
                pid,
                name: trace.map(|t| t.desc.procname.clone()).unwrap_or_default(),
                events: 0,
                discarded: 0,
                lost_packets: 0,
                complete: trace.map(complete).unwrap_or(true),
                origin: origin_name(trace.map_or(Origin::Recorded, |t| t.origin)).into(),
                stats_written: trace.and_then(|t| t.stats).map(|s| s.written),
                stats_discarded: trace.and_then(|t| t.stats).map(|s| s.discarded),
                threads: Vec::new(),
            });
        }
        if let Some(pr) = processes.last_mut() {
            pr.events += th.events;
            pr.discarded = pr.discarded.saturating_add(th.discarded);
            pr.lost_packets = pr.lost_packets.saturating_add(th.lost_packets);
            pr.threads.push(ThreadReport {
                tid,
                name: th.name,
                events: th.events,
                discarded: th.discarded,
                lost_packets: th.lost_packets,
            });
        }
    }
    // Processes with a trace but no events still appear.
    for t in &session.traces {
        if !processes.iter().any(|p| p.pid == t.desc.vpid) {
            processes.push(ProcessReport {
                pid: t.desc.vpid,
                name: t.desc.procname.clone(),
                events: 0,
                discarded: 0,
                lost_packets: 0,
                complete: complete(t),
                origin: origin_name(t.origin).into(),
                stats_written: t.stats.map(|s| s.written),
                stats_discarded: t.stats.map(|s| s.discarded),
                threads: Vec::new(),
            });
        }
    }
    processes.sort_by_key(|p| p.pid);

    let mut spans: Vec<SpanReport> = durations
        .into_iter()
        .map(|((i, kind), d)| SpanReport {
            name: names.name(i).to_string(),
            kind,
            count: d.count,
            total_ns: clamp(d.total),
            mean_ns: clamp(d.total / d.count.max(1) as i128),
            p50_ns: d.quantile(0.5),
            p99_ns: d.quantile(0.99),
            p99_9_ns: d.quantile(0.999),
            p99_99_ns: d.quantile(0.9999),
            min_ns: d.min,
            max_ns: d.max,
        })
        .collect();
    spans.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| natural_cmp(&a.name, &b.name))
            .then_with(|| a.kind.cmp(&b.kind))
    });
    let mut instants: Vec<InstantReport> = instants
        .into_iter()
        .map(|(n, count)| InstantReport {
            name: names.name(n).to_string(),
            count,
        })
        .collect();
    instants.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    let mut counters: Vec<CounterReport> = counters.into_values().collect();
    counters.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    let elsewhere = (events == 0).then(|| elsewhere(session)).flatten();

    let mut warnings: Vec<String> = session.warnings.iter().map(|w| w.to_string()).collect();
    warnings.extend(merged.take_warnings().iter().map(|w| w.to_string()));
    let rfc = |t: i128| rfc3339(clamp(t));
    let (start_time, end_time) = match start {
        Some(s) => (Some(rfc(s)), Some(rfc(end.max(s)))),
        None => (None, None),
    };
    let start = start.unwrap_or(0);
    Ok(Report {
        start_time,
        end_time,
        dir: session.dir.display().to_string(),
        start_ns: clamp(start),
        end_ns: clamp(end.max(start)),
        duration_ns: clamp(end.max(start) - start),
        events,
        processes,
        spans,
        instants,
        counters,
        unclosed_spans: stacks.unclosed,
        unmatched_ends: stacks.unmatched_ends,
        elsewhere,
        warnings,
    })
}

pub(crate) fn complete(t: &hushtrace_ctf::reader::ProcessTrace) -> bool {
    t.is_complete() || t.origin != Origin::Recorded
}

pub(crate) fn origin_name(o: Origin) -> &'static str {
    match o {
        Origin::Recorded => "recorded",
        Origin::RelayCopy => "relay copy",
        Origin::Snapshot => "snapshot",
        Origin::Recovered => "recovered",
    }
}

/// Where the events of a session that holds none went, when its processes wrote some: a
/// relay-only session keeps the metadata and statistics here and sends the event streams to
/// the relay only. `None` when the directory holds events, or its processes wrote none.
pub fn elsewhere(session: &Session) -> Option<String> {
    let written: u64 = session
        .traces
        .iter()
        .filter(|t| t.streams.is_empty())
        .filter_map(|t| t.stats.map(|s| s.written))
        .sum();
    if written == 0 || session.traces.iter().any(|t| !t.streams.is_empty()) {
        return None;
    }
    let host = session
        .traces
        .first()
        .map(|t| t.desc.hostname.clone())
        .unwrap_or_default();
    // The session directory, not a process's (`report <dir>/<pid>`).
    let dir = match session.traces.as_slice() {
        [t] if t.dir == session.dir => session.dir.parent().unwrap_or(&session.dir),
        _ => &session.dir,
    };
    let name = std::path::absolute(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    Some(format!(
        "This directory holds no events, but its statistics files say {written} were written: \
         the session sent its event streams only to an LTTng relay (--relay-only, \
         HUSHTRACE_RELAY_ONLY). Read the relay's copy: `hushtrace report \
         <relay output dir>/{host}/{name}/` (lttng-relayd's -o directory, by default \
         ~/lttng-traces; host and session as given by --relay-host/--relay-session or \
         HUSHTRACE_RELAY_HOST/HUSHTRACE_RELAY_SESSION, if set)."
    ))
}

#[cfg(test)]
mod tests;
