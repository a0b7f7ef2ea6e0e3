//! One field value given at run time: what a dynamic event writes (the C interface, the
//! `tracing` bridge, Python), what the reader decodes, what a synthetic trace holds.
//!
//! One enum, [`FieldValue`], with one variant per [`FieldType`]; only the storage of its string
//! differs between uses, so it is a type parameter:
//!
//! * [`Value<'a>`](Value) (`FieldValue<&'a str>`) borrows its string. It is `Copy`, the type of
//!   the runtime's dynamic write path and of the reader's decoded fields, so a value written
//!   comes back from the reader as the same type and compares equal.
//! * [`OwnedValue`] (`FieldValue<String>`) owns it: synthetic events built in tests, fuzz
//!   targets and benchmarks. [`FieldValue::as_value`] borrows it as a [`Value`].
//!
//! Only the borrowed form encodes into a record ([`Value::encoded_len`], [`Value::encode`]):
//! an `&str` cannot change between the two calls, which the write path's reservation relies on.

use crate::field::{Field, FieldType};
use core::fmt;

/// The value of one field, with its string stored as `S`. Use it through its two aliases:
/// [`Value<'a>`](Value) (borrowed string) and [`OwnedValue`] (owned string).
///
/// Each integer keeps its declared width: a `u16` field is `U16` when written and when read
/// back. [`as_u64`](FieldValue::as_u64), [`as_i64`](FieldValue::as_i64) and
/// [`as_f64`](FieldValue::as_f64) widen for code that does not care about the width.
///
/// ```
/// use hushtrace_core::{FieldType, OwnedValue, Value};
///
/// let v = Value::U16(7);
/// assert_eq!(v.field_type(), FieldType::U16);
/// assert_eq!((v.as_u64(), v.as_i64(), v.as_f64()), (Some(7), None, Some(7.0)));
/// assert_eq!(Value::Str("hi").to_string(), "\"hi\"");
///
/// // The record encoding of the write path: little-endian, strings NUL-terminated.
/// let mut buf = [0u8; 8];
/// let s = Value::Str("hi");
/// assert_eq!(s.encoded_len(), 3);
/// // SAFETY: `buf` has room for `encoded_len()` bytes.
/// assert_eq!(unsafe { s.encode(buf.as_mut_ptr()) }, 3);
/// assert_eq!(&buf[..3], b"hi\0");
///
/// // An owned value (a synthetic event's) borrows as a `Value` and compares with one.
/// let owned = OwnedValue::from(s);
/// assert_eq!(owned, OwnedValue::Str("hi".to_string()));
/// assert_eq!(owned.as_value(), s);
/// assert!(s == owned && owned == s);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldValue<S> {
    /// Unsigned 8-bit integer (`uint8_t`).
    U8(u8),
    /// Unsigned 16-bit integer (`uint16_t`).
    U16(u16),
    /// Unsigned 32-bit integer (`uint32_t`).
    U32(u32),
    /// Unsigned 64-bit integer (`uint64_t`).
    U64(u64),
    /// Signed 8-bit integer (`int8_t`).
    I8(i8),
    /// Signed 16-bit integer (`int16_t`).
    I16(i16),
    /// Signed 32-bit integer (`int32_t`).
    I32(i32),
    /// Signed 64-bit integer (`int64_t`).
    I64(i64),
    /// A float (`double`; `f32` values are widened when written).
    F64(f64),
    /// A boolean (`bool_t`, one byte).
    Bool(bool),
    /// A string (`string`). The write path cuts it at [`crate::STR_CAP`] bytes (a character
    /// boundary) and at its first NUL.
    Str(S),
}

/// A field value whose string is borrowed: the runtime's dynamic write path
/// (`hushtrace::Value`) and the reader's decoded fields (`hushtrace_ctf::reader::Value`).
///
/// ```
/// use hushtrace_core::{FieldType, Value};
/// let name = String::from("left");
/// let fields = [Value::U64(7), Value::Str(&name), Value::I8(-1)];
/// let types = fields.map(|v| v.field_type());
/// assert_eq!(types, [FieldType::U64, FieldType::Str, FieldType::I8]);
/// assert_eq!(fields[1].as_str(), Some("left"));
/// ```
pub type Value<'a> = FieldValue<&'a str>;

/// A field value that owns its string: synthetic traces (`hushtrace_ctf::synth`).
pub type OwnedValue = FieldValue<String>;

impl<S> FieldValue<S> {
    /// The wire type of this value.
    #[inline]
    pub fn field_type(&self) -> FieldType {
        match self {
            FieldValue::U8(_) => FieldType::U8,
            FieldValue::U16(_) => FieldType::U16,
            FieldValue::U32(_) => FieldType::U32,
            FieldValue::U64(_) => FieldType::U64,
            FieldValue::I8(_) => FieldType::I8,
            FieldValue::I16(_) => FieldType::I16,
            FieldValue::I32(_) => FieldType::I32,
            FieldValue::I64(_) => FieldType::I64,
            FieldValue::F64(_) => FieldType::F64,
            FieldValue::Bool(_) => FieldType::Bool,
            FieldValue::Str(_) => FieldType::Str,
        }
    }

