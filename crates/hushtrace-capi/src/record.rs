//! Recording the events of C tracepoints: the recorders a descriptor's `record` slot holds
//! (one per field-type combination of up to two fields, [`recorder`]), the array path of wider
//! tracepoints (`ht__record`), and the end of an `HT_SCOPE` (`ht__scope_end`).

use crate::descriptor::{Descriptor, RecordFn};
use crate::error::guard;
use crate::value::{value, Bool, CType, HtValue, Str, F64, I32, I64, U32, U64};
use hushtrace::__private::{emit, Payload};
use hushtrace_core::Interest;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// `void ht__record(ht__callsite *cs, const ht__value *values)`: the enabled path of a C
/// tracepoint with 3 to 8 fields (the values in an array), and of any tracepoint for a caller
/// that has its values in an array. No lock, no allocation, no system call on a no-syscall
/// thread (the runtime's guarantees for `Registered::record`); async-signal-safe.
///
/// Tracepoints with up to two fields (most of them) do not come here: the header's macros call
/// the descriptor's `RecordFn` directly (see `recorder`).
///
/// # Safety
/// `cs` is a descriptor defined by the header's macros; `values` points to its `nfields`
/// values, typed as its field types say.
#[no_mangle]
pub unsafe extern "C" fn ht__record(cs: *const Descriptor, values: *const HtValue) {
    guard((), || {
        if cs.is_null() {
            return;
        }
        // SAFETY: the caller passes the macro's static descriptor.
        let d = unsafe { &*cs };
        let n = d.nfields as usize;
        if n != 0 && values.is_null() {
            return;
        }
        let v = |i: usize| {
            // SAFETY: the macros give `nfields` values.
            unsafe { *values.add(i) }
        };
        if n <= 2 {
            let f = d.record.load(Ordering::Acquire);
            if f.is_null() {
                return; // not registered (refused at load time): stays silent
            }
            // SAFETY: only `register` stores into `record`, a `RecordFn` from `recorder`.
            let f: RecordFn = unsafe { std::mem::transmute::<*mut c_void, RecordFn>(f) };
            let none = HtValue { u: 0 };
            let (a, b) = match n {
                0 => (none, none),
                1 => (v(0), none),
                _ => (v(0), v(1)),
            };
            // SAFETY: the recorder of this descriptor's types, with its values.
            unsafe { f(cs, a, b) };
            return;
        }
        let reg = d.runtime.load(Ordering::Acquire);
        if reg.is_null() {
            return;
        }
        // SAFETY: a leaked, never freed `Registered` (see `register`).
        let reg = unsafe { &*reg };
        let t = |i: usize| {
            // SAFETY: the macros give `nfields` field types.
            unsafe { *d.field_types.add(i) }
        };
        // A fixed-length array per count (the run-time value list: this path is for the
        // uncommon wide tracepoints).
        macro_rules! values {
            ($($i:literal)*) => {
                // SAFETY: each value holds the member its type code says (see `value`).
                reg.record(&[$(unsafe { value(t($i), v($i)) }),*])
            };
        }
        match n {
            3 => values!(0 1 2),
            4 => values!(0 1 2 3),
            5 => values!(0 1 2 3 4),
            6 => values!(0 1 2 3 4 5),
            7 => values!(0 1 2 3 4 5 6),
            8 => values!(0 1 2 3 4 5 6 7),
            _ => false, // refused at registration
        };
    })
}

/// `void ht__scope_end(ht__callsite *end)`: the end of an `HT_SCOPE` whose begin was
/// recorded. Like the Rust span guard, it records even if the span was disabled since the
/// begin, so begins and ends stay balanced. Same guarantees as [`ht__record`].
///
/// # Safety
/// `end` is a descriptor defined by the header's macros.
#[no_mangle]
pub unsafe extern "C" fn ht__scope_end(end: *const Descriptor) {
    guard((), || {
        if end.is_null() {
            return;
        }
        // SAFETY: the caller passes the macro's static descriptor.
        let d = unsafe { &*end };
        let cs = d.callsite.load(Ordering::Acquire);
        if cs.is_null() {
            return; // not registered (refused at load time)
        }
        // SAFETY: a registered callsite lives for the life of the process.
        let cs = unsafe { &*cs };
        let i = d.state.interest();
        let i = if i.is_enabled() {
            i
        } else {
            Interest::NEEDS_TYPES
        };
        emit(cs, i, ());
    })
}

/// The body of every recorder: if the descriptor is enabled, writes `payload()` through the
/// runtime's typed write path, the code `event!` inlines.
///
/// # Safety
/// `d` is a registered descriptor whose `record` the caller loaded with `Acquire` (so
/// `callsite` is set), and `payload` reads values of its field types.
#[inline(always)]
unsafe fn record_with<P: Payload>(d: *const Descriptor, payload: impl FnOnce() -> P) {
    guard((), || {
        // SAFETY: the caller passes the macro's static descriptor.
        let d = unsafe { &*d };
        let interest = d.state.interest();
        if !interest.is_enabled() {
            return; // disabled since the C side looked
        }
        let cs = d.callsite.load(Ordering::Relaxed);
        if cs.is_null() {
            return;
        }
        // SAFETY: a registered callsite lives for the life of the process.
        emit(unsafe { &*cs }, interest, payload());
    })
}

/// The recorder of a descriptor without fields.
///
/// # Safety
/// As [`record_with`].
unsafe extern "C" fn record0(d: *const Descriptor, _: HtValue, _: HtValue) {
    // SAFETY: forwarded contract.
    unsafe { record_with(d, || ()) }
}

/// The recorder of a descriptor with one field of type `A`.
///
/// # Safety
/// As [`record_with`]; `a` holds an `A`.
unsafe extern "C" fn record1<A: CType>(d: *const Descriptor, a: HtValue, _: HtValue) {
    // SAFETY: forwarded contract.
    unsafe { record_with(d, || (A::get(a),)) }
}

/// The recorder of a descriptor with two fields of types `A` and `B`.
///
/// # Safety
/// As [`record_with`]; `a` holds an `A`, `b` a `B`.
unsafe extern "C" fn record2<A: CType, B: CType>(d: *const Descriptor, a: HtValue, b: HtValue) {
    // SAFETY: forwarded contract.
    unsafe { record_with(d, || (A::get(a), B::get(b))) }
}

/// The recorder for up to two fields of these type codes; `None` for more fields (they go
/// through [`ht__record`]) or an unknown code (refused at registration anyway).
pub(crate) fn recorder(types: &[u8]) -> Option<RecordFn> {
    macro_rules! by_type {
        ($code:expr, $t:ident => $e:expr) => {
            match $code {
                3 => {
                    type $t = U32;
                    $e
                }
                4 => {
                    type $t = U64;
                    $e
                }
                7 => {
                    type $t = I32;
                    $e
                }
                8 => {
                    type $t = I64;
                    $e
                }
                9 => {
                    type $t = F64;
                    $e
                }
                10 => {
                    type $t = Bool;
                    $e
                }
                11 => {
                    type $t = Str;
                    $e
                }
                _ => None,
            }
        };
    }
    match *types {
        [] => Some(record0 as RecordFn),
        [a] => by_type!(a, A => Some(record1::<A> as RecordFn)),
        [a, b] => by_type!(a, A => by_type!(b, B => Some(record2::<A, B> as RecordFn))),
        _ => None,
    }
}
