//! The library behind the `hushtrace` command, so the `demo` subcommand, the tests and the
//! benchmarks call the same code as the command line.
//!
//! * [`chrome`]: CTF → Chrome trace-event JSON (Perfetto UI, chrome://tracing), streaming.
//! * [`perfetto`]: CTF → Perfetto's native protobuf trace (`TrackEvent`), streaming.
//! * [`parquet_export`]: CTF → Parquet tables (feature `parquet`, on by default).
//! * [`report`]: summary statistics (time range, per thread counts, span durations, counters).
//! * [`flame`]: flame graph SVG of spans via `inferno`.
//! * [`record`]: running a command with the `HUSHTRACE_*` environment.
//! * [`demo`]: the built-in workload traced by the embedded tracer.
//! * [`kernel`], [`kernel_report`]: `record --kernel` and the off-CPU report.
//! * [`late_report`]: `report --late`, the late-span captures (`record --on-late`) explained.
//! * [`spans`]: matching span begin/end events per thread, shared by report and flame graph.
//! * [`view`]: `hushtrace view`, the trace served to the Perfetto UI and the link that opens it.
//! * [`interrupt`]: an output still being written is removed when Ctrl-C or SIGTERM ends the
//!   command.
//!
//! Outputs derived from a trace are created with mode 0600 ([`create_private`]), like the trace.
//!
//! ```
//! use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
//! use hushtrace_ctf::reader::Session;
//!
//! let dir = std::env::temp_dir().join(format!("hushtrace-cli-doc-{}", std::process::id()));
//! let mut t = SynthTrace::new(10, "app");
//! let (b, e) = t.span("io:read", &[]);
//! t.thread(11, "main").event(SynthEvent::new(b, 100)).event(SynthEvent::new(e, 350));
//! t.write_session(&dir).unwrap();
//!
//! let session = Session::open(&dir).unwrap();
//! let report = hushtrace_cli::report::compute(&session).unwrap();
//! assert_eq!(report.spans[0].name, "io:read");
//! assert_eq!(report.spans[0].max_ns, 250);
//! let mut json = Vec::new();
//! hushtrace_cli::chrome::convert(&session, &mut json, &mut |_, _| {}).unwrap();
//! assert!(String::from_utf8(json).unwrap().contains(r#""ph":"B""#));
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```
#![deny(unsafe_code)]

pub mod chrome;
pub mod ctl;
#[allow(unsafe_code)] // fork() and waitpid() for the forked worker process
pub mod demo;
pub mod exceptions_report;
pub mod flame;
#[allow(unsafe_code)] // signal masks and sigwait() for the interrupt watcher
pub mod interrupt;
pub mod kernel;
pub mod kernel_convert;
pub mod kernel_report;
pub mod late_report;
pub mod output;
#[cfg(feature = "parquet")]
pub mod parquet_export;
pub mod perfetto;
pub mod perfetto_proto;
pub mod progress;
pub mod pyfuncs;
pub mod record;
pub mod recover;
pub mod report;
pub mod spans;
pub mod view;

/// Creates the new file `path` for an output derived from a trace (Chrome JSON, flame graph)
/// with mode 0600, owner only, like the trace's own files: a trace may hold private data, and
/// what is derived from it keeps it private. Fails if `path` exists (symbolic links included:
/// nothing is followed).
///
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// let p = std::env::temp_dir().join(format!("hushtrace-private-doc-{}", std::process::id()));
/// let f = hushtrace_cli::create_private(&p).unwrap();
/// assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0o600);
/// assert!(hushtrace_cli::create_private(&p).is_err());
/// std::fs::remove_file(&p).unwrap();
/// ```
pub fn create_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Splits `"category:name"` into `("category", "name")`; no colon means an empty category.
///
/// ```
/// assert_eq!(hushtrace_cli::split_name("io:read"), ("io", "read"));
/// assert_eq!(hushtrace_cli::split_name("plain"), ("", "plain"));
/// ```
pub fn split_name(full: &str) -> (&str, &str) {
    full.split_once(':').unwrap_or(("", full))
}
