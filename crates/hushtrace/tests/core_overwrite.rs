//! Overwrite mode (flight recorder) keeps exactly the newest events: after a stop the trace
//! holds a contiguous suffix `seq = N - written .. N - 1` of what one thread wrote, at least
//! `num_subbufs - 1` full packets of it, and `written + discarded = N`.

mod common;

use hushtrace_ctf::layout::{COMPACT_HEADER_LEN, EXTENDED_HEADER_LEN, PACKET_HEADER_LEN};
use std::sync::Mutex;

/// Sessions are process-global: the tests of this file run one at a time.
static LOCK: Mutex<()> = Mutex::new(());

const SUBBUF: usize = 4096;
const NUM_SUBBUFS: usize = 4;
/// `event!("ow", "seq", seq = u64)`: header + one u64. Compact in a tight loop; extended
/// after a pause of 2^24 cycles (a preemption), which the bounds below allow for.
const EVENT_LEN: usize = COMPACT_HEADER_LEN + 8;
/// Events in one full packet of compact events: the most a packet holds.
const PER_PACKET: u64 = ((SUBBUF - PACKET_HEADER_LEN) / EVENT_LEN) as u64;
/// The fewest a full packet holds (every event extended).
const MIN_PER_PACKET: u64 = ((SUBBUF - PACKET_HEADER_LEN) / (EXTENDED_HEADER_LEN + 8)) as u64;

fn n_events() -> u64 {
    if cfg!(debug_assertions) {
        50_000
    } else {
        1_000_000
    }
}

fn emit(n: u64) {
    for seq in 0..n {
        hushtrace::event!("ow", "seq", seq = seq);
    }
}

fn start(dir: &std::path::Path) -> hushtrace::Session {
    hushtrace::Session::builder()
        .output_dir(dir)
        .mode(hushtrace::Mode::Overwrite)
        .subbuf_size(SUBBUF)
        .num_subbufs(NUM_SUBBUFS)
        .start()
        .expect("start overwrite session")
}

/// Checks the stats and the trace of one writer of `n` events.
fn check(dir: &std::path::Path, stats: &hushtrace::Stats, n: u64, vtid: u32) {
    let (w, d) = (stats.events_written, stats.events_discarded);
    assert_eq!(w + d, n, "written + discarded = N: {stats:?}");
    assert!(d > 0, "the ring wrapped: {stats:?}");
    assert!(
        w <= PER_PACKET * NUM_SUBBUFS as u64,
        "no more than the ring holds ({} events): {stats:?}",
        PER_PACKET * NUM_SUBBUFS as u64
    );
    assert!(
        w > MIN_PER_PACKET * (NUM_SUBBUFS as u64 - 1),
        "at least num_subbufs - 1 full packets kept ({} events): {stats:?}",
        MIN_PER_PACKET * (NUM_SUBBUFS as u64 - 1)
    );
    // The trace holds only the newest packets, contiguous in `packet_seq_num`: babeltrace2 reads
    // it without any warning.
    let events = common::babeltrace(dir, false);
    assert_eq!(
        events.len() as u64,
        w,
        "babeltrace shows exactly the written events"
    );
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.name, "ow:seq");
        assert_eq!(e.vtid, vtid, "{e:?}");
        assert_eq!(
            e.int("seq") as u64,
            n - w + i as u64,
            "event {i} of the trace: the newest events, contiguous, in order"
        );
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The writer is still alive (its buffer attached) when the session stops.
#[test]
fn overwrite_keeps_newest_suffix_live_thread() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::temp_dir("ow-live");
    let session = start(&dir);
    let n = n_events();
    emit(n);
    let stats = session.stop().expect("stop");
    check(&dir, &stats, n, gettid());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The writer exits before the stop: the consumer finishes its buffer on thread exit.
#[test]
fn overwrite_keeps_newest_suffix_exited_thread() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::temp_dir("ow-exited");
    let session = start(&dir);
    let n = n_events() + 7; // a different phase within the packet
    let tid = std::thread::spawn(move || {
        emit(n);
        gettid()
    })
    .join()
    .unwrap();
    // The consumer finishes the exited buffer before the stop (its packets are in the stream
    // file): the order this test is about.
    let trace = session.trace_dir();
    common::wait_until("the exited thread's packets in its stream file", || {
        common::stream_files(&trace).0 > 0
    });
    let stats = session.stop().expect("stop");
    check(&dir, &stats, n, tid);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Exactly filling the ring is not a wrap: nothing is lost, every event is kept.
#[test]
fn overwrite_without_wrap_keeps_everything() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::temp_dir("ow-nowrap");
    let session = start(&dir);
    let n = PER_PACKET * (NUM_SUBBUFS as u64 - 1) + 5;
    emit(n);
    let stats = session.stop().expect("stop");
    assert_eq!(
        (stats.events_written, stats.events_discarded),
        (n, 0),
        "{stats:?}"
    );
    {
        let events = common::babeltrace(&dir, false);
        let seqs: Vec<i128> = events.iter().map(|e| e.int("seq")).collect();
        assert_eq!(seqs, (0..n as i128).collect::<Vec<_>>());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
