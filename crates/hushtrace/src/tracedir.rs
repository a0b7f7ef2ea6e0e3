//! The files of a trace, handled through directory descriptors.
//!
//! * The session root is resolved to an absolute path **once**, at session start, and opened
//!   as a directory descriptor; a later `chdir()` of the program changes nothing.
//! * The root must belong to the user and must not be writable by group or others (as ssh
//!   requires of its files); every file and directory below it is created relative to a
//!   descriptor opened with `O_NOFOLLOW | O_DIRECTORY`, so swapping a path component for a
//!   symbolic link cannot redirect the trace.
//! * Every descriptor is verified (device and inode, one `fstat`) before it is used: a program
//!   that closes all its descriptors (as daemons do) and reuses their numbers never receives a
//!   trace packet. A descriptor found closed or replaced is forgotten (the number is the
//!   program's now: never closed by us) and the file is reopened by name and verified.
//! * Streams are written with `pwritev` (a packet's header and events in one call) at the offset the consumer keeps: a failed write (a full
//!   disk) is cut off with `ftruncate`, so the stream stays well-formed and later packets follow
//!   the last complete one.
//! * At most [`MAX_OPEN_STREAMS`] stream files are open at once; the others are reopened on
//!   demand, so the tracer's descriptors do not grow with the number of threads.

use rustix::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::io;
use std::path::{Path, PathBuf};

/// Stream files kept open at once.
pub(crate) const MAX_OPEN_STREAMS: usize = 16;

/// Device and inode: what a descriptor must still refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    fn of(fd: BorrowedFd<'_>) -> io::Result<FileId> {
        let st = rustix::fs::fstat(fd)?;
        Ok(FileId {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
        })
    }
}

/// A descriptor the tracer opened, with the identity of the file it opened. If the program
/// closes it and the number is reused, the descriptor is never used or closed by us again.
#[derive(Debug)]
struct Checked {
    fd: Option<OwnedFd>,
    id: FileId,
}

impl Checked {
    fn new(fd: OwnedFd) -> io::Result<Checked> {
        let id = FileId::of(fd.as_fd())?;
        Ok(Checked { fd: Some(fd), id })
    }

    /// The descriptor if it still refers to our file; otherwise forgets it (without closing:
    /// the number may be the program's now) and returns `None`.
    fn get(&mut self) -> Option<BorrowedFd<'_>> {
        let ok = match &self.fd {
            Some(fd) => FileId::of(fd.as_fd()).ok() == Some(self.id),
            None => false,
        };
        if !ok {
            if let Some(fd) = self.fd.take() {
                // Not ours any more (closed, maybe reused by the program): never close it.
                let _ = fd.into_raw_fd();
            }
            return None;
        }
        self.fd.as_ref().map(|f| f.as_fd())
    }

    /// Installs a freshly opened descriptor of the same file; false (and the new descriptor
    /// closed) if it is another file.
    fn reinstall(&mut self, fd: OwnedFd) -> bool {
        if FileId::of(fd.as_fd()).ok() == Some(self.id) {
            self.fd = Some(fd);
            true
        } else {
            false
        }
    }

    /// Closes the descriptor if it is still ours (the number is never closed otherwise).
    fn close(&mut self) {
        if self.get().is_some() {
            self.fd = None; // drop closes it
        }
    }
}

impl Drop for Checked {
    fn drop(&mut self) {
        self.close();
    }
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// A directory of the trace (the session root or a process's trace directory).
#[derive(Debug)]
pub(crate) struct Dir {
    /// Absolute path, resolved once.
    path: PathBuf,
    fd: Checked,
}

impl Dir {
    /// The directory's absolute path (as resolved when it was opened).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's descriptor, reopened by its absolute path (and verified to be the same
    /// directory) if the program closed or replaced it.
    fn fd(&mut self) -> io::Result<BorrowedFd<'_>> {
        if self.fd.get().is_none() {
            let fd = rustix::fs::open(&self.path, dir_flags(), Mode::empty())?;
            if !self.fd.reinstall(fd) {
                return Err(io::Error::other(format!(
                    "{} was replaced by another directory",
                    self.path.display()
                )));
            }
        }
        self.fd
            .get()
            .ok_or_else(|| io::Error::other("directory descriptor lost"))
    }

