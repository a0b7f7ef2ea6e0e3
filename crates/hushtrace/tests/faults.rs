//! The tracer under faults and a hostile environment (issue 9): every test reproduces one
//! failure that used to happen and proves it no longer does.
//!
//! Each scenario runs in a forked child process (`in_child`), because it changes process-wide
//! state on purpose: it closes every descriptor, changes directory, lowers resource limits or
//! starts many sessions.

mod common;

use common::{babeltrace, temp_dir};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `f` in a forked child and fails the test with the child's message if it fails, panics,
/// dies or does not finish within `timeout`.
fn in_child(timeout: Duration, f: impl FnOnce() -> Result<(), String>) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (status, msg) = common::run_forked(timeout, || common::scenario_exit(f));
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "scenario failed (status {status}): {msg}"
    );
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

fn emit(n: u64) {
    for i in 0..n {
        hushtrace::event!("fault", "tick", seq = i, pad = 0u64);
    }
}

/// `babeltrace2` reads the whole session and shows `expected` `fault:tick` events.
fn readable_with(dir: &Path, expected: u64) -> Result<(), String> {
    let events = babeltrace(dir, true);
    let n = events.iter().filter(|e| e.name == "fault:tick").count() as u64;
    check!(
        n == expected,
        "babeltrace2 shows {n} fault:tick events, expected {expected}"
    );
    Ok(())
}

fn open_c(path: &Path, flags: libc::c_int) -> libc::c_int {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) }
}

const CTF_MAGIC: [u8; 4] = 0xC1FC_1FC1u32.to_le_bytes();

/// 9.1: a program that closes every descriptor and opens a file gets a number the consumer used
/// for a stream; the consumer must notice and never write a packet into the program's file.
#[test]
fn closed_and_reused_descriptors_never_receive_trace_packets() {
    in_child(Duration::from_secs(60), || {
        let dir = temp_dir("fault-fds");
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .subbuf_size(4096)
            .num_subbufs(64)
            .read_timer(Duration::from_millis(1))
            .start()
            .map_err(|e| e.to_string())?;
        emit(2000); // several packets: the stream file is open
        std::thread::sleep(Duration::from_millis(30));
        // SAFETY: closes every descriptor from 3 up, as daemons do.
        unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
        let app = dir.with_extension("appfile");
        let mut fds = Vec::new();
        for _ in 0..8 {
            let fd = open_c(&app, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND);
            check!(fd >= 0, "open app file");
            fds.push(fd);
        }
        let line = b"application data\n";
        for _ in 0..50 {
            emit(200);
            // SAFETY: writing our own bytes to our own descriptor.
            unsafe { libc::write(fds[0], line.as_ptr() as *const libc::c_void, line.len()) };
            std::thread::sleep(Duration::from_millis(2));
        }
        let stats = s.stop();
        for fd in fds {
            // SAFETY: our descriptors.
            unsafe { libc::close(fd) };
        }
        let content = std::fs::read(&app).map_err(|e| e.to_string())?;
        check!(
            content.len() == 50 * line.len(),
            "the application's file has {} bytes, expected {} (trace packets written into it?)",
            content.len(),
            50 * line.len()
        );
        check!(
            !content.windows(4).any(|w| w == CTF_MAGIC),
            "a CTF packet was written into the application's file"
        );
        // Every event is written or counted lost, and the trace reads.
        let st = match stats {
            Ok(st) => st,
            Err(hushtrace::Error::Stop { stats, .. }) => stats,
            Err(e) => return Err(format!("stop: {e}")),
        };
        check!(
            st.events_written + st.events_discarded == 12_000,
            "written {} + discarded {} != 12000",
            st.events_written,
            st.events_discarded
        );
        readable_with(&dir, st.events_written)
    });
}

