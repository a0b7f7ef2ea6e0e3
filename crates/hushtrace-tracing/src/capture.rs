//! Field values of one record, captured on the stack straight into the [`Value`] list the
//! hushtrace record takes: numbers and booleans as such, strings and formatted (`?`/`%`)
//! values copied into a caller-provided [`StrBuf`]. No allocation, and nothing initialized
//! that the record does not use (a record of `n` fields writes `n + 1` values).

use hushtrace::{FieldType, Value, STR_CAP};
use std::fmt::{self, Write};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use tracing_core::field::{Field, Visit};

/// The most fields of a `tracing` callsite (tracing's own limit).
pub(crate) const MAX_FIELDS: usize = 32;
/// The most values the bridge puts before the callsite's fields (a span's id and parent).
pub(crate) const MAX_PREFIX: usize = 2;
/// Bytes of strings kept per record.
const BUF: usize = 4096;

/// Stack space for one record's values and strings, left uninitialized: a [`Capture`] writes
/// what the record uses. Declared by the caller and borrowed by the capture (so nothing is
/// built then moved: a move is an 800-byte copy).
pub(crate) struct Scratch {
    /// Values of any lifetime (`Value<'b>` has the same layout for every `'b`); the capture
    /// writes and reads them as `Value<'b>` for the lifetime `'b` of its borrow.
    vals: [MaybeUninit<Value<'static>>; MAX_FIELDS + MAX_PREFIX],
    strs: [MaybeUninit<u8>; BUF],
}

impl Scratch {
    #[inline(always)]
    pub(crate) fn new() -> Scratch {
        Scratch {
            vals: [const { MaybeUninit::uninit() }; MAX_FIELDS + MAX_PREFIX],
            strs: [MaybeUninit::uninit(); BUF],
        }
    }
}

/// The values of one record: the prefix values (the event's `level`; the span's `id` and
/// `parent`; a record's `span_id`), then the callsite's fields by index.
pub(crate) struct Capture<'b> {
    /// `scratch.vals`. Invariant: `vals[..p + n]` are initialized (at [`Capture::new`]: the
    /// prefix, then empty strings).
    vals: NonNull<Value<'b>>,
    /// Number of prefix values; at most [`MAX_PREFIX`].
    p: usize,
    /// Number of fields; at most [`MAX_FIELDS`].
    n: usize,
    /// `scratch.strs`. Invariant: its first `used` bytes are initialized, and every
    /// `Value::Str` in `vals` points into them at whole UTF-8 characters; those bytes are never
    /// written again (appends go at `used` and beyond), so the `&'b str`s handed out stay
    /// valid. Writes go through this raw pointer only, never through a reference to the whole
    /// buffer.
    buf: NonNull<u8>,
    /// In range `0 ..= BUF`.
    used: usize,
    _scratch: PhantomData<&'b mut Scratch>,
}

impl<'b> Capture<'b> {
    /// A capture of the `prefix` values and `n` empty fields (at most [`MAX_FIELDS`]) in
    /// `scratch`.
    #[inline(always)]
    pub(crate) fn new<const P: usize>(
        prefix: [Value<'static>; P],
        n: usize,
        scratch: &'b mut Scratch,
    ) -> Capture<'b> {
        const { assert!(P <= MAX_PREFIX) };
        let n = n.min(MAX_FIELDS);
        let p: *mut Scratch = scratch;
        // SAFETY: `p` comes from a live exclusive borrow; taking field addresses reads nothing.
        let (vals, buf) = unsafe {
            (
                NonNull::new_unchecked(std::ptr::addr_of_mut!((*p).vals).cast::<Value<'b>>()),
                NonNull::new_unchecked(std::ptr::addr_of_mut!((*p).strs).cast::<u8>()),
            )
        };
        // SAFETY: `vals` points to `MAX_FIELDS + MAX_PREFIX >= P + n` values of the scratch,
        // exclusively ours for `'b`; `MaybeUninit<Value<'static>>` has the layout of `Value<'b>`.
        unsafe {
            for (i, v) in prefix.into_iter().enumerate() {
                vals.as_ptr().add(i).write(v);
            }
            for i in P..P + n {
                vals.as_ptr().add(i).write(Value::Str(""));
            }
        }
        Capture {
            vals,
            p: P,
            n,
            buf,
            used: 0,
            _scratch: PhantomData,
        }
    }

    /// The prefix then the field values (an absent value is the empty string).
    #[inline(always)]
    pub(crate) fn values(&self) -> &[Value<'b>] {
        debug_assert!(self.n <= MAX_FIELDS && self.p <= MAX_PREFIX);
        // SAFETY: `vals[..p + n]` are initialized (see the field) and only written through
        // `&mut self`, which this shared borrow excludes.
        unsafe { std::slice::from_raw_parts(self.vals.as_ptr(), self.p + self.n) }
    }

    /// The wire types of [`Capture::values`].
    #[inline(always)]
    pub(crate) fn types(&self) -> impl Iterator<Item = FieldType> + '_ {
        self.values().iter().map(Value::field_type)
    }

