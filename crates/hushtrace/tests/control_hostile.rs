//! The control socket under slow, stuck and numerous clients (issue 18, point 2): the consumer
//! drains the rings on time whatever the clients do — one that drips its request a byte at a
//! time, many that connect and send nothing, one that asks for a large `status` and never
//! reads it — and the program still stops and exits.
//!
//! The stuck-reader scenario runs in a child process (this test binary run again with `ROLE`
//! set), so that a consumer blocked for good shows up as a bounded failure, not a hung test.

mod common;

use common::temp_dir;
use hushtrace_testsupport::{stdout_lines, wait_line, wait_or_kill};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

const ROLE: &str = "HUSHTRACE_CONTROL_HOSTILE_ROLE";
/// Threads of the program whose `status` is large.
const WIDE_THREADS: usize = 4000;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Not a test of its own: the traced program of `wide_status_that_is_never_read_...` runs this.
#[test]
fn role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    assert_eq!(role, "wide");
    let out = PathBuf::from(std::env::var("OUT").unwrap());
    let go = PathBuf::from(std::env::var("GO").unwrap());
    let session = hushtrace::Session::builder()
        .output_dir(&out)
        .subbuf_size(4096)
        .num_subbufs(2)
        .read_timer(Duration::from_millis(10))
        .start()
        .expect("start");
    // WIDE_THREADS threads, each with one event, alive until the test says go: they block on
    // a gate this thread holds (no polling: 4,000 threads waking every few ms would swamp a
    // two-core machine), and this thread alone watches for the go file, for at most 5 min (an
    // orphaned program, whose test died, still ends).
    let gate = std::sync::Arc::new(std::sync::RwLock::new(()));
    let closed = gate.write().unwrap();
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut threads = Vec::new();
    for i in 0..WIDE_THREADS {
        let (tx, gate) = (ready_tx.clone(), gate.clone());
        threads.push(
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    hushtrace::event!("wide", "hello", i = i as u64);
                    tx.send(()).unwrap();
                    drop(gate.read());
                })
                .expect("spawn"),
        );
    }
    for _ in 0..WIDE_THREADS {
        ready_rx.recv().unwrap();
    }
    println!("\nready");
    let waiting = Instant::now();
    while !go.exists() && waiting.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(closed);
    for t in threads {
        t.join().unwrap();
    }
    let stats = session.stop().expect("stop");
    println!(
        "\nresult emitted={} written={} discarded={}",
        WIDE_THREADS, stats.events_written, stats.events_discarded
    );
}

/// Bytes waiting to be read on `s`.
fn unread_bytes(s: &UnixStream) -> usize {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, to `n`.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) };
    assert_eq!(r, 0, "FIONREAD: {}", std::io::Error::last_os_error());
    n.max(0) as usize
}

/// `key=value` pairs of a result line.
fn values(line: &str) -> std::collections::BTreeMap<String, u64> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