/// 9.3: a relative output directory and a `chdir()` afterwards: everything still goes to the
/// directory resolved at start, and the trace stays readable.
#[test]
fn relative_output_dir_survives_chdir() {
    in_child(Duration::from_secs(60), || {
        let base = temp_dir("fault-chdir");
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).map_err(|e| e.to_string())?;
        std::env::set_current_dir(&base).map_err(|e| e.to_string())?;
        let s = hushtrace::Session::builder()
            .output_dir("rel-trace")
            .subbuf_size(4096)
            .start()
            .map_err(|e| e.to_string())?;
        emit(500);
        std::env::set_current_dir(&elsewhere).map_err(|e| e.to_string())?;
        // A new thread (new stream) and a new callsite (metadata rewrite) after the chdir.
        std::thread::spawn(|| {
            emit(300);
            hushtrace::event!("fault", "after_chdir", x = 1u8);
        })
        .join()
        .unwrap();
        let st = s.stop().map_err(|e| e.to_string())?;
        check!(
            st.trace_dir.is_absolute() && st.trace_dir.starts_with(&base),
            "trace_dir {} is not the absolute directory resolved at start",
            st.trace_dir.display()
        );
        check!(
            !elsewhere.join("rel-trace").exists(),
            "files went to the new working directory"
        );
        check!(
            st.events_discarded == 0,
            "discarded {}",
            st.events_discarded
        );
        readable_with(&base.join("rel-trace"), 800)
    });
}

/// 9.4: a session root that another user could write is refused (as ssh refuses such
/// files).
#[test]
fn root_writable_by_others_is_refused() {
    in_child(Duration::from_secs(30), || {
        let root = temp_dir("fault-perm");
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777))
            .map_err(|e| e.to_string())?;
        let r = hushtrace::Session::builder().output_dir(&root).start();
        let e = match r {
            Ok(_) => return Err("a world-writable root was accepted".into()),
            Err(e) => e.to_string(),
        };
        check!(
            e.contains(&root.display().to_string()) && e.contains("writable"),
            "unclear error: {e}"
        );
        // Group-writable too; a private one works.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o770))
            .map_err(|e| e.to_string())?;
        check!(
            hushtrace::Session::builder()
                .output_dir(&root)
                .start()
                .is_err(),
            "a group-writable root was accepted"
        );
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let s = hushtrace::Session::builder()
            .output_dir(&root)
            .start()
            .map_err(|e| format!("a 0755 root of ours is fine: {e}"))?;
        s.stop().map_err(|e| e.to_string())?;
        Ok(())
    });
}

/// 9.4: swapping `<root>/<pid>` for a symbolic link after the session created it does not
/// redirect new streams or the metadata rename: files are created relative to the directory
/// the session opened.
#[test]
fn swapped_trace_dir_symlink_is_not_followed() {
    in_child(Duration::from_secs(60), || {
        let root = temp_dir("fault-symlink");
        let attacker = root.with_extension("attacker");
        std::fs::create_dir_all(&attacker).map_err(|e| e.to_string())?;
        let s = hushtrace::Session::builder()
            .output_dir(&root)
            .subbuf_size(4096)
            .start()
            .map_err(|e| e.to_string())?;
        let td = s.trace_dir();
        let moved = root.join("moved");
        std::fs::rename(&td, &moved).map_err(|e| e.to_string())?;
        std::os::unix::fs::symlink(&attacker, &td).map_err(|e| e.to_string())?;
        std::thread::spawn(|| {
            emit(400);
            hushtrace::event!("fault", "new_callsite", y = 2u16);
        })
        .join()
        .unwrap();
        let _ = s.stop();
        let planted: Vec<_> = std::fs::read_dir(&attacker)
            .map_err(|e| e.to_string())?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        check!(
            planted.is_empty(),
            "files created through the symlink: {planted:?}"
        );
        check!(
            moved.join("metadata").is_file(),
            "metadata not in the session's own directory"
        );
        Ok(())
    });
}

