//! No-syscall mode, proven by the kernel: a seccomp-bpf filter on the traced thread traps every
//! system call it makes after entering the mode.

mod common;

use common::{babeltrace, temp_dir};
use hushtrace::verify;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Sessions and seccomp counters are process-wide: one scenario at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Busy-waits without any system call.
fn spin_until(flag: &AtomicBool) {
    while !flag.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
}

#[test]
fn control_the_filter_traps_a_deliberate_getpid() {
    let _g = serial();
    let before = verify::trapped_syscalls();
    let result = Arc::new(AtomicU64::new(0));
    let r = result.clone();
    let t = std::thread::spawn(move || {
        verify::trap_syscalls_on_this_thread().expect("install seccomp filter");
        // SAFETY: getpid has no preconditions; here it is trapped and returns -ENOSYS.
        let ret = unsafe { libc::getpid() };
        r.store(
            (verify::trapped_syscalls() << 1) | u64::from(ret < 0),
            Ordering::SeqCst,
        );
        // SAFETY: no value on this thread's stack relies on its destructor running.
        unsafe { verify::exit_thread() };
    });
    verify::join_raw(t);
    let v = result.load(Ordering::SeqCst);
    assert_eq!(v >> 1, before + 1, "the getpid call was not trapped");
    assert_eq!(v & 1, 1, "a trapped getpid must not have run");
    assert_eq!(verify::first_trapped_syscall(), Some(libc::SYS_getpid));
}

