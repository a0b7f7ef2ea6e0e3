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
