//! Shared helpers of the integration tests: run the real `babeltrace2` on a trace and parse its
//! text output, make temporary directories.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One event as `babeltrace2 --clock-seconds` prints it.
#[derive(Clone, Debug)]
pub struct BtEvent {
    /// Wall-clock time in ns since the Unix epoch.
    pub ts_ns: i128,
    /// `category:name`.
    pub name: String,
    pub vpid: u32,
    pub vtid: u32,
    pub procname: String,
    /// Payload fields, values as printed (strings without quotes).
    pub fields: BTreeMap<String, String>,
}

impl BtEvent {
    /// A field parsed as an integer.
    pub fn int(&self, k: &str) -> i128 {
        self.fields
            .get(k)
            .unwrap_or_else(|| panic!("no field {k} in {self:?}"))
            .parse()
            .unwrap_or_else(|_| panic!("field {k} not an integer in {self:?}"))
    }
}

/// Runs `babeltrace2 --clock-seconds <dir>`; returns its stdout and stderr. Panics (fails the
/// test) when babeltrace2 is missing: the suite requires it (`.ci/run` installs it).
pub fn babeltrace_raw(dir: &Path) -> (String, String) {
    run_babeltrace("--clock-seconds", dir)
}

/// Runs `babeltrace2 <clock_flag> <dir>`: its stdout and stderr; fails when it fails or is
/// missing.
fn run_babeltrace(clock_flag: &str, dir: &Path) -> (String, String) {
    let out = match Command::new("babeltrace2")
        .arg(clock_flag)
        .arg(dir)
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!(
            "babeltrace2 is required for this test ({e}); install it (apt-get install babeltrace2)"
        ),
    };
    let stdout = String::from_utf8(out.stdout).expect("babeltrace2 output is UTF-8");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "babeltrace2 failed on {}: {stderr}",
        dir.display()
    );
    (stdout, stderr)
}

/// Runs babeltrace2 and parses every event. Fails on any warning or error babeltrace2 prints,
/// unless `allow_warnings` (discarded-event notices are warnings).
pub fn babeltrace(dir: &Path, allow_warnings: bool) -> Vec<BtEvent> {
    let (stdout, stderr) = babeltrace_raw(dir);
    if !allow_warnings {
        assert!(
            stderr.trim().is_empty(),
            "babeltrace2 printed diagnostics: {stderr}"
        );
    }
    stdout
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| parse_line(l).unwrap_or_else(|| panic!("unparsable line: {l}")))
        .collect()
}

fn parse_fields(s: &str) -> BTreeMap<String, String> {
    // `a = 1, b = "x, y", c = 2.5`
    let mut m = BTreeMap::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let eq = match rest.find(" = ") {
            Some(i) => i,
            None => break,
        };
        let key = rest[..eq].trim().to_string();
        let after = &rest[eq + 3..];
        let (val, next) = if let Some(stripped) = after.strip_prefix('"') {
            let end = stripped.find('"').unwrap_or(stripped.len());
            (
                stripped[..end].to_string(),
                stripped.get(end + 1..).unwrap_or(""),
            )
        } else {
            let end = after.find(", ").unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        m.insert(key, val);
        rest = next.trim_start_matches(", ").trim();
    }
    m
}

/// Parses one `babeltrace2 --clock-seconds` line.
pub fn parse_line(l: &str) -> Option<BtEvent> {
    let close = l.find(']')?;
    let ts = &l[1..close];
    let (secs, frac) = ts.split_once('.')?;
    let ts_ns = secs.parse::<i128>().ok()? * 1_000_000_000 + frac.parse::<i128>().ok()?;
    // after "(+delta) host:proc:(pid) "
    let rest = &l[close + 1..];
    let rest = &rest[rest.find(") ")? + 2..];
    let rest = &rest[rest.find(") ")? + 2..];
    let colon = rest.find(": ")?;
    let name = rest[..colon].to_string();
    let body = &rest[colon + 2..];
    // `{ ctx }, { fields }` or `{ ctx }`
    let ctx_end = body.find('}')?;
    let ctx = parse_fields(&body[1..ctx_end]);
    let fields = match body[ctx_end..].find('{') {
        Some(i) => {
            let f = &body[ctx_end + i + 1..];
            parse_fields(&f[..f.rfind('}')?])
        }
        None => BTreeMap::new(),
    };
    Some(BtEvent {
        ts_ns,
        name,
        vpid: ctx.get("vpid")?.parse().ok()?,
        vtid: ctx.get("vtid")?.parse().ok()?,
        procname: ctx.get("procname")?.clone(),
        fields,
    })
}

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    hushtrace_testsupport::fresh_temp_path("hushtrace-test", tag)
}

/// Runs an example binary built by cargo for these tests (`cargo test` builds examples).
pub fn example_path(name: &str) -> PathBuf {
    hushtrace_testsupport::test_profile_dir()
        .join("examples")
        .join(name)
}

