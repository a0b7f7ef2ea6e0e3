//! The trace the relay client's integration tests stream: a session in `<root>` where the
//! main thread and a worker emit `relaytest:ev` events, then a forked child does the same.
//! Prints `pids <parent> <child>`.
//!
//! `relay_fixture <root> <parent main> <parent worker> <child main> <child worker>`

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let counts: Vec<u64> = args.iter().skip(2).filter_map(|a| a.parse().ok()).collect();
    let (Some(root), &[parent_main, parent_worker, child_main, child_worker]) =
        (args.get(1), &counts[..])
    else {
        eprintln!(
            "usage: relay_fixture <root> <parent main> <parent worker> <child main> <child worker>"
        );
        std::process::exit(2);
    };
    let session = hushtrace::Session::builder()
        .output_dir(root)
        .subbuf_size(16 * 1024)
        .start()
        .expect("start session");
    let emit = |n: u64| {
        for seq in 0..n {
            hushtrace::event!("relaytest", "ev", seq = seq);
        }
    };
    let worker = std::thread::spawn(move || emit(parent_worker));
    emit(parent_main);
    worker.join().unwrap();
    // SAFETY: fork in a process whose other threads have ended; the child traces, then leaves
    // with exit(), whose handler flushes its trace.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let w = std::thread::spawn(move || emit(child_worker));
        emit(child_main);
        w.join().unwrap();
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    session.stop().expect("stop");
    println!("pids {} {}", std::process::id(), pid);
}
