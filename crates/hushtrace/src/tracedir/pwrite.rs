//! Positional writes that carry on after a short write.

use rustix::fd::BorrowedFd;
use std::io;

pub(super) fn write_all_at(fd: BorrowedFd<'_>, mut bytes: &[u8], mut off: u64) -> io::Result<()> {
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
pub(super) fn write_all_parts_at(
    fd: BorrowedFd<'_>,
    parts: &[&[u8]],
    mut off: u64,
) -> io::Result<()> {
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
