//! Compact event headers (`hushtrace_ctf::layout`): a hot loop writes 4-byte headers, events
//! after a pause of 2^24 cycles and events of ids 255 and up write 11-byte extended ones, and
//! both read back exactly in the real babeltrace2 (no diagnostic, exact count and field values)
//! and in hushtrace's reader, with the same clock values in cycles. A two-int event takes 12
//! bytes on disk.

mod common;

use hushtrace::{register_callsite, FieldType, Kind, Value};
use hushtrace_ctf::layout::{
    parse_event_header, read_u64, EXTENDED_TAG, OFF_CONTENT_SIZE, OFF_PACKET_SIZE,
    OFF_TIMESTAMP_BEGIN, PACKET_HEADER_LEN,
};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// Sessions are process-global: the tests of this file run one at a time.
static LOCK: Mutex<()> = Mutex::new(());

/// Every event of these tests has two `i32` fields.
const BODY: usize = 8;

/// `(content bytes, packet bytes)` of the packet at the start of `pk`: the events end at the
/// first, the next packet starts at the second (after the zeros of an `O_DIRECT` packet's
/// padding, which this checks).
fn packet_bounds(pk: &[u8]) -> (usize, usize) {
    let content = (read_u64(pk, OFF_CONTENT_SIZE).unwrap() / 8) as usize;
    let size = (read_u64(pk, OFF_PACKET_SIZE).unwrap() / 8) as usize;
    assert!(
        PACKET_HEADER_LEN <= content && content <= size && size <= pk.len(),
        "packet sizes: content {content}, packet {size}, {} bytes left",
        pk.len()
    );
    assert!(
        pk[content..size].iter().all(|&b| b == 0),
        "the padding is zeros"
    );
    (content, size)
}

/// What the stream files of `dir` hold, walked packet by packet with the shared decoder (every
/// event has `BODY` bytes of fields).
#[derive(Debug, Default)]
struct Walk {
    packets: u64,
    /// Bytes of events: packet contents minus their headers.
    event_bytes: u64,
    compact: u64,
    extended: u64,
    /// Ids of the events with an extended header.
    extended_ids: Vec<u16>,
    /// Packets whose `packet_size` is more than their `content_size` (`O_DIRECT`).
    padded: u64,
}

fn walk(dir: &Path) -> Walk {
    let mut w = Walk::default();
    for p in std::fs::read_dir(dir).unwrap().flatten() {
        if p.path().is_dir() {
            let sub = walk(&p.path());
            w.packets += sub.packets;
            w.event_bytes += sub.event_bytes;
            w.compact += sub.compact;
            w.extended += sub.extended;
            w.padded += sub.padded;
            w.extended_ids.extend(sub.extended_ids);
            continue;
        }
        if !p.file_name().to_string_lossy().starts_with("stream_") {
            continue;
        }
        let bytes = std::fs::read(p.path()).unwrap();
        let mut off = 0;
        while off < bytes.len() {
            let pk = &bytes[off..];
            let (len, size) = packet_bounds(pk);
            let mut clock = read_u64(pk, OFF_TIMESTAMP_BEGIN).unwrap();
            let mut e = PACKET_HEADER_LEN;
            while e < len {
                let h = parse_event_header(&pk[e..len], clock).expect("a whole header");
                assert_eq!(h.compact, pk[e] != EXTENDED_TAG);
                if h.compact {
                    w.compact += 1;
                } else {
                    w.extended += 1;
                    w.extended_ids.push(h.id);
                }
                clock = h.ts;
                e += h.len + BODY;
            }
            assert_eq!(e, len, "events end with the packet");
            w.packets += 1;
            w.padded += u64::from(size > len);
            w.event_bytes += (len - PACKET_HEADER_LEN) as u64;
            off += size;
        }
    }
    w
}

/// A hot loop (compact headers), 300 callsites registered at run time recorded once each (ids
/// past 254: extended headers), and events after pauses of 30 ms (more than 2^24 cycles at any
/// cycle-counter rate under 559 MHz, 6 ms at this machine's 2.8 GHz: extended headers): the
/// stream holds both forms, and babeltrace2 reads every event with its exact values and the
/// same clock values as hushtrace's reader.
#[test]
fn both_header_forms_read_back_exactly_in_babeltrace2() {
    both_header_forms(false);
}

/// [`both_header_forms_read_back_exactly_in_babeltrace2`] with `O_DIRECT` stream files:
/// packets padded to the block size.
#[test]
fn both_header_forms_read_back_exactly_in_babeltrace2_with_o_direct() {
    both_header_forms(true);
}

