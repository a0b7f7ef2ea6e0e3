//! Recording the events of C tracepoints: the recorders a descriptor's `record` slot holds
//! (one per field-type combination of up to two fields, [`recorder`]), the array path of wider
//! tracepoints (`ht__record`), and the end of an `HT_SCOPE` (`ht__scope_end`).

use crate::descriptor::{Descriptor, RecordFn};
use crate::error::guard;
use crate::starts;
use crate::value::{value, Bool, CType, HtValue, Str, F64, I32, I64, U32, U64};
use hushtrace::__private::{
    begin_timed, declare_span_deadline, emit, emit_values_timed, end_span, Payload,
};
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
        let cs = d.callsite.load(Ordering::Acquire);
        // A fixed-length array per count (the run-time value list: this path is for the
        // uncommon wide tracepoints). A span begin keeps its timestamp for its end's deadline.
        macro_rules! values {
            ($($i:literal)*) => {{
                // SAFETY: each value holds the member its type code says (see `value`).
                let vals = [$(unsafe { value(t($i), v($i)) }),*];
                if d.kind == KIND_SPAN_BEGIN && !cs.is_null() {
                    // SAFETY: a registered callsite lives for the life of the process.
                    let cs = unsafe { &*cs };
                    if cs.state.interest().is_enabled() {
                        starts::push(cs, emit_values_timed(cs, &vals).unwrap_or(0));
                    }
                    true
                } else {
                    reg.record(&vals)
                }
            }};
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
        end_span(cs, i, (), starts::pop(cs));
    })
}

/// The descriptor kinds of a span's begin and end (`ht__callsite.kind`).
const KIND_SPAN_BEGIN: u8 = 1;
const KIND_SPAN_END: u8 = 2;

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
        let cs = unsafe { &*cs };
        // A span's begin keeps its timestamp, and its end checks the span's deadline (the
        // rules', or one its `HT_SPAN_END_DEADLINE` declared): `starts.rs`.
        match d.kind {
            KIND_SPAN_BEGIN => {
                starts::push(cs, begin_timed(cs, interest, payload()).unwrap_or(0));
            }
            KIND_SPAN_END => end_span(cs, interest, payload(), starts::pop(cs)),
            _ => {
                emit(cs, interest, payload());
            }
        }
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

/// `void ht__span_deadline(const ht__callsite *end, uint64_t deadline_ns)`: declares the
/// deadline of the spans ending at the span end descriptor `end` (what `HT_SPAN_END_DEADLINE`
/// calls on its first enabled hit; 0 or another kind of descriptor: nothing). The session's
/// rules (`HUSHTRACE_ON_LATE`, `record --on-late`) keep precedence. No lock, allocation or
/// system call; async-signal-safe.
///
/// # Safety
/// `end` is a descriptor defined by the header's macros.
#[no_mangle]
pub unsafe extern "C" fn ht__span_deadline(end: *const Descriptor, deadline_ns: u64) {
    guard((), || {
        if end.is_null() || deadline_ns == 0 {
            return;
        }
        // SAFETY: the caller passes the macro's static descriptor.
        let d = unsafe { &*end };
        if d.kind != KIND_SPAN_END {
            return;
        }
        let cs = d.callsite.load(Ordering::Acquire);
        if cs.is_null() {
            return; // not registered (refused at load time)
        }
        // SAFETY: a registered callsite lives for the life of the process.
        let cs = unsafe { &*cs };
        declare_span_deadline(cs, std::time::Duration::from_nanos(deadline_ns));
    })
}
