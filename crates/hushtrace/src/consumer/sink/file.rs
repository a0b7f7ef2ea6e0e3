//! The local output: the trace directory's `metadata` file and one stream file per buffer
//! (see `tracedir.rs` for how files are opened and written).

use super::{Fate, Outcome, Packet, Sink, SinkError};
use crate::config::Error;
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
    /// supports it if `direct` (the session's `Config::direct_io`), else through the page cache.
    pub(crate) fn new(dir: Dir, streams: bool, direct: bool) -> FileSink {
        let io = if direct {
            StreamIo::TryDirect
        } else {
            StreamIo::Buffered
        };
        FileSink {
            files: TraceFiles::with_io(dir, io),
            streams,
        }
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
            Err(source) => Fate::Failed(SinkError::Write {
                path: self
                    .files
                    .dir
                    .path()
                    .join(self.files.stream_name(p.instance)),
                source,
            }),
        }
    }

    fn forget(&mut self, instance: u64) {
        self.files.forget(instance);
    }

    fn close(&mut self, _each: &mut dyn FnMut(Outcome)) -> Result<(), SinkError> {
        self.files.close_all();
        Ok(())
    }
}
