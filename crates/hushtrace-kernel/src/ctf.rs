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

/// By event id: the system call of a `syscall_entry_`/`syscall_exit_` class, and whether it
/// is the exit.
type SyscallClasses = Arc<Vec<Option<(Arc<str>, bool)>>>;

/// An error reading a kernel trace: the file, where in it, and what was wrong (the process
/// traces' reader's error).
pub type ReadError = Error;

/// A kernel trace: its metadata, and its streams, read on demand ([`KernelTrace::events`]).
#[derive(Debug)]
pub struct KernelTrace {
    /// The directory (`DIR/kernel`).
    pub dir: PathBuf,
    /// The clock the timestamps are in.
    pub clock: KernelClock,
    /// The ftrace clock used.
    pub trace_clock: String,
    /// CPUs that have a stream.
    pub cpus: Vec<u32>,
    desc: Arc<TraceDesc>,
    streams: Vec<PathBuf>,
    /// By event id: the system call of a `syscall_entry_`/`syscall_exit_` class, and whether
    /// it is the exit.
    syscalls: SyscallClasses,
}

/// The CPU of stream file `name` (`channel<k>_<cpu>`).
fn stream_cpu(name: &str) -> Option<u32> {
    name.strip_prefix(STREAM_PREFIX)?
        .split_once('_')?
        .1
        .parse()
        .ok()
}

