//! The begin timestamps of the C spans open on this thread (issue 31): `HT_SPAN_BEGIN` and
//! `HT_SPAN_END` are two tracepoints, so the end finds its begin's timestamp here to check the
//! span's deadline (`hushtrace::__private::end_span`). A fixed stack per thread (a
//! constant-initialized thread-local, no destructor): push and pop are a few loads and stores,
//! no lock, allocation or system call. Deeper than [`DEPTH`] nested spans, or an end whose
//! begin is not on top (a begin or end recorded while the other was disabled), gets no start,
//! and that end is never late.

use hushtrace_core::Callsite;
use std::cell::Cell;

/// The most nested C spans whose begins are kept.
const DEPTH: usize = 64;

/// One open span: its begin callsite and the begin's timestamp.
#[derive(Clone, Copy)]
struct Open {
    begin: *const Callsite,
    start: u64,
}

const NONE: Open = Open {
    begin: std::ptr::null(),
    start: 0,
};

thread_local! {
    static OPEN: [Cell<Open>; DEPTH] = const { [const { Cell::new(NONE) }; DEPTH] };
    static LEN: Cell<usize> = const { Cell::new(0) };
}

/// Notes that the span begun at `begin` started at `start` (0: unknown).
#[inline]
pub(crate) fn push(begin: &'static Callsite, start: u64) {
    // `try_with`: nothing to note while the thread's locals are being destroyed.
    let _ = LEN.try_with(|len| {
        let n = len.get();
        if n < DEPTH {
            let _ = OPEN.try_with(|open| open[n].set(Open { begin, start }));
        }
        len.set(n.saturating_add(1));
    });
}

/// The begin timestamp of the innermost open span, removed, if that span has the category
/// and name of `end`; else 0 (unknown: the end is not checked).
#[inline]
pub(crate) fn pop(end: &'static Callsite) -> u64 {
    LEN.try_with(|len| {
        let n = len.get();
        if n == 0 {
            return 0;
        }
        len.set(n - 1);
        if n > DEPTH {
            return 0;
        }
        let top = OPEN
            .try_with(|open| open[n - 1].replace(NONE))
            .unwrap_or(NONE);
        if top.begin.is_null() {
            return 0;
        }
        // SAFETY: `push` stores only `&'static Callsite`s.
        let begin = unsafe { &*top.begin };
        if begin.category == end.category && begin.name == end.name {
            top.start
        } else {
            0
        }
    })
    .unwrap_or(0)
}