    /// Opens the session root: creates it (mode 0700, parents as needed), resolves it to an
    /// absolute path once, refuses a symbolic link, a directory owned by another user, or one
    /// writable by group or others.
    pub(crate) fn open_root(path: &Path) -> io::Result<Dir> {
        use std::os::unix::fs::DirBuilderExt;
        let abs = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()?.join(path)
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&abs)?;
        let fd = rustix::fs::open(&abs, dir_flags(), Mode::empty()).map_err(|e| {
            if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
                io::Error::other("not a directory (symbolic links are not followed)")
            } else {
                e.into()
            }
        })?;
        check_private(fd.as_fd())?;
        Ok(Dir {
            path: abs,
            fd: Checked::new(fd)?,
        })
    }

    /// Creates a new subdirectory (mode 0700) named `name`, or `name.<n>` for the first free
    /// `n` from `*next` on when it exists (an earlier process with the same pid, or an earlier
    /// session of this process), and opens it. `*next` is advanced past the name used.
    pub(crate) fn create_subdir(&mut self, name: &str, next: &mut u64) -> io::Result<Dir> {
        loop {
            let n = *next;
            let candidate = if n == 0 {
                name.to_string()
            } else {
                format!("{name}.{n}")
            };
            let parent = self.fd()?;
            match rustix::fs::mkdirat(parent, candidate.as_str(), Mode::from_raw_mode(0o700)) {
                Ok(()) => {
                    *next = n + 1;
                    let fd =
                        rustix::fs::openat(parent, candidate.as_str(), dir_flags(), Mode::empty())?;
                    check_private(fd.as_fd())?;
                    return Ok(Dir {
                        path: self.path.join(&candidate),
                        fd: Checked::new(fd)?,
                    });
                }
                Err(rustix::io::Errno::EXIST) if n < u32::MAX as u64 => *next = n + 1,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Opens subdirectory `name`, creating it (0700) if it does not exist; refuses a symbolic
    /// link or a directory that is not private to this user.
    pub(crate) fn open_or_create_subdir(&mut self, name: &str) -> io::Result<Dir> {
        let parent = self.fd()?;
        match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let fd = rustix::fs::openat(parent, name, dir_flags(), Mode::empty())?;
        check_private(fd.as_fd())?;
        Ok(Dir {
            path: self.path.join(name),
            fd: Checked::new(fd)?,
        })
    }

    /// Opens the existing subdirectory `name`; refuses a symbolic link or a directory that is
    /// not private to this user.
    pub(crate) fn open_subdir(&mut self, name: &str) -> io::Result<Dir> {
        let fd = rustix::fs::openat(self.fd()?, name, dir_flags(), Mode::empty())?;
        check_private(fd.as_fd())?;
        Ok(Dir {
            path: self.path.join(name),
            fd: Checked::new(fd)?,
        })
    }

    /// The names of this directory's entries (`.` and `..` left out, names that are not UTF-8
    /// too: the tracer never makes those), with whether each is a directory (as `readdir`
    /// says; not followed).
    pub(crate) fn entries(&mut self) -> io::Result<Vec<(String, bool)>> {
        let mut out = Vec::new();
        for e in rustix::fs::Dir::read_from(self.fd()?)? {
            let e = e?;
            let Ok(name) = e.file_name().to_str() else {
                continue;
            };
            if name != "." && name != ".." {
                out.push((
                    name.to_string(),
                    e.file_type() == rustix::fs::FileType::Directory,
                ));
            }
        }
        Ok(out)
    }

    /// The contents of the regular file `name`, at most `max` bytes (a longer file is an
    /// error); never follows a symbolic link, never blocks on a FIFO.
    pub(crate) fn read_small(&mut self, name: &str, max: usize) -> io::Result<Vec<u8>> {
        let fd = rustix::fs::openat(
            self.fd()?,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
            || st.st_size as u64 > max as u64
        {
            return Err(io::Error::other(format!(
                "{}: not a regular file of at most {max} bytes",
                self.path.join(name).display()
            )));
        }
        let mut buf = vec![0u8; st.st_size as usize];
        let mut got = 0;
        while got < buf.len() {
            match rustix::io::pread(&fd, &mut buf[got..], got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// Removes the empty subdirectory `name`.
    pub(crate) fn remove_subdir(&mut self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(self.fd()?, name, AtFlags::REMOVEDIR)?)
    }

    /// Creates a new file (`O_EXCL | O_NOFOLLOW`, mode 0600) in this directory, opened for
    /// reading and writing (a ring file to map).
    pub(crate) fn create_rw_file(&mut self, name: &str) -> io::Result<OwnedFd> {
        let _ = rustix::fs::unlinkat(self.fd()?, name, AtFlags::empty());
        Ok(rustix::fs::openat(
            self.fd()?,
            name,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?)
    }

    /// Removes file `name` (ignoring a missing one).
    pub(crate) fn remove_file(&mut self, name: &str) {
        if let Ok(fd) = self.fd() {
            let _ = rustix::fs::unlinkat(fd, name, AtFlags::empty());
        }
    }

    /// Removes this directory if it is empty (through its parent's path).
    pub(crate) fn remove_if_empty(&self) {
        let _ = std::fs::remove_dir(&self.path);
    }

    /// Creates a new file (`O_EXCL | O_NOFOLLOW`, mode 0600) in this directory.
    fn create_file(&mut self, name: &str) -> io::Result<OwnedFd> {
        let fd = rustix::fs::openat(
            self.fd()?,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        Ok(fd)
    }

    /// Writes `bytes` as file `name` atomically: a temporary file, then a rename over `name`.
    /// On failure the temporary file is removed and `name` is left as it was; never a partial
    /// or empty file under `name`.
    pub(crate) fn replace_file(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = format!(".{name}.tmp");
        let _ = rustix::fs::unlinkat(self.fd()?, tmp.as_str(), AtFlags::empty());
        let r = (|| {
            let fd = self.create_file(&tmp)?;
            write_all_at(fd.as_fd(), bytes, 0)?;
            drop(fd);
            let d = self.fd()?;
            rustix::fs::renameat(d, tmp.as_str(), d, name)?;
            Ok(())
        })();
        if r.is_err() {
            if let Ok(d) = self.fd() {
                let _ = rustix::fs::unlinkat(d, tmp.as_str(), AtFlags::empty());
            }
        }
        r
    }
}

/// Refuses a directory owned by another user or writable by group or others.
fn check_private(fd: BorrowedFd<'_>) -> io::Result<()> {
    let st = rustix::fs::fstat(fd)?;
    let me = crate::platform::geteuid();
    if st.st_uid != me {
        return Err(io::Error::other(format!(
            "owned by uid {}, not by this user (uid {me}): refusing a directory another user \
             controls",
            st.st_uid
        )));
    }
    let mode = st.st_mode as u32;
    if mode & 0o022 != 0 {
        return Err(io::Error::other(format!(
            "writable by group or others (mode {:o}): refusing a directory another user could \
             change; use a private one (chmod go-w)",
            mode & 0o7777
        )));
    }
    Ok(())
}

fn write_all_at(fd: BorrowedFd<'_>, mut bytes: &[u8], mut off: u64) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::pwrite(fd, bytes, off) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                off += n as u64;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Writes the concatenation of `parts` at `off`: one `pwritev` in the common case, continued
/// after a short write.
fn write_all_parts_at(fd: BorrowedFd<'_>, parts: &[&[u8]], mut off: u64) -> io::Result<()> {
    let mut parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut first = 0;
    while first < parts.len() {
        let iov: Vec<std::io::IoSlice<'_>> = parts[first..]
            .iter()
            .map(|p| std::io::IoSlice::new(p))
            .collect();
        match rustix::io::pwritev(fd, &iov, off) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(mut n) => {
                off += n as u64;
                while first < parts.len() && n >= parts[first].len() {
                    n -= parts[first].len();
                    first += 1;
                }
                if n > 0 {
                    parts[first] = &parts[first][n..];
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

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
}

/// A process's trace directory and its stream files.
#[derive(Debug)]
pub(crate) struct TraceFiles {
    pub(crate) dir: Dir,
    streams: std::collections::HashMap<u64, Stream>,
    clock: u64,
}

impl TraceFiles {
    pub(crate) fn new(dir: Dir) -> TraceFiles {
        TraceFiles {
            dir,
            streams: std::collections::HashMap::new(),
            clock: 0,
        }
    }

    /// The stream file name of buffer `instance`.
    pub(crate) fn stream_name(&self, instance: u64) -> String {
        format!("{}{instance}", hushtrace_ctf::layout::STREAM_PREFIX)
    }

    /// Appends one packet, the concatenation of `parts`, to stream `instance` (file
    /// `stream_<instance>`, created on first use) with one `pwritev`. On failure the stream is
    /// cut back to its last complete packet, and the error returned.
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
        }
        let fd = stream
            .fd
            .as_ref()
            .and_then(|c| c.fd.as_ref())
            .map(|f| f.as_fd())
            .ok_or_else(|| io::Error::other("stream descriptor lost"))?;
        let total: usize = parts.iter().map(|p| p.len()).sum();
        match write_all_parts_at(fd, parts, stream.len) {
            Ok(()) => {
                stream.len += total as u64;
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
