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
//! * Streams are written with `pwritev` (a packet's header and events in one call) at the
//!   offset the consumer keeps: a failed write (a full disk) is cut off with `ftruncate`, so
//!   the stream stays well-formed and later packets follow the last complete one.
//! * With `O_DIRECT` ([`StreamIo`], `SessionBuilder::direct_io(true)` or
//!   `HUSHTRACE_DIRECT_IO=1`, where the file system supports it) the device reads a packet's
//!   blocks from the ring itself instead of the kernel copying them into the page cache; every
//!   packet is then padded to the alignment (`packet_size` covers the zeros, `content_size`
//!   the events, as LTTng's padded sub-buffers).
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
    /// Whether the open descriptor has `O_DIRECT` set.
    direct: bool,
}

/// How the stream files are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamIo {
    /// Through the page cache: `pwritev` copies every byte into it.
    Buffered,
    /// `O_DIRECT` wanted: tried on the first stream file opened (the file system may refuse it).
    TryDirect,
    /// `O_DIRECT`: the device reads each packet from the ring itself, no copy into the page
    /// cache. Every packet is padded with zeros to a multiple of `align` bytes (its
    /// `packet_size` covers the padding, its `content_size` the events), so every write starts
    /// and ends on an `align` boundary.
    Direct {
        /// Bytes every write's offset, length and memory are aligned to.
        align: usize,
    },
}

/// The smallest alignment used for `O_DIRECT` writes (a page), whatever smaller one the file
/// system accepts: 4 KiB device sectors are common, and a page keeps the ring's slots usable
/// as they are.
#[cfg(any(target_os = "linux", target_os = "android"))]
const DIRECT_MIN_ALIGN: usize = 4096;
/// The largest alignment accepted; a file system asking for more is written through the page
/// cache.
#[cfg(any(target_os = "linux", target_os = "android"))]
const DIRECT_MAX_ALIGN: usize = 64 << 10;

/// `len` rounded up to a multiple of `align` (a power of two).
fn round_up(len: usize, align: usize) -> usize {
    (len + align - 1) & !(align - 1)
}

/// `len` bytes of `buf` starting at an `align`-aligned address (`buf` grown as needed).
fn aligned(buf: &mut Vec<u8>, len: usize, align: usize) -> &mut [u8] {
    if buf.len() < len + align {
        buf.resize(len + align, 0);
    }
    let off = buf.as_ptr().align_offset(align);
    &mut buf[off..off + len]
}

/// Scratch memory for the `O_DIRECT` writes: the packet's first and last blocks (or, for a
/// packet not laid out as a ring slot holds it, the whole packet).
#[derive(Debug, Default)]
struct Scratch {
    head: Vec<u8>,
    tail: Vec<u8>,
}

/// Lays out the packet `header ++ body` for an `O_DIRECT` write at an `align`-aligned offset:
/// padded with zeros to a multiple of `align`, its `packet_size` set to the padded length, in
/// parts whose addresses and lengths are multiples of `align`. Returns the parts and the
/// padded length.
///
/// When the body sits in memory as a ring slot holds it (`header.len()` bytes after an
/// aligned address), only the first block (the header, which may be a renumbered copy, and the
/// body's start) and the last one (the body's end and the zeros) are copied: the blocks
/// between are written from the ring itself. Otherwise (a packet shipped by the flush of idle
/// threads, or the rest of one) the packet is copied whole.
fn direct_layout<'a>(
    header: &[u8],
    body: &'a [u8],
    align: usize,
    scratch: &'a mut Scratch,
) -> (Vec<&'a [u8]>, usize) {
    use hushtrace_ctf::layout::OFF_PACKET_SIZE;
    let len = header.len() + body.len();
    let padded = round_up(len.max(1), align);
    let set_size = |b: &mut [u8]| {
        if let Some(w) = b.get_mut(OFF_PACKET_SIZE..OFF_PACKET_SIZE + 8) {
            w.copy_from_slice(&(padded as u64 * 8).to_le_bytes());
        }
    };
    let k = align.wrapping_sub(header.len());
    let in_slot = header.len() < align
        && body.len() >= k
        && (body.as_ptr() as usize)
            .wrapping_sub(header.len())
            .is_multiple_of(align);
    if !in_slot {
        let whole = aligned(&mut scratch.head, padded, align);
        whole[..header.len()].copy_from_slice(header);
        whole[header.len()..len].copy_from_slice(body);
        whole[len..].fill(0);
        set_size(whole);
        return (vec![&*whole], padded);
    }
    let Scratch { head, tail } = scratch;
    let head = aligned(head, align, align);
    head[..header.len()].copy_from_slice(header);
    head[header.len()..].copy_from_slice(&body[..k]);
    set_size(head);
    let rest = &body[k..];
    let whole_blocks = rest.len() / align * align;
    let mut parts: Vec<&'a [u8]> = vec![&*head];
    if whole_blocks > 0 {
        parts.push(&rest[..whole_blocks]);
    }
    let left = &rest[whole_blocks..];
    if !left.is_empty() {
        let tail = aligned(tail, align, align);
        tail[..left.len()].copy_from_slice(left);
        tail[left.len()..].fill(0);
        parts.push(&*tail);
    }
    (parts, padded)
}

