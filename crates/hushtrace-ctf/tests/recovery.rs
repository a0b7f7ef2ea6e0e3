//! Crash recovery (`ringfile::recover_ring`) of rings whose events have both header forms: the
//! open packet is cut at its last complete event with every timestamp decoded from the
//! packet's begin time, a torn event after it is counted, and the rest of a packet the flush of
//! idle threads shipped in part decodes from the last shipped event's time.

use hushtrace_ctf::layout::*;
use hushtrace_ctf::metadata::TraceDesc;
use hushtrace_ctf::reader::StreamReader;
use hushtrace_ctf::ringfile::*;
use hushtrace_ctf::synth::{packet_header, PacketIdentity, SynthTrace};
use hushtrace_ctf::FieldType;
use std::path::Path;
use std::sync::Arc;

const SUBBUF: usize = 4096;
const M: u64 = 1 << 24;

/// A trace with a one-`u32` class (id 0) and a one-`u64` class with id 255.
fn desc() -> (TraceDesc, u16, u16) {
    let mut t = SynthTrace::new(60, "rec");
    let low = t.instant("r:low", &[("v", FieldType::U32)]);
    while t.desc.events.len() < 255 {
        let k = t.desc.events.len();
        t.instant(&format!("r:pad{k}"), &[]);
    }
    let high = t.instant("r:high", &[("v", FieldType::U64)]);
    (t.desc, low, high)
}

fn ident(desc: &TraceDesc) -> PacketIdentity {
    PacketIdentity {
        uuid: desc.uuid,
        stream_instance_id: 0,
        vpid: 60,
        vtid: 61,
        procname: "rec".into(),
        pthread_id: 1,
    }
}

/// Appends event `(id, ts, v)` after a clock at `prev` (header form as the runtime chooses).
fn push(out: &mut Vec<u8>, high: u16, (id, ts, v): (u16, u64, u64), prev: u64) {
    push_event_header(out, id, ts, prev);
    if id == high {
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.extend_from_slice(&(v as u32).to_le_bytes());
    }
}

/// Events of the open packet: compact, a pause (extended), id 255 (extended), compact again.
fn events(low: u16, high: u16, begin: u64) -> Vec<(u16, u64, u64)> {
    vec![
        (low, begin + 5, 1),
        (low, begin + 9, 2),
        (low, begin + 9 + M + 3, 3),
        (high, begin + 9 + M + 10, 4),
        (low, begin + 2 * M, 5),
        (low, begin + 2 * M + 1, 6),
    ]
}

/// Writes a ring file: packet 0 committed (one event) in slot 0, packet 1 open in slot 1 with
/// `evs` complete (`done` after them) and then the start of a torn event; `flush` (packets the
/// flush added, offset and time of what it shipped of packet 1) goes into the header.
fn ring_file(
    path: &Path,
    desc: &TraceDesc,
    evs: &[(u16, u64, u64)],
    high: u16,
    flush: Option<(u64, usize, u64)>,
) -> Vec<u8> {
    let id = ident(desc);
    let mut hdr = vec![0u8; HEADER_LEN];
    hdr[..8].copy_from_slice(&RING_MAGIC);
    hdr[8..12].copy_from_slice(&1u32.to_le_bytes());
    hdr[16..24].copy_from_slice(&(SUBBUF as u64).to_le_bytes());
    hdr[24..32].copy_from_slice(&2u64.to_le_bytes());
    let mut put = |off: usize, v: u64| hdr[off..off + 8].copy_from_slice(&v.to_le_bytes());
    // Slot 0: packet 0, committed.
    let mut p0 = Vec::new();
    push(&mut p0, high, (0, 100, 0), 100);
    let mut slot0 =
        packet_header(&id, 100, 100, (PACKET_HEADER_LEN + p0.len()) as u64, 0, 0).to_vec();
    slot0.extend_from_slice(&p0);
    slot0.resize(SUBBUF, 0);
    // Slot 1: packet 1, open (content size 0), complete events, then a torn one.
    let begin = evs[0].1 - 5;
    let mut slot1 = packet_header(&id, begin, 0, 0, 1, 0).to_vec();
    slot1[OFF_CONTENT_SIZE..OFF_CONTENT_SIZE + 16].fill(0);
    let mut clock = begin;
    for &e in evs {
        push(&mut slot1, high, e, clock);
        clock = e.1;
    }
    let done = slot1.len();
    push(&mut slot1, high, (high, clock + 2 * M, 99), clock); // extended, newer
    slot1.truncate(slot1.len() - 3); // its field is not complete
    slot1.resize(SUBBUF, 0);
    put(OFF_DONE, done as u64);
    put(OFF_OPEN_SEQ, 1);
    put(OFF_DISCARDED, 2);
    if let Some((extra, off, ts)) = flush {
        put(OFF_FLUSH_EXTRA, extra);
        put(OFF_FLUSH_SEQ, 2);
        put(OFF_FLUSH_OFF, off as u64);
        put(OFF_FLUSH_TS, ts);
    }
    let mut f = hdr;
    f.extend_from_slice(&slot0);
    f.extend_from_slice(&slot1);
    std::fs::write(path, &f).unwrap();
    slot1
}

