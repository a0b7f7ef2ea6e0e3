//! Descriptors: the consumer's stream files never take the application's descriptors, nor
//! their numbers after the application closed them.

use super::*;

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
        emit(2000); // several packets: the stream file is open once the consumer wrote one
        let trace = s.trace_dir();
        common::wait_for("the first packet in the stream file", || {
            common::stream_files(&trace).0 > 0
        })?;
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
            // Pacing, not synchronisation: the consumer's writes interleave with the
            // application's over the rounds (what the test is about).
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
        // The consumer has written every thread's stream (each traced more than a packet).
        let trace = s.trace_dir();
        common::wait_for("a packet in each of the 1000 streams", || {
            common::stream_files(&trace).0 >= n
        })?;
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
