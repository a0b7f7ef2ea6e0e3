//! The reader under hostile input: packet headers claiming huge sizes, events larger than the
//! reader's window, files that are not regular files, lost packets, crashed processes.

use hushtrace_ctf::layout::{
    COMPACT_HEADER_LEN, OFF_CONTENT_SIZE, OFF_PACKET_SIZE, PACKET_HEADER_LEN,
};
use hushtrace_ctf::reader::{
    ErrorKind, Session, Value, MAX_EVENT_BYTES, MAX_PACKET_BYTES, WINDOW_BYTES,
};
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_ctf::{FieldType, Kind};
use std::path::Path;

/// Rewrites the first packet of `stream` to claim `bytes` bytes of content and makes the file
/// that long: a sparse file, a few KB on disk, whose tail reads as zeros.
fn claim_huge_first_packet(stream: &Path, bytes: u64) {
    let mut b = std::fs::read(stream).unwrap();
    b[OFF_CONTENT_SIZE..OFF_CONTENT_SIZE + 8].copy_from_slice(&(bytes * 8).to_le_bytes());
    b[OFF_PACKET_SIZE..OFF_PACKET_SIZE + 8].copy_from_slice(&(bytes * 8).to_le_bytes());
    std::fs::write(stream, &b).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(stream)
        .unwrap()
        .set_len(bytes)
        .unwrap();
}

/// Issue 9.6: a sparse stream whose packet header claims 1 GiB. The reader used to allocate
/// the whole claimed packet (one per stream: `report` of a 24 KB trace was killed at 2 GB);
/// now it holds a window and reports the zeros after the real events as corrupt, at their
/// offset.
#[test]
fn a_sparse_gigabyte_packet_costs_one_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(9, "sparse");
    t.packet_bytes = 1 << 20;
    // Class 0 has no field types: the zeros of the hole decode as its id and are rejected.
    t.class("never:hit", Kind::Instant, None);
    let tick = t.instant("x:tick", &[("n", FieldType::U64)]);
    for tid in [10, 11] {
        let th = t.thread(tid, "t");
        for k in 0..100 {
            th.event(SynthEvent::new(tick, k).u64(k));
        }
    }
    t.write_session(dir.path()).unwrap();
    let real_end = (PACKET_HEADER_LEN + 100 * (COMPACT_HEADER_LEN + 8)) as u64;
    for i in 0..2 {
        claim_huge_first_packet(&dir.path().join(format!("9/stream_{i}")), MAX_PACKET_BYTES);
    }

    let s = Session::open(dir.path()).unwrap();
    let mut m = s.merged().unwrap();
    let mut n = 0;
    let err = loop {
        match m.next() {
            Ok(Some(ev)) => {
                assert_eq!(ev.event.field(0), Some(Value::U64(ev.event.timestamp)));
                n += 1;
            }
            Ok(None) => panic!("the hole must be reported"),
            Err(e) => break e,
        }
        for (_, r) in m.streams() {
            assert!(
                r.buffer_capacity() <= WINDOW_BYTES,
                "{}",
                r.buffer_capacity()
            );
        }
    };
    // Both streams' events come out in time order until the first stream reaches its hole.
    assert!(n >= 100, "{n}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("stream_0: byte offset {real_end}:")) && msg.contains("id 0"),
        "{msg}"
    );
}

/// Events straddle window boundaries everywhere in a packet much larger than the window, and
/// an event larger than the window grows it; both decode exactly.
#[test]
fn packets_larger_than_the_window_read_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(20, "big");
    t.packet_bytes = 3 * WINDOW_BYTES + 123;
    let fields: Vec<(String, FieldType)> = (0..300)
        .map(|i| (format!("s{i}"), FieldType::Str))
        .collect();
    let fields: Vec<(&str, FieldType)> = fields.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let wide = t.instant("x:wide", &fields);
    let var = t.instant("x:var", &[("n", FieldType::U32), ("s", FieldType::Str)]);
    let th = t.thread(21, "t");
    let mut expect = Vec::new();
    for k in 0..3000u32 {
        let s = "é".repeat((k as usize * 7) % 200);
        th.event(SynthEvent::new(var, k as u64).u32(k).str(&s));
        expect.push((k, s));
        if k % 1000 == 999 {
            // 300 strings of 250 bytes: larger than the window.
            let mut e = SynthEvent::new(wide, k as u64);
            for i in 0..300 {
                e = e.str(&format!("{i:03}{}", "w".repeat(247)));
            }
            th.event(e);
        }
    }
    t.write_session(dir.path()).unwrap();
    let s = Session::open(dir.path()).unwrap();
    let mut m = s.merged().unwrap();
    let (mut i, mut wides) = (0, 0);
    while let Some(ev) = m.next().unwrap() {
        if ev.event.class.name == "x:wide" {
            let vals: Vec<Value> = ev.event.fields().map(|(_, v)| v).collect();
            assert_eq!(vals.len(), 300);
            for (j, v) in vals.iter().enumerate() {
                let Value::Str(s) = v else { panic!() };
                assert!(s.starts_with(&format!("{j:03}")) && s.len() == 250);
            }
            wides += 1;
            continue;
        }
        let (k, want) = &expect[i];
        assert_eq!(ev.event.field(0), Some(Value::U32(*k)));
        assert_eq!(ev.event.field(1), Some(Value::Str(want)));
        i += 1;
    }
    assert_eq!((i, wides), (3000, 3));
    assert!(m.take_warnings().is_empty());
    let r = &m.streams()[0].1;
    assert!(r.packets() > 3, "test needs several large packets");
    assert!(r.buffer_capacity() <= MAX_EVENT_BYTES);
}

