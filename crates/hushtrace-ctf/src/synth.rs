//! Writing synthetic traces in the hushtrace format, for tests, fuzz corpora and benchmarks.
//!
//! Metadata comes from [`crate::metadata::to_tsdl`]; packets are laid out per
//! [`crate::layout`], exactly as the runtime writes them. The clock runs at 1 GHz from a fixed
//! epoch offset ([`EPOCH_S`]), so a timestamp in cycles is a time in nanoseconds and tests can
//! check exact durations.
//!
//! Event headers take the compact form whenever [`crate::layout::compact_fits`] allows it
//! after the stream's previous event in the packet (a packet begins at its first event), and
//! the extended form otherwise: ids of 255 and up, gaps of 2^24 cycles (16.8 ms) or more, and
//! timestamps going backwards produce extended headers.
//!
//! ```
//! use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
//! use hushtrace_ctf::FieldType;
//!
//! let mut t = SynthTrace::new(4242, "app");
//! let (begin, end) = t.span("io:read", &[("fd", FieldType::I32)]);
//! let th = t.thread(4243, "reader");
//! th.event(SynthEvent::new(begin, 1_000).i32(3));
//! th.event(SynthEvent::new(end, 1_500));
//! let dir = std::env::temp_dir().join(format!("hushtrace-synth-doc-{}", std::process::id()));
//! t.write_session(&dir).unwrap();
//! assert!(dir.join("4242/metadata").is_file());
//! assert!(dir.join("4242/stream_0").is_file());
//! assert!(dir.join("4242.stats.json").is_file());
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::layout::*;
use crate::metadata::{to_tsdl, ClockDesc, EventClass, TraceDesc};
use hushtrace_core::{FieldType, Kind};
use std::io::{self, Write};
use std::path::Path;

/// Seconds from the Unix epoch to cycle 0 of synthetic traces.
pub const EPOCH_S: i64 = 1_700_000_000;

pub use hushtrace_core::OwnedValue;

/// One field value of a synthetic event: now [`OwnedValue`], the owned form of the one value
/// type ([`hushtrace_core::FieldValue`]) that the runtime writes and the reader decodes.
#[deprecated(note = "use `OwnedValue` (hushtrace_core::OwnedValue), the same type")]
pub type SynthValue = OwnedValue;

/// Appends the encoding of `v` to `out`, as the runtime encodes it, except that a string is
/// written whole (not cut at [`hushtrace_core::STR_CAP`] or at a NUL) followed by a NUL: a
/// synthetic trace may hold what the runtime never writes, for testing readers.
pub fn push_value(out: &mut Vec<u8>, v: &OwnedValue) {
    match v {
        OwnedValue::U8(v) => out.push(*v),
        OwnedValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        OwnedValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        OwnedValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        OwnedValue::I8(v) => out.push(*v as u8),
        OwnedValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        OwnedValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        OwnedValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        OwnedValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        OwnedValue::Bool(v) => out.push(*v as u8),
        OwnedValue::Str(s) => {
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        }
    }
}

/// One synthetic event: class id, timestamp (cycles = ns) and field values.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthEvent {
    /// Event class id.
    pub id: u16,
    /// Timestamp in cycles.
    pub timestamp: u64,
    /// Field values, in declaration order.
    pub values: Vec<OwnedValue>,
}

macro_rules! value_builders {
    ($($fn:ident($t:ty) => $v:ident),* $(,)?) => {$(
        #[doc = concat!("Appends a `", stringify!($t), "` field value.")]
        pub fn $fn(mut self, v: $t) -> Self {
            self.values.push(OwnedValue::$v(v));
            self
        }
    )*};
}

impl SynthEvent {
    /// An event of class `id` at `timestamp` cycles, without fields yet.
    pub fn new(id: u16, timestamp: u64) -> Self {
        SynthEvent {
            id,
            timestamp,
            values: Vec::new(),
        }
    }

