//! The in-process consumer: a thread that wakes on the read timer (or when a thread that allows
//! system calls hands over a packet), writes full packets to its outputs, drains and recycles
//! the buffers of exited threads, keeps the TSDL metadata current and, when the session stops,
//! flushes everything.
//!
//! One module per job:
//!
//! | module | job |
//! |---|---|
//! | `run` | the loop: one pass over the buffers per wake-up, the final pass, retiring buffers |
//! | `setup` | the trace directory, the rings' directory, the outputs, the metadata |
//! | `output` | a packet the ring handed over, renumbered after the flush, to every sink |
//! | `sink` | the outputs behind one interface: `sink/file.rs` (stream files), `sink/relay.rs` |
//! | `flush` | the flush of idle threads' open packets (and live beacons) |
//! | `snapshot` | snapshots of the flight recorder |
//! | `late` | late-span captures (`late/<n>/`, `late/index.json`) and their counters |
//! | `answers`, `ctl` | answers to `hushtrace ctl` (feature `control`) |
//! | `status` | the `status` answer, running or stopped (feature `control`) |
//! | `stats` | counts, `status` numbers, the statistics file |
//! | `lifecycle` | the consumer thread: start, wake-ups, a fork child's new consumer |

#[cfg(feature = "control")]
mod answers;
#[cfg(feature = "control")]
mod ctl;
mod flush;
mod late;
mod lifecycle;
mod output;
mod run;
mod setup;
pub(crate) mod sink;
mod snapshot;
mod stats;
#[cfg(feature = "control")]
mod status;

pub(crate) use lifecycle::{ensure_running, spawn, throttle_registration, wake};

use crate::state::Shared;
use crate::tracedir::Dir;
use hushtrace_ctf::metadata::TraceDesc;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The consumer of one process's session (its state; the jobs are in the submodules).
#[derive(Debug)]
pub(crate) struct Consumer {
    shared: Arc<Shared>,
    /// This process's trace directory.
    dir: Dir,
    /// Where packets and metadata go: the stream files, and the relay if the session has one.
    sinks: Vec<Box<dyn sink::Sink>>,
    types_gen: Option<u64>,
    /// The control socket (`hushtrace ctl`), if one could be bound.
    #[cfg(feature = "control")]
    control: Option<crate::control::Server>,
    /// Events written and lost, in total and per stream (for `status`).
    tally: stats::Tally,
    /// Snapshots taken by this process.
    snapshots: u64,
    /// Late spans: counters and captures in progress.
    late: late::LateState,
    /// The metadata as of `types_gen` (the sinks' metadata and the flush's event sizes).
    desc: TraceDesc,
    /// Per stream: what the flush of open packets changed in the packets written.
    out: HashMap<u64, flush::StreamOut>,
    /// When the flush last looked at the open packets.
    last_flush: Instant,
    /// The consumer's right, with which it opens each ring (`ring::ConsumerKey::new`).
    right: crate::ring::ConsumerRight,
    /// What the kernel refused of the session's consumer scheduling or CPUs (for `status`).
    sched_error: Option<String>,
}
