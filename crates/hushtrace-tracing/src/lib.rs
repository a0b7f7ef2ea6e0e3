//! Record [`tracing`](https://docs.rs/tracing) spans and events with hushtrace.
//!
//! Three lines next to a hushtrace session started as usual:
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//! let _session = hushtrace::Session::builder().output_dir("/tmp/trace").start()?;
//! tracing_subscriber::registry().with(hushtrace_tracing::layer()).init();
//! tracing::info!(answer = 42, "hello");
//! # Ok::<(), hushtrace::Error>(())
//! ```
//!
//! # What is recorded
//!
//! Every `tracing` callsite becomes hushtrace callsites registered at run time
//! ([`hushtrace::register_callsite`]) when `tracing` registers it with the layer, with
//! **category = the target** and **name = the span's or the event's name** (`tracing` names an
//! event `"event <file>:<line>"` unless it is given `name: "..."`).
//!
//! * An **event** is an instant with the field `level` (`"TRACE"` .. `"ERROR"`), then every
//!   field of the callsite in `tracing`'s order, `message` included.
//! * A **span** is an async slice keyed by its `tracing` id (`Kind::AsyncBegin`/`AsyncEnd`,
//!   field `id`): it begins when the span is created (with `id`, `parent` and every field) and
//!   ends when it is closed (the last handle dropped), on whichever threads that happens. A span
//!   that a tokio task carries from worker to worker is therefore one slice with its real
//!   duration, and no thread's begin/end nesting is affected. Entering and exiting (each poll of
//!   an instrumented future) are not recorded. `parent` is the `id` of the span's parent as
//!   `tracing` defines it (the explicit `parent:`, else the current span when the span is
//!   created; 0 for a root), so `hushtrace convert` and `hushtrace flamegraph` nest a request's
//!   spans under it.
//! * [`Span::record`](https://docs.rs/tracing/latest/tracing/struct.Span.html#method.record)
//!   is an instant with the span's name, the field `span_id` (the span's `id`) and every field
//!   of the span, the ones not recorded by this call empty (`""`).
//!
//! Field values keep their type: integers are `i64`/`u64` (`tracing` widens them), floats `f64`,
//! booleans `bool`, strings strings (at most [`hushtrace::STR_CAP`] bytes). `?value` and
//! `%value` (and errors, and 128-bit integers that do not fit 64 bits) are formatted into a
//! string of at most [`hushtrace::STR_CAP`] bytes, on the stack, and only when the callsite is
//! enabled. A field declared but not given a value (`field::Empty`) is the empty string. At
//! most 4 KiB of strings are kept per record (later strings are cut).
//!
//! **Schema.** `tracing` knows a callsite's field names but not their types, so the types of a
//! hushtrace callsite are those of the first record of a tracing callsite: registering the
//! tracing callsite registers a variant with every field a string; the first record with other
//! types registers that typed variant (once; same name, so the same globs apply), and later
//! records use it without a lock or an allocation (up to 8 sets of types per callsite, as a
//! generic function's callsite may have; each record of a 9th or later set looks its variant
//! up again under the registry's lock, allocating the description). A thread in no-syscall mode never registers:
//! it records a variant registered before, or the all-strings one (numbers formatted on the
//! stack). (`tracing` may hand the layer a record of a callsite that another thread is still
//! registering; the layer then registers it itself, once, except on a no-syscall thread, which
//! drops that record.) Field names that are not identifiers are rewritten (`http.method` → `http_method`),
//! and a field named like a field the bridge adds (`level`, `id`, `parent`, `span_id`) gets a `_`
//! suffix.
//!
//! # Filters
//!
//! `tracing`'s filters apply as to any layer (a global `EnvFilter`, or a per-layer filter with
//! `layer().with_filter(...)`): what they filter out never reaches the layer and records
//! nothing. hushtrace's globs ([`hushtrace::enable`]/[`hushtrace::disable`], by
//! `"target:name"`) apply too, also to callsites registered after the glob; they only affect
//! what hushtrace records, never what other layers see. A target containing `::` is matched
//! by a glob's category part only with wildcards (`"my_app*:*"`): the glob's first `:` ends its
//! category. Disabling a span's callsite while the span is open loses its end (the converter
//! reports the slice as unclosed).
//!
//! # Deadlines
//!
//! The session's deadline rules (`HUSHTRACE_ON_LATE='rt:cycle>1500us'`,
//! [`hushtrace::SessionBuilder::on_late`], `hushtrace record --on-late`) apply to `tracing`
//! spans, matched on **`target:name`** like every glob here (a target with `::` needs a
//! wildcard in the rule's category: `'my_app*:handle>2ms'`). A span's duration is what its
//! slice shows: from its creation (the begin record) to its close (the end record, when its
//! last handle drops), not the time it spent entered. When the span closes, its duration is
//! compared with the deadline on the closing thread; a late span is what a late native span
//! is: a `hushtrace:late` event in that thread's ring and a capture in `DIR/late/<n>/` (see
//! hushtrace's README, "Catch the late cycle in production"). A span with a deadline keeps its
//! begin's timestamp from creation to close in a fixed lock-free table (4096 slots keyed by
//! its `tracing` id; no lock, allocation or system call): with thousands of such spans open
//! at once, one that finds no slot is recorded but not checked. A span whose end has no
//! deadline pays one load and a branch at its creation and at its close; one with a deadline
//! about 25 ns more than without on the development machine (the bridge bench's
//! `bridge_span_deadline`: a span of about 105 ns becomes about 130 ns; claiming the slot is a
//! compare-and-swap).
//!
//! # Limits
//!
//! hushtrace's registry holds [`hushtrace_core::MAX_REGISTERED`] (32,768) callsites registered
//! at run time, and a `tracing` callsite uses one or two of them (the all-strings variant and
//! the typed one): 16,000 to 32,000 `tracing` callsites fit, and the layer knows at most
//! 28,672. Past the limit nothing is lost silently: a warning says so once on stderr; a
//! callsite whose typed variant finds no room records every field as a string; the events of
//! a callsite that could not be registered at all are counted as discarded (in the trace's
//! discarded count and the session's statistics). Registering stays fast as the registry
//! grows (a hash index, no scan).
//!
//! # Cost
//!
//! An enabled event costs `tracing`'s dispatch, a lock-free lookup of the callsite (a multiply
//! and two loads), visiting its fields into an uninitialized stack scratch (only the values
//! the record uses are written) and a hushtrace record; nothing allocates or locks after the
//! first record of a callsite. Small shapes — a level and up to two fields, a level, a
//! message and two fields, a span's id, parent and up to two fields — are recorded by a function
//! monomorphized for the variant's types ([`hushtrace::Registered::record_typed`], the native
//! macros' write path); longer ones with [`hushtrace::Registered::record`], which checks each
//! value's type at run time. A span costs its creation and its close in the registry, one
//! registry lookup of its metadata when it closes, and two records. On the development
//! machine `info!(a, b)` costs about 20 ns: 2.2× a native `event!`, 12× less than
//! `tracing-chrome`, and 5 ns of it is `tracing` itself (a layer that does nothing). A message
//! is formatted into the scratch through its `Debug` impl (`tracing` hands every message to a
//! layer as `&dyn Debug`, so even a literal one cannot be taken as a `&'static str`): about
//! 20 ns more. A span costs about 95 ns, of which 71 ns is `tracing`'s registry. See
//! `docs/BENCHMARKS.md`, section 5.
#![deny(unsafe_op_in_unsafe_fn)]

