//! Fuzzes the TSDL metadata parser: any bytes give a TraceDesc or an error naming "fuzz".
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match hushtrace_ctf::reader::parse_metadata(data, "fuzz".as_ref()) {
        Ok(desc) => {
            // Whatever parses must render back to the same text.
            assert_eq!(hushtrace_ctf::metadata::to_tsdl(&desc).as_bytes(), data);
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz")),
    }
});
