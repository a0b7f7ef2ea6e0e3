//! Ring files: a thread's ring buffer in shared memory that outlives the process, and its
//! recovery after a crash.
//!
//! A traced process keeps each thread's ring in a file-backed shared mapping: the file
//! `ring_<instance>` in its ring directory (see [`RINGS_FILE`]). A process that stops cleanly
//! drains its rings and deletes the files; after a crash (SIGKILL, `abort()`, a fault, `exit`
//! without stop) they stay, and [`recover_ring`] turns one into ordinary CTF packets appended
//! to the process's `stream_<instance>` file: every committed packet the consumer had not
//! written yet, plus the open packet up to its last complete event.
//!
//! # Layout (little-endian)
//!
//! A [`HEADER_LEN`]-byte header (its fixed part, offsets 0 to 44, through the codec
//! [`RingFileHeader`]; the live words through the `OFF_*` offsets below), then `num_subbufs` slots of `subbuf_size` bytes (one packet
//! each, packet `s` in slot `s % num_subbufs`).
//!
//! | offset | field | written by |
//! |---|---|---|
//! | 0 | magic `HTRING01` | creator |
//! | 8 | version (u32, 1), mode (u32: 0 discard, 1 overwrite) | creator |
//! | 16 | subbuf_size, num_subbufs, instance (u64 each) | creator |
//! | 40 | pid (u32) | creator |
//! | 64 | `done`: bytes of the open packet holding complete events (0: none) | producer, per event |
//! | 72 | `open_seq`: sequence number of the open packet | producer, per packet |
//! | 80 | `discarded`, `overwritten` (u64 each): the stream's counts | producer, when they change |
//! | 128 | `consumed`: packets below it are in the stream file | consumer |
//! | 136 | flush state: packets added, the packet shipped in part (seq + 1, offset, last time) | consumer |
//! | 192 | `clean` (u64): 1 once the consumer drained the ring at a clean stop | consumer |

use crate::error::ErrorKind;
use crate::file::{self, Dir};
use crate::layout::*;
use crate::metadata::TraceDesc;
use crate::partial::{rest_of_packet, Renumber, Shipped};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Bytes before the first slot (one page).
pub const HEADER_LEN: usize = 4096;
/// Offset of the producer's `done` word.
pub const OFF_DONE: usize = 64;
// The fixed part ([`RingFileHeader`]) ends before the live words.
const _: () = assert!(RING_FIXED_LEN <= OFF_DONE);
/// Offset of the producer's `open_seq` word.
pub const OFF_OPEN_SEQ: usize = 72;
/// Offset of the stream's cumulative discarded count.
pub const OFF_DISCARDED: usize = 80;
/// Offset of the stream's overwritten-events count.
pub const OFF_OVERWRITTEN: usize = 88;
/// Offset of the consumer's `consumed` word.
pub const OFF_CONSUMED: usize = 128;
/// Offset of the consumer's flush state: packets the flush of idle threads added to the stream
/// (ring sequence numbers are raised by it in the stream file).
pub const OFF_FLUSH_EXTRA: usize = 136;
/// The open packet the flush shipped in part: its ring sequence number plus one (0: none).
pub const OFF_FLUSH_SEQ: usize = 144;
/// How far (bytes from the packet start) that packet was shipped.
pub const OFF_FLUSH_OFF: usize = 152;
/// The last shipped event's timestamp (where the rest begins).
pub const OFF_FLUSH_TS: usize = 160;
/// Offset of the `clean` flag.
pub const OFF_CLEAN: usize = 192;
/// Prefix of ring file names (`ring_<instance>`).
pub const RING_PREFIX: &str = "ring_";
pub use crate::layout::{LEGACY_RINGS_FILE, RINGS_FILE, RING_MAGIC};

/// In a ring directory: the types mirror (see `hushtrace_core::mirror`).
pub const TYPES_FILE: &str = "types";

