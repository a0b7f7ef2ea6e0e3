//! The command line: the subcommands, their arguments and the parsers of their values.

use super::*;

/// hushtrace: record, convert and summarise traces of the hushtrace userspace tracer.
#[derive(Parser, Debug)]
#[command(
    name = "hushtrace",
    version,
    about = "The hushtrace command: record, convert, view, report, flamegraph, recover, ctl, demo.",
    propagate_version = true
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Cmd,
}

#[derive(Subcommand, Debug)]
pub(super) enum Cmd {
    /// Run a command with tracing enabled (HUSHTRACE_* environment) and report what it wrote.
    Record {
        /// Session directory to write the trace into.
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
        /// Buffer mode: drop new events when full, or overwrite the oldest (flight recorder).
        #[arg(long, value_parser = mode_parser())]
        mode: Option<Mode>,
        /// Sub-buffer (packet) size in bytes; checked against the runtime's limits before the
        /// command runs (exit code 2 if refused).
        #[arg(long, value_name = "N")]
        subbuf_size: Option<u64>,
        /// Number of sub-buffers per thread; checked like --subbuf-size.
        #[arg(long, value_name = "N")]
        num_subbufs: Option<u64>,
        /// Replace the trace already in the output directory (its process directories and
        /// statistics files; nothing else in the directory is touched).
        #[arg(long, conflicts_with = "append")]
        force: bool,
        /// Add this run's processes to the trace already in the output directory.
        #[arg(long)]
        append: bool,
        /// Globs applied at session start, in order (`HUSHTRACE_ENABLE`); a leading `-`
        /// disables: `--enable '-*' --enable 'app:*'` records only `app`.
        #[arg(long, value_name = "GLOB", allow_hyphen_values = true)]
        enable: Vec<String>,
        /// Also stream the session to an LTTng relay daemon (`lttng-relayd`) at
        /// `net://HOST[:CONTROL_PORT[:DATA_PORT]]` (`HUSHTRACE_RELAY`); the local directory
        /// stays complete. Checked (address and reachability) before the command runs.
        #[arg(long, value_name = "URL")]
        relay: Option<String>,
        /// The session's name on the relay (default: the output directory's name).
        #[arg(long, value_name = "NAME", requires = "relay")]
        relay_session: Option<String>,
        /// The host name the relay files the session under (default: this machine's).
        #[arg(long, value_name = "NAME", requires = "relay")]
        relay_host: Option<String>,
        /// Send the event streams only to the relay, not to the local directory (which keeps
        /// the metadata and statistics): `HUSHTRACE_RELAY_ONLY=1`.
        #[arg(long, requires = "relay")]
        relay_only: bool,
        /// Write the stream files with O_DIRECT where the file system supports it
        /// (`HUSHTRACE_DIRECT_IO=1`): no copy into the page cache, packets padded to the
        /// block size; the consumer then waits for the disk (docs/BENCHMARKS.md §12).
        #[arg(long)]
        direct_io: bool,
        /// How the tracer's consumer thread is scheduled (`HUSHTRACE_CONSUMER_SCHED`):
        /// `inherit` (default), `fifo:N` or `rr:N` (real-time priority 1-99, needs
        /// CAP_SYS_NICE or `ulimit -r`), `nice:N`.
        #[arg(long, value_name = "SCHED", value_parser = parse_consumer_sched)]
        consumer_sched: Option<hushtrace::ConsumerSched>,
        /// The CPUs the consumer thread may run on, as `taskset -c` writes them
        /// (`HUSHTRACE_CONSUMER_CPUS`): a housekeeping core, away from real-time ones.
        #[arg(long, value_name = "CPUS", value_parser = parse_cpus)]
        consumer_cpus: Option<CpuList>,
        /// Also record the kernel's scheduling (`sched`, the default), interrupts (`irq`) and
        /// the program's system calls (`syscalls`), comma-separated, from a private ftrace
        /// instance into DIR/kernel (root, or write access to tracefs; exit code 2 otherwise).
        #[arg(long, value_name = "CATS", num_args = 0..=1, default_missing_value = "sched")]
        kernel: Option<String>,
        /// Per-CPU ftrace buffer size for --kernel, in KiB (default 4096).
        #[arg(long, value_name = "KB", requires = "kernel")]
        kernel_buffer_kb: Option<u32>,
        /// The late-span flags (boxed: the variant stays small).
        #[command(flatten)]
        late: Box<LateArgs>,
        /// The command to run, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Convert a trace to Chrome trace-event JSON (Perfetto UI, chrome://tracing), to
    /// Perfetto's native protobuf trace (smaller, faster to load in the Perfetto UI) or to
    /// Parquet tables for SQL engines (DuckDB, Spark: docs/sql.md).
    Convert {
        /// Session (or single process) trace directory.
        dir: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "chrome")]
        to: Format,
        /// Output file (`-` for stdout): `.json` or `.json.gz` (gzip) for chrome, e.g.
        /// `.perfetto-trace` (or `.gz`) for perfetto. A new file is created with mode 0600
        /// (owner only), like the trace it comes from. For parquet, a folder (created if
        /// missing): OUT/host=HOST/session=SESSION/<table>.parquet.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// Parquet: the `host=` partition (default: the host name the trace recorded).
        #[arg(long, value_name = "NAME")]
        host: Option<String>,
        /// No progress bar.
        #[arg(short, long)]
        quiet: bool,
        /// Chrome JSON: `ts` in microseconds since the first event of the trace. Now always the
        /// case (the absolute origin is in the file's `otherData`); accepted for compatibility.
        #[arg(long)]
        relative_time: bool,
    },
    /// Summarise a trace: time range, events per thread, span durations, counters.
    Report {
        /// Session (or single process) trace directory.
        dir: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: ReportFormat,
        /// List the late-span captures (DIR/late/index.json, `record --on-late`): each span
        /// against its deadline and, with kernel events, why it was late.
        #[arg(long, conflicts_with = "slowest")]
        late: bool,
        /// List the Python exceptions (`py:exception`: `python -m hushtrace run
        /// --exceptions`) by type and function: frames unwound, caught further up or not.
        #[arg(long, conflicts_with_all = ["slowest", "late"])]
        exceptions: bool,
        /// List the longest instances of this span (`rt:cycle`) with, when the trace has
        /// kernel events (`record --kernel`), their off-CPU stretches and what took the CPU.
        #[arg(long, value_name = "SPAN")]
        slowest: Option<String>,
        /// How many instances --slowest lists.
        #[arg(
            short = 'n',
            value_name = "N",
            default_value_t = 10,
            requires = "slowest"
        )]
        n: usize,
    },
    /// Draw the spans of a trace as a flame graph SVG (widths by inclusive time).
    Flamegraph {
        /// Session (or single process) trace directory.
        dir: PathBuf,
        /// Output SVG file (with --folded: the folded stacks; `-` for stdout), created with
        /// mode 0600 (owner only), like the trace.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
        /// One root frame per process instead of merging all processes.
        #[arg(long, conflicts_with = "per_thread")]
        per_process: bool,
        /// One root frame per thread (`name (pid/tid)`).
        #[arg(long)]
        per_thread: bool,
        /// Write folded stacks (`a;b;c <ns>` lines, for inferno-flamegraph or flamegraph.pl)
        /// instead of the SVG.
        #[arg(long)]
        folded: bool,
    },
    /// Turn the rings of processes that ended without stopping (killed, crashed) into ordinary
    /// CTF streams. Idempotent; processes that still run are left alone. `report`, `convert`
    /// and `flamegraph` do this first by themselves.
    Recover {
        /// Session (or single process) trace directory.
        dir: PathBuf,
    },
    /// Control a running traced program: `ctl TARGET status`, `ctl TARGET list` (its
    /// tracepoints and their state), `ctl TARGET enable GLOB`, `ctl TARGET disable GLOB`,
    /// `ctl TARGET snapshot [-o DIR]`, `ctl TARGET stop`, `ctl TARGET start` (again, after a
    /// stop), or `ctl list`. TARGET is a pid or a trace directory (all its traced processes).
    Ctl {
        /// `list`, or TARGET followed by the request.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Open a trace in the Perfetto UI: convert it to Perfetto's format (as `convert --to
    /// perfetto`), serve it on 127.0.0.1 to https://ui.perfetto.dev and open (or print) the
    /// link that loads it, like Perfetto's `open_trace_in_ui`. The link is printed on stdout;
    /// the command ends once the UI has loaded the trace (one download), or on Ctrl-C.
    View {
        /// Session (or single process) trace directory.
        dir: PathBuf,
        /// The port on 127.0.0.1 to serve on. The Perfetto UI at ui.perfetto.dev fetches from
        /// 9001 only; 0 takes any free port (for another client, or a UI that allows it).
        #[arg(long, value_name = "N", default_value_t = hushtrace_cli::view::DEFAULT_PORT)]
        port: u16,
        /// Only print the link; do not start a browser (without this, `$BROWSER`, else
        /// `xdg-open` when there is a display, is started; no browser is not an error).
        #[arg(long)]
        no_browser: bool,
    },
    /// Trace a built-in workload (threads with nested spans, a real-time thread in no-syscall
    /// mode, a forked worker process), then write trace.json and flame.svg and print the report.
    Demo {
        /// Directory for the trace, trace.json and flame.svg.
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
    },
}

