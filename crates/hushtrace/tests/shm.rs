//! Ring files on a small, full or foreign `/dev/shm` (issue 18, points 3 and 4).
//!
//! Each scenario runs in a forked child that gets a private mount namespace with its own tmpfs
//! on `/dev/shm` (`unshare(CLONE_NEWNS)`, `/` made private, a fresh tmpfs of the size the
//! scenario needs): nothing of the machine's `/dev/shm` is touched. Needs root (or
//! `CAP_SYS_ADMIN`): the tests are `#[ignore]`d, and `.ci/run` runs them (`--run-ignored all`);
//! run without root they fail, naming what is missing.

mod common;

use common::{reader_cycles, temp_dir};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// The child's exit code when the private tmpfs cannot be set up.
const NO_TMPFS: i32 = 77;

macro_rules! check {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// Gives this process a private mount namespace with a tmpfs of `size` on `/dev/shm`.
fn private_shm(size: &str) -> Result<(), String> {
    // SAFETY: plain system calls on this (single-threaded, forked) process; the strings are
    // NUL-terminated and outlive the calls.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(format!("unshare: {}", std::io::Error::last_os_error()));
        }
        let root = CString::new("/").unwrap();
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(format!(
                "mount --make-rprivate /: {}",
                std::io::Error::last_os_error()
            ));
        }
        let (src, dst, fs) = (
            CString::new("tmpfs").unwrap(),
            CString::new("/dev/shm").unwrap(),
            CString::new("tmpfs").unwrap(),
        );
        let opts = CString::new(format!("size={size},mode=1777")).unwrap();
        if libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            fs.as_ptr(),
            0,
            opts.as_ptr() as *const libc::c_void,
        ) != 0
        {
            return Err(format!(
                "mount tmpfs on /dev/shm: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Runs `f` in a forked child with a private tmpfs of `size` on `/dev/shm`. Fails the test
/// with the child's message if `f` fails, or if the child dies (SIGBUS is signal 7) or hangs.
fn with_private_shm(size: &str, timeout: Duration, f: impl FnOnce() -> Result<(), String>) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "needs root for a private tmpfs on /dev/shm (these tests are #[ignore]d: run them as root \
         with --run-ignored, as .ci/run does)"
    );
    let (status, msg) = common::run_forked(timeout, || match private_shm(size) {
        Err(e) => (NO_TMPFS, e),
        Ok(()) => common::scenario_exit(f),
    });
    if libc::WIFSIGNALED(status) {
        panic!(
            "the traced program died of signal {} (7 = SIGBUS) {msg}",
            libc::WTERMSIG(status)
        );
    }
    match libc::WEXITSTATUS(status) {
        0 => {}
        NO_TMPFS => panic!("no private tmpfs could be mounted on /dev/shm: {msg}"),
        c => panic!("scenario failed (exit {c}): {msg}"),
    }
}

/// This process's ring directory on the private tmpfs.
fn ring_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    PathBuf::from(format!("/dev/shm/hushtrace-{}", unsafe { libc::geteuid() }))
        .join(std::process::id().to_string())
}

fn ring_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("ring_"))
                .count()
        })
        .unwrap_or(0)
}

/// `threads` threads record `per_thread` events each, all alive at once (so every ring exists
/// at the same time), and wait until the main thread has counted the ring files. Returns the
/// session's statistics and the ring files counted.
fn run_threads(
    dir: &Path,
    threads: usize,
    per_thread: u64,
) -> Result<(hushtrace::Stats, usize), String> {
    let session = hushtrace::Session::builder()
        .output_dir(dir)
        .start()
        .map_err(|e| format!("start: {e}"))?;
    let all_done = Arc::new(Barrier::new(threads + 1));
    let counted = Arc::new(Barrier::new(threads + 1));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (d, c) = (all_done.clone(), counted.clone());
            std::thread::spawn(move || {
                for seq in 0..per_thread {
                    hushtrace::event!("shm", "ev", seq = seq);
                }
                d.wait();
                c.wait();
            })
        })
        .collect();
    all_done.wait();
    let files = ring_files(&ring_dir());
    counted.wait();
    for h in hs {
        h.join().map_err(|_| "a thread panicked".to_string())?;
    }
    let st = session.stop().map_err(|e| format!("stop: {e}"))?;
    Ok((st, files))
}

