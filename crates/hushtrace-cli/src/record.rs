//! `hushtrace record`: run a command with the `HUSHTRACE_*` environment.

use hushtrace::Mode;
use hushtrace_ctf::layout::METADATA_FILE;
use hushtrace_ctf::reader::ProcessStats;
use hushtrace_ctf::stats;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

mod late;
pub use late::{LateFlagError, LateOptions, LATE_INTERVAL, LATE_MAX, LATE_WINDOW, ON_LATE};

/// What to run and how to trace it.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Session directory (`HUSHTRACE_OUTPUT`).
    pub output: PathBuf,
    /// `HUSHTRACE_MODE`, if given.
    pub mode: Option<Mode>,
    /// `HUSHTRACE_SUBBUF_SIZE`, if given.
    pub subbuf_size: Option<u64>,
    /// `HUSHTRACE_NUM_SUBBUFS`, if given.
    pub num_subbufs: Option<u64>,
    /// `HUSHTRACE_RELAY`: also stream to this `lttng-relayd` (`net://HOST[:CONTROL[:DATA]]`).
    pub relay: Option<String>,
    /// `HUSHTRACE_RELAY_SESSION`: the session's name on the relay.
    pub relay_session: Option<String>,
    /// `HUSHTRACE_RELAY_HOST`: the host name the relay files the session under.
    pub relay_host: Option<String>,
    /// `HUSHTRACE_RELAY_ONLY=1`: event streams go only to the relay, not the local directory.
    pub relay_only: bool,
    /// `HUSHTRACE_DIRECT_IO=1`: stream files written with `O_DIRECT` where the file system
    /// supports it (no copy into the page cache; the consumer waits for the disk).
    pub direct_io: bool,
    /// `HUSHTRACE_CONSUMER_SCHED`: how the consumer thread is scheduled.
    pub consumer_sched: Option<hushtrace::ConsumerSched>,
    /// `HUSHTRACE_CONSUMER_CPUS`: the CPUs the consumer thread may run on.
    pub consumer_cpus: Option<Vec<usize>>,
    /// `HUSHTRACE_ON_LATE`, `HUSHTRACE_LATE_MAX`, `HUSHTRACE_LATE_INTERVAL`,
    /// `HUSHTRACE_LATE_WINDOW`: span deadlines and the bounds of late-span captures.
    pub late: LateOptions,
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

/// A `record` flag the runtime would refuse at session start.
#[derive(Debug)]
pub struct InvalidFlag {
    /// The flag, e.g. `--num-subbufs`.
    pub flag: &'static str,
    /// The runtime's reason (value and limit).
    pub error: hushtrace::Error,
}

impl fmt::Display for InvalidFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.flag, self.error)
    }
}

impl std::error::Error for InvalidFlag {}

impl RecordOptions {
    /// Options that run `command` with its trace in `output` and every other setting left to
    /// the runtime's defaults.
    pub fn new(output: impl Into<PathBuf>, command: Vec<OsString>) -> RecordOptions {
        RecordOptions {
            output: output.into(),
            mode: None,
            subbuf_size: None,
            num_subbufs: None,
            relay: None,
            relay_session: None,
            relay_host: None,
            relay_only: false,
            direct_io: false,
            consumer_sched: None,
            consumer_cpus: None,
            late: LateOptions::default(),
            command,
        }
    }