/// A program of the unpublished `hushtrace-testbins` crate (the test-only programs these tests
/// run as subprocesses). Cargo builds only this package's targets for its tests, so the first
/// call in a test process runs `cargo build -p hushtrace-testbins --bins` with this test
/// binary's profile and target directory: a no-op when up to date, and never a stale program
/// after a runtime change.
pub fn testbin_path(name: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let p = DIR
        .get_or_init(|| {
            hushtrace_testsupport::cargo_build(
                &hushtrace_testsupport::test_profile_dir(),
                "hushtrace-testbins",
                hushtrace_testsupport::Artifact::Bins,
            )
        })
        .join(name);
    assert!(
        p.exists(),
        "{} missing after building hushtrace-testbins",
        p.display()
    );
    p
}

/// Runs `test_env` (`crates/hushtrace-testbins`) with `<events>` after clearing every
/// `HUSHTRACE_*` variable and setting `vars`; asserts it exits 0
/// (a bad configuration must not stop the program) and returns its stdout lines.
pub fn run_test_env(vars: &[(&str, &str)], events: u64) -> Vec<String> {
    let exe = testbin_path("test_env");
    let mut cmd = Command::new(&exe);
    cmd.arg(events.to_string());
    for (k, _) in std::env::vars() {
        if k.starts_with("HUSHTRACE_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(vars.iter().copied());
    let out = cmd.output().expect("run test_env");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "test_env must keep running and exit 0 ({:?}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

#[test]
fn parses_a_babeltrace_line() {
    let l = r#"[1795992268.032900318] (+?.?????????) vm:count:(7369) bench:tick: { vpid = 7369, vtid = 7371, procname = "count", pthread_id = 1 }, { thread = 0, s = "a, b", seq = 12 }"#;
    let e = parse_line(l).unwrap();
    assert_eq!(e.ts_ns, 1_795_992_268_032_900_318);
    assert_eq!(e.name, "bench:tick");
    assert_eq!((e.vpid, e.vtid), (7369, 7371));
    assert_eq!(e.procname, "count");
    assert_eq!(e.int("seq"), 12);
    assert_eq!(e.fields["s"], "a, b");
}

/// Every thread's stack of process `pid` (`gdb -batch`), for the message of a test that found
/// it hung; says so if gdb is missing.
pub fn thread_stacks(pid: i32) -> String {
    Command::new("gdb")
        .args([
            "-p",
            &pid.to_string(),
            "-batch",
            "-ex",
            "thread apply all bt",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| format!("(no gdb: {e})"))
}

/// One event's raw clock value (cycles) with the event, as `babeltrace2 --clock-cycles` prints
/// it: `(cycles, event)`, in output order (`ts_ns` of the event is 0). Fails on any diagnostic
/// unless `allow_warnings`.
pub fn babeltrace_cycles(dir: &Path, allow_warnings: bool) -> Vec<(u64, BtEvent)> {
    let (stdout, stderr) = run_babeltrace("--clock-cycles", dir);
    if !allow_warnings {
        assert!(stderr.trim().is_empty(), "babeltrace2 printed: {stderr}");
    }
    stdout
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let close = l.find(']').unwrap();
            let cycles = l[1..close].parse::<u64>().unwrap_or_else(|_| panic!("{l}"));
            // The rest of the line is as with --clock-seconds.
            let e = parse_line(&format!("[0.0{}", &l[close..]))
                .unwrap_or_else(|| panic!("unparsable line: {l}"));
            (cycles, e)
        })
        .collect()
}

/// `(vtid, cycles, name)` of every event of the session in `dir` as hushtrace's own reader
/// decodes them, stream by stream in file order.
pub fn reader_cycles(dir: &Path) -> Vec<(u32, u64, String)> {
    let s = hushtrace_ctf::reader::Session::open(dir).expect("open the trace");
    let mut out = Vec::new();
    for t in &s.traces {
        for path in &t.streams {
            let mut r = hushtrace_ctf::reader::StreamReader::open(t.desc.clone(), path)
                .expect("open a stream");
            while r.advance().expect("every event decodes") {
                let e = r.current().unwrap();
                out.push((e.packet.vtid, e.timestamp, e.class.name.clone()));
            }
        }
    }
    out
}

/// Checks that babeltrace2 and hushtrace's reader give every event the same clock value in
/// cycles, stream by stream (by vtid), and that each stream's values never go backwards.
/// Returns the number of events compared.
pub fn assert_same_cycles(dir: &Path, allow_warnings: bool) -> usize {
    let bt = babeltrace_cycles(dir, allow_warnings);
    let mut ours: BTreeMap<u32, Vec<(u64, String)>> = BTreeMap::new();
    for (vtid, c, name) in reader_cycles(dir) {
        ours.entry(vtid).or_default().push((c, name));
    }
    let mut theirs: BTreeMap<u32, Vec<(u64, String)>> = BTreeMap::new();
    for (c, e) in bt {
        theirs.entry(e.vtid).or_default().push((c, e.name));
    }
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "threads"
    );
    let mut n = 0;
    for (vtid, o) in &ours {
        let t = &theirs[vtid];
        assert_eq!(o.len(), t.len(), "vtid {vtid}: event counts");
        for (i, (a, b)) in o.iter().zip(t).enumerate() {
            assert_eq!(
                a, b,
                "vtid {vtid}, event {i}: hushtrace reader vs babeltrace2"
            );
        }
        assert!(
            o.windows(2).all(|w| w[0].0 <= w[1].0),
            "vtid {vtid}: timestamps go backwards"
        );
        n += o.len();
    }
    n
}

/// What a scenario closure gives its forked child's exit: 0 and no message when it returns
/// `Ok`, 1 and its message for `Err`, 2 and the panic's message when it panics.
pub fn scenario_exit(f: impl FnOnce() -> Result<(), String>) -> (i32, String) {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => (0, String::new()),
        Ok(Err(m)) => (1, m),
        Err(p) => (
            2,
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into()),
        ),
    }
}

