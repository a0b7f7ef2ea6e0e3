//! `record --kernel` in PID namespaces (containers): two recorders that are both pid 1, at the
//! same time, each keep their own ftrace instance and all their events; a third recorder's
//! stale-instance clean-up, and `hushtrace recover`, leave both alone; creating an instance
//! whose name exists fails with that reason and leaves it untouched.
//!
//! Needs root, tracefs and `unshare`: fails (never skips) without them. Shares the kernel
//! tests' lock file (ftrace instances are global).

mod common;

use common::{hushtrace, testbin, BIN};
use hushtrace_kernel::owner::Owner;
use hushtrace_kernel::tracefs::{self, CreateError, Instance};
use hushtrace_kernel::{Event, KernelTrace};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Round trips of each workload.
const ROUNDS: u64 = 3000;

fn lock() -> (std::fs::File, PathBuf) {
    let root = tracefs::find_or_mount()
        .unwrap_or_else(|e| panic!("these tests need tracefs (run them as root): {e}"));
    let l = hushtrace_testsupport::cross_process_lock("hushtrace-kernel-tests");
    (l, root)
}

/// A recorder in its namespace, killed with it if the test fails (`unshare --kill-child`),
/// and the stale instance it then leaves removed.
struct InNamespace(Option<Child>);

impl InNamespace {
    /// Waits until `mark` exists (its program started); panics with the recorder's stderr if
    /// it exited first.
    fn wait_started(&mut self, mark: &Path) {
        let t0 = Instant::now();
        while !mark.exists() {
            let c = self.0.as_mut().unwrap();
            if c.try_wait().unwrap().is_some() {
                let out = self.0.take().unwrap().wait_with_output().unwrap();
                panic!(
                    "the recorder exited before its program started: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "timed out");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn finish(mut self, name: &str) {
        let out = self.0.take().unwrap().wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(stderr.contains("hushtrace: kernel: "), "{name}: {stderr}");
    }
}

impl Drop for InNamespace {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
            // Its namespace, the guard included, died with it: from here it is provably gone.
            let _ = tracefs::remove_stale(&tracefs::find_or_mount().unwrap());
        }
    }
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// `record --kernel` as pid 1 of a new PID namespace, its program waiting on the FIFO
/// `gate` (after creating `mark`) before the ping-pong workload.
fn spawn_in_namespace(out: &Path, mark: &Path, gate: &Path) -> InNamespace {
    let script = format!(
        "echo started > '{}'; read _ < '{}'; exec '{}' pingpong {ROUNDS}",
        mark.display(),
        gate.display(),
        testbin("kernel_workload").display()
    );
    let c = Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "--mount-proc", "--"])
        .arg(BIN)
        .args(["record", "--kernel", "sched", "-o"])
        .arg(out)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare is required (util-linux)");
    InNamespace(Some(c))
}

/// The hushtrace instances whose recorder is pid 1 of another PID namespace.
fn namespaced_instances(root: &Path) -> Vec<PathBuf> {
    let me = Owner::current().unwrap();
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("instances"))
        .unwrap()
        .flatten()
        .filter(|e| {
            Owner::parse(&e.file_name().to_string_lossy())
                .is_some_and(|o| o.pid == 1 && o.ns != me.ns)
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Per thread of the workload (`kernel_workload`), the times it left the CPU.
fn workload_switches(dir: &Path) -> HashMap<i64, u64> {
    let k = KernelTrace::open(&dir.join("kernel")).unwrap();
    let mut m = HashMap::new();
    for e in common::kernel_events(&k).0 {
        if let Event::SchedSwitch(sw) = e.event {
            if sw.prev_comm.as_str() == "kernel_workload" {
                *m.entry(i64::from(sw.prev_tid)).or_insert(0) += 1;
            }
        }
    }
    m
}

/// Threads that blocked at least once every other round: the workload's two threads (each
/// blocks on its pipe about once a round).
fn busy_threads(m: &HashMap<i64, u64>) -> Vec<i64> {
    let mut v: Vec<i64> = m
        .iter()
        .filter(|(_, &n)| n >= ROUNDS / 2)
        .map(|(&t, _)| t)
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn kernel_recorders_in_two_pid_namespaces_keep_all_their_events() {
    let (_l, root) = lock();
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n);
    for g in ["gate_a", "gate_b"] {
        mkfifo(&p(g));
    }

    // A, then B: both pid 1 of their namespace, both recording.
    let mut a = spawn_in_namespace(&p("a"), &p("mark_a"), &p("gate_a"));
    a.wait_started(&p("mark_a"));
    let mut b = spawn_in_namespace(&p("b"), &p("mark_b"), &p("gate_b"));
    b.wait_started(&p("mark_b"));
    let both = namespaced_instances(&root);
    assert_eq!(both.len(), 2, "one instance each: {both:?}");

    // A third recorder in a third namespace (its start cleans up stale instances), and
    // `recover` from here: both instances are left as they are, recording.
    let c = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--"])
        .arg(BIN)
        .args(["record", "--kernel", "sched", "-o"])
        .arg(p("c"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let r = hushtrace(&["recover", p("c").to_str().unwrap()]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(namespaced_instances(&root), both);
    for i in &both {
        let on = std::fs::read_to_string(i.join("tracing_on")).unwrap();
        assert_eq!(on.trim(), "1", "{} turned off", i.display());
    }

    // B's workload runs and ends, then A's: A's trace holds both, B's its own.
    std::fs::write(p("gate_b"), "go\n").unwrap();
    b.finish("B");
    std::fs::write(p("gate_a"), "go\n").unwrap();
    a.finish("A");
    let (sa, sb) = (workload_switches(&p("a")), workload_switches(&p("b")));
    let (ba, bb) = (busy_threads(&sa), busy_threads(&sb));
    println!(
        "workload threads' switches: A's trace {sa:?}, B's trace {sb:?} ({ROUNDS} rounds each)"
    );
    assert_eq!(bb.len(), 2, "B's trace: {sb:?}");
    assert_eq!(ba.len(), 4, "A's trace (recording the whole time): {sa:?}");
    assert!(
        bb.iter().all(|t| ba.contains(t)),
        "A missed B's workload: {sa:?} / {sb:?}"
    );
    assert!(namespaced_instances(&root).is_empty());
}

#[test]
fn creating_an_existing_instance_fails_and_leaves_it_alone() {
    let (_l, root) = lock();
    let name = Owner::current().unwrap().instance_name("exists-test");
    let mut first = Instance::create(&root, &name).unwrap();
    tracefs::write(&first.file("buffer_size_kb"), "8").unwrap();
    let kb_set = std::fs::read_to_string(first.file("buffer_size_kb")).unwrap();
    let e = Instance::create(&root, &name).unwrap_err();
    assert!(matches!(e, CreateError::Exists(_)), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("exists already"), "{msg}");
    assert!(!msg.contains("root"), "{msg}");
    // Untouched: still on, its setting kept.
    let on = std::fs::read_to_string(first.file("tracing_on")).unwrap();
    assert_eq!(on.trim(), "1");
    let kb = std::fs::read_to_string(first.file("buffer_size_kb")).unwrap();
    assert_eq!(kb, kb_set);
    first.remove();
    assert!(!root.join("instances").join(&name).exists());
}