/// `record`'s late-span flags (issue 31): checked by `record::LateOptions::from_flags`.
#[derive(clap::Args, Debug)]
pub(super) struct LateArgs {
    /// Span deadlines, `GLOB>DURATION` (`rt:cycle>1500us`; units ns, us, ms, s; several
    /// comma-separated; repeatable, a later rule overriding an earlier one): a span that
    /// ends later than its deadline is counted and captured into DIR/late/<n>/
    /// (`HUSHTRACE_ON_LATE`). Checked before the command runs (exit code 2 if refused).
    #[arg(long, value_name = "SPEC")]
    pub(super) on_late: Vec<String>,
    /// The most late-span captures per process (`HUSHTRACE_LATE_MAX`); later late spans
    /// are only counted.
    #[arg(long, value_name = "N")]
    pub(super) late_max: Option<u64>,
    /// The least time between two late-span captures, as `1s` or `500ms`
    /// (`HUSHTRACE_LATE_INTERVAL`).
    #[arg(long, value_name = "D")]
    pub(super) late_interval: Option<String>,
    /// How far before a late span's start its capture reaches, as `100ms`
    /// (`HUSHTRACE_LATE_WINDOW`).
    #[arg(long, value_name = "D")]
    pub(super) late_window: Option<String>,
}