    value_builders! {
        u8(u8) => U8, u16(u16) => U16, u32(u32) => U32, u64(u64) => U64,
        i8(i8) => I8, i16(i16) => I16, i32(i32) => I32, i64(i64) => I64,
        f64(f64) => F64, bool(bool) => Bool,
    }

    /// Appends a string field value.
    pub fn str(mut self, v: &str) -> Self {
        self.values.push(OwnedValue::Str(v.to_string()));
        self
    }

    /// Appends the encoding of the event (header and fields) to `out`, with the stream's clock
    /// at `prev` (the previous event's timestamp, or the packet's begin time): a compact header
    /// when it fits, else an extended one ([`push_event_header`]).
    pub fn encode(&self, prev: u64, out: &mut Vec<u8>) {
        push_event_header(out, self.id, self.timestamp, prev);
        for v in &self.values {
            push_value(out, v);
        }
    }
}

/// Identity of the thread owning a stream, written into every packet context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIdentity {
    /// Trace UUID.
    pub uuid: [u8; 16],
    /// Stream instance id.
    pub stream_instance_id: u64,
    /// Process id.
    pub vpid: u32,
    /// Thread id.
    pub vtid: u32,
    /// Thread name (cut to 15 bytes).
    pub procname: String,
    /// `pthread_t`.
    pub pthread_id: u64,
}

/// Writes the packets of one stream incrementally: events are buffered until a packet is full.
#[derive(Debug)]
pub struct StreamWriter<W: Write> {
    out: W,
    id: PacketIdentity,
    /// Maximum packet size in bytes (a packet holds at least one event).
    packet_bytes: usize,
    /// Encoded events of the open packet.
    events: Vec<u8>,
    scratch: Vec<u8>,
    ts_begin: u64,
    ts_end: u64,
    /// Timestamp of the open packet's last event (the clock its next header is relative to).
    clock: u64,
    seq: u64,
    /// Cumulative discarded count written into packets.
    pub events_discarded: u64,
}

impl<W: Write> StreamWriter<W> {
    /// A writer producing packets of at most `packet_bytes` bytes.
    pub fn new(out: W, id: PacketIdentity, packet_bytes: usize) -> Self {
        StreamWriter {
            out,
            id,
            packet_bytes: packet_bytes.max(PACKET_HEADER_LEN + EXTENDED_HEADER_LEN),
            events: Vec::with_capacity(packet_bytes),
            scratch: Vec::new(),
            ts_begin: 0,
            ts_end: 0,
            clock: 0,
            seq: 0,
            events_discarded: 0,
        }
    }

    /// Appends one event, flushing the open packet first if the event does not fit. A packet
    /// begins at its first event's timestamp.
    pub fn event(&mut self, e: &SynthEvent) -> io::Result<()> {
        let ts = e.timestamp;
        self.scratch.clear();
        if !self.events.is_empty() {
            e.encode(self.clock, &mut self.scratch);
            if PACKET_HEADER_LEN + self.events.len() + self.scratch.len() > self.packet_bytes {
                self.flush_packet()?;
                self.scratch.clear();
            }
        }
        if self.events.is_empty() {
            // First in its packet: relative to the packet's begin time, its own timestamp.
            e.encode(ts, &mut self.scratch);
            self.ts_begin = ts;
        }
        self.ts_end = ts;
        self.clock = ts;
        self.events.extend_from_slice(&self.scratch);
        Ok(())
    }

    /// Skips `n` packet sequence numbers, as overwrite mode does when packets are lost.
    pub fn lose_packets(&mut self, n: u64) -> io::Result<()> {
        self.flush_packet()?;
        self.seq += n;
        Ok(())
    }

