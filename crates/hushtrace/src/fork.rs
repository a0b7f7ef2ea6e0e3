//! Fork handling, installed automatically with `pthread_atfork` when the first session starts.
//!
//! * prepare: take every tracer lock ([`state::fork_prepare`] lists them), so no lock is
//!   inherited held by a thread that will not exist in the child;
//! * parent: release them;
//! * child (only async-signal-safe work — stores, `getpid`, `gettid`, `getrandom`): restart
//!   callsite type publications a vanished thread left half done, refresh the forking thread's
//!   vpid/vtid, mark every other thread and its buffer abandoned (their unwritten events belong
//!   to the parent, which writes them), restart the forking thread's buffer empty in
//!   O(`num_subbufs`), give the process a new trace UUID, forget the consumer thread that did
//!   not survive, release the locks. Total cost O(threads), independent of the number of events
//!   buffered. The consumer is restarted lazily by the first packet hand-over, thread
//!   registration or session stop in the child; the child's trace goes to `<dir>/<childpid>/`.

use crate::platform;
use crate::state::{self, ForkLocked};
use crate::thread;

pub(crate) fn install() {
    platform::atfork(prepare, parent, child);
}

extern "C" fn prepare() {
    // The locks stay taken; the proof is re-created by the parent/child handler, which run on
    // this same thread right after the fork (pthread_atfork's contract).
    let _locked: ForkLocked = state::fork_prepare();
}

/// The proof `prepare` forgot.
///
/// # Safety
/// Only in the parent or child handler, after `prepare` ran on this thread.
unsafe fn taken() -> ForkLocked {
    // SAFETY: forwarded contract.
    unsafe { state::fork_locked_unchecked() }
}

extern "C" fn parent() {
    // SAFETY: runs after `prepare` in the parent.
    state::fork_release(unsafe { taken() });
}

extern "C" fn child() {
    // SAFETY: runs after `prepare` in the child, on the only thread, which holds the locks.
    let mut locked = unsafe { taken() };
    hushtrace_core::reset_interrupted_publications();
    let uuid = platform::random_uuid();
    if thread::with_current(|me| state::reset_in_child(&mut locked, Some(me), uuid)).is_none() {
        state::reset_in_child(&mut locked, None, uuid);
    }
    state::fork_release(locked);
}
