//! The consumer thread's life cycle: its start (also in the child of a fork, where it did not
//! survive), and the throttle of thread registration when exited threads pile up.

use super::Consumer;
use crate::config::Error;
use crate::platform::{self, SignalBlock};
use crate::state::{self, ConsumerThread};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Name of the consumer thread.
pub(crate) const CONSUMER_THREAD_NAME: &str = "hushtrace-consumer";

/// Starts the consumer thread of this process: a raw `pthread_create` (see
/// `platform::spawn_raw`), so a fork child can start it even when another thread of the parent
/// held a lock of the standard library's thread machinery at the moment of the fork. The thread
/// blocks every asynchronous signal (an application handler, which may trace, never runs on
/// it) and uses no std thread API.
pub(crate) fn spawn(c: Consumer) -> Result<ConsumerThread, Error> {
    let thread = platform::spawn_raw(Box::new(move || {
        platform::block_signals_forever();
        platform::set_thread_name(CONSUMER_THREAD_NAME);
        c.run();
    }))
    .map_err(|source| Error::Io {
        path: "hushtrace consumer thread".into(),
        source,
    })?;
    state::set_consumer_alive();
    Ok(ConsumerThread {
        pid: platform::getpid(),
        thread,
    })
}

/// Wakes the consumer (threads that allow system calls). In the child of a fork, where the
/// consumer did not survive, starts a new one first.
pub(crate) fn wake() {
    if !state::wake_consumer() {
        ensure_running();
    }
}

/// Starts the consumer if this process has a session but no consumer (the child of a fork).
#[cold]
pub(crate) fn ensure_running() {
    if state::consumer_alive() {
        return;
    }
    let Some(s) = state::current_session() else {
        return;
    };
    if s.consumer_failed.load(Ordering::Relaxed) {
        return;
    }
    let _sig = SignalBlock::new();
    let mut slot = s.consumer.lock();
    if state::consumer_alive() {
        return;
    }
    match Consumer::create(s.clone()).and_then(spawn) {
        Ok(t) => *slot = Some(t),
        Err(e) => {
            s.note_error(e);
            s.consumer_failed.store(true, Ordering::Relaxed);
        }
    }
}

/// Above this many undrained buffers of exited threads, registering a new thread waits briefly
/// for the consumer, which bounds memory and open files when threads come and go faster than
/// the consumer runs.
const EXITED_HIGH_WATER: usize = 64;

/// Called before a new thread registers (system calls allowed): if the consumer is behind on
/// exited threads, wake it and wait up to 200 ms for it to catch up.
pub(crate) fn throttle_registration() {
    if !state::active() || state::exited_pending() <= EXITED_HIGH_WATER {
        return;
    }
    wake();
    let deadline = Instant::now() + Duration::from_millis(200);
    while state::exited_pending() > EXITED_HIGH_WATER / 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}
