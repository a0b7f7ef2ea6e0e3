//! `record --kernel`: the kernel's scheduling events next to the program's trace (see the
//! `hushtrace-kernel` crate), and `recover`'s removal of ftrace instances left by killed
//! recorders.

use hushtrace_kernel::flight::{SnapshotSummary, Watcher};
use hushtrace_kernel::{Capture, Options};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// A kernel recording around the program's run.
#[derive(Debug)]
pub struct KernelRecording {
    /// Shared with the snapshot watcher (overwrite mode) until the end.
    capture: Arc<Capture>,
    signals: Option<hushtrace_kernel::signals::Forwarder>,
    snapshots: Option<Watcher>,
    /// Flight recorder: lost events are the oldest, overwritten.
    overwrite: bool,
}

/// Starts recording the kernel into `output/kernel/` before the program runs. `Err` holds the
/// exit code to return at once (2: a usage error or no access to tracefs; the message has
/// been printed).
///
/// `categories` is the value of `--kernel` (`sched,irq,syscalls`), `force` whether an old
/// kernel trace may be replaced, `overwrite` the flight-recorder mode (`--mode overwrite`: the
/// kernel's newest events are written beside every snapshot of the program, see
/// `hushtrace_kernel::flight`).
pub fn start(
    output: &Path,
    categories: &str,
    buffer_kb: Option<u32>,
    force: bool,
    overwrite: bool,
) -> Result<KernelRecording, ExitCode> {
    let categories = hushtrace_kernel::parse_categories(categories).map_err(|e| {
        eprintln!("hushtrace: error: {e}");
        ExitCode::from(2)
    })?;
    let kdir = output.join(hushtrace_kernel::KERNEL_DIR);
    if std::fs::symlink_metadata(&kdir).is_ok() {
        if !force {
            eprintln!(
                "hushtrace: error: {} already holds a kernel trace: use --force to replace it, \
                 or choose another directory",
                kdir.display()
            );
            return Err(ExitCode::from(2));
        }
        if let Err(e) = std::fs::remove_dir_all(&kdir) {
            eprintln!("hushtrace: error: cannot remove {}: {e}", kdir.display());
            return Err(ExitCode::FAILURE);
        }
    }
    let opts = Options {
        categories,
        buffer_size_kb: buffer_kb.unwrap_or(Options::default().buffer_size_kb),
        overwrite,
    };
    // Before the capture starts: see `Forwarder::install`.
    let signals = hushtrace_kernel::signals::Forwarder::install().ok();
    let capture = Capture::start(output, &opts).map_err(|e| {
        // Nothing of a failed start stays behind (the directory did not exist before).
        let _ = std::fs::remove_dir_all(&kdir);
        eprintln!("hushtrace: error: {e}");
        match e {
            hushtrace_kernel::Error::Access(_) => ExitCode::from(2),
            hushtrace_kernel::Error::Other(_) => ExitCode::FAILURE,
        }
    })?;
    let capture = Arc::new(capture);
    let snapshots = if overwrite {
        let w = Watcher::start(capture.clone(), output.to_path_buf(), say_snapshot);
        match w {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!(
                    "hushtrace: kernel: warning: snapshots will have no kernel part (cannot \
                     start watching for them: {e})"
                );
                None
            }
        }
    } else {
        None
    };
    Ok(KernelRecording {
        capture,
        signals,
        snapshots,
        overwrite,
    })
}

/// One line on stderr per kernel snapshot (beside a snapshot or a late-span capture).
fn say_snapshot(dir: &Path, r: Result<SnapshotSummary, hushtrace_kernel::Error>) {
    match r {
        Ok(s) => {
            for w in &s.warnings {
                eprintln!("hushtrace: kernel: warning: {w}");
            }
            // A late-span capture (`DIR/late/<n>`) or a snapshot (`DIR/snapshots/<n>`).
            let late = dir
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == "late");
            eprintln!(
                "hushtrace: kernel: {}: {} events{} in {} ({})",
                if late { "late capture" } else { "snapshot" },
                s.events,
                if s.lost > 0 {
                    format!(" ({} older ones overwritten)", s.lost)
                } else {
                    String::new()
                },
                s.dir.display(),
                s.clock_note
            );
        }
        Err(e) => eprintln!(
            "hushtrace: kernel: error: {} has no kernel part: {e}",
            dir.display()
        ),
    }
}

impl KernelRecording {
    /// Stops the kernel recording after the program ended, writes its metadata with the
    /// clock of the program's trace, and prints one summary line (and warnings) on stderr.
    pub fn finish(mut self, output: &Path) {
        if let Some(s) = self.signals.take() {
            let got = s.finish();
            if !got.is_empty() {
                let names: Vec<String> =
                    got.iter().map(|&s| crate::record::signal_name(s)).collect();
                eprintln!(
                    "hushtrace: record received {} while the program ran: kernel recording \
                     stopped cleanly",
                    names.join(", ")
                );
            }
        }
        if let Some(w) = self.snapshots.take() {
            w.stop();
        }
        let user_clock = user_clock(output);
        let Ok(capture) = Arc::try_unwrap(self.capture) else {
            eprintln!("hushtrace: kernel: error: the kernel recording is still in use");
            return;
        };
        match capture.finish(user_clock) {
            Ok(s) => {
                for w in &s.warnings {
                    eprintln!("hushtrace: kernel: warning: {w}");
                }
                if !s.stale_removed.is_empty() {
                    eprintln!(
                        "hushtrace: kernel: removed ftrace instance(s) left by killed recorders: {}",
                        s.stale_removed.join(", ")
                    );
                }
                let lost = if s.lost() > 0 && self.overwrite {
                    format!(" ({} older ones overwritten: flight recorder)", s.lost())
                } else if s.lost() > 0 {
                    format!(
                        ", {} LOST (per-CPU buffers full: raise --kernel-buffer-kb)",
                        s.lost()
                    )
                } else {
                    String::new()
                };
                eprintln!(
                    "hushtrace: kernel: {} events on {} CPU stream(s){lost} in {} (clock {}: {})",
                    s.events(),
                    s.cpus.len(),
                    s.dir.display(),
                    s.trace_clock,
                    s.clock_note
                );
            }
            Err(e) => eprintln!("hushtrace: kernel: error: {e}"),
        }
    }
}

/// The clock description and clock UUID of the first process trace in `dir`.
fn user_clock(dir: &Path) -> Option<(hushtrace_ctf::metadata::ClockDesc, [u8; 16])> {
    let s = hushtrace_ctf::reader::Session::open(dir).ok()?;
    let t = s.traces.first()?;
    Some((t.desc.clock.clone(), t.desc.clock_uuid))
}

/// Removes the ftrace instances of provably gone recorders (`hushtrace recover`), and says
/// which were left alone and why; one line each.
pub fn remove_stale() -> Vec<String> {
    let c = hushtrace_kernel::tracefs::remove_stale_anywhere();
    c.removed
        .iter()
        .map(|n| format!("removed the ftrace instance {n} of a dead `hushtrace record`"))
        .chain(
            c.left
                .iter()
                .map(|(n, why)| format!("left the ftrace instance {n} alone: {why}")),
        )
        .collect()
}