/// The fixed part of a ring file's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingHeader {
    /// 1 for overwrite mode.
    pub overwrite: bool,
    /// Bytes per slot.
    pub subbuf_size: usize,
    /// Slots.
    pub num_subbufs: usize,
    /// Stream instance id (the `stream_<instance>` file).
    pub instance: u64,
    /// The process that wrote the ring.
    pub pid: u32,
    /// Complete bytes of the open packet.
    pub done: u64,
    /// Sequence number of the open packet.
    pub open_seq: u64,
    /// Events discarded in the stream.
    pub discarded: u64,
    /// Events overwritten in the stream.
    pub overwritten: u64,
    /// Packets already in the stream file.
    pub consumed: u64,
    /// Drained at a clean stop: nothing to recover.
    pub clean: bool,
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    read_u64(b, off).unwrap_or(0)
}

impl RingHeader {
    /// Parses a header page ([`HEADER_LEN`] bytes: the fixed part through [`RingFileHeader`],
    /// then the live words); errors say what is wrong.
    pub fn parse(b: &[u8]) -> Result<RingHeader, String> {
        let fixed = RingFileHeader::decode(b).map_err(|e| e.to_string())?;
        if b.len() < HEADER_LEN {
            return Err(RingFileHeaderError::Short { len: b.len() }.to_string());
        }
        let RingFileHeader {
            overwrite,
            subbuf_size,
            num_subbufs,
            instance,
            pid,
        } = fixed;
        if !(4096..=1 << 30).contains(&subbuf_size) || !(2..=1 << 16).contains(&num_subbufs) {
            return Err(format!(
                "implausible ring geometry: {num_subbufs} slots of {subbuf_size} bytes"
            ));
        }
        Ok(RingHeader {
            overwrite,
            subbuf_size: subbuf_size as usize,
            num_subbufs: num_subbufs as usize,
            instance,
            pid,
            done: u64_at(b, OFF_DONE),
            open_seq: u64_at(b, OFF_OPEN_SEQ),
            discarded: u64_at(b, OFF_DISCARDED),
            overwritten: u64_at(b, OFF_OVERWRITTEN),
            consumed: u64_at(b, OFF_CONSUMED),
            clean: u64_at(b, OFF_CLEAN) == 1,
        })
    }
}

/// The `timestamp_begin` of an encoded packet header.
fn begin_of(header: &[u8; PACKET_HEADER_LEN]) -> u64 {
    PacketHeader::from_bytes(header).timestamp_begin
}

/// What recovering one ring produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Packets appended to the stream file.
    pub packets: u64,
    /// Events in them.
    pub events: u64,
    /// Events cut: the torn last event of the open packet, if one was being written.
    pub torn: u64,
    /// The stream's discarded count (as the ring's header says).
    pub discarded: u64,
    /// Events lost with overwritten packets.
    pub overwritten: u64,
}

/// Recovers one ring file into `stream` (appended), using the process's metadata `desc`.
/// Committed packets not yet in the stream file are copied as they are; the open packet is
/// cut at its last complete event, its header completed (sizes, end time, discarded count).
/// Packets are appended in sequence order; in overwrite mode only the newest contiguous ones
/// exist.
///
/// Both files are opened through the safe-open layer: never through a symbolic link, only
/// regular files (a FIFO or device is an error naming it), the stream created 0600 and
/// refused if it has other hard links. The ring is read slot by slot (one packet in memory at
/// a time), and a header that declares more slots than the file holds is an error.
pub fn recover_ring(ring: &Path, desc: &TraceDesc, stream: &Path) -> Result<Recovered, String> {
    let ring_file = file::open_regular(ring).map_err(|e| e.to_string())?;
    let (parent, name) = split(stream)?;
    let out_dir = Dir::open(parent).map_err(|e| e.to_string())?;
    recover_ring_file(&ring_file, ring, desc, &out_dir, name)
}

/// Appends packets to a stream file at `at`, remembering the last one's header.
struct Appender<'a> {
    file: &'a File,
    path: &'a Path,
    at: u64,
    last: Option<PacketHeader>,
}

impl Appender<'_> {
    fn append(&mut self, p: &[u8]) -> Result<(), String> {
        self.file
            .write_all_at(p, self.at)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.at += p.len() as u64;
        self.last = PacketHeader::decode(p);
        Ok(())
    }
}