mod capture;
mod current;
mod info;
mod schema;
mod starts;
mod table;
mod typed;

use capture::{Capture, Scratch};
use hushtrace::{FieldType, Kind, Registered, Value};
use info::*;
use schema::*;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The layer that records `tracing` instrumentation with hushtrace; see the crate docs.
///
/// ```
/// use tracing_subscriber::prelude::*;
/// let subscriber = tracing_subscriber::registry().with(hushtrace_tracing::layer());
/// tracing::subscriber::with_default(subscriber, || {
///     let span = tracing::info_span!("work", items = 3u64);
///     span.in_scope(|| tracing::info!(ok = true, "done"));
/// });
/// ```
pub fn layer() -> HushtraceLayer {
    HushtraceLayer { _private: () }
}

/// A `tracing_subscriber::Layer` recording into the running hushtrace session (see [`layer`]).
/// Without a session it records nothing (the cost of a disabled hushtrace record).
#[derive(Clone, Debug)]
pub struct HushtraceLayer {
    _private: (),
}

impl<S> tracing_subscriber::Layer<S> for HushtraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(
        &self,
        metadata: &'static Metadata<'static>,
    ) -> tracing_core::subscriber::Interest {
        // Registration allocates and locks: here, once per callsite, never when recording.
        table::insert(metadata, || Info::new(metadata));
        tracing_core::subscriber::Interest::always()
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let Some(info) = lookup(event.metadata()) else {
            return;
        };
        let Role::Event { schema } = &info.role else {
            return;
        };
        if !schema.fallback.is_enabled() {
            return;
        }
        let mut scratch = Scratch::new();
        let level = Value::Str(level_str(event.metadata().level()));
        let mut cap = Capture::new([level], info.fields.len(), &mut scratch);
        event.record(&mut cap);
        schema.record(&mut cap);
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(info) = lookup(attrs.metadata()) else {
            return;
        };
        let Role::Span { begin, end, .. } = &info.role else {
            return;
        };
        if !end.is_enabled() {
            return;
        }
        // tracing's parent: the explicit one, else (contextual) the current span, else none.
        // The current span is the top of this layer's own stack of entered spans (a
        // thread-local read); past its depth, the registry's (a lookup).
        let parent = match attrs.parent() {
            Some(p) => p.into_u64(),
            None if attrs.is_contextual() => {
                current::get().unwrap_or_else(|| ctx.current_span().id().map_or(0, Id::into_u64))
            }
            None => 0,
        };
        let mut scratch = Scratch::new();
        let mut cap = Capture::new(
            [Value::U64(id.into_u64()), Value::U64(parent)],
            info.fields.len(),
            &mut scratch,
        );
        attrs.record(&mut cap);
        let start = begin.record(&mut cap);
        // A deadline on the span's end (from the session's rules): keep the begin's timestamp
        // for its close. Without one, this load and branch is all a deadline costs.
        if start != 0 && hushtrace::__private::span_has_deadline(end.callsite()) {
            starts::put(id.into_u64(), start);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(info) = ctx.metadata(id).and_then(lookup) else {
            return;
        };
        let Role::Span { record, end, .. } = &info.role else {
            return;
        };
        if !end.is_enabled() {
            return;
        }
        let mut scratch = Scratch::new();
        let mut cap = Capture::new([Value::U64(id.into_u64())], info.fields.len(), &mut scratch);
        values.record(&mut cap);
        record.record(&mut cap);
    }

    #[inline]
    fn on_enter(&self, id: &Id, _ctx: Context<'_, S>) {
        current::enter(id.into_u64());
    }

    #[inline]
    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        current::exit(id.into_u64());
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(info) = ctx.metadata(&id).and_then(lookup) else {
            return;
        };
        if let Role::Span { end, .. } = &info.role {
            if hushtrace::__private::span_has_deadline(end.callsite()) {
                close_timed(*end, id.into_u64());
            } else {
                end.record_typed((id.into_u64(),));
            }
        }
    }
}

