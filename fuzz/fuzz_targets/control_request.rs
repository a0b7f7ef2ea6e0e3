//! Fuzzes the control socket's request parser (`hushtrace::control::parse_request`): any bytes
//! give a request or an error message, never a panic; accepted requests round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = hushtrace::control::parse_request(data) {
        // A parsed request only comes from valid UTF-8 of bounded size.
        assert!(data.len() <= hushtrace::control::MAX_REQUEST);
        assert!(std::str::from_utf8(data).is_ok(), "{req:?}");
    }
});
