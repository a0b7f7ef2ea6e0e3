//! TSDL (CTF 1.8 metadata) for hushtrace traces.
//!
//! The text is generated in a fixed, line-oriented shape so that [`crate::reader`] can parse it
//! back without a general TSDL parser; anything else is rejected as foreign.

use crate::layout::{parse_event_header, PROCNAME_LEN};
use hushtrace_core::{FieldType, Kind};
use std::fmt::Write as _;

/// The clock of a trace: cycles at `freq` Hz since `offset_s` seconds + `offset` cycles after the
/// Unix epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockDesc {
    /// Frequency in Hz.
    pub freq: u64,
    /// Whole seconds of the offset from the Unix epoch to cycle 0.
    pub offset_s: i64,
    /// Sub-second part of that offset, in cycles (`0 .. freq`).
    pub offset: u64,
    /// Where the timestamps come from (`"tsc"`, `"cntvct"` or `"clock_gettime"`).
    pub source: String,
}

impl ClockDesc {
    /// Converts a timestamp in cycles to nanoseconds since the Unix epoch.
    ///
    /// ```
    /// use hushtrace_ctf::metadata::ClockDesc;
    /// let c = ClockDesc { freq: 2_000_000_000, offset_s: 10, offset: 1_000_000_000, source: "tsc".into() };
    /// assert_eq!(c.to_epoch_ns(2), 10_500_000_001);
    /// ```
    pub fn to_epoch_ns(&self, cycles: u64) -> i128 {
        let total = self.offset as i128 + cycles as i128;
        let freq = self.freq.max(1) as i128;
        self.offset_s as i128 * 1_000_000_000
            + total / freq * 1_000_000_000
            + (total % freq) * 1_000_000_000 / freq
    }
}

/// One event class: a callsite.
#[derive(Clone, Debug, PartialEq)]
pub struct EventClass {
    /// Event id (the callsite's index).
    pub id: u16,
    /// `"category:name"`.
    pub name: String,
    /// What the event records.
    pub kind: Kind,
    /// Field names and types; `None` when the types are not known yet (never hit).
    pub fields: Option<Vec<(String, FieldType)>>,
}

/// Everything the metadata says about one process's trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceDesc {
    /// Trace UUID (one per process trace).
    pub uuid: [u8; 16],
    /// UUID of the clock, shared by all processes of a session so readers merge them.
    pub clock_uuid: [u8; 16],
    /// The clock.
    pub clock: ClockDesc,
    /// Process id of the process that wrote the trace.
    pub vpid: u32,
    /// Name of that process.
    pub procname: String,
    /// Host name.
    pub hostname: String,
    /// Event classes.
    pub events: Vec<EventClass>,
}

/// What [`TraceDesc::walk_events`] found at the start of a packet's event bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventWalk {
    /// Bytes of the complete events.
    pub len: usize,
    /// How many there are.
    pub events: u64,
    /// The stream's clock after them: the last one's timestamp (`begin` if none).
    pub clock: u64,
    /// The largest timestamp among them and `begin`.
    pub max_ts: u64,
}

impl TraceDesc {
    /// The class with id `id`: found by position first (the runtime numbers classes by
    /// position), else by search.
    pub fn class(&self, id: u16) -> Option<&EventClass> {
        self.events
            .get(usize::from(id))
            .filter(|e| e.id == id)
            .or_else(|| self.events.iter().find(|e| e.id == id))
    }

    /// The size (header included) and timestamp of the event at `b[0..]` with the stream's
    /// clock at `prev`; `None` unless it is a complete event of a class whose field types are
    /// known.
    pub fn event_len(&self, b: &[u8], prev: u64) -> Option<(usize, u64)> {
        let h = parse_event_header(b, prev)?;
        let mut n = h.len;
        for (_, t) in self.class(h.id)?.fields.as_ref()? {
            match t.fixed_size() {
                Some(s) => n += s,
                None => {
                    debug_assert_eq!(*t, FieldType::Str);
                    let nul = b.get(n..)?.iter().position(|&c| c == 0)?;
                    n += nul + 1;
                }
            }
            if n > b.len() {
                return None;
            }
        }
        Some((n, h.ts))
    }

