//! The one way the reader, crash recovery and the kernel recorder (`hushtrace-kernel`) touch
//! trace files: only regular files, never through a symbolic link, never blocking, sizes
//! bounded by what the file really holds.
//!
//! The public API: [`open_regular`] and [`read_regular`] for one file, [`Dir`] for the files of
//! one directory ([`Dir::open_file`], [`Dir::read_file`], [`Dir::create_new`],
//! [`Dir::replace_file`]).
//!
//! * Every file is opened with `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC` and checked with `fstat`
//!   on the descriptor: a symbolic link, a FIFO, a socket, a device or a directory planted
//!   under a trace file's name is an error naming the file and what it is (never followed,
//!   never waited on, its content never read).
//! * Files in a directory are opened relative to a descriptor of the directory ([`Dir`],
//!   itself opened without following a link), so swapping a path component afterwards
//!   redirects nothing.
//! * [`Dir::read_file`] reads at most what `fstat` says the file holds, and at most a limit.
//! * [`Dir::open_output`] (recovered streams) creates a file 0600, never through a link, and
//!   refuses to write to a file with more than one link (a hard link to a file elsewhere) or
//!   to anything but a regular file; [`Dir::replace_file`] writes a file atomically through a
//!   new (`O_EXCL`) temporary file.

use crate::error::Error;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, CWD};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Flags of every open: never through a symbolic link, never blocking on a FIFO or device.
fn flags(access: OFlags) -> OFlags {
    access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC
}

/// What a non-regular file is, for error messages.
fn describe(ft: FileType) -> &'static str {
    match ft {
        FileType::Symlink => "a symbolic link (not followed)",
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        _ => "not a regular file",
    }
}

fn not_regular_error(path: &Path, ft: FileType) -> Error {
    let what = describe(ft);
    let msg = if what.starts_with("not") {
        what.to_string()
    } else {
        format!("is {what}, not a regular file")
    };
    Error::io(path, io::Error::new(io::ErrorKind::InvalidInput, msg))
}

/// The error for a directory entry of type `ft` that should be a regular file.
pub(crate) fn not_regular(path: &Path, ft: std::fs::FileType) -> Error {
    use std::os::unix::fs::FileTypeExt;
    let ft = if ft.is_symlink() {
        FileType::Symlink
    } else if ft.is_dir() {
        FileType::Directory
    } else if ft.is_fifo() {
        FileType::Fifo
    } else if ft.is_socket() {
        FileType::Socket
    } else if ft.is_char_device() || ft.is_block_device() {
        FileType::CharacterDevice
    } else {
        FileType::Unknown
    };
    not_regular_error(path, ft)
}

/// Turns an `open` error into one that says what the entry is: `O_NOFOLLOW` on a symbolic link
/// gives `ELOOP`, which would read "too many levels of symbolic links".
fn open_error(dir: impl AsFd, name: &Path, path: &Path, e: rustix::io::Errno) -> Error {
    if e == rustix::io::Errno::LOOP {
        if let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            return not_regular_error(path, FileType::from_raw_mode(st.st_mode));
        }
    }
    Error::io(path, e.into())
}

/// Opens `name` relative to `dir` with `access`, and checks that it is a regular file.
fn open_regular_at(
    dir: impl AsFd,
    name: &Path,
    path: &Path,
    access: OFlags,
) -> Result<(File, rustix::fs::Stat), Error> {
    let dir = dir.as_fd();
    let fd = rustix::fs::openat(dir, name, flags(access), Mode::empty())
        .map_err(|e| open_error(dir, name, path, e))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(path, e.into()))?;
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft != FileType::RegularFile {
        return Err(not_regular_error(path, ft));
    }
    Ok((File::from(fd), st))
}

/// Whether `path` exists as a directory entry of any type (symbolic links not followed).
pub(crate) fn exists(path: &Path) -> bool {
    rustix::fs::statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW).is_ok()
}