/// `path`'s directory and file name.
fn split(path: &Path) -> Result<(&Path, &str), String> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// Reads `len` bytes at `off` of the ring, with a fallible allocation (a clear error, never an
/// abort, whatever size a header claims).
fn read_exact_at(f: &File, path: &Path, off: u64, len: usize) -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        format!(
            "{}: cannot allocate {len} bytes for a packet at byte offset {off}",
            path.display()
        )
    })?;
    v.resize(len, 0);
    f.read_exact_at(&mut v, off)
        .map_err(|e| format!("{}: byte offset {off}: {e}", path.display()))?;
    Ok(v)
}

fn recover_ring_file(
    f: &File,
    ring: &Path,
    desc: &TraceDesc,
    out_dir: &Dir,
    stream_name: &str,
) -> Result<Recovered, String> {
    let err = |e: io::Error| format!("{}: {e}", ring.display());
    let file_len = f.metadata().map_err(err)?.len();
    if file_len < HEADER_LEN as u64 {
        return Err(format!(
            "{}: not a hushtrace ring file ({file_len} bytes, shorter than its header)",
            ring.display()
        ));
    }
    let hdr = read_exact_at(f, ring, 0, HEADER_LEN)?;
    let h = RingHeader::parse(&hdr).map_err(|e| format!("{}: {e}", ring.display()))?;
    let declared = (h.num_subbufs as u64)
        .checked_mul(h.subbuf_size as u64)
        .and_then(|b| b.checked_add(HEADER_LEN as u64));
    if declared.is_none_or(|d| d > file_len) {
        return Err(format!(
            "{}: the ring header declares {} slots of {} bytes, but the file holds only {} \
             bytes: not a complete ring file",
            ring.display(),
            h.num_subbufs,
            h.subbuf_size,
            file_len
        ));
    }
    let slot_off = |i: usize| (HEADER_LEN + i * h.subbuf_size) as u64;
    let n = h.num_subbufs as u64;
    // Pass 1, packet headers only (`None`: no packet magic). Committed packets: a valid
    // header, the sequence number of its slot, sizes set.
    let mut heads: Vec<Option<PacketHeader>> = Vec::new();
    heads
        .try_reserve_exact(h.num_subbufs)
        .map_err(|_| format!("{}: too many slots", ring.display()))?;
    let mut committed: Vec<(u64, usize)> = Vec::new();
    for i in 0..h.num_subbufs {
        let mut ph = [0u8; PACKET_HEADER_LEN];
        f.read_exact_at(&mut ph, slot_off(i)).map_err(err)?;
        let head = PacketHeader::magic_ok(&ph).then(|| PacketHeader::from_bytes(&ph));
        heads.push(head);
        let Some(head) = head else {
            continue;
        };
        let (seq, len) = (head.seq, head.len());
        if seq % n != i as u64 || len < PACKET_HEADER_LEN || len > h.subbuf_size {
            continue;
        }
        if seq >= h.consumed && !(seq == h.open_seq && h.done > 0) {
            committed.push((seq, i));
        }
    }
    committed.sort_unstable();
    // Keep the newest contiguous run (an older packet may have been reused for a newer one).
    if let Some(&(last, _)) = committed.last() {
        let mut start = committed.len() - 1;
        while start > 0 && committed[start - 1].0 + 1 == committed[start].0 {
            start -= 1;
        }
        committed.drain(..start);
        debug_assert_eq!(committed.last().map(|c| c.0), Some(last));
    }
    let stream = out_dir.join(stream_name);
    let serr = |e: io::Error| format!("{}: {e}", stream.display());
    let out = out_dir
        .open_output(stream_name)
        .map_err(|e| e.to_string())?;
    // The stream file may end with a packet cut by the crash, and may already hold packets the
    // consumer wrote just before it could record them as consumed: cut the former, skip the
    // latter.
    let (valid, last_hdr) = stream_tail(&out).map_err(serr)?;
    let last_seq = last_hdr.map(|h| h.seq);
    // The flush of idle threads raised the stream's sequence numbers by `extra` and may have
    // shipped the start of one packet already.
    let extra = u64_at(&hdr, OFF_FLUSH_EXTRA);
    let shipped = match u64_at(&hdr, OFF_FLUSH_SEQ) {
        0 => None,
        s1 => Some(Shipped {
            seq: s1 - 1,
            off: u64_at(&hdr, OFF_FLUSH_OFF) as usize,
            last_ts: u64_at(&hdr, OFF_FLUSH_TS),
        }),
    };
    let renumber = Renumber { extra, shipped };
    committed.retain(|c| last_seq.is_none_or(|l| c.0 + extra > l));
    // Cut on our own descriptor: the file opened is the stream file itself, never a link.
    out.set_len(valid).map_err(serr)?;
    let mut w = Appender {
        file: &out,
        path: &stream,
        at: valid,
        last: last_hdr,
    };
    let mut r = Recovered {
        discarded: h.discarded,
        overwritten: h.overwritten,
        ..Recovered::default()
    };
    let mut write = |bytes: &[u8], r: &mut Recovered| -> Result<(), String> {
        w.append(bytes)?;
        r.packets += 1;
        Ok(())
    };
    for &(_, i) in &committed {
        let len = heads[i].map_or(0, |ph| ph.len());
        let s = read_exact_at(f, ring, slot_off(i), len)?;
        let rest = rest_of_packet(&s, &renumber);
        let mut p = rest.header.to_vec();
        p.extend_from_slice(&s[rest.body]);
        drop(s);
        r.events += desc
            .walk_events(&p[PACKET_HEADER_LEN..], begin_of(&rest.header))
            .events;
        write(&p, &mut r)?;
    }
    // The open packet, up to its last complete event.
    let slot = (h.open_seq % n) as usize;
    let done = h.done as usize;

    if done > PACKET_HEADER_LEN
        && done <= h.subbuf_size
        && heads[slot].is_some_and(|head| head.seq == h.open_seq)
        && committed.last().is_none_or(|c| c.0 < h.open_seq)
        && last_seq.is_none_or(|l| l < h.open_seq + extra)
    {
        // The complete events, and a few bytes after them (a torn event's header).
        let s = read_exact_at(f, ring, slot_off(slot), (done + 16).min(h.subbuf_size))?;
        // What the flush shipped of this packet already is in the stream file: the rest only
        // (the same function as the live consumer's).
        let rest = rest_of_packet(&s[..done], &renumber);
        let from = rest.body.start;
        let mut p = rest.header.to_vec();
        p.extend_from_slice(&s[rest.body]);
        // From the packet's begin time (or the last shipped event's), up to the last complete
        // event of a class the metadata knows: cut there.
        let w = desc.walk_events(&p[PACKET_HEADER_LEN..], begin_of(&rest.header));
        let (off, events) = (PACKET_HEADER_LEN + w.len, w.events);
        let (clock, last_ts) = (w.clock, w.max_ts);
        // A torn event: bytes after the complete ones that start like an event header of a
        // known class: an extended one not older than the last complete event, or a compact
        // one that is not all zero (memory never written). Heuristic: stale bytes of an older
        // packet in the same slot can look like a compact header.
        let at = from + (off - PACKET_HEADER_LEN);
        if at < h.subbuf_size {
            let torn = s.get(at..).and_then(|b| parse_event_header(b, clock));
            if torn.is_some_and(|t| {
                desc.events.iter().any(|c| c.id == t.id)
                    && if t.compact {
                        read_u32(&s, at) != Some(0)
                    } else {
                        t.ts >= last_ts
                    }
            }) {
                r.torn = 1;
            }
        }
        p.truncate(off);
        let disc = h.discarded + r.torn;
        PacketEnd {
            timestamp_end: last_ts,
            len: off as u64,
            events_discarded: disc,
        }
        .write_to(&mut p);
        r.events += events;
        r.discarded = disc;
        if events > 0 || r.torn > 0 {
            write(&p, &mut r)?;
        }
    }
    // Events discarded after the last packet (a full ring while the consumer lagged): one
    // empty packet carries the final count, as a clean stop writes it.
    if let Some(last) = w.last {
        if h.discarded > last.events_discarded {
            let mut ph = last;
            ph.seq += 1;
            ph.timestamp_begin = ph.timestamp_end;
            ph.events_discarded = h.discarded;
            let p = ph.with_len(PACKET_HEADER_LEN).encode();
            w.append(&p)?;
            r.packets += 1;
            r.discarded = h.discarded;
        }
    }
    Ok(r)
}

