//! Fuzzes stream decoding: the input is the bytes of one stream file of a fixed, valid trace
//! (every field type, spans, a counter, a never-hit class). The reader must return events or an
//! error naming the file and a byte offset, never panic, and hold at most `MAX_EVENT_BYTES` of
//! the stream in memory.
#![no_main]

use hushtrace_ctf::reader::Session;
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

#[path = "../src/trace.rs"]
mod trace;

/// A session directory holding the fixed trace's metadata; the stream is replaced per input.
fn session_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("hushtrace-fuzz-{}", std::process::id()));
        let t = trace::fixture();
        t.write_session(&dir).expect("write fixture");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = session_dir();
    let stream = dir.join(format!("{}/stream_0", trace::PID));
    std::fs::write(&stream, data).expect("write stream");
    let session = Session::open(dir).expect("fixture metadata is valid");
    let mut merged = session.merged().expect("open streams");
    loop {
        match merged.next() {
            Ok(Some(ev)) => {
                for (_, v) in ev.event.fields() {
                    let _ = v.to_string();
                }
            }
            Ok(None) => break,
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("stream_0: byte offset "), "{msg}");
                break;
            }
        }
    }
    let _ = merged.take_warnings();
    // Memory stays bounded whatever the packet headers claim.
    for (_, s) in merged.streams() {
        assert!(s.buffer_capacity() <= hushtrace_ctf::reader::MAX_EVENT_BYTES);
    }
});
