//! Resource limits and impossible settings: a full disk leaves a readable trace, and sizes,
//! timers or locked memory that cannot work are refused at start, naming the limit.

use super::*;

/// The running session's `discarded` count, as `hushtrace ctl PID status` says it (0 while
/// the consumer has not answered).
fn discarded_now() -> u64 {
    let Ok(status) = hushtrace::control::request(std::process::id(), "status") else {
        return 0;
    };
    // The session's count comes first, before the threads'.
    status
        .split("\"discarded\":")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
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
        // The packets those events filled (at least 4 of 4 KiB, whatever their headers' sizes)
        // are in the stream file before the limit.
        let trace = s.trace_dir();
        common::wait_for("4 packets in the stream file", || {
            common::stream_files(&trace).1 >= 4 * 4096
        })?;
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
        // The limit stays until the consumer has hit it: a failed packet's events count as
        // discarded at once.
        common::wait_for("a write failing at the file size limit", || {
            discarded_now() > 0
        })?;
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