/// 9.5: a transient "disk full" (here: `RLIMIT_FSIZE`, which makes writes short and then fail
/// with EFBIG) must not leave a partial packet in the stream: the failed packet is cut off and
/// counted, later packets are fine, and the whole trace stays readable.
#[test]
fn transient_full_disk_leaves_a_readable_trace() {
    in_child(Duration::from_secs(60), || {
        let dir = temp_dir("fault-full");
        // SAFETY: ignoring SIGXFSZ so that an oversized write fails with EFBIG instead.
        unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .subbuf_size(4096)
            .num_subbufs(512)
            .read_timer(Duration::from_millis(1))
            .start()
            .map_err(|e| e.to_string())?;
        emit(1000);
        std::thread::sleep(Duration::from_millis(20));
        let limit = |bytes: u64| {
            let r = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: setting our own soft limit.
            unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &r) };
        };
        // The stream file is at ~26 KB: the next packets hit the limit mid-packet.
        limit(40_000 + 1234);
        emit(3000);
        std::thread::sleep(Duration::from_millis(50));
        limit(libc::RLIM_INFINITY);
        emit(2000);
        let (st, err) = match s.stop() {
            Ok(st) => (st, None),
            Err(hushtrace::Error::Stop { stats, source, .. }) => (stats, Some(source)),
            Err(e) => return Err(format!("stop: {e}")),
        };
        check!(err.is_some(), "the failed writes were not reported");
        check!(
            st.events_written + st.events_discarded == 6000,
            "written {} + discarded {} != 6000",
            st.events_written,
            st.events_discarded
        );
        check!(st.events_discarded > 0, "no loss counted");
        check!(st.events_written > 3000, "later packets were not written");
        // No stray temporary file, and the stats file is complete.
        for e in std::fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            check!(!name.contains("tmp"), "stray temporary file {name}");
            if name.ends_with(".stats.json") {
                let text = std::fs::read_to_string(e.path()).map_err(|e| e.to_string())?;
                check!(
                    text.contains(&format!("\"written\":{}", st.events_written)),
                    "stats file {text}"
                );
            }
        }
        readable_with(&dir, st.events_written)
    });
}

/// 9.9: with 1,000 threads alive and tracing, the application keeps its descriptor budget.
#[test]
fn thousand_threads_leave_the_descriptor_budget_to_the_application() {
    in_child(Duration::from_secs(120), || {
        let r = libc::rlimit {
            rlim_cur: 1024,
            rlim_max: 1024,
        };
        // SAFETY: lowering our own limit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
        let dir = temp_dir("fault-nofile");
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .subbuf_size(4096)
            .num_subbufs(2)
            .read_timer(Duration::from_millis(1))
            .start()
            .map_err(|e| e.to_string())?;
        let n = 1000;
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(n + 1));
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let b = barrier.clone();
                std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        emit(300); // more than a packet: its stream is written
                        b.wait();
                        b.wait();
                    })
                    .unwrap()
            })
            .collect();
        barrier.wait();
        std::thread::sleep(Duration::from_millis(100)); // the consumer writes every stream
        let probe = dir.with_extension("probe");
        let mut opened = Vec::new();
        loop {
            let fd = open_c(&probe, libc::O_RDONLY | libc::O_CREAT);
            if fd < 0 {
                break;
            }
            opened.push(fd);
        }
        let got = opened.len();
        for fd in opened {
            // SAFETY: our descriptors.
            unsafe { libc::close(fd) };
        }
        barrier.wait();
        for t in threads {
            t.join().unwrap();
        }
        let st = s.stop().map_err(|e| e.to_string())?;
        check!(
            got >= 900,
            "the application could open only {got} files with 1000 traced threads"
        );
        check!(
            st.events_written + st.events_discarded == 300 * n as u64,
            "accounting: {st:?}"
        );
        Ok(())
    });
}

/// 9.10: the 1,001st session into one directory works.
#[test]
fn thousand_and_one_sessions_into_one_directory() {
    in_child(Duration::from_secs(180), || {
        let dir = temp_dir("fault-many");
        for i in 0..1001 {
            let s = hushtrace::Session::builder()
                .output_dir(&dir)
                .subbuf_size(4096)
                .num_subbufs(2)
                .start()
                .map_err(|e| format!("session {i}: {e}"))?;
            s.stop().map_err(|e| format!("session {i}: {e}"))?;
        }
        let n = std::fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .flatten()
            .filter(|e| e.path().is_dir())
            .count();
        check!(n == 1001, "{n} trace directories");
        Ok(())
    });
}

