//! Chrome trace-event JSON, as loaded by the Perfetto UI and chrome://tracing.
//!
//! Output shape: `{"displayTimeUnit":"ns","otherData":{...},"traceEvents":[...]}` (the unit
//! first: Perfetto's importer flags a `displayTimeUnit` that comes after the events; then the
//! time origin, before the events so that streaming readers see it first) with
//!
//! * spans as `B`/`E` pairs, instants as `i` (thread scoped), counters as `C` named
//!   `"category:name"` with `args: {"value": value}`, so counters of the same name in two
//!   categories (`net:errors`, `disk:errors`) are two tracks;
//! * async spans (`async_span!`, the `tracing` bridge's spans) as nestable async events
//!   `b`/`e`, nested under their parent: a span and all its descendants share the `id`
//!   (`id2.local`, process scoped) and the `cat` of their root, the span with no (open) parent,
//!   which is how Chrome and Perfetto key an async tree (as `tracing-chrome` does); each keeps
//!   its own `name` and `args` (`id` and `parent` among them), and a descendant whose own
//!   category differs from its root's carries it in `args.category` (unless it has a field of
//!   that name);
//! * `M` events `process_name` and `thread_name` for every process and thread, written when it
//!   first appears;
//! * `ts` in microseconds since the trace's earliest event, with three decimals: nanosecond
//!   precision in the text and in readers that parse numbers as `f64` (absolute microseconds
//!   since 1970 would keep only about a quarter of a microsecond there). The origin is stated
//!   in `otherData`: `ts_origin_unix_ns` (that event's time, nanoseconds since the Unix epoch,
//!   a string so that it survives `f64` readers) and `ts_origin` (the same in RFC 3339), so a
//!   trace still lines up with a kernel trace or another host's: add the origin.
//!   `pid`/`tid` from the packet context; `cat` the category and `name` the event name without
//!   it (counters: the full `category:name`); fields in `args`.
//!
//! Events are written as the merge yields them, so memory does not depend on trace size (only
//! on the async spans open at once). An end whose begin is not in the trace (lost in overwrite
//! mode) is left out, so every `E` has its `B`.

use crate::pyfuncs::PyFuncs;
use crate::spans::{async_id, async_parent};
use crate::split_name;
use hushtrace_ctf::reader::{MergedEvent, Session, Value, Warning};
use hushtrace_ctf::Kind;
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

/// What a conversion wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Trace events written (metadata events excluded).
    pub events: u64,
    /// Processes seen.
    pub processes: u64,
    /// Threads seen.
    pub threads: u64,
    /// Span ends dropped because their begin was not in the trace.
    pub unmatched_ends: u64,
    /// Bytes of CTF read.
    pub bytes_read: u64,
    /// Warnings from the reader.
    pub warnings: Vec<Warning>,
}

pub use crate::output::{json_str, ConvertError};

/// How a conversion writes timestamps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Kept for compatibility (`--relative-time`): `ts` is always relative to the earliest
    /// event of the session now, with the absolute origin in `otherData` (see the module docs).
    pub relative: bool,
}

/// How often (in events) `progress` is called.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Per-stream state: last thread seen, its `,"pid":P,"tid":T` text, and span depth (to drop
/// unmatched ends).
#[derive(Clone, Debug, Default)]
struct StreamState {
    vpid: u32,
    vtid: u32,
    seen: bool,
    /// The offset of the packet of the last event (a new packet may carry a new thread name).
    packet: Option<u64>,
    depth: u64,
    ids: Vec<u8>,
}

/// Pre-rendered JSON of one event class: everything before the `ts` value, and the field keys.
#[derive(Clone, Debug, Default)]
struct ClassJson {
    /// `{"name":"..","cat":"..","ph":"B","ts":`
    prefix: Vec<u8>,
    /// For async events: `{"name":".."` (the category depends on the span's root).
    name: Vec<u8>,
    /// The category.
    cat: String,
    /// Whether a field is named `category`.
    category_field: bool,
    /// `"field":` per field (for counters: `"<name>":`).
    keys: Vec<Vec<u8>>,
}

/// Cache of [`ClassJson`] by trace and event id.
#[derive(Debug, Default)]
struct ClassCache {
    by_trace: Vec<Vec<Option<ClassJson>>>,
    /// Events of traced Python functions, by (trace, event id, function id).
    py: HashMap<(usize, u16, u32), ClassJson>,
}

