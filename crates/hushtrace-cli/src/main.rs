//! The `hushtrace` command. See `hushtrace --help`.
#![forbid(unsafe_code)]

use anyhow::Context as _;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use hushtrace::Mode;
use hushtrace_cli::record::{self, RecordOptions};
use hushtrace_cli::{chrome, flame, perfetto, report};
use hushtrace_ctf::reader::Session;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// hushtrace: record, convert and summarise traces of the hushtrace userspace tracer.
#[derive(Parser, Debug)]
#[command(
    name = "hushtrace",
    version,
    about = "The hushtrace command: record, convert, report, flamegraph, recover, ctl, demo.",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
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
        /// The command to run, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Convert a trace to Chrome trace-event JSON (Perfetto UI, chrome://tracing) or to
    /// Perfetto's native protobuf trace (smaller, faster to load in the Perfetto UI).
    Convert {
        /// Session (or single process) trace directory.
        dir: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "chrome")]
        to: Format,
        /// Output file (`-` for stdout): `.json` or `.json.gz` (gzip) for chrome, e.g.
        /// `.perfetto-trace` (or `.gz`) for perfetto. A new file is created with mode 0600
        /// (owner only), like the trace it comes from.
        #[arg(short, long, value_name = "OUT")]
        output: PathBuf,
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
    /// Trace a built-in workload (threads with nested spans, a real-time thread in no-syscall
    /// mode, a forked worker process), then write trace.json and flame.svg and print the report.
    Demo {
        /// Directory for the trace, trace.json and flame.svg.
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
    },
}

/// `--mode`: the spellings of [`Mode`], parsed by its `FromStr`.
fn mode_parser() -> impl TypedValueParser<Value = Mode> {
    PossibleValuesParser::new(Mode::ALL.map(Mode::as_str)).try_map(|s| s.parse::<Mode>())
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// Chrome trace-event JSON.
    Chrome,
    /// Perfetto's protobuf trace (TracePacket/TrackEvent).
    Perfetto,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ReportFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    // Usage errors exit 2 (clap's default), --help/--version exit 0.
    let cli = Cli::parse();
    if matches!(cli.command, Cmd::Convert { .. } | Cmd::Flamegraph { .. }) {
        // Before any thread starts: an interruption removes the output being written.
        hushtrace_cli::interrupt::watch();
    }
    match run(cli) {
        Ok(code) => code,
        // The reader of our stdout went away (`hushtrace convert -o - | head`): nothing left to
        // say to anyone, and not a failure of ours.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hushtrace: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Whether `e` comes from writing to a pipe whose reader has gone (`EPIPE`; Rust ignores
/// `SIGPIPE`, so writes fail with it instead of killing the process).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let io = c.downcast_ref::<std::io::Error>().or_else(|| {
            match c.downcast_ref::<chrome::ConvertError>() {
                Some(chrome::ConvertError::Write(e)) => Some(e),
                _ => None,
            }
        });
        io.is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Opens the trace at `dir` (recovering dead processes' rings first) and prints the reader's
/// warnings; with `say_elsewhere`, also where the events are when the directory holds none
/// although its processes wrote some (a relay-only session).
fn open_session(dir: &Path, say_elsewhere: bool) -> anyhow::Result<Session> {
    // Said once, and without advising `hushtrace recover` on a path that is not there.
    if let Err(e) = std::fs::symlink_metadata(dir) {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::bail!("{}: no such file or directory", dir.display());
        }
    }
    // Rings of processes that died without stopping hold their newest events: recover first.
    hushtrace_cli::recover::before_reading(dir);
    // The reader's errors name the directory or file already.
    let s = Session::open(dir)?;
    for w in &s.warnings {
        eprintln!("hushtrace: warning: {w}");
    }
    if say_elsewhere {
        if let Some(msg) = report::elsewhere(&s) {
            eprintln!("hushtrace: warning: {msg}");
        }
    }
    Ok(s)
}

