//! The CTF 1.8 kernel trace under `DIR/kernel/`: its metadata, its per-CPU stream files, and a
//! reader for them.
//!
//! Layout (all little-endian, byte-aligned):
//!
//! * packet header, [`PACKET_HEADER_LEN`] bytes: `u32` magic, 16-byte trace UUID, `u32` stream
//!   class id (0), `u64` stream instance id;
//! * packet context: `u64` timestamp_begin, `u64` timestamp_end, `u64` content_size (bits),
//!   `u64` packet_size (bits), `u64` packet_seq_num, `u64` events_discarded (cumulative, as
//!   LTTng counts it), `u32` cpu_id;
//! * events: `u16` id, `u64` timestamp, then the fields of [`crate::schema::CLASSES`]`[id]`.

use crate::schema::{Class, Ty, CLASSES};
use hushtrace_ctf::layout::MAGIC;
use hushtrace_ctf::metadata::{escape, parse_uuid, uuid_string, ClockDesc};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The name of the kernel trace directory inside a session directory.
pub const KERNEL_DIR: &str = "kernel";
/// Prefix of the stream files (`channel0_<cpu>`, as LTTng names its kernel streams; the
/// system-call instance writes `channel1_<cpu>`).
pub const STREAM_PREFIX: &str = "channel";
/// Bytes of packet header and context.
pub const PACKET_HEADER_LEN: usize = 32 + 52;
/// Bytes of an event header.
pub const EVENT_HEADER_LEN: usize = 10;
/// A packet is written out when its events reach this size.
pub const PACKET_TARGET: usize = 256 * 1024;
/// Marks the metadata as written by hushtrace (the reader refuses other kernel traces).
pub const PRODUCER: &str = "hushtrace-kernel";

pub use crate::clock::KernelClock;

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
}

/// Renders the TSDL metadata.
pub fn to_tsdl(m: &KernelMeta) -> String {
    let mut s = String::with_capacity(8192);
    s.push_str("/* CTF 1.8 */\n\n");
    hushtrace_ctf::metadata::integer_aliases(
        &mut s,
        &[
            ("uint8_t", 8, false),
            ("uint16_t", 16, false),
            ("uint32_t", 32, false),
            ("uint64_t", 64, false),
            ("int32_t", 32, true),
            ("int64_t", 64, true),
        ],
    );
    let _ = writeln!(
        s,
        "\ntrace {{\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"{}\";\n\tbyte_order = le;\n\
         \tpacket.header := struct {{\n\t\tuint32_t magic;\n\t\tuint8_t uuid[16];\n\
         \t\tuint32_t stream_id;\n\t\tuint64_t stream_instance_id;\n\t}};\n}};\n",
        uuid_string(&m.uuid)
    );
    // LTTng's kernel trace environment, so Trace Compass opens it as a kernel trace.
    let _ = writeln!(
        s,
        "env {{\n\thostname = \"{}\";\n\tdomain = \"kernel\";\n\tsysname = \"Linux\";\n\
         \tkernel_release = \"{}\";\n\ttracer_name = \"lttng-modules\";\n\ttracer_major = 2;\n\
         \ttracer_minor = 13;\n\ttracer_patchlevel = 0;\n\ttrace_buffering_scheme = \"global\";\n\
         \tproducer = \"{PRODUCER}\";\n\ttrace_clock = \"{}\";\n\tclock_note = \"{}\";\n\
         \tcategories = \"{}\";\n}};\n",
        escape(&m.hostname),
        escape(&m.kernel_release),
        escape(&m.trace_clock),
        escape(&m.clock.note),
        escape(&m.categories)
    );
    let c = &m.clock;
    let _ = writeln!(
        s,
        "clock {{\n\tname = \"{}\";\n\tuuid = \"{}\";\n\tdescription = \"{}\";\n\tfreq = {};\n\
         \tprecision = 1;\n\toffset_s = {};\n\toffset = {};\n\tabsolute = TRUE;\n}};\n",
        escape(&c.name),
        uuid_string(&c.uuid),
        escape(&format!(
            "ftrace {} clock, {}",
            m.trace_clock, c.desc.source
        )),
        c.desc.freq,
        c.desc.offset_s,
        c.desc.offset
    );
    let _ = writeln!(
        s,
        "typealias integer {{ size = 64; align = 8; signed = false; map = clock.{}.value; }} \
         := uint64_clock_t;\n",
        c.name
    );
    s.push_str(
        "stream {\n\tid = 0;\n\tevent.header := struct {\n\t\tuint16_t id;\n\
         \t\tuint64_clock_t timestamp;\n\t};\n\tpacket.context := struct {\n\
         \t\tuint64_clock_t timestamp_begin;\n\t\tuint64_clock_t timestamp_end;\n\
         \t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n\t\tuint64_t packet_seq_num;\n\
         \t\tuint64_t events_discarded;\n\t\tuint32_t cpu_id;\n\t};\n};\n\n",
    );
    for (id, c) in CLASSES.iter().enumerate() {
        let _ = writeln!(
            s,
            "event {{\n\tname = \"{}\";\n\tid = {id};\n\tstream_id = 0;\n\tfields := struct {{",
            c.name
        );
        for (name, _, ty) in c.fields {
            let _ = writeln!(s, "\t\t{} _{name};", ty.tsdl());
        }
        s.push_str("\t};\n};\n\n");
    }
    s
}

