//! The ring's unit tests.

use super::memory::RING_HEADER_LEN;
use super::packet::put_u64;
use super::*;
use crate::platform;
use hushtrace_ctf::layout::*;

// The tests play both sides of each ring on one thread: they call the ring's own methods,
// which the keys forward to.

fn buf(mode: Mode) -> Buffer {
    let b = Buffer::new(4096, 4, mode, 7, [9; 16]).unwrap();
    b.set_ident(Ident {
        vpid: 1,
        vtid: 2,
        procname: *b"t\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        pthread: 3,
    });
    b
}

/// Bytes of a test event: a compact header (the clock advances by 1 per event) and a u64.
const EV: u64 = (COMPACT_HEADER_LEN + 8) as u64;

fn write_n(b: &Buffer, n: u64) -> u64 {
    let mut ok = 0;
    for i in 0..n {
        if let Ok(ptr) = b.reserve_event(1, 8, 1, || i, || {}) {
            // SAFETY: 8 bytes of fields reserved.
            unsafe { put_u64(ptr, 0, i) };
            ok += 1;
        }
    }
    ok
}

fn collect(b: &Buffer, finish: bool) -> Vec<(u64, u64)> {
    let mut out = vec![];
    let mut f = |bytes: &[u8], ev: u64| {
        let h = PacketHeader::decode(bytes).unwrap();
        out.push((h.seq, ev));
        assert!(PacketHeader::magic_ok(bytes));
        assert_eq!(h.len(), bytes.len());
        assert_eq!(h.packet_size, h.content_size);
    };
    if finish {
        b.finish(&mut f)
    } else {
        b.drain(&mut f)
    }
    out
}

/// A file-backed ring's header page is what recovery parses: the fixed part through the
/// one codec (`layout::RingFileHeader`), the live words at their offsets.
#[test]
#[cfg_attr(miri, ignore = "creates and maps a file: outside Miri's isolation")]
fn ring_file_header_is_what_recovery_parses() {
    use std::os::fd::AsFd;
    let path =
        std::env::temp_dir().join(format!("hushtrace-ring-header-test-{}", platform::getpid()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let b = Buffer::new_in_file(f.as_fd(), 8192, 3, Mode::Overwrite, 77, [1; 16]).unwrap();
    let mut page = vec![0u8; RING_HEADER_LEN];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut page, 0).unwrap();
    let want = RingFileHeader {
        overwrite: true,
        subbuf_size: 8192,
        num_subbufs: 3,
        instance: 77,
        pid: platform::getpid(),
    };
    assert_eq!(RingFileHeader::decode(&page), Ok(want));
    let h = hushtrace_ctf::ringfile::RingHeader::parse(&page).unwrap();
    assert_eq!(
        (h.overwrite, h.subbuf_size, h.num_subbufs, h.instance, h.pid),
        (true, 8192, 3, 77, platform::getpid())
    );
    assert!(!h.clean);
    b.mark_clean();
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut page, 0).unwrap();
    assert!(
        hushtrace_ctf::ringfile::RingHeader::parse(&page)
            .unwrap()
            .clean
    );
}

