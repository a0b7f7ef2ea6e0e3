//! What the consumer's handle ([`super::RelaySink`]) and the sender thread share: the queue
//! of messages for the relay, the newest metadata, the fates of sent packets, and the sender's
//! progress (for the end of the session, which does not wait for a stuck sender).

use super::super::{Outcome, RelayFailure};
use hushtrace_ctf::metadata::TraceDesc;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Packet bytes queued for the relay's sender at most; a packet that does not fit is not sent.
pub(crate) const RELAY_QUEUE_BYTES: usize = 16 << 20;

/// Other messages (stream announcements, beacons) queued at most.
pub(super) const QUEUE_MESSAGES: usize = 1 << 16;

/// What the consumer and the sender share.
#[derive(Debug)]
pub(super) struct Link {
    pub(super) state: Mutex<LinkState>,
    /// Signalled when there is work for the sender (or the end).
    pub(super) work: Condvar,
    /// Signalled when the sender finished.
    pub(super) finished: Condvar,
    pub(super) epoch: Instant,
    /// When the sender last completed a step (ms since `epoch`).
    pub(super) progress_ms: AtomicU64,
    /// Whether the sender is working (not waiting for work).
    pub(super) busy: AtomicBool,
    /// Whether the sender ever had a working connection.
    pub(super) connected: AtomicBool,
}

#[derive(Debug, Default)]
pub(super) struct LinkState {
    pub(super) queue: VecDeque<Msg>,
    /// Packet bytes in `queue` and in the sender's current batch.
    pub(super) queued_bytes: usize,
    /// The newest metadata and its number (bumped by each update).
    pub(super) desc: Option<Arc<TraceDesc>>,
    pub(super) desc_gen: u64,
    /// Fates of sent packets not collected by the consumer yet, in order.
    pub(super) results: Vec<Outcome>,
    /// Packet copies to reuse.
    pub(super) free: Vec<Vec<u8>>,
    pub(super) closing: bool,
    pub(super) finished: bool,
    /// The consumer left the sender behind: it reports nothing more and ends.
    pub(super) abandoned: bool,
    /// Why the relay session did not end cleanly.
    pub(super) close_error: Option<RelayFailure>,
}

#[derive(Debug)]
pub(super) enum Msg {
    Packet {
        instance: u64,
        bytes: Vec<u8>,
        events: u64,
    },
    Announce(u64),
    Forget(u64),
    Beacon(u64, u64),
}

impl Link {
    pub(super) fn new() -> Link {
        Link {
            state: Mutex::new(LinkState::default()),
            work: Condvar::new(),
            finished: Condvar::new(),
            epoch: Instant::now(),
            progress_ms: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            connected: AtomicBool::new(false),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn note_progress(&self) {
        self.progress_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}
