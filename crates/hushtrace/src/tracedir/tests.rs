//! Unit tests of the stream files: the `O_DIRECT` layout and what the files hold.

use super::direct::{aligned, direct_layout, round_up, Scratch};
use super::*;
use hushtrace_ctf::layout::{
    read_u64, PacketHeader, OFF_CONTENT_SIZE, OFF_PACKET_SIZE, PACKET_HEADER_LEN,
};
use std::path::{Path, PathBuf};

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
    want[OFF_PACKET_SIZE..OFF_PACKET_SIZE + 8].copy_from_slice(&(padded as u64 * 8).to_le_bytes());
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
            return Err(format!("unshare: {}", std::io::Error::last_os_error()));
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
            return Err(format!(
                "make / private: {}",
                std::io::Error::last_os_error()
            ));
        }
        if libc::mount(ramfs.as_ptr(), cmnt.as_ptr(), ramfs.as_ptr(), 0, none as _) != 0 {
            return Err(format!("mount ramfs: {}", std::io::Error::last_os_error()));
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