/// The length of the complete packets at the start of a stream file, and the header of the
/// last one (`None`: no complete packet).
fn stream_tail(f: &File) -> io::Result<(u64, Option<PacketHeader>)> {
    let len = f.metadata()?.len();
    let (mut off, mut last) = (0u64, None);
    let mut hdr = [0u8; PACKET_HEADER_LEN];
    while off + PACKET_HEADER_LEN as u64 <= len {
        f.read_exact_at(&mut hdr, off)?;
        if !PacketHeader::magic_ok(&hdr) {
            break;
        }
        let ph = PacketHeader::from_bytes(&hdr);
        let size = ph.packet_size / 8;
        if size < PACKET_HEADER_LEN as u64 || off + size > len {
            break;
        }
        last = Some(ph);
        off += size;
    }
    Ok((off, last))
}

/// The most bytes a ring directory pointer file may hold.
const MAX_POINTER_BYTES: u64 = 4096;
/// The most bytes of a types mirror read: a record per possible event id.
const MAX_TYPES_BYTES: u64 = (u16::MAX as u64 + 1) * hushtrace_core::mirror::RECORD_LEN as u64;

/// Reads the ring directory pointer file at `path` through the safe-open layer: only a regular
/// file, never through a symbolic link, never blocking, at most 4096 bytes read.
/// `Ok(None)` when it is larger than that; an error names the path and what it is otherwise
/// (a missing file is an [`ErrorKind::Io`](crate::reader::ErrorKind::Io) of kind `NotFound`).
pub fn read_pointer_file(path: &Path) -> Result<Option<Vec<u8>>, crate::reader::Error> {
    file::read_regular(path, MAX_POINTER_BYTES)
}

