//! Static tracepoint descriptors, collected at link time.

use crate::field::{FieldType, MAX_FIELDS};
use core::sync::atomic::{AtomicU16, AtomicU64, AtomicU8, Ordering};

/// Every tracepoint in the program (all linked crates), gathered by the linker. A callsite's
/// position in this slice is its event id in the trace.
#[linkme::distributed_slice]
pub static CALLSITES: [Callsite];

/// All callsites of the program.
///
/// ```
/// let n = hushtrace_core::callsites().len();
/// assert!(n < u16::MAX as usize);
/// ```
pub fn callsites() -> &'static [Callsite] {
    &CALLSITES
}

/// The word a tracepoint loads to decide whether to record: disabled, enabled with field types
/// not yet published, or enabled with the published type signature.
///
/// ```
/// use hushtrace_core::Interest;
/// assert!(!Interest::DISABLED.is_enabled());
/// assert!(Interest::NEEDS_TYPES.is_enabled());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Interest(u64);

impl Interest {
    /// A disabled callsite.
    pub const DISABLED: Interest = Interest(0);
    /// An enabled callsite whose field types are not yet published (it has never been hit).
    pub const NEEDS_TYPES: Interest = Interest(1);

    /// The interest of an enabled callsite whose field types have signature `sig`
    /// (see [`Callsite::signature_of`], never 0 or 1).
    #[inline(always)]
    pub const fn with_signature(sig: u64) -> Interest {
        Interest(sig)
    }

    /// Whether the callsite records: one compare against zero.
    #[inline(always)]
    pub const fn is_enabled(self) -> bool {
        self.0 != 0
    }

    /// Whether this is the interest of an enabled callsite with type signature `sig`: the
    /// fast path's check that no type publication is needed.
    #[inline(always)]
    pub const fn has_signature(self, sig: u64) -> bool {
        self.0 == sig
    }

    /// The raw word (for diagnostics).
    pub const fn bits(self) -> u64 {
        self.0
    }
}

/// [`Interest::DISABLED`].
pub const INTEREST_DISABLED: Interest = Interest::DISABLED;
/// [`Interest::NEEDS_TYPES`].
pub const INTEREST_NEEDS_TYPES: Interest = Interest::NEEDS_TYPES;
/// Alias kept for readability at use sites: an enabled callsite has an interest of
/// [`INTEREST_NEEDS_TYPES`] or its type signature (see [`Callsite::signature_of`]).
pub const INTEREST_ENABLED: Interest = Interest::NEEDS_TYPES;

/// Value of [`CallsiteState`]'s signature slot while a thread is publishing field types with
/// signature `sig`: the signature with its top bit (set in every signature) cleared, and never
/// 0. A second thread whose first hit races the publication sees which types are on their way
/// and records at once when they are its own: no waiting, no drop.
const fn publishing(sig: u64) -> u64 {
    (sig & !(1 << 63)) | 1
}

/// Whether a signature slot value is a publication in progress ([`publishing`]).
const fn is_publishing(v: u64) -> bool {
    v != 0 && v & (1 << 63) == 0
}

/// Whether a signature slot value is a published signature (not 0, not [`publishing`]).
const fn is_published(v: u64) -> bool {
    v & (1 << 63) != 0
}

static TYPES_GENERATION: AtomicU64 = AtomicU64::new(0);

/// A counter bumped each time some callsite publishes its field types; writers of trace
/// metadata compare it to decide whether the metadata must be rewritten.
pub fn types_generation() -> u64 {
    TYPES_GENERATION.load(Ordering::Acquire)
}

/// What a callsite records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A point in time (`event!`).
    Instant = 0,
    /// The start of a span (`span!`).
    SpanBegin = 1,
    /// The end of a span (the `span!` guard dropping).
    SpanEnd = 2,
    /// A counter sample (`counter!`), with one field `value`.
    Counter = 3,
    /// The start of an async span (`async_span!`, a `tracing` span): its first field is `id`
    /// (`u64`), which its [`Kind::AsyncEnd`] carries too. Begin and end may be recorded on
    /// different threads; readers match them by process, name and `id`, not by thread nesting.
    AsyncBegin = 4,
    /// The end of an async span, with one field `id` (see [`Kind::AsyncBegin`]).
    AsyncEnd = 5,
}

