//! Descriptors the tracer opened, checked (device and inode) before every use: a program that
//! closes and reuses their numbers never receives a trace packet.

use rustix::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::io;

/// Device and inode: what a descriptor must still refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    pub(super) fn of(fd: BorrowedFd<'_>) -> io::Result<FileId> {
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
pub(super) struct Checked {
    pub(super) fd: Option<OwnedFd>,
    id: FileId,
}

impl Checked {
    pub(super) fn new(fd: OwnedFd) -> io::Result<Checked> {
        let id = FileId::of(fd.as_fd())?;
        Ok(Checked { fd: Some(fd), id })
    }

    /// The descriptor if it still refers to our file; otherwise forgets it (without closing:
    /// the number may be the program's now) and returns `None`.
    pub(super) fn get(&mut self) -> Option<BorrowedFd<'_>> {
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
    pub(super) fn reinstall(&mut self, fd: OwnedFd) -> bool {
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
