//! The span guard's deadline (issue 31): a span with a deadline keeps its begin's timestamp,
//! and its end compares the duration with the deadline (one subtraction, one compare). Only a
//! late span does more, all of it on its own thread and without a system call, lock or
//! allocation: a `hushtrace:late` event in its ring, and the span noted in its ring's late
//! words (`ring/late.rs`), which the consumer reads at its next tick and turns into a capture
//! (`consumer/late.rs`). The end's check and the late path are `write::end_timed` (shared
//! with `async_span!`).
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::late;
use crate::write::{self, Payload};
use crate::SpanGuard;
use hushtrace_core::{Callsite, Interest};
use std::cell::Cell;
use std::time::Duration;

/// Begins a span at `begin` whose guard ends it at `end` (what `span!` expands to once the
/// callsite is enabled).
#[inline(always)]
pub fn begin_span<P: Payload>(
    begin: &'static Callsite,
    end: &'static Callsite,
    interest: Interest,
    payload: P,
) -> SpanGuard {
    let deadline = late::deadline_ticks(end);
    if deadline == 0 {
        write::emit(begin, interest, payload);
        SpanGuard::__new(Some(end))
    } else {
        let start = write::emit_timed(begin, interest, payload);
        SpanGuard::__timed(end, start, deadline)
    }
}

/// Begins a span whose end is recorded apart from a guard (the C and Python tracepoints,
/// `hushtrace-capi`, `hushtrace-python`): writes the begin event at `begin` and returns its
/// timestamp in clock ticks if it was written (`None` if not; 0 when no clock could be read),
/// which the caller keeps and passes to [`end_span`]. The same write as a span with a
/// deadline; no lock, allocation or system call.
#[inline(always)]
pub fn begin_timed<P: Payload>(
    begin: &'static Callsite,
    interest: Interest,
    payload: P,
) -> Option<u64> {
    let ts = Cell::new(0);
    write::emit_at(begin, interest, payload, &ts).then(|| ts.get())
}

/// Ends a span begun at timestamp `start` (from [`begin_timed`]; 0: unknown, never late) at
/// its end callsite `end`, and checks its deadline: the one the session's rules give `end`,
/// else one declared for it ([`declare_span_deadline`], `span!(deadline = ...)`). Without a
/// deadline this is the plain end event; with one, one compare, and a late span does what a
/// late Rust span does (`hushtrace:late`, the note for the consumer). No lock, allocation or
/// system call.
#[inline(always)]
pub fn end_span<P: Payload>(end: &'static Callsite, interest: Interest, payload: P, start: u64) {
    let deadline = late::deadline_ticks(end);
    if deadline == 0 {
        write::emit(end, interest, payload);
    } else {
        write::end_timed(end, interest, payload, start, deadline);
    }
}

/// Whether the spans ending at `end` have a deadline now (the rules' or a declared one; one
/// relaxed load): for a caller that keeps a span's begin timestamp only when its end will
/// check it (the `tracing` bridge). No lock, allocation or system call.
#[inline(always)]
pub fn span_has_deadline(end: &'static Callsite) -> bool {
    late::deadline_ticks(end) != 0
}

/// Declares the deadline of the spans ending at `end` (a span end callsite; zero: nothing),
/// for callers without a `span!` site: a C descriptor's or a Python span's deadline. The
/// session's rules keep precedence. Call it once the session runs (the conversion to clock
/// ticks needs the calibrated clock), e.g. on the callsite's first enabled hit. No lock,
/// allocation or system call.
#[cold]
#[inline(never)]
pub fn declare_span_deadline(end: &'static Callsite, deadline: Duration) {
    let ns = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
    if ns > 0 {
        late::declare(end, ns);
    }
}