    /// The environment variables to set (names from [`hushtrace::env`]).
    ///
    /// ```
    /// use hushtrace::Mode;
    /// use hushtrace_cli::record::RecordOptions;
    /// let mut o = RecordOptions::new("/t", vec!["true".into()]);
    /// o.mode = Some(Mode::Overwrite);
    /// o.num_subbufs = Some(4);
    /// o.relay = Some("net://127.0.0.1".into());
    /// o.direct_io = true;
    /// o.consumer_sched = Some(hushtrace::ConsumerSched::Fifo(5));
    /// o.consumer_cpus = Some(vec![0, 1]);
    /// let env: Vec<_> = o.env().into_iter().map(|(k, v)| format!("{k}={}", v.to_string_lossy())).collect();
    /// assert_eq!(env, ["HUSHTRACE_OUTPUT=/t", "HUSHTRACE_MODE=overwrite", "HUSHTRACE_NUM_SUBBUFS=4",
    ///                  "HUSHTRACE_RELAY=net://127.0.0.1", "HUSHTRACE_DIRECT_IO=1",
    ///                  "HUSHTRACE_CONSUMER_SCHED=fifo:5", "HUSHTRACE_CONSUMER_CPUS=0,1"]);
    /// ```
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut env = vec![(hushtrace::env::OUTPUT, self.output.clone().into_os_string())];
        if let Some(m) = self.mode {
            env.push((hushtrace::env::MODE, m.as_str().into()));
        }
        if let Some(n) = self.subbuf_size {
            env.push((hushtrace::env::SUBBUF_SIZE, n.to_string().into()));
        }
        if let Some(n) = self.num_subbufs {
            env.push((hushtrace::env::NUM_SUBBUFS, n.to_string().into()));
        }
        for (var, v) in [
            (hushtrace::env::RELAY, &self.relay),
            (hushtrace::env::RELAY_SESSION, &self.relay_session),
            (hushtrace::env::RELAY_HOST, &self.relay_host),
        ] {
            if let Some(v) = v {
                env.push((var, v.into()));
            }
        }
        if self.relay_only {
            env.push((hushtrace::env::RELAY_ONLY, "1".into()));
        }
        if self.direct_io {
            env.push((hushtrace::env::DIRECT_IO, "1".into()));
        }
        if let Some(s) = self.consumer_sched {
            env.push((hushtrace::env::CONSUMER_SCHED, s.to_string().into()));
        }
        if let Some(cpus) = &self.consumer_cpus {
            let list = hushtrace::cpu_list_text(cpus);
            env.push((hushtrace::env::CONSUMER_CPUS, list.into()));
        }
        env.extend(self.late.env());
        env
    }

    /// Checks the buffer flags the way the runtime checks them at session start
    /// ([`hushtrace::SessionBuilder::validate`]), so a bad value is refused before the command
    /// runs instead of making every traced process fail to start its session.
    ///
    /// ```
    /// use hushtrace_cli::record::RecordOptions;
    /// let mut o = RecordOptions::new("/t", vec!["true".into()]);
    /// o.num_subbufs = Some(65536);
    /// let e = o.validate().unwrap_err();
    /// assert_eq!(e.flag, "--num-subbufs");
    /// assert!(e.to_string().contains("65536"));
    /// o.num_subbufs = Some(4);
    /// assert!(o.validate().is_ok());
    /// o.relay = Some("tcp://relay".into());
    /// let e = o.validate().unwrap_err();
    /// assert_eq!(e.flag, "--relay");
    /// assert!(e.to_string().contains("tcp://relay"));
    /// ```
    pub fn validate(&self) -> Result<(), InvalidFlag> {
        fn size(flag: &'static str, v: u64) -> Result<usize, InvalidFlag> {
            usize::try_from(v).map_err(|_| InvalidFlag {
                flag,
                error: hushtrace::Error::Config {
                    var: None,
                    value: v.to_string(),
                    reason: "too large for this platform".into(),
                },
            })
        }
        let mut b = hushtrace::Session::builder();
        if let Some(m) = self.mode {
            b = b.mode(m);
        }
        if let Some(n) = self.subbuf_size {
            b = b.subbuf_size(size("--subbuf-size", n)?);
            // Checked alone first, so an error names the flag that caused it.
            b.validate().map_err(|error| InvalidFlag {
                flag: "--subbuf-size",
                error,
            })?;
        }
        if let Some(n) = self.num_subbufs {
            b = b.num_subbufs(size("--num-subbufs", n)?);
        }
        b.validate().map_err(|error| InvalidFlag {
            flag: if self.num_subbufs.is_some() {
                "--num-subbufs"
            } else {
                "--subbuf-size"
            },
            error,
        })?;
        // The relay settings, each checked alone so an error names its flag.
        let relay = [
            ("--relay", &self.relay),
            ("--relay-session", &self.relay_session),
            ("--relay-host", &self.relay_host),
        ];
        for (flag, value) in relay {
            let Some(v) = value else { continue };
            let b = hushtrace::Session::builder();
            let b = match flag {
                "--relay" => b.relay(v),
                "--relay-session" => b.relay_session_name(v.clone()),
                _ => b.relay_host_name(v.clone()),
            };
            b.validate().map_err(|error| InvalidFlag { flag, error })?;
        }
        if self.relay_only {
            let mut b = hushtrace::Session::builder().relay_only(true);
            if let Some(url) = &self.relay {
                b = b.relay(url);
            }
            b.validate().map_err(|error| InvalidFlag {
                flag: "--relay-only",
                error,
            })?;
        }
        Ok(())
    }

    /// Checks that the relay daemon given with `--relay` accepts connections on its control
    /// and data ports (within `timeout` each), so `record` can refuse before the command runs
    /// instead of every traced process failing to start its session. `Ok` without a relay.
    pub fn check_relay_reachable(&self, timeout: std::time::Duration) -> Result<(), String> {
        let Some(text) = &self.relay else {
            return Ok(());
        };
        let url = hushtrace_relay::RelayUrl::parse(text).map_err(|e| e.to_string())?;
        hushtrace_relay::RelayClient::probe(&url, timeout)
            .map_err(|e| format!("cannot reach the relay daemon: {e}"))
    }
}

