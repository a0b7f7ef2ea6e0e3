//! The local output: the trace directory's `metadata` file and one stream file per buffer
//! (see `tracedir.rs` for how files are opened and written).

use super::{Fate, Packet, Sink};
use crate::config::Error;
use crate::env::DIRECT_IO as DIRECT_IO_ENV;
use crate::tracedir::{Dir, StreamIo, TraceFiles};
use hushtrace_ctf::layout::METADATA_FILE;
use hushtrace_ctf::metadata::{to_tsdl, TraceDesc};

/// The trace directory's files.
#[derive(Debug)]
pub(crate) struct FileSink {
    files: TraceFiles,
    /// Whether packets go to stream files (not in relay-only mode).
    streams: bool,
}

impl FileSink {
    /// The stream files go to `dir` (if `streams`), with `O_DIRECT` where the file system
    /// supports it when `HUSHTRACE_DIRECT_IO` (or, unset, [`DIRECT_IO_DEFAULT`]) asks for it.
    /// A bad `HUSHTRACE_DIRECT_IO` value is an error naming it.
    pub(crate) fn new(dir: Dir, streams: bool) -> Result<FileSink, Error> {
        let direct = direct_io_from_env()?.unwrap_or(DIRECT_IO_DEFAULT);
        let io = if direct {
            StreamIo::TryDirect
        } else {
            StreamIo::Buffered
        };
        Ok(FileSink {
            files: TraceFiles::with_io(dir, io),
            streams,
        })
    }
}

impl Sink for FileSink {
    fn counts(&self) -> bool {
        self.streams
    }

    fn metadata(&mut self, desc: &TraceDesc) -> Result<(), Error> {
        let text = to_tsdl(desc);
        let dir = &mut self.files.dir;
        dir.replace_file(METADATA_FILE, text.as_bytes())
            .map_err(|source| Error::Io {
                path: dir.path().join(METADATA_FILE),
                source,
            })
    }

    /// Appends the packet to its stream file (created on first use). A failed write cuts the
    /// stream back to its last complete packet.
    fn packet(&mut self, p: &Packet<'_>) -> Fate {
        if !self.streams {
            return Fate::Skipped;
        }
        match self.files.append_parts(p.instance, &[p.header, p.body]) {
            Ok(()) => Fate::Delivered,
            Err(e) => Fate::Failed(format!(
                "{}: {e}",
                self.files
                    .dir
                    .path()
                    .join(self.files.stream_name(p.instance))
                    .display()
            )),
        }
    }

    fn forget(&mut self, instance: u64) {
        self.files.forget(instance);
    }

    fn close(&mut self, _each: &mut dyn FnMut(u64, u64, bool)) -> Result<(), String> {
        self.files.close_all();
        Ok(())
    }
}

/// Whether stream files are written with `O_DIRECT` (where the file system supports it) unless
/// [`DIRECT_IO_ENV`] says otherwise. See docs/BENCHMARKS.md §12 for the measurements behind it.
pub(crate) const DIRECT_IO_DEFAULT: bool = false;

/// What [`DIRECT_IO_ENV`] asks for: `Some(true)` for `1`, `on`, `true`, `yes`; `Some(false)`
/// for `0`, `off`, `false`, `no` or empty; `None` when unset. Another value is an error naming
/// it.
pub(crate) fn direct_io_from_env() -> Result<Option<bool>, Error> {
    let Some(v) = std::env::var_os(DIRECT_IO_ENV) else {
        return Ok(None);
    };
    let v = v.to_string_lossy();
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(Some(true)),
        "0" | "off" | "false" | "no" | "" => Ok(Some(false)),
        _ => Err(Error::Config {
            var: Some(DIRECT_IO_ENV),
            value: v.into_owned(),
            reason: "expected 1 (O_DIRECT stream files where the file system supports it) or 0 \
                     (through the page cache)"
                .into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_io_env_values() {
        // Only this test sets the variable in this process's test binary.
        std::env::set_var(DIRECT_IO_ENV, "1");
        assert_eq!(direct_io_from_env().unwrap(), Some(true));
        std::env::set_var(DIRECT_IO_ENV, "off");
        assert_eq!(direct_io_from_env().unwrap(), Some(false));
        std::env::set_var(DIRECT_IO_ENV, "maybe");
        let e = direct_io_from_env().unwrap_err().to_string();
        assert!(
            e.contains("HUSHTRACE_DIRECT_IO") && e.contains("maybe"),
            "{e}"
        );
        std::env::remove_var(DIRECT_IO_ENV);
        assert_eq!(direct_io_from_env().unwrap(), None);
    }
}