impl KernelTrace {
    /// Opens the kernel trace in `dir` (a `kernel/` directory): reads and checks its metadata
    /// and lists its stream files.
    pub fn open(dir: &Path) -> Result<KernelTrace, ReadError> {
        // Not through a symbolic link: the directory itself is opened with O_NOFOLLOW.
        drop(hushtrace_ctf::file::Dir::open(dir)?);
        let mpath = dir.join("metadata");
        let (desc, env) = read_kernel_metadata(&mpath)?;
        // The classes must be this hushtrace's, field for field: events are decoded by them.
        let ours = event_classes(&ClassTable::default());
        let one = event_classes(&ClassTable::new(vec!["x".into()]));
        let fields_of = |i: usize| one.get(CLASSES.len() + i).and_then(|c| c.fields.clone());
        let mut syscalls = Vec::new();
        for c in &desc.events {
            let call = match (
                c.name.strip_prefix(SYSCALL_ENTRY),
                c.name.strip_prefix(SYSCALL_EXIT),
            ) {
                (Some(call), _) if c.fields == fields_of(0) => Some((call, false)),
                (_, Some(call)) if c.fields == fields_of(1) => Some((call, true)),
                _ => None,
            };
            if let Some((call, exit)) = call {
                let i = usize::from(c.id);
                if syscalls.len() <= i {
                    syscalls.resize(i + 1, None);
                }
                syscalls[i] = Some((Arc::from(call), exit));
                continue;
            }
            if !ours
                .iter()
                .any(|o| o.name == c.name && o.fields == c.fields)
            {
                return Err(Error::not_hushtrace(
                    &mpath,
                    Location::File,
                    format!(
                        "kernel event {:?} is unknown or has other fields than this hushtrace's",
                        c.name
                    ),
                ));
            }
        }
        let mut streams = Vec::new();
        let mut cpus = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let e = e.map_err(|e| Error::io(dir, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(STREAM_PREFIX) {
                if let Some(cpu) = stream_cpu(&name) {
                    if !cpus.contains(&cpu) {
                        cpus.push(cpu);
                    }
                }
                streams.push(e.path());
            }
        }
        streams.sort();
        cpus.sort_unstable();
        Ok(KernelTrace {
            dir: dir.to_path_buf(),
            clock: KernelClock {
                name: env.clock_name,
                uuid: desc.clock_uuid,
                desc: desc.clock.clone(),
                note: env.clock_note,
            },
            trace_clock: env.trace_clock,
            cpus,
            desc: Arc::new(desc),
            streams,
            syscalls: Arc::new(syscalls),
        })
    }

    /// The events of every stream in time order (per-CPU streams merged), read as they are
    /// consumed: memory is one window per stream whatever the trace's size.
    pub fn events(&self) -> Result<Events, ReadError> {
        let streams = self
            .streams
            .iter()
            .map(|p| Ok((0, StreamReader::open(self.desc.clone(), p)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Events {
            merged: Merged::new(vec![self.desc.clone()], streams)?,
            read: 0,
            syscalls: self.syscalls.clone(),
        })
    }

    /// Nanoseconds since the Unix epoch of timestamp `ts`.
    pub fn epoch_ns(&self, ts: u64) -> i128 {
        self.clock.desc.to_epoch_ns(ts)
    }

    /// [`KernelTrace::epoch_ns`] clamped to `i64` (the unit of [`crate::analysis`]).
    pub fn ns(&self, ts: u64) -> i64 {
        self.epoch_ns(ts).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

/// The events of a kernel trace in time order (see [`KernelTrace::events`]).
#[derive(Debug)]
pub struct Events {
    merged: Merged,
    read: u64,
    syscalls: SyscallClasses,
}

impl Events {
    /// The next event; `Ok(None)` at the end.
    #[allow(clippy::should_implement_trait)] // fallible
    pub fn next(&mut self) -> Result<Option<KEvent>, ReadError> {
        let (decoded, stream, offset) = {
            let Some(m) = self.merged.next()? else {
                return Ok(None);
            };
            let ev = m.event;
            let mut vals = [In::Int(0); MAX_FIELDS];
            let mut n = 0;
            let mut ok = true;
            for (_, v) in ev.fields() {
                let Some(slot) = vals.get_mut(n) else {
                    ok = false;
                    break;
                };
                *slot = match v {
                    Value::I32(x) => In::Int(x.into()),
                    Value::U32(x) => In::Int(x.into()),
                    Value::I64(x) => In::Int(x),
                    Value::Str(s) => In::Text(s),
                    _ => {
                        ok = false;
                        break;
                    }
                };
                n += 1;
            }
            let syscall = self
                .syscalls
                .get(usize::from(ev.class.id))
                .and_then(|s| s.as_ref());
            let decoded = ok
                .then(|| match syscall {
                    Some((call, exit)) => Event::syscall(call.clone(), *exit, &vals[..n]),
                    None => Event::decode(&ev.class.name, &vals[..n]),
                })
                .flatten()
                .map(|event| KEvent {
                    ts: ev.timestamp,
                    cpu: ev.packet.vpid,
                    event,
                });
            (decoded, m.stream, ev.offset)
        };
        match decoded {
            Some(e) => {
                self.read += 1;
                Ok(Some(e))
            }
            None => Err(Error::corrupt(
                self.merged.streams()[stream].1.path(),
                offset,
                "event fields do not match its class",
            )),
        }
    }

    /// Events returned so far.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Events the kernel lost, as the packets read so far say (all of them at the end).
    pub fn discarded(&self) -> u64 {
        self.merged
            .streams()
            .iter()
            .map(|(_, s)| s.events_discarded())
            .sum()
    }

    /// Tolerated defects so far (a truncated last packet: a recorder killed mid-write).
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        self.merged.take_warnings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Comm, SchedSwitch, Wake};
    use hushtrace_ctf::metadata::ClockDesc;

    pub(crate) fn meta() -> KernelMeta {
        KernelMeta {
            uuid: [3; 16],
            clock: KernelClock {
                name: "hushtrace".into(),
                uuid: [4; 16],
                desc: ClockDesc {
                    freq: 1_000_000_000,
                    offset_s: 5,
                    offset: 7,
                    source: "tsc".into(),
                },
                note: "same clock".into(),
            },
            trace_clock: "x86-tsc".into(),
            hostname: "h".into(),
            kernel_release: "6.1".into(),
            categories: "sched".into(),
            classes: Arc::default(),
        }
    }

    fn all(t: &KernelTrace) -> Result<Vec<KEvent>, ReadError> {
        let mut ev = t.events()?;
        let mut v = Vec::new();
        while let Some(e) = ev.next()? {
            v.push(e);
        }
        Ok(v)
    }

    #[test]
    fn write_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let m = meta();
        std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
        let mut w = StreamWriter::create(&dir.path().join("channel0_1"), m.uuid, 1, 1).unwrap();
        let sw = SchedSwitch {
            prev_comm: Comm::new(b"a"),
            prev_tid: 10,
            prev_prio: 120,
            prev_state: 1,
            next_comm: Comm::new(b"b"),
            next_tid: 11,
            next_prio: -51,
        };
        w.write(&KEvent {
            ts: 100,
            cpu: 1,
            event: Event::SchedSwitch(sw),
        })
        .unwrap();
        w.lost(3);
        w.write(&KEvent {
            ts: 90,
            cpu: 1,
            event: Event::SoftirqEntry { vec: 1 },
        })
        .unwrap();
        // Values that do not match the class are refused, not written as 0.
        let id = crate::schema::id_of("sched_waking").unwrap();
        assert!(w.event(id, 120, &[Out::Int(1)]).is_err());
        w.flush().unwrap();
        assert_eq!(w.reordered, 1);
        let t = KernelTrace::open(dir.path()).unwrap();
        assert_eq!(t.cpus, [1]);
        let mut ev = t.events().unwrap();
        let e = ev.next().unwrap().unwrap();
        assert_eq!((&*e.name(), e.ts, e.cpu), ("sched_switch", 100, 1));
        assert_eq!(e.event, Event::SchedSwitch(sw));
        let e = ev.next().unwrap().unwrap();
        assert_eq!((e.ts, e.event), (100, Event::SoftirqEntry { vec: 1 }));
        assert!(ev.next().unwrap().is_none());
        assert_eq!(ev.discarded(), 3);
        assert_eq!(t.clock, m.clock);
        assert_eq!(t.trace_clock, "x86-tsc");
    }

    #[test]
    fn system_calls_are_written_and_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let classes = Arc::new(ClassTable::new(vec!["futex".into(), "read".into()]));
        let m = KernelMeta {
            classes: classes.clone(),
            ..meta()
        };
        std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
        let p = dir.path().join("channel1_0");
        let mut w = StreamWriter::create(&p, m.uuid, 1 << 16, 0)
            .unwrap()
            .with_classes(classes);
        let call: Arc<str> = "read".into();
        w.write(&KEvent {
            ts: 5,
            cpu: 0,
            event: Event::SyscallEntry {
                call: call.clone(),
                tid: 7,
                id: 0,
            },
        })
        .unwrap();
        w.write(&KEvent {
            ts: 6,
            cpu: 0,
            event: Event::SyscallExit {
                call,
                tid: 7,
                id: 0,
                ret: 12,
            },
        })
        .unwrap();
        w.flush().unwrap();
        let v = all(&KernelTrace::open(dir.path()).unwrap()).unwrap();
        let names: Vec<_> = v.iter().map(|e| e.name().into_owned()).collect();
        assert_eq!(names, ["syscall_entry_read", "syscall_exit_read"]);
        assert!(matches!(
            &v[1].event,
            Event::SyscallExit {
                ret: 12,
                tid: 7,
                ..
            }
        ));
    }

    #[test]
    fn streams_are_merged_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let m = meta();
        std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
        let wake = |tid| {
            Event::SchedWaking(Wake {
                comm: Comm::new(b"x"),
                tid,
                prio: 120,
                target_cpu: 0,
            })
        };
        for cpu in 0..3u32 {
            let p = dir.path().join(format!("channel0_{cpu}"));
            let mut w = StreamWriter::create(&p, m.uuid, cpu.into(), cpu).unwrap();
            for i in 0..1000u64 {
                // Far apart: some headers compact, some extended.
                let ts = i * (1 << 20) * (u64::from(cpu) + 1) + u64::from(cpu);
                w.write(&KEvent {
                    ts,
                    cpu,
                    event: wake(i as i32),
                })
                .unwrap();
            }
            w.flush().unwrap();
        }
        let t = KernelTrace::open(dir.path()).unwrap();
        let v = all(&t).unwrap();
        assert_eq!(v.len(), 3000);
        assert!(v.windows(2).all(|w| w[0].ts <= w[1].ts));
        assert_eq!(t.cpus, [0, 1, 2]);
    }

    #[test]
    fn random_and_truncated_streams_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let m = meta();
        std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
        let path = dir.path().join("channel0_0");
        let mut w = StreamWriter::create(&path, m.uuid, 0, 0).unwrap();
        for i in 0..20 {
            w.write(&KEvent {
                ts: i,
                cpu: 0,
                event: Event::SchedWaking(Wake {
                    comm: Comm::new(b"x"),
                    tid: 1,
                    prio: 2,
                    target_cpu: 3,
                }),
            })
            .unwrap();
        }
        w.flush().unwrap();
        let good = std::fs::read(&path).unwrap();
        let mut seed = 7u64;
        for round in 0..800 {
            let mut b = good.clone();
            if round % 3 == 0 {
                b.truncate(round % good.len());
            } else {
                for _ in 0..1 + round % 4 {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let at = (seed >> 33) as usize % b.len();
                    b[at] = (seed >> 24) as u8;
                }
            }
            std::fs::write(&path, &b).unwrap();
            if let Ok(t) = KernelTrace::open(dir.path()) {
                let _ = all(&t);
            }
        }
    }

    #[test]
    fn foreign_and_broken_traces_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("metadata"), "/* CTF 1.8 */\n").unwrap();
        let e = KernelTrace::open(dir.path()).unwrap_err();
        assert!(e.to_string().contains("not a hushtrace trace"), "{e}");
        // A process trace's metadata is not a kernel trace's.
        let (desc, _) = meta().to_desc();
        std::fs::write(
            dir.path().join("metadata"),
            hushtrace_ctf::metadata::to_tsdl(&desc),
        )
        .unwrap();
        let e = KernelTrace::open(dir.path()).unwrap_err();
        assert!(e.to_string().contains("metadata"), "{e}");
        std::fs::write(dir.path().join("metadata"), to_tsdl(&meta())).unwrap();
        std::fs::write(dir.path().join("channel0_0"), [0u8; 200]).unwrap();
        let t = KernelTrace::open(dir.path()).unwrap();
        let e = all(&t).unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
    }
}