/// Whether `program` names a Python interpreter (`python`, `python3`, `python3.12`, a venv's
/// `bin/python`...).
///
/// ```
/// use hushtrace_cli::record::is_python;
/// assert!(is_python("/venv/bin/python3.12".as_ref()) && is_python("python".as_ref()));
/// assert!(!is_python("./app".as_ref()) && !is_python("pythonista-tool".as_ref()));
/// ```
pub fn is_python(program: &std::ffi::OsStr) -> bool {
    let name = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_prefix("python").is_some_and(|v| {
        v.chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == 't')
    })
}

/// When `command` runs a Python interpreter that cannot import the `hushtrace` package (so its
/// start-up hook never started tracing), says so and how to fix it; `None` otherwise. Asks
/// the interpreter itself (`-c "import hushtrace"`, without the `HUSHTRACE_*` environment).
pub fn python_without_package(command: &[OsString]) -> Option<String> {
    let prog = command.first().filter(|p| is_python(p))?;
    let mut probe = Command::new(prog);
    probe.args([
        "-c",
        "import sys; print(sys.executable, flush=True); import hushtrace",
    ]);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("HUSHTRACE_") {
            probe.env_remove(k);
        }
    }
    let out = probe.output().ok()?;
    if out.status.success() {
        return None;
    }
    let exe = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let exe = if exe.is_empty() {
        prog.to_string_lossy().into_owned()
    } else {
        exe
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = stderr.lines().last().unwrap_or("import failed").trim();
    Some(format!(
        "{prog} was not traced: its interpreter ({exe}) cannot import the hushtrace Python \
         package ({why}), whose start-up hook starts tracing. Install the package for that \
         interpreter ({exe} -m pip install hushtrace, or ./crates/hushtrace-python from the \
         source tree), or run the program with the python of the virtual environment that \
         has it: hushtrace record -o DIR -- /path/to/venv/bin/python ...",
        prog = prog.to_string_lossy()
    ))
}

/// Runs the command and returns its exit status.
pub fn run_status(opts: &RecordOptions) -> std::io::Result<ExitStatus> {
    let (prog, args) = opts
        .command
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command to run"))?;
    Command::new(prog)
        .args(args)
        .envs(opts.env())
        .status()
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("running {}: {e}", prog.to_string_lossy()))
        })
}

/// Runs the command and returns its exit code (128 + signal number if a signal killed it).
pub fn run(opts: &RecordOptions) -> std::io::Result<i32> {
    run_status(opts).map(exit_code)
}