/// Says (once per trace directory, on stderr) that `O_DIRECT` was asked for but the file
/// system of `dir` refuses it: the stream files go through the page cache.
fn direct_refused(dir: &Path) {
    eprintln!(
        "hushtrace: {}: the file system refuses O_DIRECT (HUSHTRACE_DIRECT_IO, \
         SessionBuilder::direct_io); stream files are written through the page cache",
        dir.display()
    );
}

/// Sets `O_DIRECT` on `fd`; false when the file system refuses it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn set_direct(fd: BorrowedFd<'_>, on: bool) -> bool {
    let Ok(flags) = rustix::fs::fcntl_getfl(fd) else {
        return false;
    };
    let flags = if on {
        flags | OFlags::DIRECT
    } else {
        flags - OFlags::DIRECT
    };
    rustix::fs::fcntl_setfl(fd, flags).is_ok()
}

/// The alignment for `O_DIRECT` writes to `fd` (`STATX_DIOALIGN`, Linux 6.1; a page when the
/// kernel does not say), or `None` when the file system does not support them or wants an
/// alignment above [`DIRECT_MAX_ALIGN`].
#[cfg(any(target_os = "linux", target_os = "android"))]
fn direct_align(fd: BorrowedFd<'_>) -> Option<usize> {
    use rustix::fs::{statx, AtFlags as A, StatxFlags};
    let st = match statx(fd, "", A::EMPTY_PATH, StatxFlags::DIOALIGN) {
        Ok(st) => st,
        Err(_) => return Some(DIRECT_MIN_ALIGN),
    };
    if st.stx_mask & StatxFlags::DIOALIGN.bits() == 0 {
        return Some(DIRECT_MIN_ALIGN);
    }
    if st.stx_dio_offset_align == 0 {
        return None;
    }
    let a = (st.stx_dio_offset_align.max(st.stx_dio_mem_align) as usize)
        .max(DIRECT_MIN_ALIGN)
        .next_power_of_two();
    (a <= DIRECT_MAX_ALIGN).then_some(a)
}

/// Elsewhere `O_DIRECT` is not used (macOS has `F_NOCACHE` instead, a different contract):
/// the stream files go through the page cache.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn set_direct(_fd: BorrowedFd<'_>, _on: bool) -> bool {
    false
}

/// See the Linux version: no `O_DIRECT` here.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn direct_align(_fd: BorrowedFd<'_>) -> Option<usize> {
    None
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

#[cfg(test)]
mod tests {
    use super::*;
    use hushtrace_ctf::layout::{
        read_u64, PacketHeader, OFF_CONTENT_SIZE, OFF_PACKET_SIZE, PACKET_HEADER_LEN,
    };

    /// A packet of `body_len` bytes of events as a ring slot holds it: the header at the start
    /// of a page-aligned slot of `slot` bytes.
    fn slot_packet(body_len: usize, slot: usize, buf: &mut Vec<u8>) -> &mut [u8] {
        let s = aligned(buf, slot, 4096);
        let h = PacketHeader {
            seq: 3,
            ..PacketHeader::default()
        }
        .with_len(PACKET_HEADER_LEN + body_len)
        .encode();
        s[..PACKET_HEADER_LEN].copy_from_slice(&h);
        for (i, b) in s[PACKET_HEADER_LEN..].iter_mut().enumerate() {
            *b = (i % 251) as u8 + 1;
        }
        s
    }