/// The ring directory of the trace directory `td`: the directory its pointer file names
/// ([`RINGS_FILE`], or [`LEGACY_RINGS_FILE`] of older versions), a legacy `rings`
/// subdirectory, or `None` (no rings). Every entry is opened through the safe-open layer: a
/// pointer that is a FIFO, a device or a link is an error naming it, and the directory it
/// names must belong to the trace directory's owner.
fn ring_dir(td: &Dir) -> Result<Option<Dir>, String> {
    use rustix::fs::FileType;
    let pointer = [RINGS_FILE, LEGACY_RINGS_FILE]
        .into_iter()
        .find_map(|n| td.file_type(n).map(|t| (n, t)));
    let Some((name, ft)) = pointer else {
        return Ok(None);
    };
    if name == LEGACY_RINGS_FILE && ft == FileType::Directory {
        // An older runtime's fallback ring directory, whose pointer file could not be written.
        return td.subdir(name).map(Some).map_err(|e| e.to_string());
    }
    let path = td.join(name);
    let bytes = td
        .read_file(name, MAX_POINTER_BYTES)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{}: larger than {MAX_POINTER_BYTES} bytes", path.display()))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| format!("{}: not a directory name", path.display()))?
        .trim();
    let target = Path::new(text);
    if !target.is_absolute() {
        return Err(format!(
            "{}: {text:?} is not an absolute directory name",
            path.display()
        ));
    }
    let dir = match Dir::open(target) {
        Ok(d) => d,
        // Removed already (a reboot cleared /dev/shm): nothing to recover.
        Err(e) if matches!(&e.kind, ErrorKind::Io(io) if io.kind() == io::ErrorKind::NotFound) => {
            return Ok(None)
        }
        Err(e) => {
            return Err(format!(
                "{} (named by {}): {}",
                text,
                path.display(),
                e.kind
            ))
        }
    };
    if dir.uid() != td.uid() {
        return Err(format!(
            "{}: the ring directory it names, {text}, belongs to uid {}, not to the trace's \
             owner (uid {}): not read",
            path.display(),
            dir.uid(),
            td.uid()
        ));
    }
    Ok(Some(dir))
}

