//! Model checks with loom (run with `ci/loom.sh`, `RUSTFLAGS="--cfg hushtrace_loom"`): every
//! interleaving, under the C11 memory model, of
//!
//! * the packet hand-over alone (`src/handover.rs`);
//! * the real ring (`src/ring.rs`: reservation, packet switches, `finalize`, `drain`, `finish`,
//!   `recycle`, the `BufState` transitions) in its life cycle: a producer switching packets
//!   while the consumer drains (discard mode), the overwrite-mode finish, a session stop's
//!   detach and quiescence, and thread exit with recycling and re-attachment;
//! * the consumer's live reads through the ring header page: the flush of idle threads
//!   (`open_packet`: `open_seq`, `done`, `open_seq`) and the snapshot of a live
//!   overwrite-mode ring (`copy_newest`). Weakening an ordering they rely on fails them, e.g.
//!   `mark_done`'s Release store of `done` made Relaxed: "Causality violation: Concurrent
//!   read and write accesses" in both.
//!
//! Under that cfg every atomic of the ring is loom's (`src/primitive.rs`) and ring memory comes
//! from the heap. Loom cannot see raw memory, so the ring also touches a loom `UnsafeCell` per
//! 4 bytes of a slot wherever it writes or reads them: bytes read while they may be written,
//! or before their write happens-before the read, fail the model. The models assert on what the consumer reads back: packet sequence numbers,
//! event payloads (each event carries its number), per-packet counts and loss counts.
//!
//! The thread-side steps the runtime does outside `ring.rs` (entering a tracepoint, the stop's
//! detach and membarrier, thread exit, attach) are written out below with the orderings
//! `write.rs`, `ctx.rs`, `session.rs`, `thread.rs` and `state.rs` use.
#![cfg(hushtrace_loom)]

use hushtrace::handover::Handover;
use hushtrace::ring::{BufState, Buffer, ConsumerKey, ConsumerRight, Ident, Mode, ProducerKey};
use hushtrace_ctf::layout::{
    parse_event_header, read_u32, read_u64, COMPACT_HEADER_LEN, OFF_CONTENT_SIZE,
    OFF_EVENTS_DISCARDED, OFF_PACKET_SEQ_NUM, OFF_TIMESTAMP_BEGIN, OFF_VTID, PACKET_HEADER_LEN,
};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, Ordering};
use loom::sync::Arc;

/// The producer key of `b`.
fn pk(b: &Buffer) -> ProducerKey<'_> {
    // SAFETY: in every model, the thread that calls producer methods on a buffer is the one the
    // model attaches it to (or the consumer after quiescence).
    unsafe { ProducerKey::new(b) }
}

/// The consumer key of `b`.
fn ck(b: &Buffer) -> ConsumerKey<'_> {
    // SAFETY: in every model one thread plays the consumer.
    ConsumerKey::new(&unsafe { ConsumerRight::new() }, b)
}

struct Ring {
    h: Handover,
    slots: [UnsafeCell<u64>; 2],
}

// SAFETY: the hand-over protocol gives each slot to one side at a time; loom checks it.
unsafe impl Sync for Ring {}

#[test]
fn producer_and_consumer_never_touch_the_same_slot_at_once() {
    loom::model(|| {
        let ring = Arc::new(Ring {
            h: Handover::new(2),
            slots: [UnsafeCell::new(u64::MAX), UnsafeCell::new(u64::MAX)],
        });
        let r = ring.clone();
        let producer = loom::thread::spawn(move || {
            let mut seq = 0u64;
            for _ in 0..4 {
                if r.h.slot_free(seq) {
                    // SAFETY: the slot is free; loom reports any overlapping access.
                    r.slots[(seq % 2) as usize].with_mut(|p| unsafe { *p = seq });
                    r.h.publish(seq + 1);
                    seq += 1;
                } else {
                    loom::thread::yield_now();
                }
            }
            seq
        });
        let mut next = 0u64;
        for _ in 0..4 {
            match ring.h.ready() {
                Some(c) => {
                    assert_eq!(c, next, "packets are consumed in order");
                    // SAFETY: the packet is committed and not released.
                    let v = ring.slots[(c % 2) as usize].with(|p| unsafe { *p });
                    assert_eq!(v, c, "the consumer saw a packet before it was complete");
                    ring.h.release(c);
                    next += 1;
                }
                None => loom::thread::yield_now(),
            }
        }
        let produced = producer.join().unwrap();
        assert!(next <= produced);
        assert!(produced - next <= 2, "more unconsumed packets than slots");
    });
}