    /// Walks the complete events at the start of `b` (a packet's event bytes, the stream's
    /// clock at `begin` where they start), up to the first incomplete one or one of a class
    /// whose types are unknown.
    ///
    /// ```
    /// use hushtrace_ctf::metadata::*;
    /// use hushtrace_ctf::{layout, FieldType, Kind};
    /// let t = TraceDesc {
    ///     uuid: [1; 16], clock_uuid: [2; 16],
    ///     clock: ClockDesc { freq: 1_000_000_000, offset_s: 0, offset: 0, source: "tsc".into() },
    ///     vpid: 1, procname: "app".into(), hostname: "h".into(),
    ///     events: vec![EventClass { id: 0, name: "a:b".into(), kind: Kind::Instant,
    ///                               fields: Some(vec![("n".into(), FieldType::U32)]) }],
    /// };
    /// let mut b = Vec::new();
    /// layout::push_event_header(&mut b, 0, 105, 100);
    /// b.extend_from_slice(&7u32.to_le_bytes());
    /// b.extend_from_slice(&[0, 1]); // a torn event
    /// let w = t.walk_events(&b, 100);
    /// assert_eq!((w.len, w.events, w.clock, w.max_ts), (8, 1, 105, 105));
    /// ```
    pub fn walk_events(&self, b: &[u8], begin: u64) -> EventWalk {
        let mut w = EventWalk {
            len: 0,
            events: 0,
            clock: begin,
            max_ts: begin,
        };
        while let Some((n, ts)) = b.get(w.len..).and_then(|r| self.event_len(r, w.clock)) {
            w.len += n;
            w.events += 1;
            w.clock = ts;
            w.max_ts = w.max_ts.max(ts);
        }
        w
    }
}

/// Formats a UUID in the canonical 8-4-4-4-12 form.
pub fn uuid_string(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Parses the canonical UUID form.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let hex: String = s.chars().filter(|&c| c != '-').collect();
    if hex.len() != 32 || s.len() != 36 {
        return None;
    }
    let mut u = [0u8; 16];
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(u)
}

/// Escapes a string for a TSDL string literal.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Prefix of the `model.emf.uri` attribute carrying the event kind.
pub const KIND_URI_PREFIX: &str = "hushtrace:";

/// Appends one byte-aligned TSDL integer `typealias` per `(alias, size in bits, signed)`: the
/// prelude of every metadata hushtrace writes (user space here, the kernel's in
/// `hushtrace-kernel`).
pub fn integer_aliases(s: &mut String, aliases: &[(&str, u32, bool)]) {
    for (alias, size, signed) in aliases {
        let _ = writeln!(
            s,
            "typealias integer {{ size = {size}; align = 8; signed = {signed}; }} := {alias};"
        );
    }
}

/// Renders the TSDL text.
///
/// Field names are written with a leading underscore, which CTF readers (babeltrace2 included)
/// strip: it keeps user names such as `string` or `event` from clashing with TSDL keywords.
///
/// ```
/// use hushtrace_ctf::metadata::*;
/// use hushtrace_ctf::{FieldType, Kind};
/// let t = TraceDesc {
///     uuid: [1; 16], clock_uuid: [2; 16],
///     clock: ClockDesc { freq: 1_000_000_000, offset_s: 0, offset: 0, source: "tsc".into() },
///     vpid: 42, procname: "app".into(), hostname: "h".into(),
///     events: vec![EventClass { id: 0, name: "bench:tick".into(), kind: Kind::Instant,
///                               fields: Some(vec![("seq".into(), FieldType::U64)]) }],
/// };
/// let text = to_tsdl(&t);
/// assert!(text.starts_with("/* CTF 1.8 */"));
/// assert!(text.contains("uint64_t _seq;"));
/// ```
pub fn to_tsdl(t: &TraceDesc) -> String {
    render(t, None)
}

/// Value of the kernel trace's `env.producer`: the kernel recorder of `hushtrace-kernel`.
pub const KERNEL_PRODUCER: &str = "hushtrace-kernel";