/// The rings of `ring_dir` that still need recovery: `(file name, header)`, by instance.
/// Entries that are not regular files, or not ring files, are skipped.
fn rings_in(ring_dir: &Dir) -> Vec<(String, RingHeader)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(ring_dir.path()) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if !name.starts_with(RING_PREFIX) {
            continue;
        }
        let Ok(f) = ring_dir.open_file(&name) else {
            continue;
        };
        let mut hdr = vec![0u8; HEADER_LEN];
        if f.read_exact_at(&mut hdr, 0).is_err() {
            continue;
        }
        if let Ok(h) = RingHeader::parse(&hdr) {
            if !h.clean {
                out.push((name, h));
            }
        }
    }
    out.sort_by_key(|(_, h)| h.instance);
    out
}

/// The ring files of a process trace directory that still need recovery: `(path, header)`.
/// Nothing if the directory or its ring directory cannot be opened safely.
pub fn unrecovered_rings(trace_dir: &Path) -> Vec<(PathBuf, RingHeader)> {
    let Ok(td) = Dir::open(trace_dir) else {
        return Vec::new();
    };
    let Ok(Some(rd)) = ring_dir(&td) else {
        return Vec::new();
    };
    rings_in(&rd)
        .into_iter()
        .map(|(n, h)| (rd.join(&n), h))
        .collect()
}

/// What `recover_session` did for one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessRecovery {
    /// The process's trace directory.
    pub trace_dir: PathBuf,
    /// The process that wrote the rings.
    pub pid: u32,
    /// Rings recovered (each removed afterwards).
    pub rings: usize,
    /// Totals over its rings.
    pub recovered: Recovered,
    /// Rings left alone because their process still runs.
    pub live: usize,
}

