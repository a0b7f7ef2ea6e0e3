//! Perfetto's native trace format: a protobuf `Trace` of `TracePacket`s carrying `TrackEvent`s,
//! as the Perfetto SDK writes it and the Perfetto UI and trace processor read it fastest.
//!
//! Layout of the output:
//!
//! * Sequence 1 (descriptors): a `ClockSnapshot` naming `BUILTIN_CLOCK_REALTIME` the trace's
//!   clock (hushtrace timestamps are nanoseconds since the Unix epoch), then a
//!   `TrackDescriptor` per process (pid, name), per thread (pid, tid, name, parented to its
//!   process) and per counter (`category:name` per process, parented to it), each written
//!   just before the first event that needs it.
//! * One sequence per thread (`trusted_packet_sequence_id` 2, 3, ...), like the SDK's one
//!   writer per thread. Its first packet clears the incremental state and sets the packet
//!   defaults: the thread's track and a sequence-scoped incremental clock (id 64) that a
//!   `ClockSnapshot` ties to REALTIME at the thread's first event, so each event stores only
//!   the nanoseconds since the previous event of its thread. An event earlier than the
//!   previous one (never in a well-formed trace) is written with an absolute REALTIME
//!   timestamp instead. Timestamps before the epoch are written as 0.
//! * Event, category and field names are interned (`InternedData`) on each sequence the first
//!   time it uses them, and so are string field values (the first 4096 distinct ones of 3 bytes
//!   or more; later ones are written inline). Packets that bring interned data carry
//!   `SEQ_NEEDS_INCREMENTAL_STATE`; the others leave it off: the flag tells a reader to drop a
//!   packet whose sequence lost its state to a gap in the data, which a converted file, written
//!   in one piece, never has, and it would cost 2 of the ~20 bytes of an event.
//! * Spans are `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END` on their thread's track (an end whose begin
//!   is not in the trace is left out, as in the Chrome conversion), events are
//!   `TYPE_INSTANT`, counters are `TYPE_COUNTER` on their counter track, fields are debug
//!   annotations.
//! * Async spans (`async_span!`, the `tracing` bridge's spans; they may end on another thread)
//!   are slices with an explicit `track_uuid` on a few *lanes* per process: named tracks
//!   (`TrackDescriptor` parented to the process, no thread) packed the way the Perfetto UI
//!   packs async slices. A span whose parent is open and on top of its lane nests on that lane
//!   under it; any other span (a root, or a second concurrent child) takes the first lane of
//!   its pool whose previous slices all ended, else a new one. A pool is per process and root
//!   name: lanes `request`, `request 2`, ... So the number of tracks is the most spans of a
//!   name open at once, not the number of spans (20,000 requests handled 16 at a time: 16
//!   lanes). A slice on a lane must end before the slices under it: when a span ends while
//!   its children are still open on its lane (a native child may outlive its parent), they
//!   are ended with it and continue, from that instant, as new slices on a free lane. An async
//!   end whose begin is not in the trace is left out.
//!
//! Memory is constant in the trace's size: state per process, thread, name, counter, lane and
//! open async span only.
//!
//! The messages below are written by hand with `prost`'s derive (no `protoc`); their field
//! numbers and types are Perfetto's (`protos/perfetto/trace/...`), and the tests decode the
//! output with the Python modules generated from Perfetto's own `.proto` files.

use crate::chrome::{ConvertError, Summary};
use crate::pyfuncs::PyFuncs;
use crate::split_name;
use hushtrace_ctf::reader::{MergedEvent, Session, Value};
use hushtrace_ctf::Kind;
use prost::Message;
use std::collections::HashMap;
use std::io::{self, Write};
use std::rc::Rc;

/// The wire messages, a subset of Perfetto's protos with the same field numbers.
pub use crate::perfetto_proto as proto;

use proto::*;

mod classes;
mod events;
mod lanes;
mod sequence;
mod tracks;

/// The sequence of the descriptors and the global clock snapshot.
const DESCRIPTOR_SEQUENCE: u32 = 1;

/// How often (in events) `progress` is called.
const PROGRESS_EVERY: u64 = 1 << 16;

/// String field values interned (written once per sequence, then referred to by iid) at most;
/// later new values are written inline. Bounds the interning table's memory.
const MAX_INTERNED_VALUES: usize = 4096;

/// String field values shorter than this are written inline (an iid would not be shorter).
const MIN_INTERNED_LEN: usize = 3;

/// A track of async slices (see the module docs).
#[derive(Debug)]
struct Lane {
    uuid: u64,
    /// Its pool: (pid, name iid of the span that opened the pool).
    pool: (u32, u64),
    /// Its position in the pool's `lanes`.
    pos: usize,
    /// The ids of the spans open on it, outermost first.
    stack: Vec<u64>,
}

