//! Helpers shared by the integration tests: a private trace directory, Chrome JSON of a
//! trace, and babeltrace2.

#![allow(dead_code)]

use serde_json::Value as Json;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// A fresh directory (mode 0700) under the system temporary directory.
pub fn trace_dir(tag: &str) -> PathBuf {
    let dir = hushtrace_testsupport::fresh_temp_path("hushtrace-tracing", tag);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    dir
}

/// The trace in `dir` as Chrome JSON events (metadata events left out).
pub fn chrome_events(dir: &Path) -> Vec<Json> {
    let session = hushtrace_ctf::reader::Session::open(dir).unwrap();
    let mut out = Vec::new();
    let summary = hushtrace_cli::chrome::convert(&session, &mut out, &mut |_, _| {}).unwrap();
    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
    assert_eq!(summary.unmatched_ends, 0);
    let doc: Json = serde_json::from_slice(&out).unwrap();
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] != "M")
        .cloned()
        .collect()
}

/// Runs babeltrace2 on `dir`; asserts it succeeds with nothing on stderr; returns the number
/// of events it printed.
pub fn babeltrace2_events(dir: &Path) -> usize {
    hushtrace_testsupport::babeltrace(dir).lines().count()
}

/// A session writing into `dir`, with the default settings.
pub fn start_session(dir: &Path) -> hushtrace::Session {
    hushtrace::Session::builder()
        .output_dir(dir)
        .start()
        .unwrap()
}

/// Installs hushtrace's layer as the process's only subscriber layer.
pub fn install_layer() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    tracing_subscriber::registry()
        .with(hushtrace_tracing::layer())
        .init();
}

/// A multi-thread tokio runtime with two workers (tasks move between threads).
pub fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