/// `--mode`: the spellings of [`Mode`], parsed by its `FromStr`.
fn mode_parser() -> impl TypedValueParser<Value = Mode> {
    PossibleValuesParser::new(Mode::ALL.map(Mode::as_str)).try_map(|s| s.parse::<Mode>())
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum Format {
    /// Chrome trace-event JSON.
    Chrome,
    /// Perfetto's protobuf trace (TracePacket/TrackEvent).
    Perfetto,
    /// Parquet tables (slices, instants, counters, threads, processes, losses).
    #[cfg(feature = "parquet")]
    Parquet,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum ReportFormat {
    Text,
    Json,
}

/// `--consumer-sched`: the runtime's own parser, so the CLI accepts what the variable does.
fn parse_consumer_sched(v: &str) -> Result<hushtrace::ConsumerSched, String> {
    v.parse()
}

/// A `--consumer-cpus` value: one argument, a whole list (a `Vec` field would make clap
/// expect one CPU per argument).
#[derive(Clone, Debug)]
pub(super) struct CpuList(pub(super) Vec<usize>);

/// `--consumer-cpus`: the runtime's own CPU-list parser.
fn parse_cpus(v: &str) -> Result<CpuList, String> {
    hushtrace::parse_cpu_list(v).map(CpuList)
}