/// The lanes of one pool.
#[derive(Debug, Default)]
struct Pool {
    /// Indexes into [`AsyncLayout::lanes`], in creation order.
    lanes: Vec<usize>,
    /// Positions in `lanes` of the lanes with nothing open.
    free: std::collections::BTreeSet<usize>,
}

/// An async span open on a lane.
#[derive(Clone, Debug)]
struct OpenAsync {
    lane: usize,
    info: Rc<ClassInfo>,
}

/// Where async slices go: lanes, pools and the open spans.
#[derive(Debug, Default)]
struct AsyncLayout {
    lanes: Vec<Lane>,
    pools: HashMap<(u32, u64), Pool>,
    /// By (pid, id).
    open: HashMap<(u32, u64), OpenAsync>,
}

/// Interns strings to iids (from 1), one space per kind of name.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<String, u64>,
    names: Vec<String>,
}

impl Interner {
    fn iid(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        self.names.push(s.to_string());
        let i = self.names.len() as u64;
        self.ids.insert(s.to_string(), i);
        i
    }

    fn name(&self, iid: u64) -> &str {
        &self.names[(iid - 1) as usize]
    }
}

/// What an event class needs, computed once per (trace, class).
#[derive(Clone, Debug)]
struct ClassInfo {
    kind: Kind,
    name_iid: u64,
    cat_iid: u64,
    /// iid of each field's name.
    field_iids: Vec<u64>,
    /// Index among all classes of the conversion (for per-sequence "names sent" flags).
    index: usize,
    /// The encoded `TrackEvent` fields every event of the class has (type, name, category),
    /// for thread slices and instants; empty for counters (their track depends on the pid).
    head: Vec<u8>,
}

/// One thread's sequence.
#[derive(Debug)]
struct Sequence {
    id: u32,
    pid: u32,
    /// The thread's track and the name its descriptor gave it last.
    track: u64,
    thread_name: String,
    /// Absolute time (ns since the epoch) of the sequence clock's current value.
    clock_ns: i128,
    /// Interned names already written on this sequence, by iid - 1, per space.
    names_sent: Vec<bool>,
    cats_sent: Vec<bool>,
    fields_sent: Vec<bool>,
    values_sent: Vec<bool>,
    /// By [`ClassInfo::index`]: whether the names of the class were written on this sequence.
    classes_sent: Vec<bool>,
}

/// Per merged stream: the thread it belongs to now and its span depth (to drop ends whose
/// begin is missing, as the Chrome conversion does).
#[derive(Clone, Debug, Default)]
struct StreamState {
    seen: bool,
    vpid: u32,
    vtid: u32,
    seq: usize,
    depth: u64,
}

struct Writer<W: Write> {
    out: W,
    buf: Vec<u8>,
    next_uuid: u64,
    processes: HashMap<u32, u64>,
    threads: HashMap<(u32, u32), usize>,
    sequences: Vec<Sequence>,
    counters: HashMap<(u32, u64), u64>,
    layout: AsyncLayout,
    names: Interner,
    cats: Interner,
    fields: Interner,
    /// String field values (at most [`MAX_INTERNED_VALUES`]).
    values: Interner,
    /// iids of the string values the current event refers to.
    value_refs: Vec<u64>,
    counter_names: Interner,
    classes: Vec<Vec<Option<Rc<ClassInfo>>>>,
    /// Events of traced Python functions, by (trace, event id, function id).
    py_classes: HashMap<(usize, u16, u32), Rc<ClassInfo>>,
    class_count: usize,
    /// The encoded `TrackEvent` of the current event (its allocation survives events).
    te_buf: Vec<u8>,
}

impl<W: Write> Writer<W> {
    fn packet(&mut self, p: &TracePacket) -> io::Result<()> {
        self.buf.clear();
        // `Trace.packet`, field 1, length-delimited.
        self.buf.push(0x0a);
        p.encode_length_delimited(&mut self.buf)
            .map_err(io::Error::other)?;
        self.out.write_all(&self.buf)
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }
}

/// A counter's value as Perfetto takes it: an integer (booleans are 0 or 1; an unsigned above
/// `i64::MAX` becomes a double) or a double; `None` for a string, which has nothing to plot.
fn counter_value(v: Value<'_>) -> Option<(Option<i64>, Option<f64>)> {
    Some(match v {
        Value::Bool(v) => (Some(v as i64), None),
        Value::F64(v) => (None, Some(v)),
        Value::Str(_) => return None,
        _ => match (v.as_i64(), v.as_u64()) {
            (Some(i), _) => (Some(i), None),
            (_, Some(u)) => match i64::try_from(u) {
                Ok(i) => (Some(i), None),
                Err(_) => (None, Some(u as f64)),
            },
            _ => return None,
        },
    })
}