/// What the metadata of a kernel trace (`hushtrace record --kernel`, `DIR/kernel/`) says
/// besides its [`TraceDesc`] (of which `vpid` and `procname` are unused: 0 and empty).
///
/// A kernel trace has the same binary layout as a process trace ([`crate::layout`]), so one
/// writer codec and one reader serve both; its metadata differs in the environment (LTTng's
/// kernel-trace environment, so Trace Compass opens it as a kernel trace), the clock's name
/// and description, and the packet context, where the `u32` at
/// [`crate::layout::OFF_VPID`] is LTTng's `cpu_id` and the thread fields are reserved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelEnv {
    /// CTF clock name (`hushtrace` when it is the process traces' clock).
    pub clock_name: String,
    /// One line saying how well the clock lines up with the process traces'.
    pub clock_note: String,
    /// The ftrace clock (`x86-tsc`, `mono`).
    pub trace_clock: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// The categories recorded (`sched,irq`).
    pub categories: String,
}

/// Renders the TSDL text of a kernel trace (see [`KernelEnv`]).
///
/// ```
/// use hushtrace_ctf::metadata::*;
/// let t = TraceDesc {
///     uuid: [1; 16], clock_uuid: [2; 16],
///     clock: ClockDesc { freq: 1_000_000_000, offset_s: 0, offset: 0, source: "tsc".into() },
///     vpid: 0, procname: String::new(), hostname: "h".into(), events: vec![],
/// };
/// let k = KernelEnv { clock_name: "hushtrace".into(), clock_note: "same".into(),
///     trace_clock: "x86-tsc".into(), kernel_release: "6.1".into(), categories: "sched".into() };
/// let text = kernel_to_tsdl(&t, &k);
/// assert!(text.contains("domain = \"kernel\";") && text.contains("uint32_t cpu_id;"));
/// ```
pub fn kernel_to_tsdl(t: &TraceDesc, k: &KernelEnv) -> String {
    render(t, Some(k))
}

