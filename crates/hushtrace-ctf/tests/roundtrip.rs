//! Synthetic traces read back by the reader: every event, field and context value survives.

mod common;

use hushtrace_ctf::reader::{ErrorKind, Session, Value};
use hushtrace_ctf::synth::{SynthEvent, SynthTrace, EPOCH_S};
use hushtrace_ctf::FieldType;

#[test]
fn every_event_and_field_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let t = common::rich_trace(1000, 50);
    t.write_session(dir.path()).unwrap();

    let session = Session::open(dir.path()).unwrap();
    assert_eq!(session.traces.len(), 1);
    assert_eq!(*session.traces[0].desc, t.desc);
    let stats = session.traces[0].stats.unwrap();
    assert_eq!((stats.pid, stats.written, stats.discarded), (1000, 400, 0));

    let mut merged = session.merged().unwrap();
    let mut expected: Vec<(u32, &SynthEvent)> = t
        .threads
        .iter()
        .flat_map(|th| th.events.iter().map(move |e| (th.vtid, e)))
        .collect();
    // The merge orders by time, ties by stream order.
    expected.sort_by_key(|(tid, e)| (e.timestamp, *tid));
    let mut n = 0;
    let mut last_ns = i128::MIN;
    while let Some(ev) = merged.next().unwrap() {
        let (tid, want) = expected[n];
        assert_eq!(ev.event.packet.vtid, tid);
        assert_eq!(ev.event.packet.vpid, 1000);
        assert_eq!(ev.event.packet.procname, format!("worker-{}", tid - 1001));
        assert_eq!(ev.event.timestamp, want.timestamp);
        assert_eq!(
            ev.time_ns,
            EPOCH_S as i128 * 1_000_000_000 + want.timestamp as i128
        );
        assert!(ev.time_ns >= last_ns);
        last_ns = ev.time_ns;
        assert_eq!(ev.event.class.id, want.id);
        let got: Vec<Value> = ev.event.fields().map(|(_, v)| v).collect();
        // The reader's values are the synthetic ones, same variants (same widths), borrowed.
        assert_eq!(got, want.values);
        n += 1;
    }
    assert_eq!(n, expected.len());
    assert!(merged.take_warnings().is_empty());
    assert!(
        merged.streams().iter().all(|(_, s)| s.packets() > 1),
        "test needs several packets"
    );
}

#[test]
fn processes_merge_by_time_and_keep_their_pids() {
    let dir = tempfile::tempdir().unwrap();
    for (pid, start) in [(20u32, 5u64), (3, 0)] {
        let mut t = SynthTrace::new(pid, &format!("p{pid}"));
        let id = t.instant("x:tick", &[("pid", FieldType::U32)]);
        let th = t.thread(pid, "main");
        for k in 0..10 {
            th.event(SynthEvent::new(id, start + k * 10).u32(pid));
        }
        t.write_session(dir.path()).unwrap();
    }
    let s = Session::open(dir.path()).unwrap();
    assert_eq!(
        s.traces.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["3", "20"]
    );
    let mut m = s.merged().unwrap();
    let mut seq = Vec::new();
    while let Some(ev) = m.next().unwrap() {
        assert_eq!(ev.event.field(0), Some(Value::U32(ev.event.packet.vpid)));
        seq.push((ev.event.timestamp, ev.event.packet.vpid));
    }
    let mut sorted = seq.clone();
    sorted.sort();
    assert_eq!(seq, sorted);
    assert_eq!(seq.len(), 20);
}

#[test]
fn discarded_and_lost_packets_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(7, "lossy");
    let id = t.instant("x:y", &[]);
    let th = t.thread(8, "t");
    for k in 0..10 {
        th.event(SynthEvent::new(id, k));
    }
    th.discarded = 42;
    th.lost_packets = 3;
    t.write_session(dir.path()).unwrap();
    let s = Session::open(dir.path()).unwrap();
    let mut m = s.merged().unwrap();
    while m.next().unwrap().is_some() {}
    let (_, stream) = &m.streams()[0];
    assert_eq!(stream.events_discarded(), 42);
    assert_eq!(stream.lost_packets(), 3);
}

#[test]
fn truncated_last_packet_reads_whole_events_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(7, "trunc");
    t.packet_bytes = 1 << 20;
    let id = t.instant("x:y", &[("v", FieldType::U64)]);
    let th = t.thread(8, "t");
    for k in 0..10 {
        th.event(SynthEvent::new(id, k).u64(k));
    }
    t.write_session(dir.path()).unwrap();
    let stream = dir.path().join("7/stream_0");
    let len = std::fs::metadata(&stream).unwrap().len();
    // Cut in the middle of the 8th event (events are 12 bytes: compact header and a u64).
    let ev = (hushtrace_ctf::layout::COMPACT_HEADER_LEN + 8) as u64;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&stream)
        .unwrap()
        .set_len(len - ev * 2 - 5)
        .unwrap();
    let s = Session::open(dir.path()).unwrap();
    let mut m = s.merged().unwrap();
    let mut n = 0;
    while m.next().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 7);
    let w = m.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].message.contains("truncated"), "{}", w[0]);
}

