//! Fuzzes the event header codec (`hushtrace_ctf::layout`) that the reader, crash recovery
//! and the runtime's flush share: an event id, a timestamp and the stream's clock encode to the
//! compact form exactly when `compact_fits`, and decode back to the same id and timestamp; any
//! bytes decode without panicking to a header no longer than the input.
//!
//! Input: `u16` id, `u64` timestamp, `u64` clock (little-endian), a mode byte (odd: the
//! timestamp as is, else the clock plus the timestamp modulo 2^25), then bytes to decode.
#![no_main]

use hushtrace_ctf::layout::{
    compact_fits, parse_event_header, push_event_header, COMPACT_HEADER_LEN, EXTENDED_HEADER_LEN,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let word = |i: usize| -> u64 {
        let mut b = [0u8; 8];
        for (k, x) in b.iter_mut().enumerate() {
            *x = data.get(i + k).copied().unwrap_or(0);
        }
        u64::from_le_bytes(b)
    };
    let (id, ts, prev) = (word(0) as u16, word(2), word(10));
    // Near `prev` unless byte 18 is odd: small deltas are what the compact form is for.
    let ts = if data.get(18).is_none_or(|b| b & 1 == 0) {
        prev.wrapping_add(ts % (1 << 25))
    } else {
        ts
    };
    let mut out = Vec::new();
    let n = push_event_header(&mut out, id, ts, prev);
    assert_eq!(n, out.len());
    let h = parse_event_header(&out, prev).expect("a whole header");
    assert_eq!((h.id, h.ts, h.len), (id, ts, n));
    assert_eq!(h.compact, compact_fits(id, ts, prev));
    assert_eq!(n, if h.compact { COMPACT_HEADER_LEN } else { EXTENDED_HEADER_LEN });

    let rest = data.get(19..).unwrap_or(&[]);
    if let Some(h) = parse_event_header(rest, prev) {
        assert!(h.len <= rest.len());
        if h.compact {
            assert!(h.id < 255 && h.ts.wrapping_sub(prev) < 1 << 24);
        }
    }
});
