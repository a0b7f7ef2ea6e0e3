//! `hushtrace report --late DIR`: the late-span captures of a session (`record --on-late`,
//! issue 31), each span against its deadline and, when kernel events cover it, why it was
//! late: its thread's time running, runnable (and who ran instead), blocked (and in which
//! system call) and in interrupts, from the same kernel timeline as `report --slowest`.
//!
//! The program's consumer writes each capture as a trace of its own in `DIR/late/<n>/<pid>/`
//! and one JSON line per capture in `DIR/late/index.json`
//! (`{"n","span","pid","tid","start_ns","duration_ns","deadline_ns","dir"}`). The kernel
//! events are the capture's own `DIR/late/<n>/kernel/` (written beside it by `record --kernel
//! --mode overwrite`), or else the session's `DIR/kernel/` (discard mode: every kernel event
//! is there). The counters `late_spans`, `late_captured` and `late_not_captured` come from the
//! processes' statistics files (`DIR/<pid>.stats.json`).
//!
//! The JSON output ([`LateReport`]) is documented field by field on its types.

use hushtrace_kernel::analysis::{Actor, Explanation, Timeline, TimelineBuilder};
use hushtrace_kernel::recovery::{self, Part};
use hushtrace_kernel::KernelTrace;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

mod counters;
mod render;
pub use counters::{read_counters, LateCounters};
pub use render::counters_text;

/// The directory of the captures, under the session directory.
pub const LATE_DIR: &str = "late";
/// The index of the captures, in [`LATE_DIR`].
pub const INDEX_FILE: &str = "index.json";
/// Index files larger than this are refused (a line is under 300 bytes).
const MAX_INDEX_BYTES: u64 = 64 << 20;

/// One line of `late/index.json`: one capture, as the program's consumer wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The capture's number, from 1.
    pub n: u64,
    /// The late span, `category:name`.
    pub span: String,
    /// Its process id.
    pub pid: u32,
    /// Its thread id.
    pub tid: u32,
    /// Its start, ns since the Unix epoch.
    pub start_ns: i64,
    /// Its duration, ns.
    pub duration_ns: i64,
    /// Its deadline, ns.
    pub deadline_ns: i64,
    /// The capture's directory, relative to the session directory (`late/1`).
    pub dir: String,
}

/// A task or an interrupt handler that took time from the late span's thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Who {
    /// The task's command name (`idle` for the idle task), or the interrupt's name.
    pub name: String,
    /// The task's thread id; `null` for an interrupt.
    pub tid: Option<i32>,
    /// How long, ns.
    pub ns: i64,
}

/// One stretch of the span its thread spent off the CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stretch {
    /// Start, ns after the span's start.
    pub from_ns: i64,
    /// End, ns after the span's start.
    pub to_ns: i64,
    /// `"runnable"` (preempted, or woken and waiting for a CPU) or `"blocked"` (sleeping).
    pub state: &'static str,
    /// The CPU it waited for (runnable) or left (blocked).
    pub cpu: u32,
    /// Blocked: the system call it slept in (with `record --kernel syscalls`).
    pub syscall: Option<String>,
    /// Runnable: who ran on that CPU meanwhile; blocked: who woke it.
    pub by: Vec<Who>,
}

/// What the kernel events say about a late span's thread during the span.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelWhy {
    /// The kernel trace read: the capture's `kernel/` or the session's (a path).
    pub kernel_dir: String,
    /// On the CPU, ns (the span's duration minus runnable and blocked time).
    pub running_ns: i64,
    /// Runnable but not running, ns.
    pub runnable_ns: i64,
    /// Sleeping, ns.
    pub blocked_ns: i64,
    /// In interrupt handlers on its CPU while it ran, ns (with `record --kernel irq`).
    pub irq_ns: i64,
    /// Who ran while it was runnable, largest first.
    pub ran_instead: Vec<Who>,
    /// Who woke it, ns of sleep each, largest first.
    pub woken_by: Vec<Who>,
    /// The system calls it slept in, ns each, largest first (`name` is the call; `tid` null).
    pub blocked_in: Vec<Who>,
    /// The interrupt handlers that took its CPU, largest first.
    pub interrupts: Vec<Who>,
    /// Its stretches off the CPU, in time order.
    pub stretches: Vec<Stretch>,
    /// The kernel trace saw no switch of the thread: it was on the CPU throughout.
    pub never_switched: bool,
    /// The span drawn (see `kernel_report::bar`); text output only.
    #[serde(skip)]
    pub bar: String,
}

/// One capture in the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LateCapture {
    /// The index line (`n`, `span`, `pid`, `tid`, `start_ns`, `duration_ns`, `deadline_ns`,
    /// `dir`), flattened into this object.
    #[serde(flatten)]
    pub entry: IndexEntry,
    /// `duration_ns - deadline_ns`.
    pub late_by_ns: i64,
    /// Why it was late, from kernel events (`null` without kernel events covering the span).
    pub kernel: Option<KernelWhy>,
    /// Why `kernel` is `null`: no kernel trace, an unreadable one, or one that does not cover
    /// the span.
    pub kernel_note: Option<String>,
}

