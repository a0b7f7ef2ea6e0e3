//! The tracepoint write path: from a callsite hit to bytes in the calling thread's ring. No
//! lock, no allocation, and no system call on a thread in no-syscall mode.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::clock;
use crate::config::Policy;
use crate::ctx::{ThreadCtx, Violation};
use crate::platform;
use crate::ring::{Buffer, LateSpan, ProducerKey};
use crate::state;
use crate::thread;
use hushtrace_core::{Callsite, CallsiteState, Field, FieldType, Interest, Kind, STR_CAP};
use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicU8, Ordering};

mod sealed {
    /// Seals [`super::Payload`] (see its docs).
    pub trait Sealed {}
}

/// A record payload: a tuple of [`Field`]s with its type signature known at compile time.
///
/// Sealed, like [`Field`]: the write path reserves [`Payload::encoded_len`] bytes once and
/// trusts [`Payload::encode`] to write exactly that many.
///
/// ```compile_fail
/// struct Evil;
/// impl hushtrace::__private::Payload for Evil { // error: the trait is sealed
///     const TYPES: &'static [hushtrace_core::FieldType] = &[];
///     const SIG: u64 = 2;
///     fn encoded_len(&self) -> usize { 0 }
///     unsafe fn encode(&self, _: *mut u8) -> usize { 4096 }
/// }
/// ```
pub trait Payload: sealed::Sealed {
    /// Field types in order.
    const TYPES: &'static [FieldType];
    /// `Callsite::signature_of(TYPES)`.
    const SIG: u64;
    /// Encoded size.
    fn encoded_len(&self) -> usize;
    /// Writes the fields at `dst`; returns the bytes written (`encoded_len()`).
    ///
    /// # Safety
    /// `dst` must be valid for `self.encoded_len()` bytes.
    unsafe fn encode(&self, dst: *mut u8) -> usize;
}

macro_rules! impl_payload {
    ($(($($t:ident $i:tt),*)),* $(,)?) => {$(
        impl<$($t: Field),*> sealed::Sealed for ($($t,)*) {}
        impl<$($t: Field),*> Payload for ($($t,)*) {
            const TYPES: &'static [FieldType] = &[$($t::TYPE),*];
            const SIG: u64 = Callsite::signature_of(Self::TYPES);
            #[inline(always)]
            #[allow(clippy::unused_unit)]
            fn encoded_len(&self) -> usize { 0 $(+ self.$i.encoded_len())* }
            #[inline(always)]
            #[allow(unused_variables, unused_mut)]
            unsafe fn encode(&self, dst: *mut u8) -> usize {
                let mut n = 0;
                $(
                    // SAFETY: the caller provides `encoded_len()` bytes, the sum of the fields'
                    // lengths, and each field writes exactly its own length (sealed `Field`).
                    n += unsafe { self.$i.encode(dst.add(n)) };
                )*
                n
            }
        }
    )*};
}

impl_payload! {
    (),
    (A 0),
    (A 0, B 1),
    (A 0, B 1, C 2),
    (A 0, B 1, C 2, D 3),
    (A 0, B 1, C 2, D 3, E 4),
    (A 0, B 1, C 2, D 3, E 4, F 5),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10),
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11),
}

/// Records one event. `interest` is the value the caller loaded from the callsite state
/// (enabled). Returns whether the event was written. No lock, no allocation, no system call on
/// a thread in no-syscall mode (the one exception, on threads that allow system calls: the
/// first packet hand-over after a `fork()` restarts the consumer).
#[inline(always)]
pub fn emit<P: Payload>(cs: &'static Callsite, interest: Interest, payload: P) -> bool {
    if !interest.has_signature(P::SIG) && !cs.publish_types(P::SIG, P::TYPES) {
        // Another thread is publishing this callsite's types right now, or a generic callsite
        // was instantiated with other types: drop, but count.
        drop_event();
        return false;
    }
    let ts = Cell::new(0);
    match thread::with_current(|ctx| write(ctx, cs.state.cached_id(), &payload, &ts)) {
        Some(ok) => ok,
        None => emit_unregistered(cs, payload, &ts),
    }
}

/// [`emit`], returning the event's timestamp (0 when it was not written): a span with a
/// deadline keeps its begin's and compares its end's (`deadline.rs`).
#[inline(always)]
pub fn emit_timed<P: Payload>(cs: &'static Callsite, interest: Interest, payload: P) -> u64 {
    let ts = Cell::new(0);
    if emit_at(cs, interest, payload, &ts) {
        ts.get()
    } else {
        0
    }
}