/// `hushtrace ctl ...`.
fn ctl(args: &[String]) -> anyhow::Result<ExitCode> {
    use hushtrace_cli::ctl;
    if args.len() == 1 && args[0] == "list" {
        let procs = ctl::list().map_err(|e| anyhow::anyhow!("ctl list: {e}"))?;
        if procs.is_empty() {
            let dir = hushtrace::control::socket_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|e| e.to_string());
            eprintln!(
                "hushtrace: no process of this user is traced (no control socket answers in {dir})"
            );
        }
        for p in procs {
            println!("{} {} {}", p.pid, p.name, p.state);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let usage = "usage: hushtrace ctl TARGET (status | list | enable GLOB | disable GLOB | \
                 snapshot [-o DIR] | stop | start), or hushtrace ctl list";
    let (target, rest) = args.split_first().ok_or_else(|| anyhow::anyhow!(usage))?;
    let line = match rest
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["status"] => "status".to_string(),
        ["stop"] => "stop".to_string(),
        ["start"] => "start".to_string(),
        ["list"] => {
            return match ctl::tracepoints(target) {
                Ok(true) => Ok(ExitCode::SUCCESS),
                Ok(false) => Ok(ExitCode::from(1)),
                Err(e) => {
                    eprintln!("hushtrace: {e}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        ["enable", g] => format!("enable {g}"),
        ["disable", g] => format!("disable {g}"),
        ["snapshot"] => "snapshot".to_string(),
        ["snapshot", "-o", d] | ["snapshot", "--output", d] => {
            let d = std::path::absolute(d).with_context(|| format!("bad directory {d}"))?;
            format!("snapshot {}", d.display())
        }
        _ => {
            eprintln!("hushtrace: error: {usage}");
            return Ok(ExitCode::from(2));
        }
    };
    match ctl::run(target, &line) {
        Ok(true) => Ok(ExitCode::SUCCESS),
        Ok(false) => Ok(ExitCode::from(1)),
        Err(e) => {
            eprintln!("hushtrace: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Cmd::Record {
            output,
            mode,
            subbuf_size,
            num_subbufs,
            force,
            append,
            enable,
            relay,
            relay_session,
            relay_host,
            relay_only,
            direct_io,
            consumer_sched,
            consumer_cpus,
            kernel,
            kernel_buffer_kb,
            command,
        } => {
            if !enable.is_empty() {
                // Inherited by the command; checked by its session start like any value.
                std::env::set_var(hushtrace::env::ENABLE, enable.join(","));
            }
            let output = std::path::absolute(&output)
                .with_context(|| format!("bad output directory {}", output.display()))?;
            let opts = RecordOptions {
                output,
                mode,
                subbuf_size,
                num_subbufs,
                relay,
                relay_session,
                relay_host,
                relay_only,
                direct_io,
                consumer_sched,
                consumer_cpus: consumer_cpus.map(|c| c.0),
                command,
            };
            if let Err(e) = opts.validate() {
                // A usage error, like the ones clap reports.
                eprintln!("hushtrace: error: {e}");
                return Ok(ExitCode::from(2));
            }
            if let Err(e) = opts.check_relay_reachable(std::time::Duration::from_secs(3)) {
                eprintln!("hushtrace: error: --relay: {e}");
                return Ok(ExitCode::from(2));
            }
            let existing = record::existing_trace(&opts.output);
            if !existing.is_empty() && !append {
                if !force {
                    anyhow::bail!(
                        "{} already holds a trace ({}): use --force to replace it or --append \
                         to add to it, or choose another directory",
                        opts.output.display(),
                        record::describe_trace(&existing)
                    );
                }
                record::remove_trace(&opts.output, &existing)?;
            }
            let krec = match kernel.as_deref() {
                Some(cats) => {
                    let overwrite = opts.mode == Some(Mode::Overwrite);
                    let k = hushtrace_cli::kernel::start(
                        &opts.output,
                        cats,
                        kernel_buffer_kb,
                        force,
                        overwrite,
                    );
                    match k {
                        Ok(k) => Some(k),
                        Err(code) => return Ok(code),
                    }
                }
                None => None,
            };
            let status = record::run_status(&opts);
            if let Some(k) = krec {
                k.finish(&opts.output);
            }
            let status = status?;
            let traced = print_record_summary(&opts, status);
            let code = record::exit_code(status).clamp(0, 255) as u8;
            // A Python program that could not start tracing is an error, even if it exited 0.
            Ok(ExitCode::from(if traced || code != 0 { code } else { 1 }))
        }
        Cmd::Convert {
            dir,
            to,
            output,
            quiet,
            relative_time,
        } => {
            let session = open_session(&dir, true)?;
            let options = chrome::Options {
                relative: relative_time,
            };
            convert(&session, to, &output, options, quiet)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Recover { dir } => {
            let lines =
                hushtrace_cli::recover::run(&dir).map_err(|e| anyhow::anyhow!("recover: {e}"))?;
            let (klines, kproblem) = hushtrace_cli::recover::kernel(&dir);
            let lines: Vec<String> = lines
                .into_iter()
                .chain(klines)
                .chain(hushtrace_cli::kernel::remove_stale())
                .collect();
            if lines.is_empty() {
                println!("{}: nothing to recover", dir.display());
            }
            for l in lines {
                println!("{l}");
            }
            // An unreadable kernel trace (said above) is a failure.
            Ok(match kproblem {
                Some(_) => ExitCode::FAILURE,
                None => ExitCode::SUCCESS,
            })
        }
        Cmd::Ctl { args } => ctl(&args),
        Cmd::Report {
            dir,
            format,
            slowest,
            n,
        } => {
            let session = open_session(&dir, false)?;
            if let Some(span) = slowest.as_deref() {
                let k = hushtrace_cli::kernel_report::compute(&session, Some(span), n)?;
                print!("{}", k.slowest_text());
                return Ok(ExitCode::SUCCESS);
            }
            let r = report::compute(&session)?;
            let mut out = std::io::stdout().lock();
            match format {
                ReportFormat::Text => {
                    out.write_all(r.to_text().as_bytes())?;
                    let k = hushtrace_cli::kernel_report::compute(&session, None, 0)?;
                    out.write_all(k.to_text().as_bytes())?;
                }
                ReportFormat::Json => {
                    let k = hushtrace_cli::kernel_report::compute(&session, None, 0)?;
                    serde_json::to_writer_pretty(
                        &mut out,
                        &k.with_json(serde_json::to_value(&r)?),
                    )?;
                    writeln!(out)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Flamegraph {
            dir,
            output,
            per_process,
            per_thread,
            folded,
        } => {
            let session = open_session(&dir, true)?;
            let roots = if per_thread {
                flame::Roots::Thread
            } else if per_process {
                flame::Roots::Process
            } else {
                flame::Roots::Merged
            };
            write_atomically(&output, |w| {
                if folded {
                    Ok(flame::write_folded(&session, roots, w)?)
                } else {
                    Ok(flame::write_svg_by(&session, roots, w)?)
                }
            })?;
            if output.as_os_str() != "-" {
                eprintln!("wrote {}", output.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Demo { output } => {
            let out = hushtrace_cli::demo::run(&output)?;
            print!("{}", out.report.to_text());
            println!(
                "This process wrote {} events ({} discarded); the forked worker wrote its own trace.\n",
                out.stats.events_written, out.stats.events_discarded
            );
            println!(
                "CTF trace:   {}  (one directory per process)",
                out.dir.display()
            );
            println!("Chrome JSON: {}", out.chrome_json.display());
            println!("Flame graph: {}", out.flame_svg.display());
            println!();
            println!("Open the JSON in the Perfetto UI: https://ui.perfetto.dev -> \"Open trace file\" (or chrome://tracing).");
            println!("Open the flame graph in a web browser.");
            println!(
                "Read the CTF with babeltrace2:    babeltrace2 {}",
                out.dir.display()
            );
            println!(
                "Summarise it again:               hushtrace report {}",
                out.dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Prints what the command wrote; false when it was a Python program that could not start
/// tracing (the package is not importable by its interpreter).
fn print_record_summary(opts: &RecordOptions, status: std::process::ExitStatus) -> bool {
    let dir = &opts.output;
    let prog = opts
        .command
        .first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let killed = record::killed_by(status);
    if let Some(k) = &killed {
        eprintln!("hushtrace: {prog} was {k}");
    }
    println!("trace: {}", dir.display());
    if let Some(url) = &opts.relay {
        let (host, session) = hushtrace::relay_default_names(dir);
        let host = opts.relay_host.clone().unwrap_or(host);
        let session = opts.relay_session.clone().unwrap_or(session);
        let only = if opts.relay_only {
            " (relay only: no local event streams)"
        } else {
            ""
        };
        println!("  streamed to the relay at {url} as {host}/{session}{only}");
    }
    let stats = record::session_stats(dir);
    let incomplete = record::incomplete_traces(dir);
    if stats.is_empty() && incomplete.is_empty() {
        if killed.is_some() {
            println!("  no trace: the program was killed before it wrote any");
        } else if let Some(why) = record::python_without_package(&opts.command) {
            println!("  no trace");
            eprintln!("hushtrace: error: {why}");
            return false;
        } else {
            println!("  no trace (did the program call hushtrace::start_from_env()?)");
        }
    }
    for (name, s) in stats {
        match s {
            Some(s) => println!(
                "  process {} ({}): {} events written, {} discarded",
                s.pid,
                record::process_name(dir, &name),
                s.written,
                s.discarded
            ),
            None => println!(
                "  process {name}: unreadable stats file {} (malformed, or not a regular file)",
                dir.join(hushtrace_ctf::stats::file_name(&name)).display()
            ),
        }
    }
    for name in incomplete {
        println!(
            "  process {name} ({}): incomplete trace: it did not stop tracing (no stats file){}",
            record::process_name(dir, &name),
            if killed.is_some() {
                ""
            } else {
                " - crashed, killed or still running"
            }
        );
    }
    true
}

/// Writes `path` through a temporary file renamed on success, so a failure never leaves a
/// partial output behind. `-` writes to stdout; an existing non-regular file (`/dev/null`, a
/// FIFO) is written in place: renaming over it would replace the device or pipe.
fn write_atomically(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        f(&mut out)?;
        return Ok(out.flush()?);
    }
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let mut w = std::io::BufWriter::new(file);
        f(&mut w)?;
        return w
            .flush()
            .with_context(|| format!("cannot write {}", path.display()));
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    // A stale temporary file from an interrupted run (never a directory or device).
    if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_file() || m.is_symlink()) {
        let _ = std::fs::remove_file(&tmp);
    }
    // Ctrl-C or SIGTERM while writing removes the temporary file (it can be as large as the
    // output) and ends the command by that signal.
    let _registered = hushtrace_cli::interrupt::remove_on_interrupt(&tmp);
    let result = (|| {
        let file = hushtrace_cli::create_private(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut w = std::io::BufWriter::new(file);
        f(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn convert(
    session: &Session,
    to: Format,
    output: &Path,
    options: chrome::Options,
    quiet: bool,
) -> anyhow::Result<()> {
    let gz = output.extension().is_some_and(|e| e == "gz");
    // A bar only for a person watching: stderr and stdout on a terminal, JSON not on stdout.
    let interactive = std::io::stderr().is_terminal() && std::io::stdout().is_terminal();
    let bar = (!quiet && interactive && output.as_os_str() != "-").then(|| {
        let bar = indicatif::ProgressBar::new(session.stream_bytes());
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} converting [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar
    });
    let mut progress = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    };
    let mut summary = None;
    write_atomically(output, |w| {
        let s = if gz {
            let mut enc = flate2::write::GzEncoder::new(w, flate2::Compression::default());
            let s = match to {
                Format::Chrome => chrome::convert_with(session, &mut enc, options, &mut progress)?,
                Format::Perfetto => perfetto::convert(session, &mut enc, &mut progress)?,
            };
            enc.finish()?;
            s
        } else {
            match to {
                Format::Chrome => chrome::convert_with(session, w, options, &mut progress)?,
                Format::Perfetto => perfetto::convert(session, w, &mut progress)?,
            }
        };
        summary = Some(s);
        Ok(())
    })?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(s) = summary {
        for w in &s.warnings {
            eprintln!("hushtrace: warning: {w}");
        }
        if !quiet {
            eprintln!(
                "wrote {}: {} events, {} process(es), {} thread(s){}",
                if output.as_os_str() == "-" {
                    "stdout".into()
                } else {
                    output.display().to_string()
                },
                s.events,
                s.processes,
                s.threads,
                if s.unmatched_ends > 0 {
                    format!(", {} span end(s) without begin dropped", s.unmatched_ends)
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(())
}

/// `--consumer-sched`: the runtime's own parser, so the CLI accepts what the variable does.
fn parse_consumer_sched(v: &str) -> Result<hushtrace::ConsumerSched, String> {
    v.parse()
}

/// A `--consumer-cpus` value: one argument, a whole list (a `Vec` field would make clap
/// expect one CPU per argument).
#[derive(Clone, Debug)]
struct CpuList(Vec<usize>);

/// `--consumer-cpus`: the runtime's own CPU-list parser.
fn parse_cpus(v: &str) -> Result<CpuList, String> {
    hushtrace::parse_cpu_list(v).map(CpuList)
}