/// The whole `report --late`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LateReport {
    /// The session directory.
    pub dir: String,
    /// The counters of each process that has them in its statistics file.
    pub counters: Vec<LateCounters>,
    /// The captures, in index order.
    pub captures: Vec<LateCapture>,
    /// Problems met that did not stop the report (an unreadable statistics file).
    pub warnings: Vec<String>,
}

/// A kernel trace read once and shared by the captures it covers.
struct Loaded {
    trace: KernelTrace,
    timeline: Timeline,
    /// First and last event, ns (none: no event).
    range: Option<(i64, i64)>,
    /// Where every CPU's events begin when some ring wrapped (`recovery::complete_from`).
    from: Option<i64>,
}

fn clamp(ns: i128) -> i64 {
    ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Reads kernel trace `dir` into a timeline following `roots` (pids and the late threads).
fn load(dir: &Path, roots: &[i32]) -> anyhow::Result<Loaded> {
    let trace = KernelTrace::open(dir)?;
    let from = recovery::complete_from(&trace.dir).map(|ts| clamp(trace.epoch_ns(ts)));
    let mut events = trace.events()?;
    let mut b = TimelineBuilder::new(Some(roots));
    let mut range: Option<(i64, i64)> = None;
    while let Some(e) = events.next()? {
        let ns = trace.ns(e.ts);
        range = Some(range.map_or((ns, ns), |(a, z)| (a.min(ns), z.max(ns))));
        b.push(ns, &e);
    }
    let warnings = events
        .take_warnings()
        .iter()
        .map(|w| w.to_string())
        .collect();
    let timeline = b.finish(events.discarded(), warnings);
    Ok(Loaded {
        trace,
        timeline,
        range,
        from,
    })
}

/// Parses the index text (`path` names it in errors): one JSON object per non-empty line.
pub fn parse_index(path: &Path, text: &str) -> anyhow::Result<Vec<IndexEntry>> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: IndexEntry = serde_json::from_str(line).map_err(|e| {
            anyhow::anyhow!(
                "{} line {}: not a capture's entry ({e}): {}",
                path.display(),
                i + 1,
                line.chars().take(120).collect::<String>()
            )
        })?;
        if e.duration_ns < 0 || e.deadline_ns < 0 {
            anyhow::bail!(
                "{} line {}: a negative duration or deadline",
                path.display(),
                i + 1
            );
        }
        v.push(e);
    }
    Ok(v)
}

/// The capture directory `rel` under `session`: a relative path going nowhere above it.
fn capture_dir(session: &Path, index: &Path, e: &IndexEntry) -> anyhow::Result<PathBuf> {
    let rel = Path::new(&e.dir);
    let inside = !e.dir.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !inside {
        anyhow::bail!(
            "{}: capture {}: its directory {:?} is not a path inside the session directory",
            index.display(),
            e.n,
            e.dir
        );
    }
    let d = session.join(rel);
    match std::fs::symlink_metadata(&d) {
        Ok(m) if m.is_dir() => Ok(d),
        Ok(_) => anyhow::bail!(
            "{}: capture {}: {} is not a directory",
            index.display(),
            e.n,
            d.display()
        ),
        Err(err) => anyhow::bail!(
            "{}: capture {}: {}: {err}",
            index.display(),
            e.n,
            d.display()
        ),
    }
}

/// Reads the index of session `dir`: `None` when there is none.
fn read_index(dir: &Path) -> anyhow::Result<Option<(PathBuf, Vec<IndexEntry>)>> {
    let path = dir.join(LATE_DIR).join(INDEX_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let bytes = hushtrace_ctf::file::read_regular(&path, MAX_INDEX_BYTES)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: not a regular file, or larger than {MAX_INDEX_BYTES} bytes",
                path.display()
            )
        })?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", path.display()))?;
    let entries = parse_index(&path, text)?;
    Ok(Some((path, entries)))
}

fn who(t: &Timeline, v: &[(Actor, i64)]) -> Vec<Who> {
    v.iter()
        .map(|(a, ns)| match a {
            Actor::Task(0) => Who {
                name: "idle".into(),
                tid: Some(0),
                ns: *ns,
            },
            Actor::Task(tid) => Who {
                name: t.comm(*tid).to_string(),
                tid: Some(*tid),
                ns: *ns,
            },
            Actor::Irq(n) => Who {
                name: n.clone(),
                tid: None,
                ns: *ns,
            },
        })
        .collect()
}

