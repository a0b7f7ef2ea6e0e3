//! What a session recorded.

use std::path::PathBuf;

/// What a session recorded in this process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events written to the trace.
    pub events_written: u64,
    /// Events lost: dropped on a full buffer (discard mode), overwritten (overwrite mode),
    /// dropped by a nested tracepoint at a packet boundary, or lost to a write error.
    pub events_discarded: u64,
    /// This process's trace directory (`<output_dir>/<pid>`), absolute.
    pub trace_dir: PathBuf,
}