/// The shell's exit code for `status`: its code, or 128 + the signal number that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// `"SIGKILL (9)"` for signal 9; the number alone for a signal without a known name.
///
/// ```
/// assert_eq!(hushtrace_cli::record::signal_name(9), "SIGKILL (9)");
/// assert_eq!(hushtrace_cli::record::signal_name(11), "SIGSEGV (11)");
/// ```
pub fn signal_name(sig: i32) -> String {
    const NAMES: &[(libc::c_int, &str)] = &[
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGCHLD, "SIGCHLD"),
        (libc::SIGCONT, "SIGCONT"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGTSTP, "SIGTSTP"),
        (libc::SIGTTIN, "SIGTTIN"),
        (libc::SIGTTOU, "SIGTTOU"),
        (libc::SIGURG, "SIGURG"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGVTALRM, "SIGVTALRM"),
        (libc::SIGPROF, "SIGPROF"),
        (libc::SIGWINCH, "SIGWINCH"),
        (libc::SIGIO, "SIGIO"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    match NAMES.iter().find(|(n, _)| *n == sig) {
        Some((_, name)) => format!("{name} ({sig})"),
        None => format!("signal {sig}"),
    }
}

/// How the command ended, for people: `None` if it exited, else e.g.
/// `"killed by signal SIGKILL (9)"` (with `", core dumped"` if it dumped core).
pub fn killed_by(status: ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    let sig = status.signal()?;
    let core = if status.core_dumped() {
        ", core dumped"
    } else {
        ""
    };
    Some(format!("killed by signal {}{core}", signal_name(sig)))
}

/// The statistics files of a session directory: `(trace dir name, stats)`, by pid; a file that
/// does not parse, or is not a regular file, gives `None` (it is never followed or waited on).
pub fn session_stats(dir: &Path) -> Vec<(String, Option<ProcessStats>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(trace) = stats::trace_name(&name) {
            let s = ProcessStats::read(&e.path()).ok().flatten();
            out.push((trace.to_string(), s));
        }
    }
    out.sort_by_key(|(n, s)| (s.map_or(u64::MAX, |s| s.pid), n.clone()));
    out
}

/// The name of the process whose trace is `<dir>/<name>/` (the `procname` of its metadata), or
/// `?` if its metadata cannot be read.
pub fn process_name(dir: &Path, name: &str) -> String {
    hushtrace_ctf::reader::read_metadata(&dir.join(name).join(METADATA_FILE))
        .map(|d| d.procname)
        .unwrap_or_else(|_| "?".into())
}

/// The process traces of a session directory (`<dir>/<name>/metadata` exists) that have no
/// statistics file: processes that did not stop tracing (killed, crashed, still running), by
/// name.
pub fn incomplete_traces(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_trace = e.file_type().is_ok_and(|t| t.is_dir())
            && std::fs::symlink_metadata(e.path().join(METADATA_FILE)).is_ok()
            && name != hushtrace_ctf::reader::KERNEL_TRACE_DIR;
        if is_trace && std::fs::symlink_metadata(dir.join(stats::file_name(&name))).is_err() {
            out.push(name);
        }
    }
    out.sort_by_key(|n| (n.parse::<u64>().unwrap_or(u64::MAX), n.clone()));
    out
}

/// The parts of a trace in session directory `dir`: process trace directories (`<name>/`
/// holding a `metadata` file) and statistics files (`<name>.stats.json`), by name. Empty if
/// `dir` does not exist or holds no trace.
pub fn existing_trace(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_trace = e.file_type().is_ok_and(|t| t.is_dir())
            && std::fs::symlink_metadata(e.path().join(METADATA_FILE)).is_ok();
        if is_trace || stats::trace_name(&name).is_some() {
            out.push(name);
        }
    }
    out.sort_by_key(|n| (n.parse::<u64>().unwrap_or(u64::MAX), n.clone()));
    out
}

/// `"3 process trace(s): 100, 200, 300"` for the parts [`existing_trace`] found.
pub fn describe_trace(parts: &[String]) -> String {
    let procs: Vec<&str> = parts
        .iter()
        .filter(|n| stats::trace_name(n).is_none())
        .map(|n| n.as_str())
        .collect();
    if procs.is_empty() {
        return format!("{} statistics file(s)", parts.len());
    }
    let shown = procs.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    let more = if procs.len() > 5 { ", ..." } else { "" };
    format!("{} process trace(s): {shown}{more}", procs.len())
}

/// Removes the trace parts `parts` (from [`existing_trace`]) from `dir`: process directories
/// and statistics files only; symbolic links are removed, never followed.
pub fn remove_trace(dir: &Path, parts: &[String]) -> std::io::Result<()> {
    for name in parts {
        let p = dir.join(name);
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let r = if m.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        r.map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot remove {}: {e}", p.display()))
        })?;
    }
    Ok(())
}
