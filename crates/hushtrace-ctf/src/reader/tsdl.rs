//! Parsing the TSDL metadata hushtrace writes.
//!
//! Not a general TSDL parser: values are picked out of the fixed line-oriented shape of
//! [`to_tsdl`], and the text is then checked to be *exactly* what [`to_tsdl`] renders for those
//! values. Anything else (another tracer's metadata, a hand-edited file, packetized metadata) is
//! rejected with the first line that differs.
//!
//! One addition to that shape: metadata as `lttng-relayd` stores it, the first piece followed by
//! each update the runtime's relay sink sent, appended as received. An update is a line
//! `/* CTF 1.8 */` followed by event blocks exactly as [`to_tsdl`] renders them; its classes are
//! added to the first piece's (an id declared twice is an error).

use super::{Error, Location};
use crate::metadata::{
    kernel_to_tsdl, parse_uuid, to_tsdl, ClockDesc, EventClass, KernelEnv, TraceDesc,
    KIND_URI_PREFIX,
};
use hushtrace_core::{FieldType, Kind};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Metadata files larger than this are rejected (hushtrace writes a few hundred bytes per
/// event class).
pub const MAX_METADATA_BYTES: u64 = 64 << 20;

/// First line of hushtrace metadata.
const SIGNATURE: &str = "/* CTF 1.8 */";
/// Magic of packetized CTF metadata, which hushtrace never writes.
const PACKETIZED_MAGIC: [u8; 4] = 0x75D1_1D57u32.to_le_bytes();
const UNKNOWN_TYPES: &str = "\tfields := struct { }; /* types unknown: never hit */";

/// Reads and parses the metadata file at `path`.
///
/// ```no_run
/// let desc = hushtrace_ctf::reader::read_metadata("/tmp/trace/1234/metadata".as_ref())?;
/// println!("{} event classes", desc.events.len());
/// # Ok::<(), hushtrace_ctf::reader::Error>(())
/// ```
pub fn read_metadata(path: &Path) -> Result<TraceDesc, Error> {
    let Some(bytes) = crate::file::read_regular(path, MAX_METADATA_BYTES)? else {
        return Err(Error::not_hushtrace(
            path,
            Location::File,
            format!("metadata larger than {MAX_METADATA_BYTES} bytes"),
        ));
    };
    parse_metadata(&bytes, path)
}

/// Parses metadata `bytes` (the content of the file `path`, used in errors).
///
/// ```
/// use hushtrace_ctf::metadata::{to_tsdl, ClockDesc, TraceDesc};
/// use hushtrace_ctf::reader::parse_metadata;
/// let t = TraceDesc {
///     uuid: [1; 16], clock_uuid: [2; 16],
///     clock: ClockDesc { freq: 1_000_000_000, offset_s: 5, offset: 0, source: "tsc".into() },
///     vpid: 42, procname: "app".into(), hostname: "h".into(), events: vec![],
/// };
/// let text = to_tsdl(&t);
/// assert_eq!(parse_metadata(text.as_bytes(), "metadata".as_ref()).unwrap(), t);
/// let err = parse_metadata(b"/* CTF 1.8 */\ntrace { };\n", "m".as_ref()).unwrap_err();
/// assert!(err.to_string().starts_with("m:"), "{err}");
/// ```
pub fn parse_metadata(bytes: &[u8], path: &Path) -> Result<TraceDesc, Error> {
    let bad = |line: usize, what: String| Error::not_hushtrace(path, Location::Line(line), what);
    if bytes.starts_with(&PACKETIZED_MAGIC) {
        return Err(Error::not_hushtrace(
            path,
            Location::Offset(0),
            "packetized metadata (hushtrace writes plain text)",
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Error::not_hushtrace(
            path,
            Location::Offset(e.valid_up_to() as u64),
            "metadata is not valid UTF-8",
        )
    })?;
    if !text.starts_with(SIGNATURE) {
        return Err(bad(1, format!("expected `{SIGNATURE}` on the first line")));
    }

    // lttng-relayd stores metadata as it received it: the first piece, then each update
    // appended, each starting with its own signature line (see the runtime's relay sink).
    let chunks = split_updates(text);
    let (first_line, first) = chunks[0];
    debug_assert_eq!(first_line, 1);
    let (mut desc, _) = extract(first, &|n| n, false).map_err(|(line, what)| bad(line, what))?;
    check_shape(&to_tsdl(&desc), first, 0).map_err(|(line, what)| bad(line, what))?;
    if chunks.len() == 1 {
        return Ok(desc);
    }

    let header = to_tsdl(&TraceDesc {
        events: Vec::new(),
        ..desc.clone()
    });
    let header_lines = header.matches('\n').count();
    let mut ids: HashSet<u16> = desc.events.iter().map(|e| e.id).collect();
    for &(start, chunk) in &chunks[1..] {
        // An update is the signature line and event blocks: parsed and checked as the event
        // blocks of a whole file with this trace's header.
        let body = chunk[SIGNATURE.len()..]
            .strip_prefix('\n')
            .unwrap_or_default();
        let whole = format!("{header}{body}");
        let at = |n: usize| start + n.saturating_sub(header_lines);
        let (update, _) = extract(&whole, &at, false).map_err(|(n, what)| bad(n, what))?;
        let expected = to_tsdl(&update);
        check_shape(&expected[header.len()..], body, start)
            .map_err(|(line, what)| bad(line, what))?;
        for e in update.events {
            if !ids.insert(e.id) {
                return Err(bad(
                    start,
                    format!("metadata update declares event id {} again", e.id),
                ));
            }
            desc.events.push(e);
        }
    }
    desc.events.sort_by_key(|e| e.id);
    Ok(desc)
}

/// Reads and parses the metadata file of a kernel trace (`DIR/kernel/metadata`, see
/// [`kernel_to_tsdl`]): safely opened and bounded as [`read_metadata`].
pub fn read_kernel_metadata(path: &Path) -> Result<(TraceDesc, KernelEnv), Error> {
    let Some(bytes) = crate::file::read_regular(path, MAX_METADATA_BYTES)? else {
        return Err(Error::not_hushtrace(
            path,
            Location::File,
            format!("metadata larger than {MAX_METADATA_BYTES} bytes"),
        ));
    };
    parse_kernel_metadata(&bytes, path)
}

/// Parses the metadata `bytes` of a kernel trace (the content of the file `path`, used in
/// errors): exactly what [`kernel_to_tsdl`] renders, else an error naming the first line that
/// differs.
///
/// ```
/// use hushtrace_ctf::metadata::*;
/// use hushtrace_ctf::reader::{parse_kernel_metadata, parse_metadata};
/// let t = TraceDesc {
///     uuid: [1; 16], clock_uuid: [2; 16],
///     clock: ClockDesc { freq: 1_000_000_000, offset_s: 5, offset: 0, source: "tsc".into() },
///     vpid: 0, procname: String::new(), hostname: "h".into(), events: vec![],
/// };
/// let k = KernelEnv { clock_name: "hushtrace".into(), clock_note: "n".into(),
///     trace_clock: "x86-tsc".into(), kernel_release: "6.1".into(), categories: "sched".into() };
/// let text = kernel_to_tsdl(&t, &k);
/// assert_eq!(parse_kernel_metadata(text.as_bytes(), "m".as_ref()).unwrap(), (t.clone(), k));
/// assert!(parse_metadata(text.as_bytes(), "m".as_ref()).is_err());
/// assert!(parse_kernel_metadata(to_tsdl(&t).as_bytes(), "m".as_ref()).is_err());
/// ```
pub fn parse_kernel_metadata(bytes: &[u8], path: &Path) -> Result<(TraceDesc, KernelEnv), Error> {
    let bad = |line: usize, what: String| Error::not_hushtrace(path, Location::Line(line), what);
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Error::not_hushtrace(
            path,
            Location::Offset(e.valid_up_to() as u64),
            "metadata is not valid UTF-8",
        )
    })?;
    if !text.starts_with(SIGNATURE) {
        return Err(bad(1, format!("expected `{SIGNATURE}` on the first line")));
    }
    let (desc, env) = extract(text, &|n| n, true).map_err(|(line, what)| bad(line, what))?;
    let env = env.ok_or_else(|| bad(1, "no kernel environment".into()))?;
    check_shape(&kernel_to_tsdl(&desc, &env), text, 0).map_err(|(line, what)| bad(line, what))?;
    Ok((desc, env))
}

