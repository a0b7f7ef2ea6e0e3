//! Fork handling, installed automatically with `pthread_atfork` when the first session starts.
//!
//! * prepare: take every tracer lock, so no lock is inherited held by a thread that will not
//!   exist in the child;
//! * parent: release them;
//! * child (only async-signal-safe work — stores, `getpid`, `gettid`, `getrandom`): restart callsite type publications a vanished thread left half done, refresh the
//!   forking thread's vpid/vtid, mark every other thread and its buffer abandoned (their
//!   unwritten events belong to the parent, which writes them), restart the forking thread's
//!   buffer empty in O(`num_subbufs`), give the process a new trace UUID, forget the consumer
//!   thread that did not survive, release the locks. Total cost O(threads), independent of the
//!   number of events buffered. The consumer is restarted lazily by the first packet hand-over,
//!   thread registration or session stop in the child; the child's trace goes to
//!   `<dir>/<childpid>/`.

use crate::context::{self, REGISTRY};
use crate::platform;
use crate::session;
use std::sync::atomic::Ordering;

pub(crate) fn install() {
    platform::atfork(prepare, parent, child);
}

extern "C" fn prepare() {
    REGISTRY.lock_forever();
    // SAFETY: we hold the registry lock (just taken).
    if let Some(s) = unsafe { REGISTRY.get_unchecked() }.session.as_ref() {
        s.consumer.lock_forever();
        s.buffers.lock_forever();
        s.uuid.lock_forever();
        s.trace_dir.lock_forever();
        s.io_error.lock_forever();
        s.final_stats.lock_forever();
    }
}

/// Releases what `prepare` took.
///
/// # Safety
/// Must run after `prepare` on the same thread.
unsafe fn release() {
    // SAFETY: `prepare` took the registry lock; the session cannot change while it is held.
    if let Some(s) = unsafe { REGISTRY.get_unchecked() }.session.as_ref() {
        // SAFETY: `prepare` took each of these.
        unsafe {
            s.final_stats.force_unlock();
            s.io_error.force_unlock();
            s.trace_dir.force_unlock();
            s.uuid.force_unlock();
            s.buffers.force_unlock();
            s.consumer.force_unlock();
        }
    }
    // SAFETY: taken by `prepare`.
    unsafe { REGISTRY.force_unlock() };
}

extern "C" fn parent() {
    // SAFETY: runs after `prepare` in the parent.
    unsafe { release() };
}

extern "C" fn child() {
    // SAFETY: runs after `prepare` in the child, on the only thread, which holds the lock.
    let reg = unsafe { REGISTRY.get_unchecked() };
    hushtrace_core::reset_interrupted_publications();
    let me = context::with_current(|c| c as *const context::ThreadCtx);
    let vpid = platform::getpid();
    let vtid = platform::gettid();
    for t in reg.threads.iter() {
        if Some(&**t as *const _) != me {
            t.dead.store(true, Ordering::Relaxed);
            t.buffer.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
    }
    // SAFETY: `me` points to this thread's live context (held by its TLS guard).
    let me = me.map(|p| unsafe { &*p });
    if let Some(c) = me {
        let mut id = c.ident.get();
        id.vpid = vpid;
        id.vtid = vtid;
        id.pthread = platform::pthread_self();
        c.ident.set(id);
    }
    if let Some(s) = reg.session.as_ref() {
        let uuid = platform::random_uuid();
        session::reset_in_child(s, me, uuid);
        if let Some(c) = me {
            let b = c.buffer.load(Ordering::Relaxed);
            if !b.is_null() {
                // SAFETY: our attached buffer is alive (in the session's list) and we are its
                // owner; the reset only stores.
                unsafe { (*b).reset_after_fork(uuid, c.ident.get()) };
            }
        }
    }
    // SAFETY: `prepare` took the locks in this (forking) thread, which is the child's only one.
    unsafe { release() };
}