#[test]
fn an_event_larger_than_the_limit_is_an_error_naming_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(30, "huge");
    t.packet_bytes = 4 << 20;
    let e = t.instant("x:s", &[("s", FieldType::Str)]);
    t.thread(31, "t")
        .event(SynthEvent::new(e, 1).str("small"))
        .event(SynthEvent::new(e, 2).str(&"z".repeat(MAX_EVENT_BYTES + 10)));
    t.write_session(dir.path()).unwrap();
    let s = Session::open(dir.path()).unwrap();
    let mut m = s.merged().unwrap();
    assert!(m.next().unwrap().is_some());
    let err = m.next().unwrap_err();
    let at = PACKET_HEADER_LEN + COMPACT_HEADER_LEN + 6;
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "stream_0: byte offset {at}: corrupt trace: event larger than"
        )),
        "{msg}"
    );
}

/// Issue 9.7: entries named like trace files that are symbolic links are not followed: the
/// error names the link, and the target's bytes are never read (or printed).
#[test]
fn symbolic_links_are_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(40, "links");
    let e = t.instant("x:y", &[]);
    t.thread(41, "t").event(SynthEvent::new(e, 1));
    t.write_session(dir.path()).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "TOP-SECRET-BYTES\n").unwrap();

    let stream3 = dir.path().join("40/stream_3");
    std::os::unix::fs::symlink(&secret, &stream3).unwrap();
    let err = Session::open(dir.path()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("40/stream_3") && msg.contains("symbolic link"),
        "{msg}"
    );
    assert!(!msg.contains("TOP-SECRET"), "{msg}");
    assert!(matches!(err.kind, ErrorKind::Io(_)));
    std::fs::remove_file(&stream3).unwrap();

    let meta = dir.path().join("40/metadata");
    let real = dir.path().join("real-metadata");
    std::fs::rename(&meta, &real).unwrap();
    std::os::unix::fs::symlink(&real, &meta).unwrap();
    let msg = Session::open(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("40/metadata") && msg.contains("symbolic link"),
        "{msg}"
    );
    std::fs::remove_file(&meta).unwrap();
    std::fs::rename(&real, &meta).unwrap();

    // A symlinked statistics file is ignored with a warning, and the process counts as
    // incomplete.
    let stats = dir.path().join("40.stats.json");
    std::fs::rename(&stats, dir.path().join("real-stats")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real-stats"), &stats).unwrap();
    let s = Session::open(dir.path()).unwrap();
    assert!(!s.traces[0].is_complete());
    let w: Vec<String> = s.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        w.iter()
            .any(|w| w.contains("40.stats.json") && w.contains("symbolic link")),
        "{w:?}"
    );
}

/// Issue 9.8: overwrite mode lost the stream's first packets (it starts at `packet_seq_num`
/// 6) and a failed write lost one in the middle: both are counted, per packet and per stream.
#[test]
fn leading_and_middle_sequence_gaps_count_as_lost_packets() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(50, "overwrite");
    t.packet_bytes = PACKET_HEADER_LEN + COMPACT_HEADER_LEN * 4;
    let e = t.instant("x:y", &[]);
    let th = t.thread(51, "t");
    th.first_seq = 6;
    th.lost_packets = 1;
    for k in 0..12 {
        th.event(SynthEvent::new(e, k));
    }
    t.write_session(dir.path()).unwrap();
    let s = Session::open(dir.path()).unwrap();
    let mut m = s.merged().unwrap();
    let mut firsts = Vec::new();
    while let Some(ev) = m.next().unwrap() {
        let p = ev.event.packet;
        if firsts.last().map(|&(o, _, _)| o) != Some(p.offset) {
            firsts.push((p.offset, p.seq_num, p.lost_before));
        }
    }
    let seqs: Vec<(u64, u64)> = firsts.iter().map(|&(_, s, l)| (s, l)).collect();
    assert_eq!(seqs, [(6, 6), (8, 1), (9, 0), (10, 0)]);
    assert_eq!(m.streams()[0].1.lost_packets(), 7);
}

/// Issue 9.12: a process without a statistics file did not stop tracing; the session says so.
#[test]
fn a_process_without_stats_is_reported_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    for (pid, stats) in [(60u32, true), (61, false)] {
        let mut t = SynthTrace::new(pid, "p");
        t.write_stats = stats;
        let e = t.instant("x:y", &[]);
        t.thread(pid, "t").event(SynthEvent::new(e, 1));
        t.write_session(dir.path()).unwrap();
    }
    let s = Session::open(dir.path()).unwrap();
    let complete: Vec<(String, bool)> = s
        .traces
        .iter()
        .map(|t| (t.name.clone(), t.is_complete()))
        .collect();
    assert_eq!(complete, [("60".into(), true), ("61".into(), false)]);
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    let w = s.warnings[0].to_string();
    assert!(
        w.contains("61") && w.contains("incomplete") && w.contains("61.stats.json"),
        "{w}"
    );
}