/// A field value while writing.
#[derive(Clone, Copy, Debug)]
pub enum Out<'a> {
    /// An integer (written with the class's type).
    Int(i64),
    /// Text (invalid UTF-8 replaced, cut at 255 bytes).
    Text(&'a [u8]),
}

/// Writes one stream file, packet by packet.
#[derive(Debug)]
pub struct StreamWriter {
    file: std::fs::File,
    path: PathBuf,
    uuid: [u8; 16],
    instance: u64,
    cpu: u32,
    events: Vec<u8>,
    begin: Option<u64>,
    last: u64,
    seq: u64,
    discarded: u64,
    /// Events written.
    pub written: u64,
    /// Events whose time was before the previous one's (written at the previous time).
    pub reordered: u64,
}

impl StreamWriter {
    /// Creates `path` (mode 0600, never following a link).
    pub fn create(path: &Path, uuid: [u8; 16], instance: u64, cpu: u32) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(StreamWriter {
            file,
            path: path.to_path_buf(),
            uuid,
            instance,
            cpu,
            events: Vec::with_capacity(PACKET_TARGET + 4096),
            begin: None,
            last: 0,
            seq: 0,
            discarded: 0,
            written: 0,
            reordered: 0,
        })
    }

    /// Counts `n` events the kernel lost (shown in the next packet's `events_discarded`).
    pub fn lost(&mut self, n: u64) {
        self.discarded += n;
    }

    /// Events the kernel lost so far.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Appends an event of class `id` at `ts` with `values` in the class's field order.
    pub fn event(&mut self, id: u16, ts: u64, values: &[Out<'_>]) -> io::Result<()> {
        let class: &Class = &CLASSES[usize::from(id)];
        let ts = if ts < self.last {
            self.reordered += 1;
            self.last
        } else {
            ts
        };
        if self.begin.is_none() {
            self.begin = Some(ts.max(self.last));
        }
        self.last = ts;
        self.events.extend_from_slice(&id.to_le_bytes());
        self.events.extend_from_slice(&ts.to_le_bytes());
        for ((_, _, ty), v) in class.fields.iter().zip(values) {
            match (ty, v) {
                (Ty::I32, Out::Int(n)) => self.events.extend_from_slice(&(*n as i32).to_le_bytes()),
                (Ty::U32, Out::Int(n)) => self.events.extend_from_slice(&(*n as u32).to_le_bytes()),
                (Ty::I64, Out::Int(n)) => self.events.extend_from_slice(&n.to_le_bytes()),
                (Ty::Str, Out::Text(t)) => {
                    let t = &t[..t.len().min(255)];
                    match std::str::from_utf8(t) {
                        Ok(s) => self.events.extend_from_slice(s.as_bytes()),
                        Err(_) => self
                            .events
                            .extend_from_slice(String::from_utf8_lossy(t).as_bytes()),
                    }
                    self.events.push(0);
                }
                (Ty::Str, Out::Int(_)) => self.events.push(0),
                (_, Out::Text(_)) => self
                    .events
                    .extend_from_slice(&[0u8; 8][..if *ty == Ty::I64 { 8 } else { 4 }]),
            }
        }
        self.written += 1;
        if self.events.len() >= PACKET_TARGET {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the pending events as one packet (nothing if there are none).
    pub fn flush(&mut self) -> io::Result<()> {
        let Some(begin) = self.begin.take() else {
            return Ok(());
        };
        let size = ((PACKET_HEADER_LEN + self.events.len()) * 8) as u64;
        let mut h = Vec::with_capacity(PACKET_HEADER_LEN);
        h.extend_from_slice(&MAGIC.to_le_bytes());
        h.extend_from_slice(&self.uuid);
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&self.instance.to_le_bytes());
        h.extend_from_slice(&begin.to_le_bytes());
        h.extend_from_slice(&self.last.to_le_bytes());
        h.extend_from_slice(&size.to_le_bytes());
        h.extend_from_slice(&size.to_le_bytes());
        h.extend_from_slice(&self.seq.to_le_bytes());
        h.extend_from_slice(&self.discarded.to_le_bytes());
        h.extend_from_slice(&self.cpu.to_le_bytes());
        debug_assert_eq!(h.len(), PACKET_HEADER_LEN);
        let r = self
            .file
            .write_all(&h)
            .and_then(|()| self.file.write_all(&self.events));
        self.events.clear();
        self.seq += 1;
        r.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))
    }
}

