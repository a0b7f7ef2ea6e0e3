//! A relay that stalls (issue 18, point 7): `lttng-relayd` stopped with SIGSTOP keeps its
//! sockets — connections are accepted, nothing is answered. Nothing local waits for it: the
//! local trace holds every event (exact counts), short threads register without waiting, and
//! fork children exit without waiting for the relay.
//!
//! The traced program is this test binary run again with `ROLE` set (it forks).

mod common;

use common::temp_dir;
use hushtrace_testsupport::{babeltrace, Relayd};
use hushtrace_testsupport::{stdout_lines, wait_line, wait_or_kill};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "HUSHTRACE_RELAY_STALLED_ROLE";
/// Events of the main thread.
const MAIN_EVENTS: u64 = 300_000;
/// Short threads, and events each.
const SHORT_THREADS: u64 = 2_000;
const SHORT_EVENTS: u64 = 10;
/// Fork children (one after the other), and events of each of their two threads.
const FORKS: u64 = 10;
const CHILD_EVENTS: u64 = 1_000;
/// Events of the relay-only run.
const RELAY_ONLY_EVENTS: u64 = 50_000;

/// Not a test of its own: the traced program runs this.
#[test]
fn role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var("OUT").unwrap());
    let paused = PathBuf::from(std::env::var("PAUSED").unwrap());
    let session = hushtrace::Session::builder()
        .output_dir(&out)
        .relay(&std::env::var("RELAY").unwrap())
        .relay_host_name("stallhost")
        .relay_session_name("stalled")
        .relay_only(std::env::var_os("RELAY_ONLY").is_some())
        .subbuf_size(64 * 1024)
        .num_subbufs(8)
        .start()
        .expect("start");
    println!("\nstarted");
    if std::env::var_os("RELAY_ONLY").is_some() {
        return relay_only_role(session, &paused);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !paused.exists() {
        assert!(Instant::now() < deadline, "the relay was never paused");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A steady stream well within what the consumer drains to disk.
    for seq in 0..MAIN_EVENTS {
        hushtrace::event!("stall", "ev", seq = seq);
        if seq % 500 == 499 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let t_main = Instant::now();
    // Short threads, a few at a time.
    for batch in 0..SHORT_THREADS / 8 {
        let threads: Vec<_> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    for k in 0..SHORT_EVENTS {
                        hushtrace::event!("stall", "short", t = batch * 8 + i, k = k);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
    let t_threads = Instant::now();
    // Fork children, one after the other: each traces and exits.
    for _ in 0..FORKS {
        // SAFETY: the tracer's atfork handlers make fork safe; the child traces with two
        // threads of its own and exits (its exit handler stops its session).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let w = std::thread::spawn(|| {
                for seq in 0..CHILD_EVENTS {
                    hushtrace::event!("stall", "child", seq = seq);
                }
            });
            for seq in 0..CHILD_EVENTS {
                hushtrace::event!("stall", "child", seq = seq);
            }
            w.join().unwrap();
            std::process::exit(0);
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
    let t_forks = Instant::now();
    let stats = session.stop().expect("stop");
    // (Times for the record, not checked: machines are noisy.)
    println!(
        "\nresult emitted={} written={} discarded={} threads_ms={} forks_ms={} stop_ms={}",
        MAIN_EVENTS + SHORT_THREADS * SHORT_EVENTS,
        stats.events_written,
        stats.events_discarded,
        (t_threads - t_main).as_millis(),
        (t_forks - t_threads).as_millis(),
        t_forks.elapsed().as_millis()
    );
}

/// Relay-only: the main thread's events only, then stop.
fn relay_only_role(session: hushtrace::Session, paused: &Path) {
    while !paused.exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    for seq in 0..RELAY_ONLY_EVENTS {
        hushtrace::event!("stall", "ev", seq = seq);
        if seq % 500 == 499 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // The relay's copy is the trace: its loss is the session's, and stop() says so.
    let stats = match session.stop() {
        Ok(s) => s,
        Err(hushtrace::Error::Stop { stats, .. }) => stats,
        Err(e) => panic!("stop: {e}"),
    };
    println!(
        "\nresult emitted={RELAY_ONLY_EVENTS} written={} discarded={}",
        stats.events_written, stats.events_discarded
    );
}

/// Runs the traced program against `relay`, pauses the relay once the session is connected,
/// and waits (at most `bound`) for the program to end; returns its result line and stderr.
fn run_paused(
    relay: &Relayd,
    out_dir: &Path,
    relay_only: bool,
    bound: Duration,
) -> (String, String) {
    let paused = out_dir.with_extension("paused");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "role", "--nocapture", "--test-threads=1"])
        .env(ROLE, "1")
        .env("OUT", out_dir)
        .env("PAUSED", &paused)
        .env("RELAY", relay.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("HUSHTRACE_") {
            cmd.env_remove(k);
        }
    }
    if relay_only {
        cmd.env("RELAY_ONLY", "1");
    }
    let mut child = cmd.spawn().expect("run the traced program");
    let rx = stdout_lines(&mut child);
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    wait_line(&rx, "started", Duration::from_secs(60));
    relay.pause();
    std::fs::write(&paused, b"").unwrap();
    let Some(status) = wait_or_kill(&mut child, bound) else {
        relay.resume();
        panic!("the program did not finish within {bound:?} while the relay was stopped");
    };
    relay.resume();
    let err = err.join().unwrap();
    let _ = std::fs::remove_file(&paused);
    assert!(
        status.success(),
        "the traced program failed ({status}):\n{err}"
    );
    (wait_line(&rx, "result ", Duration::from_secs(5)), err)
}

/// The relay is stopped (SIGSTOP) right after the session connected to it. The program then
/// emits 300,000 events from its main thread, runs 2,000 short threads and 10 fork children
/// one after the other, and stops. It finishes (a generous 180 s bound: before, the consumer
/// sat in 5 s relay timeouts, each new thread waited up to 200 ms and each child's exit
/// waited for the relay), its statistics count every event as written, and the local trace
/// holds exactly every event of every thread and process.
#[test]
fn stalled_relay_leaves_the_local_trace_complete_and_nothing_waits() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let relay = Relayd::start();
    let out_dir = temp_dir("relay-stalled");
    let (result, err) = run_paused(&relay, &out_dir, false, Duration::from_secs(180));
    let v: std::collections::BTreeMap<&str, u64> = result
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    assert_eq!(
        (v["written"], v["discarded"]),
        (v["emitted"], 0),
        "the local trace lost events to the stalled relay: {result}\n{err}"
    );
    assert!(
        err.contains("could not be streamed to the relay"),
        "the relay copy's loss is not reported: {err}"
    );
    eprintln!("{result}");
    let text = babeltrace(&out_dir);
    let count = |name: &str| text.lines().filter(|l| l.contains(name)).count() as u64;
    assert_eq!(count("stall:ev"), MAIN_EVENTS);
    assert_eq!(count("stall:short"), SHORT_THREADS * SHORT_EVENTS);
    assert_eq!(count("stall:child"), FORKS * 2 * CHILD_EVENTS);
    assert!(Path::new(&out_dir).is_dir());
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// Relay-only, the relay stopped: the program still ends (bounded by a generous 60 s), every
/// event is accounted for, and what the relay could not take counts as discarded (there is no
/// local copy) and is reported.
#[test]
fn stalled_relay_in_relay_only_mode_counts_the_loss_and_does_not_hang() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let relay = Relayd::start();
    let out_dir = temp_dir("relay-stalled-only");
    let (result, err) = run_paused(&relay, &out_dir, true, Duration::from_secs(60));
    let v: std::collections::BTreeMap<&str, u64> = result
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    assert_eq!(v["written"] + v["discarded"], v["emitted"], "{result}");
    assert!(v["discarded"] > 0, "{result}");
    assert!(
        err.contains("could not be streamed to the relay") && err.contains("counted as discarded"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}
