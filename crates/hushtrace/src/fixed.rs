//! A record path specialised for one event shape, for a language binding's per-call hooks (the
//! Python extension's `py:call` begin and end, two per traced Python call): a registered
//! callsite whose one field is a `u32`.
//!
//! [`with_thread`] finds the calling thread's tracer context with the one thread-local lookup
//! of the tracepoint path and hands it to the caller as a [`FastThread`], which keeps a word
//! of the binding's own for the thread ([`FastThread::word`]: the extension's call depth) and
//! records with [`FastThread::record_u32`]: a hook makes one thread-local lookup where it made
//! two (its own state's and the runtime's). The record itself is the write path of
//! `write.rs` with everything known in advance taken out: the payload is four bytes stored
//! directly, the type signature is compared with a constant, and whatever is not the common
//! case (a callsite disabled or of other field types, no buffer attached yet, no usable cycle
//! counter) goes to the general path, which handles it as `Registered::record_typed` does. The
//! same guarantees: no lock, no allocation, no system call on a thread in no-syscall mode, the
//! ring written only by its owner thread (the calling thread, inside a tracepoint on the
//! buffer attached to it), fork-safe as every tracepoint is.
//!
//! ```
//! use hushtrace::{register_callsite, FieldType, Kind};
//! use hushtrace::__private::{register_thread, with_thread};
//! let dir = std::env::temp_dir().join(format!("ht-fixed-doc-{}", std::process::id()));
//! let session = hushtrace::Session::builder().output_dir(&dir).start()?;
//! let begin = register_callsite("lang", "call", Kind::SpanBegin, &[("f", FieldType::U32)])?;
//! if with_thread(|_| ()).is_none() {
//!     assert!(register_thread()); // the thread's first event registers it
//! }
//! let written = with_thread(|t| {
//!     t.set_word(t.word() + 1);
//!     t.record_u32(&begin, 7)
//! });
//! assert_eq!(written, Some(true));
//! session.stop()?;
//! # let _ = std::fs::remove_dir_all(&dir);
//! # Ok::<(), hushtrace::Error>(())
//! ```
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::callsites::Registered;
use crate::clock;
use crate::ctx::ThreadCtx;
use crate::ring::ProducerKey;
use crate::state;
use crate::thread;
use core::sync::atomic::{compiler_fence, Ordering};
use hushtrace_core::{Callsite, FieldType};

/// The type signature of a callsite whose one field is a `u32`.
const SIG_U32: u64 = Callsite::signature_of(&[FieldType::U32]);

/// The calling thread's tracer context, lent by [`with_thread`] (neither `Send` nor `Sync`:
/// it stays on its thread, inside the closure).
#[derive(Debug)]
pub struct FastThread<'a> {
    ctx: &'a ThreadCtx,
}

/// Calls `f` with the calling thread's tracer context, found with one thread-local lookup;
/// `None` (and `f` not called) when the thread has none: it has not recorded an event yet
/// ([`register_thread`] registers it), or it is exiting.
#[inline(always)]
pub fn with_thread<R>(f: impl FnOnce(&FastThread<'_>) -> R) -> Option<R> {
    thread::with_current(
        #[inline(always)]
        |ctx| f(&FastThread { ctx }),
    )
}

/// Registers the calling thread with the running session, as its first event would (a buffer
/// attached, the consumer started): true when [`with_thread`] now finds its context. False
/// with no session, on an exiting thread, or inside a registration (a signal handler that
/// interrupted one). Allocates and locks: not for a no-syscall thread's hot path (where
/// `init_thread` has registered the thread before).
#[cold]
#[inline(never)]
#[allow(clippy::disallowed_methods)] // a thread's first event: registers, as write.rs does
pub fn register_thread() -> bool {
    state::active() && thread::register().is_some()
}

impl FastThread<'_> {
    /// The binding's word for this thread (0 until [`FastThread::set_word`]; kept for the
    /// thread's life, across sessions and, on the forking thread, `fork()`). One binding per
    /// process uses it: the Python extension, for its call depth.
    #[inline(always)]
    pub fn word(&self) -> u64 {
        self.ctx.binding_word.load(Ordering::Relaxed)
    }

    /// Sets the binding's word for this thread.
    #[inline(always)]
    pub fn set_word(&self, w: u64) {
        self.ctx.binding_word.store(w, Ordering::Relaxed);
    }

    /// Records `v` at `cs`, a callsite registered with one `u32` field, if it is enabled;
    /// returns whether the event was written. What `cs.record_typed((v,))` does (also for a
    /// callsite of other field types: dropped and counted), on this thread's context, with
    /// the common case specialised (module docs): an event that fits in the open packet with
    /// a compact header. Anything else (a packet switch, a long pause that needs an extended
    /// header, no buffer yet) is handed, before anything was written, to `record_typed`.
    #[inline(always)]
    pub fn record_u32(&self, cs: &Registered, v: u32) -> bool {
        let c = cs.callsite();
        if c.state.interest().has_signature(SIG_U32) && clock::counter_usable() {
            if let Some(ok) = self.write_u32(c.state.cached_id(), v) {
                return ok;
            }
        }
        slow(cs, v)
    }

    /// The specialised write: `None`, with nothing written, when the general path must take
    /// the event (no buffer attached: it attaches one or counts the event lost; the open
    /// packet full: it switches packets; a header that must be extended), else `Some(true)`.
    /// No call: the caller's fast path stays a straight line.
    #[inline(always)]
    fn write_u32(&self, id: u16, v: u32) -> Option<bool> {
        let ctx = self.ctx;
        let d = ctx.enter();
        // Compiler-only fence, paired with a stopping session's membarrier(2), as in write.rs.
        compiler_fence(Ordering::SeqCst);
        let buf = ctx.buffer.load(Ordering::Acquire);
        let mut ok = None;
        if !buf.is_null() {
            // SAFETY: an attached buffer stays alive while `depth > 0` (the stop protocol waits).
            let buf = unsafe { &*buf };
            // SAFETY: this thread is inside a tracepoint (`depth > 0`) on the buffer attached
            // to it: it is the ring's producer.
            let key = unsafe { ProducerKey::new(buf) };
            if let Some(dst) = key.reserve_compact(id, 4, clock::cycles) {
                // SAFETY: `reserve_compact` wrote the header and returned 4 writable bytes for
                // the field at `dst`.
                unsafe { (dst as *mut [u8; 4]).write_unaligned(v.to_le_bytes()) };
                if d == 1 {
                    // The event is complete: what a crash recovery may keep.
                    key.mark_done();
                }
                ok = Some(true);
            }
        }
        compiler_fence(Ordering::SeqCst);
        ctx.leave(d);
        ok
    }
}

/// Everything but the common case, through the general path.
#[cold]
#[inline(never)]
fn slow(cs: &Registered, v: u32) -> bool {
    cs.record_typed((v,))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests, not the hot path
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_that_of_one_u32() {
        assert_eq!(
            SIG_U32,
            <(u32,) as crate::write::Payload>::SIG,
            "record_u32's fast path must match what record_typed((u32,)) publishes"
        );
    }
}
