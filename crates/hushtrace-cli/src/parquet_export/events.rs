//! The one pass over the trace's events: slices, instants, counters and losses are written as
//! they come; threads and processes (a few per thread) are kept and written at the end.
//!
//! Spans are matched by the readers' own matching ([`SpanStacks`] for thread spans,
//! [`AsyncTree`] for async spans): this module only mirrors their open spans to give each a
//! slice id, its parent's id and its begin's fields. Memory: the open spans and the threads.

use super::table::Table;
use super::ExportError;
use crate::pyfuncs::PyDef;
use crate::spans::{async_id, async_parent, AsyncTree, Names, SpanStacks};
use crate::split_name;
use hushtrace_ctf::reader::{MergedEvent, Session, Value};
use hushtrace_ctf::Kind;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// The tables written while reading.
#[derive(Debug)]
pub struct Tables<'a> {
    /// `slices`.
    pub slices: &'a mut Table,
    /// `instants`.
    pub instants: &'a mut Table,
    /// `counters`.
    pub counters: &'a mut Table,
    /// `losses`.
    pub losses: &'a mut Table,
}

/// What a thread did, kept until the end.
#[derive(Debug, Clone)]
pub struct ThreadAcc {
    /// Its last name.
    pub name: String,
    /// Its first and last event, ns since the Unix epoch.
    pub first_ns: i128,
    /// See `first_ns`.
    pub last_ns: i128,
    /// Events read.
    pub events: u64,
    /// Events discarded in its streams (packet contexts).
    pub discarded: u64,
    /// Packets missing before its packets.
    pub lost_packets: u64,
}

/// A span begun and not yet ended.
#[derive(Debug, Clone)]
struct Open {
    slice_id: i64,
    parent_id: Option<i64>,
    depth: i32,
    start_ns: i128,
    pid: u32,
    tid: u32,
    thread_name: Rc<str>,
    process_name: Rc<str>,
    name: u32,
    kind: &'static str,
    args: Option<String>,
    /// A traced Python function's call: (process trace, function id).
    py: Option<(usize, u32)>,
}

/// Per stream: the last packet seen, the losses accounted so far and the open thread spans.
#[derive(Debug, Default)]
struct StreamAcc {
    packet: Option<u64>,
    discarded: u64,
    lost_packets: u64,
    thread: (u32, u32),
    last_ns: Option<i128>,
    open: Vec<Open>,
    /// The thread's and its process's names as of the current packet (shared by its spans).
    names: Option<(Rc<str>, Rc<str>)>,
    /// Events of the current packet not yet counted into its thread's [`ThreadAcc`].
    pending: u64,
}

impl StreamAcc {
    /// Counts the current packet's events into its thread (`last_ns` is the stream's last).
    fn flush(&mut self, threads: &mut BTreeMap<(u32, u32), ThreadAcc>) {
        if self.pending == 0 {
            return;
        }
        if let (Some(th), Some(last)) = (threads.get_mut(&self.thread), self.last_ns) {
            th.events += self.pending;
            th.last_ns = th.last_ns.max(last);
        }
        self.pending = 0;
    }
}

/// What [`read`] keeps: the threads by (pid, tid), and the reader's warnings.
pub type Read = (
    BTreeMap<(u32, u32), ThreadAcc>,
    Vec<hushtrace_ctf::reader::Warning>,
);

