//! Callsites described at run time: for code that does not know its tracepoints at link time
//! (the C interface, the `tracing` bridge, bindings for other languages).
//!
//! [`register_callsite`] describes one (category, name, kind, field names and types); it may
//! lock and allocate, so call it before the hot path. The result records as cheaply as a
//! `event!`: [`Registered::record`] is one relaxed load when disabled, and no lock, allocation
//! or system call when enabled. Registered callsites are enabled and disabled by the same
//! globs as the others (also globs applied before they were registered), and listed in the
//! trace metadata before a packet holding their first event is written.
//!
//! A thread in no-syscall mode may record a registered callsite like any other; it must not
//! *register* one in the mode (registration allocates) — the same rule as for its buffer.
//!
//! ```
//! use hushtrace::{register_callsite, FieldType, Kind, Value};
//! let cs = register_callsite("plugin", "frame", Kind::Instant,
//!                            &[("n", FieldType::U64), ("name", FieldType::Str)])?;
//! cs.record(&[Value::U64(7), Value::Str("left")]);
//! # Ok::<(), hushtrace::Error>(())
//! ```

use crate::config::Error;
use crate::write::{emit_values, Value};
use core::sync::atomic::{AtomicBool, Ordering};
use hushtrace_core::{Callsite, CallsiteState, FieldType, Kind};

/// A callsite registered at run time (a `'static` descriptor, never freed).
#[derive(Clone, Copy, Debug)]
pub struct Registered(&'static Callsite);

impl Registered {
    /// Records an event with `values` (the registered field types, in order) if the callsite
    /// is enabled; returns whether it was written. Values of other types drop the event (and
    /// count it as discarded).
    #[inline]
    pub fn record(&self, values: &[Value<'_>]) -> bool {
        emit_values(self.0, values)
    }

    /// Records `payload`, a tuple of up to 12 values whose types are known at compile time
    /// (`(&str, u64, f64)`, say), if the callsite is enabled: what [`Registered::record`]
    /// does, with the type check done once at compile time (one comparison of the types'
    /// signature with the registered one, no per-value check or dispatch). A tuple of other
    /// types than the registered ones drops the event and counts it as discarded, like
    /// `record`. For a caller that picks a monomorphic recorder per registered type list.
    ///
    /// ```
    /// use hushtrace::{register_callsite, FieldType, Kind};
    /// let cs = register_callsite("plugin", "typed", Kind::Instant,
    ///                            &[("n", FieldType::U64), ("name", FieldType::Str)])?;
    /// cs.record_typed((7u64, "left"));
    /// # Ok::<(), hushtrace::Error>(())
    /// ```
    #[inline]
    pub fn record_typed<P: crate::write::Payload>(&self, payload: P) -> bool {
        let interest = self.0.state.interest();
        if !interest.is_enabled() {
            return false;
        }
        if !interest.has_signature(P::SIG) && P::TYPES.len() != self.0.field_types.len() {
            return self.record_mismatch();
        }
        crate::write::emit(self.0, interest, payload)
    }

    /// Drops and counts a record of another length than the callsite's fields (through
    /// `record`'s own check: a list one value longer than the fields never matches).
    #[cold]
    #[inline(never)]
    fn record_mismatch(&self) -> bool {
        static TOO_LONG: [Value<'static>; hushtrace_core::MAX_FIELDS + 1] =
            [Value::Bool(false); hushtrace_core::MAX_FIELDS + 1];
        let n = (self.0.field_types.len() + 1).min(TOO_LONG.len());
        emit_values(self.0, &TOO_LONG[..n])
    }

    /// Whether the callsite is enabled (one relaxed load): test it before computing values
    /// that cost something (formatting, say).
    #[inline]
    pub fn is_enabled(&self) -> bool {
        self.0.state.interest().is_enabled()
    }

    /// The descriptor.
    pub fn callsite(&self) -> &'static Callsite {
        self.0
    }
}

/// Registers a callsite described at run time, or returns the one registered before with the
/// same description. Errors name the problem (a name the metadata cannot hold, too many
/// fields, too many callsites). The first time the registry is full (more than
/// [`hushtrace_core::MAX_REGISTERED`] callsites) a warning says so on stderr, once per
/// process: a caller that cannot register a callsite counts its events with
/// [`discard_unregistered`] (the `tracing` bridge does).
pub fn register_callsite(
    category: &str,
    name: &str,
    kind: Kind,
    fields: &[(&str, FieldType)],
) -> Result<Registered, Error> {
    hushtrace_core::register_callsite(category, name, kind, fields)
        .map(with_deadline)
        .map_err(|e| registration_error(category, name, e))
}

/// A span end registered while a session runs gets the session's deadline rules.
fn with_deadline(cs: &'static Callsite) -> Registered {
    if matches!(cs.kind, Kind::SpanEnd | Kind::AsyncEnd) {
        if let Some(s) = crate::state::current_session() {
            crate::late::apply_to(&s.cfg.late.rules, cs);
        }
    }
    Registered(cs)
}

fn registration_error(category: &str, name: &str, e: hushtrace_core::RegisterError) -> Error {
    if e == hushtrace_core::RegisterError::Full {
        static WARNED: AtomicBool = AtomicBool::new(false);
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "hushtrace: warning: cannot register {category}:{name}: {e}; the events of \
                 callsites that cannot be registered are not recorded (counted as discarded)"
            );
        }
    }
    Error::Config {
        var: None,
        value: format!("{category}:{name}"),
        reason: e.to_string(),
    }
}

/// Counts one event that cannot be recorded because its callsite could not be registered
/// (the registry is full) as discarded: in the calling thread's stream when it has one (the
/// trace's discarded count shows it), else in the session's statistics. Nothing without a
/// session. No lock, allocation or system call: callable from a no-syscall thread.
#[cold]
#[inline(never)]
pub fn discard_unregistered() {
    crate::write::drop_event();
}

impl Registered {
    /// Like [`register_callsite`], with the interest word in caller-owned `state` (a static the
    /// tracepoint tests directly; all zero bytes until registered): what the C interface's
    /// static descriptors use. See [`hushtrace_core::register_callsite_with_state`].
    ///
    /// ```
    /// use hushtrace::{FieldType, Kind, Registered, Value};
    /// use hushtrace_core::CallsiteState;
    /// static STATE: CallsiteState = CallsiteState::new();
    /// let cs = Registered::with_state("plugin", "tick", Kind::Instant,
    ///                                 &[("n", FieldType::U64)], &STATE)?;
    /// assert!(STATE.interest().is_enabled());
    /// cs.record(&[Value::U64(1)]);
    /// # Ok::<(), hushtrace::Error>(())
    /// ```
    pub fn with_state(
        category: &str,
        name: &str,
        kind: Kind,
        fields: &[(&str, FieldType)],
        state: &'static CallsiteState,
    ) -> Result<Registered, Error> {
        hushtrace_core::register_callsite_with_state(category, name, kind, fields, state)
            .map(with_deadline)
            .map_err(|e| registration_error(category, name, e))
    }
}
