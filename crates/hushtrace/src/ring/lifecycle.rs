//! A ring's life cycle ([`BufState`]) and the atomic word that holds it.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::primitive::{AtomicU8, Ordering};

/// Buffer life cycle, stored in [`Buffer::state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BufState {
    /// Attached to a live thread; the thread is the producer.
    Attached = 0,
    /// The thread exited after its last event (Release); the consumer owns the producer side.
    Exited = 1,
    /// Taken from its thread by a session stop; quiescent once the stop has waited for it.
    Detached = 2,
    /// Drained and waiting in the pool for another thread.
    Pooled = 3,
    /// Inherited across `fork()` from a thread that does not exist in this process: never read.
    Abandoned = 4,
    /// Its thread did not leave a tracepoint within the stop's grace period (stopped or
    /// starved): never read, never unmapped (the thread may still write to it).
    Leaked = 5,
}

impl BufState {
    const ALL: [BufState; 6] = [
        BufState::Attached,
        BufState::Exited,
        BufState::Detached,
        BufState::Pooled,
        BufState::Abandoned,
        BufState::Leaked,
    ];
}

/// An atomic [`BufState`]: only valid states can be stored, so a load always decodes.
#[derive(Debug)]
pub struct AtomicBufState(AtomicU8);

impl AtomicBufState {
    /// A state word holding `s`.
    pub fn new(s: BufState) -> Self {
        AtomicBufState(AtomicU8::new(s as u8))
    }
    /// The current state.
    pub fn load(&self, order: Ordering) -> BufState {
        // Only `BufState as u8` values are ever stored (the field is private to this type).
        BufState::ALL[self.0.load(order) as usize]
    }
    /// Sets the state.
    pub fn store(&self, s: BufState, order: Ordering) {
        self.0.store(s as u8, order)
    }
    /// Moves from `from` to `to`; false if the state was not `from`.
    pub fn transition(&self, from: BufState, to: BufState, success: Ordering) -> bool {
        self.0
            .compare_exchange(from as u8, to as u8, success, Ordering::Relaxed)
            .is_ok()
    }
}
