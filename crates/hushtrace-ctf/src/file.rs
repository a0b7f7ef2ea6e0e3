//! Opening trace files safely: only regular files, never through a symbolic link, never
//! blocking (a FIFO or device planted under a trace file's name is an error, not a hang).

use crate::reader::Error;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

// `open(2)` flags std does not name. Values as in the `libc` crate for these targets; where they
// are unknown the flags are 0 and only the checks before and after `open` remain (an `lstat`
// before, which rejects symbolic links, FIFOs and devices; an `fstat` after).
#[cfg(all(
    target_os = "linux",
    any(
        target_arch = "x86",
        target_arch = "x86_64",
        target_arch = "riscv32",
        target_arch = "riscv64",
        target_arch = "loongarch64",
        target_arch = "s390x"
    )
))]
const FLAGS: i32 = 0x20000 /* O_NOFOLLOW */ | 0x800 /* O_NONBLOCK */;
#[cfg(all(
    target_os = "linux",
    any(
        target_arch = "arm",
        target_arch = "aarch64",
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "m68k"
    )
))]
const FLAGS: i32 = 0x8000 /* O_NOFOLLOW */ | 0x800 /* O_NONBLOCK */;
#[cfg(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly"
))]
const FLAGS: i32 = 0x100 /* O_NOFOLLOW */ | 0x4 /* O_NONBLOCK */;
#[cfg(not(any(
    all(
        target_os = "linux",
        any(
            target_arch = "x86",
            target_arch = "x86_64",
            target_arch = "riscv32",
            target_arch = "riscv64",
            target_arch = "loongarch64",
            target_arch = "s390x",
            target_arch = "arm",
            target_arch = "aarch64",
            target_arch = "powerpc",
            target_arch = "powerpc64",
            target_arch = "m68k"
        )
    ),
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly"
)))]
const FLAGS: i32 = 0;

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