/// [`emit`], storing the event's timestamp into `ts` when it is written; whether it was.
#[inline(always)]
pub(crate) fn emit_at<P: Payload>(
    cs: &'static Callsite,
    interest: Interest,
    payload: P,
    ts: &Cell<u64>,
) -> bool {
    if !interest.has_signature(P::SIG) && !cs.publish_types(P::SIG, P::TYPES) {
        drop_event();
        return false;
    }
    match thread::with_current(|ctx| write(ctx, cs.state.cached_id(), &payload, ts)) {
        Some(ok) => ok,
        None => emit_unregistered(cs, payload, ts),
    }
}

/// What the write path encodes: a typed [`Payload`] or a run-time list of [`Value`]s. Private:
/// only the two implementations below exist, each writing exactly `encoded_len()` bytes.
trait Record {
    fn encoded_len(&self) -> usize;
    /// # Safety
    /// `dst` must be valid for `self.encoded_len()` bytes.
    unsafe fn encode(&self, dst: *mut u8) -> usize;
}

impl<P: Payload> Record for P {
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        Payload::encoded_len(self)
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> usize {
        // SAFETY: forwarded contract.
        unsafe { Payload::encode(self, dst) }
    }
}

#[inline(always)]
fn write<P: Record>(ctx: &ThreadCtx, id: u16, payload: &P, ts: &Cell<u64>) -> bool {
    let d = ctx.enter();
    // Compiler-only fence: a stopping session pairs it with membarrier(2), which makes the depth
    // store visible before it reads `depth` (asymmetric fence, as in liburcu's urcu-memb).
    compiler_fence(Ordering::SeqCst);
    let mut buf = ctx.buffer.load(Ordering::Acquire);
    if buf.is_null() {
        buf = no_buffer(ctx);
    }
    let ok = if buf.is_null() {
        false
    } else {
        // SAFETY: an attached buffer stays alive while `depth > 0` (the stop protocol waits).
        let buf = unsafe { &*buf };
        // SAFETY: this thread is inside a tracepoint (`depth > 0`) on the buffer attached to it.
        let key = unsafe { ProducerKey::new(buf) };
        // The fields' length, computed once: the reservation and the encoding both use it.
        let body = payload.encoded_len();
        let stamp = || {
            let t = now(ctx);
            ts.set(t);
            t
        };
        match key.reserve_event(id, body, d, stamp, || after_commit(ctx)) {
            Ok(dst) => {
                // SAFETY: `reserve_event` wrote the header and returned `body` writable bytes at
                // `dst`; the sealed payload writes exactly `body`.
                unsafe {
                    let n = payload.encode(dst);
                    debug_assert_eq!(n, body);
                }
                if d == 1 {
                    // The event is complete: what a crash recovery may keep.
                    key.mark_done();
                }
                true
            }
            Err(_) => false,
        }
    };
    compiler_fence(Ordering::SeqCst);
    ctx.leave(d);
    // Only the clock fallback produces loggable violations on a thread with a buffer; checking
    // it first keeps the common path to one predictable branch on an already loaded flag.
    if d == 1 && !clock::counter_usable() {
        if let Some(v) = ctx.take_pending() {
            log_violation(v);
        }
    }
    ok
}

/// Timestamp for an event of `ctx`'s thread.
#[inline(always)]
fn now(ctx: &ThreadCtx) -> u64 {
    if clock::counter_usable() {
        clock::cycles()
    } else {
        fallback_now(ctx)
    }
}

#[cold]
fn fallback_now(ctx: &ThreadCtx) -> u64 {
    if ctx.in_no_syscall() {
        violation(ctx, Violation::ClockGettime);
        0
    } else {
        clock::fallback_now()
    }
}

/// Applies the no-syscall policy. Makes no system call except for `abort`.
#[cold]
fn violation(ctx: &ThreadCtx, v: Violation) {
    match state::policy() {
        Policy::Zero => {}
        Policy::Abort => platform::abort(),
        // Recorded after the current event (see `write`), not nested inside it.
        Policy::Log => {
            ctx.note_violation(v);
        }
    }
}

/// Called by the producer after it handed a full packet to the consumer.
#[inline]
fn after_commit(ctx: &ThreadCtx) {
    if !ctx.in_no_syscall() && !state::wake_consumer() {
        thread::start_consumer();
    }
}

