//! The forked child of the crash-recovery tests (`recovery.rs`, `direct_io.rs`), apart from
//! `common` because `common` is also compiled into other crates' tests, where `hushtrace` has
//! another name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A forked child's body for crash-recovery tests: starts the session `builder` describes (the
/// child exits with status 3 if it cannot), records `rec:seq` events `0..events`, stores
/// `events` in `returned` (memory shared with the parent, `common::shared_counter`), and
/// waits to be killed, its session never stopped: its rings stay for `recover`.
pub fn record_and_wait_for_kill(
    builder: hushtrace::SessionBuilder,
    events: u64,
    returned: &AtomicU64,
) -> ! {
    let Ok(session) = builder.start() else {
        // SAFETY: leaving the forked child without running the parent's destructors.
        unsafe { libc::_exit(3) }
    };
    for seq in 0..events {
        hushtrace::event!("rec", "seq", seq = seq);
    }
    returned.store(events, Ordering::SeqCst);
    std::mem::forget(session);
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}
