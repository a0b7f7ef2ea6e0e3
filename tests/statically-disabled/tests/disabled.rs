//! With the `enable` feature off, tracepoints register no callsite and record nothing.

#[test]
fn tracepoints_compile_to_nothing() {
    // No `app:*` callsite exists in the binary: the macros emitted no static descriptor.
    let app: Vec<String> = hushtrace_core::callsites()
        .iter()
        .filter(|c| c.category == "app")
        .map(|c| c.full_name())
        .collect();
    assert!(app.is_empty(), "callsites compiled in: {app:?}");

    let dir = std::env::temp_dir().join(format!("hushtrace-static-off-{}", std::process::id()));
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .unwrap();
    assert_eq!(hushtrace_statically_disabled::work(1000, "n"), 1_498_500);
    let stats = session.stop().unwrap();
    assert_eq!((stats.events_written, stats.events_discarded), (0, 0));
    let _ = std::fs::remove_dir_all(&dir);
}