/// One client drips its request a byte every 100 ms for 3 s, 40 more connect and send
/// nothing, while a thread emits about 50,000 events/s into a 512 KiB ring (it holds less
/// than half a second of them). Every event is accounted for and next to none is discarded:
/// the consumer never waited for a client. The dripping client gets an error answer (its
/// request took too long) and the socket still answers afterwards.
#[test]
fn a_dripping_client_and_idle_clients_do_not_stall_the_drain() {
    let _g = serial();
    let dir = temp_dir("ctl-drip");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(64 * 1024)
        .num_subbufs(8)
        .read_timer(Duration::from_millis(10))
        .start()
        .unwrap();
    let pid = std::process::id();
    let path = hushtrace::control::socket_path(pid).unwrap();
    let drip_path = path.clone();
    let (connected_tx, connected) = std::sync::mpsc::channel();
    let dripper = std::thread::spawn(move || {
        let mut c = UnixStream::connect(&drip_path).unwrap();
        connected_tx.send(()).unwrap();
        // Dripping for 3 s, past the server's request deadline, is the scenario.
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(3) {
            if c.write_all(b"s").is_err() {
                break; // dropped by the server
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        answer
    });
    // The dripping client is served first, then the idle ones come.
    connected.recv().unwrap();
    let idle: Vec<UnixStream> = (0..40)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    let mut emitted = 0u64;
    let started = Instant::now();
    let mut pinged = None;
    while started.elapsed() < Duration::from_secs(3) {
        for _ in 0..500 {
            hushtrace::event!("drip", "ev", seq = emitted);
            emitted += 1;
        }
        if pinged.is_none() && started.elapsed() > Duration::from_millis(1500) {
            // On a thread: a stalled consumer must not stall the emitting loop.
            pinged = Some(std::thread::spawn(move || {
                hushtrace::control::request(pid, "ping")
            }));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let answer = dripper.join().unwrap();
    let ping = pinged.unwrap().join().unwrap();
    drop(idle);
    let stats = session.stop().unwrap();
    assert_eq!(
        stats.events_written + stats.events_discarded,
        emitted,
        "events unaccounted for"
    );
    assert!(
        stats.events_discarded * 100 <= emitted,
        "{} of {emitted} events discarded: the consumer was held up by the clients",
        stats.events_discarded
    );
    assert!(
        answer.contains("\"ok\":false") && answer.contains("no complete request within"),
        "the dripping client's answer: {answer:?}"
    );
    let ping = ping.expect("ping while the clients were connected");
    assert!(ping.contains("\"ok\":true"), "{ping}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 100 clients of the process's own user connect and send nothing (more than the
/// `MAX_CLIENTS` served at once): `ctl status` is still answered because a new client of the
/// owner makes room by dropping the one idle longest, which is told why. (Before, it got
/// "busy" at once until the idle ones timed out.)
#[test]
fn idle_clients_make_room_for_the_owner() {
    let _g = serial();
    let dir = temp_dir("ctl-cap");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .read_timer(Duration::from_millis(10))
        .start()
        .unwrap();
    let pid = std::process::id();
    let path = hushtrace::control::socket_path(pid).unwrap();
    let idle: Vec<UnixStream> = (0..100)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    let a = hushtrace::control::request(pid, "status").unwrap();
    assert!(a.contains("\"ok\":true"), "{a}");
    // The clients dropped to make room were told why.
    let mut told = 0;
    for mut c in idle {
        c.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 512];
        if let Ok(n) = c.read(&mut buf) {
            let line = String::from_utf8_lossy(&buf[..n]);
            if line.contains("dropped: idle for") {
                told += 1;
            }
        }
    }
    assert!(told >= 1, "no idle client was told it was dropped");
    session.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program with 4,000 threads: a client asks for `status` (an answer of some 300 KB, more
/// than a socket buffer) and never reads it, 100 more connect and send nothing. The program
/// still drains every event, stops and exits (bounded by a generous 60 s: before, the
/// consumer blocked for good writing the answer and the program never exited).
#[test]
fn a_large_status_never_read_and_idle_clients_do_not_block_exit() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let _g = serial();
    let out = temp_dir("ctl-wide");
    let go = out.with_extension("go");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "role", "--nocapture", "--test-threads=1"])
        .env(ROLE, "wide")
        .env("OUT", &out)
        .env("GO", &go)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("HUSHTRACE_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().expect("run the traced program");
    let rx = stdout_lines(&mut child);
    wait_line(&rx, "ready", Duration::from_secs(120));
    let path = hushtrace::control::socket_path(child.id()).unwrap();
    let mut stuck = UnixStream::connect(&path).unwrap();
    stuck.write_all(b"status\n").unwrap();
    let idle: Vec<UnixStream> = (0..100)
        .filter_map(|_| UnixStream::connect(&path).ok())
        .collect();
    // The server has taken the request once its answer starts to arrive (it fills the socket
    // buffer: the rest waits for a read that never comes).
    let deadline = Instant::now() + Duration::from_secs(60);
    while unread_bytes(&stuck) == 0 {
        assert!(
            Instant::now() < deadline,
            "the status request was not answered"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(&go, b"").unwrap();
    let Some(status) = wait_or_kill(&mut child, Duration::from_secs(60)) else {
        panic!("the program did not exit within 60 s: a client that never reads blocks it");
    };
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    assert!(
        status.success(),
        "the traced program failed ({status}):\n{err}"
    );
    let v = values(&wait_line(&rx, "result ", Duration::from_secs(5)));
    assert_eq!(v["written"] + v["discarded"], v["emitted"], "{v:?}");
    assert_eq!(v["discarded"], 0, "{v:?}");
    drop((stuck, idle));
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&go);
    assert!(
        !Path::new(&path).exists(),
        "the socket outlived the program"
    );
}
