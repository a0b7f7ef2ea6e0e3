//! The flight recorder's guarantee (issue 10): for a process that dies at an arbitrary moment —
//! SIGKILL from outside, `abort()`, SIGSEGV in another thread, `exit` without stop — every
//! event whose tracepoint returned before the death is in the trace after `recover`: in discard
//! mode all of them but the ones counted as discarded; in overwrite mode the newest ones,
//! contiguous, ending with the last one written, at least `(num_subbufs - 1)` packets of them.
//!
//! Each round forks a child that records `crash:seq` events with an increasing sequence number
//! and publishes, in memory shared with the parent, how many tracepoints have returned; the
//! parent (or the child itself) kills it at a random moment, then recovers the session and
//! checks the sequence numbers. `HUSHTRACE_CRASH_ROUNDS` sets the rounds per mode (default 200).

mod common;

use common::{shared_counter, temp_dir};
use hushtrace_ctf::reader::{Session as Reader, Value};
use hushtrace_ctf::ringfile::recover_session;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const SUBBUF: usize = 4096;
const NUM: usize = 8;
/// Bytes of one `crash:seq` event at most (an extended header, a u64): a full packet holds at
/// least `(SUBBUF - 112) / EVENT` of them.
const EVENT: usize = hushtrace_ctf::layout::EXTENDED_HEADER_LEN + 8;

#[derive(Clone, Copy, Debug)]
enum Death {
    Kill,
    Abort,
    SegvInAnotherThread,
    ExitWithoutStop,
}

/// Tiny xorshift: reproducible rounds without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

extern "C" fn segv_later(_: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: a short sleep, then a deliberate null write: the fault under test.
    unsafe {
        libc::usleep(2000);
        std::ptr::write_volatile(std::ptr::null_mut::<u64>(), 1);
    }
    std::ptr::null_mut()
}

/// The child: records until it dies. Never returns.
fn child(
    dir: &std::path::Path,
    mode: hushtrace::Mode,
    death: Death,
    stop_at: u64,
    returned: &AtomicU64,
    flush: Duration,
) -> ! {
    let session = hushtrace::Session::builder()
        .output_dir(dir)
        .flush_interval(flush)
        .mode(mode)
        .subbuf_size(SUBBUF)
        .num_subbufs(NUM)
        .read_timer(Duration::from_millis(2))
        .start()
        .unwrap_or_else(|e| {
            eprintln!("child: {e}");
            // SAFETY: leaving the child.
            unsafe { libc::_exit(3) }
        });
    if let Death::SegvInAnotherThread = death {
        let mut t: libc::pthread_t = 0;
        // SAFETY: a thread that faults 2 ms from now.
        unsafe { libc::pthread_create(&mut t, std::ptr::null(), segv_later, std::ptr::null_mut()) };
    }
    let mut seq = 0u64;
    loop {
        hushtrace::event!("crash", "seq", seq = seq);
        seq += 1;
        returned.store(seq, Ordering::SeqCst);
        if seq == stop_at {
            match death {
                // SAFETY: the deliberate deaths under test.
                Death::Abort => unsafe { libc::abort() },
                Death::ExitWithoutStop => {
                    std::mem::forget(session);
                    std::process::exit(0)
                }
                _ => {}
            }
        }
        if seq.is_multiple_of(256) {
            std::thread::yield_now();
        }
    }
}

/// Sequence numbers of `crash:seq` in the (recovered) session, and the discarded count.
fn read_back(dir: &std::path::Path) -> (Vec<u64>, u64) {
    let r = Reader::open(dir).expect("open the recovered trace");
    let mut seqs = Vec::new();
    let mut m = r.merged().expect("readable");
    while let Some(ev) = m.next().expect("every recovered packet reads") {
        if ev.event.class.name == "crash:seq" {
            if let Some(Value::U64(s)) = ev.event.field(0) {
                seqs.push(s);
            }
        }
    }
    let mut discarded = 0;
    for t in &r.traces {
        for mut s in t.stream_readers().unwrap() {
            while s.advance().unwrap() {}
            discarded += s.events_discarded();
        }
    }
    (seqs, discarded)
}

