//! The CTF 1.8 kernel trace under `DIR/kernel/`: its metadata, its per-CPU stream files, and a
//! reader for them.
//!
//! One format layer with the process traces: packet headers are
//! [`hushtrace_ctf::layout::PacketHeader`] (the CPU in the `u32` at
//! [`hushtrace_ctf::layout::OFF_CPU_ID`]), event headers
//! [`hushtrace_ctf::layout::push_event_header`]'s, the metadata is rendered by
//! [`hushtrace_ctf::metadata::kernel_to_tsdl`], and the trace is read back by
//! [`hushtrace_ctf::reader`] (files opened through [`hushtrace_ctf::file`]: no symbolic link,
//! regular files only, bounded reads; one window per stream, so memory does not grow with the
//! trace). Each event's fields are those of [`crate::schema::CLASSES`]`[id]`.

use crate::clock::KernelClock;
use crate::event::{Event, In, KEvent};
use crate::schema::{ClassTable, Ty, CLASSES, SYSCALL_ENTRY, SYSCALL_EXIT};
use hushtrace_ctf::layout::{push_event_header, PacketHeader, PACKET_HEADER_LEN};
use hushtrace_ctf::metadata::{kernel_to_tsdl, EventClass, KernelEnv, TraceDesc};
use hushtrace_ctf::reader::{
    read_kernel_metadata, Error, Location, Merged, StreamReader, Value, Warning,
};
use hushtrace_ctf::Kind;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod read;
pub use read::{Events, KernelTrace, ReadError};

/// The name of the kernel trace directory inside a session directory.
pub const KERNEL_DIR: &str = "kernel";
/// Prefix of the stream files (`channel0_<cpu>`, as LTTng names its kernel streams; the
/// system-call instance writes `channel1_<cpu>`).
pub const STREAM_PREFIX: &str = "channel";
/// A packet is written out when it reaches this size.
pub const PACKET_TARGET: usize = 256 * 1024;
/// The largest packet [`StreamWriter`] writes: [`PACKET_TARGET`] and one more event (at most
/// an 11-byte header and [`MAX_FIELDS`] fields of at most 256 bytes). A stream whose packet
/// claims more was not written by it (`crate::recovery` calls that damage, not a cut write).
pub const PACKET_MAX: usize = PACKET_TARGET + 4096;
/// The most fields an event class has.
pub const MAX_FIELDS: usize = 8;

/// What the metadata says besides the events.
#[derive(Clone, Debug)]
pub struct KernelMeta {
    /// Trace UUID.
    pub uuid: [u8; 16],
    /// The clock.
    pub clock: KernelClock,
    /// The ftrace trace clock used (`x86-tsc`, `mono`).
    pub trace_clock: String,
    /// Host name.
    pub hostname: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// The categories recorded (`sched,irq`).
    pub categories: String,
    /// The event classes ([`CLASSES`] and the system calls recorded by name).
    pub classes: Arc<ClassTable>,
}

impl KernelMeta {
    /// The metadata of a synthetic `sched` kernel trace stamped with the clock of the
    /// user-space trace `user` (its UUID and calibration), as `record --kernel` would write it
    /// beside that trace: for tests, examples and benchmarks that build kernel traces.
    pub fn synthetic(user: &TraceDesc) -> KernelMeta {
        KernelMeta {
            uuid: [7; 16],
            clock: KernelClock {
                name: "hushtrace".into(),
                uuid: user.clock_uuid,
                desc: user.clock.clone(),
                note: "synthetic".into(),
            },
            trace_clock: "x86-tsc".into(),
            hostname: "h".into(),
            kernel_release: "6.1".into(),
            categories: "sched".into(),
            classes: Default::default(),
        }
    }
}

/// The event classes of `table` as the metadata declares them, the id being the index.
fn event_classes(table: &ClassTable) -> Vec<EventClass> {
    (0..table.len())
        .filter_map(|i| {
            let id = u16::try_from(i).ok()?;
            Some(EventClass {
                id,
                name: table.name(id)?.into_owned(),
                kind: Kind::Instant,
                fields: Some(
                    table
                        .fields(id)?
                        .iter()
                        .map(|(n, _, t)| (n.to_string(), *t))
                        .collect(),
                ),
            })
        })
        .collect()
}

impl KernelMeta {
    /// The description and environment hushtrace-ctf renders.
    pub fn to_desc(&self) -> (TraceDesc, KernelEnv) {
        (
            TraceDesc {
                uuid: self.uuid,
                clock_uuid: self.clock.uuid,
                clock: self.clock.desc.clone(),
                vpid: 0,
                procname: String::new(),
                hostname: self.hostname.clone(),
                events: event_classes(&self.classes),
            },
            KernelEnv {
                clock_name: self.clock.name.clone(),
                clock_note: self.clock.note.clone(),
                trace_clock: self.trace_clock.clone(),
                kernel_release: self.kernel_release.clone(),
                categories: self.categories.clone(),
            },
        )
    }
}

/// Renders the TSDL metadata.
pub fn to_tsdl(m: &KernelMeta) -> String {
    let (desc, env) = m.to_desc();
    kernel_to_tsdl(&desc, &env)
}