    /// Sets field `i` (ignored beyond the callsite's fields).
    #[inline(always)]
    fn set(&mut self, i: usize, v: Value<'b>) {
        if i < self.n {
            // SAFETY: `p + i < p + n <= MAX_PREFIX + MAX_FIELDS`: a value of the scratch,
            // exclusively ours (`&mut self`); `Value` is `Copy`, so overwriting drops nothing.
            unsafe { self.vals.as_ptr().add(self.p + i).write(v) };
        }
    }

    /// Appends as much of `s` as fits (whole characters, at most `limit` bytes); returns the
    /// bytes appended.
    #[inline]
    fn append(&mut self, s: &str, limit: usize) -> usize {
        debug_assert!(self.used <= BUF);
        let room = (BUF - self.used).min(limit);
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: `used + n <= BUF` (n <= room), so the destination lies in the borrowed
        // buffer, past every byte handed out; `s` is a shared borrow and cannot overlap the
        // exclusively borrowed buffer. Afterwards `buf[..used + n]` is initialized.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), self.buf.as_ptr().add(self.used), n);
        }
        self.used += n;
        n
    }

    /// The string at `buf[start..used]`.
    #[inline]
    fn str_from(&self, start: usize) -> &'b str {
        debug_assert!(start <= self.used && self.used <= BUF);
        // SAFETY: by the invariant of `buf`, these bytes are initialized, whole UTF-8
        // characters copied from `&str`s, and never written again while `'b` lasts (the
        // buffer is borrowed for `'b`).
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                self.buf.as_ptr().add(start),
                self.used - start,
            ))
        }
    }

    #[inline]
    fn set_str(&mut self, i: usize, s: &str) {
        if i < self.n {
            let start = self.used;
            self.append(s, STR_CAP);
            let v = Value::Str(self.str_from(start));
            self.set(i, v);
        }
    }

    fn set_fmt(&mut self, i: usize, args: fmt::Arguments<'_>) {
        if i < self.n {
            let start = self.used;
            let mut w = Writer {
                cap: self,
                left: STR_CAP,
            };
            let _ = w.write_fmt(args);
            let v = Value::Str(self.str_from(start));
            self.set(i, v);
        }
    }

    /// Turns every number and boolean field into its decimal string (for the all-strings
    /// variant); the prefix stays.
    pub(crate) fn stringify_all(&mut self) {
        for i in 0..self.n {
            match self.values()[self.p + i] {
                Value::Str(_) => {}
                Value::Bool(v) => self.set_str(i, if v { "true" } else { "false" }),
                Value::U8(v) => self.set_fmt(i, format_args!("{v}")),
                Value::U16(v) => self.set_fmt(i, format_args!("{v}")),
                Value::U32(v) => self.set_fmt(i, format_args!("{v}")),
                Value::U64(v) => self.set_fmt(i, format_args!("{v}")),
                Value::I8(v) => self.set_fmt(i, format_args!("{v}")),
                Value::I16(v) => self.set_fmt(i, format_args!("{v}")),
                Value::I32(v) => self.set_fmt(i, format_args!("{v}")),
                Value::I64(v) => self.set_fmt(i, format_args!("{v}")),
                Value::F64(v) => self.set_fmt(i, format_args!("{v}")),
            }
        }
    }
}

