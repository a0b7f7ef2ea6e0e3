//! A signal handler that emits events while the interrupted thread is inside a tracepoint
//! leaves both records intact (README, "Signal handlers"): babeltrace2 parses every event, the interrupted
//! thread's sequence is complete and ordered, every handler event is written or counted as
//! discarded, and timestamps decode (compact headers) to the same cycles in babeltrace2 and in
//! hushtrace's reader, in stream order.

mod common;

use std::collections::BTreeSet;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Handler invocations.
static COUNTER: AtomicU32 = AtomicU32::new(0);
/// Whether the handler records `n` as a `u64` (a 12-byte record with a compact header, the size
/// of `sig:main`) or a `u32` (8 bytes: it can then fit in a packet where the interrupted event
/// did not, so it can land in the middle of the interrupted thread's packet switch).
static WIDE: AtomicBool = AtomicBool::new(true);
static READY: AtomicBool = AtomicBool::new(false);
static DONE: AtomicBool = AtomicBool::new(false);
static SENDER_STOPPED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigusr1(_sig: libc::c_int) {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    if WIDE.load(Ordering::Relaxed) {
        // Same record size as `sig:main`.
        hushtrace::event!("sig", "handler", n = u64::from(n));
    } else {
        hushtrace::event!("sig", "handler", n = n);
    }
}

fn install_handler() {
    // SAFETY: a zeroed sigaction is a valid starting value; we set the handler address (an
    // `extern "C" fn(c_int)`), an empty mask and SA_RESTART, and install it for SIGUSR1.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigusr1 as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()),
            0,
            "sigaction"
        );
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Sends SIGUSR1 to `pthread` until `done`, one at a time: waits (briefly) for each to be
/// handled so that signals do not merely coalesce while pending. Returns how many were sent.
fn bombard(pthread: libc::pthread_t, done: &AtomicBool) -> u64 {
    let mut sent = 0u64;
    while !done.load(Ordering::Acquire) {
        let before = COUNTER.load(Ordering::Relaxed);
        // SAFETY: the target thread stays alive until the caller's stop flag says otherwise.
        let r = unsafe { libc::pthread_kill(pthread, libc::SIGUSR1) };
        assert_eq!(r, 0, "pthread_kill");
        sent += 1;
        let t0 = Instant::now();
        while COUNTER.load(Ordering::Relaxed) == before
            && t0.elapsed() < Duration::from_micros(200)
            && !done.load(Ordering::Acquire)
        {
            std::hint::spin_loop();
        }
    }
    sent
}

/// What one run recorded.
struct Outcome {
    dir: std::path::PathBuf,
    stats: hushtrace::Stats,
    tid: u32,
    main_events: u64,
    handled: u64,
    /// The events as babeltrace2 prints them.
    events: Vec<common::BtEvent>,
}

