//! Opening trace files safely: only regular files, never through a symbolic link, never
//! blocking (a FIFO or device planted under a trace file's name is an error, not a hang).

use crate::reader::Error;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// `open(2)` flags std does not name: never through a symbolic link, never blocking on a FIFO
/// or device. The `lstat` before and `fstat` after `open` check the file type as well.
const FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK;

/// What a non-regular file is, for error messages.
fn describe(ft: std::fs::FileType) -> &'static str {
    if ft.is_symlink() {
        "a symbolic link (not followed)"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

pub(crate) fn not_regular(path: &Path, ft: std::fs::FileType) -> Error {
    let what = describe(ft);
    let msg = if what.starts_with("not") {
        what.to_string()
    } else {
        format!("is {what}, not a regular file")
    };
    Error::io(path, io::Error::new(io::ErrorKind::InvalidInput, msg))
}

/// Whether `path` exists as a directory entry of any type (symbolic links not followed).
pub(crate) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Opens `path` for reading if it is a regular file: not through a symbolic link
/// (`O_NOFOLLOW`), without blocking on a FIFO or device (`O_NONBLOCK`; std adds
/// `O_CLOEXEC`), and checked with `fstat` after opening. Anything else is an error naming the
/// path and what it is; its content is never read.
pub(crate) fn open_regular(path: &Path) -> Result<File, Error> {
    // Gives the clear message in the common case; the flags and the fstat below close the race
    // with a file swapped in between.
    let lmeta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !lmeta.file_type().is_file() {
        return Err(not_regular(path, lmeta.file_type()));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(FLAGS)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(path, meta.file_type()));
    }
    Ok(file)
}

/// Reads at most `limit` bytes of the regular file `path` (see [`open_regular`]); `Ok(None)` if
/// it is larger.
pub(crate) fn read_regular(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, Error> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
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
    }
}