/// Reads every event of `session` into `tables`; returns the threads, by (pid, tid).
pub fn read(
    session: &Session,
    tables: &mut Tables<'_>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Read, ExportError> {
    let mut merged = session.merged()?;
    let total = merged.total_bytes();
    let mut names = Names::for_session(session)?;
    let mut stacks = SpanStacks::default();
    let mut tree = AsyncTree::default();
    let mut asyncs: HashMap<(u32, u64), Open> = HashMap::new();
    let mut streams: Vec<StreamAcc> = Vec::new();
    streams.resize_with(merged.streams().len(), StreamAcc::default);
    let mut threads: BTreeMap<(u32, u32), ThreadAcc> = BTreeMap::new();
    let mut next_id = 1i64;
    let mut split = SplitNames::default();
    let mut events = 0u64;
    let mut text = Vec::with_capacity(256);

    let stream_names: Vec<String> = (0..streams.len())
        .map(|i| stream_name(&merged, i))
        .collect();
    loop {
        if events.is_multiple_of(1 << 16) {
            progress(merged.bytes_read(), total);
        }
        let Some(ev) = merged.next()? else { break };
        events += 1;
        let p = ev.event.packet;
        let key = (p.vpid, p.vtid);
        let sa = &mut streams[ev.stream];
        if sa.packet != Some(p.offset) {
            // A packet is one thread's: its events are counted into the thread's entry when
            // the stream moves on (not one map lookup per event).
            sa.flush(&mut threads);
            sa.packet = Some(p.offset);
            let th = threads.entry(key).or_insert_with(|| ThreadAcc {
                name: p.procname.clone(),
                first_ns: ev.time_ns,
                last_ns: ev.time_ns,
                events: 0,
                discarded: 0,
                lost_packets: 0,
            });
            let process_name = if ev.desc.vpid == p.vpid {
                ev.desc.procname.as_str()
            } else {
                ""
            };
            sa.names = Some((p.procname.as_str().into(), process_name.into()));
            if th.name != p.procname {
                th.name.clone_from(&p.procname);
            }
            let discarded = p.events_discarded.saturating_sub(sa.discarded);
            sa.discarded = sa.discarded.max(p.events_discarded);
            sa.lost_packets = sa.lost_packets.saturating_add(p.lost_before);
            th.discarded = th.discarded.saturating_add(discarded);
            th.lost_packets = th.lost_packets.saturating_add(p.lost_before);
            sa.thread = key;
            if discarded > 0 || p.lost_before > 0 {
                tables
                    .losses
                    .row()
                    .i64(p.vpid.into())
                    .i64(p.vtid.into())
                    .str(&p.procname)
                    .str(&stream_names[ev.stream])
                    .opt_i64(sa.last_ns.map(ns))
                    .i64(ns(ev.time_ns))
                    .i64(to_i64(discarded))
                    .i64(to_i64(p.lost_before))
                    .end()?;
            }
        }
        sa.last_ns = Some(ev.time_ns);
        sa.pending += 1;
        let process_name = if ev.desc.vpid == p.vpid {
            ev.desc.procname.as_str()
        } else {
            ""
        };
        let name = names.id(&ev);
        let kind = ev.event.class.kind;
        match kind {
            // A Python function's definition names its calls; it is not an event to show.
            Kind::Instant if crate::pyfuncs::is_definition(&ev) => {}
            Kind::Instant => {
                let (cat, n) = split.get(&names, name);
                let args = args_json(&ev, &mut text);
                tables
                    .instants
                    .row()
                    .i64(p.vpid.into())
                    .i64(p.vtid.into())
                    .str(&p.procname)
                    .str(process_name)
                    .str(cat)
                    .str(n)
                    .i64(ns(ev.time_ns))
                    .opt_str(args)
                    .end()?;
            }
            Kind::Counter => {
                let (cat, n) = split.get(&names, name);
                let v = ev.event.field(0);
                let int = v.and_then(|v| match v {
                    Value::F64(_) | Value::Bool(_) | Value::Str(_) => None,
                    v => v.as_i64().or_else(|| v.as_u64().map(to_i64)),
                });
                tables
                    .counters
                    .row()
                    .i64(p.vpid.into())
                    .i64(p.vtid.into())
                    .str(&p.procname)
                    .str(process_name)
                    .str(cat)
                    .str(n)
                    .i64(ns(ev.time_ns))
                    .opt_f64(v.and_then(|v| v.as_f64()))
                    .opt_i64(int)
                    .end()?;
            }
            Kind::SpanBegin | Kind::SpanEnd => {
                let closed = stacks.feed(&ev, name);
                let depth = stacks.open(ev.stream).len();
                let sa = &mut streams[ev.stream];
                if kind == Kind::SpanBegin {
                    // The matching starts the thread's stack anew when its stream changes
                    // thread: what was open there stays unclosed.
                    for o in sa.open.drain(depth.saturating_sub(1)..) {
                        write_slice(tables.slices, &names, &mut split, &o, None, None)?;
                    }
                    let parent_id = sa.open.last().map(|o| o.slice_id);
                    let o = open(
                        &ev,
                        &names,
                        sa.names.clone(),
                        name,
                        "span",
                        next_id,
                        parent_id,
                        depth - 1,
                        &mut text,
                    );
                    next_id += 1;
                    sa.open.push(o);
                } else if let Some(c) = closed {
                    // Spans above the one that ended never ended (their ends were lost).
                    while sa.open.len() > depth + 1 {
                        if let Some(o) = sa.open.pop() {
                            write_slice(tables.slices, &names, &mut split, &o, None, None)?;
                        }
                    }
                    if sa.open.len() == depth + 1 {
                        if let Some(o) = sa.open.pop() {
                            let dur = ns(c.duration_ns);
                            let self_ns = Some(ns(c.self_ns));
                            write_slice(tables.slices, &names, &mut split, &o, Some(dur), self_ns)?;
                        }
                    }
                }
            }
            Kind::AsyncBegin | Kind::AsyncEnd => {
                let closed = tree.feed(&ev, name);
                let Some(id) = async_id(&ev) else { continue };
                let pid = p.vpid;
                if kind == Kind::AsyncBegin {
                    let parent = async_parent(&ev);
                    let (parent_id, depth) = match asyncs.get(&(pid, parent)) {
                        Some(o) if parent != 0 && parent != id => (Some(o.slice_id), o.depth + 1),
                        _ => (None, 0),
                    };
                    let kind = if crate::pyfuncs::is_task(&ev) {
                        "task"
                    } else {
                        "async"
                    };
                    let o = open(
                        &ev,
                        &names,
                        streams[ev.stream].names.clone(),
                        name,
                        kind,
                        next_id,
                        parent_id,
                        depth as usize,
                        &mut text,
                    );
                    next_id += 1;
                    if let Some(old) = asyncs.insert((pid, id), o) {
                        // Its id was reused before it ended.
                        write_slice(tables.slices, &names, &mut split, &old, None, None)?;
                    }
                } else if let Some((c, _)) = closed {
                    if let Some(o) = asyncs.remove(&(pid, id)) {
                        let dur = ns(c.duration_ns);
                        write_slice(
                            tables.slices,
                            &names,
                            &mut split,
                            &o,
                            Some(dur),
                            Some(ns(c.self_ns)),
                        )?;
                    }
                }
            }
        }
    }
    for sa in &mut streams {
        sa.flush(&mut threads);
    }
    // What never ended: thread spans still open, async spans begun and not ended.
    for sa in &mut streams {
        for o in sa.open.drain(..) {
            write_slice(tables.slices, &names, &mut split, &o, None, None)?;
        }
    }
    let mut rest: Vec<Open> = asyncs.into_values().collect();
    rest.sort_by_key(|o| o.slice_id);
    for o in rest {
        write_slice(tables.slices, &names, &mut split, &o, None, None)?;
    }
    // Discards and lost packets of packets without events (not seen above), after the stream's
    // last event.
    for (i, ((_, s), acc)) in merged.streams().iter().zip(&streams).enumerate() {
        let discarded = s.events_discarded().saturating_sub(acc.discarded);
        let lost = s.lost_packets().saturating_sub(acc.lost_packets);
        if discarded == 0 && lost == 0 {
            continue;
        }
        let (pid, tid) = acc.thread;
        let name = match threads.get_mut(&acc.thread) {
            Some(th) => {
                th.discarded = th.discarded.saturating_add(discarded);
                th.lost_packets = th.lost_packets.saturating_add(lost);
                th.name.clone()
            }
            None => String::new(),
        };
        tables
            .losses
            .row()
            .i64(pid.into())
            .i64(tid.into())
            .str(&name)
            .str(&stream_names[i])
            .opt_i64(acc.last_ns.map(ns))
            .opt_i64(None)
            .i64(to_i64(discarded))
            .i64(to_i64(lost))
            .end()?;
    }
    progress(merged.bytes_read(), total);
    Ok((threads, merged.take_warnings()))
}

