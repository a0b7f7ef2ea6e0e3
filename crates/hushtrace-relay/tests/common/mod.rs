//! Helpers of the integration tests: a real `lttng-relayd` on free loopback ports, a real
//! hushtrace trace recorded in a subprocess (two threads and a forked child), babeltrace2.

#![allow(dead_code)]

use hushtrace_relay::{split_packets, RelayClient, RelayUrl, StreamId};
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Events the recording emits, per process and thread.
pub const PARENT_MAIN: u64 = 3000;
pub const PARENT_WORKER: u64 = 2000;
pub const CHILD_MAIN: u64 = 1500;
pub const CHILD_WORKER: u64 = 700;

/// Environment variable that turns the `record_helper` test into the recorder.
pub const RECORD_ENV: &str = "HUSHTRACE_RELAY_TEST_RECORD";

/// A running `lttng-relayd`, killed (and reaped) on drop — also when a test fails.
pub struct Relayd {
    child: Option<Child>,
    pub control: u16,
    pub data: u16,
    pub live: u16,
    pub out: tempfile::TempDir,
    log: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("no free loopback port")
        .port()
}

pub fn which(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(prog))
            .find(|p| p.is_file())
    })
}

impl Relayd {
    /// Starts `lttng-relayd` on three free ports with a temporary output directory and waits
    /// until it accepts connections.
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
            std::fs::create_dir_all(&home).unwrap();
            let log = out.path().join("relayd.log");
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
                // its health socket and config live under $HOME/.lttng: keep them private
                .env("HOME", &home)
                .env("LTTNG_HOME", &home)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&log).unwrap())
                .stderr(std::fs::File::create(out.path().join("relayd.err")).unwrap())
                .spawn()
                .expect("spawn lttng-relayd");
            let mut r = Relayd {
                child: Some(child),
                control,
                data,
                live,
                out,
                log,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Some(status) = r.child.as_mut().unwrap().try_wait().unwrap() {
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

    pub fn url(&self) -> RelayUrl {
        RelayUrl::new("127.0.0.1", self.control, self.data)
    }

    pub fn traces(&self) -> PathBuf {
        self.out.path().join("traces")
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.out.path().join("relayd.err")).unwrap_or_default()
            + &std::fs::read_to_string(&self.log).unwrap_or_default()
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

/// Records the trace in a subprocess (this test binary, running only `record_helper` with
/// [`RECORD_ENV`] set): the parent emits from its main thread and a worker, then forks a child
/// that does the same with other counts. Prints `pids <parent> <child>`.
pub fn record() -> Recording {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("trace");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "record_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(RECORD_ENV, &root)
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

/// The recorder's body (runs in the subprocess).
pub fn record_into(root: &Path) {
    let session = hushtrace::Session::builder()
        .output_dir(root)
        .subbuf_size(16 * 1024)
        .start()
        .expect("start session");
    let emit = |n: u64| {
        for seq in 0..n {
            hushtrace::event!("relaytest", "ev", seq = seq);
        }
    };
    let worker = std::thread::spawn(move || emit(PARENT_WORKER));
    emit(PARENT_MAIN);
    worker.join().unwrap();
    // SAFETY: fork in a process whose other threads are idle (test harness); the child
    // traces, then leaves with exit(), whose handler flushes its trace.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let w = std::thread::spawn(move || emit(CHILD_WORKER));
        emit(CHILD_MAIN);
        w.join().unwrap();
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    session.stop().expect("stop");
    println!("\npids {} {}", std::process::id(), pid);
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
    let mut m = BTreeMap::new();
    for line in text.lines().filter(|l| l.contains("relaytest:ev")) {
        let field = |name: &str| -> u32 {
            let key = format!("{name} = ");
            let at = line
                .find(&key)
                .unwrap_or_else(|| panic!("no {name} in {line}"))
                + key.len();
            line[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        *m.entry((field("vpid"), field("vtid"))).or_insert(0) += 1;
    }
    m
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

/// Runs babeltrace2 on `path` and returns its output.
pub fn babeltrace(path: &Path) -> String {
    let out = Command::new("babeltrace2")
        .arg(path)
        .output()
        .expect("run babeltrace2");
    assert!(
        out.status.success(),
        "babeltrace2 {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
