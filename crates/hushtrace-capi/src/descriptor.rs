//! The static descriptor of a C tracepoint ([`Descriptor`], `ht__callsite`), laid out as the
//! header's macros write it, and the recorder type its `record` slot holds ([`RecordFn`]).

use crate::value::HtValue;
use hushtrace::Registered;
use hushtrace_core::{Callsite, CallsiteState};
use std::ffi::{c_char, c_void};
use std::sync::atomic::AtomicPtr;

/// The descriptor ABI version the header writes (`HT__ABI`).
pub(crate) const ABI: u32 = 2;
/// The most fields of a C tracepoint (`HT__MAX_FIELDS`).
pub(crate) const MAX_FIELDS: usize = 8;

/// `ht__callsite`: the static descriptor the header's macros define for each tracepoint.
///
/// Invariants (kept by the macros): the strings are NUL-terminated literals, `field_names` and
/// `field_types` have `nfields` entries (or are NULL when it is 0), and the descriptor lives as
/// long as its module, which registration pins for the life of the process.
#[repr(C)]
#[derive(Debug)]
pub struct Descriptor {
    /// The runtime's state, first: `state.interest` is the word the C tracepoint loads. All
    /// zero (disabled) until registered.
    pub(crate) state: CallsiteState,
    pub(crate) abi: u32,
    pub(crate) kind: u8,
    pub(crate) nfields: u8,
    pub(crate) category: *const c_char,
    pub(crate) name: *const c_char,
    pub(crate) field_names: *const *const c_char,
    pub(crate) field_types: *const u8,
    pub(crate) file: *const c_char,
    pub(crate) line: u32,
    /// A leaked `Registered` once registered, else null.
    pub(crate) runtime: AtomicPtr<Registered>,
    /// The runtime's callsite (whose state is `state`) once registered, else null. Stored
    /// before `record`.
    pub(crate) callsite: AtomicPtr<Callsite>,
    /// For 0 to 2 fields, the [`RecordFn`] of this descriptor's field types once registered,
    /// else null: what the header's macros call, with the values in registers. Stored last,
    /// with `Release`; the macros load it with `Acquire`, so a recorder sees `callsite`.
    pub(crate) record: AtomicPtr<c_void>,
}

/// `ht__record_fn`: records one event of a descriptor with up to two fields (unused values are
/// ignored), if it is enabled. One instance per field-type combination, chosen at
/// registration: no dispatch on types at run time.
pub(crate) type RecordFn = unsafe extern "C" fn(cs: *const Descriptor, a: HtValue, b: HtValue);

const _: () = {
    assert!(std::mem::size_of::<CallsiteState>() == 24);
    assert!(std::mem::align_of::<CallsiteState>() == 8);
    assert!(std::mem::size_of::<Descriptor>() == 104);
};