#[test]
fn errors_name_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(7, "bad");
    let id = t.instant("x:y", &[("s", FieldType::Str)]);
    t.thread(8, "t").event(SynthEvent::new(id, 1).str("hello"));
    t.write_session(dir.path()).unwrap();
    let stream = dir.path().join("7/stream_0");
    let good = std::fs::read(&stream).unwrap();

    let check = |bytes: &[u8], offset: u64, what: &str| {
        std::fs::write(&stream, bytes).unwrap();
        let s = Session::open(dir.path()).unwrap();
        let mut m = s.merged().unwrap();
        let err = loop {
            match m.next() {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("no error for {what}"),
                Err(e) => break e,
            }
        };
        let msg = err.to_string();
        assert!(msg.contains(&stream.display().to_string()), "{msg}");
        assert!(msg.contains(&format!("byte offset {offset}")), "{msg}");
        assert!(msg.contains(what), "{msg}");
        assert!(matches!(err.kind, ErrorKind::Corrupt(_)));
    };
    let mut b = good.clone();
    b[0] ^= 1;
    check(&b, 0, "magic");
    let mut b = good.clone();
    b[112] = 9;
    check(&b, 112, "unknown event id 9");
    let mut b = good.clone();
    let last = b.len() - 1;
    b[last] = b'!';
    check(&b, 116, "without NUL");
    let mut b = good.clone();
    b[117] = 0xff;
    check(&b, 117, "UTF-8");
    let mut b = good.clone();
    b[48..56].copy_from_slice(&(1u64 << 62).to_le_bytes());
    b[56..64].copy_from_slice(&(1u64 << 62).to_le_bytes());
    check(&b, 56, "exceeds");
}

#[test]
fn foreign_metadata_is_rejected_with_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let t = common::rich_trace(5, 1);
    t.write_session(dir.path()).unwrap();
    let meta = dir.path().join("5/metadata");
    let text = std::fs::read_to_string(&meta).unwrap();
    let edited = text.replace("\tminor = 8;", "\tminor = 9;");
    std::fs::write(&meta, edited).unwrap();
    let err = Session::open(dir.path()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("metadata:"), "{msg}");
    assert!(msg.contains("not a hushtrace trace"), "{msg}");
    assert!(msg.contains("minor = 9"), "{msg}");

    std::fs::write(&meta, b"/* CTF 1.8 */\n\xff\n").unwrap();
    let err = Session::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("UTF-8"), "{err}");
}

#[test]
fn missing_directory_is_an_io_error_naming_it() {
    let err = Session::open("/nonexistent/hushtrace-dir".as_ref()).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Io(_)));
    assert!(
        err.to_string().starts_with("/nonexistent/hushtrace-dir:"),
        "{err}"
    );
    let empty = tempfile::tempdir().unwrap();
    let err = Session::open(empty.path()).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::NoTraces), "{err}");
}

/// Found by the `stream` fuzz target: huge packet sequence gaps overflowed the lost-packet count.
#[test]
fn huge_sequence_gaps_saturate() {
    use hushtrace_ctf::synth::{packet_header, PacketIdentity};
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(7, "gaps");
    let id = t.instant("x:y", &[]);
    t.thread(8, "t").event(SynthEvent::new(id, 1));
    t.write_session(dir.path()).unwrap();
    let pid = PacketIdentity {
        uuid: t.desc.uuid,
        stream_instance_id: 0,
        vpid: 7,
        vtid: 8,
        procname: "t".into(),
        pthread_id: 0,
    };
    let mut bytes = Vec::new();
    // Sequence numbers going down (a warning) then up again add up past u64::MAX.
    for seq in [0, u64::MAX, 0, u64::MAX] {
        bytes.extend_from_slice(&packet_header(&pid, 1, 1, 116, seq, 0));
        SynthEvent::new(id, 1).encode(1, &mut bytes);
    }
    std::fs::write(dir.path().join("7/stream_0"), bytes).unwrap();
    let s = Session::open(dir.path()).unwrap();
    let mut m = s.merged().unwrap();
    while m.next().unwrap().is_some() {}
    assert_eq!(m.streams()[0].1.lost_packets(), u64::MAX);
}

#[test]
fn a_single_process_directory_opens_too() {
    let dir = tempfile::tempdir().unwrap();
    common::rich_trace(31, 2).write_session(dir.path()).unwrap();
    let s = Session::open(&dir.path().join("31")).unwrap();
    assert_eq!(s.traces.len(), 1);
    assert_eq!(s.traces[0].name, "31");
    assert_eq!(s.traces[0].stats.map(|s| s.written), Some(16));
    assert_eq!(s.traces[0].streams.len(), 2);
}

/// The metadata of process traces is byte for byte what it was before the kernel trace's
/// flavour joined the writer (`tests/data/user_metadata.tsdl` was rendered by the earlier
/// writer): readers of existing traces and babeltrace2 see no change.
#[test]
fn process_trace_metadata_is_unchanged() {
    use hushtrace_ctf::metadata::*;
    use hushtrace_ctf::{FieldType, Kind};
    let t = TraceDesc {
        uuid: [1; 16],
        clock_uuid: [2; 16],
        clock: ClockDesc {
            freq: 2_000_000_000,
            offset_s: 7,
            offset: 9,
            source: "t\"sc".into(),
        },
        vpid: 42,
        procname: "a\\pp".into(),
        hostname: "h".into(),
        events: vec![
            EventClass {
                id: 0,
                name: "bench:tick".into(),
                kind: Kind::Instant,
                fields: Some(vec![
                    ("seq".into(), FieldType::U64),
                    ("s".into(), FieldType::Str),
                ]),
            },
            EventClass {
                id: 3,
                name: "b:t".into(),
                kind: Kind::SpanBegin,
                fields: None,
            },
            EventClass {
                id: 4,
                name: "b:u".into(),
                kind: Kind::Instant,
                fields: Some(vec![]),
            },
        ],
    };
    assert_eq!(to_tsdl(&t), include_str!("data/user_metadata.tsdl"));
}