// ---- The ring's life cycle ----

/// An event: a compact header (its clock reads its number, so the stream's clock advances by
/// less than 2^24 between events) plus one `u64`, its number.
const EV: usize = COMPACT_HEADER_LEN + 8;
/// Two events per packet.
const SUBBUF: usize = PACKET_HEADER_LEN + 2 * EV;
/// Two slots.
const SLOTS: usize = 2;

/// Runs `f` under loom: exhaustively (`bound == None`) or with at most `bound` preemptions per
/// execution, for the models too large to explore in full within `ci/loom.sh`'s time (the ring
/// makes dozens of atomic accesses per packet switch). `LOOM_MAX_PREEMPTIONS` overrides it.
fn model(bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = bound;
    }
    b.check(f);
}

fn ring(mode: Mode, vtid: u32) -> Arc<Buffer> {
    let b = Buffer::new(SUBBUF, SLOTS, mode, 0, [7; 16]).expect("heap ring");
    pk(&b).set_ident(ident(vtid));
    Arc::new(b)
}

fn ident(vtid: u32) -> Ident {
    Ident {
        vpid: 1,
        vtid,
        ..Ident::default()
    }
}

/// One event at nesting depth 1 (the thread itself, not a signal handler), carrying `n`.
/// Returns whether it was written (otherwise it was dropped and counted).
fn event(b: &Buffer, n: u64) -> bool {
    match pk(&b).reserve_event(3, 8, 1, || n, || {}) {
        Ok(dst) => {
            // SAFETY: `reserve_event` wrote the header and returned 8 writable bytes at `dst`.
            unsafe { (dst as *mut [u8; 8]).write_unaligned(n.to_le_bytes()) };
            true
        }
        Err(_) => false,
    }
}

/// A packet as the consumer read it.
#[derive(Debug)]
struct Packet {
    seq: u64,
    vtid: u32,
    /// Cumulative `events_discarded` of the stream.
    discarded: u64,
    /// The numbers the events carry.
    events: Vec<u64>,
}

/// The consumer's write callback: parses a packet and checks it against its `meta` count.
fn read_into(out: &mut Vec<Packet>) -> impl FnMut(&[u8], u64) + '_ {
    |bytes, events| {
        assert_eq!(
            read_u64(bytes, OFF_CONTENT_SIZE),
            Some(bytes.len() as u64 * 8)
        );
        let body = &bytes[PACKET_HEADER_LEN..];
        assert_eq!(body.len() % EV, 0, "a packet ends inside an event");
        // Headers decode from the packet's begin time to each event's clock reading, which is
        // its number.
        let mut clock = read_u64(bytes, OFF_TIMESTAMP_BEGIN).unwrap();
        let evs: Vec<u64> = body
            .chunks(EV)
            .map(|e| {
                let h = parse_event_header(e, clock).unwrap();
                assert_eq!((h.id, h.len), (3, COMPACT_HEADER_LEN));
                let n = read_u64(e, h.len).unwrap();
                assert_eq!(h.ts, n, "timestamp decodes");
                clock = h.ts;
                n
            })
            .collect();
        assert_eq!(
            evs.len() as u64,
            events,
            "packet length and event count disagree"
        );
        out.push(Packet {
            seq: read_u64(bytes, OFF_PACKET_SEQ_NUM).unwrap(),
            vtid: read_u32(bytes, OFF_VTID).unwrap(),
            discarded: read_u64(bytes, OFF_EVENTS_DISCARDED).unwrap(),
            events: evs,
        });
    }
}

fn seqs(p: &[Packet]) -> Vec<u64> {
    p.iter().map(|p| p.seq).collect()
}

fn payloads(p: &[Packet]) -> Vec<u64> {
    p.iter().flat_map(|p| p.events.iter().copied()).collect()
}