/// 9.10: sizes and timers that cannot work are refused at start, naming the value and the
/// limit.
#[test]
fn impossible_sizes_and_timers_are_refused_with_the_limit() {
    let lines = common::run_test_env(
        &[
            ("HUSHTRACE_OUTPUT", "/tmp/hushtrace-never"),
            ("HUSHTRACE_NUM_SUBBUFS", "65536"),
        ],
        10,
    );
    let text = lines.join("\n");
    assert!(
        text.contains("HUSHTRACE_NUM_SUBBUFS") && text.contains("65536") && text.contains("4096"),
        "{text}"
    );
    let lines = common::run_test_env(
        &[
            ("HUSHTRACE_OUTPUT", "/tmp/hushtrace-never"),
            ("HUSHTRACE_READ_TIMER_MS", "18446744073709551615"),
        ],
        10,
    );
    let text = lines.join("\n");
    assert!(
        text.contains("HUSHTRACE_READ_TIMER_MS") && text.contains("60000"),
        "{text}"
    );
    assert!(!Path::new("/tmp/hushtrace-never").exists());
}

/// 9.10: a no-syscall thread's ring must fit under RLIMIT_MEMLOCK (it is locked in memory):
/// entering the mode with a ring that cannot be locked is an error naming the limit.
#[test]
fn no_syscall_ring_over_memlock_limit_is_refused() {
    in_child(Duration::from_secs(30), || {
        // Only meaningful without CAP_IPC_LOCK: drop it if we are root.
        let r = libc::rlimit {
            rlim_cur: 1 << 20,
            rlim_max: 1 << 20,
        };
        // SAFETY: lowering our own limit.
        unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) };
        drop_ipc_lock();
        let dir = temp_dir("fault-memlock");
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .subbuf_size(1 << 20)
            .num_subbufs(4)
            .start()
            .map_err(|e| e.to_string())?;
        let e = match hushtrace::try_set_thread_no_syscall() {
            Ok(()) => return Err("a 4 MiB ring was accepted under a 1 MiB RLIMIT_MEMLOCK".into()),
            Err(e) => e.to_string(),
        };
        check!(
            e.contains("RLIMIT_MEMLOCK") && e.contains("1048576"),
            "unclear error: {e}"
        );
        check!(!hushtrace::thread_in_no_syscall(), "mode entered anyway");
        s.stop().map_err(|e| e.to_string())?;
        Ok(())
    });
}

/// Drops CAP_IPC_LOCK from the effective set (root may lock any amount otherwise).
fn drop_ipc_lock() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data structs, as the kernel expects.
    unsafe {
        libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr());
        d[0].effective &= !(1 << 14); // CAP_IPC_LOCK
        libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr());
    }
}

/// 9.8: `exit()` while another thread is inside `stop()` still leaves a readable trace.
#[test]
fn exit_during_another_threads_stop_leaves_a_readable_trace() {
    for round in 0..20u64 {
        let dir = temp_dir(&format!("fault-exitstop-{round}"));
        let d2 = dir.clone();
        in_child(Duration::from_secs(30), move || {
            let s = hushtrace::Session::builder()
                .output_dir(&d2)
                .subbuf_size(4096)
                .start()
                .map_err(|e| e.to_string())?;
            emit(3000);
            let _stopper = std::thread::spawn(move || {
                let _ = s.stop();
            });
            std::thread::sleep(Duration::from_micros(round * 150));
            // SAFETY: exit runs the atexit handlers (the tracer's flush) while `t` may be
            // inside stop().
            unsafe { libc::exit(0) }
        });
        babeltrace(&dir, true);
        let tdir = trace_dirs(&dir);
        assert_eq!(tdir.len(), 1, "round {round}: {tdir:?}");
        assert!(tdir[0].join("metadata").is_file(), "round {round}");
    }
}