impl Kind {
    /// The name used in trace metadata (`model.emf.uri` of the event class).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Instant => "instant",
            Kind::SpanBegin => "span_begin",
            Kind::SpanEnd => "span_end",
            Kind::Counter => "counter",
            Kind::AsyncBegin => "async_begin",
            Kind::AsyncEnd => "async_end",
        }
    }

    /// Inverse of [`Kind::as_str`].
    pub fn parse(s: &str) -> Option<Kind> {
        [
            Kind::Instant,
            Kind::SpanBegin,
            Kind::SpanEnd,
            Kind::Counter,
            Kind::AsyncBegin,
            Kind::AsyncEnd,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// The mutable part of a callsite, kept in an ordinary static (not in the link section).
///
/// `interest` is the single word the tracepoint loads: 0 when disabled, 1 when enabled but the
/// field types are not yet known, otherwise the type signature of the enabled callsite.
///
/// `#[repr(C)]`, a C ABI contract: C descriptors (`hushtrace.h`) embed it as
/// `{ uint64_t interest; uint64_t signature; uint16_t id; uint8_t registered; }` (24 bytes,
/// 8-aligned, `interest` first) and test `interest` themselves. All zero bytes are a valid
/// state: disabled, types unknown, not registered (see
/// [`crate::register_callsite_with_state`]).
#[derive(Debug)]
#[repr(C)]
pub struct CallsiteState {
    interest: AtomicU64,
    /// 0 = types unknown, [`publishing`]`(sig)` = being published, else the published
    /// signature.
    signature: AtomicU64,
    /// The callsite's event id, cached by [`assign_ids`] next to `interest` so the tracepoint
    /// reads it from the line it already loaded.
    id: AtomicU16,
    /// Registered at run time (its id is not its position in [`CALLSITES`]).
    registered: core::sync::atomic::AtomicBool,
}

impl CallsiteState {
    /// A new, enabled callsite state with unknown field types.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        CallsiteState {
            interest: AtomicU64::new(Interest::NEEDS_TYPES.0),
            signature: AtomicU64::new(0),
            id: AtomicU16::new(0),
            registered: core::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The enabled check: one relaxed load.
    ///
    /// Relaxed is enough: enabling is advisory and needs no ordering with the record written
    /// after it; the field types it guards are published with their own Release/Acquire pair.
    #[inline(always)]
    pub fn interest(&self) -> Interest {
        Interest(self.interest.load(Ordering::Relaxed))
    }

    /// The event id cached by [`assign_ids`] (0 before).
    #[inline(always)]
    pub fn cached_id(&self) -> u16 {
        self.id.load(Ordering::Relaxed)
    }

    /// A callsite registered at run time: its id and its (already known) type signature are
    /// set before it is published; it starts enabled with that signature.
    pub(crate) fn set_registered(&self, id: u16, sig: u64) {
        self.id.store(id, Ordering::Relaxed);
        self.registered.store(true, Ordering::Relaxed);
        self.signature.store(sig, Ordering::Release);
        self.interest.store(sig, Ordering::Relaxed);
    }
}

/// Marks that some callsite's field types became known (metadata writers rewrite).
pub(crate) fn bump_types_generation() {
    TYPES_GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// For the child of a `fork()`: a thread that was publishing a callsite's field types when the
/// process forked does not exist in the child, so its half-done publication would block the
/// callsite forever; start those over. Atomic stores only (async-signal-safe), O(callsites).
pub fn reset_interrupted_publications() {
    for cs in callsites() {
        let v = cs.state.signature.load(Ordering::Relaxed);
        if is_publishing(v) {
            let _ = cs
                .state
                .signature
                .compare_exchange(v, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

/// Caches every callsite's event id ([`Callsite::id`]) in its state, for
/// [`CallsiteState::cached_id`]. Idempotent; a tracer calls it before recording anything.
///
/// ```
/// hushtrace_core::assign_ids();
/// for cs in hushtrace_core::callsites() {
///     assert_eq!(cs.state.cached_id(), cs.id());
/// }
/// ```
pub fn assign_ids() {
    for cs in callsites() {
        cs.state.id.store(cs.id(), Ordering::Relaxed);
    }
}

/// The static descriptor of one tracepoint. Created by the `hushtrace` macros; never by hand.
#[derive(Debug)]
pub struct Callsite {
    /// Category, the part before `:` in patterns.
    pub category: &'static str,
    /// Event name, the part after `:` in patterns.
    pub name: &'static str,
    /// What the callsite records.
    pub kind: Kind,
    /// Field names, in record order.
    pub field_names: &'static [&'static str],
    /// Field types, one slot per name: 0 until the first hit publishes the types, then a
    /// [`FieldType`] discriminant. (Rust cannot name the type of an arbitrary expression in a
    /// static, so the types are learnt from the monomorphised record code the first time it runs.)
    pub field_types: &'static [AtomicU8],
    /// Interest and type signature.
    pub state: &'static CallsiteState,
    /// Source file of the tracepoint.
    pub file: &'static str,
    /// Source line of the tracepoint.
    pub line: u32,
}

impl Callsite {
    /// This callsite's event id: its index in [`CALLSITES`], or for a callsite registered at run
    /// time the id it was given then (after every link-time id).
    #[inline(always)]
    pub fn id(&'static self) -> u16 {
        if self.state.registered.load(Ordering::Relaxed) {
            return self.state.cached_id();
        }
        let base = CALLSITES.as_ptr() as usize;
        ((self as *const Callsite as usize - base) / core::mem::size_of::<Callsite>()) as u16
    }

    /// `"category:name"`.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.category, self.name)
    }

    /// The type signature of a list of field types: never 0 or 1, equal for equal lists.
    pub const fn signature_of(types: &[FieldType]) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ types.len() as u64;
        let mut i = 0;
        while i < types.len() {
            h = (h ^ types[i] as u64).wrapping_mul(0x0000_0100_0000_01b3);
            i += 1;
        }
        h | (1 << 63)
    }

    /// The published field types, or `None` while unknown.
    pub fn types(&self) -> Option<Vec<FieldType>> {
        let sig = self.state.signature.load(Ordering::Acquire);
        if !is_published(sig) {
            return None;
        }
        self.field_types
            .iter()
            .map(|t| FieldType::from_u8(t.load(Ordering::Relaxed)))
            .collect()
    }

    /// Cold path of a tracepoint whose interest is not its signature: publishes the field types
    /// on the first hit. Returns true when the record may be written with these types.
    ///
    /// Makes no system call and does not allocate: a few atomic operations.
    #[cold]
    #[inline(never)]
    pub fn publish_types(&'static self, sig: u64, types: &[FieldType]) -> bool {
        debug_assert_eq!(types.len(), self.field_types.len());
        let st = self.state;
        match st.signature.compare_exchange(
            0,
            publishing(sig),
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                let mut bytes = [0u8; MAX_FIELDS];
                for (i, (slot, t)) in self.field_types.iter().zip(types).enumerate() {
                    slot.store(*t as u8, Ordering::Relaxed);
                    if let Some(b) = bytes.get_mut(i) {
                        *b = *t as u8;
                    }
                }
                let n = types.len().min(bytes.len());
                crate::record::write(self.id(), &bytes[..n], self.field_names);
                st.signature.store(sig, Ordering::Release);
                TYPES_GENERATION.fetch_add(1, Ordering::AcqRel);
                let _ = st.interest.compare_exchange(
                    Interest::NEEDS_TYPES.0,
                    sig,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                true
            }
            // Another thread (or the thread this signal handler interrupted) is publishing
            // right now. The same types: record now (the event may reach a ring before the
            // types are published; the consumer writes the class into the metadata when they
            // are, and walks of packets stop at a class it does not know yet). Other types: the
            // metadata cannot describe this record: drop it (counted).
            Err(v) if is_publishing(v) => v == publishing(sig),
            // Already published: fine if it is ours (we raced an enable), else a generic
            // callsite instantiated with other types, which the metadata cannot describe.
            Err(other) => other == sig,
        }
    }

    pub(crate) fn set_enabled_internal(&self, on: bool) {
        let st = self.state;
        if on {
            let sig = st.signature.load(Ordering::Acquire);
            let v = if !is_published(sig) {
                Interest::NEEDS_TYPES.0
            } else {
                sig
            };
            st.interest.store(v, Ordering::Relaxed);
        } else {
            st.interest.store(Interest::DISABLED.0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_has_the_c_layout_and_zero_is_disabled() {
        use core::mem::{align_of, offset_of, size_of};
        assert_eq!(size_of::<CallsiteState>(), 24);
        assert_eq!(align_of::<CallsiteState>(), 8);
        assert_eq!(offset_of!(CallsiteState, interest), 0);
        assert_eq!(offset_of!(CallsiteState, signature), 8);
        assert_eq!(offset_of!(CallsiteState, id), 16);
        assert_eq!(offset_of!(CallsiteState, registered), 18);
        let zero = CallsiteState {
            interest: AtomicU64::new(0),
            signature: AtomicU64::new(0),
            id: AtomicU16::new(0),
            registered: core::sync::atomic::AtomicBool::new(false),
        };
        assert!(!zero.interest().is_enabled());
        assert_eq!(zero.cached_id(), 0);
    }
}