    /// Checks one `direct_layout` result against the packet it lays out.
    fn check_layout(header: &[u8], body: &[u8], align: usize) -> usize {
        let mut scratch = Scratch::default();
        let (parts, padded) = direct_layout(header, body, align, &mut scratch);
        let len = header.len() + body.len();
        assert_eq!(padded, round_up(len, align));
        for p in &parts {
            assert_eq!(
                p.as_ptr() as usize % align,
                0,
                "a part's address is aligned"
            );
            assert_eq!(p.len() % align, 0, "a part's length is aligned");
        }
        let joined: Vec<u8> = parts.concat();
        assert_eq!(joined.len(), padded);
        // The packet's bytes, its packet_size the padded length, then zeros.
        assert_eq!(read_u64(&joined, OFF_PACKET_SIZE), Some(padded as u64 * 8));
        assert_eq!(read_u64(&joined, OFF_CONTENT_SIZE), Some(len as u64 * 8));
        let mut want = header.to_vec();
        want.extend_from_slice(body);
        want[OFF_PACKET_SIZE..OFF_PACKET_SIZE + 8]
            .copy_from_slice(&(padded as u64 * 8).to_le_bytes());
        assert_eq!(&joined[..len], &want[..]);
        assert!(joined[len..].iter().all(|&b| b == 0), "zero padding");
        parts.len()
    }

    #[test]
    fn direct_layout_writes_the_ring_blocks_in_place_and_pads() {
        let mut buf = Vec::new();
        for body_len in [
            0,
            1,
            4096 - PACKET_HEADER_LEN - 1,
            4096 - PACKET_HEADER_LEN,
            4096,
            20_000,
            65_536 - PACKET_HEADER_LEN,
        ] {
            let s = slot_packet(body_len, 65_536, &mut buf);
            let (h, rest) = s.split_at(PACKET_HEADER_LEN);
            let body = &rest[..body_len];
            let parts = check_layout(h, body, 4096);
            if body_len >= 4096 * 2 {
                // The head block and the ring's own blocks (and a tail block, unless the body
                // ends on a block boundary): never one whole copy.
                assert!(parts >= 2, "body {body_len}");
            }
            // A renumbered header (a copy, elsewhere in memory) with the ring's body.
            let mut copy = [0u8; PACKET_HEADER_LEN];
            copy.copy_from_slice(h);
            check_layout(&copy, body, 4096);
        }
        // A body that does not sit as a slot holds it (the rest of a flushed packet) is
        // copied whole.
        let s = slot_packet(10_000, 65_536, &mut buf);
        let (h, rest) = s.split_at(PACKET_HEADER_LEN);
        let cut = PacketHeader::decode(h)
            .unwrap()
            .with_len(PACKET_HEADER_LEN + 8_900)
            .encode();
        assert_eq!(check_layout(&cut, &rest[100..9_000], 4096), 1);
        assert_eq!(check_layout(&cut, &rest[100..9_000], 8192), 1);
    }

