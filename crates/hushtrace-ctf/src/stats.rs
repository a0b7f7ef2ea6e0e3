//! The per-process statistics file, written by the runtime when a process stops tracing and
//! read by the reader and `hushtrace record`: the one place that knows its name and format.
//!
//! The file is `<session dir>/<trace dir name>.stats.json` (beside, not inside, the process's
//! trace directory), one line `{"pid":P,"written":W,"discarded":D}`. It is missing when the
//! process died (or is still running) without stopping its session.
//!
//! ```
//! use hushtrace_ctf::stats::{self, ProcessStats};
//! let s = ProcessStats { pid: 7, written: 10, discarded: 2 };
//! assert_eq!(s.to_json(), "{\"pid\":7,\"written\":10,\"discarded\":2}\n");
//! assert_eq!(ProcessStats::parse(&s.to_json()), Some(s));
//! assert_eq!(stats::file_name("7"), "7.stats.json");
//! assert_eq!(stats::path_for("/t/7".as_ref()), std::path::Path::new("/t/7.stats.json"));
//! ```

use crate::error::Error;
use crate::file;
use crate::layout::STATS_SUFFIX;
use std::path::{Path, PathBuf};

/// Statistics files larger than this are malformed (a real one is under 100 bytes).
pub const MAX_STATS_BYTES: u64 = 4096;

/// The per-process statistics file `<dir>/<name>.stats.json`, written when the process stops
/// tracing (missing if it crashed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessStats {
    /// Process id.
    pub pid: u64,
    /// Events written.
    pub written: u64,
    /// Events discarded (buffers full) or overwritten.
    pub discarded: u64,
}

impl ProcessStats {
    /// Parses `{"pid":P,"written":W,"discarded":D}` (keys in any order, whitespace allowed).
    ///
    /// ```
    /// use hushtrace_ctf::reader::ProcessStats;
    /// let s = ProcessStats::parse(r#"{"pid": 7, "written":10,"discarded":0}"#).unwrap();
    /// assert_eq!((s.pid, s.written, s.discarded), (7, 10, 0));
    /// assert!(ProcessStats::parse("{}").is_none());
    /// ```
    pub fn parse(text: &str) -> Option<ProcessStats> {
        let body = text.trim().strip_prefix('{')?.strip_suffix('}')?;
        let (mut pid, mut written, mut discarded) = (None, None, None);
        for item in body.split(',') {
            let (k, v) = item.split_once(':')?;
            let v: u64 = v.trim().parse().ok()?;
            match k.trim().strip_prefix('"')?.strip_suffix('"')? {
                "pid" => pid = Some(v),
                "written" => written = Some(v),
                "discarded" => discarded = Some(v),
                _ => {}
            }
        }
        Some(ProcessStats {
            pid: pid?,
            written: written?,
            discarded: discarded?,
        })
    }

    /// The file's content: `{"pid":P,"written":W,"discarded":D}` and a newline.
    ///
    /// ```
    /// use hushtrace_ctf::stats::ProcessStats;
    /// let s = ProcessStats { pid: 1, written: 2, discarded: 3 };
    /// assert_eq!(s.to_json(), "{\"pid\":1,\"written\":2,\"discarded\":3}\n");
    /// ```
    pub fn to_json(&self) -> String {
        format!(
            "{{\"pid\":{},\"written\":{},\"discarded\":{}}}\n",
            self.pid, self.written, self.discarded
        )
    }

    /// Reads the statistics file `path`: `Ok(None)` if there is none; an error naming the path
    /// if it is not a regular file (a symbolic link is not followed, a FIFO is not waited on),
    /// cannot be read, or does not parse.
    ///
    /// ```
    /// use hushtrace_ctf::stats::ProcessStats;
    /// let p = std::env::temp_dir().join(format!("hushtrace-stats-doc-{}", std::process::id()));
    /// assert_eq!(ProcessStats::read(&p).unwrap(), None);
    /// let s = ProcessStats { pid: 1, written: 2, discarded: 3 };
    /// std::fs::write(&p, s.to_json()).unwrap();
    /// assert_eq!(ProcessStats::read(&p).unwrap(), Some(s));
    /// std::fs::write(&p, "{").unwrap();
    /// assert!(ProcessStats::read(&p).unwrap_err().to_string().contains("malformed statistics file"));
    /// std::fs::remove_file(&p).unwrap();
    /// ```
    pub fn read(path: &Path) -> Result<Option<ProcessStats>, Error> {
        if !file::exists(path) {
            return Ok(None);
        }
        let malformed = || Error::corrupt(path, 0, "malformed statistics file");
        let bytes = file::read_regular(path, MAX_STATS_BYTES)?.ok_or_else(malformed)?;
        let text = std::str::from_utf8(&bytes).map_err(|_| malformed())?;
        ProcessStats::parse(text).map(Some).ok_or_else(malformed)
    }
}

/// The statistics file name of the trace directory named `trace_dir_name` (`"<name>.stats.json"`).
pub fn file_name(trace_dir_name: &str) -> String {
    format!("{trace_dir_name}{STATS_SUFFIX}")
}

/// The statistics file of the trace directory `trace_dir`: `<parent>/<name>.stats.json`.
pub fn path_for(trace_dir: &Path) -> PathBuf {
    let name = trace_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    trace_dir.with_file_name(file_name(&name))
}

/// The trace directory name a statistics file name belongs to (`"7.stats.json"` → `"7"`).
///
/// ```
/// assert_eq!(hushtrace_ctf::stats::trace_name("7.2.stats.json"), Some("7.2"));
/// assert_eq!(hushtrace_ctf::stats::trace_name("metadata"), None);
/// ```
pub fn trace_name(file_name: &str) -> Option<&str> {
    file_name.strip_suffix(STATS_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_and_parser_agree() {
        for s in [
            ProcessStats {
                pid: 0,
                written: 0,
                discarded: 0,
            },
            ProcessStats {
                pid: u64::MAX,
                written: u64::MAX,
                discarded: 12345,
            },
        ] {
            assert_eq!(ProcessStats::parse(&s.to_json()), Some(s));
        }
    }

    #[test]
    fn a_symlink_is_an_error_and_its_target_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "{\"pid\":1,\"written\":2,\"discarded\":3}").unwrap();
        let link = dir.path().join("1.stats.json");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let e = ProcessStats::read(&link).unwrap_err().to_string();
        assert!(
            e.contains("symbolic link") && e.contains("1.stats.json"),
            "{e}"
        );
    }
}
