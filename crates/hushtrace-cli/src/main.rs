//! The `hushtrace` command. See `hushtrace --help`.
#![forbid(unsafe_code)]

use anyhow::Context as _;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use hushtrace::Mode;
use hushtrace_cli::record::{self, RecordOptions};
use hushtrace_cli::{chrome, flame, late_report, perfetto, report};
use hushtrace_ctf::reader::Session;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[path = "cli/args.rs"]
mod args;
#[path = "cli/convert_out.rs"]
mod convert_out;
use args::*;
use convert_out::*;

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
            late,
            command,
        } => {
            let late = match record::LateOptions::from_flags(
                &late.on_late,
                late.late_max,
                late.late_interval.as_deref(),
                late.late_window.as_deref(),
            ) {
                Ok(l) => l,
                Err(e) => {
                    // A usage error, like the ones clap reports; nothing has started.
                    eprintln!("hushtrace: error: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
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
                late,
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
            host,
        } => {
            let session = open_session(&dir, true)?;
            #[cfg(feature = "parquet")]
            if matches!(to, Format::Parquet) {
                convert_parquet(&session, &output, host, quiet)?;
                return Ok(ExitCode::SUCCESS);
            }
            if host.is_some() {
                anyhow::bail!("--host applies to --to parquet only");
            }
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
            late,
            exceptions,
            slowest,
            n,
        } => {
            if late {
                return report_late(&dir, format);
            }
            let session = open_session(&dir, false)?;
            if exceptions {
                let r = hushtrace_cli::exceptions_report::compute(&session)?;
                let mut out = std::io::stdout().lock();
                match format {
                    ReportFormat::Text => out.write_all(r.to_text().as_bytes())?,
                    ReportFormat::Json => {
                        serde_json::to_writer_pretty(&mut out, &r)?;
                        writeln!(out)?;
                    }
                }
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(span) = slowest.as_deref() {
                let k = hushtrace_cli::kernel_report::compute(&session, Some(span), n)?;
                print!("{}", k.slowest_text());
                return Ok(ExitCode::SUCCESS);
            }
            let r = report::compute(&session)?;
            // The late-span counters, when the statistics files have them (`--on-late`).
            let (counters, _) = late_report::read_counters(&dir);
            let mut out = std::io::stdout().lock();
            match format {
                ReportFormat::Text => {
                    out.write_all(r.to_text().as_bytes())?;
                    let k = hushtrace_cli::kernel_report::compute(&session, None, 0)?;
                    out.write_all(k.to_text().as_bytes())?;
                    if !counters.is_empty() {
                        writeln!(
                            out,
                            "\nLate spans (see `hushtrace report --late {}`):",
                            dir.display()
                        )?;
                        out.write_all(late_report::counters_text(&counters).as_bytes())?;
                    }
                }
                ReportFormat::Json => {
                    let k = hushtrace_cli::kernel_report::compute(&session, None, 0)?;
                    let mut v = k.with_json(serde_json::to_value(&r)?);
                    if let (false, Some(obj)) = (counters.is_empty(), v.as_object_mut()) {
                        obj.insert("late".into(), serde_json::to_value(&counters)?);
                    }
                    serde_json::to_writer_pretty(&mut out, &v)?;
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
        Cmd::View {
            dir,
            port,
            no_browser,
        } => {
            let session = open_session(&dir, true)?;
            let opts = hushtrace_cli::view::Options {
                port,
                browser: !no_browser,
            };
            hushtrace_cli::view::run(&session, &dir, opts)?;
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

/// `report --late DIR`: the late-span captures, each explained.
fn report_late(dir: &Path, format: ReportFormat) -> anyhow::Result<ExitCode> {
    let r = late_report::compute(dir)?;
    let mut out = std::io::stdout().lock();
    match format {
        ReportFormat::Text => out.write_all(r.to_text().as_bytes())?,
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &r)?;
            writeln!(out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
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