fn trace_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The trace files keep their privacy whatever the umask: 0700 directories, 0600 files.
#[test]
fn files_created_through_directory_descriptors_are_private() {
    in_child(Duration::from_secs(30), || {
        // SAFETY: setting our own umask.
        unsafe { libc::umask(0) };
        let dir = temp_dir("fault-modes");
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .subbuf_size(4096)
            .start()
            .map_err(|e| e.to_string())?;
        emit(1000);
        s.stop().map_err(|e| e.to_string())?;
        let mut stack = vec![dir.clone()];
        while let Some(p) = stack.pop() {
            let md = std::fs::symlink_metadata(&p).map_err(|e| e.to_string())?;
            let mode = md.mode() & 0o777;
            if md.is_dir() {
                check!(mode == 0o700, "{} has mode {mode:o}", p.display());
                for e in std::fs::read_dir(&p).map_err(|e| e.to_string())?.flatten() {
                    stack.push(e.path());
                }
            } else {
                check!(mode == 0o600, "{} has mode {mode:o}", p.display());
            }
        }
        Ok(())
    });
}

/// 9.2: forks while other threads start and exit must not hang the children: not on a lock
/// another thread held at fork time (the consumer thread the child starts), not in exit-time
/// stop. Each child traces enough to hand packets over (which starts its consumer thread),
/// then `exit()`s (flushing its trace). The child starts no `std::thread` of its own: std's
/// thread start takes a lock (`stack_overflow::thread_info`) that a parent thread starting at
/// the moment of the fork leaves held forever in the child, which is exactly why the tracer
/// starts its thread with `pthread_create` directly.
/// `HUSHTRACE_STRESS_FORKS` sets the number of forks (default 300; `ci/stress.sh` runs
/// thousands); the longest child lifetime is printed.
#[test]
fn forks_under_thread_churn_never_hang() {
    let forks: u64 = std::env::var("HUSHTRACE_STRESS_FORKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    in_child(Duration::from_secs(60 + forks / 5), move || {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = temp_dir("fault-forkchurn");
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .subbuf_size(4096)
            .num_subbufs(4)
            .start()
            .map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let spawners: Vec<_> = (0..3)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::spawn(|| emit(20)).join().unwrap();
                    }
                })
            })
            .collect();
        let mut worst = Duration::ZERO;
        let mut hung = Vec::new();
        for _ in 0..forks {
            let t0 = Instant::now();
            // SAFETY: the child traces, starts one thread and exits; it never returns here.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                emit(600); // > 3 packets of 4 KiB: the child starts its consumer thread
                           // SAFETY: exit runs the tracer's flush.
                unsafe { libc::exit(0) };
            }
            let deadline = Duration::from_secs(20);
            loop {
                let mut st = 0;
                // SAFETY: polling our own child.
                let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
                if r == pid {
                    break;
                }
                if t0.elapsed() > deadline {
                    if hung.is_empty() {
                        let stacks = common::thread_stacks(pid);
                        eprintln!("child {pid} hung:\n{stacks}");
                    }
                    hung.push(pid);
                    // SAFETY: our own child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            worst = worst.max(t0.elapsed());
        }
        stop.store(true, Ordering::Relaxed);
        for t in spawners {
            t.join().unwrap();
        }
        let parent = s.stop().map_err(|e| e.to_string())?;
        eprintln!("{forks} forks under thread churn: longest child lifetime {worst:?}");
        check!(hung.is_empty(), "children hung: {hung:?}");
        // Every child flushed a complete account of its 600 events at exit.
        let mut children = 0;
        for e in std::fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_suffix(".stats.json") else {
                continue;
            };
            if parent.trace_dir.ends_with(pid) {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).map_err(|e| e.to_string())?;
            let st = hushtrace_ctf::stats::ProcessStats::parse(&text)
                .ok_or_else(|| format!("bad stats {name}: {text}"))?;
            check!(st.written + st.discarded == 600, "child {pid}: {text}");
            children += 1;
        }
        check!(
            children == forks,
            "{children} children wrote stats, {forks} forked"
        );
        Ok(())
    });
}