/// Where each interned name splits into category and name (`split_name` once per name, not
/// once per event).
#[derive(Debug, Default)]
struct SplitNames {
    /// By name id: the category's length + 1 (0: not computed yet), or 1 for no category.
    at: Vec<usize>,
}

impl SplitNames {
    fn get<'n>(&mut self, names: &'n Names, id: u32) -> (&'n str, &'n str) {
        let full = names.name(id);
        let i = id as usize;
        if self.at.len() <= i {
            self.at.resize(i + 1, 0);
        }
        if self.at[i] == 0 {
            let (cat, _) = split_name(full);
            self.at[i] = cat.len() + 1;
        }
        let cat = self.at[i] - 1;
        match (full.get(..cat), full.get(cat + 1..)) {
            (Some(c), Some(n)) if cat > 0 => (c, n),
            _ => ("", full),
        }
    }
}

/// The stream file of stream `i`, relative to the session: `<process dir>/<file>`.
fn stream_name(merged: &hushtrace_ctf::reader::Merged, i: usize) -> String {
    let Some((_, s)) = merged.streams().get(i) else {
        return String::new();
    };
    let path = s.path();
    let parts: Vec<_> = path.iter().rev().take(2).collect();
    match parts.as_slice() {
        [file, dir] => format!("{}/{}", dir.to_string_lossy(), file.to_string_lossy()),
        _ => path.display().to_string(),
    }
}