/// Total bytes of the stream files under `dir` (what the consumer has written so far).
fn stream_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("stream_"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn many_subbuffer_switches_without_a_single_syscall() {
    let _g = serial();
    let dir = temp_dir("nosyscall-switches");
    const SUBBUF: usize = 4096;
    const NSUB: usize = 8;
    const CAPACITY: usize = SUBBUF * NSUB;
    // Each round writes a quarter of the ring, then waits (spinning, no syscall) until the main thread
    // has seen the consumer write to disk: the consumer provably drains while the thread runs in
    // the mode, and nothing needs to be discarded.
    const ROUNDS: usize = 88; // 88 * CAPACITY / 4 = 22 x the ring capacity
    hushtrace::disable("rtlate:*");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(SUBBUF)
        .num_subbufs(NSUB)
        .read_timer(Duration::from_millis(1))
        .start()
        .expect("start");
    let trace_dir = session.trace_dir();
    let ready = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let round_done = Arc::new(AtomicUsize::new(0));
    let round_ack = Arc::new(AtomicUsize::new(0));
    let tid = Arc::new(AtomicU32::new(0));
    let trapped = Arc::new(AtomicU64::new(u64::MAX));
    let calls = Arc::new(AtomicUsize::new(0));
    let bytes = Arc::new(AtomicUsize::new(0));
    let (r2, g2, rd2, ra2, t2, tr2, c2, b2) = (
        ready.clone(),
        go.clone(),
        round_done.clone(),
        round_ack.clone(),
        tid.clone(),
        trapped.clone(),
        calls.clone(),
        bytes.clone(),
    );
    let before = verify::trapped_syscalls();
    let th = std::thread::spawn(move || {
        hushtrace::set_thread_name("rt-probe");
        t2.store(gettid(), Ordering::SeqCst);
        hushtrace::set_thread_no_syscall();
        verify::trap_syscalls_on_this_thread().expect("seccomp");
        r2.store(true, Ordering::Release);
        spin_until(&g2); // the main thread enables `rtlate:*` meanwhile
        let (mut n, mut b) = (0usize, 0usize);
        let mut i = 0u64;
        for round in 1..=ROUNDS {
            let target = round * CAPACITY / 4;
            while b < target {
                // Sizes with compact headers (4 bytes); an extended one (11) after a pause of
                // 2^24 cycles only makes the ring fuller than `b` says, never emptier, so the
                // wait for `b - SUBBUF` bytes on disk below always ends.
                hushtrace::event!("rt", "a", i = i, x = i as f64 * 0.5); // 4 + 16 bytes
                hushtrace::event!("rt", "b", label = "static label", ok = i.is_multiple_of(2)); // 4+13+1
                hushtrace::event!("rtlate", "c", v = i as u32); // 4 + 4, enabled after entry
                n += 3;
                b += 20 + 18 + 8;
                if round > ROUNDS / 2 {
                    // A callsite never hit before this point.
                    hushtrace::event!("rt", "fresh", k = -(i as i64)); // 4 + 8
                    n += 1;
                    b += 12;
                }
                i += 1;
            }
            rd2.store(round, Ordering::Release);
            while ra2.load(Ordering::Acquire) < round {
                std::hint::spin_loop();
            }
        }
        c2.store(n, Ordering::SeqCst);
        b2.store(b, Ordering::SeqCst);
        hushtrace::clear_thread_no_syscall();
        tr2.store(verify::trapped_syscalls() - before, Ordering::SeqCst);
        // SAFETY: no value on this thread's stack relies on its destructor running.
        unsafe { verify::exit_thread() };
    });
    while !ready.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(hushtrace::enable("rtlate:*"), 1);
    go.store(true, Ordering::Release);
    for round in 1..=ROUNDS {
        while round_done.load(Ordering::Acquire) < round {
            std::thread::sleep(Duration::from_micros(100));
        }
        // The consumer must write every packet this round completed (all but the open one)
        // while the thread waits in the mode. No deadline: a starved consumer makes the test
        // slow, not wrong.
        let committed_at_least = (round * CAPACITY / 4 - SUBBUF) as u64;
        while stream_bytes(&trace_dir) < committed_at_least {
            std::thread::sleep(Duration::from_micros(200));
        }
        round_ack.store(round, Ordering::Release);
    }
    verify::join_raw(th);
    let stats = session.stop().expect("stop");

    assert_eq!(
        trapped.load(Ordering::SeqCst),
        0,
        "the no-syscall thread made a system call (first trapped: {:?})",
        verify::first_trapped_syscall()
    );
    let calls = calls.load(Ordering::SeqCst) as u64;
    assert_eq!(stats.events_written + stats.events_discarded, calls);
    assert_eq!(stats.events_discarded, 0, "{stats:?}");
    let switches = bytes.load(Ordering::SeqCst) / SUBBUF;
    assert!(switches >= 100, "only {switches} sub-buffer switches");
    assert!(bytes.load(Ordering::SeqCst) >= 20 * CAPACITY);

    let events = babeltrace(&dir, false);
    assert_eq!(events.len() as u64, stats.events_written);
    let tid = tid.load(Ordering::SeqCst);
    let count = |n: &str| events.iter().filter(|e| e.name == n).count();
    assert!(count("rt:a") > 0 && count("rt:b") > 0);
    assert_eq!(
        count("rtlate:c"),
        count("rt:a"),
        "callsite enabled after entry"
    );
    assert!(
        count("rt:fresh") > 0,
        "callsite first hit in the mode missing"
    );
    for e in &events {
        assert_eq!(e.vpid, std::process::id());
        assert_eq!(e.vtid, tid);
        assert_eq!(e.procname, "rt-probe");
    }
    let mut last = -1i128;
    for e in events.iter().filter(|e| e.name == "rt:a") {
        let i = e.int("i");
        assert_eq!(i, last + 1, "rt:a missing or out of order");
        last = i;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Steps of an ordering scenario. The no-syscall thread is created (T) and enters the mode (M)
/// under the seccomp filter; the main thread starts (S) and stops (X) sessions; the thread
/// emits (E) batches of events. Every step after M runs with the filter installed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    /// Main: start a session.
    Start,
    /// Main: stop the session.
    Stop,
    /// Thread: enter no-syscall mode and install the filter.
    Enter,
    /// Thread: emit a batch of 10 events.
    Emit,
}

fn run_order(order: &[Step]) {
    use Step::*;
    let _g = serial();
    let dir = temp_dir("nosyscall-order");
    let step = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let trapped = Arc::new(AtomicU64::new(u64::MAX));
    let tid = Arc::new(AtomicU32::new(0));
    let before = verify::trapped_syscalls();
    let steps: Vec<Step> = order.to_vec();
    let (s2, d2, tr2, t2, st2) = (
        step.clone(),
        done.clone(),
        trapped.clone(),
        tid.clone(),
        steps.clone(),
    );
    // Creating the thread is step "T": it happens now, before the listed steps.
    let th = std::thread::spawn(move || {
        hushtrace::set_thread_name("rt-order");
        t2.store(gettid(), Ordering::SeqCst);
        let mut entered = false;
        for (k, s) in st2.iter().enumerate() {
            while s2.load(Ordering::Acquire) < k {
                std::hint::spin_loop();
            }
            match s {
                Enter => {
                    hushtrace::set_thread_no_syscall();
                    verify::trap_syscalls_on_this_thread().expect("seccomp");
                    entered = true;
                }
                Emit => {
                    for j in 0..10u32 {
                        hushtrace::event!("order", "ev", batch = k as u32, j = j);
                    }
                }
                _ => {}
            }
            if matches!(s, Enter | Emit) {
                d2.store(k + 1, Ordering::Release);
            }
        }
        tr2.store(verify::trapped_syscalls() - before, Ordering::SeqCst);
        if entered {
            // SAFETY: no value on this thread's stack relies on its destructor running.
            unsafe { verify::exit_thread() };
        }
    });
    let mut session = None;
    let mut expected = Vec::new();
    let mut running = false;
    for (k, s) in steps.iter().enumerate() {
        step.store(k, Ordering::Release);
        match s {
            Start => {
                session = Some(
                    hushtrace::Session::builder()
                        .output_dir(dir.join(format!("s{k}")))
                        .subbuf_size(4096)
                        .num_subbufs(4)
                        .start()
                        .expect("start"),
                );
                running = true;
            }
            Stop => {
                let st = session.take().unwrap().stop().expect("stop");
                assert_eq!(st.events_discarded, 0);
                running = false;
            }
            Enter | Emit => {
                if *s == Emit && running {
                    expected.push(k as u32);
                }
                while done.load(Ordering::Acquire) < k + 1 {
                    std::thread::yield_now();
                }
            }
        }
    }
    step.store(steps.len(), Ordering::Release);
    verify::join_raw(th);
    if let Some(s) = session.take() {
        s.stop().expect("stop");
    }
    assert_eq!(
        trapped.load(Ordering::SeqCst),
        0,
        "order {order:?}: a system call was trapped (first: {:?})",
        verify::first_trapped_syscall()
    );
    let mut batches = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let events = babeltrace(&entry.unwrap().path(), false);
        for e in events {
            assert_eq!(e.vtid, tid.load(Ordering::SeqCst), "order {order:?}");
            assert_eq!(e.procname, "rt-order");
            batches.push(e.int("batch") as u32);
        }
    }
    batches.sort();
    let mut want: Vec<u32> = expected.iter().flat_map(|&b| [b; 10]).collect();
    want.sort();
    assert_eq!(batches, want, "order {order:?}: wrong events in the traces");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn order_session_first() {
    use Step::*;
    run_order(&[Start, Enter, Emit, Stop]);
}

#[test]
fn order_mode_before_session_start() {
    use Step::*;
    run_order(&[Enter, Emit, Start, Emit, Stop]);
}

#[test]
fn order_first_tracepoint_before_mode_and_session() {
    use Step::*;
    run_order(&[Emit, Enter, Start, Emit, Stop, Emit]);
}

#[test]
fn order_first_tracepoint_before_mode_inside_session() {
    use Step::*;
    run_order(&[Start, Emit, Enter, Emit, Stop]);
}

#[test]
fn order_session_restarts_while_in_mode() {
    use Step::*;
    run_order(&[Enter, Start, Emit, Stop, Emit, Start, Emit, Stop, Emit]);
}

#[test]
fn order_stop_while_in_mode_then_emit() {
    use Step::*;
    run_order(&[Start, Enter, Emit, Stop, Emit]);
}