/// The pieces of `text`, each with the number of its first line: the text up to the second
/// line that is exactly the signature, then each piece from such a line to the next.
fn split_updates(text: &str) -> Vec<(usize, &str)> {
    let mut chunks = Vec::new();
    let (mut start, mut start_line) = (0, 1);
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i > 0 && line.trim_end_matches('\n') == SIGNATURE {
            chunks.push((start_line, &text[start..offset]));
            start = offset;
            start_line = i + 1;
        }
        offset += line.len();
    }
    chunks.push((start_line, &text[start..]));
    chunks
}

/// Compares `got` with what the writer renders (`expected`); on a difference, the first line
/// that differs, numbered from `first_line + 1` (the line before `got`'s first is `first_line`).
fn check_shape(expected: &str, got: &str, first_line: usize) -> Result<(), Failure> {
    if expected == got {
        return Ok(());
    }
    let mut exp_lines = expected.split('\n');
    let mut got_lines = got.split('\n');
    let mut n = first_line;
    loop {
        n += 1;
        match (exp_lines.next(), got_lines.next()) {
            (Some(e), Some(g)) if e == g => continue,
            (Some(e), Some(g)) => {
                return Err((n, format!("expected `{}`, found `{}`", e.trim(), clip(g))))
            }
            (Some(e), None) => {
                return Err((
                    n,
                    format!("unexpected end of file, expected `{}`", e.trim()),
                ))
            }
            (None, Some(g)) => {
                return Err((n, format!("unexpected text after the end: `{}`", clip(g))))
            }
            (None, None) => return Err((n, "does not match the hushtrace shape".into())),
        }
    }
}

