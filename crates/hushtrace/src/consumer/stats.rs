//! The counts of what the outputs made of the session's events ([`Tally`]), and the
//! statistics file `<root>/<trace dir name>.stats.json`, written at the session's end.

use super::sink::Outcome;
use super::Consumer;
use crate::state::Shared;
use hushtrace_ctf::stats::ProcessStats;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// The session's events as the outputs whose record counts ([`super::sink::Sink::counts`])
/// wrote or lost them: the totals in [`Shared`] (`written`, `lost`), and the events written
/// per stream (for `status`).
#[derive(Debug, Default)]
pub(super) struct Tally {
    written_by_stream: HashMap<u64, u64>,
}

impl Tally {
    /// Counts a packet's events as written or lost.
    pub(super) fn count(&mut self, shared: &Shared, o: Outcome) {
        if o.delivered {
            *self.written_by_stream.entry(o.instance).or_default() += o.events;
            shared.written.fetch_add(o.events, Ordering::Relaxed);
        } else {
            shared.lost.fetch_add(o.events, Ordering::Relaxed);
        }
    }

    /// Events of stream `instance` written so far.
    #[cfg(feature = "control")]
    pub(super) fn written(&self, instance: u64) -> u64 {
        self.written_by_stream.get(&instance).copied().unwrap_or(0)
    }
}

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
        // The late-span counters after the reader's keys (readers ignore keys they do not
        // know): `{"pid":..,"written":..,"discarded":..,"late_spans":..,...}`.
        let body = match body.trim_end().strip_suffix('}') {
            Some(head) => format!("{head},{}}}\n", self.late.counts.json_fields()),
            None => body,
        };
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