    /// An unsigned integer of any width, widened; `None` for anything else.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            FieldValue::U8(v) => Some(v.into()),
            FieldValue::U16(v) => Some(v.into()),
            FieldValue::U32(v) => Some(v.into()),
            FieldValue::U64(v) => Some(v),
            _ => None,
        }
    }

    /// A signed integer of any width, widened; `None` for anything else.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            FieldValue::I8(v) => Some(v.into()),
            FieldValue::I16(v) => Some(v.into()),
            FieldValue::I32(v) => Some(v.into()),
            FieldValue::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a number, if it is one (booleans are 0 or 1), for counters and statistics.
    ///
    /// ```
    /// use hushtrace_core::Value;
    /// assert_eq!(Value::I8(-3).as_f64(), Some(-3.0));
    /// assert_eq!(Value::Str("x").as_f64(), None);
    /// ```
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            FieldValue::F64(v) => Some(v),
            FieldValue::Bool(b) => Some(b as u8 as f64),
            _ => match (self.as_u64(), self.as_i64()) {
                (Some(v), _) => Some(v as f64),
                (_, Some(v)) => Some(v as f64),
                _ => None,
            },
        }
    }
}

impl<S: AsRef<str>> FieldValue<S> {
    /// The string, if this is a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            FieldValue::Str(s) => Some(s.as_ref()),
            _ => None,
        }
    }

    /// This value with its string borrowed.
    pub fn as_value(&self) -> Value<'_> {
        match *self {
            FieldValue::U8(v) => FieldValue::U8(v),
            FieldValue::U16(v) => FieldValue::U16(v),
            FieldValue::U32(v) => FieldValue::U32(v),
            FieldValue::U64(v) => FieldValue::U64(v),
            FieldValue::I8(v) => FieldValue::I8(v),
            FieldValue::I16(v) => FieldValue::I16(v),
            FieldValue::I32(v) => FieldValue::I32(v),
            FieldValue::I64(v) => FieldValue::I64(v),
            FieldValue::F64(v) => FieldValue::F64(v),
            FieldValue::Bool(v) => FieldValue::Bool(v),
            FieldValue::Str(ref s) => FieldValue::Str(s.as_ref()),
        }
    }
}

impl<'a> Value<'a> {
    /// The bytes [`Value::encode`] writes: the field's fixed size, or a string's kept bytes
    /// plus its NUL (see [`crate::STR_CAP`]).
    #[inline]
    pub fn encoded_len(&self) -> usize {
        match self {
            FieldValue::U8(v) => v.encoded_len(),
            FieldValue::U16(v) => v.encoded_len(),
            FieldValue::U32(v) => v.encoded_len(),
            FieldValue::U64(v) => v.encoded_len(),
            FieldValue::I8(v) => v.encoded_len(),
            FieldValue::I16(v) => v.encoded_len(),
            FieldValue::I32(v) => v.encoded_len(),
            FieldValue::I64(v) => v.encoded_len(),
            FieldValue::F64(v) => v.encoded_len(),
            FieldValue::Bool(v) => v.encoded_len(),
            FieldValue::Str(v) => v.encoded_len(),
        }
    }

    /// Writes the value at `dst` as a record field, exactly as [`Field::encode`] writes the
    /// same value given at compile time; returns the bytes written (`encoded_len()`).
    ///
    /// # Safety
    /// `dst` must be valid for writes of `self.encoded_len()` bytes; no alignment is required.
    #[inline]
    pub unsafe fn encode(&self, dst: *mut u8) -> usize {
        // SAFETY: forwarded contract, in every arm; each sealed `Field` writes exactly its
        // `encoded_len()`, which is this value's (an `&str` cannot change in between).
        unsafe {
            match self {
                FieldValue::U8(v) => v.encode(dst),
                FieldValue::U16(v) => v.encode(dst),
                FieldValue::U32(v) => v.encode(dst),
                FieldValue::U64(v) => v.encode(dst),
                FieldValue::I8(v) => v.encode(dst),
                FieldValue::I16(v) => v.encode(dst),
                FieldValue::I32(v) => v.encode(dst),
                FieldValue::I64(v) => v.encode(dst),
                FieldValue::F64(v) => v.encode(dst),
                FieldValue::Bool(v) => v.encode(dst),
                FieldValue::Str(v) => v.encode(dst),
            }
        }
    }
}