/// Runs `child` in a forked child process, which writes the message `child` returns to a pipe
/// and `_exit`s with its code (never returning into the test harness); returns the child's
/// wait status and message. Kills the child and fails the test when it has not ended within
/// `timeout` (a hang).
pub fn run_forked(timeout: Duration, child: impl FnOnce() -> (i32, String)) -> (i32, String) {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array we pass.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only runs `child` and then `_exit`s; it never returns into the test
    // harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: closing the read end in the child.
        unsafe { libc::close(fds[0]) };
        let (code, msg) = child();
        // SAFETY: writing our message to the pipe, then leaving without running the harness's
        // exit handlers.
        unsafe {
            libc::write(fds[1], msg.as_ptr() as *const libc::c_void, msg.len());
            libc::_exit(code);
        }
    }
    // SAFETY: closing the write end in the parent.
    unsafe { libc::close(fds[1]) };
    let t0 = Instant::now();
    let status = loop {
        let mut st = 0;
        // SAFETY: polling our own child.
        if unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) } == pid {
            break st;
        }
        if t0.elapsed() > timeout {
            // SAFETY: killing our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: reaping it.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            panic!("the scenario did not finish within {timeout:?} (hang)");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let mut msg = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reading into our buffer from the pipe's read end.
        let n = unsafe { libc::read(fds[0], buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n <= 0 {
            break;
        }
        msg.extend_from_slice(&buf[..n as usize]);
    }
    // SAFETY: closing our read end.
    unsafe { libc::close(fds[0]) };
    (status, String::from_utf8_lossy(&msg).into_owned())
}

/// One page of anonymous memory shared with forked children, zeroed, never unmapped (leaked
/// for the test's lifetime).
pub fn shared_page() -> *mut libc::c_void {
    // SAFETY: an anonymous shared mapping of one page, no address hint; checked against
    // MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p
}

/// A counter in memory shared with forked children ([`shared_page`]), zero at first.
pub fn shared_counter() -> &'static std::sync::atomic::AtomicU64 {
    // SAFETY: the page is never unmapped; AtomicU64 has no invalid bit patterns and the page
    // is zeroed and aligned.
    unsafe { &*(shared_page() as *const std::sync::atomic::AtomicU64) }
}

/// Whether the file system of `dir` (created if missing) takes `O_DIRECT`, set with `fcntl` as
/// the runtime does (`SessionBuilder::direct_io`).
pub fn takes_direct(dir: &Path) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(".probe");
    let f = std::fs::File::create(&p).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor we own.
    let ok = unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_DIRECT) == 0
    };
    drop(f);
    let _ = std::fs::remove_file(&p);
    ok
}

/// How long [`wait_for`] waits before it gives up: a watchdog against a hang, not a timing
/// assertion (the conditions the tests wait for hold within milliseconds on an idle machine).
pub const WATCHDOG: Duration = Duration::from_secs(60);

/// Polls `cond` every millisecond until it holds; an error naming `what` if it does not within
/// [`WATCHDOG`].
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + WATCHDOG;
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("gave up after {WATCHDOG:?} waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// [`wait_for`], failing the test with its message.
pub fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    if let Err(e) = wait_for(what, cond) {
        panic!("{e}");
    }
}

/// The stream files (`stream_<n>`) of trace directory `dir` that hold data: how many, and
/// their bytes in all.
pub fn stream_files(dir: &Path) -> (usize, u64) {
    let mut n = 0;
    let mut bytes = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
        if e.file_name().to_string_lossy().starts_with("stream_") && len > 0 {
            n += 1;
            bytes += len;
        }
    }
    (n, bytes)
}
