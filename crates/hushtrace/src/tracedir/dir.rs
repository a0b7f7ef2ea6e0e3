//! A directory of the trace, opened relative to verified directory descriptors (never
//! through a symbolic link), and the files created in it.

use super::fd::Checked;
use super::pwrite::write_all_at;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::io;
use std::path::{Path, PathBuf};

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// A directory of the trace (the session root or a process's trace directory).
#[derive(Debug)]
pub(crate) struct Dir {
    /// Absolute path, resolved once.
    pub(super) path: PathBuf,
    fd: Checked,
}

impl Dir {
    /// The directory's absolute path (as resolved when it was opened).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's descriptor, reopened by its absolute path (and verified to be the same
    /// directory) if the program closed or replaced it.
    pub(super) fn fd(&mut self) -> io::Result<BorrowedFd<'_>> {
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
    pub(super) fn create_file(&mut self, name: &str) -> io::Result<OwnedFd> {
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
