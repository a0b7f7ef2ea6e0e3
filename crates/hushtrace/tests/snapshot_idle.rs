//! A snapshot holds the newest events of every thread, idle or not (issue 18, point 1): a
//! thread that logs and then blocks keeps its packet open, and the snapshot must still hold
//! every event it completed before the snapshot was taken. Checked with babeltrace2 and with
//! hushtrace's own reader, for `hushtrace::snapshot()` and for the control socket's
//! `snapshot` request.

mod common;

use common::{babeltrace, reader_cycles, temp_dir};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// Events of class `idle:<name>` per thread in the snapshot of `dir` (a `<n>/` directory
/// holding `<pid>/`), as `seq` values: with babeltrace2 when it is there, and always with the
/// reader (whose count must agree).
fn seqs(snap: &std::path::Path, name: &str) -> Vec<i128> {
    let full = format!("idle:{name}");
    let ours = reader_cycles(snap)
        .into_iter()
        .filter(|(_, _, n)| *n == full)
        .count();
    let s: Vec<i128> = babeltrace(snap, false)
        .iter()
        .filter(|e| e.name == full)
        .map(|e| e.int("seq"))
        .collect();
    assert_eq!(s.len(), ours, "babeltrace2 and the reader agree on {full}");
    s
}

/// A thread that records `n` events of class `idle:<name>` (seq 0..n), says so, and blocks
/// until told to finish.
fn sleeper(
    name: &'static str,
    n: u64,
    ready: mpsc::Sender<()>,
) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        for seq in 0..n {
            match name {
                "few" => hushtrace::event!("idle", "few", seq = seq),
                _ => hushtrace::event!("idle", "many", seq = seq),
            }
        }
        ready.send(()).unwrap();
        // Blocked right after the last event, as a thread that logged an error and waits.
        let _ = rx.recv();
    });
    (tx, h)
}

fn check_snapshot(path: &std::path::Path, few: u64, many: u64) {
    let snap = path.parent().unwrap();
    let s = seqs(snap, "few");
    assert_eq!(
        s.len() as u64,
        few,
        "the thread that went idle within its first packet: all its events"
    );
    assert!(s.iter().enumerate().all(|(i, &v)| v == i as i128), "{s:?}");
    let s = seqs(snap, "many");
    // Overwrite mode keeps the newest packets: a contiguous run ending with the last event.
    assert!(!s.is_empty(), "no event of the busy thread that went idle");
    assert_eq!(
        *s.last().unwrap(),
        many as i128 - 1,
        "ends with the last event"
    );
    assert!(s.windows(2).all(|w| w[1] == w[0] + 1), "contiguous");
}

#[test]
fn snapshot_holds_every_complete_event_of_threads_that_went_idle() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("snapshot-idle");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .mode(hushtrace::Mode::Overwrite)
        .subbuf_size(4096)
        .num_subbufs(8)
        .read_timer(Duration::from_millis(5))
        .start()
        .unwrap();
    // `few` stays inside its first packet; `many` fills several (fewer than the ring holds,
    // so nothing is overwritten) and leaves its last one open.
    let (few, many) = (7u64, 1_500u64);
    let (ready_tx, ready) = mpsc::channel();
    let (stop_a, a) = sleeper("few", few, ready_tx.clone());
    let (stop_b, b) = sleeper("many", many, ready_tx);
    ready.recv().unwrap();
    ready.recv().unwrap();

    // The API, from a thread that recorded nothing itself.
    let path = hushtrace::snapshot()
        .unwrap()
        .wait(Duration::from_secs(10))
        .unwrap();
    check_snapshot(&path, few, many);

    // The control socket (`hushtrace ctl PID snapshot DIR`), threads still blocked.
    let out = temp_dir("snapshot-idle-ctl");
    let answer =
        hushtrace::control::request(std::process::id(), &format!("snapshot {}", out.display()))
            .unwrap();
    assert!(answer.contains("\"ok\":true"), "{answer}");
    let pid_dir = out.join(std::process::id().to_string());
    assert!(pid_dir.join("metadata").is_file(), "{answer}");
    check_snapshot(&pid_dir, few, many);

    stop_a.send(()).unwrap();
    stop_b.send(()).unwrap();
    a.join().unwrap();
    b.join().unwrap();
    session.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
}
