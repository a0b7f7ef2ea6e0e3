//! The span guard's deadline (issue 31): a span with a deadline keeps its begin's timestamp,
//! and its end compares the duration with the deadline (one subtraction, one compare). Only a
//! late span does more, all of it on its own thread and without a system call, lock or
//! allocation: a `hushtrace:late` event in its ring, and the span noted in its ring's late
//! words (`ring/late.rs`), which the consumer reads at its next tick and turns into a capture
//! (`consumer/late.rs`).
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::late;
use crate::ring::LateSpan;
use crate::write::{self, Payload};
use crate::SpanGuard;
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use hushtrace_core::{Callsite, CallsiteState, Interest, Kind};
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

/// Records the deadline the code gave a span callsite (`span!(deadline = d, ...)`), on its
/// first enabled hit (`declared` remembers it). No lock, allocation or system call.
#[cold]
#[inline(never)]
pub fn declare_deadline(end: &'static Callsite, declared: &AtomicBool, deadline: Duration) {
    let ns = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
    if ns > 0 {
        late::declare(end, ns);
    }
    declared.store(true, Ordering::Relaxed);
}

/// Ends a span with a deadline: records the end and, if the span took longer than `deadline`
/// ticks, the late span.
#[inline(always)]
pub(crate) fn end_span(end: &'static Callsite, interest: Interest, start: u64, deadline: u64) {
    let now = write::emit_timed(end, interest, ());
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
            late::ticks_to_ns(now - start),
            late::deadline_ns(end.state.cached_id()),
        );
        write::emit(&LATE, interest, payload);
    }
    write::note_late(LateSpan {
        callsite: end.state.cached_id(),
        start,
        end: now,
        deadline,
    });
}