/// A 1 MiB `/dev/shm` cannot hold a single default ring (4 MiB): the program used to die of
/// SIGBUS at the first page the tmpfs could not supply. Now every ring is in private memory
/// and the trace is complete.
#[test]
#[ignore = "needs root: mounts a private tmpfs on /dev/shm (.ci/run runs it)"]
fn a_one_mib_dev_shm_never_kills_the_program() {
    with_private_shm("1m", Duration::from_secs(120), || {
        let dir = temp_dir("shm-1m");
        // 150,000 events of 12 bytes: beyond the first 1 MiB of every ring.
        let per_thread = 150_000u64;
        let (st, files) = run_threads(&dir, 3, per_thread)?;
        check!(files == 0, "{files} ring files on a 1 MiB tmpfs");
        check!(
            st.events_written + st.events_discarded == 3 * per_thread,
            "{st:?}"
        );
        let read = reader_cycles(&dir)
            .iter()
            .filter(|(_, _, n)| n == "shm:ev")
            .count() as u64;
        check!(read == st.events_written, "read {read}, {st:?}");
        check!(read > 0, "nothing recorded");
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    });
}

/// Docker's default 64 MiB `/dev/shm` with 20 threads of default rings (80 MiB): the rings
/// that fit are ring files (crash-recoverable), the others private memory; the program lives
/// and the trace is complete.
#[test]
#[ignore = "needs root: mounts a private tmpfs on /dev/shm (.ci/run runs it)"]
fn docker_default_dev_shm_with_twenty_threads() {
    with_private_shm("64m", Duration::from_secs(300), || {
        let dir = temp_dir("shm-64m");
        // 360,000 events of 12 bytes (4.3 MB): every page of a 4 MiB ring.
        let per_thread = 360_000u64;
        let (st, files) = run_threads(&dir, 20, per_thread)?;
        check!(
            (1..20).contains(&files),
            "{files} ring files: expected some in the tmpfs, the rest in private memory"
        );
        check!(
            st.events_written + st.events_discarded == 20 * per_thread,
            "{st:?}"
        );
        check!(st.events_written > 0, "{st:?}");
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    });
}

/// A program killed with rings in the trace directory (the tmpfs directory belongs to another
/// user): the ring directory is named apart from the `rings` pointer file, the pointer is
/// written, and `recover` finds every event.
#[test]
#[ignore = "needs root: mounts a private tmpfs on /dev/shm (.ci/run runs it)"]
fn fallback_rings_in_the_trace_directory_are_recoverable() {
    with_private_shm("16m", Duration::from_secs(120), || {
        // SAFETY: geteuid has no preconditions.
        let base = PathBuf::from(format!("/dev/shm/hushtrace-{}", unsafe { libc::geteuid() }));
        std::fs::create_dir(&base).map_err(|e| e.to_string())?;
        std::os::unix::fs::chown(&base, Some(65534), Some(65534)).map_err(|e| e.to_string())?;
        let dir = temp_dir("shm-fallback");
        let n = 3_000u64;
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into the array.
        check!(unsafe { libc::pipe(fds.as_mut_ptr()) } == 0, "pipe");
        // SAFETY: the grandchild traces, says so and waits to be killed; it never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = match hushtrace::Session::builder()
                .output_dir(&dir)
                .subbuf_size(4096)
                .num_subbufs(64)
                .start()
            {
                Ok(s) => {
                    for seq in 0..n {
                        hushtrace::event!("shm", "kept", seq = seq);
                    }
                    // SAFETY: one byte to our pipe, then wait to be killed.
                    unsafe { libc::write(fds[1], b"r".as_ptr() as *const libc::c_void, 1) };
                    std::thread::sleep(Duration::from_secs(60));
                    std::mem::forget(s);
                    0
                }
                Err(_) => 3,
            };
            // SAFETY: leaving without exit handlers.
            unsafe { libc::_exit(code) };
        }
        let mut b = [0u8; 1];
        // SAFETY: reading one byte from our pipe.
        let got = unsafe { libc::read(fds[0], b.as_mut_ptr() as *mut libc::c_void, 1) };
        // SAFETY: our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut st = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut st, 0) };
        check!(got == 1, "the traced program did not start its session");
        let td = dir.join(pid.to_string());
        let pointer = std::fs::read_to_string(td.join(hushtrace_ctf::ringfile::RINGS_FILE))
            .map_err(|e| format!("the rings pointer: {e}"))?;
        let rings = PathBuf::from(pointer.trim());
        check!(
            rings.starts_with(&td) && ring_files(&rings) > 0,
            "rings in {} (expected in the trace directory): {pointer}",
            rings.display()
        );
        let done = hushtrace_ctf::ringfile::recover_session(&dir)?;
        let events: u64 = done.iter().map(|p| p.recovered.events).sum();
        // The consumer wrote the committed packets before the kill; the rest was in the rings.
        check!(events > 0, "recovered nothing: {done:?}");
        let read = reader_cycles(&dir)
            .iter()
            .filter(|(_, _, name)| name == "shm:kept")
            .count() as u64;
        check!(read == n, "read {read} of {n} events after recovery");
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    });
}

