//! `record --kernel` killed at random moments (a few seeded delays): SIGKILL of `record`, of
//! its guard process, of both. Afterwards the kernel trace reads (after `hushtrace recover` at
//! most) with every complete packet, babeltrace2 included, no ftrace instance is left behind,
//! and `report` / `convert` say when a kernel part cannot be read instead of dropping it.
//!
//! Needs root and tracefs: fails (never skips) without them. Shares the kernel tests' lock
//! file (ftrace instances are global).

mod common;

use common::{hushtrace, testbin, wait_until, BIN};
use hushtrace_kernel::owner::Owner;
use hushtrace_kernel::KernelTrace;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// The delays (ms after the ping-pong began) the kills happen at, from a fixed seed.
fn delays(seed: u64, n: usize) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            200 + (x >> 33) % 1300
        })
        .collect()
}

fn lock() -> std::fs::File {
    if let Err(e) = hushtrace_kernel::tracefs::find_or_mount() {
        panic!("these tests need tracefs (run them as root): {e}");
    }
    hushtrace_testsupport::cross_process_lock("hushtrace-kernel-tests")
}

/// The ftrace instances of recorder `pid` of this PID namespace.
fn instances_of(pid: u32) -> Vec<PathBuf> {
    let root = hushtrace_kernel::tracefs::find_or_mount().unwrap();
    let me = Owner::current().unwrap();
    std::fs::read_dir(root.join("instances"))
        .unwrap()
        .flatten()
        .filter(|e| {
            Owner::parse(&e.file_name().to_string_lossy())
                .is_some_and(|o| o.pid == pid && o.ns == me.ns)
        })
        .map(|e| e.path())
        .collect()
}

/// A `record --kernel` of a program that never ends by itself, in a process group of its own
/// (its guard has another); everything is killed on drop.
struct Recording {
    child: Option<Child>,
    pid: u32,
    dir: PathBuf,
}

impl Recording {
    /// Starts it and waits until the program's own traces are complete (the ping-pong runs).
    fn start(dir: &Path) -> Recording {
        // A small program trace (`report` reads it in a moment), then an untraced ping-pong
        // until killed (scheduler events at a high rate), one process that gets the signals
        // `record` passes on.
        let script = format!(
            "'{}' 2 200 && exec env -u HUSHTRACE_OUTPUT '{}' pingpong 1000000000",
            testbin("traced_app").display(),
            testbin("kernel_workload").display()
        );
        let child = Command::new(BIN)
            .args(["record", "--kernel", "sched", "-o"])
            .arg(dir)
            .args(["--", "sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut r = Recording {
            pid: child.id(),
            child: Some(child),
            dir: dir.to_path_buf(),
        };
        wait_until("the program started", || {
            let c = r.child.as_mut().unwrap();
            assert!(c.try_wait().unwrap().is_none(), "record exited early");
            user_traces_done(dir)
        });
        r
    }

    /// Its guard process.
    fn guard(&self) -> u32 {
        let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pid))
            .unwrap_or_default();
        kids.split_whitespace()
            .filter_map(|k| k.parse().ok())
            .find(|k| {
                std::fs::read(format!("/proc/{k}/cmdline")).is_ok_and(|c| {
                    c.split(|&b| b == 0)
                        .any(|a| a == hushtrace_kernel::capture::GUARD_NAME.as_bytes())
                })
            })
            .expect("record has a guard process")
    }

    /// SIGKILL to `record`, then to what is left of its process group (the program).
    fn kill_record(&mut self) {
        kill(self.pid, libc::SIGKILL);
        let mut c = self.child.take().unwrap();
        c.wait().unwrap();
        // SAFETY: signals the process group this test created.
        unsafe { libc::kill(-(self.pid as i32), libc::SIGKILL) };
    }

    /// SIGTERM to `record` (passed on to the program): it ends cleanly.
    fn stop(&mut self) -> Output {
        kill(self.pid, libc::SIGTERM);
        self.child.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            // SAFETY: signals the process group this test created.
            unsafe { libc::kill(-(self.pid as i32), libc::SIGKILL) };
        }
        let _ = &self.dir;
    }
}

/// Whether `traced_app` (a process and its child) finished its traces: two statistics files.
fn user_traces_done(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".stats.json"))
            .count()
            >= 2
    })
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: signals a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "kill {pid}");
}

