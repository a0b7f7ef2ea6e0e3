//! The consumer's loop: one pass over the buffers per wake-up (read timer, a packet hand-over,
//! a control client), and the final pass once the session stops.

use super::Consumer;
use crate::ring::{BufState, Buffer, ConsumerKey, Mode};
use crate::state;
use std::sync::atomic::Ordering;
use std::sync::Arc;
#[cfg(feature = "control")]
use std::time::Duration;

/// The longest wait between two passes while control clients are being served.
#[cfg(feature = "control")]
const CONTROL_POLL: Duration = Duration::from_millis(20);

/// Buffers of exited threads kept for reuse; beyond this they are freed.
const POOL_MAX: usize = 64;

impl Consumer {
    /// The consumer loop; returns after the final flush once the session's stop flag is set.
    pub(crate) fn run(mut self) {
        let timer = self.shared.cfg.read_timer;
        loop {
            let token = state::wakeup_token();
            let stopping = self.shared.stop.load(Ordering::Acquire);
            self.cycle(stopping);
            if stopping {
                break;
            }
            // Clients being served are moved on soon, whatever the read timer.
            #[cfg(feature = "control")]
            let wait = if self.control_busy() {
                timer.min(CONTROL_POLL)
            } else {
                timer
            };
            #[cfg(not(feature = "control"))]
            let wait = timer;
            state::wait_for_wakeup(token, wait);
        }
        if let Err(e) = self.write_metadata() {
            self.note_error(e);
        }
        self.close_sinks();
        self.remove_rings();
        self.write_stats();
        #[cfg(feature = "control")]
        self.park_control();
    }

    /// One pass over all buffers. `last` = the session is stopping and every buffer is
    /// quiescent.
    fn cycle(&mut self, last: bool) {
        if !last {
            #[cfg(feature = "control")]
            self.serve_control();
            self.take_requested_snapshots();
        }
        if self.metadata_stale() {
            if let Err(e) = self.write_metadata() {
                self.note_error(e);
            }
        }
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        // Before exited threads are written out and recycled: a late span's capture may
        // need them (overwrite mode).
        self.check_late(&bufs);
        if !last {
            for b in bufs
                .iter()
                .filter(|b| b.state.load(Ordering::Acquire) == BufState::Attached)
            {
                for s in &mut self.sinks {
                    s.announce(b.instance);
                }
            }
        }
        for b in &bufs {
            let key = ConsumerKey::new(&self.right, b);
            match b.state.load(Ordering::Acquire) {
                BufState::Attached if last => key.finish(|p, n| self.write_packet(b, p, n)),
                BufState::Attached if self.shared.cfg.mode == Mode::Discard => {
                    key.drain(|p, n| self.write_packet(b, p, n));
                }
                BufState::Exited => {
                    // A snapshot requested since this pass began (say, by this thread just
                    // before it exited) is taken first: it must still hold this thread.
                    if !last {
                        self.take_requested_snapshots();
                    }
                    key.finish(|p, n| self.write_packet(b, p, n));
                    key.recycle();
                    state::exited_buffer_done();
                }
                // Only once the stop has quiesced the producers (it sets `stop` after that).
                BufState::Detached if last => key.finish(|p, n| self.write_packet(b, p, n)),
                _ => {}
            }
        }
        if !last {
            self.flush_open_packets(&bufs);
        }
        self.finish_late_captures(&bufs, last);
        self.settle_sinks();
        self.retire_buffers();
    }

    /// Frees abandoned buffers and pooled buffers beyond the pool size; their loss counts
    /// move to the session (abandoned ones belong to the parent process: not counted).
    fn retire_buffers(&mut self) {
        let mut retired = Vec::new();
        let mut inner = self.shared.inner.lock();
        let mut pooled = 0;
        inner.buffers.retain(|b| {
            let keep = match b.state.load(Ordering::Acquire) {
                BufState::Abandoned => false,
                BufState::Pooled => {
                    pooled += 1;
                    pooled <= POOL_MAX
                }
                _ => true,
            };
            if !keep {
                retired.push(b.clone());
            }
            keep
        });
        drop(inner);
        for b in retired {
            if b.state.load(Ordering::Acquire) == BufState::Pooled {
                self.shared.lost.fetch_add(b.lost(), Ordering::Relaxed);
                self.out.remove(&b.instance);
                self.late.forget(b.instance);
                for s in &mut self.sinks {
                    s.forget(b.instance);
                }
                self.remove_ring(&b);
            }
            // Unmapped here, outside the lock.
            drop(b);
        }
    }

    /// The session ends: every output writes what it has pending and closes. Outputs whose
    /// record counts report their last fates; a failure of such an output is the session's
    /// error, another's only a message (the local trace is complete).
    fn close_sinks(&mut self) {
        for s in &mut self.sinks {
            let counts = s.counts();
            let r = s.close(&mut |o| {
                if counts {
                    self.tally.count(&self.shared, o);
                }
            });
            match r {
                Err(e) if counts => self.shared.note_error(e),
                Err(e) => eprintln!("hushtrace: {e}"),
                Ok(()) => {}
            }
        }
    }

    /// Marks a drained buffer's ring file clean and removes it.
    fn remove_ring(&self, b: &Buffer) {
        ConsumerKey::new(&self.right, b).mark_clean();
        if let Some(r) = self.shared.inner.lock().rings.as_mut() {
            r.remove_file(&format!(
                "{}{}",
                hushtrace_ctf::ringfile::RING_PREFIX,
                b.instance
            ));
        }
    }

    /// After the final pass of a clean stop: every ring was drained; remove the ring files,
    /// their directory and the trace directory's pointer to it.
    fn remove_rings(&mut self) {
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        for b in bufs.iter().filter(|b| {
            !matches!(
                b.state.load(Ordering::Acquire),
                BufState::Leaked | BufState::Abandoned
            )
        }) {
            self.remove_ring(b);
        }
        let leaked = bufs
            .iter()
            .any(|b| b.state.load(Ordering::Acquire) == BufState::Leaked);
        if !leaked {
            if let Some(r) = self.shared.inner.lock().rings.take() {
                crate::ringdir::remove(r);
            }
            self.dir.remove_file(hushtrace_ctf::ringfile::RINGS_FILE);
        }
    }
}
