//! `hushtrace convert DIR --to parquet -o OUT`: the trace as Parquet tables, for DuckDB,
//! Polars, Spark, Trino and every other engine that reads Parquet (issue 33).
//!
//! Layout (Hive partitioning, so that traces of many machines and sessions converted into one
//! folder read as one dataset with one glob):
//!
//! ```text
//! OUT/host=<HOST>/session=<SESSION>/slices.parquet
//!                                   instants.parquet
//!                                   counters.parquet
//!                                   threads.parquet
//!                                   processes.parquet
//!                                   losses.parquet
//!                                   sched.parquet          (with a kernel trace)
//!                                   thread_state.parquet   (with a kernel trace)
//! ```
//!
//! `HOST` is `--host`, else the host name the trace recorded (its CTF metadata's
//! `env.hostname`), else this machine's; `SESSION` is the trace directory's name. `host` and
//! `session` are not columns inside the files: readers take them from the path (DuckDB's
//! `hive_partitioning`, Spark's partition discovery, `pyarrow.dataset(partitioning="hive")`),
//! and a column of the same name in the files would clash with them (Spark refuses that).
//! Converting the same trace again replaces its files.
//!
//! Times are `INT64` nanoseconds since the Unix epoch, exactly the reader's conversion of the
//! CTF clock (the same as every converter's); durations are `INT64` nanoseconds. Each span's
//! fields are one JSON column, `args` (Parquet's `JSON` logical type; the Chrome conversion's
//! `args` object): the fields of a span name vary between programs, one column keeps one
//! schema for every trace. The columns of every table are in [`schema`] and docs/sql.md.
//!
//! Memory: rows go out in row groups of [`table::ROW_GROUP_ROWS`] rows; what is kept is the
//! open spans and one entry per thread, as for the other converters. `sched` streams too;
//! `thread_state` comes from the kernel analysis of the traced threads
//! ([`hushtrace_kernel::analysis::Timeline::build`] with the traced processes as roots), which
//! holds their scheduling history: it grows with the traced program's scheduling activity.

use hushtrace_ctf::reader::{Error as ReadError, Session};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod events;
mod kernel;
pub mod schema;
pub mod table;

use table::Table;

/// Options of an export.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The `host=` partition (default: [`default_host`]).
    pub host: Option<String>,
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The `host=` partition.
    pub host: String,
    /// The `session=` partition.
    pub session: String,
    /// `OUT/host=<host>/session=<session>`.
    pub dir: PathBuf,
    /// Rows per table, in file order.
    pub rows: Vec<(&'static str, u64)>,
    /// Warnings from the readers (and why a kernel trace that is there was not exported).
    pub warnings: Vec<String>,
}

