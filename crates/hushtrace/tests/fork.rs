//! Fork correctness: identities in children, no duplicated events, no deadlocks, exec.

mod common;

use common::{babeltrace, temp_dir, testbin_path, BtEvent};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Waits for `pid` up to `timeout`; returns its exit status, or kills it and panics.
fn wait_child(pid: libc::pid_t, timeout: Duration) -> i32 {
    let t0 = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: waiting on our own child without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            assert!(libc::WIFEXITED(status), "child {pid} died: status {status}");
            return libc::WEXITSTATUS(status);
        }
        if t0.elapsed() > timeout {
            let stacks = common::thread_stacks(pid);
            // SAFETY: killing our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("child {pid} did not finish within {timeout:?}: deadlock?\n{stacks}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Events each busy thread has traced so far (updated every 64 events).
type Progress = Arc<[AtomicU64; 3]>;

/// Three threads tracing `("fork", "busy", seq)` until `stop` is set, and their progress.
fn busy_threads(stop: &Arc<AtomicBool>) -> (Vec<std::thread::JoinHandle<u64>>, Progress) {
    let progress: Progress = Arc::new(Default::default());
    let workers = (0..3)
        .map(|i| {
            let (stop, progress) = (stop.clone(), progress.clone());
            std::thread::spawn(move || {
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    hushtrace::event!("fork", "busy", seq = seq);
                    seq += 1;
                    if seq.is_multiple_of(64) {
                        progress[i].store(seq, Ordering::Relaxed);
                        // Keep the volume modest: the point is being busy at fork time.
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
                seq
            })
        })
        .collect();
    (workers, progress)
}

/// Waits until each busy thread has traced at least `more` events since the call.
fn wait_each_traces(progress: &Progress, more: u64) {
    let from: Vec<u64> = progress.iter().map(|p| p.load(Ordering::Relaxed)).collect();
    common::wait_until("each busy thread to trace", || {
        progress
            .iter()
            .zip(&from)
            .all(|(p, &f)| p.load(Ordering::Relaxed) >= f + more)
    });
}

/// In a child: emit `k` events on the main thread and `k` on a new thread.
fn child_work(k: u64, tag: u32) {
    for seq in 0..k {
        hushtrace::event!("child", "main", tag = tag, seq = seq);
    }
    std::thread::spawn(move || {
        for seq in 0..k {
            hushtrace::event!("child", "thread", tag = tag, seq = seq);
        }
    })
    .join()
    .unwrap();
}

fn check_unique(events: &[BtEvent]) {
    let mut seen = HashSet::new();
    for e in events {
        let key = (e.vpid, e.vtid, e.name.clone(), e.fields.get("seq").cloned());
        assert!(seen.insert(key.clone()), "event recorded twice: {key:?}");
    }
}

/// Per (vpid, event name): (count, distinct tids).
fn per_process(events: &[BtEvent]) -> BTreeMap<(u32, String), (u64, HashSet<u32>)> {
    let mut m: BTreeMap<(u32, String), (u64, HashSet<u32>)> = BTreeMap::new();
    for e in events {
        let v = m.entry((e.vpid, e.name.clone())).or_default();
        v.0 += 1;
        v.1.insert(e.vtid);
    }
    m
}

fn fork_scenario(grandchild: bool) {
    let _g = serial();
    let dir = temp_dir(if grandchild {
        "fork-grand"
    } else {
        "fork-child"
    });
    const K: u64 = 5_000;
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(64 * 1024)
        .num_subbufs(16)
        .start()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (workers, progress) = busy_threads(&stop);
    // Every worker is busy tracing when the process forks.
    wait_each_traces(&progress, 64);
    let parent_main_tid = gettid();
    hushtrace::event!("parent", "before_fork", seq = 0u64);
    // SAFETY: fork; the child only runs tracing code and exits with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            child_work(K, 1);
            if grandchild {
                // SAFETY: as above.
                let gpid = unsafe { libc::fork() };
                if gpid == 0 {
                    child_work(K, 2);
                    let st = session.stop().expect("grandchild stop");
                    assert_eq!(st.events_written + st.events_discarded, 2 * K);
                    // SAFETY: leaving the grandchild without running the test harness.
                    unsafe { libc::_exit(0) };
                }
                assert_eq!(wait_child(gpid, Duration::from_secs(30)), 0);
            }
            let st = session.stop().expect("child stop");
            assert_eq!(st.events_written + st.events_discarded, 2 * K);
            assert_eq!(st.events_discarded, 0);
        }));
        // SAFETY: leaving the child without running the test harness.
        unsafe { libc::_exit(if code.is_ok() { 0 } else { 1 }) };
    }
    assert!(pid > 0, "fork failed");
    assert_eq!(wait_child(pid, Duration::from_secs(60)), 0, "child failed");
    // The parent's workers go on tracing after the fork, into the parent's trace.
    wait_each_traces(&progress, 64);
    stop.store(true, Ordering::Relaxed);
    let emitted: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let st = session.stop().unwrap();
    assert_eq!(st.events_written + st.events_discarded, emitted + 1);

    let events = babeltrace(&dir, true);
    check_unique(&events);
    let me = std::process::id();
    let m = per_process(&events);
    let child = pid as u32;
    assert_eq!(m[&(child, "child:main".into())].0, K);
    assert_eq!(m[&(child, "child:thread".into())].0, K);
    assert!(m[&(child, "child:main".into())].1.contains(&child));
    assert!(!m[&(child, "child:thread".into())].1.contains(&child));
    assert!(
        !m.contains_key(&(child, "fork:busy".into())),
        "the child wrote the parent's events"
    );
    assert!(!m.contains_key(&(child, "parent:before_fork".into())));
    assert_eq!(
        m[&(me, "parent:before_fork".into())].1,
        HashSet::from([parent_main_tid])
    );
    assert_eq!(m[&(me, "fork:busy".into())].0, st.events_written - 1);
    assert_eq!(m[&(me, "fork:busy".into())].1.len(), 3);
    for e in &events {
        if e.name.starts_with("child:") {
            let tag = e.int("tag");
            if e.vpid == child {
                assert_eq!(tag, 1);
            } else {
                assert_eq!(tag, 2, "unexpected child event {e:?}");
                assert!(grandchild);
                assert_ne!(e.vpid, me);
            }
        }
    }
    if grandchild {
        let grand: HashSet<u32> = events
            .iter()
            .filter(|e| e.fields.get("tag").map(String::as_str) == Some("2"))
            .map(|e| e.vpid)
            .collect();
        assert_eq!(grand.len(), 1);
        let g = *grand.iter().next().unwrap();
        assert_eq!(m[&(g, "child:main".into())].0, K);
        assert_eq!(m[&(g, "child:thread".into())].0, K);
    }
    // Merged in time order across processes.
    assert!(events.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn child_has_its_own_identity_and_no_duplicates() {
    fork_scenario(false);
}

#[test]
fn grandchild_works_the_same() {
    fork_scenario(true);
}

#[test]
fn many_forks_while_threads_trace_and_toggle() {
    let _g = serial();
    let dir = temp_dir("fork-many");
    let forks = if cfg!(debug_assertions) { 200 } else { 500 };
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(16 * 1024)
        .num_subbufs(4)
        .start()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (workers, _) = busy_threads(&stop);
    let toggles = Arc::new(AtomicU64::new(0));
    let toggler = {
        let (stop, toggles) = (stop.clone(), toggles.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                hushtrace::disable("fork:*");
                hushtrace::enable("fork:*");
                toggles.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut children = Vec::new();
    for i in 0..forks {
        // SAFETY: fork; the child traces a little and leaves with exit(), which flushes.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            for seq in 0..10u64 {
                hushtrace::event!("many", "child", i = i as u32, seq = seq);
            }
            // SAFETY: exit runs hushtrace's exit handler (flush) and ends the child.
            unsafe { libc::exit(0) };
        }
        assert!(pid > 0);
        assert_eq!(wait_child(pid, Duration::from_secs(20)), 0, "fork #{i}");
        children.push(pid as u32);
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    toggler.join().unwrap();
    assert!(toggles.load(Ordering::Relaxed) > 0);
    session.stop().unwrap();

    // Every child wrote a valid trace of its own 10 events.
    let mut checked = 0;
    for pid in children
        .iter()
        .step_by(if cfg!(debug_assertions) { 20 } else { 50 })
    {
        let events = babeltrace(&dir.join(pid.to_string()), false);
        assert_eq!(events.len(), 10, "child {pid}");
        assert!(events
            .iter()
            .all(|e| e.vpid == *pid && e.name == "many:child"));
        checked += 1;
    }
    assert!(checked > 0);
    for pid in &children {
        let stats = std::fs::read_to_string(dir.join(format!("{pid}.stats.json")))
            .unwrap_or_else(|e| panic!("child {pid} wrote no stats: {e}"));
        assert!(stats.contains("\"written\":10,"), "child {pid}: {stats}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fork_then_exec_of_a_traced_program_joins_the_session() {
    let _g = serial();
    let dir = temp_dir("fork-exec");
    let exe = testbin_path("env_traced");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .unwrap();
    hushtrace::event!("exec", "parent", seq = 1u64);
    let exe_c = std::ffi::CString::new(exe.to_str().unwrap()).unwrap();
    let arg1 = std::ffi::CString::new("500").unwrap();
    let var = std::ffi::CString::new(format!("HUSHTRACE_OUTPUT={}", dir.display())).unwrap();
    let argv = [exe_c.as_ptr(), arg1.as_ptr(), std::ptr::null()];
    let envp = [var.as_ptr(), std::ptr::null()];
    // SAFETY: fork then immediately execve (async-signal-safe) in the child.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: valid NUL-terminated argv/envp arrays that outlive the call.
        unsafe {
            libc::execve(exe_c.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
    }
    assert_eq!(wait_child(pid, Duration::from_secs(30)), 0);
    session.stop().unwrap();
    let events = babeltrace(&dir, false);
    let m = per_process(&events);
    assert_eq!(m[&(pid as u32, "env:ev".into())].0, 500);
    assert_eq!(m[&(std::process::id(), "exec:parent".into())].0, 1);
    assert!(!m.contains_key(&(pid as u32, "exec:parent".into())));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A page shared with forked children, for results a child under seccomp cannot write anywhere.
struct SharedPage(*mut u64);

impl SharedPage {
    fn new() -> SharedPage {
        SharedPage(common::shared_page() as *mut u64)
    }
    fn slot(&self, i: usize) -> &AtomicU64 {
        assert!(i < 512);
        // SAFETY: inside the page, aligned, and only accessed atomically.
        unsafe { AtomicU64::from_ptr(self.0.add(i)) }
    }
}

#[test]
fn forking_thread_in_no_syscall_mode_stays_in_it_with_right_caches() {
    let _g = serial();
    let dir = temp_dir("fork-nosyscall");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(4)
        .start()
        .unwrap();
    let page = SharedPage::new();
    page.slot(0).store(u64::MAX, Ordering::SeqCst);
    let page_addr = page.0 as usize;
    let t = std::thread::spawn(move || {
        let page = SharedPage(page_addr as *mut u64);
        hushtrace::set_thread_name("rt-forker");
        hushtrace::set_thread_no_syscall();
        hushtrace::event!("nsfork", "parent", seq = 0u64);
        // Child 1: under seccomp right after fork: still in the mode, no system call.
        // SAFETY: fork; the child only traces, writes to the shared page and exits raw.
        let a = unsafe { libc::fork() };
        if a == 0 {
            let in_mode = hushtrace::thread_in_no_syscall();
            let before = hushtrace::verify::trapped_syscalls();
            if hushtrace::verify::trap_syscalls_on_this_thread().is_err() {
                // SAFETY: leaving the child.
                unsafe { libc::_exit(3) };
            }
            for seq in 0..1000u64 {
                hushtrace::event!("nsfork", "child", seq = seq);
            }
            let trapped = hushtrace::verify::trapped_syscalls() - before;
            page.slot(0)
                .store(trapped | (u64::from(in_mode) << 32), Ordering::SeqCst);
            // SAFETY: no value on this thread's stack relies on its destructor running.
            unsafe { hushtrace::verify::exit_thread() };
        }
        // Child 2: traces in the mode, then leaves it and flushes: identity must be the child's.
        // SAFETY: as above; this child exits through exit(), which flushes.
        let b = unsafe { libc::fork() };
        if b == 0 {
            // The recommended call before a forked real-time thread resumes: restarts the
            // consumer and faults the ring in again, staying in the mode.
            hushtrace::init_thread();
            let ok = hushtrace::thread_in_no_syscall();
            for seq in 0..100u64 {
                hushtrace::event!("nsfork", "child2", seq = seq);
            }
            hushtrace::clear_thread_no_syscall();
            // SAFETY: exit flushes the child's trace through the atexit handler.
            unsafe { libc::exit(if ok { 0 } else { 4 }) };
        }
        hushtrace::clear_thread_no_syscall();
        (a, b, gettid())
    });
    let (a, b, parent_tid) = t.join().unwrap();
    assert_eq!(wait_child(a, Duration::from_secs(20)), 0);
    assert_eq!(wait_child(b, Duration::from_secs(20)), 0);
    session.stop().unwrap();
    let v = page.slot(0).load(Ordering::SeqCst);
    assert_eq!(v >> 32, 1, "the forked thread left no-syscall mode");
    assert_eq!(
        v & 0xffff_ffff,
        0,
        "the forked no-syscall thread made system calls"
    );
    let events = babeltrace(&dir, false);
    let c2: Vec<_> = events
        .iter()
        .filter(|e| e.name == "nsfork:child2")
        .collect();
    assert_eq!(c2.len(), 100);
    assert!(c2.iter().all(|e| e.vpid == b as u32 && e.vtid == b as u32));
    assert!(c2.iter().all(|e| e.procname == "rt-forker"));
    let p: Vec<_> = events
        .iter()
        .filter(|e| e.name == "nsfork:parent")
        .collect();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].vtid, parent_tid);
    let _ = std::fs::remove_dir_all(&dir);
}