impl ClassCache {
    fn get(&mut self, ev: &MergedEvent<'_>) -> &ClassJson {
        if self.by_trace.len() <= ev.trace {
            self.by_trace.resize(ev.trace + 1, Vec::new());
        }
        let per = &mut self.by_trace[ev.trace];
        let id = ev.event.class.id as usize;
        if per.len() <= id {
            per.resize(id + 1, None);
        }
        per[id].get_or_insert_with(|| class_json(ev, None))
    }

    /// The JSON of a traced Python function's event, named `full` (`"module:qualname"`).
    fn get_py(&mut self, ev: &MergedEvent<'_>, f: u32, full: &str) -> &ClassJson {
        self.py
            .entry((ev.trace, ev.event.class.id, f))
            .or_insert_with(|| class_json(ev, Some(full)))
    }
}

fn class_json(ev: &MergedEvent<'_>, full_name: Option<&str>) -> ClassJson {
    let class = ev.event.class;
    let (cat, name) = split_name(full_name.unwrap_or(&class.name));
    let counter = class.kind == Kind::Counter;
    let ph = match class.kind {
        Kind::SpanBegin => "B",
        Kind::SpanEnd => "E",
        Kind::Instant => "i",
        Kind::Counter => "C",
        Kind::AsyncBegin => "b",
        Kind::AsyncEnd => "e",
    };
    let mut prefix = b"{\"name\":".to_vec();
    json_str(&mut prefix, if counter { &class.name } else { name });
    let name_json = prefix.clone();
    prefix.extend_from_slice(b",\"cat\":");
    json_str(&mut prefix, cat);
    prefix.extend_from_slice(format!(",\"ph\":\"{ph}\",\"ts\":").as_bytes());
    let keys = class
        .fields
        .iter()
        .flatten()
        .map(|(k, _)| {
            let mut v = Vec::new();
            json_str(&mut v, if counter { "value" } else { k });
            v.push(b':');
            v
        })
        .collect();
    ClassJson {
        prefix,
        name: name_json,
        cat: cat.to_string(),
        category_field: class.fields.iter().flatten().any(|(k, _)| k == "category"),
        keys,
    }
}

/// The async tree an open async span belongs to: its root's id and category.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AsyncRoot {
    id: u64,
    cat: std::rc::Rc<str>,
}