/// Fills in what the metadata lacks from the types mirror in the ring directory: the field
/// types of callsites first hit shortly before the crash, and the event classes of callsites
/// registered at run time since the metadata was last written; rewrites the metadata if any.
fn complete_metadata(td: &Dir, ring_dir: &Dir, desc: &mut TraceDesc) -> Result<(), String> {
    if ring_dir.file_type(TYPES_FILE).is_none() {
        return Ok(());
    }
    let Some(bytes) = ring_dir
        .read_file(TYPES_FILE, MAX_TYPES_BYTES)
        .map_err(|e| e.to_string())?
    else {
        return Err(format!(
            "{}: larger than a types mirror can be ({MAX_TYPES_BYTES} bytes)",
            ring_dir.join(TYPES_FILE).display()
        ));
    };
    let mut changed = false;
    for c in desc.events.iter_mut().filter(|c| c.fields.is_none()) {
        if let Some(f) = hushtrace_core::mirror::read_record(&bytes, c.id) {
            c.fields = Some(f);
            changed = true;
        }
    }
    let records = bytes.len() / hushtrace_core::mirror::RECORD_LEN;
    let known: std::collections::HashSet<u16> = desc.events.iter().map(|c| c.id).collect();
    for id in (0..records.min(u16::MAX as usize + 1)).map(|i| i as u16) {
        if known.contains(&id) {
            continue;
        }
        if let Some(c) = hushtrace_core::mirror::read_class(&bytes, id) {
            desc.events.push(crate::metadata::EventClass {
                id,
                name: c.name,
                kind: c.kind,
                fields: Some(c.fields),
            });
            changed = true;
        }
    }
    desc.events.sort_by_key(|c| c.id);
    if changed {
        td.replace_file(METADATA_FILE, crate::metadata::to_tsdl(desc).as_bytes())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Whether process `pid` may still write to its rings: it exists and is not a zombie (killed
/// but not reaped yet), see [`crate::liveness`]; a reused pid counts as alive, which only
/// delays a recovery.
fn alive(pid: u32) -> bool {
    crate::liveness::may_run(pid)
}

/// Recovers every ring of a session directory (or of one process trace directory) whose
/// process ended without stopping: appends what they hold to the stream files, marks each ring
/// clean and deletes it. Idempotent; rings of processes that still run are left alone.
///
/// Every file is opened through the safe-open layer (no symbolic link followed, regular files
/// only, never blocking, sizes bounded by the files' real sizes): a FIFO, a device or a link
/// where a pointer, a types mirror, a ring or a stream should be is an error naming it.
pub fn recover_session(dir: &Path) -> Result<Vec<ProcessRecovery>, String> {
    let top = Dir::open(dir).map_err(|e| e.to_string())?;
    let mut dirs = Vec::new();
    if top.file_type(METADATA_FILE).is_some() {
        dirs.push(top);
    } else {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut names: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| top.file_type(n) == Some(rustix::fs::FileType::Directory))
            .collect();
        names.sort();
        for n in names {
            if let Ok(td) = top.subdir(&n) {
                if td.file_type(METADATA_FILE).is_some() {
                    dirs.push(td);
                }
            }
        }
    }
    let mut out = Vec::new();
    // One process's hostile or broken files do not keep the others from being recovered: each
    // is tried, and the errors are returned together afterwards.
    let mut errors = Vec::new();
    for td in dirs {
        match recover_process(&td) {
            Ok(Some(pr)) => out.push(pr),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(out)
}

/// Recovers the dead rings of one process trace directory (`None`: it has none).
fn recover_process(td: &Dir) -> Result<Option<ProcessRecovery>, String> {
    let Some(ring_dir) = ring_dir(td)? else {
        return Ok(None);
    };
    let rings = rings_in(&ring_dir);
    if rings.is_empty() {
        return Ok(None);
    }
    let mut pr = ProcessRecovery {
        trace_dir: td.path().to_path_buf(),
        pid: rings[0].1.pid,
        rings: 0,
        recovered: Recovered::default(),
        live: 0,
    };
    let mut desc =
        crate::reader::read_metadata(&td.join(METADATA_FILE)).map_err(|e| e.to_string())?;
    complete_metadata(td, &ring_dir, &mut desc)?;
    // A ring that cannot be recovered is kept (and named in the error); the others are.
    let mut errors = Vec::new();
    for (name, h) in &rings {
        if alive(h.pid) {
            pr.live += 1;
            continue;
        }
        let ring_path = ring_dir.join(name);
        let f = match ring_dir.open_file_rw(name) {
            Ok(f) => f,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        let stream = format!("{STREAM_PREFIX}{}", h.instance);
        let r = match recover_ring_file(&f, &ring_path, &desc, td, &stream) {
            Ok(r) => r,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        pr.rings += 1;
        pr.recovered.packets += r.packets;
        pr.recovered.events += r.events;
        pr.recovered.torn += r.torn;
        pr.recovered.discarded += r.discarded;
        pr.recovered.overwritten += r.overwritten;
        // Done: mark it clean (a second run skips it even if the removal fails), remove it.
        let _ = f.write_all_at(&1u64.to_le_bytes(), OFF_CLEAN as u64);
        drop(f);
        ring_dir.remove_file(name);
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    if pr.live == 0 {
        ring_dir.remove_file(TYPES_FILE);
        let _ = std::fs::remove_dir(ring_dir.path());
        td.remove_file(RINGS_FILE);
        if td.file_type(LEGACY_RINGS_FILE) == Some(rustix::fs::FileType::Directory) {
            td.remove_dir(LEGACY_RINGS_FILE);
        } else {
            td.remove_file(LEGACY_RINGS_FILE);
        }
        // Readers tell a recovered trace (no statistics file, nothing missing) from one whose
        // process still runs or whose rings are gone.
        let _ = td.replace_file(
            crate::reader::RECOVERED_MARKER,
            format!("{}\n", pr.recovered.events).as_bytes(),
        );
    }
    Ok(Some(pr))
}