/// Discard mode: the producer makes seven attempts (a packet switch every two events, on a ring
/// that holds four) while the consumer drains three times; then the producer is joined
/// (quiescent) and the consumer finishes. Explored exhaustively. Every written event is read exactly once and in order, every packet
/// once and in sequence, no slot is read while written (the slot cells), and
/// written + discarded = attempted, with the discarded count in the last packet.
#[test]
fn discard_mode_consumer_reads_every_committed_event_once() {
    model(None, || {
        const ATTEMPTS: u64 = 7;
        let b = ring(Mode::Discard, 1);
        let producer = {
            let b = b.clone();
            loom::thread::spawn(move || {
                (0..ATTEMPTS)
                    .filter(|&n| event(&b, n))
                    .collect::<Vec<u64>>()
            })
        };
        let mut read = Vec::new();
        for _ in 0..3 {
            ck(&b).drain(read_into(&mut read));
            loom::thread::yield_now();
        }
        let written = producer.join().unwrap();
        ck(&b).finish(read_into(&mut read));
        assert_eq!(
            payloads(&read),
            written,
            "events lost, duplicated or reordered"
        );
        assert_eq!(seqs(&read), (0..read.len() as u64).collect::<Vec<_>>());
        assert_eq!(written.len() as u64 + b.lost(), ATTEMPTS);
        assert_eq!(read.last().unwrap().discarded, b.lost());
        assert!(
            written.len() >= 4,
            "a full ring drops, an empty one does not"
        );
    });
}

/// Overwrite mode: the producer writes seven events, lapping the two-slot ring twice (packets
/// 0 and 1 are overwritten), then exits (`Exited`, Release, as `thread.rs` does); the consumer
/// sees `Exited` (Acquire) and finishes. It reads the newest packets, contiguous (the last
/// committed one and the open one), and kept + overwritten = written. Explored exhaustively.
#[test]
fn overwrite_mode_finish_keeps_the_newest_packets() {
    model(None, || {
        const EVENTS: u64 = 7;
        let b = ring(Mode::Overwrite, 1);
        let producer = {
            let b = b.clone();
            loom::thread::spawn(move || {
                for n in 0..EVENTS {
                    assert!(event(&b, n), "overwrite mode never drops");
                }
                // thread.rs `thread_exit`: the hand-over of the producer side.
                b.state.store(BufState::Exited, Ordering::Release);
            })
        };
        while b.state.load(Ordering::Acquire) != BufState::Exited {
            loom::thread::yield_now();
        }
        let mut read = Vec::new();
        ck(&b).finish(read_into(&mut read));
        assert_eq!(seqs(&read), vec![2, 3], "the newest packets, contiguous");
        assert_eq!(payloads(&read), vec![4, 5, 6]);
        assert_eq!(b.lost(), 4, "packets 0 and 1 overwritten");
        assert_eq!(payloads(&read).len() as u64 + b.lost(), EVENTS);
        producer.join().unwrap();
    });
}

/// What a session stop sees of a thread (`ctx.rs` `ThreadCtx`): its nesting depth and the
/// attached buffer.
struct Ctx {
    depth: AtomicU32,
    buffer: AtomicPtr<Buffer>,
}

impl Ctx {
    fn attached(b: &Arc<Buffer>) -> Ctx {
        Ctx {
            depth: AtomicU32::new(0),
            buffer: AtomicPtr::new(Arc::as_ptr(b) as *mut Buffer),
        }
    }
}

/// `write.rs` `write`: one tracepoint writing event `n` into the attached buffer, if any.
fn tracepoint(ctx: &Ctx, b: &Buffer, n: u64) -> bool {
    // ctx.enter()
    ctx.depth.store(1, Ordering::Relaxed);
    // The runtime has only a compiler fence here, which the stop's membarrier(2) turns into a
    // full fence on this thread (asymmetric fences, as liburcu's urcu-memb): modelled as
    // SeqCst fences on both sides.
    fence(Ordering::SeqCst);
    let attached = ctx.buffer.load(Ordering::Acquire);
    let ok = !attached.is_null() && {
        assert!(std::ptr::eq(attached, b));
        event(b, n)
    };
    // ctx.leave(1)
    ctx.depth.store(0, Ordering::Release);
    ok
}

