//! The capture on the real kernel, without the CLI: events of a child process, per-CPU time
//! order, the instance removed by `finish` and by drop, babeltrace2 on the result.
//!
//! Shares the lock file of `crates/hushtrace-cli/tests/kernel.rs` (ftrace instances are
//! global); they fail where tracefs cannot be used (run them as root).

use hushtrace_kernel::{Capture, Event, KEvent, KernelTrace, Options};
use std::process::Command;

/// The cross-process lock of the kernel tests. Panics where tracefs cannot be used: these
/// tests must run (as root, with tracefs), never pass by skipping.
fn lock(test: &str) -> Option<std::fs::File> {
    if let Err(e) = hushtrace_kernel::tracefs::find_or_mount() {
        panic!("{test} needs tracefs (run as root): {e}");
    }
    Some(hushtrace_testsupport::cross_process_lock(
        "hushtrace-kernel-tests",
    ))
}

/// Every event of `k`, in time order.
fn all(k: &KernelTrace) -> Vec<KEvent> {
    let mut ev = k.events().unwrap();
    let mut v = Vec::new();
    while let Some(e) = ev.next().unwrap() {
        v.push(e);
    }
    v
}

fn instance_exists() -> bool {
    let root = hushtrace_kernel::tracefs::find_or_mount().unwrap();
    let me = hushtrace_kernel::owner::Owner::current().unwrap();
    root.join("instances").join(me.instance_name("")).exists()
}

#[test]
fn capture_records_a_child_and_cleans_up() {
    let Some(_l) = lock("capture_records_a_child_and_cleans_up") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cap = Capture::start(tmp.path(), &Options::default()).unwrap();
    assert!(instance_exists());
    let child = Command::new("sleep").arg("0.05").spawn().unwrap();
    let pid = child.id() as i64;
    let mut child = child;
    child.wait().unwrap();
    let s = cap.finish(None).unwrap();
    assert!(!instance_exists(), "instance left after finish");
    assert!(s.events() > 0 && s.lost() == 0, "{s:?}");

    let k = KernelTrace::open(&tmp.path().join("kernel")).unwrap();
    assert_eq!(k.trace_clock, s.trace_clock);
    let events = all(&k);
    // SAFETY: gettid has no arguments and cannot fail.
    let me = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    let pid = pid as i32;
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.event, Event::SchedProcessFork(f)
            if f.parent_tid == me && f.child_tid == pid)),
        "no fork of {pid} by {me}"
    );
    assert!(events
        .iter()
        .any(|e| matches!(&e.event, Event::SchedSwitch(s)
        if s.prev_tid == pid && s.prev_comm.as_str() == "sleep")));
    assert!(events
        .iter()
        .any(|e| matches!(&e.event, Event::SchedProcessExit(x) if x.tid == pid)));
    // Per CPU, time never goes back (the reader keeps each CPU's order).
    for cpu in &k.cpus {
        let ts: Vec<u64> = events
            .iter()
            .filter(|e| e.cpu == *cpu)
            .map(|e| e.ts)
            .collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "cpu {cpu} goes back");
    }
    // The events' times are now-ish in the epoch (the recorder's TSC calibration or mono).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128;
    let first = k.epoch_ns(events[0].ts);
    assert!(
        (now - first).abs() < 60_000_000_000,
        "first event {first}, now {now}"
    );

    if let Ok(out) = Command::new("babeltrace2")
        .arg(tmp.path().join("kernel"))
        .output()
    {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("prev_tid = {pid}")));
    } else {
        panic!("babeltrace2 is required (apt-get install -y babeltrace2)");
    }
}

#[test]
fn dropping_a_capture_removes_its_instance() {
    let Some(_l) = lock("dropping_a_capture_removes_its_instance") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cap = Capture::start(tmp.path(), &Options::default()).unwrap();
    assert!(instance_exists());
    drop(cap);
    assert!(!instance_exists());
    // The metadata was written at the start: what was recorded still reads.
    KernelTrace::open(&tmp.path().join("kernel")).unwrap();
}

#[test]
fn the_metadata_is_written_before_the_first_packet() {
    let Some(_l) = lock("the_metadata_is_written_before_the_first_packet") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cap = Capture::start(tmp.path(), &Options::default()).unwrap();
    // Before any packet (and whatever happens to the recorder from now on, SIGKILL
    // included), the kernel trace has its metadata, with the clock chosen at the start.
    let k = KernelTrace::open(&tmp.path().join("kernel")).unwrap();
    let s = cap.finish(None).unwrap();
    assert_eq!(k.trace_clock, s.trace_clock);
    assert_eq!(k.clock.note, s.clock_note);
}

#[test]
fn stale_instances_are_removed_unless_in_use() {
    let Some(_l) = lock("stale_instances_are_removed_unless_in_use") else {
        return;
    };
    let root = hushtrace_kernel::tracefs::find_or_mount().unwrap();
    let mut dead = Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    // Named as a recorder of this PID namespace that has exited.
    let me = hushtrace_kernel::owner::Owner::current().unwrap();
    let name = hushtrace_kernel::owner::Owner { pid, ..me }.instance_name("");
    let path = root.join("instances").join(&name);
    std::fs::create_dir(&path).unwrap();
    // In use (as by a recorder in another pid namespace): left alone, still on.
    let open = std::fs::File::open(path.join("per_cpu/cpu0/trace_pipe_raw")).unwrap();
    assert!(!hushtrace_kernel::tracefs::remove_stale(&root)
        .removed
        .contains(&name));
    assert!(path.exists());
    assert_eq!(
        std::fs::read_to_string(path.join("tracing_on"))
            .unwrap()
            .trim(),
        "1"
    );
    drop(open);
    assert!(hushtrace_kernel::tracefs::remove_stale(&root)
        .removed
        .contains(&name));
    assert!(!path.exists());
}