/// A tracepoint found no buffer attached. Returns a buffer attached now (a thread that allows
/// system calls and missed the session start), or null when the event is lost or there is no
/// session.
#[cold]
#[inline(never)]
fn no_buffer(ctx: &ThreadCtx) -> *mut Buffer {
    if !state::active() {
        return std::ptr::null_mut();
    }
    if !ctx.in_no_syscall() && ctx.depth() <= 1 && !thread::registering() {
        // try_lock: this may run in a signal handler that interrupted this very thread while
        // it held the registry lock.
        if let Some(reg) = state::try_lock_registry() {
            if let Some(s) = reg.session.clone() {
                s.attach(&reg, ctx);
            }
        }
        let b = ctx.buffer.load(Ordering::Acquire);
        if !b.is_null() {
            return b;
        }
    }
    state::count_lost(1);
    if ctx.in_no_syscall() {
        violation(ctx, Violation::BufferAllocation);
    }
    std::ptr::null_mut()
}

/// Counts an event that is dropped before reaching a ring: in the thread's stream when it has
/// a buffer (so the CTF discarded count shows it), else in the session.
#[cold]
#[inline(never)]
pub(crate) fn drop_event() {
    let counted = thread::with_current(|ctx| {
        let d = ctx.enter();
        compiler_fence(Ordering::SeqCst);
        let buf = ctx.buffer.load(Ordering::Acquire);
        let in_ring = !buf.is_null();
        if in_ring {
            // SAFETY: attached buffers stay alive while `depth > 0`, and this thread, inside a
            // tracepoint on the buffer attached to it, is its producer (the key).
            unsafe { ProducerKey::new(&*buf) }.count_dropped();
        }
        compiler_fence(Ordering::SeqCst);
        ctx.leave(d);
        in_ring
    });
    if counted != Some(true) && state::active() {
        state::count_lost(1);
    }
}

#[cold]
#[inline(never)]
fn emit_unregistered<P: Record>(cs: &'static Callsite, payload: P, ts: &Cell<u64>) -> bool {
    if !state::active() {
        return false;
    }
    match thread::register() {
        Some(ctx) => write(&ctx, cs.state.cached_id(), &payload, ts),
        None => {
            state::count_lost(1);
            false
        }
    }
}

/// Notes a late span in the calling thread's ring for the consumer (`ring/late.rs`): stores
/// only, no lock, allocation or system call. Nothing without a buffer attached.
#[cold]
#[inline(never)]
pub(crate) fn note_late(span: LateSpan) {
    thread::with_current(|ctx| {
        let d = ctx.enter();
        compiler_fence(Ordering::SeqCst);
        let buf = ctx.buffer.load(Ordering::Acquire);
        if !buf.is_null() {
            // SAFETY: an attached buffer stays alive while `depth > 0` (the stop protocol
            // waits), and this thread, inside a tracepoint on it, is its producer.
            unsafe { ProducerKey::new(&*buf) }.note_late(span);
        }
        compiler_fence(Ordering::SeqCst);
        ctx.leave(d);
    });
}

/// Closes the calling thread's open packet (for a snapshot it requests): no lock, no system
/// call. Skipped inside a tracepoint (a signal handler that interrupted one).
pub(crate) fn close_own_packet() {
    thread::with_current(|ctx| {
        let d = ctx.enter();
        compiler_fence(Ordering::SeqCst);
        let buf = ctx.buffer.load(Ordering::Acquire);
        if d == 1 && !buf.is_null() {
            // SAFETY: an attached buffer stays alive while `depth > 0` (the stop protocol
            // waits), and this thread is its producer.
            unsafe { ProducerKey::new(&*buf) }.close_open_packet(|| now(ctx));
        }
        compiler_fence(Ordering::SeqCst);
        ctx.leave(d);
    });
}

static VIOLATION_STATE: CallsiteState = CallsiteState::new();
static VIOLATION_TYPES: [AtomicU8; 1] = [AtomicU8::new(0)];
#[linkme::distributed_slice(hushtrace_core::CALLSITES)]
static VIOLATION: Callsite = Callsite {
    category: "hushtrace",
    name: "no_syscall_violation",
    kind: Kind::Instant,
    field_names: &["what"],
    field_types: &VIOLATION_TYPES,
    state: &VIOLATION_STATE,
    file: file!(),
    line: line!(),
};

/// Records a `hushtrace:no_syscall_violation` event on the current thread, after the
/// tracepoint that hit the violation finished its own record.
fn log_violation(v: Violation) {
    let interest = VIOLATION.state.interest();
    if interest.is_enabled() {
        emit(&VIOLATION, interest, (v.what(),));
    }
}

