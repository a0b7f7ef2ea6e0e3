//! Stopping a session: detach every buffer, wait until no thread is inside a tracepoint, the
//! consumer's final pass; and the stop at process exit.

use crate::config::{Error, Stats};
use crate::consumer::Consumer;
use crate::ctx::ThreadCtx;
use crate::platform::{self, SignalBlock};
use crate::ring::{BufState, Buffer};
use crate::state::{self, Shared};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

pub(super) static INSTALL: Once = Once::new();

/// Process exit (`exit()`, return from `main`): stops the session so the trace is complete. If
/// another thread is inside `stop()` right now, waits (up to 15 s: the stop's own bound) for it
/// to finish writing, rather than letting the process end under it.
pub(super) extern "C" fn at_exit() {
    if let Some(s) = state::current_session() {
        let _ = stop_shared(&s);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while state::stop_in_progress() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until none of the threads whose buffers were detached is inside a tracepoint. A
/// thread still inside one after a 10 s grace period (stopped by a debugger or SIGSTOP, or
/// starved) keeps its buffer for good: it is marked Leaked, never read and never unmapped, so
/// the thread cannot write into freed memory; its events are lost.
fn quiesce(detached: &[(Arc<ThreadCtx>, *const Buffer)]) {
    // The calling thread is not inside a tracepoint; if it is the only one with a buffer (a
    // single-threaded program, a fork child), there is nothing to wait for and no barrier to
    // issue.
    let me = crate::thread::with_current(|c| c as *const ThreadCtx).unwrap_or(std::ptr::null());
    if detached
        .iter()
        .all(|(t, _)| std::ptr::eq(Arc::as_ptr(t), me))
    {
        return;
    }
    if !platform::membarrier() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for (t, b) in detached {
        while t.depth() != 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        if t.depth() != 0 {
            // SAFETY: the buffer is alive in the session's list (not cleared yet).
            unsafe { &**b }
                .state
                .store(BufState::Leaked, Ordering::Release);
        }
    }
}

pub(crate) fn stop_shared(s: &Arc<Shared>) -> Result<Stats, Error> {
    let _stopping = state::stopping();
    let sig = SignalBlock::new();
    let detached = {
        let mut reg = state::lock_registry(&sig);
        match &reg.session {
            Some(cur) if Arc::ptr_eq(cur, s) => {}
            _ => {
                drop(reg);
                // Another thread (`hushtrace ctl PID stop`, exit) is stopping this session:
                // its statistics are there once it is done.
                let deadline = Instant::now() + Duration::from_secs(15);
                while s.inner.lock().final_stats.is_none()
                    && state::stops_in_progress() > 1
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                return s.inner.lock().final_stats.clone().ok_or(Error::Config {
                    var: None,
                    value: "stop".into(),
                    reason: "this session was never started in this process".into(),
                });
            }
        }
        state::remove_session(&mut reg);
        // Threads that did not survive a fork are skipped: their buffers are abandoned.
        let mut detached = Vec::new();
        for t in reg
            .threads
            .iter()
            .filter(|t| !t.dead.load(Ordering::Relaxed))
        {
            let b = t.buffer.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !b.is_null() {
                // SAFETY: attached buffers are alive in the session's buffer list.
                unsafe { &*b }.state.transition(
                    BufState::Attached,
                    BufState::Detached,
                    Ordering::AcqRel,
                );
                detached.push((t.clone(), b as *const Buffer));
            }
        }
        detached
    };
    quiesce(&detached);
    s.stop.store(true, Ordering::Release);
    let handle = s.consumer.lock().take();
    let mine = platform::getpid();
    match handle {
        Some(h) if h.pid == mine => {
            state::unpark_consumer();
            h.thread.join();
        }
        // No consumer, or a handle inherited across fork() that names a thread of the parent
        // (never joined): run the final pass here.
        _ => match Consumer::create(s.clone()) {
            Ok(c) => c.run(),
            Err(e) => s.note_error(e),
        },
    }
    state::clear_consumer();
    let stats = Stats {
        events_written: s.written.load(Ordering::Relaxed),
        events_discarded: s.total_lost(),
        trace_dir: s.inner.lock().trace_dir.clone(),
    };
    let mut inner = s.inner.lock();
    for b in inner.buffers.drain(..) {
        if b.state.load(Ordering::Acquire) == BufState::Leaked {
            std::mem::forget(b); // its thread may still write to it
        }
    }
    inner.final_stats = Some(stats.clone());
    if let Some(e) = inner.io_error.clone() {
        return Err(Error::Stop {
            stats,
            path: inner.trace_dir.clone(),
            source: std::io::Error::other(e),
        });
    }
    Ok(stats)
}
