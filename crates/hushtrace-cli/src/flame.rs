//! Flame graphs of spans, drawn by `inferno`.
//!
//! Stacks are built per thread from nested spans, and for async spans (`async_span!`, the
//! `tracing` bridge's spans) from their recorded parents, whatever threads they ran on; a
//! frame's width is its inclusive time (each folded line carries the span's self time, and
//! inferno sums children into parents). An async span's self time is its duration minus its
//! children's (at least 0: children that ran concurrently may add up to more than their
//! parent). By default the stacks of all threads and processes are merged; [`Roots::Process`]
//! adds a root frame per process, [`Roots::Thread`] one per thread (`name (pid/tid)`; async
//! stacks, which belong to no thread, go under their process's frame, `procname (pid)`).

use crate::spans::{AsyncTree, Names, SpanStacks};
use hushtrace_ctf::reader::{Error, Session};
use std::collections::HashMap;
use std::io::Write;

/// Folded stacks (`"a;b;c <ns>"`), sorted, from the spans of `session`.
///
/// ```
/// use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
/// let dir = std::env::temp_dir().join(format!("hushtrace-flame-doc-{}", std::process::id()));
/// let mut t = SynthTrace::new(1, "app");
/// let (ob, oe) = t.span("a:outer", &[]);
/// let (ib, ie) = t.span("a:inner", &[]);
/// t.thread(1, "main")
///     .event(SynthEvent::new(ob, 0)).event(SynthEvent::new(ib, 10))
///     .event(SynthEvent::new(ie, 40)).event(SynthEvent::new(oe, 100));
/// t.write_session(&dir).unwrap();
/// let s = hushtrace_ctf::reader::Session::open(&dir).unwrap();
/// let folded = hushtrace_cli::flame::folded(&s, false).unwrap();
/// assert_eq!(folded, ["a:outer 70", "a:outer;a:inner 30"]);
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn folded(session: &Session, per_process: bool) -> Result<Vec<String>, Error> {
    folded_by(
        session,
        if per_process {
            Roots::Process
        } else {
            Roots::Merged
        },
    )
}

/// The root frames of a flame graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Roots {
    /// All processes and threads merged.
    Merged,
    /// One root frame per process: `procname (pid)`.
    Process,
    /// One root frame per thread: `threadname (pid/tid)`.
    Thread,
}

/// A root frame: (pid, tid for a thread root).
type Root = (u32, Option<u32>);

/// Folded stacks with the given root frames.
pub fn folded_by(session: &Session, roots: Roots) -> Result<Vec<String>, Error> {
    let mut merged = session.merged()?;
    let mut thread_names: HashMap<(u32, u32), String> = HashMap::new();
    let mut names = Names::for_session(session)?;
    let mut stacks = SpanStacks::default();
    let mut asyncs = AsyncTree::default();
    // Key: (the process's pid when `per_process`, else None; the stack, root first, as
    // interned names).
    let mut weights: HashMap<(Option<Root>, Vec<u32>), u64> = HashMap::new();
    let mut key = Vec::new();
    while let Some(ev) = merged.next()? {
        let name = names.id(&ev);
        let p = ev.event.packet;
        let (closed, root) = if let Some(closed) = stacks.feed(&ev, name) {
            key.clear();
            key.extend(stacks.open(ev.stream).iter().map(|s| s.name));
            key.push(closed.name);
            let root = match roots {
                Roots::Merged => None,
                Roots::Process => Some((p.vpid, None)),
                Roots::Thread => {
                    thread_names
                        .entry((p.vpid, p.vtid))
                        .or_insert_with(|| p.procname.clone());
                    Some((p.vpid, Some(p.vtid)))
                }
            };
            (closed, root)
        } else if let Some((closed, path)) = asyncs.feed(&ev, name) {
            key.clear();
            key.extend(path);
            let root = match roots {
                Roots::Merged => None,
                Roots::Process | Roots::Thread => Some((p.vpid, None)),
            };
            (closed, root)
        } else {
            continue;
        };
        {
            let w = closed.self_ns.max(0) as u64;
            match weights.get_mut(&(root, key.clone())) {
                Some(v) => *v += w,
                None => {
                    weights.insert((root, key.clone()), w);
                }
            }
        }
    }
    let procname = |pid: u32| {
        session
            .traces
            .iter()
            .find(|t| t.desc.vpid == pid)
            .map_or_else(String::new, |t| t.desc.procname.clone())
    };
    let frame = |s: &str| s.replace(';', ",");
    let mut lines: Vec<String> = weights
        .into_iter()
        .filter(|(_, w)| *w > 0)
        .map(|((root, stack), w)| {
            let mut l = String::new();
            match root {
                Some((pid, None)) => {
                    l.push_str(&frame(&format!("{} ({pid})", procname(pid))));
                    l.push(';');
                }
                Some((pid, Some(tid))) => {
                    let name = thread_names.get(&(pid, tid)).map_or("", |s| s.as_str());
                    l.push_str(&frame(&format!("{name} ({pid}/{tid})")));
                    l.push(';');
                }
                None => {}
            }
            let parts: Vec<String> = stack.iter().map(|&n| frame(names.name(n))).collect();
            l.push_str(&parts.join(";"));
            l.push(' ');
            l.push_str(&w.to_string());
            l
        })
        .collect();
    lines.sort();
    Ok(lines)
}

/// Why a flame graph could not be drawn.
#[derive(Debug)]
pub enum FlameError {
    /// The trace is unreadable.
    Read(Error),
    /// The trace has no complete span.
    NoSpans,
    /// inferno or the output failed.
    Write(std::io::Error),
}

impl std::fmt::Display for FlameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlameError::Read(e) => write!(f, "{e}"),
            FlameError::NoSpans => write!(f, "the trace has no complete span to draw"),
            FlameError::Write(e) => write!(f, "writing the flame graph: {e}"),
        }
    }
}

impl std::error::Error for FlameError {}

/// Writes the flame graph SVG of `session`'s spans to `out`.
pub fn write_svg<W: Write>(session: &Session, per_process: bool, out: W) -> Result<(), FlameError> {
    write_svg_by(
        session,
        if per_process {
            Roots::Process
        } else {
            Roots::Merged
        },
        out,
    )
}

/// Writes the folded stacks (`"a;b;c <ns>"`, one per line, as `inferno-flamegraph` and
/// `flamegraph.pl` read them) of `session`'s spans to `out`.
pub fn write_folded<W: Write>(
    session: &Session,
    roots: Roots,
    mut out: W,
) -> Result<(), FlameError> {
    let lines = folded_by(session, roots).map_err(FlameError::Read)?;
    if lines.is_empty() {
        return Err(FlameError::NoSpans);
    }
    for l in lines {
        writeln!(out, "{l}").map_err(FlameError::Write)?;
    }
    Ok(())
}

/// [`write_svg`] with the given root frames.
pub fn write_svg_by<W: Write>(session: &Session, roots: Roots, out: W) -> Result<(), FlameError> {
    let lines = folded_by(session, roots).map_err(FlameError::Read)?;
    if lines.is_empty() {
        return Err(FlameError::NoSpans);
    }
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = format!("hushtrace spans: {}", session.dir.display());
    opt.count_name = "ns".into();
    opt.subtitle = Some("width = inclusive time".into());
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(|s| s.as_str()), out)
        .map_err(FlameError::Write)
}