/// The TSDL of a process trace (`kernel` `None`) or of a kernel trace.
fn render(t: &TraceDesc, kernel: Option<&KernelEnv>) -> String {
    let mut s = String::with_capacity(4096 + t.events.len() * 160);
    s.push_str("/* CTF 1.8 */\n\n");
    integer_aliases(
        &mut s,
        &[
            ("uint8_t", 8, false),
            ("uint16_t", 16, false),
            ("uint32_t", 32, false),
            ("uint64_t", 64, false),
            ("int8_t", 8, true),
            ("int16_t", 16, true),
            ("int32_t", 32, true),
            ("int64_t", 64, true),
            ("bool_t", 8, false),
        ],
    );
    s.push_str(
        "typealias floating_point { exp_dig = 11; mant_dig = 53; align = 8; } := double;\n\n",
    );
    let _ = writeln!(
        s,
        "trace {{\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"{}\";\n\tbyte_order = le;\n\
         \tpacket.header := struct {{\n\t\tuint32_t magic;\n\t\tuint8_t uuid[16];\n\
         \t\tuint32_t stream_id;\n\t\tuint64_t stream_instance_id;\n\t}};\n}};\n",
        uuid_string(&t.uuid)
    );
    let (clock_name, clock_description) = match kernel {
        None => {
            let _ = writeln!(
                s,
                "env {{\n\tdomain = \"ust\";\n\ttracer_name = \"hushtrace\";\n\ttracer_major = 0;\n\
                 \ttracer_minor = 1;\n\thostname = \"{}\";\n\tvpid = {};\n\tprocname = \"{}\";\n\
                 \tclock_source = \"{}\";\n}};\n",
                escape(&t.hostname),
                t.vpid,
                escape(&t.procname),
                escape(&t.clock.source)
            );
            (
                "hushtrace".to_string(),
                format!(
                    "cycle counter ({}) calibrated against CLOCK_REALTIME",
                    escape(&t.clock.source)
                ),
            )
        }
        Some(k) => {
            // LTTng's kernel trace environment, so Trace Compass opens it as a kernel trace.
            let _ = writeln!(
                s,
                "env {{\n\thostname = \"{}\";\n\tdomain = \"kernel\";\n\tsysname = \"Linux\";\n\
                 \tkernel_release = \"{}\";\n\ttracer_name = \"lttng-modules\";\n\ttracer_major = 2;\n\
                 \ttracer_minor = 13;\n\ttracer_patchlevel = 0;\n\ttrace_buffering_scheme = \"global\";\n\
                 \tproducer = \"{KERNEL_PRODUCER}\";\n\ttrace_clock = \"{}\";\n\tclock_note = \"{}\";\n\
                 \tcategories = \"{}\";\n\tclock_source = \"{}\";\n}};\n",
                escape(&t.hostname),
                escape(&k.kernel_release),
                escape(&k.trace_clock),
                escape(&k.clock_note),
                escape(&k.categories),
                escape(&t.clock.source)
            );
            (
                escape(&k.clock_name),
                format!(
                    "ftrace {} clock, {}",
                    escape(&k.trace_clock),
                    escape(&t.clock.source)
                ),
            )
        }
    };
    let _ = writeln!(
        s,
        "clock {{\n\tname = \"{clock_name}\";\n\tuuid = \"{}\";\n\
         \tdescription = \"{clock_description}\";\n\
         \tfreq = {};\n\tprecision = 1;\n\toffset_s = {};\n\toffset = {};\n\tabsolute = TRUE;\n}};\n",
        uuid_string(&t.clock_uuid),
        t.clock.freq,
        t.clock.offset_s,
        t.clock.offset
    );
    let _ = writeln!(
        s,
        "typealias integer {{ size = 64; align = 8; signed = false; map = clock.{clock_name}.value; }} \
         := uint64_clock_t;\n\
         typealias integer {{ size = 24; align = 8; signed = false; map = clock.{clock_name}.value; }} \
         := uint24_clock_t;\n"
    );
    // The packet context's last 32 bytes: the thread's identity, or a kernel stream's CPU.
    const _: () = assert!(crate::layout::PACKET_HEADER_LEN - crate::layout::OFF_VTID == 4 + 3 * 8);
    let identity = match kernel {
        None => format!(
            "\t\tuint32_t vpid;\n\t\tuint32_t vtid;\n\
             \t\tinteger {{ size = 8; align = 8; signed = false; encoding = UTF8; }} procname[{PROCNAME_LEN}];\n\
             \t\tuint64_t pthread_id;\n"
        ),
        // 4 + 3 * 8 bytes after cpu_id, unused (zero): few fields for readers to print.
        Some(_) => "\t\tuint32_t cpu_id;\n\t\tuint32_t _pad;\n\t\tuint64_t _reserved[3];\n".to_string(),
    };
    // The event header (crate::layout): a compact form (id 0..=254 in one byte, the low 24 bits
    // of the time) or an extended one (tag 255, u16 id, u64 time). babeltrace2 takes the last
    // integer named `id` it reads in the header as the event class id (the u16 of the extended
    // form overrides the tag), and updates the clock from the 24-bit field by the CTF rule.
    let _ = writeln!(
        s,
        "stream {{\n\tid = 0;\n\tevent.header := struct {{\n\
         \t\tenum : uint8_t {{ compact = 0 ... 254, extended = 255 }} id;\n\
         \t\tvariant <id> {{\n\
         \t\t\tstruct {{ uint24_clock_t timestamp; }} compact;\n\
         \t\t\tstruct {{ uint16_t id; uint64_clock_t timestamp; }} extended;\n\
         \t\t}} v;\n\t}};\n\tpacket.context := struct {{\n\
         \t\tuint64_clock_t timestamp_begin;\n\t\tuint64_clock_t timestamp_end;\n\
         \t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n\t\tuint64_t packet_seq_num;\n\
         \t\tuint64_t events_discarded;\n{identity}\t}};\n}};\n"
    );
    for e in &t.events {
        let _ = writeln!(
            s,
            "event {{\n\tname = \"{}\";\n\tid = {};\n\tstream_id = 0;\n\tmodel.emf.uri = \"{}{}\";",
            escape(&e.name),
            e.id,
            KIND_URI_PREFIX,
            e.kind.as_str()
        );
        match &e.fields {
            Some(fields) if !fields.is_empty() => {
                s.push_str("\tfields := struct {\n");
                for (name, ty) in fields {
                    let _ = writeln!(s, "\t\t{} _{};", ty.tsdl_alias(), name);
                }
                s.push_str("\t};\n");
            }
            Some(_) => s.push_str("\tfields := struct { };\n"),
            None => s.push_str("\tfields := struct { }; /* types unknown: never hit */\n"),
        }
        s.push_str("};\n\n");
    }
    s
}
