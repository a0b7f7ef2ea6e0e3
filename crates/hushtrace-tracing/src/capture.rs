//! Field values of one record, captured on the stack: numbers and booleans as such, strings
//! and formatted (`?`/`%`) values copied into a fixed buffer. No allocation.

use hushtrace::{FieldType, Value, STR_CAP};
use std::fmt::{self, Write};
use std::mem::MaybeUninit;
use tracing_core::field::{Field, Visit};

/// The most fields of a `tracing` callsite (tracing's own limit).
pub(crate) const MAX_FIELDS: usize = 32;
/// Bytes of strings kept per record.
const BUF: usize = 4096;

#[derive(Clone, Copy, Debug)]
enum Slot {
    Empty,
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    /// `buf[start .. start + len]`, valid UTF-8.
    Str {
        start: u16,
        len: u16,
    },
}

/// The values of one record, by field index.
pub(crate) struct Capture {
    n: usize,
    slots: [Slot; MAX_FIELDS],
    /// Invariant: `buf[..used]` is initialized, and every `Slot::Str` range lies in it and is
    /// valid UTF-8 (whole characters copied from a `&str`).
    buf: [MaybeUninit<u8>; BUF],
    used: usize,
}

impl Capture {
    /// An empty capture of `n` fields (at most [`MAX_FIELDS`]).
    #[inline]
    pub(crate) fn new(n: usize) -> Capture {
        Capture {
            n: n.min(MAX_FIELDS),
            slots: [Slot::Empty; MAX_FIELDS],
            buf: [MaybeUninit::uninit(); BUF],
            used: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// The wire types of the values, in field order.
    pub(crate) fn types(&self) -> impl Iterator<Item = FieldType> + '_ {
        self.slots[..self.n].iter().map(|s| match s {
            Slot::I64(_) => FieldType::I64,
            Slot::U64(_) => FieldType::U64,
            Slot::F64(_) => FieldType::F64,
            Slot::Bool(_) => FieldType::Bool,
            Slot::Empty | Slot::Str { .. } => FieldType::Str,
        })
    }

    /// The value of field `i` (an absent value is the empty string).
    #[inline]
    pub(crate) fn value(&self, i: usize) -> Value<'_> {
        match self.slots[i] {
            Slot::Empty => Value::Str(""),
            Slot::I64(v) => Value::I64(v),
            Slot::U64(v) => Value::U64(v),
            Slot::F64(v) => Value::F64(v),
            Slot::Bool(v) => Value::Bool(v),
            Slot::Str { start, len } => {
                let (start, len) = (start as usize, len as usize);
                debug_assert!(start + len <= self.used);
                // SAFETY: by the invariant of `buf`, these bytes are initialized and hold whole
                // UTF-8 characters copied from a `&str`.
                Value::Str(unsafe {
                    std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                        self.buf.as_ptr().add(start).cast::<u8>(),
                        len,
                    ))
                })
            }
        }
    }

    /// Appends as much of `s` as fits (whole characters, at most `limit` bytes); returns the
    /// bytes appended.
    fn append(&mut self, s: &str, limit: usize) -> usize {
        let room = (BUF - self.used).min(limit);
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: `used + n <= BUF` (n <= room), and `s` cannot overlap our buffer's unused
        // part mutably borrowed here; afterwards `buf[..used + n]` is initialized.
        unsafe {
            std::ptr::copy_nonoverlapping(
                s.as_ptr(),
                self.buf.as_mut_ptr().add(self.used).cast::<u8>(),
                n,
            );
        }
        self.used += n;
        n
    }

    fn set_str(&mut self, i: usize, s: &str) {
        if i < self.n {
            let start = self.used;
            let len = self.append(s, STR_CAP);
            self.slots[i] = Slot::Str {
                start: start as u16,
                len: len as u16,
            };
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
            self.slots[i] = Slot::Str {
                start: start as u16,
                len: (self.used - start) as u16,
            };
        }
    }

    fn set(&mut self, i: usize, slot: Slot) {
        if i < self.n {
            self.slots[i] = slot;
        }
    }

    /// Turns every number and boolean into its decimal string (for the all-strings variant).
    pub(crate) fn stringify_all(&mut self) {
        for i in 0..self.n {
            match self.slots[i] {
                Slot::I64(v) => self.set_fmt(i, format_args!("{v}")),
                Slot::U64(v) => self.set_fmt(i, format_args!("{v}")),
                Slot::F64(v) => self.set_fmt(i, format_args!("{v}")),
                Slot::Bool(v) => self.set_str(i, if v { "true" } else { "false" }),
                Slot::Empty | Slot::Str { .. } => {}
            }
        }
    }
}

/// Formats into a [`Capture`]'s buffer, at most `left` bytes; stops the formatting (an error)
/// once full, so a huge `Debug` value costs no more than the bytes kept.
struct Writer<'c> {
    cap: &'c mut Capture,
    left: usize,
}

impl Write for Writer<'_> {
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

impl Visit for Capture {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.index(), Slot::F64(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.index(), Slot::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.index(), Slot::U64(value));
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
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.index(), Slot::Bool(value));
    }
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

    #[test]
    fn strings_are_capped_on_char_boundaries() {
        let mut c = Capture::new(2);
        c.set_str(0, &"é".repeat(200));
        match c.value(0) {
            Value::Str(s) => assert_eq!(s.len(), 254),
            v => panic!("{v:?}"),
        }
        c.set_fmt(1, format_args!("{:?}", vec![1u8; 1000]));
        match c.value(1) {
            Value::Str(s) => {
                assert_eq!(s.len(), STR_CAP);
                assert!(s.starts_with("[1, 1"));
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn the_buffer_bounds_all_strings() {
        let mut c = Capture::new(MAX_FIELDS);
        for i in 0..MAX_FIELDS {
            c.set_str(i, &"x".repeat(300));
        }
        let total: usize = (0..MAX_FIELDS)
            .map(|i| match c.value(i) {
                Value::Str(s) => s.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(total, BUF);
        c.set(0, Slot::U64(7));
        c.set(1, Slot::Bool(true));
        c.stringify_all();
        assert!(matches!(c.value(0), Value::Str(_)));
    }
}