/// Nanoseconds as `i64` (saturating: a damaged clock cannot overflow a column).
pub fn ns(v: i128) -> i64 {
    v.clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The begin of a span, as an [`Open`].
#[allow(clippy::too_many_arguments)]
fn open(
    ev: &MergedEvent<'_>,
    names: &Names,
    thread: Option<(Rc<str>, Rc<str>)>,
    name: u32,
    kind: &'static str,
    slice_id: i64,
    parent_id: Option<i64>,
    depth: usize,
    text: &mut Vec<u8>,
) -> Open {
    let p = ev.event.packet;
    let thread = thread.unwrap_or_else(|| (p.procname.as_str().into(), "".into()));
    let py = names.py().resolve(ev).map(|(f, _)| (ev.trace, f));
    Open {
        slice_id,
        parent_id,
        depth: i32::try_from(depth).unwrap_or(i32::MAX),
        start_ns: ev.time_ns,
        pid: p.vpid,
        tid: p.vtid,
        thread_name: thread.0,
        process_name: thread.1,
        name,
        kind,
        args: args_json(ev, text).map(str::to_owned),
        py,
    }
}

/// Writes one slice; `dur` and `self_ns` are `None` for a span that never ended.
fn write_slice(
    t: &mut Table,
    names: &Names,
    split: &mut SplitNames,
    o: &Open,
    dur: Option<i64>,
    self_ns: Option<i64>,
) -> Result<(), ExportError> {
    let (cat, n) = split.get(names, o.name);
    let py: Option<&PyDef> = o.py.and_then(|(trace, f)| names.py().definition(trace, f));
    t.row()
        .i64(o.pid.into())
        .i64(o.tid.into())
        .str(&o.thread_name)
        .str(&o.process_name)
        .str(o.kind)
        .str(cat)
        .str(n)
        .i64(ns(o.start_ns))
        .opt_i64(dur)
        .i32(o.depth)
        .i64(o.slice_id)
        .opt_i64(o.parent_id)
        .opt_i64(self_ns)
        .opt_str(o.args.as_deref())
        .opt_str(py.map(|d| d.module.as_str()))
        .opt_str(py.map(|d| d.qualname.as_str()))
        .opt_str(py.and_then(|d| d.file.as_deref()))
        .opt_i64(py.and_then(|d| d.line).map(i64::from))
        .end()
}

/// The event's fields as a JSON object (as the Chrome conversion's `args`), `None` without
/// fields. `text` is scratch space.
fn args_json<'t>(ev: &MergedEvent<'_>, text: &'t mut Vec<u8>) -> Option<&'t str> {
    text.clear();
    for (i, (k, v)) in ev.event.fields().enumerate() {
        text.push(if i == 0 { b'{' } else { b',' });
        crate::output::json_str(text, k);
        text.push(b':');
        crate::chrome::json_value(text, v);
    }
    if text.is_empty() {
        return None;
    }
    text.push(b'}');
    std::str::from_utf8(text).ok()
}