/// A decoded field value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// An integer.
    Int(i64),
    /// Text.
    Str(String),
}

/// Most text fields a class has.
const MAX_TEXT: usize = 2;
/// Most fields a class has.
const MAX_VALUES: usize = 8;

/// One kernel event read back: no allocation of its own (integers inline, text shared with
/// every other event holding the same string), so a trace of millions of events stays
/// about 110 bytes an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KEvent {
    /// Timestamp in clock cycles of the trace's clock.
    pub ts: u64,
    /// CPU it happened on.
    pub cpu: u32,
    /// Index into [`CLASSES`].
    pub class: u16,
    /// Integer fields by position in the class (text fields' slots unused).
    ints: [i64; MAX_VALUES],
    /// Text fields, in their order in the class.
    texts: [Option<Arc<str>>; MAX_TEXT],
}

impl KEvent {
    /// An event of class `class` with `values` in the class's field order (a value of the
    /// wrong kind reads as 0 or `""`; values past the class's fields are ignored).
    pub fn new(ts: u64, cpu: u32, class: u16, values: &[Val]) -> KEvent {
        let mut e = KEvent {
            ts,
            cpu,
            class,
            ints: [0; MAX_VALUES],
            texts: Default::default(),
        };
        let mut t = 0;
        for (i, ((_, _, ty), v)) in CLASSES[usize::from(class)]
            .fields
            .iter()
            .zip(values)
            .enumerate()
        {
            match (ty, v) {
                (Ty::Str, Val::Str(s)) if t < MAX_TEXT => {
                    e.texts[t] = Some(Arc::from(s.as_str()));
                    t += 1;
                }
                (Ty::Str, _) => t += 1,
                (_, Val::Int(n)) if i < MAX_VALUES => e.ints[i] = *n,
                _ => {}
            }
        }
        e
    }

    /// The event's name.
    pub fn name(&self) -> &'static str {
        CLASSES[usize::from(self.class)].name
    }

    /// The integer field `field` (0 if absent).
    pub fn int(&self, field: &str) -> i64 {
        CLASSES[usize::from(self.class)]
            .fields
            .iter()
            .position(|(n, _, ty)| *n == field && *ty != Ty::Str)
            .and_then(|i| self.ints.get(i).copied())
            .unwrap_or(0)
    }

    /// The text field `field` (`""` if absent).
    pub fn text(&self, field: &str) -> &str {
        CLASSES[usize::from(self.class)]
            .fields
            .iter()
            .filter(|(_, _, ty)| *ty == Ty::Str)
            .position(|(n, _, _)| *n == field)
            .and_then(|i| self.texts.get(i)?.as_deref())
            .unwrap_or("")
    }
}

