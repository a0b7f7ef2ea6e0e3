//! `O_DIRECT` stream writes: how the files are written ([`StreamIo`]), the padded, aligned
//! layout of a packet, and whether (and at which alignment) the file system takes them.

use rustix::fd::BorrowedFd;
#[cfg(any(target_os = "linux", target_os = "android"))]
use rustix::fs::OFlags;
use std::path::Path;

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
pub(super) fn round_up(len: usize, align: usize) -> usize {
    (len + align - 1) & !(align - 1)
}

/// `len` bytes of `buf` starting at an `align`-aligned address (`buf` grown as needed).
pub(super) fn aligned(buf: &mut Vec<u8>, len: usize, align: usize) -> &mut [u8] {
    if buf.len() < len + align {
        buf.resize(len + align, 0);
    }
    let off = buf.as_ptr().align_offset(align);
    &mut buf[off..off + len]
}

/// Scratch memory for the `O_DIRECT` writes: the packet's first and last blocks (or, for a
/// packet not laid out as a ring slot holds it, the whole packet).
#[derive(Debug, Default)]
pub(super) struct Scratch {
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
pub(super) fn direct_layout<'a>(
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
pub(super) fn direct_refused(dir: &Path) {
    eprintln!(
        "hushtrace: {}: the file system refuses O_DIRECT (HUSHTRACE_DIRECT_IO, \
         SessionBuilder::direct_io); stream files are written through the page cache",
        dir.display()
    );
}

/// Sets `O_DIRECT` on `fd`; false when the file system refuses it.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn set_direct(fd: BorrowedFd<'_>, on: bool) -> bool {
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
pub(super) fn direct_align(fd: BorrowedFd<'_>) -> Option<usize> {
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
pub(super) fn set_direct(_fd: BorrowedFd<'_>, _on: bool) -> bool {
    false
}

/// See the Linux version: no `O_DIRECT` here.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn direct_align(_fd: BorrowedFd<'_>) -> Option<usize> {
    None
}
