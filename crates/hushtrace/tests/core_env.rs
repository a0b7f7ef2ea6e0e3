//! `hushtrace::start_from_env()` with `HUSHTRACE_OUTPUT` starts a session that honours
//! `HUSHTRACE_MODE`, `HUSHTRACE_SUBBUF_SIZE` and `HUSHTRACE_NUM_SUBBUFS`. Runs `test_env`
//! (`crates/hushtrace-testbins`) as a subprocess (the environment is process-global).

mod common;

use hushtrace_ctf::layout::{COMPACT_HEADER_LEN, EXTENDED_HEADER_LEN, PACKET_HEADER_LEN};
use std::path::Path;

/// `event!("env", "ev", seq = u64)`: header + one u64. The header is compact in a tight loop,
/// extended after a pause of 2^24 cycles (a preemption): the bounds below allow for both.
const EVENT_LEN: usize = COMPACT_HEADER_LEN + 8;
/// The same event with an extended header.
const EXTENDED_EVENT_LEN: usize = EXTENDED_HEADER_LEN + 8;

fn run_env(vars: &[(&str, &str)], events: u64) -> Vec<String> {
    common::run_test_env(vars, events)
}

/// `(written, discarded)` from a `{"written":W,"discarded":D}` line.
fn counts(line: &str) -> (u64, u64) {
    let num = |key: &str| -> u64 {
        let k = format!("\"{key}\":");
        let rest = &line[line.find(&k).unwrap_or_else(|| panic!("no {key}: {line}")) + k.len()..];
        rest.split([',', '}'])
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("bad {key}: {line}"))
    };
    (num("written"), num("discarded"))
}

/// Stream files (and their sizes) of the single process trace under `dir`.
fn stream_files(dir: &Path) -> Vec<u64> {
    let mut sizes = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            for f in std::fs::read_dir(&p).unwrap() {
                let f = f.unwrap();
                if f.file_name().to_string_lossy().starts_with("stream_") {
                    sizes.push(f.metadata().unwrap().len());
                }
            }
        }
    }
    sizes
}

/// The bytes of the only stream file under `dir`.
fn stream_bytes(dir: &Path) -> Vec<u8> {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            for f in std::fs::read_dir(&p).unwrap() {
                let f = f.unwrap();
                if f.file_name().to_string_lossy().starts_with("stream_") {
                    return std::fs::read(f.path()).unwrap();
                }
            }
        }
    }
    panic!("no stream file under {}", dir.display())
}