/// An error reading a kernel trace: the file and what was wrong.
#[derive(Debug)]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for ReadError {}

fn err(path: &Path, message: impl Into<String>) -> ReadError {
    ReadError {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// A kernel trace read into memory, its events in time order.
#[derive(Debug)]
pub struct KernelTrace {
    /// The directory (`DIR/kernel`).
    pub dir: PathBuf,
    /// The clock the timestamps are in.
    pub clock: KernelClock,
    /// The ftrace clock used.
    pub trace_clock: String,
    /// Events in time order (per-CPU streams merged).
    pub events: Vec<KEvent>,
    /// Events the kernel lost, summed over the streams.
    pub discarded: u64,
    /// CPUs that have a stream.
    pub cpus: Vec<u32>,
}

/// The kernel trace directory of session `dir`, if it has one (`dir` may be the kernel
/// directory itself).
pub fn kernel_dir(dir: &Path) -> Option<PathBuf> {
    let k = dir.join(KERNEL_DIR);
    if k.join("metadata").is_file() {
        return Some(k);
    }
    (dir.file_name().is_some_and(|n| n == KERNEL_DIR) && dir.join("metadata").is_file())
        .then(|| dir.to_path_buf())
}

fn tsdl_value<'a>(block: &'a str, key: &str) -> Option<&'a str> {
    block.lines().find_map(|l| {
        let l = l.trim();
        let rest = l.strip_prefix(key)?.trim_start().strip_prefix('=')?;
        Some(rest.trim().trim_end_matches(';').trim().trim_matches('"'))
    })
}

/// What [`read_meta`] returns: the clock, the ftrace clock's name, and the event ids of the
/// metadata paired with the indexes of their [`CLASSES`].
pub type Meta = (KernelClock, String, Vec<(u16, u16)>);

/// Reads the metadata of kernel trace `dir`.
pub fn read_meta(dir: &Path) -> Result<Meta, ReadError> {
    let path = dir.join("metadata");
    let text = std::fs::read_to_string(&path).map_err(|e| err(&path, e.to_string()))?;
    if !text.contains(&format!("producer = \"{PRODUCER}\";")) {
        return Err(err(&path, "not a kernel trace written by hushtrace"));
    }
    let clock_block = text
        .split("clock {")
        .nth(1)
        .and_then(|r| r.split("};").next())
        .ok_or_else(|| err(&path, "no clock block"))?;
    let num = |k: &str| -> Result<i64, ReadError> {
        tsdl_value(clock_block, k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| err(&path, format!("clock block: bad or missing `{k}`")))
    };
    let clock = KernelClock {
        name: tsdl_value(clock_block, "name").unwrap_or("").to_string(),
        uuid: tsdl_value(clock_block, "uuid")
            .and_then(parse_uuid)
            .ok_or_else(|| err(&path, "clock block: bad uuid"))?,
        desc: ClockDesc {
            freq: u64::try_from(num("freq")?).unwrap_or(0).max(1),
            offset_s: num("offset_s")?,
            offset: u64::try_from(num("offset")?).unwrap_or(0),
            source: tsdl_value(clock_block, "description")
                .unwrap_or("")
                .to_string(),
        },
        note: tsdl_value(&text, "clock_note").unwrap_or("").to_string(),
    };
    let trace_clock = tsdl_value(&text, "trace_clock").unwrap_or("").to_string();
    // Map the metadata's event ids to our classes by name.
    let mut ids = Vec::new();
    for block in text.split("event {").skip(1) {
        let name = tsdl_value(block, "name").unwrap_or("");
        let id: u16 = tsdl_value(block, "id")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| err(&path, format!("event {name:?}: bad id")))?;
        let class = crate::schema::id_of(name)
            .ok_or_else(|| err(&path, format!("unknown kernel event {name:?}")))?;
        ids.push((id, class));
    }
    Ok((clock, trace_clock, ids))
}

