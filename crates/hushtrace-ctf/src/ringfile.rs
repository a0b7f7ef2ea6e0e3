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
//! A [`HEADER_LEN`]-byte header, then `num_subbufs` slots of `subbuf_size` bytes (one packet
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

use crate::layout::*;
use crate::metadata::TraceDesc;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes before the first slot (one page).
pub const HEADER_LEN: usize = 4096;
/// The ring file magic.
pub const RING_MAGIC: [u8; 8] = *b"HTRING01";
/// Offset of the producer's `done` word.
pub const OFF_DONE: usize = 64;
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
/// In a process's trace directory: a file naming the directory that holds its ring files
/// (a private directory on a tmpfs when there is one, else the trace directory itself).
pub const RINGS_FILE: &str = "rings";

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
    /// Parses a header; errors say what is wrong.
    pub fn parse(b: &[u8]) -> Result<RingHeader, String> {
        if b.len() < HEADER_LEN || b[..8] != RING_MAGIC {
            return Err("not a hushtrace ring file (bad magic)".into());
        }
        let version = read_u32(b, 8).unwrap_or(0);
        if version != 1 {
            return Err(format!("unsupported ring file version {version}"));
        }
        let subbuf_size = u64_at(b, 16);
        let num_subbufs = u64_at(b, 24);
        if !(4096..=1 << 30).contains(&subbuf_size) || !(2..=1 << 16).contains(&num_subbufs) {
            return Err(format!(
                "implausible ring geometry: {num_subbufs} slots of {subbuf_size} bytes"
            ));
        }
        Ok(RingHeader {
            overwrite: read_u32(b, 12) == Some(1),
            subbuf_size: subbuf_size as usize,
            num_subbufs: num_subbufs as usize,
            instance: u64_at(b, 32),
            pid: read_u32(b, 40).unwrap_or(0),
            done: u64_at(b, OFF_DONE),
            open_seq: u64_at(b, OFF_OPEN_SEQ),
            discarded: u64_at(b, OFF_DISCARDED),
            overwritten: u64_at(b, OFF_OVERWRITTEN),
            consumed: u64_at(b, OFF_CONSUMED),
            clean: u64_at(b, OFF_CLEAN) == 1,
        })
    }
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
pub fn recover_ring(ring: &Path, desc: &TraceDesc, stream: &Path) -> Result<Recovered, String> {
    let err = |e: io::Error| format!("{}: {e}", ring.display());
    let mut f = File::open(ring).map_err(err)?;
    let mut hdr = vec![0u8; HEADER_LEN];
    f.read_exact(&mut hdr).map_err(err)?;
    let h = RingHeader::parse(&hdr).map_err(|e| format!("{}: {e}", ring.display()))?;
    let n = h.num_subbufs as u64;
    let mut slots = Vec::with_capacity(h.num_subbufs);
    for i in 0..h.num_subbufs {
        let mut s = vec![0u8; h.subbuf_size];
        f.seek(SeekFrom::Start((HEADER_LEN + i * h.subbuf_size) as u64))
            .map_err(err)?;
        f.read_exact(&mut s).map_err(err)?;
        slots.push(s);
    }
    // Committed packets: a valid header, the sequence number of its slot, sizes set.
    let mut committed: Vec<(u64, usize)> = Vec::new();
    for (i, s) in slots.iter().enumerate() {
        if read_u32(s, OFF_MAGIC) != Some(MAGIC) {
            continue;
        }
        let seq = u64_at(s, OFF_PACKET_SEQ_NUM);
        let len = (u64_at(s, OFF_CONTENT_SIZE) / 8) as usize;
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
    // The stream file may end with a packet cut by the crash, and may already hold packets the
    // consumer wrote just before it could record them as consumed: cut the former, skip the
    // latter.
    let (valid, last_seq) =
        stream_tail(stream).map_err(|e| format!("{}: {e}", stream.display()))?;
    // The flush of idle threads raised the stream's sequence numbers by `extra` and may have
    // shipped the start of one packet already.
    let extra = u64_at(&hdr, OFF_FLUSH_EXTRA);
    let shipped = match u64_at(&hdr, OFF_FLUSH_SEQ) {
        0 => None,
        s1 => Some((
            s1 - 1,
            u64_at(&hdr, OFF_FLUSH_OFF) as usize,
            u64_at(&hdr, OFF_FLUSH_TS),
        )),
    };
    committed.retain(|c| last_seq.is_none_or(|l| c.0 + extra > l));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(stream)
        .map_err(|e| format!("{}: {e}", stream.display()))?;
    out.set_len(valid)
        .and_then(|()| out.seek(SeekFrom::Start(valid)).map(drop))
        .map_err(|e| format!("{}: {e}", stream.display()))?;
    let mut r = Recovered {
        discarded: h.discarded,
        overwritten: h.overwritten,
        ..Recovered::default()
    };
    let mut write = |bytes: &[u8], r: &mut Recovered| -> Result<(), String> {
        out.write_all(bytes)
            .map_err(|e| format!("{}: {e}", stream.display()))?;
        r.packets += 1;
        Ok(())
    };
    for &(seq, i) in &committed {
        let s = &slots[i];
        let len = (u64_at(s, OFF_CONTENT_SIZE) / 8) as usize;
        let p = rest_of(&s[..len], seq, extra, shipped);
        r.events += desc
            .walk_events(&p[PACKET_HEADER_LEN..], u64_at(&p, OFF_TIMESTAMP_BEGIN))
            .events;
        write(&p, &mut r)?;
    }
    // The open packet, up to its last complete event.
    let slot = (h.open_seq % n) as usize;
    let s = &slots[slot];
    let done = h.done as usize;

    if done > PACKET_HEADER_LEN
        && done <= h.subbuf_size
        && read_u32(s, OFF_MAGIC) == Some(MAGIC)
        && u64_at(s, OFF_PACKET_SEQ_NUM) == h.open_seq
        && committed.last().is_none_or(|c| c.0 < h.open_seq)
        && last_seq.is_none_or(|l| l < h.open_seq + extra)
    {
        // What the flush shipped of this packet already is in the stream file: the rest only.
        let from = match shipped {
            Some((sq, off, _)) if sq == h.open_seq && off <= done => off,
            _ => PACKET_HEADER_LEN,
        };
        let mut p = s[..PACKET_HEADER_LEN].to_vec();
        p.extend_from_slice(&s[from..done]);
        if let Some((_, _, ts)) = shipped.filter(|x| x.0 == h.open_seq) {
            p[OFF_TIMESTAMP_BEGIN..OFF_TIMESTAMP_BEGIN + 8].copy_from_slice(&ts.to_le_bytes());
        }
        let seq_out = h.open_seq + extra;
        p[OFF_PACKET_SEQ_NUM..OFF_PACKET_SEQ_NUM + 8].copy_from_slice(&seq_out.to_le_bytes());
        // From the packet's begin time (or the last shipped event's), up to the last complete
        // event of a class the metadata knows: cut there.
        let w = desc.walk_events(&p[PACKET_HEADER_LEN..], u64_at(&p, OFF_TIMESTAMP_BEGIN));
        let (off, events) = (PACKET_HEADER_LEN + w.len, w.events);
        let (clock, last_ts) = (w.clock, w.max_ts);
        // A torn event: bytes after the complete ones that start like an event header of a
        // known class: an extended one not older than the last complete event, or a compact
        // one that is not all zero (memory never written). Heuristic: stale bytes of an older
        // packet in the same slot can look like a compact header.
        let at = from + (off - PACKET_HEADER_LEN);
        if at < h.subbuf_size {
            let torn = s
                .get(at..h.subbuf_size)
                .and_then(|b| parse_event_header(b, clock));
            if torn.is_some_and(|t| {
                desc.events.iter().any(|c| c.id == t.id)
                    && if t.compact {
                        read_u32(s, at) != Some(0)
                    } else {
                        t.ts >= last_ts
                    }
            }) {
                r.torn = 1;
            }
        }
        p.truncate(off);
        let bits = (off as u64) * 8;
        p[OFF_CONTENT_SIZE..OFF_CONTENT_SIZE + 8].copy_from_slice(&bits.to_le_bytes());
        p[OFF_PACKET_SIZE..OFF_PACKET_SIZE + 8].copy_from_slice(&bits.to_le_bytes());
        p[OFF_TIMESTAMP_END..OFF_TIMESTAMP_END + 8].copy_from_slice(&last_ts.to_le_bytes());
        let disc = h.discarded + r.torn;
        p[OFF_EVENTS_DISCARDED..OFF_EVENTS_DISCARDED + 8].copy_from_slice(&disc.to_le_bytes());
        r.events += events;
        r.discarded = disc;
        if events > 0 || r.torn > 0 {
            write(&p, &mut r)?;
        }
    }
    drop(out);
    // Events discarded after the last packet (a full ring while the consumer lagged): one
    // empty packet carries the final count, as a clean stop writes it.
    let (_, tail) = stream_tail_header(stream).map_err(|e| format!("{}: {e}", stream.display()))?;
    if let Some(last) = tail {
        if h.discarded > u64_at(&last, OFF_EVENTS_DISCARDED) {
            let mut p = last;
            let seq = u64_at(&last, OFF_PACKET_SEQ_NUM) + 1;
            let ts = u64_at(&last, OFF_TIMESTAMP_END);
            let bits = (PACKET_HEADER_LEN as u64 * 8).to_le_bytes();
            p[OFF_PACKET_SEQ_NUM..OFF_PACKET_SEQ_NUM + 8].copy_from_slice(&seq.to_le_bytes());
            p[OFF_TIMESTAMP_BEGIN..OFF_TIMESTAMP_BEGIN + 8].copy_from_slice(&ts.to_le_bytes());
            p[OFF_CONTENT_SIZE..OFF_CONTENT_SIZE + 8].copy_from_slice(&bits);
            p[OFF_PACKET_SIZE..OFF_PACKET_SIZE + 8].copy_from_slice(&bits);
            p[OFF_EVENTS_DISCARDED..OFF_EVENTS_DISCARDED + 8]
                .copy_from_slice(&h.discarded.to_le_bytes());
            std::fs::OpenOptions::new()
                .append(true)
                .open(stream)
                .and_then(|mut f| f.write_all(&p))
                .map_err(|e| format!("{}: {e}", stream.display()))?;
            r.packets += 1;
            r.discarded = h.discarded;
        }
    }
    Ok(r)
}

/// A committed packet as the stream file gets it: sequence number raised by the flush's
/// `extra`, and if the flush shipped its start already, only the rest (begin time moved to the
/// last shipped event).
fn rest_of(p: &[u8], seq: u64, extra: u64, shipped: Option<(u64, usize, u64)>) -> Vec<u8> {
    let mut out = p[..PACKET_HEADER_LEN].to_vec();
    match shipped {
        Some((sq, off, ts)) if sq == seq && off <= p.len() => {
            out.extend_from_slice(&p[off..]);
            out[OFF_TIMESTAMP_BEGIN..OFF_TIMESTAMP_BEGIN + 8].copy_from_slice(&ts.to_le_bytes());
        }
        _ => out.extend_from_slice(&p[PACKET_HEADER_LEN..]),
    }
    let bits = (out.len() as u64 * 8).to_le_bytes();
    out[OFF_CONTENT_SIZE..OFF_CONTENT_SIZE + 8].copy_from_slice(&bits);
    out[OFF_PACKET_SIZE..OFF_PACKET_SIZE + 8].copy_from_slice(&bits);
    out[OFF_PACKET_SEQ_NUM..OFF_PACKET_SEQ_NUM + 8].copy_from_slice(&(seq + extra).to_le_bytes());
    out
}

/// The length of the complete packets at the start of a stream file, and the sequence number
/// of the last one (`None`: no complete packet, or no file).
fn stream_tail(stream: &Path) -> io::Result<(u64, Option<u64>)> {
    stream_tail_header(stream).map(|(len, h)| (len, h.map(|h| u64_at(&h, OFF_PACKET_SEQ_NUM))))
}

/// Like [`stream_tail`], with the last complete packet's header.
fn stream_tail_header(stream: &Path) -> io::Result<(u64, Option<[u8; PACKET_HEADER_LEN]>)> {
    let mut f = match File::open(stream) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((0, None)),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let (mut off, mut last) = (0u64, None);
    let mut hdr = [0u8; PACKET_HEADER_LEN];
    while off + PACKET_HEADER_LEN as u64 <= len {
        f.seek(SeekFrom::Start(off))?;
        f.read_exact(&mut hdr)?;
        let size = u64_at(&hdr, OFF_PACKET_SIZE) / 8;
        if read_u32(&hdr, OFF_MAGIC) != Some(MAGIC)
            || size < PACKET_HEADER_LEN as u64
            || off + size > len
        {
            break;
        }
        last = Some(hdr);
        off += size;
    }
    Ok((off, last))
}

/// The ring files of a process trace directory that still need recovery: `(path, header)`.
pub fn unrecovered_rings(trace_dir: &Path) -> Vec<(PathBuf, RingHeader)> {
    let dir = std::fs::read_to_string(trace_dir.join(RINGS_FILE))
        .map(|s| PathBuf::from(s.trim()))
        .unwrap_or_else(|_| trace_dir.to_path_buf());
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(RING_PREFIX) {
            continue;
        }
        let Ok(md) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !md.is_file() {
            continue;
        }
        let mut hdr = vec![0u8; HEADER_LEN];
        let ok = File::open(e.path())
            .and_then(|mut f| f.read_exact(&mut hdr))
            .is_ok();
        if let (true, Ok(h)) = (ok, RingHeader::parse(&hdr)) {
            if !h.clean {
                out.push((e.path(), h));
            }
        }
    }
    out.sort_by_key(|(_, h)| h.instance);
    out
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

/// Fills in the field types the metadata lacks (callsites first hit shortly before the
/// crash) from the types mirror in the ring directory, and rewrites the metadata if any.
fn complete_metadata(td: &Path, desc: &mut TraceDesc) -> Result<(), String> {
    if desc.events.iter().all(|c| c.fields.is_some()) {
        return Ok(());
    }
    let ring_dir = std::fs::read_to_string(td.join(RINGS_FILE))
        .map(|s| PathBuf::from(s.trim()))
        .unwrap_or_else(|_| td.join("rings"));
    let Ok(bytes) = std::fs::read(ring_dir.join(TYPES_FILE)) else {
        return Ok(());
    };
    let mut changed = false;
    for c in desc.events.iter_mut().filter(|c| c.fields.is_none()) {
        if let Some(f) = hushtrace_core::mirror::read_record(&bytes, c.id) {
            c.fields = Some(f);
            changed = true;
        }
    }
    if changed {
        let path = td.join(METADATA_FILE);
        let tmp = td.join(".metadata.recover.tmp");
        std::fs::write(&tmp, crate::metadata::to_tsdl(desc))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Whether process `pid` still exists (`/proc/<pid>`; a reused pid counts as alive, which
/// only delays a recovery).
fn alive(pid: u32) -> bool {
    pid != 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// Recovers every ring of a session directory (or of one process trace directory) whose
/// process ended without stopping: appends what they hold to the stream files, marks each ring
/// clean and deletes it. Idempotent; rings of processes that still run are left alone.
pub fn recover_session(dir: &Path) -> Result<Vec<ProcessRecovery>, String> {
    let mut dirs = Vec::new();
    if dir.join(METADATA_FILE).is_file() {
        dirs.push(dir.to_path_buf());
    } else {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in rd.flatten() {
            let p = e.path();
            let is_dir = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir());
            if is_dir && p.join(METADATA_FILE).is_file() {
                dirs.push(p);
            }
        }
        dirs.sort();
    }
    let mut out = Vec::new();
    for td in dirs {
        let rings = unrecovered_rings(&td);
        if rings.is_empty() {
            continue;
        }
        let mut pr = ProcessRecovery {
            trace_dir: td.clone(),
            pid: rings[0].1.pid,
            rings: 0,
            recovered: Recovered::default(),
            live: 0,
        };
        let mut desc =
            crate::reader::read_metadata(&td.join(METADATA_FILE)).map_err(|e| e.to_string())?;
        complete_metadata(&td, &mut desc)?;
        for (ring, h) in &rings {
            if alive(h.pid) {
                pr.live += 1;
                continue;
            }
            let stream = td.join(format!("{STREAM_PREFIX}{}", h.instance));
            let r = recover_ring(ring, &desc, &stream)?;
            pr.rings += 1;
            pr.recovered.packets += r.packets;
            pr.recovered.events += r.events;
            pr.recovered.torn += r.torn;
            pr.recovered.discarded += r.discarded;
            pr.recovered.overwritten += r.overwritten;
            // Done: mark it clean (a second run skips it even if the removal fails), remove it.
            if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(ring) {
                let _ = f
                    .seek(SeekFrom::Start(OFF_CLEAN as u64))
                    .and_then(|_| f.write_all(&1u64.to_le_bytes()));
            }
            let _ = std::fs::remove_file(ring);
        }
        if pr.live == 0 {
            if let Ok(p) = std::fs::read_to_string(td.join(RINGS_FILE)) {
                let _ = std::fs::remove_file(Path::new(p.trim()).join(TYPES_FILE));
                let _ = std::fs::remove_dir(p.trim());
            }
            let _ = std::fs::remove_file(td.join(RINGS_FILE));
            // Readers tell a recovered trace (no statistics file, nothing missing) from one
            // whose process still runs or whose rings are gone.
            let _ = std::fs::write(
                td.join(crate::reader::RECOVERED_MARKER),
                format!("{}\n", pr.recovered.events),
            );
        }
        out.push(pr);
    }
    Ok(out)
}
