//! Helpers shared by hushtrace's integration tests: a real `lttng-relayd` (LTTng 2.13) on free
//! loopback ports with a private output directory, killed and reaped on drop; building the
//! workspace's test programs beside a test ([`cargo_build`]); reading a child's output line by
//! line ([`stdout_lines`], [`wait_line`]); counting babeltrace2's events per thread; the Python
//! with Perfetto's modules ([`perfetto_python`]); and what the runtime's benches share
//! ([`bench`]: the floor, the interleaved batch timing, percentiles); the late-span index and
//! statistics counters a session writes ([`late`]).
//!
//! One copy for the runtime's, the relay client's, the C API's and the CLI's tests, so that how
//! these are done and diagnosed cannot drift between them.

pub mod bench;
mod build;
pub mod late;
mod lines;

pub use build::{cargo_build, test_profile_dir, Artifact};
pub use lines::{count_per_thread, stdout_lines, wait_line, wait_or_kill};

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound and released; a daemon may still lose a race for it,
/// which [`Relayd::start`] retries).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("no free loopback port")
        .port()
}

/// A path under the system temporary directory that nothing is at:
/// `PREFIX-TAG-PID-NANOSECONDS` (whatever was there is removed). Unique per process and call.
pub fn fresh_temp_path(prefix: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "{prefix}-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// An exclusive lock shared by test processes (nextest runs every test in a process of its
/// own): `flock` on `<temp dir>/NAME.lock`, waited for, held until the returned file is dropped.
pub fn cross_process_lock(name: &str) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("{name}.lock"));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    f
}

/// The path of `prog` on `PATH`, if it is there.
pub fn which(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(prog))
            .find(|p| p.is_file())
    })
}

/// A running `lttng-relayd`, killed (and reaped) on drop — also when a test fails.
#[derive(Debug)]
pub struct Relayd {
    child: Option<Child>,
    /// Control port (`-C`).
    pub control: u16,
    /// Data port (`-D`).
    pub data: u16,
    /// Live viewer port (`-L`).
    pub live: u16,
    out: tempfile::TempDir,
}

impl Relayd {
    /// Starts `lttng-relayd` on three free ports with a temporary output directory and waits
    /// until it accepts connections on all three. Panics with the install command when the
    /// daemon (or `babeltrace2`, which every relay test reads the output with) is missing.
    pub fn start() -> Relayd {
        let bin = which("lttng-relayd").unwrap_or_else(|| {
            panic!(
                "lttng-relayd not found: these tests need the LTTng 2.13 relay daemon; \
                 install it with `apt-get install -y lttng-tools`"
            )
        });
        assert!(
            which("babeltrace2").is_some(),
            "babeltrace2 not found: install it with `apt-get install -y babeltrace2`"
        );
        for _attempt in 0..5 {
            let (control, data, live) = (free_port(), free_port(), free_port());
            let out = tempfile::tempdir().expect("tempdir");
            let home = out.path().join("home");
            std::fs::create_dir_all(&home).expect("relayd home");
            let child = Command::new(&bin)
                .arg("-C")
                .arg(format!("tcp://127.0.0.1:{control}"))
                .arg("-D")
                .arg(format!("tcp://127.0.0.1:{data}"))
                .arg("-L")
                .arg(format!("tcp://127.0.0.1:{live}"))
                .arg("-o")
                .arg(out.path().join("traces"))
                .arg("-v")
                // Its health socket and configuration live under $HOME/.lttng: keep them private.
                .env("HOME", &home)
                .env("LTTNG_HOME", &home)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(out.path().join("relayd.log")).expect("log"))
                .stderr(std::fs::File::create(out.path().join("relayd.err")).expect("log"))
                .spawn()
                .expect("spawn lttng-relayd");
            let mut r = Relayd {
                child: Some(child),
                control,
                data,
                live,
                out,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Some(status) = r.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    eprintln!("lttng-relayd exited early ({status}):\n{}", r.stderr());
                    break;
                }
                let up = |p| TcpStream::connect(("127.0.0.1", p)).is_ok();
                if up(control) && up(data) && up(live) {
                    return r;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            r.stop();
        }
        panic!("lttng-relayd did not start listening (5 attempts)");
    }

    /// `net://127.0.0.1:CONTROL:DATA`, as `HUSHTRACE_RELAY` and `record --relay` take it.
    pub fn url(&self) -> String {
        format!("net://127.0.0.1:{}:{}", self.control, self.data)
    }

    /// `net://127.0.0.1:LIVE/host/HOST/SESSION`, what `babeltrace2 --input-format=lttng-live`
    /// follows.
    pub fn live_url(&self, host: &str, session: &str) -> String {
        format!("net://127.0.0.1:{}/host/{host}/{session}", self.live)
    }

    /// The relay's output directory (`-o`): `<traces>/<host>/<session>/...`.
    pub fn traces(&self) -> PathBuf {
        self.out.path().join("traces")
    }

    /// Where the relay writes session `session` of host `host`.
    pub fn session_dir(&self, host: &str, session: &str) -> PathBuf {
        self.traces().join(host).join(session)
    }

    /// The daemon's stderr and verbose log, for failure messages.
    pub fn stderr(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        read(&self.out.path().join("relayd.err")) + &read(&self.out.path().join("relayd.log"))
    }

    /// Stops the relay with SIGSTOP: it keeps its sockets (connections are accepted by the
    /// kernel) but answers nothing until [`Relayd::resume`].
    pub fn pause(&self) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args(["-STOP", &c.id().to_string()])
                .status();
        }
    }

    /// Continues a relay stopped by [`Relayd::pause`] (SIGCONT).
    pub fn resume(&self) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
    }

    /// SIGKILLs the relay and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the relay (SIGTERM, then SIGKILL after 5 s).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Relayd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `babeltrace2` on `path` (a trace directory, local or a relay's copy) and returns its
/// text output; panics when it fails or prints any diagnostic (a warning included), naming the
/// path and quoting what it said.
pub fn babeltrace(path: &Path) -> String {
    let out = Command::new("babeltrace2")
        .arg(path)
        .output()
        .expect("babeltrace2 is required (apt-get install -y babeltrace2)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "babeltrace2 {}: {}\n{stderr}",
        path.display(),
        out.status
    );
    String::from_utf8(out.stdout).expect("babeltrace2 prints UTF-8")
}

/// The Python of the virtualenv with Perfetto's generated modules: `HUSHTRACE_PERFETTO_PYTHON`
/// when set, else what `ci/perfetto-venv.sh` prints last (it creates the virtualenv on first
/// use). Panics with the script's stderr when it fails.
pub fn perfetto_python() -> PathBuf {
    if let Some(p) = std::env::var_os("HUSHTRACE_PERFETTO_PYTHON") {
        return p.into();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o = Command::new("bash")
        .arg(root.join("ci/perfetto-venv.sh"))
        .output()
        .expect("run bash ci/perfetto-venv.sh");
    assert!(
        o.status.success(),
        "ci/perfetto-venv.sh failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).expect("ci/perfetto-venv.sh prints UTF-8");
    PathBuf::from(
        out.lines()
            .last()
            .expect("ci/perfetto-venv.sh printed nothing")
            .trim(),
    )
}