/// At most 60 characters of a line, for error messages.
fn clip(s: &str) -> String {
    let t = s.trim();
    match t.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Top,
    Trace,
    Env,
    Clock,
    Stream,
    Event,
    Fields,
}

#[derive(Default)]
struct PartialEvent {
    line: usize,
    kv: HashMap<String, (usize, String)>,
    fields: Option<Vec<(String, FieldType)>>,
}

type Failure = (usize, String);

/// Picks the values out of the text, line by line; `line_of` maps a line number of `text` to the
/// one reported. With `kernel`, the text is a kernel trace's ([`kernel_to_tsdl`]): its
/// environment is returned too, and the process fields of the description are 0 and empty.
fn extract(
    text: &str,
    line_of: &dyn Fn(usize) -> usize,
    kernel: bool,
) -> Result<(TraceDesc, Option<KernelEnv>), Failure> {
    let mut block = Block::Top;
    let mut block_line = 0;
    // Values of the trace, env and clock blocks, keyed by "block.key".
    let mut kv: HashMap<String, (usize, String)> = HashMap::new();
    let mut events: Vec<EventClass> = Vec::new();
    let mut ids = HashSet::new();
    let mut ev = PartialEvent::default();
    let mut last_line = 0;

    for (i, line) in text.split('\n').enumerate() {
        let n = line_of(i + 1);
        last_line = n;
        match block {
            Block::Top => {
                let (b, prefix) = match line {
                    "trace {" => (Block::Trace, "trace"),
                    "env {" => (Block::Env, "env"),
                    "clock {" => (Block::Clock, "clock"),
                    "stream {" => (Block::Stream, "stream"),
                    "event {" => (Block::Event, "event"),
                    _ => continue,
                };
                if prefix != "event" && kv.contains_key(prefix) {
                    return Err((n, format!("second `{prefix}` block")));
                }
                kv.insert(prefix.to_string(), (n, String::new()));
                block = b;
                block_line = n;
                if b == Block::Event {
                    ev = PartialEvent {
                        line: n,
                        ..Default::default()
                    };
                }
            }
            Block::Fields => {
                if line == "\t};" {
                    block = Block::Event;
                } else {
                    let f = parse_field(line).ok_or_else(|| {
                        (
                            n,
                            format!("expected a field declaration, found `{}`", clip(line)),
                        )
                    })?;
                    ev.fields.get_or_insert_with(Vec::new).push(f);
                }
            }
            _ if line == "};" => {
                if block == Block::Event {
                    let e = finish_event(std::mem::take(&mut ev), n)?;
                    if !ids.insert(e.id) {
                        return Err((block_line, format!("duplicate event id {}", e.id)));
                    }
                    events.push(e);
                }
                block = Block::Top;
            }
            Block::Event if line == "\tfields := struct {" => {
                ev.fields = Some(Vec::new());
                block = Block::Fields;
            }
            Block::Event if line == "\tfields := struct { };" => ev.fields = Some(Vec::new()),
            Block::Event if line == UNKNOWN_TYPES => ev.fields = None,
            Block::Event => {
                if let Some((k, v)) = key_value(line) {
                    ev.kv.insert(k.to_string(), (n, v.to_string()));
                }
            }
            Block::Trace | Block::Env | Block::Clock => {
                if let Some((k, v)) = key_value(line) {
                    let prefix = match block {
                        Block::Trace => "trace",
                        Block::Env => "env",
                        _ => "clock",
                    };
                    kv.insert(format!("{prefix}.{k}"), (n, v.to_string()));
                }
            }
            Block::Stream => {}
        }
    }
    if block != Block::Top {
        return Err((
            last_line,
            format!("unterminated block opened on line {block_line}"),
        ));
    }

    let get = |key: &str| -> Result<&(usize, String), Failure> {
        kv.get(key)
            .ok_or_else(|| (last_line, format!("missing `{key}`")))
    };
    let string = |key: &str| -> Result<String, Failure> {
        let (n, v) = get(key)?;
        unquote(v).ok_or_else(|| (*n, format!("`{key}`: expected a string literal")))
    };
    let uuid = |key: &str| -> Result<[u8; 16], Failure> {
        let s = string(key)?;
        parse_uuid(&s).ok_or_else(|| {
            (
                get(key).map(|x| x.0).unwrap_or(0),
                format!("bad uuid {s:?}"),
            )
        })
    };
    fn num<T: std::str::FromStr>(kv: &(usize, String), key: &str) -> Result<T, Failure> {
        kv.1.parse().map_err(|_| {
            (
                kv.0,
                format!("`{key}`: expected a number, found `{}`", clip(&kv.1)),
            )
        })
    }
    let freq: u64 = num(get("clock.freq")?, "freq")?;
    if freq == 0 {
        return Err((get("clock.freq")?.0, "clock frequency 0".into()));
    }
    let (vpid, procname, env) = if kernel {
        let env = KernelEnv {
            clock_name: string("clock.name")?,
            clock_note: string("env.clock_note")?,
            trace_clock: string("env.trace_clock")?,
            kernel_release: string("env.kernel_release")?,
            categories: string("env.categories")?,
        };
        (0, String::new(), Some(env))
    } else {
        (
            num(get("env.vpid")?, "vpid")?,
            string("env.procname")?,
            None,
        )
    };
    let desc = TraceDesc {
        uuid: uuid("trace.uuid")?,
        clock_uuid: uuid("clock.uuid")?,
        clock: ClockDesc {
            freq,
            offset_s: num(get("clock.offset_s")?, "offset_s")?,
            offset: num(get("clock.offset")?, "offset")?,
            source: string("env.clock_source")?,
        },
        vpid,
        procname,
        hostname: string("env.hostname")?,
        events,
    };
    Ok((desc, env))
}

