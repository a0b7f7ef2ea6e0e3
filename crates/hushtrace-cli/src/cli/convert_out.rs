//! Writing a converted trace: through a temporary file renamed on success, or to stdout.

use super::*;

/// Writes `path` through a temporary file renamed on success, so a failure never leaves a
/// partial output behind. `-` writes to stdout; an existing non-regular file (`/dev/null`, a
/// FIFO) is written in place: renaming over it would replace the device or pipe.
pub(super) fn write_atomically(
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

pub(super) fn convert(
    session: &Session,
    to: Format,
    output: &Path,
    options: chrome::Options,
    quiet: bool,
) -> anyhow::Result<()> {
    let gz = output.extension().is_some_and(|e| e == "gz");
    // A bar only for a person watching: stderr and stdout on a terminal, JSON not on stdout.
    let interactive = std::io::stderr().is_terminal() && std::io::stdout().is_terminal();
    let bar = (!quiet && interactive && output.as_os_str() != "-")
        .then(|| hushtrace_cli::progress::bar(session.stream_bytes(), true));
    let mut progress = hushtrace_cli::progress::callback(&bar);
    let mut summary = None;
    #[cfg(feature = "parquet")]
    if matches!(to, Format::Parquet) {
        anyhow::bail!("--to parquet writes a folder: see convert_parquet");
    }
    write_atomically(output, |w| {
        let s = if gz {
            let mut enc = flate2::write::GzEncoder::new(w, flate2::Compression::default());
            let s = match to {
                Format::Chrome => chrome::convert_with(session, &mut enc, options, &mut progress)?,
                Format::Perfetto => perfetto::convert(session, &mut enc, &mut progress)?,
                #[cfg(feature = "parquet")]
                Format::Parquet => unreachable!("handled above"),
            };
            enc.finish()?;
            s
        } else {
            match to {
                Format::Chrome => chrome::convert_with(session, w, options, &mut progress)?,
                Format::Perfetto => perfetto::convert(session, w, &mut progress)?,
                #[cfg(feature = "parquet")]
                Format::Parquet => unreachable!("handled above"),
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

/// `convert --to parquet`: the tables into the folder `output` (see
/// `hushtrace_cli::parquet_export`).
#[cfg(feature = "parquet")]
pub(super) fn convert_parquet(
    session: &Session,
    output: &Path,
    host: Option<String>,
    quiet: bool,
) -> anyhow::Result<()> {
    use hushtrace_cli::parquet_export;
    if output.as_os_str() == "-" {
        anyhow::bail!("--to parquet writes a folder of files, not stdout: give -o a folder");
    }
    let options = parquet_export::Options { host };
    let s = parquet_export::export(session, output, &options, &mut |_, _| {})?;
    for w in &s.warnings {
        eprintln!("hushtrace: warning: {w}");
    }
    if !quiet {
        let rows: Vec<String> = s.rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
        eprintln!("wrote {}: {}", s.dir.display(), rows.join(", "));
    }
    Ok(())
}
