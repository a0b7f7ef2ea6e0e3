//! The values of C tracepoint fields: [`HtValue`] (`ht__value`), the 8 bytes the header's
//! macros write for one field, and how they are read back as the Rust value the runtime encodes
//! for the field's type: statically per type ([`CType`], for the recorders) or by type code
//! ([`value`], for the array path), strings through [`c_str_value`].

use hushtrace::Value;
use hushtrace_core::{Field, STR_CAP};
use std::ffi::c_char;

/// `ht__value`: one field value; which member is meant is the descriptor's field type.
#[repr(C)]
#[derive(Clone, Copy)]
pub union HtValue {
    pub(crate) i: i64,
    pub(crate) u: u64,
    pub(crate) f: f64,
    pub(crate) s: *const c_char,
}

impl HtValue {
    /// The value's 8 bytes as an integer (every member is 8 plain bytes: `HT_I32`/`HT_U32`
    /// widen into `i`/`u`, `HT_BOOL` writes 0 or 1, `HT_F64` a double's bits).
    #[inline(always)]
    fn bits(self) -> u64 {
        // SAFETY: the header always writes all 8 bytes (one 8-byte member), and any 8 bytes
        // are a valid u64.
        unsafe { self.u }
    }

    /// The value as a string pointer (meaningful for string fields).
    #[inline(always)]
    fn ptr(self) -> *const c_char {
        // SAFETY: as `bits`; a pointer read is only dereferenced for string fields.
        unsafe { self.s }
    }
}

impl std::fmt::Debug for HtValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: every member is 8 plain bytes; reading them as u64 is always defined.
        write!(f, "HtValue({:#x})", unsafe { self.u })
    }
}

const _: () = assert!(std::mem::size_of::<HtValue>() == 8);

/// A C field type: how a recorder reads the 8 bytes of an [`HtValue`] into the value the
/// typed write path encodes (the same [`Field`] `event!` encodes for a Rust value of that
/// type).
pub(crate) trait CType {
    /// The Rust value.
    type Out<'a>: Field;
    /// # Safety
    /// `v` holds what the header writes for this type (see [`value`]).
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a>;
}

/// `HT_U32` (3).
pub(crate) enum U32 {}
/// `HT_U64` and unsigned counters (4).
pub(crate) enum U64 {}
/// `HT_I32` (7).
pub(crate) enum I32 {}
/// `HT_I64` and signed counters (8).
pub(crate) enum I64 {}
/// `HT_F64` and floating counters (9).
pub(crate) enum F64 {}
/// `HT_BOOL` (10).
pub(crate) enum Bool {}
/// `HT_STR` (11).
pub(crate) enum Str {}

impl CType for U32 {
    type Out<'a> = u32;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits() as u32
    }
}
impl CType for U64 {
    type Out<'a> = u64;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits()
    }
}
impl CType for I32 {
    type Out<'a> = i32;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits() as i64 as i32
    }
}
impl CType for I64 {
    type Out<'a> = i64;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits() as i64
    }
}
impl CType for F64 {
    type Out<'a> = f64;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        f64::from_bits(v.bits())
    }
}
impl CType for Bool {
    type Out<'a> = bool;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits() != 0
    }
}
impl CType for Str {
    type Out<'a> = &'a str;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        // SAFETY: for a string field `HT_STR` stores a string pointer or NULL.
        unsafe { c_str_value(v.ptr()) }
    }
}

/// One field value as the descriptor's type code `t` says (codes refused at registration
/// never get here; an unknown one records `false`, which the type check then drops).
///
/// # Safety
/// `v` holds the member the header writes for `t` (`HT_I32`/`HT_U32` widen into `i`/`u`,
/// `HT_BOOL` writes 0 or 1 into `u`, `HT_STR` a string pointer or NULL into `s`).
#[inline(always)]
pub(crate) unsafe fn value<'a>(t: u8, v: HtValue) -> Value<'a> {
    // SAFETY: each arm reads the member the macro wrote for that type (see above).
    unsafe {
        match t {
            3 => Value::U32(v.u as u32),
            4 => Value::U64(v.u),
            7 => Value::I32(v.i as i32),
            8 => Value::I64(v.i),
            9 => Value::F64(v.f),
            10 => Value::Bool(v.u != 0),
            11 => Value::Str(c_str_value(v.s)),
            _ => Value::Bool(false),
        }
    }
}