/// The ring directories of killed processes (which would fill `/dev/shm` over time) are
/// removed at the next session start of the same user when no trace points to them any more,
/// and kept while a trace does (for `recover`), while their process may run, or when they are
/// not plainly the tracer's.
#[test]
#[ignore = "needs root: mounts a private tmpfs on /dev/shm (.ci/run runs it)"]
fn stale_ring_directories_are_cleaned_at_the_next_start() {
    with_private_shm("16m", Duration::from_secs(120), || {
        // SAFETY: geteuid has no preconditions.
        let base = PathBuf::from(format!("/dev/shm/hushtrace-{}", unsafe { libc::geteuid() }));
        std::fs::create_dir(&base).map_err(|e| format!("{}: {e}", base.display()))?;
        std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        let dead = {
            let mut c = std::process::Command::new("true")
                .spawn()
                .map_err(|e| format!("true: {e}"))?;
            let pid = c.id();
            c.wait().map_err(|e| e.to_string())?;
            pid
        };
        let trace = temp_dir("shm-stale-trace");
        std::fs::create_dir_all(&trace).map_err(|e| e.to_string())?;
        let mk = |name: &str, back: Option<&Path>, ring: bool| -> Result<PathBuf, String> {
            let d = base.join(name);
            std::fs::create_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
            std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .map_err(|e| e.to_string())?;
            if ring {
                std::fs::write(d.join("ring_0"), vec![0u8; 8192]).map_err(|e| e.to_string())?;
                std::fs::write(d.join("types"), b"t").map_err(|e| e.to_string())?;
            }
            if let Some(t) = back {
                std::fs::write(
                    base.join(format!("{name}.trace")),
                    t.as_os_str().as_encoded_bytes(),
                )
                .map_err(|e| format!("{name}.trace: {e}"))?;
            }
            Ok(d)
        };
        let orphan = mk(
            &dead.to_string(),
            Some(Path::new("/nonexistent/trace")),
            true,
        )?;
        let wanted = mk(&format!("{dead}.1"), Some(&trace), true)?;
        std::fs::write(
            trace.join(hushtrace_ctf::ringfile::RINGS_FILE),
            format!("{}\n", wanted.display()),
        )
        .map_err(|e| format!("{}: {e}", trace.display()))?;
        let legacy = mk(&format!("{dead}.2"), None, true)?;
        let empty = mk(&format!("{dead}.3"), None, false)?;
        let live = mk("1", Some(Path::new("/nonexistent/trace")), true)?;
        // A back pointer left by `recover` (which removed the directory itself).
        let leftover = base.join(format!("{dead}.4.trace"));
        std::fs::write(&leftover, b"/nonexistent").map_err(|e| e.to_string())?;

        let dir = temp_dir("shm-stale");
        let s = hushtrace::Session::builder()
            .output_dir(&dir)
            .start()
            .map_err(|e| format!("start: {e}"))?;
        hushtrace::event!("shm", "after", n = 1u32);
        s.stop().map_err(|e| format!("stop: {e}"))?;
        check!(!orphan.exists(), "the orphan ring directory is still there");
        check!(
            !base.join(format!("{dead}.trace")).exists(),
            "the orphan's back pointer is still there"
        );
        check!(!empty.exists(), "the empty ring directory is still there");
        check!(
            !leftover.exists(),
            "the leftover back pointer is still there"
        );
        check!(
            ring_files(&wanted) == 1,
            "rings a trace still points to were removed"
        );
        check!(
            ring_files(&legacy) == 1,
            "rings without a back pointer were removed"
        );
        check!(
            ring_files(&live) == 1,
            "rings of a live process were removed"
        );
        // The session's own ring directory is gone after its clean stop.
        check!(
            !ring_dir().exists(),
            "the session's own ring directory remains"
        );
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&trace);
        Ok(())
    });
}
