//! Helpers of the integration tests: a real `lttng-relayd` on free loopback ports, a real
//! hushtrace trace recorded in a subprocess (two threads and a forked child), babeltrace2.

#![allow(dead_code)]

use hushtrace_relay::{split_packets, RelayClient, RelayUrl, StreamId};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// Events the recording emits, per process and thread.
pub const PARENT_MAIN: u64 = 3000;
pub const PARENT_WORKER: u64 = 2000;
pub const CHILD_MAIN: u64 = 1500;
pub const CHILD_WORKER: u64 = 700;

pub use hushtrace_testsupport::{babeltrace, Relayd};

/// The relay's address as the client library takes it.
pub fn relay_url(relay: &Relayd) -> RelayUrl {
    RelayUrl::new("127.0.0.1", relay.control, relay.data)
}

/// One process of the recorded trace: its directory and files.
#[derive(Debug)]
pub struct Process {
    pub pid: u32,
    pub dir: PathBuf,
    pub metadata: Vec<u8>,
    /// `(file name, bytes)`, sorted by name.
    pub streams: Vec<(String, Vec<u8>)>,
}

/// The recorded trace.
#[derive(Debug)]
pub struct Recording {
    pub _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub parent: u32,
    pub child: u32,
    pub processes: Vec<Process>,
}

/// Records the trace in a subprocess (`examples/relay_fixture.rs`): the parent emits from its main thread and a worker, then forks a child
/// that does the same with other counts. Prints `pids <parent> <child>`.
pub fn record() -> Recording {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("trace");
    let fixture = hushtrace_testsupport::cargo_build(
        &hushtrace_testsupport::test_profile_dir(),
        "hushtrace-relay",
        hushtrace_testsupport::Artifact::Example("relay_fixture"),
    );
    let counts = [PARENT_MAIN, PARENT_WORKER, CHILD_MAIN, CHILD_WORKER].map(|n| n.to_string());
    let out = Command::new(&fixture)
        .arg(&root)
        .args(&counts)
        .output()
        .expect("run the recorder");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "recorder failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("pids ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no pids line in recorder output:\n{stdout}"));
    let mut it = line.split_whitespace().map(|p| p.parse::<u32>().unwrap());
    let (parent, child) = (it.next().unwrap(), it.next().unwrap());
    let processes = [parent, child]
        .into_iter()
        .map(|pid| {
            let d = root.join(pid.to_string());
            let mut streams: Vec<(String, Vec<u8>)> = std::fs::read_dir(&d)
                .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
                .map(|e| e.unwrap())
                .filter(|e| e.file_name().to_string_lossy().starts_with("stream_"))
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect();
            streams.sort();
            Process {
                pid,
                metadata: std::fs::read(d.join("metadata")).unwrap(),
                dir: d,
                streams,
            }
        })
        .collect();
    Recording {
        _dir: dir,
        root,
        parent,
        child,
        processes,
    }
}

/// Announces one process (metadata stream and data streams under `path`), sends its metadata
/// and calls streams-sent. Returns the data streams, in the order of `p.streams`.
pub fn announce(client: &mut RelayClient, path: &str, p: &Process) -> Vec<StreamId> {
    let meta = client
        .add_metadata_stream(path)
        .expect("add metadata stream");
    let ids: Vec<StreamId> = p
        .streams
        .iter()
        .map(|(name, _)| client.add_stream(path, name).expect("add stream"))
        .collect();
    client.send_metadata(meta, &p.metadata).expect("metadata");
    client.streams_sent().expect("streams sent");
    ids
}

/// Sends every packet of every stream of `p`; returns the number of packets.
pub fn send_all(client: &mut RelayClient, ids: &[StreamId], p: &Process) -> usize {
    let mut n = 0;
    for ((_, bytes), &id) in p.streams.iter().zip(ids) {
        for pk in split_packets(bytes) {
            let (pk, _) = pk.expect("packet");
            client.send_packet(id, pk).expect("send packet");
            n += 1;
        }
    }
    n
}

/// Counts the `relaytest:ev` events per `(vpid, vtid)` in babeltrace2's text output.
pub fn count_events(text: &str) -> BTreeMap<(u32, u32), u64> {
    hushtrace_testsupport::count_per_thread(text, "relaytest:ev")
}

/// The counts the recording must give, keyed by vpid: sorted per-thread counts.
pub fn expected(rec: &Recording) -> BTreeMap<u32, Vec<u64>> {
    let mut m = BTreeMap::new();
    m.insert(rec.parent, vec![PARENT_WORKER, PARENT_MAIN]);
    m.insert(rec.child, vec![CHILD_WORKER, CHILD_MAIN]);
    m
}

/// Per-process sorted per-thread counts from [`count_events`], checking the parent's main
/// thread has vtid == vpid (and the child's too).
pub fn by_process(counts: &BTreeMap<(u32, u32), u64>) -> BTreeMap<u32, Vec<u64>> {
    let mut m: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (&(pid, _tid), &n) in counts {
        m.entry(pid).or_default().push(n);
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}