impl KernelTrace {
    /// Reads the kernel trace in `dir` (a `kernel/` directory).
    pub fn open(dir: &Path) -> Result<KernelTrace, ReadError> {
        let (clock, trace_clock, ids) = read_meta(dir)?;
        let mut streams = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| err(dir, e.to_string()))? {
            let e = e.map_err(|e| err(dir, e.to_string()))?;
            if e.file_name().to_string_lossy().starts_with(STREAM_PREFIX) {
                let ft = e.file_type().map_err(|x| err(&e.path(), x.to_string()))?;
                if !ft.is_file() {
                    return Err(err(&e.path(), "not a regular file"));
                }
                streams.push(e.path());
            }
        }
        streams.sort();
        let mut events = Vec::new();
        let mut discarded = 0;
        let mut cpus = Vec::new();
        let mut strings = Interner::default();
        for p in &streams {
            let (cpu, d) = read_stream(p, &ids, &mut strings, &mut events)?;
            discarded += d;
            if let Some(c) = cpu {
                if !cpus.contains(&c) {
                    cpus.push(c);
                }
            }
        }
        cpus.sort_unstable();
        // Stable: events of one stream keep their order at equal times.
        events.sort_by_key(|e| e.ts);
        Ok(KernelTrace {
            dir: dir.to_path_buf(),
            clock,
            trace_clock,
            events,
            discarded,
            cpus,
        })
    }

    /// Nanoseconds since the Unix epoch of timestamp `ts`.
    pub fn epoch_ns(&self, ts: u64) -> i128 {
        self.clock.desc.to_epoch_ns(ts)
    }
}

/// One shared copy of each distinct text (task names repeat in every event).
#[derive(Default)]
struct Interner(std::collections::HashMap<Vec<u8>, Arc<str>>);

impl Interner {
    fn intern(&mut self, b: &[u8]) -> Arc<str> {
        if let Some(s) = self.0.get(b) {
            return s.clone();
        }
        let s: Arc<str> = Arc::from(String::from_utf8_lossy(b).as_ref());
        self.0.insert(b.to_vec(), s.clone());
        s
    }
}

