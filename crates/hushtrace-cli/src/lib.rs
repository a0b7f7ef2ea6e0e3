//! The library behind the `hushtrace` command, so the `demo` subcommand, the tests and the
//! benchmarks call the same code as the command line.
//!
//! * [`chrome`]: CTF → Chrome trace-event JSON (Perfetto UI, chrome://tracing), streaming.
//! * [`report`]: summary statistics (time range, per thread counts, span durations, counters).
//! * [`flame`]: flame graph SVG of spans via `inferno`.
//! * [`record`]: running a command with the `HUSHTRACE_*` environment.
//! * [`demo`]: the built-in workload traced by the embedded tracer.
//! * [`spans`]: matching span begin/end events per thread, shared by report and flame graph.
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
#[allow(unsafe_code)] // fork() and waitpid() for the forked worker process
pub mod demo;
pub mod flame;
pub mod record;
pub mod report;
pub mod spans;

/// Splits `"category:name"` into `("category", "name")`; no colon means an empty category.
///
/// ```
/// assert_eq!(hushtrace_cli::split_name("io:read"), ("io", "read"));
/// assert_eq!(hushtrace_cli::split_name("plain"), ("", "plain"));
/// ```
pub fn split_name(full: &str) -> (&str, &str) {
    full.split_once(':').unwrap_or(("", full))
}
