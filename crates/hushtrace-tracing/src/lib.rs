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
mod table;
mod typed;

use capture::{Capture, Scratch};
use hushtrace::{FieldType, Kind, Registered, Value};
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
        begin.record(&mut cap);
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
            end.record_typed((id.into_u64(),));
        }
    }
}

/// The spans this layer saw entered on this thread and not exited, innermost last: the parent
/// of a contextual span is the top (what the registry's `current_span()` would answer, for the
/// spans this layer is given, without its lookup). No lock, allocation or system call: a
/// const-initialized thread-local without destructor.
mod current {
    use std::cell::Cell;

    /// Entered spans kept; deeper nesting is counted and answered by the registry.
    const DEPTH: usize = 32;

    struct Stack {
        ids: [Cell<u64>; DEPTH],
        /// Spans entered and not exited (may exceed `DEPTH`).
        len: Cell<usize>,
    }

    std::thread_local! {
        static STACK: Stack = const {
            Stack {
                ids: [const { Cell::new(0) }; DEPTH],
                len: Cell::new(0),
            }
        };
    }

    #[inline]
    pub(crate) fn enter(id: u64) {
        let _ = STACK.try_with(|s| {
            let n = s.len.get();
            if let Some(slot) = s.ids.get(n) {
                slot.set(id);
            }
            s.len.set(n + 1);
        });
    }

    #[inline]
    pub(crate) fn exit(id: u64) {
        let _ = STACK.try_with(|s| {
            let n = s.len.get();
            if n == 0 {
                return;
            }
            if n <= DEPTH && s.ids[n - 1].get() != id {
                // Exited out of order (tracing allows it): remove its innermost entry.
                let Some(i) = (0..n - 1).rev().find(|&i| s.ids[i].get() == id) else {
                    return; // not entered on this thread
                };
                for j in i..n - 1 {
                    s.ids[j].set(s.ids[j + 1].get());
                }
            }
            s.len.set(n - 1);
        });
    }

    /// The innermost entered span (0: none), or `None` when nested deeper than kept.
    #[inline]
    pub(crate) fn get() -> Option<u64> {
        STACK
            .try_with(|s| match s.len.get() {
                0 => Some(0),
                n => s.ids.get(n - 1).map(Cell::get),
            })
            .unwrap_or(None)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn tracks_entered_spans_also_out_of_order_and_deep() {
            assert_eq!(get(), Some(0));
            enter(1);
            enter(2);
            enter(3);
            assert_eq!(get(), Some(3));
            exit(2); // out of order
            assert_eq!(get(), Some(3));
            exit(3);
            assert_eq!(get(), Some(1));
            exit(9); // never entered: ignored
            assert_eq!(get(), Some(1));
            for i in 0..DEPTH as u64 {
                enter(100 + i);
            }
            assert_eq!(get(), None, "deeper than kept");
            exit(100 + DEPTH as u64 - 1);
            assert_eq!(get(), Some(100 + DEPTH as u64 - 2));
            for i in (0..DEPTH as u64 - 1).rev() {
                exit(100 + i);
            }
            exit(1);
            assert_eq!(get(), Some(0));
        }
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

fn level_str(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        _ => "ERROR",
    }
}

/// What the layer knows about one `tracing` callsite (leaked: callsites live forever).
#[derive(Debug)]
struct Info {
    /// The callsite's field names, as hushtrace field names (see the crate docs).
    fields: Vec<String>,
    role: Role,
}

#[derive(Debug)]
enum Role {
    Event {
        schema: Schema,
    },
    Span {
        begin: Schema,
        record: Schema,
        end: Registered,
    },
    /// A callsite hushtrace could not register (the registry is full): recorded never.
    Unregistered,
}

impl Info {
    fn new(meta: &'static Metadata<'static>) -> Info {
        let category = clean_name(meta.target());
        let name = clean_name(meta.name());
        let role = if meta.is_span() {
            let fields = field_names(meta, &["id", "parent", "span_id"]);
            let begin = Schema::new(&category, &name, Kind::AsyncBegin, BEGIN_PREFIX, &fields);
            let record = Schema::new(&category, &name, Kind::Instant, RECORD_PREFIX, &fields);
            let end = hushtrace::register_callsite(
                &category,
                &name,
                Kind::AsyncEnd,
                &[("id", FieldType::U64)],
            );
            match (begin, record, end) {
                (Some(begin), Some(record), Ok(end)) => {
                    return Info {
                        fields,
                        role: Role::Span { begin, record, end },
                    }
                }
                _ => Role::Unregistered,
            }
        } else {
            let fields = field_names(meta, &["level"]);
            match Schema::new(&category, &name, Kind::Instant, EVENT_PREFIX, &fields) {
                Some(schema) => {
                    return Info {
                        fields,
                        role: Role::Event { schema },
                    }
                }
                None => Role::Unregistered,
            }
        };
        Info {
            fields: Vec::new(),
            role,
        }
    }
}

/// The fields the bridge puts before a callsite's own: an event's level; a span begin's id and
/// parent; a `Span::record`'s span id.
const EVENT_PREFIX: &[(&str, FieldType)] = &[("level", FieldType::Str)];
const BEGIN_PREFIX: &[(&str, FieldType)] = &[("id", FieldType::U64), ("parent", FieldType::U64)];
const RECORD_PREFIX: &[(&str, FieldType)] = &[("span_id", FieldType::U64)];

/// A name the trace metadata can hold: NUL, quotes, backslashes and newlines become `_`.
fn clean_name(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if matches!(c, '\0' | '"' | '\\' | '\n') {
                '_'
            } else {
                c
            }
        })
        .collect();
    if s.is_empty() {
        "_".to_string()
    } else {
        s
    }
}