fn rd_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads one stream file's events into `out`; returns its CPU and its lost-event count.
fn read_stream(
    path: &Path,
    ids: &[(u16, u16)],
    strings: &mut Interner,
    out: &mut Vec<KEvent>,
) -> Result<(Option<u32>, u64), ReadError> {
    let data = std::fs::read(path).map_err(|e| err(path, e.to_string()))?;
    let mut pos = 0usize;
    let mut cpu_seen = None;
    let mut discarded = 0;
    while pos < data.len() {
        let h = data
            .get(pos..pos + PACKET_HEADER_LEN)
            .ok_or_else(|| err(path, format!("byte offset {pos}: truncated packet header")))?;
        if u32::from_le_bytes(h[0..4].try_into().expect("4")) != MAGIC {
            return Err(err(path, format!("byte offset {pos}: bad packet magic")));
        }
        let content = (rd_u64(h, 48) / 8) as usize;
        let size = (rd_u64(h, 56) / 8) as usize;
        discarded = rd_u64(h, 72);
        let cpu = u32::from_le_bytes(h[80..84].try_into().expect("4"));
        cpu_seen = Some(cpu);
        if content < PACKET_HEADER_LEN
            || size < content
            || pos.checked_add(size).is_none_or(|end| end > data.len())
        {
            return Err(err(
                path,
                format!("byte offset {pos}: packet size {size} / content {content} out of bounds"),
            ));
        }
        let end = pos + content;
        let mut p = pos + PACKET_HEADER_LEN;
        while p < end {
            let b = &data[p..end];
            if b.len() < EVENT_HEADER_LEN {
                return Err(err(
                    path,
                    format!("byte offset {p}: truncated event header"),
                ));
            }
            let id = u16::from_le_bytes([b[0], b[1]]);
            let ts = rd_u64(b, 2);
            let class = ids
                .iter()
                .find(|(i, _)| *i == id)
                .map(|(_, c)| *c)
                .ok_or_else(|| err(path, format!("byte offset {p}: unknown event id {id}")))?;
            let mut q = EVENT_HEADER_LEN;
            let mut ev = KEvent {
                ts,
                cpu,
                class,
                ints: [0; MAX_VALUES],
                texts: Default::default(),
            };
            let mut t = 0;
            for (i, (_, _, ty)) in CLASSES[usize::from(class)].fields.iter().enumerate() {
                let short = || err(path, format!("byte offset {}: truncated event", p + q));
                let int = |n: usize| b.get(q..q + n).ok_or_else(short);
                let v = match ty {
                    Ty::I32 => i32::from_le_bytes(int(4)?.try_into().expect("4")) as i64,
                    Ty::U32 => u32::from_le_bytes(int(4)?.try_into().expect("4")) as i64,
                    Ty::I64 => i64::from_le_bytes(int(8)?.try_into().expect("8")),
                    Ty::Str => {
                        let rest = b.get(q..).ok_or_else(short)?;
                        let n = rest.iter().position(|&c| c == 0).ok_or_else(short)?;
                        if t < MAX_TEXT {
                            ev.texts[t] = Some(strings.intern(&rest[..n]));
                        }
                        t += 1;
                        q += n + 1;
                        continue;
                    }
                };
                q += if matches!(ty, Ty::I64) { 8 } else { 4 };
                if i < MAX_VALUES {
                    ev.ints[i] = v;
                }
            }
            out.push(ev);
            p += q;
        }
        pos += size;
    }
    Ok((cpu_seen, discarded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::id_of;

    fn meta() -> KernelMeta {
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
        }
    }

    #[test]
    fn write_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let m = meta();
        std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
        let mut w = StreamWriter::create(&dir.path().join("channel0_1"), m.uuid, 1, 1).unwrap();
        let sw = id_of("sched_switch").unwrap();
        w.event(
            sw,
            100,
            &[
                Out::Text(b"a"),
                Out::Int(10),
                Out::Int(120),
                Out::Int(1),
                Out::Text(b"b\xff"),
                Out::Int(11),
                Out::Int(-51),
            ],
        )
        .unwrap();
        w.lost(3);
        w.event(id_of("irq_softirq_entry").unwrap(), 90, &[Out::Int(1)])
            .unwrap();
        w.flush().unwrap();
        assert_eq!(w.reordered, 1);
        let t = KernelTrace::open(dir.path()).unwrap();
        assert_eq!(t.events.len(), 2);
        assert_eq!(t.discarded, 3);
        assert_eq!(t.cpus, [1]);
        let e = &t.events[0];
        assert_eq!((e.name(), e.ts, e.cpu), ("sched_switch", 100, 1));
        assert_eq!(e.int("next_prio"), -51);
        assert_eq!(e.text("next_comm"), "b\u{fffd}");
        assert_eq!(t.events[1].ts, 100);
        assert_eq!(t.clock.desc.offset_s, 5);
        assert_eq!(t.trace_clock, "x86-tsc");
    }

    #[test]
    fn random_and_truncated_streams_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let m = meta();
        std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
        let path = dir.path().join("channel0_0");
        let mut w = StreamWriter::create(&path, m.uuid, 0, 0).unwrap();
        for i in 0..20 {
            w.event(
                id_of("sched_waking").unwrap(),
                i,
                &[Out::Text(b"x"), Out::Int(1), Out::Int(2), Out::Int(3)],
            )
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
            let _ = KernelTrace::open(dir.path());
        }
    }

    #[test]
    fn foreign_and_broken_traces_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("metadata"), "/* CTF 1.8 */\n").unwrap();
        let e = KernelTrace::open(dir.path()).unwrap_err();
        assert!(e
            .to_string()
            .contains("not a kernel trace written by hushtrace"));
        std::fs::write(dir.path().join("metadata"), to_tsdl(&meta())).unwrap();
        std::fs::write(dir.path().join("channel0_0"), [0u8; 100]).unwrap();
        let e = KernelTrace::open(dir.path()).unwrap_err();
        assert!(e.to_string().contains("bad packet magic"), "{e}");
    }
}