/// Formats into a [`Capture`]'s buffer, at most `left` bytes; stops the formatting (an error)
/// once full, so a huge `Debug` value costs no more than the bytes kept.
struct Writer<'c, 'b> {
    cap: &'c mut Capture<'b>,
    left: usize,
}

impl Write for Writer<'_, '_> {
    #[inline]
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = self.cap.append(s, self.left);
        self.left -= n;
        if n < s.len() {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}

impl Visit for Capture<'_> {
    #[inline]
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.index(), Value::F64(value));
    }
    #[inline]
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.index(), Value::I64(value));
    }
    #[inline]
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.index(), Value::U64(value));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.record_i64(field, v),
            Err(_) => self.set_fmt(field.index(), format_args!("{value}")),
        }
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.record_u64(field, v),
            Err(_) => self.set_fmt(field.index(), format_args!("{value}")),
        }
    }
    #[inline]
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.index(), Value::Bool(value));
    }
    #[inline]
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set_str(field.index(), value);
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.set_fmt(field.index(), format_args!("{value}"));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.set_fmt(field.index(), format_args!("{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_str<'a>(c: &'a Capture<'_>, i: usize) -> &'a str {
        match c.values()[c.p + i] {
            Value::Str(s) => s,
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn strings_are_capped_on_char_boundaries() {
        let mut buf = Scratch::new();
        let mut c = Capture::new([Value::Str("INFO")], 2, &mut buf);
        c.set_str(0, &"é".repeat(200));
        c.set_fmt(1, format_args!("{:?}", vec![1u8; 1000]));
        assert_eq!(field_str(&c, 0).len(), 254);
        assert!(field_str(&c, 0).chars().all(|ch| ch == 'é'));
        assert_eq!(field_str(&c, 1).len(), STR_CAP);
        assert!(field_str(&c, 1).starts_with("[1, 1"));
        assert_eq!(c.values()[0], Value::Str("INFO"));
    }

    #[test]
    fn the_buffer_bounds_all_strings() {
        let mut buf = Scratch::new();
        let mut c = Capture::new([Value::U64(1), Value::U64(0)], MAX_FIELDS + 5, &mut buf);
        assert_eq!(c.values().len(), MAX_FIELDS + 2);
        for i in 0..MAX_FIELDS + 5 {
            c.set_str(i, &"x".repeat(300));
        }
        let total: usize = (0..MAX_FIELDS).map(|i| field_str(&c, i).len()).sum();
        assert_eq!(total, BUF);
        c.set(0, Value::U64(7));
        c.set(1, Value::Bool(true));
        c.stringify_all();
        assert_eq!(c.values()[..2], [Value::U64(1), Value::U64(0)]);
        assert!(matches!(c.values()[2], Value::Str(_)));
        assert!(matches!(c.values()[3], Value::Str(_)));
    }

    #[test]
    fn absent_fields_are_empty_and_later_strings_keep_earlier_ones() {
        let mut buf = Scratch::new();
        let mut c = Capture::new([Value::Str("WARN")], 4, &mut buf);
        c.set_str(2, "first");
        c.set(0, Value::I64(-3));
        c.set_fmt(3, format_args!("{}-{}", "second", 2));
        c.stringify_all();
        assert_eq!(
            c.values(),
            &[
                Value::Str("WARN"),
                Value::Str("-3"),
                Value::Str(""),
                Value::Str("first"),
                Value::Str("second-2"),
            ]
        );
        assert_eq!(
            c.types().collect::<Vec<_>>(),
            vec![FieldType::Str; 5],
            "all strings after stringify_all"
        );
    }
}