/// `(id, timestamp, value)` of every event of a stream file, and the stream's discarded count.
fn read(desc: &TraceDesc, stream: &Path) -> (Vec<(u16, u64, u64)>, u64) {
    let mut r = StreamReader::open(Arc::new(desc.clone()), stream).unwrap();
    let mut out = Vec::new();
    while r.advance().unwrap() {
        let e = r.current().unwrap();
        let Some(v) = e.field(0).and_then(|v| v.as_u64()) else {
            panic!("{}", e.class.name)
        };
        out.push((e.class.id, e.timestamp, v));
    }
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    (out, r.events_discarded())
}

#[test]
fn the_open_packet_is_cut_at_its_last_complete_event_with_exact_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let (desc, low, high) = desc();
    let evs = events(low, high, 50 * M - 7);
    ring_file(&dir.path().join("ring_0"), &desc, &evs, high, None);
    let stream = dir.path().join("stream_0");
    let r = recover_ring(&dir.path().join("ring_0"), &desc, &stream).unwrap();
    assert_eq!((r.packets, r.events, r.torn), (2, 7, 1), "{r:?}");
    let (got, discarded) = read(&desc, &stream);
    let mut want = vec![(0, 100, 0)];
    want.extend_from_slice(&evs);
    assert_eq!(got, want);
    assert_eq!(discarded, 2 + 1, "the torn event is counted as discarded");
}

#[test]
fn the_rest_of_a_packet_the_flush_shipped_in_part_decodes_from_the_last_shipped_event() {
    let dir = tempfile::tempdir().unwrap();
    let (desc, low, high) = desc();
    let evs = events(low, high, 80 * M + 11);
    // The flush shipped the first two events of packet 1 (as packet 1 of the stream, so the
    // open packet's rest is packet 2); the next event is compact relative to the second.
    let shipped = 2;
    let mut first = Vec::new();
    let mut clock = evs[0].1 - 5;
    for &e in &evs[..shipped] {
        push(&mut first, high, e, clock);
        clock = e.1;
    }
    let off = PACKET_HEADER_LEN + first.len();
    let slot1 = ring_file(
        &dir.path().join("ring_0"),
        &desc,
        &evs,
        high,
        Some((1, off, evs[shipped - 1].1)),
    );
    assert_eq!(slot1[PACKET_HEADER_LEN..off], first[..]);
    // The stream file as the consumer left it: packet 0, then the shipped part.
    let id = ident(&desc);
    let mut s = Vec::new();
    let mut p0 = Vec::new();
    push(&mut p0, high, (0, 100, 0), 100);
    s.extend_from_slice(&packet_header(
        &id,
        100,
        100,
        (PACKET_HEADER_LEN + p0.len()) as u64,
        0,
        0,
    ));
    s.extend_from_slice(&p0);
    s.extend_from_slice(&packet_header(&id, evs[0].1 - 5, clock, off as u64, 1, 0));
    s.extend_from_slice(&first);
    let stream = dir.path().join("stream_0");
    std::fs::write(&stream, &s).unwrap();
    let mut ring = std::fs::read(dir.path().join("ring_0")).unwrap();
    ring[OFF_CONSUMED..OFF_CONSUMED + 8].copy_from_slice(&1u64.to_le_bytes());
    std::fs::write(dir.path().join("ring_0"), &ring).unwrap();

    let r = recover_ring(&dir.path().join("ring_0"), &desc, &stream).unwrap();
    assert_eq!(
        (r.events, r.torn),
        ((evs.len() - shipped) as u64, 1),
        "{r:?}"
    );
    let (got, _) = read(&desc, &stream);
    let mut want = vec![(0, 100, 0)];
    want.extend_from_slice(&evs);
    assert_eq!(got, want, "every event once, with its exact timestamp");
}
