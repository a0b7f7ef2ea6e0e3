//! `hushtrace record`: run a command with the `HUSHTRACE_*` environment.

use hushtrace_ctf::layout::STATS_SUFFIX;
use hushtrace_ctf::reader::ProcessStats;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Buffer mode of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Drop new events when the buffer is full.
    Discard,
    /// Overwrite the oldest sub-buffers (flight recorder).
    Overwrite,
}

impl Mode {
    /// The value of `HUSHTRACE_MODE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Discard => "discard",
            Mode::Overwrite => "overwrite",
        }
    }
}

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
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

impl RecordOptions {
    /// The environment variables to set.
    ///
    /// ```
    /// use hushtrace_cli::record::{Mode, RecordOptions};
    /// let o = RecordOptions { output: "/t".into(), mode: Some(Mode::Overwrite), subbuf_size: None,
    ///                         num_subbufs: Some(4), command: vec!["true".into()] };
    /// let env: Vec<_> = o.env().into_iter().map(|(k, v)| format!("{k}={}", v.to_string_lossy())).collect();
    /// assert_eq!(env, ["HUSHTRACE_OUTPUT=/t", "HUSHTRACE_MODE=overwrite", "HUSHTRACE_NUM_SUBBUFS=4"]);
    /// ```
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut env = vec![("HUSHTRACE_OUTPUT", self.output.clone().into_os_string())];
        if let Some(m) = self.mode {
            env.push(("HUSHTRACE_MODE", m.as_str().into()));
        }
        if let Some(n) = self.subbuf_size {
            env.push(("HUSHTRACE_SUBBUF_SIZE", n.to_string().into()));
        }
        if let Some(n) = self.num_subbufs {
            env.push(("HUSHTRACE_NUM_SUBBUFS", n.to_string().into()));
        }
        env
    }
}

/// Runs the command and returns its exit code (128 + signal number if a signal killed it).
pub fn run(opts: &RecordOptions) -> std::io::Result<i32> {
    let (prog, args) = opts
        .command
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command to run"))?;
    let status = Command::new(prog)
        .args(args)
        .envs(opts.env())
        .status()
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("running {}: {e}", prog.to_string_lossy()))
        })?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// The statistics files of a session directory: `(trace dir name, stats)`, by pid; a file that
/// does not parse gives `None`.
pub fn session_stats(dir: &Path) -> Vec<(String, Option<ProcessStats>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(trace) = name.strip_suffix(STATS_SUFFIX) {
            let stats = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|t| ProcessStats::parse(&t));
            out.push((trace.to_string(), stats));
        }
    }
    out.sort_by_key(|(n, s)| (s.map_or(u64::MAX, |s| s.pid), n.clone()));
    out
}