    /// Writes the open packet, if it has events.
    pub fn flush_packet(&mut self) -> io::Result<()> {
        if self.events.is_empty() {
            return Ok(());
        }
        let header = packet_header(
            &self.id,
            self.ts_begin,
            self.ts_end,
            (PACKET_HEADER_LEN + self.events.len()) as u64,
            self.seq,
            self.events_discarded,
        );
        self.out.write_all(&header)?;
        self.out.write_all(&self.events)?;
        self.events.clear();
        self.seq += 1;
        Ok(())
    }

    /// Flushes the open packet and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.flush_packet()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Encodes a packet header and context.
pub fn packet_header(
    id: &PacketIdentity,
    ts_begin: u64,
    ts_end: u64,
    len_bytes: u64,
    seq: u64,
    events_discarded: u64,
) -> [u8; PACKET_HEADER_LEN] {
    let name = id.procname.as_bytes();
    let mut procname = [0u8; PROCNAME_LEN];
    let n = name.len().min(PROCNAME_LEN - 1);
    procname[..n].copy_from_slice(&name[..n]);
    PacketHeader {
        uuid: id.uuid,
        stream_instance_id: id.stream_instance_id,
        timestamp_begin: ts_begin,
        timestamp_end: ts_end,
        seq,
        events_discarded,
        vpid: id.vpid,
        vtid: id.vtid,
        procname,
        pthread_id: id.pthread_id,
        ..PacketHeader::default()
    }
    .with_len(len_bytes as usize)
    .encode()
}

/// One thread (one stream) of a synthetic trace.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthThread {
    /// Thread id.
    pub vtid: u32,
    /// Thread name.
    pub name: String,
    /// Events, in time order.
    pub events: Vec<SynthEvent>,
    /// Events discarded: reported in the context of the last packet.
    pub discarded: u64,
    /// Packet sequence numbers skipped after the first packet (overwrite mode losses).
    pub lost_packets: u64,
    /// Sequence number of the first packet: in overwrite mode the oldest packets are gone and
    /// a stream starts later than 0.
    pub first_seq: u64,
}

impl SynthThread {
    /// Appends an event.
    pub fn event(&mut self, e: SynthEvent) -> &mut Self {
        self.events.push(e);
        self
    }
}

/// A synthetic trace of one process.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthTrace {
    /// The metadata (clock at 1 GHz from [`EPOCH_S`]).
    pub desc: TraceDesc,
    /// Threads, one stream each.
    pub threads: Vec<SynthThread>,
    /// Maximum packet size in bytes.
    pub packet_bytes: usize,
    /// Name of the trace directory (default: the pid).
    pub dir_name: String,
    /// Whether to write `<dir_name>.stats.json`.
    pub write_stats: bool,
}

impl SynthTrace {
    /// An empty trace of process `pid` named `procname`.
    pub fn new(pid: u32, procname: &str) -> Self {
        let mut uuid = [0x5a; 16];
        uuid[..4].copy_from_slice(&pid.to_le_bytes());
        SynthTrace {
            desc: TraceDesc {
                uuid,
                clock_uuid: [0xc1; 16],
                clock: ClockDesc {
                    freq: 1_000_000_000,
                    offset_s: EPOCH_S,
                    offset: 0,
                    source: "tsc".into(),
                },
                vpid: pid,
                procname: procname.to_string(),
                hostname: "synth".into(),
                events: Vec::new(),
            },
            threads: Vec::new(),
            packet_bytes: 4096,
            dir_name: pid.to_string(),
            write_stats: true,
        }
    }

    /// Adds an event class and returns its id.
    pub fn class(&mut self, name: &str, kind: Kind, fields: Option<&[(&str, FieldType)]>) -> u16 {
        let id = self.desc.events.len() as u16;
        self.desc.events.push(EventClass {
            id,
            name: name.to_string(),
            kind,
            fields: fields.map(|f| f.iter().map(|(n, t)| (n.to_string(), *t)).collect()),
        });
        id
    }

    /// Adds an instant event class (`"category:name"`) and returns its id.
    pub fn instant(&mut self, name: &str, fields: &[(&str, FieldType)]) -> u16 {
        self.class(name, Kind::Instant, Some(fields))
    }