/// A string field: at most [`STR_CAP`] bytes up to the NUL, cut before the first byte that is
/// not UTF-8; NULL is "". Reads no byte past the NUL or past `STR_CAP`.
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string.
#[inline]
unsafe fn c_str_value<'a>(s: *const c_char) -> &'a str {
    if s.is_null() {
        return "";
    }
    let mut n = 0;
    // SAFETY: each byte read is at or before the string's NUL.
    while n < STR_CAP && unsafe { *s.add(n) } != 0 {
        n += 1;
    }
    // SAFETY: the `n` bytes before were just read.
    let b = unsafe { std::slice::from_raw_parts(s as *const u8, n) };
    match std::str::from_utf8(b) {
        Ok(s) => s,
        // SAFETY (from_utf8 on the prefix cannot fail): `valid_up_to` bytes are valid UTF-8.
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`c_str_value`] of `bytes` (which carry their NUL, or not).
    fn c_str(bytes: &[u8]) -> &str {
        // SAFETY: every call below passes a NUL within the slice or `STR_CAP` bytes or more,
        // so no byte past the slice is read.
        unsafe { c_str_value(bytes.as_ptr() as *const c_char) }
    }

    #[test]
    fn strings_stop_at_nul_cap_and_bad_utf8() {
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { c_str_value(std::ptr::null()) }, "");
        assert_eq!(c_str(b"abc\0def\0"), "abc");
        assert_eq!(
            c_str(b"ok\xff tail\0"),
            "ok",
            "cut before the first bad byte"
        );
        // Exactly STR_CAP bytes and no NUL: all kept, nothing read beyond (Miri checks).
        let full = vec![b'a'; STR_CAP];
        assert_eq!(c_str(&full), "a".repeat(STR_CAP));
        // A two-byte character across the cap is dropped whole, not split.
        let mut across = vec![b'a'; STR_CAP - 1];
        across.extend_from_slice("é\0".as_bytes());
        assert_eq!(c_str(&across), "a".repeat(STR_CAP - 1));
    }

    #[test]
    fn each_type_code_reads_its_member() {
        let i = |i| HtValue { i };
        let u = |u| HtValue { u };
        // SAFETY: each value holds the member its code says.
        unsafe {
            assert_eq!(value(3, u(0xffff_ffff)), Value::U32(u32::MAX));
            assert_eq!(value(4, u(u64::MAX)), Value::U64(u64::MAX));
            assert_eq!(value(7, i(-5)), Value::I32(-5));
            assert_eq!(value(8, i(i64::MIN)), Value::I64(i64::MIN));
            assert_eq!(value(9, HtValue { f: -1.5 }), Value::F64(-1.5));
            assert_eq!(value(10, u(1)), Value::Bool(true));
            assert_eq!(value(11, HtValue { s: c"s".as_ptr() }), Value::Str("s"));
            assert_eq!(value(99, u(1)), Value::Bool(false), "unknown code");
            // The recorders' static reads agree with the codes.
            assert_eq!(U32::get(u(0xffff_ffff)), u32::MAX);
            assert_eq!(I32::get(i(-5)), -5);
            assert_eq!(I64::get(i(i64::MIN)), i64::MIN);
            assert_eq!(F64::get(HtValue { f: -1.5 }), -1.5);
            assert!(Bool::get(u(1)) && !Bool::get(u(0)));
            assert_eq!(Str::get(HtValue { s: c"s".as_ptr() }), "s");
        }
    }
}