/// Opens `path` for reading if it is a regular file (see the module docs). Anything else is an
/// error naming the path and what it is; its content is never read.
pub fn open_regular(path: &Path) -> Result<File, Error> {
    open_regular_at(CWD, path, path, OFlags::RDONLY).map(|(f, _)| f)
}

/// Reads at most `limit` bytes of the regular file `path` (see [`open_regular`]); `Ok(None)` if
/// it is larger.
pub fn read_regular(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, Error> {
    let (f, st) = open_regular_at(CWD, path, path, OFlags::RDONLY)?;
    read_bounded(f, st.st_size as u64, path, limit)
}

/// Reads `file` (`size` bytes by `fstat`) if it holds at most `limit` bytes.
fn read_bounded(file: File, size: u64, path: &Path, limit: u64) -> Result<Option<Vec<u8>>, Error> {
    if size > limit {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    // The file may grow meanwhile: never read past the limit.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// An open directory of a trace (a process's trace directory, a ring directory): the files in
/// it are opened relative to its descriptor.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    uid: u32,
    gid: u32,
}

impl Dir {
    /// Opens directory `path` (its last component is not followed if it is a symbolic link).
    pub fn open(path: &Path) -> Result<Dir, Error> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => Error::io(
                path,
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a directory (symbolic links are not followed)",
                ),
            ),
            e => Error::io(path, e.into()),
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(path, e.into()))?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
            uid: st.st_uid,
            gid: st.st_gid,
        })
    }

    /// The directory's path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this directory (for messages).
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The directory's owner.
    pub(crate) fn uid(&self) -> u32 {
        self.uid
    }

    /// Subdirectory `name` (not followed if it is a symbolic link).
    pub(crate) fn subdir(&self, name: &str) -> Result<Dir, Error> {
        let path = self.join(name);
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(&path, e.into()))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(&path, e.into()))?;
        Ok(Dir {
            fd,
            path,
            uid: st.st_uid,
            gid: st.st_gid,
        })
    }

    /// The type of entry `name`, if it exists (symbolic links not followed).
    pub(crate) fn file_type(&self, name: &str) -> Option<FileType> {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| FileType::from_raw_mode(st.st_mode))
    }

    /// Opens regular file `name` for reading.
    pub fn open_file(&self, name: &str) -> Result<File, Error> {
        open_regular_at(&self.fd, name.as_ref(), &self.join(name), OFlags::RDONLY).map(|(f, _)| f)
    }

    /// Opens the existing regular file `name` for reading and writing.
    pub(crate) fn open_file_rw(&self, name: &str) -> Result<File, Error> {
        open_regular_at(&self.fd, name.as_ref(), &self.join(name), OFlags::RDWR).map(|(f, _)| f)
    }

    /// Reads regular file `name` if it holds at most `limit` bytes (`Ok(None)`: larger).
    pub fn read_file(&self, name: &str, limit: u64) -> Result<Option<Vec<u8>>, Error> {
        let path = self.join(name);
        let (f, st) = open_regular_at(&self.fd, name.as_ref(), &path, OFlags::RDONLY)?;
        read_bounded(f, st.st_size as u64, &path, limit)
    }

    /// Opens file `name` for writing where a trace file is recovered: created with mode 0600
    /// if it does not exist (owned by the directory's owner when the caller may give it away,
    /// as root may); never through a symbolic link; only a regular file with one link (not a
    /// hard link to a file elsewhere); an existing file's mode tightened to 0600. The file is
    /// not truncated: the caller cuts it with `set_len` on the returned descriptor.
    pub(crate) fn open_output(&self, name: &str) -> Result<File, Error> {
        let path = self.join(name);
        let existed = self.file_type(name).is_some();
        let (f, st) = match rustix::fs::openat(
            &self.fd,
            name,
            flags(OFlags::RDWR | OFlags::CREATE),
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => {
                let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(&path, e.into()))?;
                (File::from(fd), st)
            }
            Err(e) => return Err(open_error(&self.fd, name.as_ref(), &path, e)),
        };
        let ft = FileType::from_raw_mode(st.st_mode);
        if ft != FileType::RegularFile {
            return Err(not_regular_error(&path, ft));
        }
        if st.st_nlink != 1 {
            return Err(Error::io(
                &path,
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "has {} hard links: refusing to write to a file that is also elsewhere",
                        st.st_nlink
                    ),
                ),
            ));
        }
        if !existed && st.st_uid != self.uid {
            // Root recovering a user's trace: the user keeps reading their own trace. Fails
            // (harmlessly) for anyone else.
            let _ = rustix::fs::fchown(
                &f,
                Some(rustix::fs::Uid::from_raw(self.uid)),
                Some(rustix::fs::Gid::from_raw(self.gid)),
            );
        }
        if st.st_mode & 0o077 != 0 {
            let _ = rustix::fs::fchmod(&f, Mode::from_raw_mode(0o600));
        }
        Ok(f)
    }

    /// Creates the new regular file `name` for writing: mode 0600, `O_EXCL` (an existing entry
    /// of any kind, a symbolic link included, is an error naming it), never blocking.
    pub fn create_new(&self, name: &str) -> Result<File, Error> {
        let path = self.join(name);
        rustix::fs::openat(
            &self.fd,
            name,
            flags(OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL),
            Mode::from_raw_mode(0o600),
        )
        .map(File::from)
        .map_err(|e| Error::io(&path, e.into()))
    }

    /// Writes `bytes` as file `name` atomically: a new temporary file (`O_EXCL`, 0600, never
    /// through a link), then a rename over `name`.
    pub fn replace_file(&self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        let tmp = format!(".{name}.recover.tmp");
        let path = self.join(name);
        let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
        let r = (|| -> io::Result<()> {
            let fd = rustix::fs::openat(
                &self.fd,
                tmp.as_str(),
                flags(OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL),
                Mode::from_raw_mode(0o600),
            )?;
            let f = File::from(fd);
            f.write_all_at(bytes, 0)?;
            // On disk before the rename: after a crash, the old file or the whole new one.
            f.sync_data()?;
            drop(f);
            rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name)?;
            Ok(())
        })();
        if r.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
        }
        r.map_err(|e| Error::io(&path, e))
    }

    /// Removes entry `name` (not a directory); errors ignored.
    pub(crate) fn remove_file(&self, name: &str) {
        let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
    }

    /// Removes the empty subdirectory `name`; errors ignored.
    pub(crate) fn remove_dir(&self, name: &str) {
        let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"secret").unwrap();
        assert!(open_regular(&f).is_ok());
        let l = dir.path().join("l");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        let e = open_regular(&l).unwrap_err().to_string();
        assert!(e.contains("symbolic link") && e.contains("/l:"), "{e}");
        assert!(!e.contains("secret"));
        let e = open_regular(dir.path()).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        let d = Dir::open(dir.path()).unwrap();
        let e = d.open_output("l").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&f).unwrap(), b"secret");
        let e = d.read_file("l", 100).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn devices_fifos_and_hard_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = Dir::open(dir.path()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("z")).unwrap();
        let e = d.read_file("z", 1 << 30).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        let e = open_regular(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a device"), "{e}");
        let fifo = dir.path().join("p");
        rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        let e = d.open_file("p").unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
        let e = d.open_output("p").unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::fs::hard_link(&victim, dir.path().join("h")).unwrap();
        let e = d.open_output("h").unwrap_err().to_string();
        assert!(e.contains("hard links"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }

    #[test]
    fn outputs_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = Dir::open(dir.path()).unwrap();
        let f = d.open_output("new").unwrap();
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        let old = dir.path().join("old");
        std::fs::write(&old, b"x").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        let f = d.open_output("old").unwrap();
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        d.replace_file("m", b"abc").unwrap();
        let m = std::fs::metadata(dir.path().join("m")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        assert_eq!(d.read_file("m", 3).unwrap().unwrap(), b"abc");
        assert_eq!(d.read_file("m", 2).unwrap(), None);
    }
}
