//! Monomorphic recorders: for a small record shape (see [`recorder`]), a function made for
//! exactly its types, chosen once when the shape's hushtrace callsite is registered. It
//! checks the captured values' types with one match per value and records them as a tuple
//! (the native macros' write path, as [`Registered::record_typed`]), instead of the run-time
//! typed [`Registered::record`] (a type check, a length and an encoding dispatch per value).
//! The write hands back the record's timestamp: a span begin's is kept when the span's end
//! checks a deadline (`starts.rs`).
//!
//! The prefix type is fixed per role (`&str` for an event's level, `u64` for a span's id), so
//! each role instantiates `1 + 5 + 25` recorders (0 to 2 fields of 5 types), events 25 more
//! for a message and two fields (`info!(a, b, "...")`) and span begins 25 more for their id,
//! parent and two fields: 112 in all, about 1 KiB of code each (the write path inlined).
//! Longer shapes use [`Registered::record`].

use hushtrace::__private::{begin_timed, Payload};
use hushtrace::{FieldType, Registered, Value};
use hushtrace_core::Field;

/// Records `values` if they have the types the recorder was made for: `Some(timestamp)` (of
/// the record in clock ticks, 0 when it was not written or no clock could be read), or `None`
/// when a value has another type (the caller then looks for another variant).
pub(crate) type Recorder = fn(Registered, &[Value<'_>]) -> Option<u64>;

/// [`Registered::record_typed`], returning the record's timestamp (0: not written, or no
/// clock): the same checks, then the same write (`begin_timed` is `emit` keeping the
/// timestamp).
#[inline(always)]
fn write<P: Payload>(reg: Registered, payload: P) -> u64 {
    let cs = reg.callsite();
    let interest = cs.state.interest();
    if !interest.is_enabled() {
        return 0;
    }
    if !interest.has_signature(P::SIG) && P::TYPES.len() != cs.field_types.len() {
        // Another length than the callsite's fields: `record_typed` drops and counts it.
        reg.record_typed(payload);
        return 0;
    }
    begin_timed(cs, interest, payload).unwrap_or(0)
}

/// A field type of the record shapes the bridge produces, as a Rust type.
trait Ty {
    type Out<'a>: Field;
    fn pick<'a>(v: Value<'a>) -> Option<Self::Out<'a>>;
}

macro_rules! ty {
    ($name:ident, $out:ty, $variant:ident) => {
        struct $name;
        impl Ty for $name {
            type Out<'a> = $out;
            #[inline(always)]
            fn pick<'a>(v: Value<'a>) -> Option<$out> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}

ty!(U64T, u64, U64);
ty!(I64T, i64, I64);
ty!(F64T, f64, F64);
ty!(BoolT, bool, Bool);
ty!(StrT, &'a str, Str);

fn rec1<A: Ty>(reg: Registered, v: &[Value<'_>]) -> Option<u64> {
    match *v {
        [a] => Some(write(reg, (A::pick(a)?,))),
        _ => None,
    }
}

fn rec2<A: Ty, B: Ty>(reg: Registered, v: &[Value<'_>]) -> Option<u64> {
    match *v {
        [a, b] => Some(write(reg, (A::pick(a)?, B::pick(b)?))),
        _ => None,
    }
}

fn rec3<A: Ty, B: Ty, C: Ty>(reg: Registered, v: &[Value<'_>]) -> Option<u64> {
    match *v {
        [a, b, c] => Some(write(reg, (A::pick(a)?, B::pick(b)?, C::pick(c)?))),
        _ => None,
    }
}

/// `$next::<$known.., T>(rest)` for the type `T` of `$t` (`None` for types the bridge never
/// produces).
macro_rules! with_type {
    ($t:expr, $next:ident, [$($known:ty),*], $rest:expr) => {
        match $t {
            FieldType::U64 => $next::<$($known,)* U64T>($rest),
            FieldType::I64 => $next::<$($known,)* I64T>($rest),
            FieldType::F64 => $next::<$($known,)* F64T>($rest),
            FieldType::Bool => $next::<$($known,)* BoolT>($rest),
            FieldType::Str => $next::<$($known,)* StrT>($rest),
            _ => None,
        }
    };
}

fn sel1<A: Ty>(rest: &[FieldType]) -> Option<Recorder> {
    match rest {
        [] => Some(rec1::<A>),
        [t, rest @ ..] => with_type!(*t, sel2, [A], rest),
    }
}

fn sel2<A: Ty, B: Ty>(rest: &[FieldType]) -> Option<Recorder> {
    match rest {
        [] => Some(rec2::<A, B>),
        [t, rest @ ..] => with_type!(*t, sel3, [A, B], rest),
    }
}

fn sel3<A: Ty, B: Ty, C: Ty>(rest: &[FieldType]) -> Option<Recorder> {
    match rest {
        [] => Some(rec3::<A, B, C>),
        _ => None,
    }
}

fn rec4<A: Ty, B: Ty, C: Ty, D: Ty>(reg: Registered, v: &[Value<'_>]) -> Option<u64> {
    match *v {
        [a, b, c, d] => Some(write(
            reg,
            (A::pick(a)?, B::pick(b)?, C::pick(c)?, D::pick(d)?),
        )),
        _ => None,
    }
}

fn msg3<C: Ty>(rest: &[FieldType]) -> Option<Recorder> {
    match rest {
        [t] => with_type!(*t, msg4, [C], &[]),
        _ => None,
    }
}

fn msg4<C: Ty, D: Ty>(_: &[FieldType]) -> Option<Recorder> {
    Some(rec4::<StrT, StrT, C, D>)
}

fn span3<C: Ty>(rest: &[FieldType]) -> Option<Recorder> {
    match rest {
        [t] => with_type!(*t, span4, [C], &[]),
        _ => None,
    }
}

fn span4<C: Ty, D: Ty>(_: &[FieldType]) -> Option<Recorder> {
    Some(rec4::<U64T, U64T, C, D>)
}

/// The monomorphic recorder of `types` (the prefix's first), if there is one: a `&str` or `u64`
/// prefix and at most 2 fields, an event's level, a string first field (`tracing` puts an
/// event's `message` first) and two more fields, or a span's id and parent and two fields.
pub(crate) fn recorder(types: &[FieldType]) -> Option<Recorder> {
    match types {
        [FieldType::Str, FieldType::Str, t, u] => with_type!(*t, msg3, [], std::slice::from_ref(u)),
        [FieldType::U64, FieldType::U64, t, u] => {
            with_type!(*t, span3, [], std::slice::from_ref(u))
        }
        [FieldType::Str, rest @ ..] => sel1::<StrT>(rest),
        [FieldType::U64, rest @ ..] => sel1::<U64T>(rest),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hushtrace::Kind;

    #[test]
    fn recorders_exist_for_small_shapes_and_check_types() {
        use FieldType::*;
        assert!(recorder(&[Str]).is_some());
        assert!(recorder(&[U64, Bool, F64]).is_some());
        assert!(recorder(&[Str, I64, Str]).is_some());
        assert!(recorder(&[Str, U64, U64, U64]).is_none());
        assert!(recorder(&[Str, Str, U64, F64]).is_some());
        assert!(recorder(&[U64, Str, U64, F64]).is_none());
        assert!(recorder(&[U64, U64, Str, F64]).is_some());
        assert!(recorder(&[U64, U64, Str, F64, Bool]).is_none());
        assert!(recorder(&[Str, Str, U64, F64, Bool]).is_none());
        assert!(recorder(&[F64, U64]).is_none());
        assert!(recorder(&[Str, U32]).is_none());

        let reg = hushtrace::register_callsite(
            "typed-test",
            "shape",
            Kind::Instant,
            &[("level", Str), ("n", U64)],
        )
        .unwrap();
        let rec = recorder(&[Str, U64]).unwrap();
        // No session: nothing is written, but the types are checked first.
        assert_eq!(rec(reg, &[Value::Str("INFO"), Value::U64(1)]), Some(0));
        assert_eq!(rec(reg, &[Value::Str("INFO"), Value::I64(1)]), None);
        assert_eq!(rec(reg, &[Value::Str("INFO")]), None);
    }
}
