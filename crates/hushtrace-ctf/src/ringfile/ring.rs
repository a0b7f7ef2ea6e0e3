//! One ring recovered: its complete packets, and the open packet's complete events, appended to
//! the thread's stream file.

use super::*;

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

pub(super) fn recover_ring_file(
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