/// Ends a span with a deadline: records the end (`payload` at callsite `end`) and, if the span
/// took longer than `deadline` ticks since `start`, the late span (`span!`'s guard and
/// `async_span!`'s, see `deadline.rs`).
#[inline(always)]
pub(crate) fn end_timed<P: Payload>(
    end: &'static Callsite,
    interest: Interest,
    payload: P,
    start: u64,
    deadline: u64,
) {
    let now = emit_timed(end, interest, payload);
    // A begin or an end that was not written (a full buffer, no clock in no-syscall mode)
    // has timestamp 0: no duration, not late.
    if start != 0 && now.saturating_sub(start) > deadline {
        span_late(end, start, now, deadline);
    }
}

static LATE_STATE: CallsiteState = CallsiteState::new();
static LATE_TYPES: [AtomicU8; 6] = [const { AtomicU8::new(0) }; 6];
/// `hushtrace:late`: a span that ended past its deadline (written right after its end).
#[linkme::distributed_slice(hushtrace_core::CALLSITES)]
static LATE: Callsite = Callsite {
    category: "hushtrace",
    name: "late",
    kind: Kind::Instant,
    field_names: &[
        "span_id",
        "category",
        "name",
        "start",
        "duration_ns",
        "deadline_ns",
    ],
    field_types: &LATE_TYPES,
    state: &LATE_STATE,
    file: file!(),
    line: line!(),
};

/// A late span: the `hushtrace:late` event (span callsite id, category, name, begin timestamp
/// in clock ticks, duration and deadline in ns) and the note for the consumer.
#[cold]
#[inline(never)]
fn span_late(end: &'static Callsite, start: u64, now: u64, deadline: u64) {
    let interest = LATE.state.interest();
    if interest.is_enabled() {
        let payload = (
            end.state.cached_id(),
            end.category,
            end.name,
            start,
            crate::late::ticks_to_ns(now - start),
            crate::late::deadline_ns(end.state.cached_id()),
        );
        emit(&LATE, interest, payload);
    }
    note_late(LateSpan {
        callsite: end.state.cached_id(),
        start,
        end: now,
        deadline,
    });
}

/// A field value given at run time, for callsites registered at run time
/// ([`crate::register_callsite`]): the C interface, the `tracing` bridge. The one value type
/// of hushtrace ([`hushtrace_core::FieldValue`]), also what the trace reader decodes; its
/// `encoded_len`/`encode` are the record encoding of the dynamic write path below.
pub use hushtrace_core::Value;

/// A run-time list of values, encoded field by field.
struct Values<'v, 'a>(&'v [Value<'a>]);

impl Record for Values<'_, '_> {
    #[inline]
    fn encoded_len(&self) -> usize {
        self.0.iter().map(Value::encoded_len).sum()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> usize {
        let mut n = 0;
        for v in self.0 {
            // SAFETY: the caller provides `encoded_len()` bytes, the sum of the values'
            // lengths, and each value writes exactly its own length.
            n += unsafe { v.encode(dst.add(n)) };
        }
        n
    }
}

const _: () = assert!(STR_CAP < 4096);

/// Records `values` at a callsite registered at run time, if it is enabled. The values must
/// have the callsite's field types, in order (else the event is dropped and counted). Same
/// guarantees as the macros: no lock, no allocation, no system call on a no-syscall thread.
#[inline]
pub fn emit_values(cs: &'static Callsite, values: &[Value<'_>]) -> bool {
    emit_values_at(cs, values, &Cell::new(0))
}

/// [`emit_values`], returning the event's timestamp if it was written (`None` if not; a
/// written event's timestamp is 0 when no clock could be read): the begin of a span with
/// run-time values whose end checks a deadline (`deadline::end_span`).
#[inline]
pub fn emit_values_timed(cs: &'static Callsite, values: &[Value<'_>]) -> Option<u64> {
    let ts = Cell::new(0);
    emit_values_at(cs, values, &ts).then(|| ts.get())
}

/// [`emit_values`], storing the event's timestamp into `ts` when it is written.
#[inline(always)]
fn emit_values_at(cs: &'static Callsite, values: &[Value<'_>], ts: &Cell<u64>) -> bool {
    let interest = cs.state.interest();
    if !interest.is_enabled() {
        return false;
    }
    let types = cs.field_types;
    if types.len() != values.len()
        || types
            .iter()
            .zip(values)
            .any(|(t, v)| t.load(Ordering::Relaxed) != v.field_type() as u8)
    {
        drop_event();
        return false;
    }
    let payload = Values(values);
    match thread::with_current(|ctx| write(ctx, cs.state.cached_id(), &payload, ts)) {
        Some(ok) => ok,
        None => emit_unregistered(cs, payload, ts),
    }
}
