//! Mutated and truncated traces: the reader returns events or a proper error, never panics.

mod common;

use hushtrace_ctf::reader::{parse_metadata, Session};
use proptest::prelude::*;
use std::path::Path;

/// Reads the whole session; returns the number of events or the error text.
fn read_all(dir: &Path) -> Result<usize, String> {
    let s = Session::open(dir).map_err(|e| e.to_string())?;
    let mut m = s.merged().map_err(|e| e.to_string())?;
    let mut n = 0;
    loop {
        match m.next() {
            Ok(Some(ev)) => {
                // Touch every field so decoding is exercised too.
                n += 1 + ev.event.fields().count();
            }
            Ok(None) => return Ok(n),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    /// XOR a byte.
    Flip(usize, u8),
    /// Overwrite 8 bytes with a value (hits sizes, ids, timestamps).
    Word(usize, u64),
    /// Cut the file.
    Truncate(usize),
    /// Insert a byte.
    Insert(usize, u8),
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match *m {
        Mutation::Flip(i, x) => bytes[i % len] ^= x.max(1),
        Mutation::Word(i, w) => {
            let i = i % len;
            let end = (i + 8).min(len);
            bytes[i..end].copy_from_slice(&w.to_le_bytes()[..end - i]);
        }
        Mutation::Truncate(i) => bytes.truncate(i % len),
        Mutation::Insert(i, x) => bytes.insert(i % len, x),
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Mutation::Flip(i, x)),
        (
            any::<usize>(),
            prop_oneof![any::<u64>(), 0..4096u64, Just(u64::MAX)]
        )
            .prop_map(|(i, w)| Mutation::Word(i, w)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Mutation::Insert(i, x)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mutated_streams_never_panic(muts in prop::collection::vec(mutation(), 1..4), which in 0usize..2) {
        let dir = tempfile::tempdir().unwrap();
        let t = common::rich_trace(900, 6);
        t.write_session(dir.path()).unwrap();
        let path = dir.path().join(format!("900/stream_{which}"));
        let mut bytes = std::fs::read(&path).unwrap();
        for m in &muts {
            apply(&mut bytes, m);
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Err(msg) = read_all(dir.path()) {
            prop_assert!(msg.contains(&path.display().to_string()), "{}", msg);
            prop_assert!(msg.contains("byte offset"), "{}", msg);
        }
    }

    #[test]
    fn mutated_metadata_never_panics(muts in prop::collection::vec(mutation(), 1..4)) {
        let t = common::rich_trace(900, 1);
        let mut bytes = t.metadata().into_bytes();
        for m in &muts {
            apply(&mut bytes, m);
        }
        if let Err(e) = parse_metadata(&bytes, "m".as_ref()) {
            prop_assert!(e.to_string().starts_with("m:"), "{}", e);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(stream in prop::collection::vec(any::<u8>(), 0..600)) {
        let dir = tempfile::tempdir().unwrap();
        let t = common::rich_trace(900, 1);
        t.write_session(dir.path()).unwrap();
        // A valid header keeps the interesting part of the input reachable.
        let mut bytes = t.stream_bytes(0)[..112].to_vec();
        bytes.extend_from_slice(&stream);
        std::fs::write(dir.path().join("900/stream_0"), &bytes).unwrap();
        let _ = read_all(dir.path());
    }
}

#[test]
fn every_truncation_point_is_handled() {
    let dir = tempfile::tempdir().unwrap();
    let t = common::rich_trace(900, 3);
    t.write_session(dir.path()).unwrap();
    let path = dir.path().join("900/stream_0");
    let full = std::fs::read(&path).unwrap();
    let complete = read_all(dir.path()).unwrap();
    for cut in 0..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        // A cut anywhere is a truncated last packet: never an error, never more events.
        let n = read_all(dir.path()).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert!(n <= complete);
    }
}
