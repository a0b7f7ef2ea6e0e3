//! Span deadlines (issue 31): each span callsite's deadline, resolved once and kept in clock
//! ticks, so the end of a span checks lateness with one load and one compare.
//!
//! A deadline comes from the code (`span!(deadline = d, ...)`, declared on the callsite's first
//! enabled hit) or from the session's rules (`HUSHTRACE_ON_LATE`,
//! [`crate::SessionBuilder::on_late`]), the rules winning. Three tables indexed by the span's
//! *end* callsite id hold the code's deadline, the rules' deadline (both in ns, 0 for none) and
//! the effective deadline in ticks (0 for none), which is what the tracepoint reads.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::clock;
use hushtrace_core::{Callsite, DeadlineRules, Kind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Event ids are `u16`: one slot per possible id (untouched slots cost no memory).
const IDS: usize = 1 << 16;

/// The effective deadline of each span end callsite, in ticks of the trace clock (0: none).
static TICKS: [AtomicU64; IDS] = [const { AtomicU64::new(0) }; IDS];
/// The deadline the code gave each span callsite, in ns (0: none).
static CODE_NS: [AtomicU64; IDS] = [const { AtomicU64::new(0) }; IDS];
/// The deadline the session's rules give each span callsite, in ns (0: none).
static RULE_NS: [AtomicU64; IDS] = [const { AtomicU64::new(0) }; IDS];

/// The deadline of the span whose end callsite is `end`, in ticks (0: none). One relaxed load.
#[inline(always)]
pub(crate) fn deadline_ticks(end: &Callsite) -> u64 {
    TICKS[usize::from(end.state.cached_id())].load(Relaxed)
}

/// The trace clock's ticks for `ns` nanoseconds (at least 1 for a non-zero `ns`); `None`
/// before the clock is calibrated. Arithmetic only.
pub(crate) fn ns_to_ticks(ns: u64) -> Option<u64> {
    if ns == 0 {
        return Some(0);
    }
    let freq = clock::calibrated()?.freq;
    let t = u128::from(ns) * u128::from(freq) / 1_000_000_000;
    Some(u64::try_from(t).unwrap_or(u64::MAX).max(1))
}

/// Nanoseconds for `ticks` of the trace clock (the ticks themselves before calibration).
pub(crate) fn ticks_to_ns(ticks: u64) -> u64 {
    match clock::calibrated() {
        Some(c) if c.freq != 1_000_000_000 && c.freq != 0 => {
            let ns = u128::from(ticks) * 1_000_000_000 / u128::from(c.freq);
            u64::try_from(ns).unwrap_or(u64::MAX)
        }
        _ => ticks,
    }
}

/// Records the deadline the code gives the span ending at `end` (`ns` > 0). The session's rules
/// keep precedence. No lock, allocation or system call.
pub(crate) fn declare(end: &'static Callsite, ns: u64) {
    let id = usize::from(end.id());
    CODE_NS[id].store(ns.max(1), Relaxed);
    if RULE_NS[id].load(Relaxed) == 0 {
        if let Some(t) = ns_to_ticks(ns.max(1)) {
            TICKS[id].store(t, Relaxed);
        }
    }
}

/// Records the deadline the code gave a span callsite (`span!(deadline = d, ...)`), on its
/// first enabled hit (`declared` remembers it). No lock, allocation or system call.
#[cold]
#[inline(never)]
pub fn declare_deadline(end: &'static Callsite, declared: &AtomicBool, deadline: Duration) {
    let ns = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
    if ns > 0 {
        declare(end, ns);
    }
    declared.store(true, Relaxed);
}

/// Applies a session's rules (empty: none) to every span callsite known now: the rules'
/// deadline, else the code's, converted to ticks. Called at session start, after the clock's
/// calibration; also for a callsite registered later ([`apply_to`]).
pub(crate) fn apply_rules(rules: &DeadlineRules) {
    for cs in hushtrace_core::all_callsites() {
        apply_to(rules, cs);
    }
}

/// [`apply_rules`] for one callsite (not a span end: nothing).
pub(crate) fn apply_to(rules: &DeadlineRules, cs: &'static Callsite) {
    if !matches!(cs.kind, Kind::SpanEnd | Kind::AsyncEnd) {
        return;
    }
    let id = usize::from(cs.id());
    let rule = rules.deadline_ns(cs.category, cs.name).unwrap_or(0);
    RULE_NS[id].store(rule, Relaxed);
    let ns = if rule != 0 {
        rule
    } else {
        CODE_NS[id].load(Relaxed)
    };
    TICKS[id].store(ns_to_ticks(ns).unwrap_or(0), Relaxed);
}

/// The deadline in ns of the span ending at callsite `id`, as given (the rules', else the
/// code's; 0: none).
pub(crate) fn deadline_ns(id: u16) -> u64 {
    let id = usize::from(id);
    match RULE_NS[id].load(Relaxed) {
        0 => CODE_NS[id].load(Relaxed),
        rule => rule,
    }
}