/// Ends the span `id` at `end`, a span end with a deadline: takes the begin's timestamp kept
/// by `on_new_span` (none: recorded, not checked) and writes the end with the runtime's check
/// (`end_span`: one compare; a late span's `hushtrace:late` event and note for the consumer,
/// stores into this thread's ring only).
#[inline(never)]
fn close_timed(end: Registered, id: u64) {
    let start = starts::take(id);
    let cs = end.callsite();
    let interest = cs.state.interest();
    if interest.is_enabled() {
        hushtrace::__private::end_span(cs, interest, (id,), start);
    }
}

/// The layer's state for `meta`, for one record. Normally registered by `register_callsite`;
/// but `tracing` dispatches the events of a callsite that another thread is registering right
/// now before that registration reaches the layer: such a record registers it here (once,
/// cold), except on a no-syscall thread, which drops it. A record that cannot be recorded
/// (dropped so, or of a callsite hushtrace could not register: the registry is full) is
/// counted as discarded, never lost silently.
#[inline]
fn lookup(meta: &'static Metadata<'static>) -> Option<&'static Info> {
    match table::get(meta).or_else(|| register_late(meta)) {
        Some(info) if !matches!(info.role, Role::Unregistered) => Some(info),
        _ => {
            hushtrace::discard_unregistered();
            None
        }
    }
}

#[cold]
#[inline(never)]
fn register_late(meta: &'static Metadata<'static>) -> Option<&'static Info> {
    if hushtrace::thread_in_no_syscall() {
        return None;
    }
    table::insert(meta, || Info::new(meta));
    table::get(meta)
}