    /// Adds a span's begin (with `fields`) and end (no fields) classes; returns both ids.
    pub fn span(&mut self, name: &str, fields: &[(&str, FieldType)]) -> (u16, u16) {
        (
            self.class(name, Kind::SpanBegin, Some(fields)),
            self.class(name, Kind::SpanEnd, Some(&[])),
        )
    }

    /// Adds an async span's begin (fields `id` and `parent`, u64) and end (`id`) classes, as the
    /// runtime's `async_span!` declares them; returns both ids.
    pub fn async_span(&mut self, name: &str) -> (u16, u16) {
        (
            self.class(
                name,
                Kind::AsyncBegin,
                Some(&[("id", FieldType::U64), ("parent", FieldType::U64)]),
            ),
            self.class(name, Kind::AsyncEnd, Some(&[("id", FieldType::U64)])),
        )
    }

    /// Adds a counter class with one field `value` of type `ty`; returns its id.
    pub fn counter(&mut self, name: &str, ty: FieldType) -> u16 {
        self.class(name, Kind::Counter, Some(&[("value", ty)]))
    }

    /// The thread `vtid`, created (named `name`) if new.
    pub fn thread(&mut self, vtid: u32, name: &str) -> &mut SynthThread {
        let i = match self.threads.iter().position(|t| t.vtid == vtid) {
            Some(i) => i,
            None => {
                self.threads.push(SynthThread {
                    vtid,
                    name: name.to_string(),
                    events: Vec::new(),
                    discarded: 0,
                    lost_packets: 0,
                    first_seq: 0,
                });
                self.threads.len() - 1
            }
        };
        &mut self.threads[i]
    }

    /// The TSDL metadata text.
    pub fn metadata(&self) -> String {
        to_tsdl(&self.desc)
    }

    /// The bytes of thread number `i`'s stream file.
    pub fn stream_bytes(&self, i: usize) -> Vec<u8> {
        let Some(t) = self.threads.get(i) else {
            return Vec::new();
        };
        let id = PacketIdentity {
            uuid: self.desc.uuid,
            stream_instance_id: i as u64,
            vpid: self.desc.vpid,
            vtid: t.vtid,
            procname: t.name.clone(),
            pthread_id: 0x7f00_0000_0000 + t.vtid as u64,
        };
        let mut w = StreamWriter::new(Vec::new(), id, self.packet_bytes);
        // Writing to a Vec cannot fail.
        let _ = w.lose_packets(t.first_seq);
        let n = t.events.len();
        for (k, e) in t.events.iter().enumerate() {
            if k + 1 == n {
                // The last packet reports the discarded events.
                w.events_discarded = t.discarded;
            }
            // Writing to a Vec cannot fail.
            let _ = w.event(e);
            if k == 0 && t.lost_packets > 0 {
                let _ = w.lose_packets(t.lost_packets);
            }
        }
        w.finish().unwrap_or_default()
    }

    /// Writes the trace into `<session>/<dir_name>/` (creating directories) and the stats file
    /// beside it.
    pub fn write_session(&self, session: &Path) -> io::Result<()> {
        let dir = session.join(&self.dir_name);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(METADATA_FILE), self.metadata())?;
        for i in 0..self.threads.len() {
            std::fs::write(
                dir.join(format!("{STREAM_PREFIX}{i}")),
                self.stream_bytes(i),
            )?;
        }
        if self.write_stats {
            let written: usize = self.threads.iter().map(|t| t.events.len()).sum();
            let discarded: u64 = self.threads.iter().map(|t| t.discarded).sum();
            let stats = crate::stats::ProcessStats {
                pid: self.desc.vpid as u64,
                written: written as u64,
                discarded,
            };
            std::fs::write(
                session.join(crate::stats::file_name(&self.dir_name)),
                stats.to_json(),
            )?;
        }
        Ok(())
    }
}