/// One thread emits `sig:main` events in a loop while another keeps interrupting it with
/// SIGUSR1, whose handler emits `sig:handler`. Returns what was recorded.
fn run(wide: bool) -> Outcome {
    let (min_events, min_signals, max_events): (u64, u32, u64) = if cfg!(debug_assertions) {
        (100_000, 3_000, 400_000)
    } else {
        (1_000_000, 20_000, 10_000_000)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    WIDE.store(wide, Ordering::Relaxed);
    install_handler();
    COUNTER.store(0, Ordering::Relaxed);
    READY.store(false, Ordering::Relaxed);
    DONE.store(false, Ordering::Relaxed);
    SENDER_STOPPED.store(false, Ordering::Relaxed);
    let dir = common::temp_dir("signals");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        // Small packets: many packet switches for signals to land in. Enough of them that the
        // ring never fills, so only nested (handler) events can be dropped.
        .subbuf_size(4096)
        .num_subbufs(4096)
        .start()
        .expect("start session");

    let target = std::thread::spawn(move || {
        // Registration (buffer allocation) happens before the first signal: interrupting it is
        // the subject of `core_signals_registration.rs`.
        hushtrace::init_thread();
        let tid = gettid();
        READY.store(true, Ordering::Release);
        let mut i = 0u64;
        let mut seen = 0;
        while i < max_events && (i < min_events || COUNTER.load(Ordering::Relaxed) < min_signals) {
            hushtrace::event!("sig", "main", seq = i);
            i += 1;
            if i.is_multiple_of(64) {
                // On a loaded machine the sender may not get a CPU: let it run, so that the
                // run is not all events and no signals.
                let now = COUNTER.load(Ordering::Relaxed);
                if now == seen {
                    std::thread::yield_now();
                }
                seen = now;
                if i >= min_events && Instant::now() > deadline {
                    break;
                }
            }
        }
        DONE.store(true, Ordering::Release);
        // Stay alive until no more signals are sent to this thread.
        while !SENDER_STOPPED.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        (tid, i)
    });
    let pthread = target.as_pthread_t();
    let sender = std::thread::spawn(move || {
        while !READY.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let sent = bombard(pthread, &DONE);
        SENDER_STOPPED.store(true, Ordering::Release);
        sent
    });
    let sent = sender.join().unwrap();
    let (tid, main_events) = target.join().unwrap();
    let stats = session.stop().expect("stop session");
    let handled = u64::from(COUNTER.load(Ordering::Relaxed));
    eprintln!("main events {main_events}, signals sent {sent}, handled {handled}; {stats:?}");
    assert!(
        handled >= 200,
        "too few signals handled ({handled}) to test anything"
    );
    // Discarded events are reported by babeltrace2 as warnings; errors fail `babeltrace_raw`.
    let events = common::babeltrace(&dir, stats.events_discarded > 0);
    // Handler events reserved inside a reservation (before or after its compare-and-swap) keep
    // the stream decodable: babeltrace2 and hushtrace's reader reconstruct the same cycle
    // values from the compact headers, never going backwards in the stream.
    let compared = common::assert_same_cycles(&dir, stats.events_discarded > 0);
    assert_eq!(compared as u64, stats.events_written, "events compared");
    Outcome {
        dir,
        stats,
        tid,
        main_events,
        handled,
        events,
    }
}

/// Checks every record of the trace; returns the number of `sig:handler` events.
fn check_records(o: &Outcome, events: &[common::BtEvent]) -> u64 {
    let mut last_seq: Option<i128> = None;
    let mut mains = 0u64;
    let mut ns = BTreeSet::new();
    let mut last_ts = i128::MIN;
    for e in events {
        assert_eq!((e.vpid, e.vtid), (std::process::id(), o.tid), "{e:?}");
        assert!(e.ts_ns >= last_ts, "timestamps in stream order: {e:?}");
        last_ts = e.ts_ns;
        match e.name.as_str() {
            "sig:main" => {
                assert_eq!(e.fields.len(), 1, "{e:?}");
                let s = e.int("seq");
                assert!(
                    last_seq.is_none_or(|p| s > p),
                    "main seq strictly increasing: {last_seq:?} then {e:?}"
                );
                last_seq = Some(s);
                mains += 1;
            }
            "sig:handler" => {
                assert_eq!(e.fields.len(), 1, "{e:?}");
                let n = e.int("n");
                assert!(
                    (0..o.handled as i128).contains(&n),
                    "handler n out of range: {e:?}"
                );
                assert!(ns.insert(n), "handler event {n} twice");
            }
            other => panic!("unexpected event {other}: {e:?}"),
        }
    }
    // The ring never fills, so the only events that may be dropped are nested handler events at
    // a packet switch: every main event is there, complete and in order.
    assert_eq!(mains, o.main_events, "every main event is in the trace");
    assert_eq!(last_seq, Some(o.main_events as i128 - 1));
    ns.len() as u64
}

/// Sessions and the signal handler are process-global: the tests of this file run one at a
/// time.
static LOCK: Mutex<()> = Mutex::new(());

/// Both records survive: babeltrace2 parses every event (no error, in particular no timestamp
/// going backwards), the interrupted thread's events are all there in order, handler events are
/// distinct, timestamps are ordered in the stream. Handler records of the interrupted record's
/// size.
#[test]
fn signal_handler_records_stay_intact() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let o = run(true);
    {
        let events = &o.events;
        let handlers = check_records(&o, events);
        assert!(
            handlers + o.stats.events_discarded >= o.handled / 2,
            "most handler events are recorded or counted"
        );
    }
    let _ = std::fs::remove_dir_all(&o.dir);
}

/// As above with handler records smaller than the interrupted ones: a handler event can then
/// fit in the packet that the interrupted tracepoint is closing.
#[test]
fn signal_handler_smaller_records_stay_intact() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let o = run(false);
    {
        let events = &o.events;
        let handlers = check_records(&o, events);
        assert_eq!(
            events.len() as u64,
            o.stats.events_written,
            "babeltrace count"
        );
        assert_eq!(
            o.stats.events_written + o.stats.events_discarded,
            o.main_events + o.handled,
            "written + discarded = main events + handler invocations: {:?}",
            o.stats
        );
        assert_eq!(handlers, o.handled - o.stats.events_discarded);
    }
    let _ = std::fs::remove_dir_all(&o.dir);
}

/// Exact accounting with nested events: written + discarded = main events + handler
/// invocations, babeltrace shows exactly the written events, and the handler events in the
/// trace are the invocations minus the discarded count. (Handler records of the interrupted
/// record's size; see `signal_handler_smaller_records_stay_intact` for the other case.)
#[test]
fn signal_handler_events_exactly_accounted() {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let o = run(true);
    let st = &o.stats;
    assert_eq!(
        st.events_written + st.events_discarded,
        o.main_events + o.handled,
        "written + discarded = main events + handler invocations: {st:?}"
    );
    {
        let events = &o.events;
        assert_eq!(events.len() as u64, st.events_written, "babeltrace count");
        let handlers = check_records(&o, events);
        assert_eq!(
            handlers,
            o.handled - st.events_discarded,
            "handler events = invocations - discarded"
        );
    }
    let _ = std::fs::remove_dir_all(&o.dir);
}
