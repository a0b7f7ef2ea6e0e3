//! The consumer thread's scheduling and CPUs (`SessionBuilder::consumer_sched` and
//! `consumer_cpus`; `HUSHTRACE_CONSUMER_SCHED` and `HUSHTRACE_CONSUMER_CPUS` for sessions
//! started from the environment). They are read back from `/proc/self/task/<tid>`: the nice
//! value, the policy and real-time priority from `stat`, the CPUs from `status`. They apply to
//! the consumer thread only, never to the program's threads. They are applied again in the
//! consumer a fork child starts. What the kernel refuses is in the control status, and the
//! session records every event anyway.

mod common;

use common::{reader_cycles, run_forked, temp_dir};
use hushtrace::control::request;
use hushtrace::ConsumerSched;
use std::time::{Duration, Instant};

/// The consumer's kernel name (`hushtrace-consumer` cut to 15 bytes).
const CONSUMER_COMM: &str = "hushtrace-consu";

/// The thread id of this process's consumer, waiting up to 10 s for it to appear.
fn consumer_tid() -> Option<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for e in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.trim_end() == CONSUMER_COMM {
                return e.file_name().to_str()?.parse().ok();
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The thread's scheduling as `(nice, policy, real-time priority)`: `stat` fields 19, 41 and
/// 40 (counted from 1; the name in field 2 may hold blanks, so count after its `)`).
fn sched_of(tid: u32) -> (i64, i64, i64) {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<i64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(-1))
        .collect();
    // `rest` starts at field 3.
    (f[19 - 3], f[41 - 3], f[40 - 3])
}