/// The sizes of the kernel stream files.
fn stream_sizes(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir.join("kernel"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("channel"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

/// `hushtrace recover DIR`: succeeds; its output.
fn recover(dir: &Path) -> String {
    let o = hushtrace(&["recover", dir.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "recover: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// babeltrace2 reads `DIR/kernel` without an error, with as many events as hushtrace's reader;
/// `report` and `convert` include it.
fn check_readable(dir: &Path) -> usize {
    let k = KernelTrace::open(&dir.join("kernel")).unwrap();
    let bt = Command::new("babeltrace2")
        .arg(dir.join("kernel"))
        .output()
        .expect("babeltrace2 is required (apt-get install -y babeltrace2)");
    let stderr = String::from_utf8_lossy(&bt.stderr);
    // Its only complaints may be the kernel's lost events (the buffers overflow under a
    // debug build's reader).
    assert!(
        bt.status.success()
            && stderr
                .lines()
                .all(|l| l.is_empty() || l.contains("discarded")),
        "babeltrace2: {stderr}"
    );
    let lines = bt.stdout.iter().filter(|&&b| b == b'\n').count();
    let events = common::kernel_events(&k).0.len();
    assert_eq!(lines, events);
    let o = hushtrace(&["report", dir.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("Kernel ("), "{out}");
    let json = dir.with_extension("json");
    common::convert(dir, "chrome", &json);
    events
}

/// After a SIGKILL no packet is cut but a partial one at the end: less than one packet.
fn assert_only_partial_packets_cut(before: &[(String, u64)], after: &[(String, u64)]) {
    let most = (hushtrace_ctf::layout::PACKET_HEADER_LEN + hushtrace_kernel::ctf::PACKET_TARGET)
        as u64
        + 4096;
    assert_eq!(before.len(), after.len());
    for ((n, b), (_, a)) in before.iter().zip(after) {
        assert!(a <= b && b - a < most, "{n}: {b} bytes before, {a} after");
    }
}

#[test]
fn sigkill_of_record_at_random_moments_leaves_a_readable_kernel_trace() {
    let _l = lock();
    let tmp = tempfile::tempdir().unwrap();
    for (i, ms) in delays(29, 4).into_iter().enumerate() {
        println!("SIGKILL of record {ms} ms after the ping-pong began");
        let dir = tmp.path().join(format!("k{i}"));
        let mut r = Recording::start(&dir);
        // While it records: `recover` leaves the kernel trace alone and says so.
        if i == 0 {
            let out = recover(&dir);
            assert!(out.contains("still being recorded"), "{out}");
        }
        std::thread::sleep(Duration::from_millis(ms));
        r.kill_record();
        // The guard removes the instances.
        wait_until("the guard removed the instances", || {
            instances_of(r.pid).is_empty()
        });
        let before = stream_sizes(&dir);
        let out = recover(&dir);
        assert_only_partial_packets_cut(&before, &stream_sizes(&dir));
        for (name, b) in &before {
            let a = std::fs::metadata(dir.join("kernel").join(name))
                .unwrap()
                .len();
            assert_eq!(
                a < *b,
                out.contains(&format!(
                    "end of {}",
                    dir.join("kernel").join(name).display()
                )),
                "{out}"
            );
        }
        // Whatever it flushed (nothing, early on: packets are written at 256 KiB).
        let n = check_readable(&dir);
        println!("  {n} events readable");
    }
}

#[test]
fn sigkill_of_the_guard_at_random_moments_loses_nothing() {
    let _l = lock();
    let tmp = tempfile::tempdir().unwrap();
    for (i, ms) in delays(7, 3).into_iter().enumerate() {
        // The guard alone: record still ends cleanly and removes its instance itself.
        println!("SIGKILL of the guard {ms} ms after the ping-pong began");
        let dir = tmp.path().join(format!("g{i}"));
        let mut r = Recording::start(&dir);
        std::thread::sleep(Duration::from_millis(ms));
        kill(r.guard(), libc::SIGKILL);
        let out = r.stop();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{stderr}");
        assert!(stderr.contains("hushtrace: kernel: "), "{stderr}");
        assert!(instances_of(r.pid).is_empty());
        check_readable(&dir);

        // The guard, then record: the instance stays until a clean-up proves its recorder
        // gone (`recover` here), and the trace reads after `recover`.
        let dir = tmp.path().join(format!("b{i}"));
        let mut r = Recording::start(&dir);
        std::thread::sleep(Duration::from_millis(ms));
        kill(r.guard(), libc::SIGKILL);
        r.kill_record();
        let left = instances_of(r.pid);
        assert_eq!(left.len(), 1, "{left:?}");
        let out = recover(&dir);
        let name = left[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            out.contains(&format!("removed the ftrace instance {name}")),
            "{out}"
        );
        assert!(instances_of(r.pid).is_empty());
        check_readable(&dir);
    }
}

#[test]
fn report_and_convert_say_when_the_kernel_part_cannot_be_read() {
    let _l = lock();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let mut r = Recording::start(&dir);
    std::thread::sleep(Duration::from_millis(200));
    r.kill_record();
    wait_until("the guard removed the instances", || {
        instances_of(r.pid).is_empty()
    });
    let d = dir.to_str().unwrap();
    // A partial packet at the end of a stream (a SIGKILL in the middle of a write): `report`
    // cuts it first, says so, and reads the rest.
    let stream = dir.join("kernel/channel0_0");
    let mut b = std::fs::read(&stream).unwrap();
    let whole = b.len();
    b.extend_from_slice(&[0xc1, 0x1f, 0xfc, 0xc1, 0, 1, 2]);
    std::fs::write(&stream, &b).unwrap();
    let o = hushtrace(&["report", d]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("cut the partial packet (7 bytes)") && err.contains("as `hushtrace recover`"),
        "{err}"
    );
    assert!(out.contains("Kernel ("), "{out}");
    assert_eq!(std::fs::metadata(&stream).unwrap().len(), whole as u64);
    // A kernel part without its metadata (as an older hushtrace left it after a SIGKILL).
    std::fs::remove_file(dir.join("kernel/metadata")).unwrap();
    let o = hushtrace(&["report", d]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("kernel trace") && out.contains("is not included: no metadata"),
        "{out}"
    );
    let o = hushtrace(&["report", "--format", "json", d]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["kernel"]["error"]
        .as_str()
        .unwrap()
        .contains("no metadata"));
    let o = hushtrace(
        &["convert", d, "--to", "perfetto", "-o"]
            .iter()
            .copied()
            .chain([tmp.path().join("t.pftrace").to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("is not included: no metadata"), "{err}");
    // `recover` says it cannot make it readable, and fails.
    let o = hushtrace(&["recover", d]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success());
    assert!(out.contains("is not readable: no metadata"), "{out}");
}