fn both_header_forms(direct: bool) {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::temp_dir("compact-both");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(16 * 1024)
        .num_subbufs(64)
        .direct_io(direct)
        .start()
        .expect("start");
    let ints = [("a", FieldType::I32), ("b", FieldType::I32)];
    let registered: Vec<_> = (0..300)
        .map(|k| register_callsite("compact", &format!("r{k}"), Kind::Instant, &ints).unwrap())
        .collect();
    let max_id = registered
        .iter()
        .map(|r| r.callsite().state.cached_id())
        .max()
        .unwrap();
    assert!(max_id >= 255, "ids past the compact range: {max_id}");
    // (name, a, b) of every event, in order.
    let mut want: Vec<(String, i64, i64)> = Vec::new();
    const HOT: i32 = 3000;
    for i in 0..HOT {
        hushtrace::event!("compact", "hot", a = i, b = -i);
        want.push(("compact:hot".into(), i.into(), (-i).into()));
    }
    for (k, r) in registered.iter().enumerate() {
        let k = k as i32;
        assert!(r.record(&[Value::I32(k), Value::I32(i32::MIN + k)]));
        want.push((format!("compact:r{k}"), k.into(), (i32::MIN + k).into()));
    }
    for p in 0..3 {
        std::thread::sleep(Duration::from_millis(30));
        hushtrace::event!("compact", "after_pause", a = p, b = i32::MAX - p);
        want.push((
            "compact:after_pause".into(),
            p.into(),
            (i32::MAX - p).into(),
        ));
    }
    let stats = session.stop().expect("stop");
    assert_eq!(
        (stats.events_written, stats.events_discarded),
        (want.len() as u64, 0)
    );

    let w = walk(&dir);
    check_padding(&dir, direct, w.padded);
    assert_eq!(w.compact + w.extended, want.len() as u64, "{w:?}");
    assert!(
        w.compact >= HOT as u64,
        "the hot loop's headers are compact: {w:?}"
    );
    let high = registered
        .iter()
        .filter(|r| r.callsite().state.cached_id() >= 255)
        .count() as u64;
    assert!(
        w.extended >= high + 3,
        "ids >= 255 and the 3 events after a pause are extended: {w:?}"
    );
    assert!(w.extended_ids.iter().filter(|&&id| id >= 255).count() as u64 == high);

    let bt = common::babeltrace_cycles(&dir, false);
    assert_eq!(bt.len(), want.len(), "babeltrace2 event count");
    for (i, ((_, e), (name, a, b))) in bt.iter().zip(&want).enumerate() {
        assert_eq!(&e.name, name, "event {i}");
        assert_eq!(
            (e.int("a"), e.int("b")),
            (*a as i128, *b as i128),
            "event {i}: {e:?}"
        );
    }
    assert_eq!(common::assert_same_cycles(&dir, false), want.len());
    // The pauses show in the clock: each event after a pause is more than 2^24 cycles after
    // the one before it.
    let cycles: Vec<u64> = bt.iter().map(|(c, _)| *c).collect();
    for k in 1..=3 {
        let i = want.len() - k;
        assert!(
            cycles[i] - cycles[i - 1] >= 1 << 24,
            "event {i}: {cycles:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The goal of the compact header: an event with two `i32` fields takes 12 bytes on disk (a
/// 4-byte header and 8 bytes of fields), packet headers aside; an extended header (after a
/// preemption of 2^24 cycles) adds 7 to the odd one.
#[test]
fn a_two_int_event_takes_12_bytes_on_disk() {
    two_int_event_size(false);
}

/// [`a_two_int_event_takes_12_bytes_on_disk`] with `O_DIRECT` stream files: the padding of a
/// packet is not event bytes.
#[test]
fn a_two_int_event_takes_12_bytes_on_disk_with_o_direct() {
    two_int_event_size(true);
}

fn two_int_event_size(direct: bool) {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::temp_dir("compact-size");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(256 * 1024)
        .num_subbufs(16)
        .direct_io(direct)
        .start()
        .expect("start");
    let n: i32 = if cfg!(debug_assertions) {
        50_000
    } else {
        200_000
    };
    for i in 0..n {
        hushtrace::event!("compact", "ints", a = i, b = 2 * i);
    }
    let stats = session.stop().expect("stop");
    assert_eq!(
        (stats.events_written, stats.events_discarded),
        (n as u64, 0)
    );
    let w = walk(&dir);
    check_padding(&dir, direct, w.padded);
    assert_eq!(w.compact + w.extended, n as u64);
    assert_eq!(
        w.event_bytes,
        12 * w.compact + 19 * w.extended,
        "compact events are 12 bytes, extended ones 19: {w:?}"
    );
    // Only preemptions longer than 2^24 cycles give an extended header in this loop.
    assert!(w.extended * 1000 <= n as u64, "{w:?}");
    let per_event = w.event_bytes as f64 / n as f64;
    eprintln!("{per_event:.3} bytes per two-int event ({w:?})");
    assert!(per_event < 12.01, "{per_event}");
    {
        let events = common::babeltrace(&dir, false);
        assert_eq!(events.len(), n as usize);
        assert!(events
            .iter()
            .enumerate()
            .all(|(i, e)| e.int("a") == i as i128 && e.int("b") == 2 * i as i128));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flush of idle threads ships the complete events of an open packet as packets of their
/// own, and later the rest of the packet beginning at the last shipped event's time: compact
/// headers after each cut decode from there. Each event carries the cycle counter read just
/// before it, so its decoded timestamp must lie between its own reading and the next event's.
#[cfg(target_arch = "x86_64")]
#[test]
fn flushed_packets_decode_from_the_last_shipped_event() {
    flushed_packets(false);
}

/// [`flushed_packets_decode_from_the_last_shipped_event`] with `O_DIRECT` stream files: the
/// flushed parts and the rests are padded packets.
#[cfg(target_arch = "x86_64")]
#[test]
fn flushed_packets_decode_from_the_last_shipped_event_with_o_direct() {
    flushed_packets(true);
}

#[cfg(target_arch = "x86_64")]
fn flushed_packets(direct: bool) {
    use hushtrace_ctf::reader::{Session, Value};
    use std::time::Instant;
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::temp_dir("compact-flush");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(64 * 1024)
        .num_subbufs(8)
        .flush_interval(Duration::from_millis(20))
        .direct_io(direct)
        .start()
        .expect("start");
    let n: u64 = 500;
    for i in 0..n {
        // SAFETY: rdtsc has no preconditions on x86_64.
        let tsc = unsafe { core::arch::x86_64::_rdtsc() };
        hushtrace::event!("flush", "tick", i = i, tsc = tsc);
        if i % 100 == 99 {
            std::thread::sleep(Duration::from_millis(30)); // an extended header next
        } else {
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(500) {
                std::hint::spin_loop();
            }
        }
    }
    let stats = session.stop().expect("stop");
    assert_eq!((stats.events_written, stats.events_discarded), (n, 0));

    let w = walk_sizes(&dir);
    check_padding(&dir, direct, w.padded);
    assert!(
        w.packets >= 5,
        "the flush shipped parts of the open packet: {w:?}"
    );
    let s = Session::open(&dir).unwrap();
    if s.traces[0].desc.clock.source == "tsc" {
        let mut m = s.merged().unwrap();
        let mut got = Vec::new();
        while let Some(ev) = m.next().unwrap() {
            let (Some(Value::U64(i)), Some(Value::U64(tsc))) =
                (ev.event.field(0), ev.event.field(1))
            else {
                panic!("{}", ev.event.class.name);
            };
            got.push((i, tsc, ev.event.timestamp));
        }
        assert_eq!(got.len() as u64, n);
        for (k, g) in got.iter().enumerate() {
            assert_eq!(g.0, k as u64);
            let next = got.get(k + 1).map_or(u64::MAX, |x| x.1);
            assert!(
                g.1 <= g.2 && g.2 <= next,
                "event {k}: {g:?}, next reading {next}"
            );
        }
    }
    assert_eq!(common::assert_same_cycles(&dir, false), n as usize);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Packets and event bytes of the streams in `dir` (any field sizes).
#[derive(Debug, Default)]
struct Sizes {
    packets: u64,
    event_bytes: u64,
    /// Packets whose `packet_size` is more than their `content_size` (`O_DIRECT`).
    padded: u64,
}

fn walk_sizes(dir: &Path) -> Sizes {
    let mut w = Sizes::default();
    for p in std::fs::read_dir(dir).unwrap().flatten() {
        if p.path().is_dir() {
            let s = walk_sizes(&p.path());
            w.packets += s.packets;
            w.event_bytes += s.event_bytes;
            w.padded += s.padded;
        } else if p.file_name().to_string_lossy().starts_with("stream_") {
            let bytes = std::fs::read(p.path()).unwrap();
            let mut off = 0;
            while off < bytes.len() {
                let (len, size) = packet_bounds(&bytes[off..]);
                w.packets += 1;
                w.padded += u64::from(size > len);
                w.event_bytes += (len - PACKET_HEADER_LEN) as u64;
                off += size;
            }
        }
    }
    w
}

/// With `direct`, on a file system that takes `O_DIRECT`, some packets are padded (so the
/// walks above stepped by `packet_size`); without it, none is.
fn check_padding(dir: &Path, direct: bool, padded: u64) {
    if !direct {
        assert_eq!(padded, 0, "no padding through the page cache");
    } else if common::takes_direct(dir) {
        assert!(padded > 0, "O_DIRECT stream files hold padded packets");
    } else {
        eprintln!(
            "{}: no O_DIRECT on this file system; checked the page-cache trace",
            dir.display()
        );
    }
}
