//! Sessions streamed to a real `lttng-relayd` (LTTng 2.13): exact per-thread counts with the
//! right vpid/vtid in the relay's copy (fork child included), a live viewer that sees events
//! before the program ends (an idle thread's too: the flush), a relay killed mid-run (no hang,
//! losses counted exactly, a no-syscall thread under seccomp unaffected).
//!
//! Each traced program is this test binary run again with `ROLE` set (a session is process
//! wide, and one scenario forks).

mod common;

use common::temp_dir;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROLE: &str = "HUSHTRACE_RELAY_TEST_ROLE";
const HOST: &str = "hushhost";
const PARENT_MAIN: u64 = 3000;
const PARENT_WORKER: u64 = 2000;
const CHILD_MAIN: u64 = 1500;
const CHILD_WORKER: u64 = 700;
/// Events the killed-relay role traces after the relay was killed (several packets).
const AFTER_KILL: u64 = 200_000;

static SERIAL: Mutex<()> = Mutex::new(());

// ------------------------------------------------------------------------------------------
// The relay daemon

use hushtrace_testsupport::{
    babeltrace, count_per_thread, free_port, stdout_lines, wait_line, wait_or_kill, Relayd,
};

/// Whether a data stream file (`stream_<n>`) below `dir` holds data.
fn has_stream_data(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let path = e.path();
            if path.is_dir() {
                return has_stream_data(&path);
            }
            let name = e.file_name().to_string_lossy().into_owned();
            // (Not the index files, `index/stream_<n>.idx`, which have a header from the start.)
            name.starts_with("stream_")
                && !name.ends_with(".idx")
                && e.metadata().is_ok_and(|m| m.len() > 0)
        })
}

/// Where the relay writes session `session` of this test's host name.
fn session_dir(relay: &Relayd, session: &str) -> PathBuf {
    relay.session_dir(HOST, session)
}

// ------------------------------------------------------------------------------------------
// Helpers

/// Runs this test binary as the traced program of `role`, with `env`; returns the child with
/// piped stdout.
fn spawn_role(role: &str, env: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "role", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("HUSHTRACE_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("run the traced program")
}

/// Waits for a child to exit, at most `timeout` (then kills it and fails: a hang).
fn wait_exit(child: &mut Child, timeout: Duration, what: &str) {
    let Some(s) = wait_or_kill(child, timeout) else {
        panic!("{what} hung (still running after {timeout:?})");
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(s.success(), "{what} failed ({s}):\n{err}");
}

/// Copies the metadata and stream files of every process directory under `root` to a fresh
/// directory; returns it.
fn copy_streams(root: &Path) -> PathBuf {
    let to = temp_dir("relay-copy");
    for p in std::fs::read_dir(root).unwrap().map(|e| e.unwrap().path()) {
        if !p.is_dir() {
            continue;
        }
        let d = to.join(p.file_name().unwrap());
        std::fs::create_dir_all(&d).unwrap();
        for f in std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()) {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name == "metadata" || name.starts_with("stream_") {
                std::fs::copy(&f, d.join(&name)).unwrap();
            }
        }
    }
    to
}

// ------------------------------------------------------------------------------------------
// The traced programs

/// Not a test of its own: the traced programs run this (see [`ROLE`]).
#[test]
fn role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let out = PathBuf::from(std::env::var("OUT").unwrap());
    let relay = std::env::var("RELAY").unwrap();
    let builder = hushtrace::Session::builder()
        .output_dir(&out)
        .relay(&relay)
        .relay_host_name(HOST)
        .relay_session_name(&role)
        .relay_only(std::env::var_os("RELAY_ONLY").is_some())
        .subbuf_size(16 * 1024);
    match role.as_str() {
        "exact" => role_exact(builder),
        "live" => role_live(builder),
        "killed" => role_killed(builder),
        other => panic!("unknown role {other}"),
    }
}

fn emit(n: u64) {
    for seq in 0..n {
        hushtrace::event!("relaytest", "ev", seq = seq);
    }
}

fn role_exact(builder: hushtrace::SessionBuilder) {
    let session = builder.start().expect("start");
    let w = std::thread::spawn(|| emit(PARENT_WORKER));
    emit(PARENT_MAIN);
    w.join().unwrap();
    // SAFETY: fork while the only other thread (the consumer) holds no lock we need: the
    // tracer's atfork handlers make it safe; the child traces, then exits (its handler
    // flushes its trace and closes its relay session).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let w = std::thread::spawn(|| emit(CHILD_WORKER));
        emit(CHILD_MAIN);
        w.join().unwrap();
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    let stats = session.stop().expect("stop");
    assert_eq!(stats.events_discarded, 0);
    println!("pids {} {pid}", std::process::id());
}