/// The callsite's field names as identifiers, distinct from each other and from `reserved`.
fn field_names(meta: &Metadata<'_>, reserved: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in meta.fields() {
        let mut n: String = f
            .name()
            .trim_start_matches("r#")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if n.is_empty() || n.starts_with(|c: char| c.is_ascii_digit()) {
            n.insert(0, '_');
        }
        while reserved.contains(&n.as_str()) || out.contains(&n) {
            n.push('_');
        }
        out.push(n);
    }
    out
}

/// Variants with typed fields kept per schema (more are registered but looked up under the
/// lock; in practice a callsite records one set of types).
const VARIANTS: usize = 8;

/// The hushtrace callsites of one record shape: the prefix fields then the tracing fields.
#[derive(Debug)]
struct Schema {
    category: String,
    name: String,
    kind: Kind,
    prefix: &'static [(&'static str, FieldType)],
    /// Every field a string (plus the prefix): registered with the tracing callsite; its
    /// enabled state is the callsite's, and no-syscall threads record it when no typed variant
    /// fits.
    fallback: Registered,
    variants: [AtomicPtr<Variant>; VARIANTS],
    /// Serializes the registration of typed variants.
    lock: Mutex<()>,
    fields: Vec<String>,
}

/// One registered set of types of a schema.
#[derive(Clone, Copy, Debug)]
struct Variant {
    /// `signature` of its types.
    sig: u64,
    reg: Registered,
    /// Its monomorphic recorder, for small shapes ([`typed::recorder`]).
    rec: Option<typed::Recorder>,
}

