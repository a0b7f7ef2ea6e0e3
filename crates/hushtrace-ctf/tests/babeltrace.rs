//! The real `babeltrace2` reads what `synth` (hence the runtime's layout) writes.
//!
//! Fails when `babeltrace2` is missing (`.ci/run` installs it).

mod common;

use std::process::Command;

fn babeltrace2() -> Command {
    match Command::new("babeltrace2").arg("--version").output() {
        Ok(o) if o.status.success() => Command::new("babeltrace2"),
        r => {
            panic!("babeltrace2 is not runnable ({r:?}); install it (apt-get install babeltrace2)")
        }
    }
}

#[test]
fn babeltrace2_reads_synthetic_traces() {
    let mut cmd = babeltrace2();
    let dir = tempfile::tempdir().unwrap();
    common::rich_trace(4000, 20)
        .write_session(dir.path())
        .unwrap();
    common::rich_trace(4100, 3)
        .write_session(dir.path())
        .unwrap();
    let out = cmd.arg(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "babeltrace2 failed: {stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // 2 threads x 4 events per step, in both processes.
    assert_eq!(lines.len(), 2 * 4 * 20 + 2 * 4 * 3, "{text}");
    let every = lines
        .iter()
        .find(|l| l.contains("types:every") && l.contains("vpid = 4000"))
        .unwrap();
    for needle in [
        "a_u64 = 18446744073709551615",
        "a_i32 = -2147483648",
        "a_f64 = 0.25",
        "a_str = \"x\\\"y\\\\z\"",
        "vtid = 4001",
        "procname = \"worker-0\"",
    ] {
        assert!(every.contains(needle), "{needle} not in {every}");
    }
    assert!(text.contains("label = \"step 0 é\""), "{text}");
}

/// A synthetic trace with both event header forms (`layout`): small steps (compact, the low
/// 24 bits wrapping), steps of exactly 2^24 - 1 (compact) and 2^24 and more (extended), ids past
/// 254 (extended), in small packets (each begins at its first event). babeltrace2 reads every
/// event without a diagnostic, with its exact timestamp in cycles (`--clock-cycles`) and field
/// values, and so does hushtrace's reader.
#[test]
fn babeltrace2_reads_both_event_header_forms_with_exact_timestamps() {
    use hushtrace_ctf::layout::{
        parse_event_header, read_u64, COMPACT_HEADER_LEN, EXTENDED_HEADER_LEN, OFF_CONTENT_SIZE,
        OFF_TIMESTAMP_BEGIN, PACKET_HEADER_LEN,
    };
    use hushtrace_ctf::reader::{Session, Value};
    use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
    use hushtrace_ctf::FieldType;
    const M: u64 = 1 << 24;

    let mut cmd = babeltrace2();
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(4200, "forms");
    t.packet_bytes = 112 + 40 * 12;
    let ints = [("a", FieldType::I32), ("b", FieldType::I32)];
    let ids: Vec<u16> = (0..300)
        .map(|k| t.instant(&format!("c:e{k}"), &ints))
        .collect();
    // (id, timestamp, a, b)
    let mut want = Vec::new();
    let mut ts = 3 * M - 50; // low bits close to the wrap
    let steps = [
        1,
        7,
        0,
        13,
        M - 1,
        2,
        M,
        5,
        M + 1,
        40,
        3 * M + 9,
        1,
        2 * M - 1,
    ];
    for k in 0..2000u64 {
        ts += steps[(k % steps.len() as u64) as usize];
        // Mostly low ids; every 7th event one of 255..300.
        let id = if k % 7 == 6 {
            ids[255 + (k as usize % 45)]
        } else {
            ids[(k * 31 % 255) as usize]
        };
        want.push((id, ts, k as i32 - 1000, i32::MAX - k as i32));
    }
    let th = t.thread(4201, "w");
    for &(id, ts, a, b) in &want {
        th.event(SynthEvent::new(id, ts).i32(a).i32(b));
    }
    t.write_session(dir.path()).unwrap();

    // Both forms are in the file: walk its packets with the shared decoder.
    let stream = std::fs::read(dir.path().join("4200/stream_0")).unwrap();
    let (mut off, mut compact, mut extended) = (0, 0, 0);
    while off < stream.len() {
        let p = &stream[off..];
        let len = (read_u64(p, OFF_CONTENT_SIZE).unwrap() / 8) as usize;
        let mut clock = read_u64(p, OFF_TIMESTAMP_BEGIN).unwrap();
        let mut e = PACKET_HEADER_LEN;
        while e < len {
            let h = parse_event_header(&p[e..len], clock).unwrap();
            let (n, count) = if h.compact {
                (COMPACT_HEADER_LEN, &mut compact)
            } else {
                (EXTENDED_HEADER_LEN, &mut extended)
            };
            assert_eq!(h.len, n);
            *count += 1;
            clock = h.ts;
            e += h.len + 8;
        }
        off += len;
    }
    assert_eq!(compact + extended, want.len());
    assert!(
        compact > 1000 && extended > 400,
        "{compact} compact, {extended} extended"
    );

    let out = cmd.arg("--clock-cycles").arg(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), want.len());
    for (l, &(id, ts, a, b)) in lines.iter().zip(&want) {
        let cycles: u64 = l[1..l.find(']').unwrap()].parse().unwrap();
        assert_eq!(cycles, ts, "{l}");
        assert!(l.contains(&format!(" c:e{id}: ")), "id {id}: {l}");
        assert!(l.ends_with(&format!("{{ a = {a}, b = {b} }}")), "{l}");
    }

    let s = Session::open(dir.path()).unwrap();
    let mut m = s.merged().unwrap();
    let mut got = Vec::new();
    while let Some(ev) = m.next().unwrap() {
        let e = ev.event;
        let (Some(Value::I32(a)), Some(Value::I32(b))) = (e.field(0), e.field(1)) else {
            panic!("fields of {}", e.class.name);
        };
        got.push((e.class.id, e.timestamp, a, b));
    }
    assert_eq!(got, want);
    assert!(m.take_warnings().is_empty());
}