/// The kernel part of one capture's explanation, from the loaded trace.
fn explain(k: &Loaded, e: &IndexEntry) -> Result<KernelWhy, String> {
    let (a, b) = (e.start_ns, e.start_ns.saturating_add(e.duration_ns));
    let Some((first, last)) = k.range else {
        return Err(format!(
            "the kernel trace {} has no event",
            k.trace.dir.display()
        ));
    };
    let begin = k.from.map_or(first, |f| f.max(first));
    if a < begin || b > last {
        return Err(format!(
            "the kernel trace {} does not cover the span (its events on every CPU run from {} \
             to {})",
            k.trace.dir.display(),
            crate::report::rfc3339(begin),
            crate::report::rfc3339(last)
        ));
    }
    let t = &k.timeline;
    let tid = e.tid as i32;
    let x: Explanation = t.explain(tid, a, b);
    let mut blocked_in: Vec<(Actor, i64)> = Vec::new();
    for iv in x.intervals.iter().filter(|iv| !iv.runnable) {
        if let Some(call) = &iv.syscall {
            let key = Actor::Irq(call.to_string());
            match blocked_in.iter_mut().find(|(w, _)| *w == key) {
                Some((_, ns)) => *ns += iv.end - iv.start,
                None => blocked_in.push((key, iv.end - iv.start)),
            }
        }
    }
    blocked_in.sort_by(|p, q| q.1.cmp(&p.1).then(p.0.cmp(&q.0)));
    let sp = crate::kernel_report::SlowSpan {
        pid: e.pid,
        tid: e.tid,
        start_ns: a,
        duration_ns: e.duration_ns,
        why: None,
    };
    Ok(KernelWhy {
        kernel_dir: k.trace.dir.display().to_string(),
        running_ns: e.duration_ns - x.off_cpu_ns(),
        runnable_ns: x.runnable_ns,
        blocked_ns: x.blocked_ns,
        irq_ns: x.irq_ns,
        ran_instead: who(t, &x.ran_instead),
        woken_by: who(t, &x.woken_by),
        blocked_in: who(t, &blocked_in),
        interrupts: who(t, &x.irqs),
        stretches: x
            .intervals
            .iter()
            .map(|iv| Stretch {
                from_ns: iv.start - a,
                to_ns: iv.end - a,
                state: if iv.runnable { "runnable" } else { "blocked" },
                cpu: iv.cpu,
                syscall: iv.syscall.as_deref().map(str::to_string),
                by: who(t, &iv.by),
            })
            .collect(),
        never_switched: !t.knows(tid),
        bar: crate::kernel_report::bar(&sp, &x),
    })
}

/// The kernel trace a capture is explained with: its own `kernel/`, else the session's.
fn kernel_of(session: &Path, capture: &Path) -> Part {
    match recovery::part(capture) {
        Part::None => recovery::part(session),
        p => p,
    }
}

/// Computes the report of session `dir`. Errors: a missing or garbled `late/index.json`
/// (missing is not an error when the statistics files count late spans: then no span was
/// captured), a capture directory missing. A kernel trace that cannot be read is said in the
/// captures it concerns (`kernel_note`).
pub fn compute(dir: &Path) -> anyhow::Result<LateReport> {
    if let Err(e) = std::fs::symlink_metadata(dir) {
        anyhow::bail!("{}: {e}", dir.display());
    }
    let (counters, warnings) = read_counters(dir);
    let (index, entries) = match read_index(dir)? {
        Some(x) => x,
        None if !counters.is_empty() => (PathBuf::new(), Vec::new()),
        None => anyhow::bail!(
            "{}: no such file: {} holds no late-span capture (record with `hushtrace record \
             --on-late 'CATEGORY:NAME>DURATION'`, or a deadline on the span)",
            dir.join(LATE_DIR).join(INDEX_FILE).display(),
            dir.display()
        ),
    };
    let mut roots: Vec<i32> = entries
        .iter()
        .flat_map(|e| [e.pid as i32, e.tid as i32])
        .collect();
    roots.sort_unstable();
    roots.dedup();
    let mut loaded: HashMap<PathBuf, Result<Arc<Loaded>, String>> = HashMap::new();
    let mut captures = Vec::with_capacity(entries.len());
    for e in entries {
        let cdir = capture_dir(dir, &index, &e)?;
        let (kernel, kernel_note) = match kernel_of(dir, &cdir) {
            Part::None => (
                None,
                Some(
                    "no kernel events (record with `hushtrace record --kernel` to see why it \
                     was late)"
                        .to_string(),
                ),
            ),
            Part::Unreadable(d, why) => (
                None,
                Some(format!(
                    "the kernel trace {} is not included: {why}",
                    d.display()
                )),
            ),
            Part::Readable(kd) => {
                let k = match loaded.get(&kd) {
                    Some(k) => k.clone(),
                    None => {
                        let k = load(&kd, &roots).map(Arc::new).map_err(|err| {
                            format!("the kernel trace {} cannot be read: {err:#}", kd.display())
                        });
                        loaded.insert(kd.clone(), k.clone());
                        k
                    }
                };
                match k.and_then(|k| explain(&k, &e)) {
                    Ok(w) => (Some(w), None),
                    Err(why) => (None, Some(why)),
                }
            }
        };
        captures.push(LateCapture {
            late_by_ns: e.duration_ns - e.deadline_ns,
            entry: e,
            kernel,
            kernel_note,
        });
    }
    Ok(LateReport {
        dir: dir.display().to_string(),
        counters,
        captures,
        warnings,
    })
}

#[cfg(test)]
mod tests;