fn finish_event(ev: PartialEvent, end_line: usize) -> Result<EventClass, Failure> {
    let get = |key: &str| -> Result<&(usize, String), Failure> {
        ev.kv.get(key).ok_or_else(|| {
            (
                end_line,
                format!("event on line {}: missing `{key}`", ev.line),
            )
        })
    };
    let (n, name) = get("name")?;
    let name = unquote(name).ok_or_else(|| (*n, "event name: expected a string literal".into()))?;
    let (n, id) = get("id")?;
    let id: u16 = id
        .parse()
        .map_err(|_| (*n, format!("bad event id `{}`", clip(id))))?;
    let (n, uri) = get("model.emf.uri")?;
    let kind = unquote(uri)
        .and_then(|u| u.strip_prefix(KIND_URI_PREFIX).and_then(Kind::parse))
        .ok_or_else(|| (*n, format!("bad event kind `{}`", clip(uri))))?;
    Ok(EventClass {
        id,
        name,
        kind,
        fields: ev.fields,
    })
}

/// `\tkey = value;` → `(key, value)`.
fn key_value(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('\t')?.strip_suffix(';')?;
    let (k, v) = rest.split_once(" = ")?;
    Some((k, v))
}

/// `\t\tuint32_t _name;` → `("name", U32)`.
fn parse_field(line: &str) -> Option<(String, FieldType)> {
    let rest = line.strip_prefix("\t\t")?.strip_suffix(';')?;
    let (alias, name) = rest.split_once(' ')?;
    let name = name.strip_prefix('_')?;
    Some((name.to_string(), FieldType::from_tsdl_alias(alias)?))
}

