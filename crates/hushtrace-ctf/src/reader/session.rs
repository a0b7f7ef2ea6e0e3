//! Discovering the process traces of a session directory.

use super::{read_metadata, Error, ErrorKind, Location, Merged, StreamReader, Warning};
use crate::file;
use crate::layout::{METADATA_FILE, STREAM_PREFIX};
use crate::metadata::TraceDesc;
pub use crate::stats::ProcessStats;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The trace of one process: `<session>/<name>/`.
#[derive(Clone, Debug)]
pub struct ProcessTrace {
    /// Directory name (the pid, possibly `<pid>.<n>`).
    pub name: String,
    /// The trace directory.
    pub dir: PathBuf,
    /// Its metadata.
    pub desc: Arc<TraceDesc>,
    /// Its stream files, by stream instance number.
    pub streams: Vec<PathBuf>,
    /// The statistics file, if present and well-formed. `None` means the process did not stop
    /// tracing (it crashed, was killed or still runs): see [`ProcessTrace::is_complete`].
    pub stats: Option<ProcessStats>,
    /// Who wrote the directory: the traced process, or something that never writes a
    /// statistics file (a relay, a snapshot, a recovery).
    pub origin: Origin,
}

/// Who wrote a process trace directory. Only a [`Origin::Recorded`] trace without statistics
/// file is incomplete: the others never have one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The traced process (its statistics file says it stopped).
    Recorded,
    /// `lttng-relayd`'s copy (an `index` directory beside the streams): the relay stores the
    /// metadata and the streams, the statistics stay in the traced machine's directory.
    RelayCopy,
    /// A flight-recorder snapshot (marker file [`SNAPSHOT_MARKER`]).
    Snapshot,
    /// Rings recovered by `hushtrace recover` after the process ended without stopping
    /// (marker file [`RECOVERED_MARKER`]): every event its tracepoints completed is there.
    Recovered,
}

/// Marker file of a snapshot's process directory (hidden: CTF readers skip it).
pub const SNAPSHOT_MARKER: &str = ".snapshot";
/// Marker file a recovery leaves in the process directory it completed.
pub const RECOVERED_MARKER: &str = ".recovered";

impl Origin {
    /// The origin of the process trace directory `dir`, from its marker files.
    pub fn of(dir: &Path) -> Origin {
        if file::exists(&dir.join(SNAPSHOT_MARKER)) {
            Origin::Snapshot
        } else if file::exists(&dir.join(RECOVERED_MARKER)) {
            Origin::Recovered
        } else if std::fs::symlink_metadata(dir.join("index")).is_ok_and(|m| m.is_dir()) {
            Origin::RelayCopy
        } else {
            Origin::Recorded
        }
    }
}

/// A session directory: one trace per traced process.
#[derive(Clone, Debug)]
pub struct Session {
    /// The session directory.
    pub dir: PathBuf,
    /// Process traces, ordered by pid.
    pub traces: Vec<ProcessTrace>,
    /// Problems found while opening (malformed stats files, directories without metadata).
    pub warnings: Vec<Warning>,
}

impl Session {
    /// Opens a session directory, or a single process trace directory (one with a `metadata`
    /// file, as `babeltrace2` accepts).
    ///
    /// Reads every metadata file; stream files are only opened by [`Session::merged`] or
    /// [`ProcessTrace::stream_readers`]. Only regular files are read: a `metadata` or
    /// `stream_<k>` entry that is a symbolic link, a FIFO, a device or a directory is an error
    /// naming it (never followed, never waited on); a statistics file that is not a regular
    /// file is ignored with a warning. A process without a statistics file gets a warning
    /// saying its trace may be incomplete.
    pub fn open(dir: &Path) -> Result<Session, Error> {
        let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(Error::io(dir, std::io::Error::other("not a directory")));
        }
        let mut warnings = Vec::new();
        let mut traces = Vec::new();
        if file::exists(&dir.join(METADATA_FILE)) {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let stats_dir = dir.parent().unwrap_or(dir).to_path_buf();
            traces.push(open_trace(dir, name, &stats_dir, &mut warnings)?);
        } else {
            let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(dir, e))?;
                let path = entry.path();
                let ft = entry.file_type().map_err(|e| Error::io(&path, e))?;
                if !ft.is_dir() {
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == KERNEL_TRACE_DIR {
                    // The kernel trace of `record --kernel` (hushtrace-kernel reads it).
                    continue;
                }
                if file::exists(&path.join(METADATA_FILE)) {
                    traces.push(open_trace(&path, name, dir, &mut warnings)?);
                } else if has_streams(&path) {
                    warnings.push(Warning::about(
                        &path,
                        "stream files without a metadata file: skipped".into(),
                    ));
                }
            }
        }
        if traces.is_empty() {
            return Err(Error {
                path: dir.to_path_buf(),
                location: Location::File,
                kind: ErrorKind::NoTraces,
            });
        }
        traces.sort_by_key(|t| sort_key(&t.name));
        Ok(Session {
            dir: dir.to_path_buf(),
            traces,
            warnings,
        })
    }

    /// Total size of all stream files, in bytes.
    pub fn stream_bytes(&self) -> u64 {
        self.traces
            .iter()
            .flat_map(|t| &t.streams)
            .filter_map(|p| std::fs::symlink_metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }

    /// A merge of all events of all processes by time.
    pub fn merged(&self) -> Result<Merged, Error> {
        let mut streams = Vec::new();
        for (i, t) in self.traces.iter().enumerate() {
            for s in t.stream_readers()? {
                streams.push((i, s));
            }
        }
        Merged::new(
            self.traces.iter().map(|t| t.desc.clone()).collect(),
            streams,
        )
    }
}