impl Variant {
    /// Records `vals` if they have this variant's types; `None` if not.
    #[inline(always)]
    fn try_record(&self, vals: &[Value<'_>], sig: &mut Option<u64>) -> Option<bool> {
        match self.rec {
            Some(rec) => rec(self.reg, vals),
            None => (*sig.get_or_insert_with(|| signature(vals)) == self.sig)
                .then(|| self.reg.record(vals)),
        }
    }
}

impl Schema {
    fn new(
        category: &str,
        name: &str,
        kind: Kind,
        prefix: &'static [(&'static str, FieldType)],
        fields: &[String],
    ) -> Option<Schema> {
        let mut desc: Vec<(&str, FieldType)> = prefix.to_vec();
        desc.extend(fields.iter().map(|f| (f.as_str(), FieldType::Str)));
        let fallback = hushtrace::register_callsite(category, name, kind, &desc).ok()?;
        Some(Schema {
            category: category.to_string(),
            name: name.to_string(),
            kind,
            prefix,
            fallback,
            variants: [const { AtomicPtr::new(std::ptr::null_mut()) }; VARIANTS],
            lock: Mutex::new(()),
            fields: fields.to_vec(),
        })
    }

    /// Records the captured values with the variant of their types: the variants registered
    /// so far in order (a typed recorder checks the types itself; the others compare the
    /// values' signature, computed once), else a new one (cold).
    #[inline]
    fn record(&self, cap: &mut Capture<'_>) {
        let mut sig = None;
        for slot in &self.variants {
            let p = slot.load(Ordering::Acquire);
            if p.is_null() {
                break;
            }
            // SAFETY: non-null slots point to leaked `Variant`s, initialized before the Release
            // store that published them (paired with the Acquire load above).
            let v = unsafe { &*p };
            if v.try_record(cap.values(), &mut sig).is_some() {
                return;
            }
        }
        self.record_new(cap);
    }

    /// Records values of types no published variant has: registers their variant (once per
    /// set of types; locks and allocates), or on a no-syscall thread records every field as a
    /// string with the variant registered with the callsite.
    #[cold]
    #[inline(never)]
    fn record_new(&self, cap: &mut Capture<'_>) {
        if hushtrace::thread_in_no_syscall() {
            cap.stringify_all();
            self.fallback.record(cap.values());
            return;
        }
        let sig = signature(cap.values());
        match self.register(sig, cap) {
            Some(v) => {
                let _ = v.try_record(cap.values(), &mut Some(sig));
            }
            // No room for the typed variant (the registry is full): every field as a string.
            None => {
                cap.stringify_all();
                self.fallback.record(cap.values());
            }
        }
    }

    /// The variant of the types of `cap` (signature `sig`), registered now unless another
    /// thread just did.
    fn register(&self, sig: u64, cap: &Capture<'_>) -> Option<Variant> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut free = None;
        for slot in &self.variants {
            let p = slot.load(Ordering::Acquire);
            if p.is_null() {
                free = Some(slot);
                break;
            }
            // SAFETY: as in `record`.
            let v = unsafe { &*p };
            if v.sig == sig {
                return Some(*v);
            }
        }
        let names =
            (self.prefix.iter().map(|&(n, _)| n)).chain(self.fields.iter().map(String::as_str));
        let desc: Vec<(&str, FieldType)> = names.zip(cap.types()).collect();
        let reg =
            hushtrace::register_callsite(&self.category, &self.name, self.kind, &desc).ok()?;
        let types: Vec<FieldType> = cap.types().collect();
        let v = Variant {
            sig,
            reg,
            rec: typed::recorder(&types),
        };
        // Past VARIANTS sets of types, the others are registered again (found, under the
        // registry's lock) by every record: rare shapes, still correct.
        if let Some(slot) = free {
            slot.store(Box::into_raw(Box::new(v)), Ordering::Release);
        }
        Some(v)
    }
}

/// A hash of the values' types (distinct lists of types practically never collide; a
/// collision would record with a variant of other types, which `Registered::record` refuses
/// and counts).
#[inline]
fn signature(vals: &[Value<'_>]) -> u64 {
    vals.iter()
        .map(Value::field_type)
        .fold(0xcbf2_9ce4_8422_2325, |h, t| {
            (h ^ t as u64).wrapping_mul(0x0000_0100_0000_01b3)
        })
}