/// Detach and quiescence: a thread makes three tracepoints (a packet switch on the third) while
/// a session stop (`session.rs` `stop_shared` + `quiesce`) swaps its buffer pointer to null,
/// moves the buffer `Attached → Detached`, issues the barrier, waits until the thread's depth
/// is 0 and finishes the buffer. Everything the thread wrote before it left the tracepoint in
/// which it still saw the buffer is read, and nothing is written after the finish (the slot
/// cells). Explored exhaustively.
#[test]
fn stop_detaches_waits_for_quiescence_and_finishes() {
    model(None, || {
        let b = ring(Mode::Discard, 1);
        let ctx = Arc::new(Ctx::attached(&b));
        let producer = {
            let (b, ctx) = (b.clone(), ctx.clone());
            loom::thread::spawn(move || {
                (0..3)
                    .filter(|&n| tracepoint(&ctx, &b, n))
                    .collect::<Vec<u64>>()
            })
        };
        let was = ctx.buffer.swap(std::ptr::null_mut(), Ordering::AcqRel);
        assert!(std::ptr::eq(was, &*b));
        assert!(b
            .state
            .transition(BufState::Attached, BufState::Detached, Ordering::AcqRel));
        fence(Ordering::SeqCst); // membarrier(2)
        while ctx.depth.load(Ordering::Acquire) != 0 {
            loom::thread::yield_now();
        }
        let mut read = Vec::new();
        ck(&b).finish(read_into(&mut read));
        let written = producer.join().unwrap();
        assert_eq!(
            payloads(&read),
            written,
            "an event written before quiescence is lost"
        );
        assert_eq!(written, (0..written.len() as u64).collect::<Vec<_>>());
        assert_eq!(b.lost(), 0);
    });
}

/// Thread exit, recycling and re-attachment: thread 1 writes three events and exits
/// (`Exited`, Release, as `thread.rs` `thread_exit`); the consumer sees it (Acquire), finishes
/// the buffer and recycles it (`Pooled`, Release); thread 2 attaches the way `state.rs`
/// `attach` does: it takes the buffer if it is in the pool (`Pooled → Attached`, Acquire; one
/// attempt, as `attach` allocates a new buffer otherwise), writes three events and exits; the
/// consumer finishes again. One stream: sequence numbers continue, each packet carries its
/// writer's identity, nothing is lost. Three threads: at most three preemptions.
#[test]
fn exited_buffer_is_finished_recycled_and_continued_by_the_next_thread() {
    model(Some(3), || {
        let b = ring(Mode::Discard, 1);
        let exit = |b: &Buffer| b.state.store(BufState::Exited, Ordering::Release);
        let first = {
            let b = b.clone();
            loom::thread::spawn(move || {
                for n in 0..3 {
                    assert!(event(&b, n));
                }
                exit(&b);
            })
        };
        // Set by thread 2 when the buffer was not in the pool (it would take a new one).
        let gave_up = Arc::new(AtomicBool::new(false));
        let second = {
            let (b, gave_up) = (b.clone(), gave_up.clone());
            loom::thread::spawn(move || {
                if b.state
                    .transition(BufState::Pooled, BufState::Attached, Ordering::Acquire)
                {
                    pk(&b).set_ident(ident(2));
                    for n in 10..13 {
                        assert!(event(&b, n));
                    }
                    exit(&b);
                } else {
                    gave_up.store(true, Ordering::Release);
                }
            })
        };
        let mut read = Vec::new();
        while b.state.load(Ordering::Acquire) != BufState::Exited {
            loom::thread::yield_now();
        }
        ck(&b).finish(read_into(&mut read));
        ck(&b).recycle();
        let attached = loop {
            if b.state.load(Ordering::Acquire) == BufState::Exited {
                break true;
            }
            if gave_up.load(Ordering::Acquire) {
                break false;
            }
            loom::thread::yield_now();
        };
        if attached {
            ck(&b).finish(read_into(&mut read));
            assert_eq!(seqs(&read), vec![0, 1, 2, 3], "the stream continues");
            assert_eq!(
                read.iter().map(|p| p.vtid).collect::<Vec<_>>(),
                vec![1, 1, 2, 2]
            );
            assert_eq!(payloads(&read), vec![0, 1, 2, 10, 11, 12]);
        } else {
            assert_eq!(seqs(&read), vec![0, 1]);
            assert_eq!(payloads(&read), vec![0, 1, 2]);
        }
        assert_eq!(b.lost(), 0);
        first.join().unwrap();
        second.join().unwrap();
    });
}

// ---- The consumer's live reads: the flush of idle threads and the snapshot ----

/// `write.rs` at nesting depth 1: the event, then `done` (Release) for the flush and `recover`.
fn event_done(b: &Buffer, n: u64) -> bool {
    let ok = event(b, n);
    if ok {
        pk(&b).mark_done();
    }
    ok
}