/// Overwrite mode with 3 sub-buffers of 4 KiB (`4k`): the trace is a flight recording of the
/// newest events, between 2 and 3 packets' worth, and nothing else.
#[test]
fn env_overwrite_tiny_buffer_keeps_newest_within_capacity() {
    let dir = common::temp_dir("env-ow");
    let n = 20_000u64;
    let lines = run_env(
        &[
            ("HUSHTRACE_OUTPUT", dir.to_str().unwrap()),
            ("HUSHTRACE_MODE", "overwrite"),
            ("HUSHTRACE_SUBBUF_SIZE", "4k"),
            ("HUSHTRACE_NUM_SUBBUFS", "3"),
        ],
        n,
    );
    assert_eq!(lines[0], "start: ok", "{lines:?}");
    let (w, d) = counts(&lines[1]);
    let per_packet = ((4096 - PACKET_HEADER_LEN) / EVENT_LEN) as u64;
    let min_per_packet = ((4096 - PACKET_HEADER_LEN) / EXTENDED_EVENT_LEN) as u64;
    assert_eq!(w + d, n, "{lines:?}");
    assert!(
        d > 0,
        "a tiny overwrite ring loses the oldest events: {lines:?}"
    );
    assert!(
        w <= 3 * per_packet,
        "written ({w}) fits in 3 packets of 4096 bytes ({} events)",
        3 * per_packet
    );
    assert!(
        w > 2 * min_per_packet,
        "written ({w}) is more than 2 packets: 3 sub-buffers were used"
    );
    let sizes = stream_files(&dir);
    assert_eq!(sizes.len(), 1, "one stream: {sizes:?}");
    assert!(
        sizes[0] <= 3 * 4096,
        "at most 3 packets of 4 KiB: {sizes:?}"
    );
    {
        let events = common::babeltrace(&dir, false);
        assert_eq!(events.len() as u64, w);
        let seqs: Vec<u64> = events.iter().map(|e| e.int("seq") as u64).collect();
        assert_eq!(
            seqs,
            (n - w..n).collect::<Vec<_>>(),
            "overwrite keeps the newest events"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Discard mode (explicit, and the default) with small packets: every event accounted, and
/// the oldest events are kept (the first one is in the trace), packets no larger than asked.
#[test]
fn env_discard_mode_and_default_keep_oldest() {
    for mode in [Some("discard"), None] {
        let dir = common::temp_dir("env-discard");
        let n = 20_000u64;
        let mut vars = vec![
            ("HUSHTRACE_OUTPUT", dir.to_str().unwrap()),
            ("HUSHTRACE_SUBBUF_SIZE", "4096"),
            ("HUSHTRACE_NUM_SUBBUFS", "2"),
        ];
        if let Some(m) = mode {
            vars.push(("HUSHTRACE_MODE", m));
        }
        let lines = run_env(&vars, n);
        assert_eq!(lines[0], "start: ok", "{lines:?}");
        let (w, d) = counts(&lines[1]);
        assert_eq!(w + d, n, "{mode:?}: {lines:?}");
        let sizes = stream_files(&dir);
        assert_eq!(sizes.len(), 1, "one stream: {sizes:?}");
        // Walk the packets: each is at most one 4096-byte sub-buffer, and together they have
        // room for every written event. (Packets are trimmed to their content, so the file
        // size divided by 4096 undercounts them.)
        let bytes = stream_bytes(&dir);
        let mut off = 0usize;
        let mut packets = 0u64;
        while off < bytes.len() {
            let size = u64::from_le_bytes(bytes[off + 56..off + 64].try_into().unwrap()) / 8;
            assert!(size as usize <= 4096, "{mode:?}: packet of {size} bytes");
            assert!(size as usize >= PACKET_HEADER_LEN);
            off += size as usize;
            packets += 1;
        }
        assert_eq!(off, bytes.len());
        assert!(
            packets * ((4096 - PACKET_HEADER_LEN) / EVENT_LEN) as u64 >= w,
            "{mode:?}: {packets} packets of at most 4096 bytes hold the {w} events"
        );
        {
            let events = common::babeltrace(&dir, d > 0);
            assert_eq!(events.len() as u64, w);
            assert_eq!(
                events[0].int("seq"),
                0,
                "{mode:?}: discard keeps the oldest"
            );
            assert!(
                events.windows(2).all(|p| p[0].int("seq") < p[1].int("seq")),
                "{mode:?}: in order"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Sizes with an `M` suffix; one large packet holds everything.
#[test]
fn env_size_suffix_m_is_honoured() {
    let dir = common::temp_dir("env-m");
    let n = 20_000u64;
    let lines = run_env(
        &[
            ("HUSHTRACE_OUTPUT", dir.to_str().unwrap()),
            ("HUSHTRACE_SUBBUF_SIZE", "1M"),
            ("HUSHTRACE_NUM_SUBBUFS", "2"),
        ],
        n,
    );
    assert_eq!(lines[0], "start: ok", "{lines:?}");
    assert_eq!(counts(&lines[1]), (n, 0), "{lines:?}");
    let sizes = stream_files(&dir);
    // 20,000 events of 12 bytes (19 for the odd one after a preemption) fit in one 1 MiB
    // packet: a single header.
    assert_eq!(sizes.len(), 1, "{sizes:?}");
    let extra = sizes[0] as usize - (PACKET_HEADER_LEN + n as usize * EVENT_LEN);
    assert!(
        extra.is_multiple_of(EXTENDED_EVENT_LEN - EVENT_LEN)
            && extra <= n as usize * (EXTENDED_EVENT_LEN - EVENT_LEN),
        "one packet of a 1 MiB sub-buffer: {sizes:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without `HUSHTRACE_OUTPUT` nothing starts and nothing is written; another `HUSHTRACE_*`
/// variable set without it is an error naming it and `HUSHTRACE_OUTPUT` (issue 20.2: it was
/// ignored without a word), and the program carries on untraced.
#[test]
fn env_without_output_starts_nothing() {
    let lines = run_env(&[], 100);
    assert_eq!(lines, vec!["start: none", "alive"]);
    for (var, value) in [
        ("HUSHTRACE_MODE", "overwrite"),
        ("HUSHTRACE_RELAY", "net://127.0.0.1"),
    ] {
        let lines = run_env(&[(var, value)], 100);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("start: err: ")
                && lines[0].contains(var)
                && lines[0].contains("without HUSHTRACE_OUTPUT"),
            "{lines:?}"
        );
        assert_eq!(lines[1], "alive");
    }
}