#[test]
fn discard_mode_counts_every_event() {
    let b = buf(Mode::Discard);
    let per_packet = (4096 - PACKET_HEADER_LEN as u64) / EV;
    let ok = write_n(&b, 10_000);
    assert_eq!(ok, per_packet * 4);
    assert_eq!(b.lost(), 10_000 - ok);
    let pk = collect(&b, true);
    assert_eq!(pk.iter().map(|p| p.1).sum::<u64>(), ok);
    // three full packets handed over, the open one flushed, then a tail carrying discards
    assert_eq!(
        pk.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
}

#[test]
fn overwrite_mode_keeps_the_newest() {
    let b = buf(Mode::Overwrite);
    let ok = write_n(&b, 10_000);
    assert_eq!(ok, 10_000);
    let pk = collect(&b, true);
    let kept: u64 = pk.iter().map(|p| p.1).sum();
    assert_eq!(kept + b.lost(), 10_000);
    let seqs: Vec<u64> = pk.iter().map(|p| p.0).collect();
    let last = *seqs.last().unwrap();
    assert_eq!(seqs, (last - 3..=last).collect::<Vec<_>>());
}

/// A storm of signal handlers (nested reservations at depth 2, simulated from inside the
/// interrupted reservation's clock read) fills the packet the interrupted event has just
/// opened: the interrupted event goes into the next packet instead of being dropped; only
/// the nested event that found no room is lost.
#[test]
fn handlers_filling_a_fresh_packet_do_not_drop_the_interrupted_event() {
    let b = buf(Mode::Discard);
    let per_packet = (4096 - PACKET_HEADER_LEN as u64) / EV;
    assert_eq!(write_n(&b, per_packet), per_packet);
    let calls = std::cell::Cell::new(0u32);
    let nested = std::cell::Cell::new(0u64);
    let now = || {
        calls.set(calls.get() + 1);
        // Third clock read: inside the fresh packet's reservation (after the old packet's
        // end and the new one's begin timestamps).
        if calls.get() == 3 {
            while b.reserve_event(1, 8, 2, || 9, || {}).is_ok() {
                nested.set(nested.get() + 1);
            }
        }
        9
    };
    assert!(
        b.reserve_event(1, 8, 1, now, || {}).is_ok(),
        "interrupted event dropped"
    );
    assert_eq!(nested.get(), per_packet);
    assert_eq!(
        b.lost(),
        1,
        "only the nested event that did not fit is lost"
    );
    let pk = collect(&b, true);
    assert_eq!(pk.iter().map(|p| p.1).sum::<u64>(), 2 * per_packet + 1);
}

/// Headers decode, from each packet's `timestamp_begin`, to exactly the timestamps the
/// clock gave: compact for small steps (low bits wrapping included), extended for steps of
/// 2^24 cycles and more, for ids of 255 and up, and for a clock going backwards; and so do
/// the events of a handler nesting inside a reservation's clock read.
#[test]
fn headers_decode_to_the_clock_readings() {
    const M: u64 = 1 << 24;
    let b = buf(Mode::Discard);
    // (id, timestamp): the clock's readings, one per event.
    let mut want = vec![];
    let mut t = 5 * M - 3;
    for (k, step) in [0, 1, 2, M - 1, M, 7, M + 1, 3, 2 * M, 0, 1]
        .into_iter()
        .enumerate()
    {
        t += step;
        want.push((if k % 4 == 3 { 300 } else { 7 }, t));
    }
    want.push((7, t - 5)); // backwards (a clock fallback): extended, decodes as is
    want.push((7, t - 4));
    // The clock; event 4's first read is interrupted by a handler recording two events,
    // and its retry reads the clock after them.
    let clock = std::cell::Cell::new(0);
    let expect = std::cell::RefCell::new(vec![]);
    for (k, &(id, ts)) in want.iter().enumerate() {
        clock.set(ts);
        let interrupt = std::cell::Cell::new(k == 4);
        let now = || {
            if interrupt.replace(false) {
                for h in 1..=2 {
                    let p = b.reserve_event(254, 8, 2, || ts + h, || {}).unwrap();
                    // SAFETY: 8 bytes of fields reserved.
                    unsafe { put_u64(p, 0, ts + h) };
                    expect.borrow_mut().push((254, ts + h));
                }
                let read = clock.get();
                clock.set(ts + 3);
                return read; // the reservation's CAS fails: it retries
            }
            clock.get()
        };
        let p = b.reserve_event(id, 8, 1, now, || {}).unwrap();
        // SAFETY: 8 bytes of fields reserved.
        unsafe { put_u64(p, 0, clock.get()) };
        expect.borrow_mut().push((id, clock.get()));
    }
    let expect = expect.into_inner();
    assert_eq!(expect.len(), want.len() + 2);
    let mut got = vec![];
    let mut headers = vec![];
    b.finish(|bytes, _| {
        let mut clock = PacketHeader::decode(bytes).unwrap().timestamp_begin;
        let mut off = PACKET_HEADER_LEN;
        while off < bytes.len() {
            let h = parse_event_header(&bytes[off..], clock).unwrap();
            assert_eq!(
                read_u64(bytes, off + h.len),
                Some(h.ts),
                "field = timestamp"
            );
            got.push((h.id, h.ts));
            headers.push(h.compact);
            clock = h.ts;
            off += h.len + 8;
        }
        assert_eq!(off, bytes.len());
    });
    assert_eq!(got, expect);
    // 0 and small steps compact, M-1 compact, M extended, id 300 extended, backwards
    // extended.
    let compact: Vec<bool> = expect
        .iter()
        .scan(None, |prev: &mut Option<u64>, &(id, ts)| {
            let c = compact_fits(id, ts, prev.unwrap_or(ts));
            *prev = Some(ts);
            Some(c)
        })
        .collect();
    assert_eq!(headers, compact);
    assert!(headers.contains(&true) && headers.contains(&false));
}

#[test]
fn consumer_frees_slots() {
    let b = buf(Mode::Discard);
    for _ in 0..10 {
        write_n(&b, 500);
        collect(&b, false);
    }
    assert_eq!(b.lost(), 0);
}