/// Nanoseconds since the epoch as the unsigned protobuf timestamp (0 before the epoch).
fn abs_ns(t: i128) -> u64 {
    u64::try_from(t.max(0)).unwrap_or(u64::MAX)
}

/// Converts `session` to a Perfetto protobuf trace on `out` (buffered here, flushed before
/// returning). `progress(bytes_read, total_bytes)` is called now and then.
///
/// ```
/// use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
/// use hushtrace_ctf::reader::Session;
///
/// let dir = std::env::temp_dir().join(format!("hushtrace-perfetto-doc-{}", std::process::id()));
/// let mut t = SynthTrace::new(10, "app");
/// let (b, e) = t.span("io:read", &[]);
/// t.thread(11, "main").event(SynthEvent::new(b, 100)).event(SynthEvent::new(e, 350));
/// t.write_session(&dir).unwrap();
///
/// let mut pb = Vec::new();
/// let s = hushtrace_cli::perfetto::convert(&Session::open(&dir).unwrap(), &mut pb, &mut |_, _| {})
///     .unwrap();
/// assert_eq!((s.events, s.processes, s.threads), (2, 1, 1));
/// assert_eq!(pb[0], 0x0a); // Trace.packet
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn convert<W: Write>(
    session: &Session,
    out: W,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Summary, ConvertError> {
    let mut merged = session.merged()?;
    let total = merged.total_bytes();
    let mut w = Writer {
        out: io::BufWriter::with_capacity(1 << 16, out),
        buf: Vec::with_capacity(256),
        next_uuid: 0,
        processes: HashMap::new(),
        threads: HashMap::new(),
        sequences: Vec::new(),
        counters: HashMap::new(),
        layout: AsyncLayout::default(),
        names: Interner::default(),
        cats: Interner::default(),
        fields: Interner::default(),
        values: Interner::default(),
        value_refs: Vec::new(),
        counter_names: Interner::default(),
        classes: Vec::new(),
        py_classes: HashMap::new(),
        class_count: 0,
        te_buf: Vec::new(),
    };
    let mut summary = Summary::default();
    let mut streams: Vec<StreamState> = vec![StreamState::default(); merged.streams().len()];
    let mut py = PyFuncs::of_session(session)?;
    w.packet(&TracePacket {
        trusted_packet_sequence_id: Some(DESCRIPTOR_SEQUENCE),
        clock_snapshot: Some(ClockSnapshot {
            clocks: vec![Clock {
                clock_id: Some(CLOCK_REALTIME),
                timestamp: Some(0),
                is_incremental: None,
            }],
            primary_trace_clock: Some(CLOCK_REALTIME as i32),
        }),
        ..Default::default()
    })?;
    while let Some(ev) = merged.next()? {
        let p = ev.event.packet;
        let st = &mut streams[ev.stream];
        if !st.seen || (st.vpid, st.vtid) != (p.vpid, p.vtid) {
            let seq = w.sequence(&ev)?;
            streams[ev.stream] = StreamState {
                seen: true,
                vpid: p.vpid,
                vtid: p.vtid,
                seq,
                depth: 0,
            };
        }
        if py.observe(&ev) {
            continue; // a Python function's definition: names its calls, not an event
        }
        let st = &mut streams[ev.stream];
        match ev.event.class.kind {
            Kind::SpanBegin => st.depth += 1,
            Kind::SpanEnd if st.depth == 0 => {
                summary.unmatched_ends += 1;
                continue;
            }
            Kind::SpanEnd => st.depth -= 1,
            _ => {}
        }
        let seq = st.seq;
        let info = match py.resolve(&ev) {
            Some((f, full)) => w.py_class(&ev, f, full),
            None => w.class(&ev),
        };
        if !w.event(seq, &ev, &info)? {
            summary.unmatched_ends += 1;
            continue;
        }
        summary.events += 1;
        if summary.events % PROGRESS_EVERY == 0 {
            progress(merged.bytes_read(), total);
        }
    }
    // `record --kernel`: the kernel's events as per-CPU ftrace bundles.
    summary.events += crate::kernel_convert::perfetto(session, &mut w.out)?;
    w.out.flush()?;
    summary.processes = w.processes.len() as u64;
    summary.threads = w.threads.len() as u64;
    summary.bytes_read = merged.bytes_read();
    summary.warnings = merged.take_warnings();
    progress(summary.bytes_read, total);
    Ok(summary)
}

#[cfg(test)]
mod tests;