/// Converts `session` to Chrome JSON on `out`. `out` needs no buffering: the many small writes
/// go through a 64 KiB `BufWriter` here, flushed before returning.
///
/// `progress(bytes_read, total_bytes)` is called now and then. Timestamps are absolute (see the
/// module docs); [`convert_with`] takes [`Options`].
pub fn convert<W: Write>(
    session: &Session,
    out: W,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Summary, ConvertError> {
    convert_with(session, out, Options::default(), progress)
}

/// [`convert`] with [`Options`].
pub fn convert_with<W: Write>(
    session: &Session,
    out: W,
    options: Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Summary, ConvertError> {
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    let mut merged = session.merged()?;
    let total = merged.total_bytes();
    let mut summary = Summary::default();
    let mut streams: Vec<StreamState> = vec![StreamState::default(); merged.streams().len()];
    let mut classes = ClassCache::default();
    let mut py = PyFuncs::of_session(session)?;
    let mut processes: HashSet<u32> = HashSet::new();
    // Per thread, the name its last `thread_name` event gave it.
    let mut threads: HashMap<(u32, u32), String> = HashMap::new();
    let mut async_roots: HashMap<(u32, u64), AsyncRoot> = HashMap::new();
    let mut first = true;
    let mut line = Vec::with_capacity(256);
    // The time origin: the earliest event (the merge yields events in time order).
    let t0 = session.merged()?.next()?.map_or(0, |e| e.time_ns);
    let _ = options; // `ts` is relative whatever `relative` says (see `Options`).

    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"ts_origin_unix_ns\":\"")?;
    write!(out, "{t0}\",\"ts_origin\":")?;
    let mut origin = Vec::new();
    json_str(
        &mut origin,
        &crate::report::rfc3339(i64::try_from(t0).unwrap_or(i64::MAX)),
    );
    out.write_all(&origin)?;
    out.write_all(b",\"ts_unit\":\"microseconds since ts_origin\"},\"traceEvents\":[")?;
    while let Some(ev) = merged.next()? {
        line.clear();
        let st = &mut streams[ev.stream];
        let p = ev.event.packet;
        if !st.seen || (st.vpid, st.vtid) != (p.vpid, p.vtid) {
            let ids = format!(",\"pid\":{},\"tid\":{}", p.vpid, p.vtid).into_bytes();
            *st = StreamState {
                vpid: p.vpid,
                vtid: p.vtid,
                seen: true,
                packet: None,
                depth: 0,
                ids,
            };
            if processes.insert(p.vpid) {
                let name = if ev.desc.vpid == p.vpid {
                    ev.desc.procname.as_str()
                } else {
                    ""
                };
                metadata_event(&mut line, "process_name", p.vpid, 0, name);
            }
        }
        if st.packet != Some(p.offset) {
            // A thread renamed while traced gets its `thread_name` event again (readers take
            // the last one).
            st.packet = Some(p.offset);
            if threads.get(&(p.vpid, p.vtid)) != Some(&p.procname) {
                metadata_event(&mut line, "thread_name", p.vpid, p.vtid, &p.procname);
                threads.insert((p.vpid, p.vtid), p.procname.clone());
            }
        }
        if py.observe(&ev) {
            // A Python function's definition names its calls; it is not an event to show.
            write_separated(&mut out, &line, &mut first)?;
            continue;
        }
        match ev.event.class.kind {
            Kind::SpanBegin => st.depth += 1,
            Kind::SpanEnd if st.depth == 0 => {
                summary.unmatched_ends += 1;
                write_separated(&mut out, &line, &mut first)?;
                continue;
            }
            Kind::SpanEnd => st.depth -= 1,
            _ => {}
        }
        let cj = match py.resolve(&ev) {
            Some((f, full)) => classes.get_py(&ev, f, full),
            None => classes.get(&ev),
        };
        let root = match ev.event.class.kind {
            Kind::AsyncBegin | Kind::AsyncEnd => async_root(&mut async_roots, &ev, cj),
            _ => None,
        };
        trace_event(&mut line, &ev, cj, &st.ids, ev.time_ns - t0, root.as_ref());
        write_separated(&mut out, &line, &mut first)?;
        summary.events += 1;
        if summary.events % PROGRESS_EVERY == 0 {
            progress(merged.bytes_read(), total);
        }
    }
    // `record --kernel`: each CPU's running task as slices, on the same time origin.
    summary.events += crate::kernel_convert::chrome(session, &mut out, &mut first, t0)?;
    out.write_all(b"\n]}\n")?;
    out.flush()?;
    summary.processes = processes.len() as u64;
    summary.threads = threads.len() as u64;
    summary.bytes_read = merged.bytes_read();
    summary.warnings = merged.take_warnings();
    progress(summary.bytes_read, total);
    Ok(summary)
}

/// Writes `line` (zero or more comma-separated JSON objects) after a separator if needed.
fn write_separated<W: Write>(out: &mut W, line: &[u8], first: &mut bool) -> io::Result<()> {
    if line.is_empty() {
        return Ok(());
    }
    if !*first {
        out.write_all(b",")?;
    }
    *first = false;
    out.write_all(b"\n")?;
    out.write_all(line)
}

fn sep(line: &mut Vec<u8>) {
    if !line.is_empty() {
        line.extend_from_slice(b",\n");
    }
}

fn metadata_event(line: &mut Vec<u8>, what: &str, pid: u32, tid: u32, name: &str) {
    sep(line);
    let _ = write!(
        line,
        "{{\"name\":\"{what}\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
    );
    json_str(line, name);
    line.extend_from_slice(b"}}");
}

/// The async tree of an async begin or end: the parent's tree for a begin whose parent is open
/// in the process, else a new tree rooted at the span; an end leaves its tree (an end whose
/// begin is missing is its own root). `None` for an event without an id.
fn async_root(
    roots: &mut HashMap<(u32, u64), AsyncRoot>,
    ev: &MergedEvent<'_>,
    cj: &ClassJson,
) -> Option<AsyncRoot> {
    let id = async_id(ev)?;
    let pid = ev.event.packet.vpid;
    let own = || AsyncRoot {
        id,
        cat: cj.cat.as_str().into(),
    };
    if ev.event.class.kind == Kind::AsyncEnd {
        return Some(roots.remove(&(pid, id)).unwrap_or_else(own));
    }
    let parent = async_parent(ev);
    let root = match roots.get(&(pid, parent)) {
        Some(r) if parent != 0 && parent != id => r.clone(),
        _ => own(),
    };
    roots.insert((pid, id), root.clone());
    Some(root)
}

fn trace_event(
    line: &mut Vec<u8>,
    ev: &MergedEvent<'_>,
    cj: &ClassJson,
    ids: &[u8],
    ts_ns: i128,
    root: Option<&AsyncRoot>,
) {
    sep(line);
    let kind = ev.event.class.kind;
    let mut own_cat = None;
    match root {
        Some(root) => {
            // Async slices nest by (category, id) within the process: the root's.
            line.extend_from_slice(&cj.name);
            line.extend_from_slice(b",\"cat\":");
            json_str(line, &root.cat);
            let ph = if kind == Kind::AsyncBegin { 'b' } else { 'e' };
            let _ = write!(line, ",\"ph\":\"{ph}\",\"ts\":");
            if *root.cat != *cj.cat && !cj.category_field {
                own_cat = Some(cj.cat.as_str());
            }
        }
        None => line.extend_from_slice(&cj.prefix),
    }
    write_us(line, ts_ns);
    line.extend_from_slice(ids);
    if kind == Kind::Instant {
        line.extend_from_slice(b",\"s\":\"t\"");
    }
    if let Some(root) = root {
        let _ = write!(line, ",\"id2\":{{\"local\":\"0x{:x}\"}}", root.id);
    }
    let mut fields = ev.event.fields().zip(&cj.keys).peekable();
    if kind == Kind::Counter && fields.peek().is_none() {
        line.extend_from_slice(b",\"args\":{}");
    } else if fields.peek().is_some() || own_cat.is_some() {
        line.extend_from_slice(b",\"args\":{");
        let mut n = 0;
        for ((_, v), key) in fields {
            if n > 0 {
                line.push(b',');
            }
            n += 1;
            line.extend_from_slice(key);
            json_value(line, v);
        }
        if let Some(cat) = own_cat {
            if n > 0 {
                line.push(b',');
            }
            line.extend_from_slice(b"\"category\":");
            json_str(line, cat);
        }
        line.push(b'}');
    }
    line.push(b'}');
}

/// Appends the decimal digits of `v`.
fn push_u64(line: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    line.extend_from_slice(&buf[i..]);
}

/// Writes nanoseconds as microseconds with three decimals.
fn write_us(line: &mut Vec<u8>, ns: i128) {
    if ns < 0 {
        line.push(b'-');
    }
    let a = u64::try_from(ns.unsigned_abs()).unwrap_or(u64::MAX);
    push_u64(line, a / 1000);
    let frac = (a % 1000) as u16;
    line.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

pub(crate) fn json_value(line: &mut Vec<u8>, v: Value<'_>) {
    let _ = match v {
        // JSON has no NaN or infinities: write them as strings.
        Value::F64(x) if !x.is_finite() => write!(line, "\"{x}\""),
        Value::F64(x) => write!(line, "{x:?}"),
        Value::Bool(x) => write!(line, "{x}"),
        Value::Str(s) => {
            json_str(line, s);
            Ok(())
        }
        // The integers, of every width: unsigned, or signed.
        _ => {
            if let Some(x) = v.as_u64() {
                push_u64(line, x);
            } else if let Some(x) = v.as_i64() {
                if x < 0 {
                    line.push(b'-');
                }
                push_u64(line, x.unsigned_abs());
            }
            Ok(())
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_times_are_valid_json() {
        let mut v = Vec::new();
        json_str(&mut v, "a\"b\\c\nd\u{1}é");
        let s: String = serde_json::from_slice(&v).unwrap();
        assert_eq!(s, "a\"b\\c\nd\u{1}é");
        let mut v = Vec::new();
        write_us(&mut v, 1_234_567);
        assert_eq!(v, b"1234.567");
        let mut v = Vec::new();
        write_us(&mut v, -5);
        assert_eq!(v, b"-0.005");
        let mut v = Vec::new();
        json_value(&mut v, Value::F64(1.0));
        assert_eq!(v, b"1.0");
        for (x, want) in [
            (Value::U8(255), "255"),
            (Value::U32(7), "7"),
            (Value::I8(-128), "-128"),
            (Value::I16(12), "12"),
            (Value::I64(i64::MIN), "-9223372036854775808"),
            (Value::U64(u64::MAX), "18446744073709551615"),
        ] {
            let mut v = Vec::new();
            json_value(&mut v, x);
            assert_eq!(String::from_utf8(v).unwrap(), want);
        }
    }
}