fn role_live(builder: hushtrace::SessionBuilder) {
    let session = builder
        .flush_interval(Duration::from_millis(500))
        .start()
        .expect("start");
    let go = std::env::var("GO").unwrap();
    let attached = std::env::var("ATTACHED").unwrap();
    // A thread that records one event once the viewer is attached (a live viewer starts at
    // the newest data), then idles until the end: its packet never fills.
    let (tx, rx) = std::sync::mpsc::channel();
    let idle = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !Path::new(&attached).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        hushtrace::event!("relaytest", "idle", seq = 1u64);
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        while !Path::new(&std::env::var("GO").unwrap()).exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    println!("\nready");
    let mut told = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seq = 0u64;
    while !Path::new(&go).exists() && Instant::now() < deadline {
        hushtrace::event!("relaytest", "tick", seq = seq);
        seq += 1;
        if !told {
            if let Ok(tid) = rx.try_recv() {
                println!("\nidle {tid}");
                told = true;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    idle.join().unwrap();
    session.stop().expect("stop");
}

fn role_killed(builder: hushtrace::SessionBuilder) {
    let session = builder.num_subbufs(4).start().expect("start");
    let stop = Arc::new(AtomicBool::new(false));
    let rt_emitted = Arc::new(AtomicU64::new(0));
    let before = hushtrace::verify::trapped_syscalls();
    let (s2, e2) = (stop.clone(), rt_emitted.clone());
    let rt = std::thread::spawn(move || {
        hushtrace::set_thread_no_syscall();
        hushtrace::verify::trap_syscalls_on_this_thread().expect("seccomp");
        let mut n = 0u64;
        while !s2.load(Ordering::Relaxed) {
            hushtrace::event!("relaytest", "rt", seq = n);
            n += 1;
            for _ in 0..2000 {
                std::hint::spin_loop();
            }
        }
        e2.store(n, Ordering::SeqCst);
        // SAFETY: no value on this thread's stack relies on its destructor running.
        unsafe { hushtrace::verify::exit_thread() };
    });
    println!("ready");
    // Traces until the test has killed the relay (it says so with the file KILLED), then
    // AFTER_KILL more events: packets the dead relay cannot get.
    let killed = std::env::var("KILLED").unwrap();
    let watchdog = Instant::now() + Duration::from_secs(120);
    let mut n = 0u64;
    let mut last = None;
    while last.is_none_or(|last| n < last) {
        hushtrace::event!("relaytest", "main", seq = n);
        n += 1;
        if n.is_multiple_of(64) {
            // Pacing: the volume stays modest (the rings discard little).
            std::thread::sleep(Duration::from_micros(200));
            if last.is_none() && Path::new(&killed).exists() {
                last = Some(n + AFTER_KILL);
            }
            assert!(Instant::now() < watchdog, "the test never killed the relay");
        }
    }
    stop.store(true, Ordering::Relaxed);
    hushtrace::verify::join_raw(rt);
    let traps = hushtrace::verify::trapped_syscalls() - before;
    let stats = session.stop().expect("stop");
    println!(
        "result emitted={} written={} discarded={} traps={traps}",
        n + rt_emitted.load(Ordering::SeqCst),
        stats.events_written,
        stats.events_discarded
    );
}

// ------------------------------------------------------------------------------------------
// The tests

/// A session with two threads and a forked child (two threads) streamed to the relay: the
/// relay's copy reads back with babeltrace2 without a diagnostic, with exactly the events of
/// each thread under the right vpid/vtid, and equals the local trace event for event.
#[test]
fn relay_copy_has_exact_per_thread_counts_and_the_fork_child() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let relay = Relayd::start();
    let out = temp_dir("relay-exact");
    let counts = run_exact(&relay, &out, false);
    let local = babeltrace(&out);
    assert_eq!(
        count_per_thread(&local, "relaytest:ev"),
        counts,
        "relay copy != local trace"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Relay-only (`relay_only(true)`, the relay instead of the local directory): the relay gets
/// every event of every thread and process exactly, the local directory only the metadata and
/// statistics (no stream file), and the statistics count what the relay got.
#[test]
fn relay_only_session_streams_everything_and_writes_no_local_streams() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let relay = Relayd::start();
    let out = temp_dir("relay-only");
    let counts = run_exact(&relay, &out, true);
    let mut dirs = 0;
    let mut written = 0;
    for e in std::fs::read_dir(&out).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            dirs += 1;
            assert!(path.join("metadata").is_file(), "{}", path.display());
            let streams: Vec<_> = std::fs::read_dir(&path)
                .unwrap()
                .flatten()
                .filter(|f| f.file_name().to_string_lossy().starts_with("stream_"))
                .map(|f| f.file_name())
                .collect();
            assert!(streams.is_empty(), "local stream files: {streams:?}");
        } else if path.to_string_lossy().ends_with(".stats.json") {
            let j = std::fs::read_to_string(&path).unwrap();
            let st = hushtrace_ctf::stats::ProcessStats::parse(&j)
                .unwrap_or_else(|| panic!("bad stats file {j}"));
            assert_eq!(st.discarded, 0, "{j}");
            written += st.written;
        }
    }
    assert_eq!(dirs, 2, "parent and child trace directories");
    assert_eq!(written, counts.values().sum::<u64>(), "stats != relay copy");
    let _ = std::fs::remove_dir_all(&out);
}

/// Runs the `exact` role (two threads, a forked child with two threads) streaming to `relay`
/// and checks the relay's copy: exact per-process, per-thread counts under the right
/// vpid/vtid. Returns the counts per (vpid, vtid).
fn run_exact(relay: &Relayd, out: &Path, relay_only: bool) -> BTreeMap<(u32, u32), u64> {
    let mut env = vec![("OUT", out.display().to_string()), ("RELAY", relay.url())];
    if relay_only {
        env.push(("RELAY_ONLY", "1".into()));
    }
    let mut p = spawn_role("exact", &env);
    let rx = stdout_lines(&mut p);
    let pids = wait_line(&rx, "pids ", Duration::from_secs(60));
    wait_exit(&mut p, Duration::from_secs(60), "the traced program");
    let mut it = pids.split_whitespace().map(|p| p.parse::<u32>().unwrap());
    let (parent, child) = (it.next().unwrap(), it.next().unwrap());

    let remote = babeltrace(&session_dir(relay, "exact"));
    let counts = count_per_thread(&remote, "relaytest:ev");
    let mut by_pid: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (&(pid, _), &n) in &counts {
        by_pid.entry(pid).or_default().push(n);
    }
    for v in by_pid.values_mut() {
        v.sort();
    }
    let mut want = BTreeMap::new();
    want.insert(parent, vec![PARENT_WORKER, PARENT_MAIN]);
    want.insert(child, vec![CHILD_WORKER, CHILD_MAIN]);
    assert_eq!(by_pid, want, "per-process, per-thread counts on the relay");
    // the fork child's threads are its own (the forking thread continues with the child's
    // tid), none of the parent's
    assert!(counts
        .keys()
        .filter(|k| k.0 == child)
        .all(|k| !counts.contains_key(&(parent, k.1))));
    // the child's streams arrived under their own path
    assert!(session_dir(relay, "exact")
        .join(child.to_string())
        .join("metadata")
        .is_file());
    counts
}

/// A live viewer attached while the program runs sees its events, including the single event
/// of a thread that then went idle (its packet never fills: the flush ships it), before the
/// program ends; the local stream files have it too.
#[test]
fn live_viewer_sees_an_idle_threads_event_before_the_end() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let relay = Relayd::start();
    let out = temp_dir("relay-live");
    let go = out.with_extension("go");
    let attached = out.with_extension("attached");
    let mut p = spawn_role(
        "live",
        &[
            ("OUT", out.display().to_string()),
            ("RELAY", relay.url()),
            ("GO", go.display().to_string()),
            ("ATTACHED", attached.display().to_string()),
        ],
    );
    let rx = stdout_lines(&mut p);
    wait_line(&rx, "ready", Duration::from_secs(30));
    // A viewer attaching to a session without data streams sees nothing (lttng-live): wait
    // until the relay lists the ticking thread's stream besides the metadata.
    let listing = format!("net://127.0.0.1:{}", relay.live);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = Command::new("babeltrace2")
            .args(["--input-format=lttng-live", &listing])
            .output()
            .expect("babeltrace2");
        let text = String::from_utf8_lossy(&o.stdout);
        if text.contains("/live (") && !text.contains(" 1 stream(s)") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the relay never listed a data stream: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("net://127.0.0.1:{}/host/{HOST}/live", relay.live);
    let mut viewer = Command::new("babeltrace2")
        .args(["--input-format=lttng-live", &url])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(out.with_extension("viewer.err")).unwrap())
        .spawn()
        .expect("babeltrace2");
    let vrx = stdout_lines(&mut viewer);
    // Attached once it shows the first tick; then the idle thread records its event.
    let mut ticks = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    while ticks == 0 && Instant::now() < deadline {
        if let Ok(l) = vrx.recv_timeout(Duration::from_millis(100)) {
            ticks += u64::from(l.contains("relaytest:tick"));
        }
    }
    std::fs::write(&attached, b"").unwrap();
    let tid: u32 = wait_line(&rx, "idle ", Duration::from_secs(30))
        .parse()
        .unwrap();
    let mut idle_seen = false;
    let deadline = Instant::now() + Duration::from_secs(40);
    while !(idle_seen && ticks >= 5) && Instant::now() < deadline {
        if let Ok(l) = vrx.recv_timeout(Duration::from_millis(100)) {
            if l.contains("relaytest:idle") {
                assert!(l.contains(&format!("vtid = {tid}")), "{l}");
                idle_seen = true;
            }
            if l.contains("relaytest:tick") {
                ticks += 1;
            }
        }
    }
    let running = p.try_wait().unwrap().is_none();
    // The local stream files have the idle thread's event as well, while the program runs
    // (read from a copy of the metadata and stream files: the running trace directory also
    // holds the `rings` pointer file).
    let local = babeltrace(&copy_streams(&out));
    std::fs::write(&go, b"").unwrap();
    wait_exit(&mut p, Duration::from_secs(30), "the traced program");
    let _ = viewer.kill();
    let _ = viewer.wait();
    let verr = std::fs::read_to_string(out.with_extension("viewer.err")).unwrap_or_default();
    let _ = std::fs::remove_file(out.with_extension("viewer.err"));
    assert!(ticks > 0, "the live viewer saw nothing: {verr}");
    assert!(
        running,
        "the program ended before the viewer saw its events"
    );
    assert!(
        idle_seen,
        "the live viewer did not see the idle thread's event ({ticks} ticks seen): {verr}"
    );
    assert!(ticks >= 5, "the live viewer saw only {ticks} tick events");
    assert_eq!(
        count_per_thread(&local, "relaytest:idle")
            .values()
            .sum::<u64>(),
        1,
        "the idle thread's event is not in the local stream files before the end"
    );
    // After the end: every event once, locally and on the relay.
    let local_all = babeltrace(&out);
    let remote_all = babeltrace(&session_dir(&relay, "live"));
    for name in ["relaytest:idle", "relaytest:tick"] {
        assert_eq!(
            count_per_thread(&local_all, name),
            count_per_thread(&remote_all, name),
            "{name}"
        );
    }
    assert_eq!(
        count_per_thread(&remote_all, "relaytest:idle")
            .values()
            .sum::<u64>(),
        1
    );
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&go);
    let _ = std::fs::remove_file(&attached);
}

