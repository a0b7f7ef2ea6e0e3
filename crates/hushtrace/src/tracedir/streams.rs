//! The stream files of a process's trace directory: appended packet by packet at the offset
//! the tracer keeps, cut back on a failed write, at most [`MAX_OPEN_STREAMS`] open at once
//! (the least recently used closed, reopened and verified on demand).

use super::direct::{direct_align, direct_layout, direct_refused, set_direct, Scratch, StreamIo};
use super::fd::{Checked, FileId};
use super::pwrite::write_all_parts_at;
use super::Dir;
use rustix::fd::AsFd;
use rustix::fs::{Mode, OFlags};
use std::io;

/// Stream files kept open at once.
pub(crate) const MAX_OPEN_STREAMS: usize = 16;

/// One stream file of a trace directory: its name, the bytes written so far, and (while it is
/// among the most recently used) an open descriptor.
#[derive(Debug)]
struct Stream {
    name: String,
    /// Set once the file exists.
    id: Option<FileId>,
    len: u64,
    fd: Option<Checked>,
    last_use: u64,
    /// Whether the open descriptor has `O_DIRECT` set.
    direct: bool,
}

/// A process's trace directory and its stream files.
#[derive(Debug)]
pub(crate) struct TraceFiles {
    pub(crate) dir: Dir,
    streams: std::collections::HashMap<u64, Stream>,
    clock: u64,
    io: StreamIo,
    scratch: Scratch,
}

impl TraceFiles {
    /// Stream files written through the page cache.
    pub(crate) fn new(dir: Dir) -> TraceFiles {
        TraceFiles::with_io(dir, StreamIo::Buffered)
    }

    /// Stream files written as `io` says ([`StreamIo::TryDirect`]: with `O_DIRECT` where the
    /// file system supports it, else through the page cache).
    pub(crate) fn with_io(dir: Dir, io: StreamIo) -> TraceFiles {
        TraceFiles {
            dir,
            streams: std::collections::HashMap::new(),
            clock: 0,
            io,
            scratch: Scratch::default(),
        }
    }

    /// How the stream files are written (after the first one was opened: `Direct` or
    /// `Buffered`).
    #[cfg(test)]
    pub(crate) fn io(&self) -> StreamIo {
        self.io
    }

    /// The stream file name of buffer `instance`.
    pub(crate) fn stream_name(&self, instance: u64) -> String {
        format!("{}{instance}", hushtrace_ctf::layout::STREAM_PREFIX)
    }

    /// Appends one packet, the concatenation of `parts` (`[header, body]` or `[packet]`), to
    /// stream `instance` (file `stream_<instance>`, created on first use) with one `pwritev`:
    /// through the page cache, or with `O_DIRECT` padded to the alignment
    /// ([`StreamIo::Direct`]). On failure the stream is cut back to its last complete packet,
    /// and the error returned.
    pub(crate) fn append_parts(&mut self, instance: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.clock += 1;
        let now = self.clock;
        if self.streams.get(&instance).is_none_or(|s| s.fd.is_none()) {
            let open = self.streams.values().filter(|s| s.fd.is_some()).count();
            if open >= MAX_OPEN_STREAMS {
                // Close the least recently used stream.
                if let Some(lru) = self
                    .streams
                    .values_mut()
                    .filter(|s| s.fd.is_some())
                    .min_by_key(|s| s.last_use)
                {
                    lru.fd = None;
                }
            }
        }
        let stream = match self.streams.entry(instance) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(Stream {
                name: format!("{}{instance}", hushtrace_ctf::layout::STREAM_PREFIX),
                id: None,
                len: 0,
                fd: None,
                last_use: now,
                direct: false,
            }),
        };
        stream.last_use = now;
        // One `fstat` per packet: the descriptor still refers to our file (else it is
        // forgotten, never closed: the number may be the program's now).
        let verified = stream.fd.as_mut().is_some_and(|c| c.get().is_some());
        if !verified {
            stream.fd = None;
            let fd = match stream.id {
                None => {
                    let fd = self.dir.create_file(&stream.name)?;
                    stream.id = Some(FileId::of(fd.as_fd())?);
                    fd
                }
                Some(id) => {
                    let fd = rustix::fs::openat(
                        self.dir.fd()?,
                        stream.name.as_str(),
                        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?;
                    if FileId::of(fd.as_fd())? != id {
                        return Err(io::Error::other(format!(
                            "{} was replaced by another file",
                            self.dir.path.join(&stream.name).display()
                        )));
                    }
                    fd
                }
            };
            stream.fd = Some(Checked::new(fd)?);
            stream.direct = false;
        }
        let fd = stream
            .fd
            .as_ref()
            .and_then(|c| c.fd.as_ref())
            .map(|f| f.as_fd())
            .ok_or_else(|| io::Error::other("stream descriptor lost"))?;
        // `O_DIRECT` is set on the open descriptor (never at `open`: a file system without it
        // fails the open after creating the file), decided once for the directory.
        if !stream.direct && matches!(self.io, StreamIo::TryDirect | StreamIo::Direct { .. }) {
            if set_direct(fd, true) {
                stream.direct = true;
                if self.io == StreamIo::TryDirect {
                    match direct_align(fd) {
                        Some(align) => self.io = StreamIo::Direct { align },
                        None => {
                            set_direct(fd, false);
                            stream.direct = false;
                            self.io = StreamIo::Buffered;
                            direct_refused(&self.dir.path);
                        }
                    }
                }
            } else {
                self.io = StreamIo::Buffered;
                direct_refused(&self.dir.path);
            }
        }
        let direct = match self.io {
            StreamIo::Direct { align }
                if stream.direct && stream.len.is_multiple_of(align as u64) =>
            {
                Some(align)
            }
            _ => None,
        };
        if stream.direct && direct.is_none() {
            set_direct(fd, false);
            stream.direct = false;
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total == 0 {
            return Ok(());
        }
        let r = match direct {
            Some(align) => {
                let joined: Vec<u8>;
                let (header, body) = match parts {
                    [h, b] => (*h, *b),
                    [b] => (&b[..0], *b),
                    _ => {
                        joined = parts.concat();
                        (&[][..], &joined[..])
                    }
                };
                let (iov, padded) = direct_layout(header, body, align, &mut self.scratch);
                match write_all_parts_at(fd, &iov, stream.len) {
                    Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
                        // The file system took `O_DIRECT` at `fcntl` but refuses these
                        // writes: the page cache from now on, this packet included.
                        let _ = rustix::fs::ftruncate(fd, stream.len);
                        set_direct(fd, false);
                        stream.direct = false;
                        self.io = StreamIo::Buffered;
                        direct_refused(&self.dir.path);
                        write_all_parts_at(fd, &iov, stream.len).map(|()| padded)
                    }
                    r => r.map(|()| padded),
                }
            }
            None => write_all_parts_at(fd, parts, stream.len).map(|()| total),
        };
        match r {
            Ok(n) => {
                stream.len += n as u64;
                Ok(())
            }
            Err(e) => {
                // Cut off what part of the packet was written: the stream ends with its last
                // complete packet, and the next one follows it.
                let _ = rustix::fs::ftruncate(fd, stream.len);
                Err(e)
            }
        }
    }

    /// Closes every stream descriptor (the files stay).
    pub(crate) fn close_all(&mut self) {
        for s in self.streams.values_mut() {
            s.fd = None;
        }
    }

    /// Forgets stream `instance` (its buffer was freed).
    pub(crate) fn forget(&mut self, instance: u64) {
        self.streams.remove(&instance);
    }
}