/// The thread's `Cpus_allowed_list` (`0`, `0-1`).
fn cpus_of(tid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

fn my_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Records `n` events in a session from `builder` and returns its control status (taken
/// after the consumer started, so its scheduling is applied), the consumer's thread id, and
/// checks that all events were written.
fn run(builder: hushtrace::SessionBuilder, tag: &str, check: impl FnOnce(&str, u32)) {
    let dir = temp_dir(tag);
    let n = 3000u64;
    let session = builder
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(64)
        .start()
        .expect("start");
    // The status is answered by the consumer thread, after it applied its settings.
    let status = request(std::process::id(), "status").expect("status");
    let tid = consumer_tid().expect("no consumer thread");
    for seq in 0..n {
        hushtrace::event!("sched", "seq", seq = seq);
    }
    check(&status, tid);
    let stats = session.stop().expect("the session stops without an error");
    assert_eq!((stats.events_written, stats.events_discarded), (n, 0));
    let read = reader_cycles(&dir)
        .iter()
        .filter(|e| e.2 == "sched:seq")
        .count() as u64;
    assert_eq!(read, n);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether this process may give a thread `SCHED_FIFO` (root, `CAP_SYS_NICE` or
/// `ulimit -r`), tried on a thread of its own.
fn fifo_allowed() -> bool {
    std::thread::spawn(|| {
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: `p` lives across the call; pid 0 is this scratch thread, which ends next.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 }
    })
    .join()
    .unwrap()
}

/// Whether `ok` holds for thread `tid` within 5 s: a consumer thread has its name before it
/// has applied its settings, so the first look may come too early.
fn soon(tid: u32, ok: impl Fn(u32) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok(tid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Runs `child` in a fork child (`common::run_forked`, 30 s at most) and asserts that it
/// reports 0; `codes` says what the other exit codes mean.
fn assert_fork_child_ok(codes: &str, child: impl FnOnce() -> i32) {
    let (status, msg) = run_forked(Duration::from_secs(30), || (child(), String::new()));
    assert!(libc::WIFEXITED(status), "child status {status:#x} {msg}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "{codes}");
}

#[test]
fn nice_and_cpus_apply_to_the_consumer_only() {
    let before = sched_of(my_tid());
    let b = hushtrace::Session::builder()
        .consumer_sched(ConsumerSched::Nice(7))
        .consumer_cpus([0]);
    run(b, "sched-nice", |status, tid| {
        assert!(
            status.contains("\"consumer_sched\":\"nice:7\"")
                && status.contains("\"consumer_cpus\":[0]")
                && status.contains("\"consumer_sched_error\":null"),
            "{status}"
        );
        assert_eq!(sched_of(tid), (7, 0, 0), "nice 7, SCHED_OTHER");
        assert_eq!(cpus_of(tid), "0");
    });
    assert_eq!(
        sched_of(my_tid()),
        before,
        "the program's thread is untouched"
    );
}

#[test]
fn fifo_applies_when_allowed_and_is_reported_when_refused() {
    let allowed = fifo_allowed();
    let b = hushtrace::Session::builder().consumer_sched(ConsumerSched::Fifo(1));
    run(b, "sched-fifo", |status, tid| {
        assert!(status.contains("\"consumer_sched\":\"fifo:1\""), "{status}");
        let (_, policy, prio) = sched_of(tid);
        if allowed {
            assert!(status.contains("\"consumer_sched_error\":null"), "{status}");
            assert_eq!((policy, prio), (libc::SCHED_FIFO as i64, 1));
        } else {
            eprintln!("SCHED_FIFO is not allowed here: checking the refusal instead");
            assert!(
                status.contains("\"consumer_sched_error\":\"HUSHTRACE_CONSUMER_SCHED=fifo:1: "),
                "{status}"
            );
            assert_eq!(policy, libc::SCHED_OTHER as i64);
        }
    });
}

#[test]
fn a_cpu_that_is_not_online_is_reported_and_tracing_goes_on() {
    let b = hushtrace::Session::builder().consumer_cpus([1023]);
    run(b, "sched-offline", |status, tid| {
        assert!(
            status.contains("\"consumer_sched_error\":\"HUSHTRACE_CONSUMER_CPUS=1023: "),
            "{status}"
        );
        assert_ne!(cpus_of(tid), "1023");
    });
}

#[test]
fn the_environment_sets_the_consumer_scheduling() {
    let dir = temp_dir("sched-env");
    // nextest runs every test in a process of its own: the variables reach no other test.
    std::env::set_var("HUSHTRACE_OUTPUT", &dir);
    std::env::set_var("HUSHTRACE_CONSUMER_SCHED", "nice:5");
    std::env::set_var("HUSHTRACE_CONSUMER_CPUS", "0");
    let session = hushtrace::start_from_env()
        .expect("valid variables")
        .expect("a session");
    let status = request(std::process::id(), "status").expect("status");
    assert!(
        status.contains("\"consumer_sched\":\"nice:5\"")
            && status.contains("\"consumer_cpus\":[0]"),
        "{status}"
    );
    let tid = consumer_tid().expect("no consumer thread");
    assert_eq!(sched_of(tid).0, 5);
    assert_eq!(cpus_of(tid), "0");
    session.stop().expect("stop");
    std::env::set_var("HUSHTRACE_CONSUMER_SCHED", "fifo:100");
    let e = hushtrace::start_from_env().unwrap_err().to_string();
    assert!(
        e.contains("HUSHTRACE_CONSUMER_SCHED=\"fifo:100\"") && e.contains("1 to 99"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The consumer a fork child starts (on its first packet) gets the session's settings too;
/// the child reports through its exit status.
#[test]
fn a_fork_child_consumer_gets_the_same_scheduling() {
    let dir = temp_dir("sched-fork");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(64)
        .consumer_sched(ConsumerSched::Nice(9))
        .consumer_cpus([0])
        .start()
        .expect("start");
    assert!(consumer_tid().is_some());
    assert_fork_child_ok(
        "10: no consumer in the child, 11: wrong nice, 12: wrong CPUs",
        || {
            // Enough events for several packets: the first hand-over starts the child's consumer.
            for seq in 0..2000u64 {
                hushtrace::event!("sched", "child", seq = seq);
            }
            match consumer_tid() {
                None => 10,
                Some(tid) if !soon(tid, |t| sched_of(t).0 == 9) => 11,
                Some(tid) if !soon(tid, |t| cpus_of(t) == "0") => 12,
                Some(_) => 0,
            }
        },
    );
    session.stop().expect("stop");
    let _ = std::fs::remove_dir_all(&dir);
}

/// By default the consumer runs as the thread that started the session, also in a fork
/// child, where the thread that starts the consumer may be a real-time one: here the child's
/// only thread is at `SCHED_FIFO` 5 when its first packet starts the consumer, which must
/// still run at `SCHED_OTHER` like the session's starter (it would inherit `SCHED_FIFO`
/// otherwise).
#[test]
#[ignore = "needs SCHED_FIFO: root or `ulimit -r` (.ci/run runs it)"]
fn by_default_a_fork_child_consumer_runs_as_the_session_starter_not_as_a_realtime_thread() {
    assert!(
        fifo_allowed(),
        "SCHED_FIFO is not allowed here: needs root or `ulimit -r`"
    );
    let dir = temp_dir("sched-fork-inherit");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(64)
        .start()
        .expect("start");
    let starter = sched_of(my_tid());
    assert_eq!(
        starter.1,
        libc::SCHED_OTHER as i64,
        "the test runs at SCHED_OTHER"
    );
    let codes =
        "10: no consumer in the child, 11: the consumer does not run as the starter, 20: no FIFO";
    assert_fork_child_ok(codes, || {
        let p = libc::sched_param { sched_priority: 5 };
        // SAFETY: `p` lives across the call; pid 0 is the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
            return 20;
        }
        for seq in 0..2000u64 {
            hushtrace::event!("sched", "child", seq = seq);
        }
        match consumer_tid() {
            None => 10,
            Some(tid) if !soon(tid, |t| sched_of(t) == starter) => 11,
            Some(_) => 0,
        }
    });
    session.stop().expect("stop");
    let _ = std::fs::remove_dir_all(&dir);
}