/// Parses a TSDL string literal as [`crate::metadata::escape`] writes it.
fn unquote(v: &str) -> Option<String> {
    let inner = v.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                c @ ('"' | '\\') => out.push(c),
                _ => return None,
            },
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquote_round_trips_escape() {
        for s in ["", "a\"b", "back\\slash", "tab\there"] {
            let lit = format!("\"{}\"", crate::metadata::escape(s));
            assert_eq!(
                crate::metadata::escape(&unquote(&lit).unwrap()),
                crate::metadata::escape(s)
            );
        }
        assert_eq!(unquote("\"a\"b\""), None);
        assert_eq!(unquote("\"a\\n\""), None);
    }

    fn desc(events: Vec<EventClass>) -> TraceDesc {
        TraceDesc {
            uuid: [1; 16],
            clock_uuid: [2; 16],
            clock: ClockDesc {
                freq: 1_000_000_000,
                offset_s: 5,
                offset: 0,
                source: "tsc".into(),
            },
            vpid: 42,
            procname: "app".into(),
            hostname: "h".into(),
            events,
        }
    }

    fn class(id: u16, name: &str) -> EventClass {
        EventClass {
            id,
            name: name.into(),
            kind: Kind::Instant,
            fields: Some(vec![("v".into(), FieldType::U64)]),
        }
    }

    /// The metadata as lttng-relayd stores it: the header with the classes known at the start,
    /// then each update appended with its own signature line.
    fn relay_text(first: &[EventClass], updates: &[&[EventClass]]) -> String {
        let header = to_tsdl(&desc(vec![]));
        let mut text = to_tsdl(&desc(first.to_vec()));
        for u in updates {
            text.push_str("/* CTF 1.8 */\n");
            text.push_str(&to_tsdl(&desc(u.to_vec()))[header.len()..]);
        }
        text
    }

    #[test]
    fn relay_metadata_updates_are_concatenated() {
        let (a, b, c) = (class(0, "a:x"), class(1, "b:y"), class(2, "c:z"));
        let text = relay_text(
            std::slice::from_ref(&a),
            &[std::slice::from_ref(&c), std::slice::from_ref(&b), &[]],
        );
        let got = parse_metadata(text.as_bytes(), "m".as_ref()).unwrap();
        assert_eq!(got, desc(vec![a.clone(), b.clone(), c.clone()]));
        // A header alone, then everything in updates.
        let text = relay_text(&[], &[&[b.clone(), a.clone()]]);
        let got = parse_metadata(text.as_bytes(), "m".as_ref()).unwrap();
        assert_eq!(got, desc(vec![a.clone(), b.clone()]));
        // Ends right after a signature line, without a newline.
        let text = relay_text(std::slice::from_ref(&a), &[]) + "/* CTF 1.8 */";
        let got = parse_metadata(text.as_bytes(), "m".as_ref()).unwrap();
        assert_eq!(got, desc(vec![a.clone()]));
    }

    #[test]
    fn relay_metadata_update_errors_name_the_line() {
        let a = class(0, "a:x");
        let text = relay_text(std::slice::from_ref(&a), &[std::slice::from_ref(&a)]);
        let lines: Vec<&str> = text.lines().collect();
        let update_line = lines.iter().rposition(|l| *l == SIGNATURE).unwrap() + 1;
        let err = parse_metadata(text.as_bytes(), "m".as_ref())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("m:{update_line}:")) && err.contains("event id 0 again"),
            "{err}"
        );
        // Something other than event blocks in an update: the line that differs.
        let text =
            relay_text(std::slice::from_ref(&a), &[]) + "/* CTF 1.8 */\nevent {\n\tname = \"q\";\n";
        let err = parse_metadata(text.as_bytes(), "m".as_ref())
            .unwrap_err()
            .to_string();
        let last = text.split('\n').count();
        assert!(
            err.starts_with(&format!("m:{last}:"))
                && err.contains(&format!("unterminated block opened on line {}", last - 2)),
            "{err}"
        );
        let text = relay_text(&[a], &[]) + "/* CTF 1.8 */\ntrace {\n};\n";
        let err = parse_metadata(text.as_bytes(), "m".as_ref())
            .unwrap_err()
            .to_string();
        assert!(err.contains("trace"), "{err}");
    }
}