    /// Writes three packets (two ring-like, one "rest" at an odd address) through
    /// `TraceFiles` with `io`; returns the stream file's bytes and the mode in effect.
    fn write_three(dir: &Path, io: StreamIo) -> (Vec<u8>, StreamIo, Vec<usize>) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let mut files = TraceFiles::with_io(Dir::open_root(dir).unwrap(), io);
        let mut buf = Vec::new();
        let mut lens = Vec::new();
        for body_len in [30_000, 70] {
            let s = slot_packet(body_len, 65_536, &mut buf);
            let (h, rest) = s.split_at(PACKET_HEADER_LEN);
            files.append_parts(7, &[h, &rest[..body_len]]).unwrap();
            lens.push(PACKET_HEADER_LEN + body_len);
        }
        let s = slot_packet(5_000, 65_536, &mut buf);
        let (h, rest) = s.split_at(PACKET_HEADER_LEN);
        let mut h2 = PacketHeader::decode(h).unwrap();
        h2 = h2.with_len(PACKET_HEADER_LEN + 3_000);
        files
            .append_parts(7, &[&h2.encode(), &rest[1_000..4_000]])
            .unwrap();
        lens.push(PACKET_HEADER_LEN + 3_000);
        let io = files.io();
        files.close_all();
        (std::fs::read(dir.join("stream_7")).unwrap(), io, lens)
    }

    /// Walks the packets of a stream file: `(content bytes, packet bytes)` of each.
    fn packets(b: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut off = 0;
        while off < b.len() {
            let c = read_u64(&b[off..], OFF_CONTENT_SIZE).unwrap() as usize / 8;
            let p = read_u64(&b[off..], OFF_PACKET_SIZE).unwrap() as usize / 8;
            assert!(c <= p && p > 0 && off + p <= b.len(), "packet at {off}");
            out.push((c, p));
            off += p;
        }
        out
    }

    fn temp(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!(
            "hushtrace-tracedir-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ))
    }

    #[test]
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[ignore = "needs O_DIRECT in the temp directory's file system, e.g. ext4 (.ci/run runs it)"]
    fn direct_stream_files_are_padded_packets() {
        let dir = temp("direct");
        let _ = std::fs::remove_dir_all(&dir);
        let (bytes, io, lens) = write_three(&dir, StreamIo::TryDirect);
        let _ = std::fs::remove_dir_all(&dir);
        let StreamIo::Direct { align } = io else {
            panic!(
                "{} does not take O_DIRECT ({io:?})",
                std::env::temp_dir().display()
            );
        };
        assert_eq!(bytes.len() % align, 0);
        let got = packets(&bytes);
        let want: Vec<(usize, usize)> = lens.iter().map(|&l| (l, round_up(l, align))).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn buffered_stream_files_are_not_padded() {
        let dir = temp("buffered");
        let _ = std::fs::remove_dir_all(&dir);
        let (bytes, io, lens) = write_three(&dir, StreamIo::Buffered);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(io, StreamIo::Buffered);
        let want: Vec<(usize, usize)> = lens.iter().map(|&l| (l, l)).collect();
        assert_eq!(packets(&bytes), want);
    }

    /// A file system without `O_DIRECT` (ramfs, in a mount namespace of this thread only):
    /// the stream files are written through the page cache, unpadded.
    #[test]
    #[cfg(target_os = "linux")]
    #[ignore = "needs root: mounts a ramfs in a private mount namespace (.ci/run runs it)"]
    fn direct_falls_back_where_the_file_system_refuses_it() {
        use std::ffi::CString;
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "needs root to mount a ramfs");
        let mnt = temp("ramfs");
        std::fs::create_dir_all(&mnt).unwrap();
        let cmnt = CString::new(mnt.as_os_str().as_encoded_bytes()).unwrap();
        let (ramfs, root) = (CString::new("ramfs").unwrap(), CString::new("/").unwrap());
        // SAFETY: plain system calls; the strings are NUL-terminated and outlive them.
        // `unshare(CLONE_NEWNS)` gives this thread (only) its own mount namespace, so the
        // mount is seen by nothing else and goes away with the thread.
        let mounted = std::thread::spawn(move || unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(format!("unshare: {}", io::Error::last_os_error()));
            }
            let none = std::ptr::null();
            if libc::mount(
                none,
                root.as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                none as _,
            ) != 0
            {
                return Err(format!("make / private: {}", io::Error::last_os_error()));
            }
            if libc::mount(ramfs.as_ptr(), cmnt.as_ptr(), ramfs.as_ptr(), 0, none as _) != 0 {
                return Err(format!("mount ramfs: {}", io::Error::last_os_error()));
            }
            let probe = std::path::Path::new(cmnt.to_str().unwrap()).join("t");
            Ok(write_three(&probe, StreamIo::TryDirect))
        })
        .join()
        .unwrap();
        let _ = std::fs::remove_dir_all(&mnt);
        let (bytes, io, lens) = mounted.unwrap_or_else(|e| panic!("no private ramfs: {e}"));
        assert_eq!(io, StreamIo::Buffered, "ramfs has no O_DIRECT");
        let want: Vec<(usize, usize)> = lens.iter().map(|&l| (l, l)).collect();
        assert_eq!(packets(&bytes), want);
    }
}
