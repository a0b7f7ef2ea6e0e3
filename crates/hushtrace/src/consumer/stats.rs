//! The statistics file `<root>/<trace dir name>.stats.json`, written at the session's end.

use super::Consumer;
use hushtrace_ctf::stats::ProcessStats;
use std::sync::atomic::Ordering;

impl Consumer {
    /// Writes `<root>/<trace dir name>.stats.json` atomically (never a partial or empty file).
    pub(super) fn write_stats(&mut self) {
        let name = self
            .dir
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let body = ProcessStats {
            pid: self.shared.pid.load(Ordering::Relaxed) as u64,
            written: self.shared.written.load(Ordering::Relaxed),
            discarded: self.shared.total_lost(),
        }
        .to_json();
        let file = hushtrace_ctf::stats::file_name(&name);
        let mut inner = self.shared.inner.lock();
        let r = inner.root.replace_file(&file, body.as_bytes());
        let path = inner.root.path().join(&file);
        drop(inner);
        if let Err(e) = r {
            self.note_error(format!("{}: {e}", path.display()));
        }
    }
}