/// The numbers carried by the complete events `bytes` of packet `seq`, checked to be the ones
/// the models put there: the packet's events are `2 * seq, 2 * seq + 1` (two per packet, none
/// dropped), so a prefix of those.
fn open_events(bytes: &[u8], begin: u64, seq: u64) -> Vec<u64> {
    assert_eq!(bytes.len() % EV, 0, "the flush cut an event");
    let mut clock = begin;
    let evs: Vec<u64> = bytes
        .chunks(EV)
        .map(|e| {
            let h = parse_event_header(e, clock).unwrap();
            let n = read_u64(e, h.len).unwrap();
            assert_eq!(h.ts, n, "timestamp decodes");
            clock = h.ts;
            n
        })
        .collect();
    assert!(!evs.is_empty());
    assert_eq!(
        evs,
        (2 * seq..2 * seq + evs.len() as u64).collect::<Vec<_>>()
    );
    evs
}

/// The flush of idle threads (`ring/flush.rs`): the producer writes three events (a packet
/// switch after the second), marking each complete (`done`, Release) as `write.rs` does, while
/// the consumer drains and reads the open packet's complete events twice. Whatever
/// `open_packet` returns is a run of complete events of the packet its header names (bytes
/// the producer wrote before the `done` the consumer read: the slot cells fail the model if
/// that write does not happen-before the read), and the consumer reads all events once the
/// producer is quiescent. At most two preemptions. Weakening `mark_done`'s Release (or the
/// consumer's Acquire of `done`) to Relaxed fails this model (`ci/loom.sh`).
#[test]
fn flush_reads_only_complete_events_of_the_open_packet() {
    model(Some(2), || {
        let b = ring(Mode::Discard, 1);
        let producer = {
            let b = b.clone();
            loom::thread::spawn(move || {
                for n in 0..3 {
                    assert!(event_done(&b, n));
                }
            })
        };
        let mut read = Vec::new();
        for _ in 0..2 {
            ck(&b).drain(read_into(&mut read));
            if let Some(open) = ck(&b).open_packet() {
                assert_eq!(read_u64(&open.header, OFF_PACKET_SEQ_NUM), Some(open.seq));
                let begin = read_u64(&open.header, OFF_TIMESTAMP_BEGIN).unwrap();
                open_events(open.events, begin, open.seq);
            }
        }
        producer.join().unwrap();
        ck(&b).finish(read_into(&mut read));
        assert_eq!(payloads(&read), vec![0, 1, 2]);
    });
}

/// The snapshot of a live overwrite-mode ring (`ring/snapshot.rs`): the producer writes four
/// events (packet 0 committed, packet 1 open with two) while the consumer takes a snapshot.
/// Every packet the snapshot yields holds complete events of the packet its header names, in
/// order, the packets are consecutive, and the slot cells fail the model if a byte it yields
/// was not written before the commit or `done` it read. The producer does not lap the reader
/// here: a lapped copy is a race by design, detected by the re-read of `committed` and the
/// header check on bytes loom cannot see. At most two preemptions.
#[test]
fn snapshot_of_a_live_ring_yields_complete_events() {
    model(Some(2), || {
        let b = ring(Mode::Overwrite, 1);
        let producer = {
            let b = b.clone();
            loom::thread::spawn(move || {
                for n in 0..4 {
                    assert!(event_done(&b, n));
                }
            })
        };
        let desc = desc();
        let mut seqs = Vec::new();
        ck(&b).copy_newest(&desc, |bytes, events| {
            let seq = read_u64(bytes, OFF_PACKET_SEQ_NUM).unwrap();
            assert_eq!(
                read_u64(bytes, OFF_CONTENT_SIZE),
                Some(bytes.len() as u64 * 8)
            );
            let begin = read_u64(bytes, OFF_TIMESTAMP_BEGIN).unwrap();
            let evs = open_events(&bytes[PACKET_HEADER_LEN..], begin, seq);
            assert_eq!(evs.len() as u64, events);
            seqs.push(seq);
        });
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "snapshot packets out of order: {seqs:?}"
        );
        producer.join().unwrap();
    });
}

/// The metadata the snapshot walks the open packet's events with: class 3, one `u64`.
fn desc() -> hushtrace_ctf::metadata::TraceDesc {
    use hushtrace_ctf::metadata::{ClockDesc, EventClass, TraceDesc};
    TraceDesc {
        uuid: [7; 16],
        clock_uuid: [0; 16],
        clock: ClockDesc {
            freq: 1_000_000_000,
            offset_s: 0,
            offset: 0,
            source: "tsc".into(),
        },
        vpid: 1,
        procname: "loom".into(),
        hostname: "h".into(),
        events: vec![EventClass {
            id: 3,
            name: "loom:ev".into(),
            kind: hushtrace_ctf::Kind::Instant,
            fields: Some(vec![("n".into(), hushtrace_ctf::FieldType::U64)]),
        }],
    }
}