/// An export failure.
#[derive(Debug)]
pub enum ExportError {
    /// The trace is unreadable or corrupt.
    Read(ReadError),
    /// A file or directory of the output could not be written.
    Io {
        /// The path.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The Parquet writer failed.
    Parquet(String),
    /// A host or session name that cannot be a partition directory.
    Name(String),
}

impl ExportError {
    fn io(path: &Path, source: std::io::Error) -> ExportError {
        ExportError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportError::Read(e) => write!(f, "{e}"),
            ExportError::Io { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
            ExportError::Parquet(e) => write!(f, "writing Parquet: {e}"),
            ExportError::Name(e) => write!(f, "{e}"),
        }
    }
}

// No `source()`: `Display` already includes the inner error.
impl std::error::Error for ExportError {}

impl From<ReadError> for ExportError {
    fn from(e: ReadError) -> Self {
        ExportError::Read(e)
    }
}

impl From<parquet::errors::ParquetError> for ExportError {
    fn from(e: parquet::errors::ParquetError) -> Self {
        match e {
            // The writer's I/O errors are the output's.
            parquet::errors::ParquetError::External(e) => ExportError::Parquet(e.to_string()),
            e => ExportError::Parquet(e.to_string()),
        }
    }
}

/// The host name `session` recorded (its first process trace's `env.hostname`), else this
/// machine's.
pub fn default_host(session: &Session) -> String {
    session
        .traces
        .iter()
        .map(|t| t.desc.hostname.trim())
        .find(|h| !h.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The session's name: its directory's last component (absolute, so `.` has one too).
fn session_name(session: &Session) -> String {
    let dir = std::path::absolute(&session.dir).unwrap_or_else(|_| session.dir.clone());
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".to_owned())
}

/// Checks that `value` can be the directory `key=value`.
fn check_partition(key: &str, value: &str) -> Result<(), ExportError> {
    if value.is_empty() || value == "." || value == ".." || value.contains(['/', '\0']) {
        return Err(ExportError::Name(format!(
            "{key} name {value:?} cannot be a directory name (empty, `.`, `..`, or with `/`)"
        )));
    }
    Ok(())
}

/// Exports `session` into `out` (created if missing; see the module docs for the layout).
/// `progress(bytes_read, total_bytes)` is called now and then. On failure nothing is left of
/// this export's files but the directories.
pub fn export(
    session: &Session,
    out: &Path,
    options: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Summary, ExportError> {
    let host = options
        .host
        .clone()
        .unwrap_or_else(|| default_host(session));
    let name = session_name(session);
    check_partition("host", &host)?;
    check_partition("session", &name)?;
    let dir = out
        .join(format!("host={host}"))
        .join(format!("session={name}"));
    std::fs::create_dir_all(&dir).map_err(|e| ExportError::io(&dir, e))?;
    let mut tables = Vec::new();
    let result = write_all(session, &dir, &mut tables, progress);
    match result {
        Ok(warnings) => {
            let mut rows = Vec::new();
            for (name, t) in tables {
                rows.push((name, t.finish()?));
            }
            Ok(Summary {
                host,
                session: name,
                dir,
                rows,
                warnings,
            })
        }
        Err(e) => {
            for (_, t) in tables {
                t.discard();
            }
            Err(e)
        }
    }
}

/// Creates the tables into `tables` (so that the caller can finish or discard them) and
/// fills them.
fn write_all(
    session: &Session,
    dir: &Path,
    tables: &mut Vec<(&'static str, Table)>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<String>, ExportError> {
    for (name, cols) in [
        ("slices", schema::SLICES),
        ("instants", schema::INSTANTS),
        ("counters", schema::COUNTERS),
        ("losses", schema::LOSSES),
        ("threads", schema::THREADS),
        ("processes", schema::PROCESSES),
    ] {
        tables.push((name, Table::create(dir, name, cols)?));
    }
    let [(_, slices), (_, instants), (_, counters), (_, losses), (_, th), (_, pr)] =
        tables.as_mut_slice()
    else {
        return Err(ExportError::Parquet("the tables were not created".into()));
    };
    let mut t = events::Tables {
        slices,
        instants,
        counters,
        losses,
    };
    let (threads, warnings) = events::read(session, &mut t, progress)?;
    write_threads(session, &threads, th)?;
    write_processes(session, &threads, pr)?;
    let mut warnings: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
    match kernel::open(session) {
        Ok(Some(k)) => {
            tables.push(("sched", Table::create(dir, "sched", schema::SCHED)?));
            if let Some((_, t)) = tables.last_mut() {
                warnings.extend(kernel::write_sched(&k, t)?);
            }
            let ts = Table::create(dir, "thread_state", schema::THREAD_STATE)?;
            tables.push(("thread_state", ts));
            if let Some((_, t)) = tables.last_mut() {
                kernel::write_thread_state(session, &k, &threads, t)?;
            }
        }
        Ok(None) => {
            // A trace exported again without its kernel part keeps no stale kernel tables.
            for name in ["sched", "thread_state"] {
                let _ = std::fs::remove_file(dir.join(format!("{name}.parquet")));
            }
        }
        Err(why) => warnings.push(why),
    }
    Ok(warnings)
}

fn process_name(session: &Session, pid: u32) -> &str {
    session
        .traces
        .iter()
        .find(|t| t.desc.vpid == pid)
        .map_or("", |t| t.desc.procname.as_str())
}

fn write_threads(
    session: &Session,
    threads: &BTreeMap<(u32, u32), events::ThreadAcc>,
    t: &mut Table,
) -> Result<(), ExportError> {
    for (&(pid, tid), th) in threads {
        t.row()
            .i64(pid.into())
            .i64(tid.into())
            .str(&th.name)
            .str(process_name(session, pid))
            .i64(events::ns(th.first_ns))
            .i64(events::ns(th.last_ns))
            .i64(to_i64(th.events))
            .i64(to_i64(th.discarded))
            .i64(to_i64(th.lost_packets))
            .end()?;
    }
    Ok(())
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn write_processes(
    session: &Session,
    threads: &BTreeMap<(u32, u32), events::ThreadAcc>,
    t: &mut Table,
) -> Result<(), ExportError> {
    // Per pid: (first, last, events, threads, discarded, lost packets).
    let mut pids: BTreeMap<u32, (i128, i128, u64, u64, u64, u64)> = BTreeMap::new();
    for (&(pid, _), th) in threads {
        let e = pids
            .entry(pid)
            .or_insert((th.first_ns, th.last_ns, 0, 0, 0, 0));
        e.0 = e.0.min(th.first_ns);
        e.1 = e.1.max(th.last_ns);
        e.2 += th.events;
        e.3 += 1;
        e.4 = e.4.saturating_add(th.discarded);
        e.5 = e.5.saturating_add(th.lost_packets);
    }
    let mut all: Vec<u32> = pids.keys().copied().collect();
    all.extend(session.traces.iter().map(|t| t.desc.vpid));
    all.sort_unstable();
    all.dedup();
    for pid in all {
        let trace = session.traces.iter().find(|t| t.desc.vpid == pid);
        let acc = pids.get(&pid);
        let origin = trace.map_or(hushtrace_ctf::reader::Origin::Recorded, |t| t.origin);
        let stats = trace.and_then(|t| t.stats);
        t.row()
            .i64(pid.into())
            .str(process_name(session, pid))
            .opt_str(trace.map(|t| t.name.as_str()))
            .str(crate::report::origin_name(origin))
            .bool(trace.is_none_or(crate::report::complete))
            .opt_i64(acc.map(|a| events::ns(a.0)))
            .opt_i64(acc.map(|a| events::ns(a.1)))
            .i64(to_i64(acc.map_or(0, |a| a.2)))
            .i64(to_i64(acc.map_or(0, |a| a.3)))
            .i64(to_i64(acc.map_or(0, |a| a.4)))
            .i64(to_i64(acc.map_or(0, |a| a.5)))
            .opt_i64(stats.map(|s| to_i64(s.written)))
            .opt_i64(stats.map(|s| to_i64(s.discarded)))
            .end()?;
    }
    Ok(())
}
