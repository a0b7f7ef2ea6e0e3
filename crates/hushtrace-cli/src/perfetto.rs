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

    fn descriptor(&mut self, d: TrackDescriptor) -> io::Result<()> {
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(DESCRIPTOR_SEQUENCE),
            track_descriptor: Some(d),
            ..Default::default()
        })
    }

    /// The descriptor of thread track `uuid` (again when the thread was renamed: readers take
    /// the last name).
    fn thread_descriptor(
        &mut self,
        uuid: u64,
        parent: u64,
        pid: u32,
        tid: u32,
        name: &str,
    ) -> io::Result<()> {
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            thread: Some(ThreadDescriptor {
                pid: Some(pid as i32),
                tid: Some(tid as i32),
                thread_name: Some(name.to_string()),
            }),
            ..Default::default()
        })
    }

    fn process_uuid(&mut self, pid: u32, name: &str) -> io::Result<u64> {
        if let Some(&u) = self.processes.get(&pid) {
            return Ok(u);
        }
        let uuid = self.uuid();
        self.processes.insert(pid, uuid);
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            process: Some(ProcessDescriptor {
                pid: Some(pid as i32),
                process_name: (!name.is_empty()).then(|| name.to_string()),
            }),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// The sequence of thread (`pid`, `tid`), created (descriptor, defaults, clock) at `t_ns`.
    fn sequence(&mut self, ev: &MergedEvent<'_>) -> io::Result<usize> {
        let p = ev.event.packet;
        if let Some(&s) = self.threads.get(&(p.vpid, p.vtid)) {
            if self.sequences[s].thread_name != p.procname {
                // The thread was renamed: its track's descriptor again, with the new name.
                self.sequences[s].thread_name = p.procname.clone();
                let (track, parent) = (self.sequences[s].track, self.processes[&p.vpid]);
                self.thread_descriptor(track, parent, p.vpid, p.vtid, &p.procname)?;
            }
            return Ok(s);
        }
        let pname = if ev.desc.vpid == p.vpid {
            ev.desc.procname.as_str()
        } else {
            ""
        };
        let parent = self.process_uuid(p.vpid, pname)?;
        let uuid = self.uuid();
        self.thread_descriptor(uuid, parent, p.vpid, p.vtid, &p.procname)?;
        let id = DESCRIPTOR_SEQUENCE + 1 + self.sequences.len() as u32;
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(id),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            trace_packet_defaults: Some(TracePacketDefaults {
                timestamp_clock_id: Some(CLOCK_SEQUENCE),
                track_event_defaults: Some(TrackEventDefaults {
                    track_uuid: Some(uuid),
                }),
            }),
            ..Default::default()
        })?;
        let t = abs_ns(ev.time_ns);
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(id),
            timestamp: Some(t),
            timestamp_clock_id: Some(CLOCK_REALTIME),
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![
                    Clock {
                        clock_id: Some(CLOCK_SEQUENCE),
                        timestamp: Some(0),
                        is_incremental: Some(true),
                    },
                    Clock {
                        clock_id: Some(CLOCK_REALTIME),
                        timestamp: Some(t),
                        is_incremental: None,
                    },
                ],
                primary_trace_clock: None,
            }),
            ..Default::default()
        })?;
        self.sequences.push(Sequence {
            id,
            pid: p.vpid,
            track: uuid,
            thread_name: p.procname.clone(),
            clock_ns: t as i128,
            names_sent: Vec::new(),
            cats_sent: Vec::new(),
            fields_sent: Vec::new(),
            values_sent: Vec::new(),
            classes_sent: Vec::new(),
        });
        let s = self.sequences.len() - 1;
        self.threads.insert((p.vpid, p.vtid), s);
        Ok(s)
    }

    fn class(&mut self, ev: &MergedEvent<'_>) -> Rc<ClassInfo> {
        if self.classes.len() <= ev.trace {
            self.classes.resize(ev.trace + 1, Vec::new());
        }
        let id = ev.event.class.id as usize;
        if self.classes[ev.trace].len() <= id {
            self.classes[ev.trace].resize(id + 1, None);
        }
        if let Some(c) = &self.classes[ev.trace][id] {
            return Rc::clone(c);
        }
        let info = self.new_class(ev, None);
        self.classes[ev.trace][id] = Some(Rc::clone(&info));
        info
    }

    /// The class of a traced Python function's event, named `full` (`"module:qualname"`).
    fn py_class(&mut self, ev: &MergedEvent<'_>, f: u32, full: &str) -> Rc<ClassInfo> {
        let key = (ev.trace, ev.event.class.id, f);
        if let Some(c) = self.py_classes.get(&key) {
            return Rc::clone(c);
        }
        let info = self.new_class(ev, Some(full));
        self.py_classes.insert(key, Rc::clone(&info));
        info
    }

    fn new_class(&mut self, ev: &MergedEvent<'_>, full_name: Option<&str>) -> Rc<ClassInfo> {
        let class = ev.event.class;
        let (cat, name) = split_name(full_name.unwrap_or(&class.name));
        let index = self.class_count;
        self.class_count += 1;
        let mut info = ClassInfo {
            index,
            head: Vec::new(),
            kind: class.kind,
            name_iid: if class.kind == Kind::Counter {
                self.counter_names.iid(&class.name)
            } else {
                self.names.iid(name)
            },
            cat_iid: self.cats.iid(cat),
            field_iids: class
                .fields
                .iter()
                .flatten()
                .map(|(k, _)| self.fields.iid(k))
                .collect(),
        };
        {
            use prost::encoding::{int32, uint64};
            use track_event_tag as tag;
            let h = &mut info.head;
            match info.kind {
                Kind::SpanBegin => int32::encode(tag::TYPE, &TYPE_SLICE_BEGIN, h),
                Kind::SpanEnd => int32::encode(tag::TYPE, &TYPE_SLICE_END, h),
                Kind::Instant => int32::encode(tag::TYPE, &TYPE_INSTANT, h),
                _ => {}
            }
            if matches!(info.kind, Kind::SpanBegin | Kind::Instant) {
                uint64::encode(tag::NAME_IID, &info.name_iid, h);
                uint64::encode(tag::CATEGORY_IIDS, &info.cat_iid, h);
            }
        }
        Rc::new(info)
    }

    fn counter_track(&mut self, pid: u32, name_iid: u64) -> io::Result<u64> {
        if let Some(&u) = self.counters.get(&(pid, name_iid)) {
            return Ok(u);
        }
        let parent = self.process_uuid(pid, "")?;
        let uuid = self.uuid();
        self.counters.insert((pid, name_iid), uuid);
        let name = self.counter_names.name(name_iid).to_string();
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(name),
            counter: Some(CounterDescriptor {}),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// The first lane of `pool` with nothing open, created if there is none; taken (the
    /// caller pushes a span on it).
    fn free_lane(&mut self, pool: (u32, u64)) -> io::Result<usize> {
        let p = self.layout.pools.entry(pool).or_default();
        if let Some(pos) = p.free.pop_first() {
            return Ok(p.lanes[pos]);
        }
        let n = p.lanes.len();
        let process = self.process_uuid(pool.0, "")?;
        let uuid = self.uuid();
        let base = self.names.name(pool.1);
        let name = if n == 0 {
            base.to_string()
        } else {
            format!("{base} {}", n + 1)
        };
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(process),
            name: Some(name),
            ..Default::default()
        })?;
        let lane = self.layout.lanes.len();
        self.layout.lanes.push(Lane {
            uuid,
            pool,
            pos: n,
            stack: Vec::new(),
        });
        if let Some(p) = self.layout.pools.get_mut(&pool) {
            p.lanes.push(lane);
        }
        Ok(lane)
    }

    /// Marks `lane` free if nothing is open on it.
    fn release_if_empty(&mut self, lane: usize) {
        let l = &self.layout.lanes[lane];
        if l.stack.is_empty() {
            if let Some(p) = self.layout.pools.get_mut(&l.pool) {
                p.free.insert(l.pos);
            }
        }
    }

    /// Places the async span `id` of `pid`, whose begin names `parent`, on a lane; returns the
    /// lane's track uuid.
    fn async_begin(
        &mut self,
        pid: u32,
        id: u64,
        parent: u64,
        info: &Rc<ClassInfo>,
    ) -> io::Result<u64> {
        let parent_lane = match self.layout.open.get(&(pid, parent)) {
            Some(o) if parent != 0 && parent != id => Some(o.lane),
            _ => None,
        };
        let lane = match parent_lane {
            Some(l) if self.layout.lanes[l].stack.last() == Some(&parent) => l,
            Some(l) => self.free_lane(self.layout.lanes[l].pool)?,
            None => self.free_lane((pid, info.name_iid))?,
        };
        self.open_on(lane, pid, id, info);
        Ok(self.layout.lanes[lane].uuid)
    }

    fn open_on(&mut self, lane: usize, pid: u32, id: u64, info: &Rc<ClassInfo>) {
        self.layout.lanes[lane].stack.push(id);
        self.layout.open.insert(
            (pid, id),
            OpenAsync {
                lane,
                info: Rc::clone(info),
            },
        );
    }

    /// Takes the async span `id` of `pid` (named `name_iid`) off its lane; returns the lane's
    /// uuid and the spans that were open above it on the lane, outermost first (already ended
    /// there, on sequence `s` at `t_ns`), or `None` when the span is not open (its begin is
    /// not in the trace).
    fn async_end(
        &mut self,
        s: usize,
        pid: u32,
        id: u64,
        name_iid: u64,
        t_ns: i128,
    ) -> io::Result<Option<(u64, Vec<u64>)>> {
        let lane = match self.layout.open.get(&(pid, id)) {
            Some(o) if o.info.name_iid == name_iid => o.lane,
            _ => return Ok(None),
        };
        self.layout.open.remove(&(pid, id));
        let l = &mut self.layout.lanes[lane];
        let uuid = l.uuid;
        let pos = l.stack.iter().rposition(|&x| x == id).unwrap_or(0);
        let above: Vec<u64> = l.stack.drain(pos + 1..).collect();
        l.stack.truncate(pos);
        for _ in &above {
            let mut te = Vec::new();
            prost::encoding::int32::encode(track_event_tag::TYPE, &TYPE_SLICE_END, &mut te);
            prost::encoding::uint64::encode(track_event_tag::TRACK_UUID, &uuid, &mut te);
            self.emit(s, t_ns, te, None)?;
        }
        self.release_if_empty(lane);
        Ok(Some((uuid, above)))
    }

    /// Begins again, on a free lane of their pool, the spans `ids` (outermost first) of `pid`
    /// that were ended early because a span under them on their lane ended.
    fn continue_moved(&mut self, s: usize, pid: u32, ids: &[u64], t_ns: i128) -> io::Result<()> {
        use prost::encoding::{int32, uint64};
        use track_event_tag as tag;
        let Some(first) = ids.first().and_then(|id| self.layout.open.get(&(pid, *id))) else {
            return Ok(());
        };
        let pool = self.layout.lanes[first.lane].pool;
        let lane = self.free_lane(pool)?;
        for &id in ids {
            let Some(o) = self.layout.open.get(&(pid, id)) else {
                continue;
            };
            let info = Rc::clone(&o.info);
            self.open_on(lane, pid, id, &info);
            let mut te = Vec::new();
            int32::encode(tag::TYPE, &TYPE_SLICE_BEGIN, &mut te);
            uint64::encode(tag::TRACK_UUID, &self.layout.lanes[lane].uuid, &mut te);
            uint64::encode(tag::NAME_IID, &info.name_iid, &mut te);
            uint64::encode(tag::CATEGORY_IIDS, &info.cat_iid, &mut te);
            self.value_refs.clear();
            let interned = self.intern(s, &info, true);
            self.emit(s, t_ns, te, interned)?;
        }
        Ok(())
    }

    /// Interned data for the names `info` needs that sequence `s` has not seen yet.
    fn intern(&mut self, s: usize, info: &ClassInfo, with_name: bool) -> Option<InternedData> {
        fn mark(sent: &mut Vec<bool>, iid: u64) -> bool {
            let i = (iid - 1) as usize;
            if sent.len() <= i {
                sent.resize(i + 1, false);
            }
            !std::mem::replace(&mut sent[i], true)
        }
        let seq = &mut self.sequences[s];
        if self.value_refs.is_empty() && seq.classes_sent.get(info.index) == Some(&true) {
            return None;
        }
        if seq.classes_sent.len() <= info.index {
            seq.classes_sent.resize(info.index + 1, false);
        }
        seq.classes_sent[info.index] = true;
        let mut d = InternedData::default();
        if with_name {
            if mark(&mut seq.names_sent, info.name_iid) {
                d.event_names.push(InternedString {
                    iid: Some(info.name_iid),
                    name: Some(self.names.name(info.name_iid).to_string()),
                });
            }
            if mark(&mut seq.cats_sent, info.cat_iid) {
                d.event_categories.push(InternedString {
                    iid: Some(info.cat_iid),
                    name: Some(self.cats.name(info.cat_iid).to_string()),
                });
            }
        }
        for &f in &info.field_iids {
            if mark(&mut seq.fields_sent, f) {
                d.debug_annotation_names.push(InternedString {
                    iid: Some(f),
                    name: Some(self.fields.name(f).to_string()),
                });
            }
        }
        for &v in &self.value_refs {
            if mark(&mut seq.values_sent, v) {
                d.debug_annotation_string_values.push(InternedBytes {
                    iid: Some(v),
                    str: Some(self.values.name(v).as_bytes().to_vec()),
                });
            }
        }
        let empty = d.event_names.is_empty()
            && d.event_categories.is_empty()
            && d.debug_annotation_names.is_empty()
            && d.debug_annotation_string_values.is_empty();
        (!empty).then_some(d)
    }

    /// Writes one event of sequence `s`; returns whether it was written (an async end whose
    /// begin is not in the trace is not).
    fn event(&mut self, s: usize, ev: &MergedEvent<'_>, info: &Rc<ClassInfo>) -> io::Result<bool> {
        use prost::encoding::{double, int32, int64, message, uint64};
        use track_event_tag as tag;
        let mut te = std::mem::take(&mut self.te_buf);
        te.clear();
        let mut with_name = true;
        let thread_slice = matches!(info.kind, Kind::SpanBegin | Kind::SpanEnd);
        let mut moved = Vec::new();
        match info.kind {
            _ if thread_slice || info.kind == Kind::Instant => {
                with_name = info.kind != Kind::SpanEnd;
                te.extend_from_slice(&info.head);
            }
            Kind::AsyncBegin | Kind::AsyncEnd => {
                let pid = self.sequences[s].pid;
                let id = crate::spans::async_id(ev).unwrap_or(0);
                let uuid = if info.kind == Kind::AsyncBegin {
                    int32::encode(tag::TYPE, &TYPE_SLICE_BEGIN, &mut te);
                    let parent = crate::spans::async_parent(ev);
                    self.async_begin(pid, id, parent, info)?
                } else {
                    with_name = false;
                    int32::encode(tag::TYPE, &TYPE_SLICE_END, &mut te);
                    match self.async_end(s, pid, id, info.name_iid, ev.time_ns)? {
                        Some((uuid, above)) => {
                            moved = above;
                            uuid
                        }
                        None => {
                            self.te_buf = te;
                            return Ok(false);
                        }
                    }
                };
                uint64::encode(tag::TRACK_UUID, &uuid, &mut te);
            }
            Kind::SpanBegin | Kind::SpanEnd | Kind::Instant => {}
            Kind::Counter => {
                with_name = false;
                let pid = self.sequences[s].pid;
                let uuid = self.counter_track(pid, info.name_iid)?;
                int32::encode(tag::TYPE, &TYPE_COUNTER, &mut te);
                uint64::encode(tag::TRACK_UUID, &uuid, &mut te);
                let Some((int, dbl)) = ev.event.field(0).and_then(counter_value) else {
                    // A counter without a numeric value has nothing to plot.
                    self.te_buf = te;
                    return Ok(true);
                };
                if let Some(v) = int {
                    int64::encode(tag::COUNTER_VALUE, &v, &mut te);
                }
                if let Some(v) = dbl {
                    double::encode(tag::DOUBLE_COUNTER_VALUE, &v, &mut te);
                }
            }
        }
        if with_name && !thread_slice && info.kind != Kind::Instant {
            uint64::encode(tag::NAME_IID, &info.name_iid, &mut te);
            uint64::encode(tag::CATEGORY_IIDS, &info.cat_iid, &mut te);
        }
        self.value_refs.clear();
        if info.kind != Kind::Counter {
            for ((_, v), &iid) in ev.event.fields().zip(&info.field_iids) {
                let mut a = DebugAnnotation {
                    name_iid: Some(iid),
                    ..Default::default()
                };
                match v {
                    Value::F64(x) => a.double_value = Some(x),
                    Value::Bool(x) => a.bool_value = Some(x),
                    Value::Str(x) => {
                        let intern = x.len() >= MIN_INTERNED_LEN
                            && (self.values.names.len() < MAX_INTERNED_VALUES
                                || self.values.ids.contains_key(x));
                        if intern {
                            let iid = self.values.iid(x);
                            self.value_refs.push(iid);
                            a.string_value_iid = Some(iid);
                        } else {
                            a.string_value = Some(x.to_string());
                        }
                    }
                    // The integers, of every width: exactly one of the two is set.
                    _ => {
                        a.uint_value = v.as_u64();
                        a.int_value = v.as_i64();
                    }
                }
                message::encode(tag::DEBUG_ANNOTATIONS, &a, &mut te);
            }
        }
        let interned = if info.kind == Kind::Counter {
            None
        } else {
            self.intern(s, info, with_name)
        };
        self.emit(s, ev.time_ns, te, interned)?;
        if !moved.is_empty() {
            let pid = self.sequences[s].pid;
            self.continue_moved(s, pid, &moved, ev.time_ns)?;
        }
        Ok(true)
    }

    /// Writes a track event (its encoded fields `te`) of sequence `s` at `t_ns`.
    fn emit(
        &mut self,
        s: usize,
        t_ns: i128,
        te: Vec<u8>,
        interned: Option<InternedData>,
    ) -> io::Result<()> {
        let seq = &mut self.sequences[s];
        let delta = t_ns - seq.clock_ns;
        let (timestamp, clock) = match u64::try_from(delta) {
            Ok(d) => {
                seq.clock_ns = t_ns;
                (d, None)
            }
            // Earlier than the thread's previous event: absolute, the sequence clock unchanged.
            Err(_) => (abs_ns(t_ns), Some(CLOCK_REALTIME)),
        };
        let mut p = EventPacket {
            timestamp: Some(timestamp),
            timestamp_clock_id: clock,
            trusted_packet_sequence_id: Some(seq.id),
            sequence_flags: interned.is_some().then_some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: interned,
            track_event: Some(te),
        };
        self.buf.clear();
        // `Trace.packet`, field 1, length-delimited.
        self.buf.push(0x0a);
        let r = p
            .encode_length_delimited(&mut self.buf)
            .map_err(io::Error::other)
            .and_then(|()| self.out.write_all(&self.buf));
        self.te_buf = p.track_event.take().unwrap_or_default();
        r
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
mod tests {
    use super::proto::*;
    use prost::Message;

    /// The hot path's field numbers are [`TrackEvent`]'s: bytes written with
    /// `track_event_tag` decode as the message.
    #[test]
    fn track_event_tags_match_the_message() {
        use prost::encoding::{double, int32, int64, message, uint64};
        use track_event_tag as tag;
        let a = DebugAnnotation {
            name_iid: Some(3),
            string_value_iid: Some(4),
            ..Default::default()
        };
        let mut b = Vec::new();
        int32::encode(tag::TYPE, &TYPE_COUNTER, &mut b);
        uint64::encode(tag::TRACK_UUID, &9, &mut b);
        uint64::encode(tag::NAME_IID, &5, &mut b);
        uint64::encode(tag::CATEGORY_IIDS, &6, &mut b);
        int64::encode(tag::COUNTER_VALUE, &-7, &mut b);
        double::encode(tag::DOUBLE_COUNTER_VALUE, &0.5, &mut b);
        message::encode(tag::DEBUG_ANNOTATIONS, &a, &mut b);
        let te = TrackEvent::decode(&b[..]).unwrap();
        assert_eq!(
            te,
            TrackEvent {
                category_iids: vec![6],
                name_iid: Some(5),
                r#type: Some(TYPE_COUNTER),
                track_uuid: Some(9),
                counter_value: Some(-7),
                double_counter_value: Some(0.5),
                debug_annotations: vec![a],
            }
        );
        // And an EventPacket is a TracePacket.
        let p = EventPacket {
            timestamp: Some(1),
            trusted_packet_sequence_id: Some(2),
            track_event: Some(b),
            ..Default::default()
        };
        let tp = TracePacket::decode(&p.encode_to_vec()[..]).unwrap();
        assert_eq!(tp.track_event, Some(te));
        assert_eq!(
            (tp.timestamp, tp.trusted_packet_sequence_id),
            (Some(1), Some(2))
        );
    }
}
