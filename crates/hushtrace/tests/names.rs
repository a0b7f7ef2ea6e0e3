//! Names in the trace only: `set_thread_trace_name` names a thread's packets (also its first
//! packet, open when the name comes) without touching its kernel name, cut to 15 bytes on a
//! character boundary; `set_process_name` names the process in the metadata.

mod common;

fn kernel_name() -> String {
    std::fs::read_to_string("/proc/thread-self/comm")
        .expect("read /proc/thread-self/comm")
        .trim_end()
        .to_string()
}

#[test]
fn trace_names_reach_the_open_packet_and_the_metadata() {
    let dir = common::temp_dir("names");
    hushtrace::set_process_name("names-prog");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .expect("start");
    let (before, after, tid) = std::thread::Builder::new()
        .name("kernel-name".into())
        .spawn(|| {
            let before = kernel_name();
            // Opens the thread's first packet under its kernel name.
            hushtrace::event!("names", "early", n = 1u32);
            // 8 bytes + four 2-byte characters: the 15-byte cut falls inside the fourth.
            hushtrace::set_thread_trace_name("late-naméééé");
            hushtrace::event!("names", "late", n = 2u32);
            let tid: u32 = std::fs::read_link("/proc/thread-self")
                .expect("/proc/thread-self")
                .file_name()
                .and_then(|n| n.to_str()?.parse().ok())
                .expect("a thread id");
            (before, kernel_name(), tid)
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(before, "kernel-name");
    assert_eq!(after, "kernel-name", "the kernel name changed");
    let stats = session.stop().expect("stop");

    let events = common::babeltrace(&stats.trace_dir, false);
    let mine: Vec<_> = events.iter().filter(|e| e.vtid == tid).collect();
    assert_eq!(
        mine.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["names:early", "names:late"]
    );
    for e in &mine {
        assert_eq!(e.procname, "late-namééé", "{e:?}");
    }
    let meta = hushtrace_ctf::reader::read_metadata(
        &stats.trace_dir.join(hushtrace_ctf::layout::METADATA_FILE),
    )
    .expect("metadata");
    assert_eq!(meta.procname, "names-prog");
}