/// The relay is killed while a normal thread and a no-syscall thread under a seccomp filter
/// trace: the program neither hangs nor fails, the no-syscall thread makes no system call,
/// every event is accounted for (written + discarded = emitted) and the local trace holds
/// every written event: the loss is the relay copy's only, and the program reports it.
#[test]
fn killed_relay_no_hang_exact_losses_no_syscalls() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut relay = Relayd::start();
    let out = temp_dir("relay-killed");
    let killed = out.with_extension("killed");
    let mut p = spawn_role(
        "killed",
        &[
            ("OUT", out.display().to_string()),
            ("RELAY", relay.url()),
            ("KILLED", killed.display().to_string()),
        ],
    );
    let rx = stdout_lines(&mut p);
    let mut stderr = p.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    wait_line(&rx, "ready", Duration::from_secs(30));
    // Killed mid-stream: once the relay has stored some of the trace.
    common::wait_until("the relay to store a packet", || {
        has_stream_data(&relay.traces())
    });
    relay.kill();
    std::fs::write(&killed, b"").unwrap();
    let result = wait_line(&rx, "result ", Duration::from_secs(60));
    wait_exit(&mut p, Duration::from_secs(30), "the traced program");
    let err = err.join().unwrap();
    let v: BTreeMap<&str, u64> = result
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    assert_eq!(v["traps"], 0, "the no-syscall thread made system calls");
    assert_eq!(
        v["written"] + v["discarded"],
        v["emitted"],
        "events unaccounted for: {result}"
    );
    assert!(
        err.contains("could not be streamed to the relay"),
        "no relay loss reported although the relay died: {result}\nstderr: {err:?}"
    );
    // (The rings may have discarded events, which babeltrace2 reports as warnings.)
    {
        let (local, _) = common::babeltrace_raw(&out);
        let in_trace = local
            .lines()
            .filter(|l| l.contains("relaytest:main") || l.contains("relaytest:rt"))
            .count() as u64;
        assert_eq!(in_trace, v["written"], "the local trace: {result}");
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&killed);
}

/// An unreachable relay at start: a clear error naming the address.
#[test]
fn unreachable_relay_is_a_clear_start_error() {
    let port = free_port(); // nothing listens there
    let out = temp_dir("relay-unreachable");
    let err = hushtrace::Session::builder()
        .output_dir(&out)
        .relay(&format!("net://127.0.0.1:{port}:{port}"))
        .start()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("127.0.0.1:{port}")) && msg.contains("lttng-relayd"),
        "{msg}"
    );
    let bad = hushtrace::Session::builder()
        .relay("tcp://nowhere")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(bad.contains("tcp://nowhere"), "{bad}");
    let _ = std::fs::remove_dir_all(&out);
}
