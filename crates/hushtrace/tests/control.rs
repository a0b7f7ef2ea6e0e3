//! Flight recorder control (issue 10): snapshots on demand (also from a no-syscall thread,
//! proven under seccomp), the control socket (`hushtrace ctl`), and the start-up filter
//! `HUSHTRACE_ENABLE`.

mod common;

use common::{babeltrace, temp_dir, wait_until};
use hushtrace::control::request;
use hushtrace::verify;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn flight_recorder(dir: &std::path::Path) -> hushtrace::Session {
    hushtrace::Session::builder()
        .output_dir(dir)
        .mode(hushtrace::Mode::Overwrite)
        .subbuf_size(4096)
        .num_subbufs(8)
        .read_timer(Duration::from_millis(2))
        .start()
        .unwrap()
}

/// The sequence numbers of `fr:tick` events in a trace directory.
fn seqs(dir: &std::path::Path) -> Vec<i128> {
    babeltrace(dir, true)
        .iter()
        .filter(|e| e.name == "fr:tick")
        .map(|e| e.int("seq"))
        .collect()
}

#[test]
fn snapshot_holds_the_newest_events_contiguous_and_tracing_goes_on() {
    let _g = serial();
    let dir = temp_dir("snapshot");
    let session = flight_recorder(&dir);
    for seq in 0..20_000u64 {
        hushtrace::event!("fr", "tick", seq = seq);
    }
    let snap = hushtrace::snapshot().unwrap();
    // The thread keeps tracing while the consumer takes the snapshot.
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        let mut n = 0u64;
        while !s2.load(Ordering::Relaxed) {
            hushtrace::event!("fr", "other", n = n);
            n += 1;
        }
    });
    let path = snap.wait(Duration::from_secs(10)).unwrap();
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    assert!(
        path.starts_with(dir.join("snapshots")),
        "{}",
        path.display()
    );
    assert!(path.join("metadata").is_file());
    {
        let s = seqs(path.parent().unwrap());
        // The newest events, contiguous, ending with the last one written before the request.
        assert!(!s.is_empty());
        assert_eq!(
            *s.last().unwrap(),
            19_999,
            "the snapshot ends with the last event"
        );
        assert!(s.windows(2).all(|w| w[1] == w[0] + 1), "contiguous");
        // At least (num_subbufs - 1) - 1 packets' worth (the open one is closed by the request).
        // (Events take 12 bytes with a compact header, 19 at most with an extended one.)
        let ev = hushtrace_ctf::layout::EXTENDED_HEADER_LEN + 8;
        assert!(s.len() >= 6 * (4096 - 112) / ev - 1, "{} events", s.len());
    }
    session.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn snapshot_needs_a_flight_recorder_session() {
    let _g = serial();
    assert!(matches!(
        hushtrace::snapshot(),
        Err(hushtrace::Error::NotRunning)
    ));
    let dir = temp_dir("snapshot-discard");
    let s = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .unwrap();
    let e = hushtrace::snapshot().unwrap_err();
    assert!(e.to_string().contains("overwrite mode"), "{e}");
    s.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A control loop in no-syscall mode requests a snapshot when it "misses a deadline": no
/// system call (seccomp filter: 0 traps), and the consumer writes it.
#[test]
fn snapshot_from_a_no_syscall_thread_makes_no_syscall() {
    let _g = serial();
    let dir = temp_dir("snapshot-rt");
    let session = flight_recorder(&dir);
    let before = verify::trapped_syscalls();
    let number = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let n2 = number.clone();
    let t = std::thread::spawn(move || {
        hushtrace::set_thread_no_syscall();
        verify::trap_syscalls_on_this_thread().expect("seccomp");
        for seq in 0..10_000u64 {
            hushtrace::event!("fr", "tick", seq = seq);
            if seq == 5_000 {
                // Missed deadline.
                if let Ok(s) = hushtrace::snapshot() {
                    n2.store(s.number(), Ordering::SeqCst);
                }
            }
        }
        // SAFETY: no value on this thread's stack relies on its destructor running.
        unsafe { verify::exit_thread() };
    });
    verify::join_raw(t);
    assert_eq!(verify::trapped_syscalls() - before, 0, "system calls");
    let n = number.load(Ordering::SeqCst);
    assert!(n > 0, "snapshot() failed on the no-syscall thread");
    // The consumer answers the request on its next pass; the snapshot is complete once its
    // metadata, written last, is there.
    let d = dir.join("snapshots").join(n.to_string());
    let metadata = d.join(std::process::id().to_string()).join("metadata");
    wait_until("the consumer to write the snapshot", || metadata.exists());
    {
        let s = seqs(&d);
        assert!(!s.is_empty());
        assert!(s.windows(2).all(|w| w[1] == w[0] + 1), "contiguous");
        assert!(*s.last().unwrap() >= 5_000);
    }
    session.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn control_socket_status_enable_disable_snapshot_stop() {
    let _g = serial();
    let dir = temp_dir("ctl");
    let session = flight_recorder(&dir);
    let pid = std::process::id();
    hushtrace::event!("ctl", "visible", x = 1u8);
    // The consumer serves the socket on its read timer.
    let status = request(pid, "status").unwrap();
    assert!(status.contains("\"ok\":true"), "{status}");
    assert!(status.contains("\"mode\":\"overwrite\""), "{status}");
    assert!(status.contains("\"subbuf_size\":4096"), "{status}");
    assert!(status.contains("\"threads\":["), "{status}");
    let v: Vec<&str> = status.matches("\"vtid\":").collect();
    assert!(!v.is_empty(), "per-thread entries: {status}");

    let a = request(pid, "disable ctl:*").unwrap();
    assert!(a.contains("\"matched\":"), "{a}");
    hushtrace::event!("ctl", "hidden", x = 2u8);
    let a = request(pid, "enable ctl:*").unwrap();
    assert!(a.contains("\"ok\":true"), "{a}");

    let a = request(pid, "snapshot").unwrap();
    assert!(a.contains("\"path\":"), "{a}");
    let custom = temp_dir("ctl-snap");
    let a = request(pid, &format!("snapshot {}", custom.display())).unwrap();
    assert!(a.contains(&custom.display().to_string()), "{a}");
    assert!(std::fs::read_dir(&custom).unwrap().count() == 1);

    // Bad requests: clear errors, and the server keeps running.
    for bad in ["launch", "enable", "status now", &"x".repeat(5000)] {
        let a = request(pid, bad).unwrap();
        assert!(a.contains("\"ok\":false"), "{bad:?}: {a}");
    }
    assert!(request(pid, "ping").unwrap().contains("\"ok\":true"));

    let a = request(pid, "stop").unwrap();
    assert!(a.contains("\"stopping\":true"), "{a}");
    // The session stops from outside; the handle's own stop returns its statistics.
    let stats_file = dir.join(format!("{pid}.stats.json"));
    wait_until("ctl stop to stop the session", || stats_file.exists());
    let stats = session.stop().unwrap();
    assert!(stats.events_written >= 1);
    {
        let ev = babeltrace(&stats.trace_dir, true);
        assert!(ev.iter().any(|e| e.name == "ctl:visible"));
        assert!(
            !ev.iter().any(|e| e.name == "ctl:hidden"),
            "disable had no effect"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&custom);
}

#[test]
fn control_errors_name_the_problem() {
    // A pid with no process, and a process that is not traced (pid 1).
    let e = request(999_999_999, "status").unwrap_err().to_string();
    assert!(e.contains("no process 999999999"), "{e}");
    let e = request(1, "status").unwrap_err().to_string();
    assert!(e.contains("serves no control socket"), "{e}");
}

#[test]
fn start_up_filter_from_the_environment() {
    let _g = serial();
    let dir = temp_dir("enable-env");
    let lines = common::run_test_env(
        &[
            ("HUSHTRACE_OUTPUT", dir.to_str().unwrap()),
            ("HUSHTRACE_ENABLE", "-*,env:*"),
        ],
        100,
    );
    assert!(
        lines.iter().any(|l| l.contains("\"written\":100,")),
        "{lines:?}"
    );
    let off = temp_dir("enable-env-off");
    let lines = common::run_test_env(
        &[
            ("HUSHTRACE_OUTPUT", off.to_str().unwrap()),
            ("HUSHTRACE_ENABLE", "env:*, -env:ev"),
        ],
        100,
    );
    assert!(
        lines.iter().any(|l| l.contains("\"written\":0,")),
        "{lines:?}"
    );
    let _ = std::fs::remove_dir_all(&off);
    let bad = common::run_test_env(
        &[
            ("HUSHTRACE_OUTPUT", dir.to_str().unwrap()),
            ("HUSHTRACE_ENABLE", "app:*,-"),
        ],
        10,
    );
    assert!(
        bad.iter().any(|l| l.contains("HUSHTRACE_ENABLE")),
        "{bad:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fork child is controllable on its own (its own socket, its own status) and, killed,
/// recovers on its own: its rings are its own files, recovered into its own trace directory.
#[test]
fn fork_child_is_controllable_and_recovers_on_its_own() {
    let _g = serial();
    let dir = temp_dir("ctl-fork");
    let session = flight_recorder(&dir);
    hushtrace::event!("fr", "parent", x = 1u8);
    // A flag in memory shared with the child: set once it has recorded everything.
    let done = common::shared_counter();
    // SAFETY: the child traces from a new thread and waits to be killed; it never returns.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        hushtrace::init_thread(); // starts the child's consumer (and its control socket)
                                  // The thread stays alive: its newest events are only in its ring when the child dies.
        std::thread::spawn(move || {
            for seq in 0..5_000u64 {
                hushtrace::event!("fr", "tick", seq = seq);
            }
            done.store(1, Ordering::SeqCst);
            loop {
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        loop {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let child = pid as u32;
    let mut status = None;
    wait_until("the child to serve its own control socket", || {
        status = request(child, "status").ok();
        status.is_some()
    });
    let status = status.unwrap();
    assert!(status.contains(&format!("\"pid\":{child}")), "{status}");
    assert!(
        status.contains(&format!("/{child}\"")),
        "its own trace directory: {status}"
    );
    wait_until("the child to finish recording", || {
        done.load(Ordering::SeqCst) == 1
    });
    // SAFETY: killing our own child, then reaping it: once reaped, it writes nothing more.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    let rec = hushtrace_ctf::ringfile::recover_session(&dir).unwrap();
    // The parent still runs: its rings are left alone.
    assert!(
        rec.iter()
            .filter(|p| p.pid == std::process::id())
            .all(|p| p.rings == 0 && p.live > 0),
        "{rec:?}"
    );
    let mine: Vec<_> = rec.iter().filter(|p| p.pid == child).collect();
    assert_eq!(mine.len(), 1, "{rec:?}");
    assert!(mine[0].recovered.events > 0, "{rec:?}");
    session.stop().unwrap();
    {
        let ev = babeltrace(&dir.join(child.to_string()), true);
        let ticks: Vec<i128> = ev
            .iter()
            .filter(|e| e.name == "fr:tick")
            .map(|e| e.int("seq"))
            .collect();
        assert!(!ticks.is_empty());
        assert_eq!(
            *ticks.last().unwrap(),
            4_999,
            "ends with the child's last event"
        );
        assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "contiguous");
        assert!(ev.iter().all(|e| e.vpid == child));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ctl PID stop` and `ctl PID start` reach a fork child's session: the session layer's stop
/// and start are in the session state the child inherited, not in a hook of the parent.
#[test]
fn fork_child_is_stopped_and_started_from_outside() {
    let _g = serial();
    let dir = temp_dir("ctl-fork-stop");
    let session = flight_recorder(&dir);
    hushtrace::event!("fr", "parent", x = 1u8);
    // SAFETY: the child traces, then sleeps until it is killed; it never returns.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        hushtrace::init_thread(); // starts the child's consumer (and its control socket)
        hushtrace::event!("fr", "child", x = 2u8);
        loop {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let child = pid as u32;
    wait_until("the child's control socket", || {
        request(child, "status").is_ok_and(|a| a.contains("\"state\":\"running\""))
    });
    let a = request(child, "stop").unwrap();
    assert!(a.contains("\"stopping\":true"), "{a}");
    wait_until("the child's statistics", || {
        dir.join(format!("{child}.stats.json")).exists()
    });
    wait_until("a stopped status", || {
        request(child, "status").is_ok_and(|a| a.contains("\"state\":\"stopped\""))
    });
    let a = request(child, "start").unwrap();
    assert!(a.contains("\"state\":\"running\""), "{a}");
    assert!(
        a.contains(&format!("/{child}.1\"")),
        "a new trace directory: {a}"
    );
    let mut status = String::new();
    wait_until("a running status", || {
        status = request(child, "status").unwrap_or_default();
        status.contains("\"state\":\"running\"")
    });
    for want in [
        "\"mode\":\"overwrite\"",
        "\"subbuf_size\":4096",
        "\"num_subbufs\":8",
    ] {
        assert!(status.contains(want), "{want} in {status}");
    }
    // SAFETY: killing our own child, then reaping it.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    // The parent's session is untouched by the child's stop.
    assert!(request(std::process::id(), "status")
        .unwrap()
        .contains("\"state\":\"running\""));
    session.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