impl From<Value<'_>> for OwnedValue {
    fn from(v: Value<'_>) -> Self {
        match v {
            FieldValue::U8(v) => FieldValue::U8(v),
            FieldValue::U16(v) => FieldValue::U16(v),
            FieldValue::U32(v) => FieldValue::U32(v),
            FieldValue::U64(v) => FieldValue::U64(v),
            FieldValue::I8(v) => FieldValue::I8(v),
            FieldValue::I16(v) => FieldValue::I16(v),
            FieldValue::I32(v) => FieldValue::I32(v),
            FieldValue::I64(v) => FieldValue::I64(v),
            FieldValue::F64(v) => FieldValue::F64(v),
            FieldValue::Bool(v) => FieldValue::Bool(v),
            FieldValue::Str(s) => FieldValue::Str(s.to_owned()),
        }
    }
}

impl PartialEq<OwnedValue> for Value<'_> {
    fn eq(&self, other: &OwnedValue) -> bool {
        *self == other.as_value()
    }
}

impl PartialEq<Value<'_>> for OwnedValue {
    fn eq(&self, other: &Value<'_>) -> bool {
        self.as_value() == *other
    }
}

/// Numbers as Rust prints them, strings quoted and escaped (`{:?}`).
impl<S: AsRef<str>> fmt::Display for FieldValue<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::U8(v) => write!(f, "{v}"),
            FieldValue::U16(v) => write!(f, "{v}"),
            FieldValue::U32(v) => write!(f, "{v}"),
            FieldValue::U64(v) => write!(f, "{v}"),
            FieldValue::I8(v) => write!(f, "{v}"),
            FieldValue::I16(v) => write!(f, "{v}"),
            FieldValue::I32(v) => write!(f, "{v}"),
            FieldValue::I64(v) => write!(f, "{v}"),
            FieldValue::F64(v) => write!(f, "{v}"),
            FieldValue::Bool(v) => write!(f, "{v}"),
            FieldValue::Str(v) => write!(f, "{:?}", v.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::STR_CAP;

    fn all() -> [Value<'static>; 11] {
        [
            Value::U8(0xfe),
            Value::U16(0xfedc),
            Value::U32(0xfedc_ba98),
            Value::U64(u64::MAX - 1),
            Value::I8(-2),
            Value::I16(-300),
            Value::I32(-70_000),
            Value::I64(i64::MIN),
            Value::F64(-0.5),
            Value::Bool(true),
            Value::Str("é\"x"),
        ]
    }

    /// Every variant has the wire type of its `FieldType` and encodes exactly as the
    /// compile-time `Field` of the same Rust type.
    #[test]
    fn encodes_like_the_static_field() {
        fn field<T: Field + ?Sized>(v: &T) -> (FieldType, Vec<u8>) {
            let mut b = vec![0u8; v.encoded_len()];
            // SAFETY: `b` holds `encoded_len()` bytes.
            let n = unsafe { v.encode(b.as_mut_ptr()) };
            assert_eq!(n, b.len());
            (T::TYPE, b)
        }
        for (v, t) in all().into_iter().zip(FieldType::ALL) {
            assert_eq!(v.field_type(), t);
            let mut b = vec![0xaau8; v.encoded_len()];
            // SAFETY: `b` holds `encoded_len()` bytes.
            assert_eq!(unsafe { v.encode(b.as_mut_ptr()) }, b.len());
            let want = match v {
                Value::U8(x) => field(&x),
                Value::U16(x) => field(&x),
                Value::U32(x) => field(&x),
                Value::U64(x) => field(&x),
                Value::I8(x) => field(&x),
                Value::I16(x) => field(&x),
                Value::I32(x) => field(&x),
                Value::I64(x) => field(&x),
                Value::F64(x) => field(&x),
                Value::Bool(x) => field(&x),
                Value::Str(x) => field(x),
            };
            assert_eq!((t, b), want, "{v:?}");
        }
    }

    #[test]
    fn strings_are_cut_like_static_ones() {
        let long = "é".repeat(STR_CAP);
        let v = Value::Str(&long);
        assert_eq!(v.encoded_len(), long.as_str().encoded_len());
        assert_eq!(Value::Str("a\0b").encoded_len(), 2);
    }

    #[test]
    fn widening_and_conversions() {
        let nums: Vec<_> = all().iter().map(|v| (v.as_u64(), v.as_i64())).collect();
        assert_eq!(nums[2], (Some(0xfedc_ba98), None));
        assert_eq!(nums[5], (None, Some(-300)));
        assert_eq!(nums[8], (None, None));
        assert_eq!(Value::Bool(true).as_f64(), Some(1.0));
        assert_eq!(Value::U64(3).as_str(), None);
        for v in all() {
            let owned = OwnedValue::from(v);
            assert_eq!(owned.as_value(), v);
            assert_eq!(owned, v);
            assert_eq!(v, owned);
            assert_eq!(owned.to_string(), v.to_string());
        }
        assert_ne!(Value::U32(1), Value::U64(1), "widths are kept");
        assert_eq!(Value::Str("é\"x").to_string(), r#""é\"x""#);
        assert_eq!(Value::I8(-2).to_string(), "-2");
    }
}