pub use crate::event::Out;

/// Writes one stream file, packet by packet.
#[derive(Debug)]
pub struct StreamWriter {
    file: std::fs::File,
    path: PathBuf,
    uuid: [u8; 16],
    instance: u64,
    cpu: u32,
    classes: Arc<ClassTable>,
    /// The packet being filled: room for its header, then the events.
    packet: Vec<u8>,
    begin: Option<u64>,
    last: u64,
    seq: u64,
    discarded: u64,
    /// Events written.
    pub written: u64,
    /// Events whose time was before the previous one's (written at the previous time).
    pub reordered: u64,
}

/// Why an event could not be written.
fn mismatch(class: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{class}: values do not match the event's fields"),
    )
}

impl StreamWriter {
    /// Creates `path` (mode 0600, never following a link, never over an existing file).
    pub fn create(path: &Path, uuid: [u8; 16], instance: u64, cpu: u32) -> io::Result<Self> {
        let (parent, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(p), Some(n)) => (p, n),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: not a file path", path.display()),
                ))
            }
        };
        let file = hushtrace_ctf::file::Dir::open(parent)
            .and_then(|d| d.create_new(name))
            .map_err(|e| io::Error::other(e.to_string()))?;
        let mut packet = Vec::with_capacity(PACKET_MAX);
        packet.resize(PACKET_HEADER_LEN, 0);
        Ok(StreamWriter {
            file,
            path: path.to_path_buf(),
            uuid,
            instance,
            cpu,
            classes: Arc::default(),
            packet,
            begin: None,
            last: 0,
            seq: 0,
            discarded: 0,
            written: 0,
            reordered: 0,
        })
    }

    /// The same writer for a trace with the classes of `classes` (by default [`CLASSES`]
    /// only).
    pub fn with_classes(mut self, classes: Arc<ClassTable>) -> StreamWriter {
        self.classes = classes;
        self
    }

    /// Counts `n` events the kernel lost (shown in the next packet's `events_discarded`).
    pub fn lost(&mut self, n: u64) {
        self.discarded += n;
    }

    /// Events the kernel lost so far.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Appends `e` (its time and fields; its CPU is the stream's).
    pub fn write(&mut self, e: &KEvent) -> io::Result<()> {
        let name = e.name();
        let id = self.classes.id_of(&name).ok_or_else(|| mismatch(&name))?;
        e.event.with_values(|v| self.event(id, e.ts, v))
    }

    /// Appends an event of class `id` at `ts` with `values` in the class's field order and
    /// types (an error, nothing written, if they do not match).
    pub fn event(&mut self, id: u16, ts: u64, values: &[Out<'_>]) -> io::Result<()> {
        let fields = self
            .classes
            .fields(id)
            .ok_or_else(|| mismatch("unknown class"))?;
        let ok = fields.len() == values.len()
            && values.len() <= MAX_FIELDS
            && fields.iter().zip(values).all(|((_, _, ty), v)| {
                matches!(
                    (ty, v),
                    (Ty::Str, Out::Text(_)) | (Ty::I32 | Ty::U32 | Ty::I64, Out::Int(_))
                )
            });
        if !ok {
            return Err(mismatch(&self.classes.name(id).unwrap_or_default()));
        }
        let ts = if ts < self.last {
            self.reordered += 1;
            self.last
        } else {
            ts
        };
        let prev = match self.begin {
            Some(_) => self.last,
            None => {
                self.begin = Some(ts);
                ts
            }
        };
        self.last = ts;
        push_event_header(&mut self.packet, id, ts, prev);
        for ((_, _, ty), v) in fields.iter().zip(values) {
            match (ty, v) {
                (Ty::I32, Out::Int(n)) => self.packet.extend_from_slice(&(*n as i32).to_le_bytes()),
                (Ty::U32, Out::Int(n)) => self.packet.extend_from_slice(&(*n as u32).to_le_bytes()),
                (_, Out::Int(n)) => self.packet.extend_from_slice(&n.to_le_bytes()),
                (_, Out::Text(t)) => {
                    let t = &t[..t.len().min(255)];
                    let t = String::from_utf8_lossy(t);
                    // NUL ends a CTF string: one inside the text would cut it.
                    self.packet
                        .extend(t.as_bytes().iter().map(|&c| if c == 0 { b' ' } else { c }));
                    self.packet.push(0);
                }
            }
        }
        self.written += 1;
        if self.packet.len() >= PACKET_TARGET {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the pending events as one packet (nothing if there are none).
    pub fn flush(&mut self) -> io::Result<()> {
        let Some(begin) = self.begin.take() else {
            return Ok(());
        };
        PacketHeader {
            uuid: self.uuid,
            stream_instance_id: self.instance,
            timestamp_begin: begin,
            timestamp_end: self.last,
            seq: self.seq,
            events_discarded: self.discarded,
            vpid: self.cpu,
            ..PacketHeader::default()
        }
        .with_len(self.packet.len())
        .write_to(&mut self.packet);
        let r = self.file.write_all(&self.packet);
        self.packet.truncate(PACKET_HEADER_LEN);
        self.seq += 1;
        r.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))
    }
}

#[cfg(test)]
mod tests;
