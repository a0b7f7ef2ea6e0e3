//! Field values and their encoding into a record.
//!
//! Every field is stored little-endian with byte alignment (CTF `align = 8` bits), so a record
//! is a plain sequence of unaligned stores with no padding to compute.

/// The maximum number of bytes of a string field that are recorded. Longer strings are cut at
/// the last UTF-8 character boundary at or below this many bytes; a string is also cut at its
/// first NUL byte because CTF strings are NUL-terminated.
pub const STR_CAP: usize = 255;

/// The most fields of a callsite registered at run time (and of a types-mirror record).
pub const MAX_FIELDS: usize = 32;

/// The wire type of one field, as declared in the trace metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FieldType {
    /// Unsigned 8-bit integer.
    U8 = 1,
    /// Unsigned 16-bit integer.
    U16 = 2,
    /// Unsigned 32-bit integer.
    U32 = 3,
    /// Unsigned 64-bit integer (also `usize`).
    U64 = 4,
    /// Signed 8-bit integer.
    I8 = 5,
    /// Signed 16-bit integer.
    I16 = 6,
    /// Signed 32-bit integer.
    I32 = 7,
    /// Signed 64-bit integer (also `isize`).
    I64 = 8,
    /// IEEE 754 binary64 (`f32` values are widened).
    F64 = 9,
    /// A boolean stored as one byte, 0 or 1.
    Bool = 10,
    /// A NUL-terminated UTF-8 string of at most [`STR_CAP`] bytes plus the NUL.
    Str = 11,
}

impl FieldType {
    /// All field types, in discriminant order.
    pub const ALL: [FieldType; 11] = [
        FieldType::U8,
        FieldType::U16,
        FieldType::U32,
        FieldType::U64,
        FieldType::I8,
        FieldType::I16,
        FieldType::I32,
        FieldType::I64,
        FieldType::F64,
        FieldType::Bool,
        FieldType::Str,
    ];

    /// Decodes a discriminant produced by `as u8`; `None` for anything else (0 means "not yet
    /// known" in [`crate::Callsite`] type slots).
    ///
    /// ```
    /// use hushtrace_core::FieldType;
    /// assert_eq!(FieldType::from_u8(FieldType::Str as u8), Some(FieldType::Str));
    /// assert_eq!(FieldType::from_u8(0), None);
    /// ```
    pub fn from_u8(v: u8) -> Option<FieldType> {
        FieldType::ALL.get((v as usize).wrapping_sub(1)).copied()
    }

    /// The encoded size in bytes, or `None` for variable-length strings.
    pub fn fixed_size(self) -> Option<usize> {
        Some(match self {
            FieldType::U8 | FieldType::I8 | FieldType::Bool => 1,
            FieldType::U16 | FieldType::I16 => 2,
            FieldType::U32 | FieldType::I32 => 4,
            FieldType::U64 | FieldType::I64 | FieldType::F64 => 8,
            FieldType::Str => return None,
        })
    }

    /// The TSDL type alias used for this type in hushtrace metadata.
    pub fn tsdl_alias(self) -> &'static str {
        match self {
            FieldType::U8 => "uint8_t",
            FieldType::U16 => "uint16_t",
            FieldType::U32 => "uint32_t",
            FieldType::U64 => "uint64_t",
            FieldType::I8 => "int8_t",
            FieldType::I16 => "int16_t",
            FieldType::I32 => "int32_t",
            FieldType::I64 => "int64_t",
            FieldType::F64 => "double",
            FieldType::Bool => "bool_t",
            FieldType::Str => "string",
        }
    }

    /// Inverse of [`FieldType::tsdl_alias`].
    pub fn from_tsdl_alias(s: &str) -> Option<FieldType> {
        FieldType::ALL.iter().copied().find(|t| t.tsdl_alias() == s)
    }
}

mod sealed {
    /// Seals [`super::Field`]: the write path reserves exactly `encoded_len()` bytes and trusts
    /// `encode` to stay inside them, so only the implementations in this module may exist.
    pub trait Sealed {}
}

/// A value that can be recorded as a tracepoint field.
///
/// Implemented for all integer types, `f32`/`f64`, `bool`, `&str`, `String` and references to
/// those. The encoding is little-endian and byte-aligned. The trait is sealed: the write path
/// writes raw bytes into a ring on the strength of [`Field::encoded_len`], so a foreign
/// implementation with an inconsistent length could corrupt memory.
///
/// ```
/// use hushtrace_core::Field;
/// let mut buf = [0u8; 16];
/// let n = 7u32.encoded_len();
/// // SAFETY: `buf` has room for `encoded_len()` bytes.
/// let written = unsafe { 7u32.encode(buf.as_mut_ptr()) };
/// assert_eq!(written, n);
/// assert_eq!(&buf[..n], &[7, 0, 0, 0]);
/// ```
///
/// ```compile_fail
/// struct Mine;
/// impl hushtrace_core::Field for Mine { // error: the trait is sealed
///     const TYPE: hushtrace_core::FieldType = hushtrace_core::FieldType::U8;
///     fn encoded_len(&self) -> usize { 0 }
///     unsafe fn encode(&self, _: *mut u8) -> usize { 1000 }
/// }
/// ```
pub trait Field: sealed::Sealed {
    /// The wire type written for this value.
    const TYPE: FieldType;
    /// How many bytes [`Field::encode`] writes. Invariant (upheld by every implementation, which
    /// the seal keeps in this crate): equal to what `encode` returns for the same value.
    fn encoded_len(&self) -> usize;
    /// Writes the value at `dst` and returns the number of bytes written, which is
    /// `self.encoded_len()`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `self.encoded_len()` bytes; no alignment is required.
    unsafe fn encode(&self, dst: *mut u8) -> usize;
}