fn rounds() -> u64 {
    std::env::var("HUSHTRACE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn run(mode: hushtrace::Mode, seed: u64) {
    // Calibrate the clock once here, so children inherit it and start at once.
    let warm = temp_dir("crash-warm");
    hushtrace::Session::builder()
        .output_dir(&warm)
        .start()
        .unwrap()
        .stop()
        .unwrap();
    let _ = std::fs::remove_dir_all(&warm);
    let returned = shared_counter();
    let mut rng = Rng(seed);
    let mut deaths = [0u32; 4];
    for round in 0..rounds() {
        let death = match round % 10 {
            0 => Death::Abort,
            1 => Death::SegvInAnotherThread,
            2 => Death::ExitWithoutStop,
            _ => Death::Kill,
        };
        let dir = temp_dir(&format!("crash-{mode:?}-{round}"));
        returned.store(0, Ordering::SeqCst);
        let stop_at = 500 + rng.next() % 20_000;
        let kill_after = Duration::from_micros(500 + rng.next() % 15_000);
        // SAFETY: the child only traces and dies (see `child`); it never returns here.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // Local-only sessions do not flush by default (the flush of idle threads is for
            // relays; a crash racing it with a full ring can duplicate events: issue 14).
            let flush = Duration::ZERO;
            child(&dir, mode, death, stop_at, returned, flush);
        }
        if let Death::Kill = death {
            std::thread::sleep(kill_after);
            // SAFETY: killing our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 3),
            "round {round}: the child could not start its session"
        );
        deaths[match death {
            Death::Kill => 0,
            Death::Abort => 1,
            Death::SegvInAnotherThread => 2,
            Death::ExitWithoutStop => 3,
        }] += 1;
        let count = returned.load(Ordering::SeqCst);
        if !dir.exists() {
            assert_eq!(
                count, 0,
                "round {round}: events returned but no trace directory"
            );
            continue; // killed before its session started
        }
        recover_session(&dir).unwrap_or_else(|e| panic!("round {round} ({death:?}): {e}"));
        // Idempotent: a second recovery changes nothing.
        let again = recover_session(&dir).unwrap();
        assert!(
            again.iter().all(|p| p.rings == 0),
            "round {round}: {again:?}"
        );
        if count == 0 {
            let _ = std::fs::remove_dir_all(&dir);
            continue; // died before its first event returned
        }
        let (seqs, discarded) = read_back(&dir);
        let ctx = format!("round {round} ({mode:?}, {death:?}): {count} returned, {} recovered, {discarded} discarded", seqs.len());
        assert!(
            seqs.windows(2).all(|w| w[1] > w[0]),
            "{ctx}: order or duplicates"
        );
        // Nothing that was not written: at most one event past the counter (it may have
        // completed just before the death, after its tracepoint wrote it).
        assert!(
            seqs.last().is_none_or(|&l| l <= count),
            "{ctx}: last {:?}",
            seqs.last()
        );
        match mode {
            hushtrace::Mode::Discard => {
                let missing = count - seqs.iter().filter(|&&s| s < count).count() as u64;
                assert!(missing <= discarded, "{ctx}: {missing} missing");
            }
            hushtrace::Mode::Overwrite => {
                // Overwrite mode never discards: it ends with the last event written.
                assert!(seqs.last().is_some_and(|&l| l + 1 >= count), "{ctx}");
                let first = seqs[0];
                assert_eq!(
                    seqs.len() as u64,
                    seqs.last().unwrap() - first + 1,
                    "{ctx}: not contiguous"
                );
                // (num_subbufs - 1) whole packets: every slot but the one being reopened.
                let min = ((NUM - 1) * ((SUBBUF - 112) / EVENT)) as u64;
                assert!(
                    first == 0 || seqs.len() as u64 >= min,
                    "{ctx}: only {} events kept",
                    seqs.len()
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    eprintln!(
        "{mode:?}: {} rounds: {} SIGKILL, {} abort, {} SIGSEGV, {} exit without stop",
        rounds(),
        deaths[0],
        deaths[1],
        deaths[2],
        deaths[3]
    );
}

#[test]
fn discard_mode_keeps_every_event_that_returned() {
    run(hushtrace::Mode::Discard, 0x9e37_79b9_7f4a_7c15);
}

#[test]
fn overwrite_mode_keeps_the_newest_events_contiguous() {
    run(hushtrace::Mode::Overwrite, 0xdead_beef_cafe_f00d);
}