impl ProcessTrace {
    /// Whether the process stopped tracing and wrote its statistics file. A process that
    /// crashed or was killed (or still runs) has none: the events that were still in its
    /// buffers are not in the trace.
    pub fn is_complete(&self) -> bool {
        self.stats.is_some()
    }

    /// Opens a reader on each stream file. Each file is checked, then its descriptor released
    /// (reopened on the reader's first read), so a process with thousands of streams does not
    /// hold thousands of descriptors.
    pub fn stream_readers(&self) -> Result<Vec<StreamReader>, Error> {
        self.streams
            .iter()
            .map(|p| {
                let mut r = StreamReader::open(self.desc.clone(), p)?;
                r.release_file();
                Ok(r)
            })
            .collect()
    }
}

/// The subdirectory of a session directory holding the kernel trace of `record --kernel`
/// (CTF too, but not in hushtrace's user-space layout): skipped by [`Session::open`].
pub const KERNEL_TRACE_DIR: &str = "kernel";

fn has_streams(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(STREAM_PREFIX))
    })
}

/// `"1234.2"` sorts as `(1234, 2)`; anything else after all numeric names.
fn sort_key(name: &str) -> (u64, u64, String) {
    let (a, b) = name.split_once('.').unwrap_or((name, "0"));
    match (a.parse(), b.parse()) {
        (Ok(a), Ok(b)) => (a, b, String::new()),
        _ => (u64::MAX, u64::MAX, name.to_string()),
    }
}

fn open_trace(
    dir: &Path,
    name: String,
    stats_dir: &Path,
    warnings: &mut Vec<Warning>,
) -> Result<ProcessTrace, Error> {
    let desc = Arc::new(read_metadata(&dir.join(METADATA_FILE))?);
    let mut streams: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let fname = entry.file_name();
        let fname = fname.to_string_lossy();
        let Some(k) = fname
            .strip_prefix(STREAM_PREFIX)
            .and_then(|k| k.parse::<u64>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if !ft.is_file() {
            return Err(file::not_regular(&path, ft));
        }
        streams.push((k, path));
    }
    streams.sort();
    let stats_path = stats_dir.join(crate::stats::file_name(&name));
    let origin = Origin::of(dir);
    let stats = match ProcessStats::read(&stats_path) {
        Ok(Some(s)) => Some(s),
        Ok(None) if origin != Origin::Recorded => None,
        Ok(None) => {
            let rings = [crate::layout::RINGS_FILE, crate::layout::LEGACY_RINGS_FILE]
                .iter()
                .any(|n| file::exists(&dir.join(n)));
            warnings.push(Warning::about(
                dir,
                format!(
                    "incomplete trace: no statistics file {}: the process did not stop tracing \
                     (it crashed, was killed, or is still running); events still in its buffers \
                     are missing{}",
                    stats_path.display(),
                    if rings {
                        "; its rings are still there: `hushtrace recover` adds what they hold \
                         once the process has ended"
                    } else {
                        ""
                    }
                ),
            ));
            None
        }
        Err(e) => {
            warnings.push(Warning::about(
                &stats_path,
                format!("statistics file ignored: {}", e.kind),
            ));
            None
        }
    };
    Ok(ProcessTrace {
        name,
        dir: dir.to_path_buf(),
        desc,
        streams: streams.into_iter().map(|(_, p)| p).collect(),
        stats,
        origin,
    })
}