macro_rules! impl_num {
    ($($t:ty => $ft:ident as $wire:ty),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Field for $t {
            const TYPE: FieldType = FieldType::$ft;
            #[inline(always)]
            fn encoded_len(&self) -> usize {
                core::mem::size_of::<$wire>()
            }
            #[inline(always)]
            unsafe fn encode(&self, dst: *mut u8) -> usize {
                // SAFETY: the caller guarantees `dst` is valid for `encoded_len()` bytes, which
                // is the size of `$wire`; `write_unaligned` has no alignment requirement.
                unsafe { (dst as *mut [u8; core::mem::size_of::<$wire>()])
                    .write_unaligned((*self as $wire).to_le_bytes()) }
                core::mem::size_of::<$wire>()
            }
        }
    )*};
}

impl_num! {
    u8 => U8 as u8, u16 => U16 as u16, u32 => U32 as u32, u64 => U64 as u64, usize => U64 as u64,
    i8 => I8 as i8, i16 => I16 as i16, i32 => I32 as i32, i64 => I64 as i64, isize => I64 as i64,
    f64 => F64 as f64, f32 => F64 as f64,
}

impl sealed::Sealed for bool {}
impl Field for bool {
    const TYPE: FieldType = FieldType::Bool;
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        1
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> usize {
        // SAFETY: the caller guarantees one writable byte at `dst`.
        unsafe { dst.write(*self as u8) };
        1
    }
}

/// The number of bytes of `s` that a string field keeps (see [`STR_CAP`]).
#[inline]
fn kept_len(s: &str) -> usize {
    let b = s.as_bytes();
    let mut n = b.len().min(STR_CAP);
    if let Some(z) = b[..n].iter().position(|&c| c == 0) {
        n = z;
    }
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    n
}

impl sealed::Sealed for str {}
impl Field for str {
    const TYPE: FieldType = FieldType::Str;
    #[inline]
    fn encoded_len(&self) -> usize {
        kept_len(self) + 1
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> usize {
        // `str` is immutable, so this is the length `encoded_len` computed.
        let n = kept_len(self);
        // SAFETY: the caller guarantees `n + 1` writable bytes at `dst`; the source is `n`
        // initialized bytes of `self`, which cannot overlap the record buffer.
        unsafe {
            core::ptr::copy_nonoverlapping(self.as_ptr(), dst, n);
            dst.add(n).write(0);
        }
        n + 1
    }
}

impl sealed::Sealed for String {}
impl Field for String {
    const TYPE: FieldType = FieldType::Str;
    #[inline]
    fn encoded_len(&self) -> usize {
        self.as_str().encoded_len()
    }
    #[inline]
    unsafe fn encode(&self, dst: *mut u8) -> usize {
        // SAFETY: forwarded contract.
        unsafe { self.as_str().encode(dst) }
    }
}

impl<T: Field + ?Sized> sealed::Sealed for &T {}
impl<T: Field + ?Sized> Field for &T {
    const TYPE: FieldType = T::TYPE;
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }
    #[inline(always)]
    unsafe fn encode(&self, dst: *mut u8) -> usize {
        // SAFETY: forwarded contract.
        unsafe { (**self).encode(dst) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc<T: Field + ?Sized>(v: &T) -> Vec<u8> {
        let mut b = vec![0xAAu8; v.encoded_len()];
        // SAFETY: `b` holds exactly `encoded_len()` bytes.
        let n = unsafe { v.encode(b.as_mut_ptr()) };
        assert_eq!(
            n,
            b.len(),
            "encode wrote a different length than encoded_len"
        );
        b
    }

    #[test]
    fn numbers_are_little_endian() {
        assert_eq!(enc(&0x0102u16), vec![2, 1]);
        assert_eq!(enc(&-1i32), vec![0xff; 4]);
        assert_eq!(enc(&1.5f64), 1.5f64.to_le_bytes().to_vec());
        assert_eq!(enc(&1.5f32), 1.5f64.to_le_bytes().to_vec());
        assert_eq!(enc(&usize::MAX), vec![0xff; 8]);
        assert_eq!(enc(&true), vec![1]);
    }

    #[test]
    fn strings_are_capped_and_nul_terminated() {
        assert_eq!(enc("hi"), b"hi\0".to_vec());
        assert_eq!(enc("a\0b"), b"a\0".to_vec());
        let long = "é".repeat(200); // 400 bytes, 2-byte chars
        let e = enc(long.as_str());
        assert_eq!(e.len(), 255); // 254 bytes of whole chars + NUL
        assert!(std::str::from_utf8(&e[..e.len() - 1]).is_ok());
        assert_eq!(<&&str as Field>::TYPE, FieldType::Str);
    }

    #[test]
    fn type_roundtrip() {
        for t in FieldType::ALL {
            assert_eq!(FieldType::from_u8(t as u8), Some(t));
            assert_eq!(FieldType::from_tsdl_alias(t.tsdl_alias()), Some(t));
        }
        assert_eq!(FieldType::from_u8(12), None);
    }
}
