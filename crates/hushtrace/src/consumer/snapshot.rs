//! Snapshots of the flight recorder (overwrite mode): requested by `hushtrace::snapshot()`
//! (`crate::snapshot`) or `hushtrace ctl PID snapshot`, written by the consumer as complete
//! CTF traces without stopping tracing.

use super::Consumer;
use crate::ring::{BufState, Buffer, ConsumerKey, Mode};
use crate::state;
use crate::tracedir::{Dir, TraceFiles};
use hushtrace_ctf::layout::{METADATA_FILE, STREAM_PREFIX};
use hushtrace_ctf::metadata::to_tsdl;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Consumer {
    /// Takes the snapshots requested by `hushtrace::snapshot()` since the last pass (one
    /// snapshot answers every pending request).
    pub(super) fn take_requested_snapshots(&mut self) {
        let (taken, requested) = state::pending_snapshots();
        if requested <= taken {
            return;
        }
        let r = self.snapshot_numbered(requested, None);
        let mut inner = self.shared.inner.lock();
        if inner.snapshot_results.len() >= 64 {
            drop(inner.snapshot_results.remove(0));
        }
        inner.snapshot_results.push((requested, r));
        drop(inner);
        state::snapshots_taken(requested);
    }

    /// A snapshot for `hushtrace ctl PID snapshot [DIR]`.
    #[cfg(feature = "control")]
    pub(super) fn snapshot(&mut self, dir: Option<PathBuf>) -> Result<PathBuf, String> {
        self.snapshots += 1;
        let n = 1_000_000 + self.snapshots; // apart from the numbers of snapshot() requests
        self.snapshot_numbered(n, dir)
    }

    /// Writes the newest contents of every attached ring as a complete CTF trace in
    /// `<dir>/<pid>/` (`dir` defaults to `<session dir>/snapshots/<n>`), without stopping
    /// tracing. Returns that directory.
    pub(super) fn snapshot_numbered(
        &mut self,
        n: u64,
        dir: Option<PathBuf>,
    ) -> Result<PathBuf, String> {
        if self.shared.cfg.mode != Mode::Overwrite {
            return Err(crate::config::Error::NeedsOverwriteMode.to_string());
        }
        let pid = self.shared.pid.load(Ordering::Relaxed).to_string();
        let err = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
        let mut parent = match dir {
            Some(d) => Dir::open_root(&d).map_err(|e| err(&d, e))?,
            None => {
                let mut inner = self.shared.inner.lock();
                let snaps = inner
                    .root
                    .open_or_create_subdir("snapshots")
                    .map_err(|e| err(&inner.root.path().join("snapshots"), e))?;
                drop(inner);
                let mut snaps = snaps;
                snaps
                    .open_or_create_subdir(&n.to_string())
                    .map_err(|e| err(&snaps.path().join(n.to_string()), e))?
            }
        };
        let mut next = 0;
        let out = parent
            .create_subdir(&pid, &mut next)
            .map_err(|e| err(&parent.path().join(&pid), e))?;
        let path = out.path().to_path_buf();
        let mut files = TraceFiles::new(out);
        let desc = self.trace_desc();
        // Readers do not take a snapshot (no statistics file) for a crashed process's trace.
        let _ = files
            .dir
            .replace_file(hushtrace_ctf::reader::SNAPSHOT_MARKER, b"snapshot\n");
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        // Attached rings, and those of threads that exited since the last pass (not yet
        // written out and recycled: `run.rs` takes pending snapshots before it does).
        // In the last pass of a stop (a late span's capture, `late.rs`), the quiescent rings
        // too: they are written out after this.
        let stopping = self.shared.stop.load(Ordering::Acquire);
        let live = |b: &&Arc<Buffer>| match b.state.load(Ordering::Acquire) {
            BufState::Attached | BufState::Exited => true,
            BufState::Detached => stopping,
            _ => false,
        };
        // Every thread's complete events up to now, idle or not: its newest committed packets
        // and the complete part of its open packet (`ring/snapshot.rs`).
        let mut failed = None;
        for b in bufs.iter().filter(live) {
            ConsumerKey::new(&self.right, b).copy_newest(&desc, |bytes, _events| {
                if let Err(e) = files.append_parts(b.instance, &[bytes]) {
                    let name = format!("{STREAM_PREFIX}{}", b.instance);
                    failed.get_or_insert_with(|| err(&path.join(&name), e));
                }
            });
        }
        files.close_all();
        // The metadata last: a callsite whose types were published while the rings were
        // copied may have events in the copied packets, and `desc` (taken before) lacks it.
        files
            .dir
            .replace_file(METADATA_FILE, to_tsdl(&self.trace_desc()).as_bytes())
            .map_err(|e| err(&path.join(METADATA_FILE), e))?;
        match failed {
            Some(e) => Err(e),
            None => Ok(path),
        }
    }
}
