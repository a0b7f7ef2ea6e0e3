//! A kernel trace whose recorder died (SIGKILL, a crash): made readable by `hushtrace recover`,
//! and what readers (`report`, `convert`) say about a session's kernel part.
//!
//! * While it records, the recorder holds an exclusive `flock` on `DIR/kernel`
//!   ([`RecordingLock`]). The kernel drops it however the recorder ends, SIGKILL included: a
//!   free lock means no recorder writes there any more, and only then is anything changed.
//! * The metadata is on disk before the first packet (written at the start, replaced
//!   atomically at the end with the program's clock): a killed recorder leaves it.
//! * A recorder killed while writing a packet leaves a partial packet at the end of a stream
//!   file: [`recover`] cuts each stream after its last complete packet (nothing before it is
//!   touched) and removes the temporary file of an interrupted metadata replacement.
//! * [`part`] tells a reader whether the session has a kernel part and whether it can be read,
//!   so that none is ever skipped without a word.

use crate::ctf::{KernelTrace, KERNEL_DIR, PACKET_MAX, STREAM_PREFIX};
use hushtrace_ctf::layout::{PacketHeader, PACKET_HEADER_LEN};
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The exclusive lock a recorder holds on its kernel trace directory while it writes there.
#[derive(Debug)]
pub struct RecordingLock {
    _dir: File,
}

impl RecordingLock {
    /// Locks `dir` (fails if another process holds it).
    pub fn take(dir: &Path) -> io::Result<RecordingLock> {
        let f = File::open(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        if try_lock(&f)? {
            Ok(RecordingLock { _dir: f })
        } else {
            Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{}: another recorder writes there", dir.display()),
            ))
        }
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: `Ok(false)` when another open file holds it.
fn try_lock(f: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor `f` owns; no memory is involved.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Whether a live recorder holds `dir` (a directory that cannot be opened counts as free).
fn being_recorded(dir: &Path) -> bool {
    File::open(dir).is_ok_and(|f| matches!(try_lock(&f), Ok(false)))
}

/// A session's kernel part, as a reader finds it.
#[derive(Debug, PartialEq, Eq)]
pub enum Part {
    /// The session has no kernel trace.
    None,
    /// A kernel trace that can be opened ([`KernelTrace::open`]).
    Readable(PathBuf),
    /// A kernel trace that cannot be read as it is, and why (said, never skipped silently).
    Unreadable(PathBuf, String),
}

/// The kernel part of session `session_dir` (or of the kernel directory itself).
pub fn part(session_dir: &Path) -> Part {
    let dir = kernel_dir_of(session_dir);
    if std::fs::symlink_metadata(&dir).is_err() {
        return Part::None;
    }
    match problem(&dir) {
        None => Part::Readable(dir),
        Some(why) => Part::Unreadable(dir, why),
    }
}

/// `DIR/kernel`, or `DIR` itself when it is a kernel directory (named `kernel`, with no
/// `kernel` inside).
fn kernel_dir_of(dir: &Path) -> PathBuf {
    let k = dir.join(KERNEL_DIR);
    if std::fs::symlink_metadata(&k).is_err() && dir.file_name().is_some_and(|n| n == KERNEL_DIR) {
        return dir.to_path_buf();
    }
    k
}

/// Why kernel directory `dir` cannot be read as it is, in a state its recorder leaves (being
/// recorded, killed before the metadata or in a packet's write); `None`: it can be opened, and
/// the reader says what else is wrong with it (hostile or damaged files are errors).
fn problem(dir: &Path) -> Option<String> {
    if !dir.is_dir() {
        return Some("not a directory".into());
    }
    if being_recorded(dir) {
        return Some(
            "still being recorded (its `hushtrace record` runs): read it when that ends".into(),
        );
    }
    let streams = match streams(dir) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    // Absent (a FIFO, a link or a directory under that name is the reader's error).
    if std::fs::symlink_metadata(dir.join("metadata")).is_err() {
        let data = streams
            .iter()
            .any(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0));
        return Some(if data {
            "no metadata: its recorder died before writing it (a hushtrace that wrote it only at \
             the end); its events cannot be decoded"
                .into()
        } else {
            "no metadata and no events: its recorder died as it started".into()
        });
    }
    // Damage (a scan error) is not a state a recorder leaves: the reader names it and fails.
    for p in &streams {
        if scan(p).is_ok_and(|s| s.partial > 0) {
            return Some(format!(
                "{}: a partial packet at its end (its recorder was killed): run `hushtrace \
                 recover`",
                p.display()
            ));
        }
    }
    None
}

/// The stream files of kernel directory `dir`, sorted.
fn streams(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?
    {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with(STREAM_PREFIX) && e.file_type()?.is_file() {
            v.push(e.path());
        }
    }
    v.sort();
    Ok(v)
}

/// The packets of one stream file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Scan {
    /// Complete packets.
    packets: u64,
    /// Bytes they take (where the file is cut).
    complete: u64,
    /// Bytes after them: a partial packet.
    partial: u64,
}

/// The header of the packet beginning with `h` (at least [`PACKET_HEADER_LEN`] bytes, decoded
/// by [`PacketHeader`], the one codec of hushtrace's packet headers); `None` when the magic is
/// wrong.
fn packet_header(h: &[u8]) -> Option<PacketHeader> {
    PacketHeader::decode(h).filter(|_| PacketHeader::magic_ok(h))
}

/// Walks the packets of stream file `path` (reading their headers only): complete ones, then
/// at most one partial one at the end. Anything else (a bad packet before the end) is an error
/// naming the offset: that is damage, not an interrupted write, and is not cut away.
fn scan(path: &Path) -> Result<Scan, String> {
    use std::os::unix::fs::FileExt;
    let named = |e: io::Error| format!("{}: {e}", path.display());
    let f = File::open(path).map_err(named)?;
    let len = f.metadata().map_err(named)?.len();
    let mut s = Scan::default();
    let mut pos = 0u64;
    let mut h = [0u8; PACKET_HEADER_LEN];
    while pos < len {
        let n = (len - pos).min(PACKET_HEADER_LEN as u64) as usize;
        f.read_exact_at(&mut h[..n], pos).map_err(named)?;
        // Even a partial header starts with the magic: a write is cut, not garbled.
        if n >= 4 && !PacketHeader::magic_ok(&h[..n]) {
            return Err(format!(
                "{}: byte offset {pos}: not a packet (bad magic)",
                path.display()
            ));
        }
        let Some(p) = packet_header(&h[..n]) else {
            break;
        };
        let (content, size) = (p.content_size / 8, p.packet_size / 8);
        if content < PACKET_HEADER_LEN as u64 || size < content || size > PACKET_MAX as u64 {
            return Err(format!(
                "{}: byte offset {pos}: packet size {size} / content {content} impossible                  (a hushtrace kernel packet has {PACKET_HEADER_LEN} to {PACKET_MAX} bytes)",
                path.display()
            ));
        }
        if size > len - pos {
            break;
        }
        s.packets += 1;
        pos += size;
    }
    s.complete = pos;
    s.partial = len - pos;
    Ok(s)
}

/// Where every CPU's events begin in kernel trace `dir`, in its clock's cycles, when some
/// stream lost events before its first one (a ring that wrapped: a flight recorder's
/// snapshot, or a buffer that filled before it was first read): the latest begin of those
/// streams' first packets. Before it some CPU's events are missing, so a thread's time there
/// cannot be told. `None` when no stream lost events before its first: the trace covers its
/// whole recording.
pub fn complete_from(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut from = None;
    for p in streams(dir).ok()? {
        let mut h = [0u8; PACKET_HEADER_LEN];
        let Ok(f) = File::open(&p) else { continue };
        if f.read_exact_at(&mut h, 0).is_err() {
            continue;
        }
        if let Some(first) = packet_header(&h).filter(|p| p.events_discarded > 0) {
            from = from.max(Some(first.timestamp_begin));
        }
    }
    from
}

/// What [`recover`] did to a kernel trace.
#[derive(Debug, Default)]
pub struct Recovery {
    /// The kernel directory (`None`: the session has none).
    pub dir: Option<PathBuf>,
    /// Stream files cut after their last complete packet, with the bytes cut.
    pub cut: Vec<(PathBuf, u64)>,
    /// Whether the temporary file of an interrupted metadata replacement was removed.
    pub temp_removed: bool,
    /// The CPUs of the trace, when something was changed and it now opens.
    pub readable: Option<usize>,
    /// Whether a live recorder writes it (then nothing was touched).
    pub recording: bool,
    /// Why it is still not readable (a live recorder, no metadata, damage).
    pub problem: Option<String>,
}

impl Recovery {
    /// Whether anything was changed.
    pub fn changed(&self) -> bool {
        !self.cut.is_empty() || self.temp_removed
    }
}

/// Makes the kernel trace of session `session_dir` readable if its recorder died while
/// writing it (see the module docs); a trace being recorded is left alone.
pub fn recover(session_dir: &Path) -> Recovery {
    let dir = kernel_dir_of(session_dir);
    let mut r = Recovery::default();
    if std::fs::symlink_metadata(&dir).is_err() {
        return r;
    }
    r.dir = Some(dir.clone());
    // The lock, held until the end: no recorder can start writing here meanwhile.
    let _lock = match RecordingLock::take(&dir) {
        Ok(l) => l,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            r.recording = true;
            r.problem = problem(&dir);
            return r;
        }
        Err(e) => {
            r.problem = Some(e.to_string());
            return r;
        }
    };
    // `.metadata.recover.tmp` (`hushtrace_ctf::file::Dir::replace_file`, how the recorder
    // writes it) or `.metadata.tmp` (the name earlier recorders used).
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(".metadata") && n.ends_with(".tmp") {
                r.temp_removed |= std::fs::remove_file(e.path()).is_ok();
            }
        }
    }
    match streams(&dir) {
        Ok(files) => {
            for p in files {
                match scan(&p) {
                    Ok(s) if s.partial > 0 => match cut(&p, s.complete) {
                        Ok(()) => r.cut.push((p, s.partial)),
                        Err(e) => r.problem = Some(e),
                    },
                    Ok(_) => {}
                    Err(e) => r.problem = Some(e),
                }
            }
        }
        Err(e) => r.problem = Some(e.to_string()),
    }
    drop(_lock);
    if r.problem.is_none() {
        r.problem = problem(&dir);
    }
    // What was changed is checked by reading it all (readers read it anyway otherwise).
    if r.problem.is_none() && r.changed() {
        match KernelTrace::open(&dir) {
            Ok(k) => r.readable = Some(k.cpus.len()),
            Err(e) => r.problem = Some(e.to_string()),
        }
    }
    r
}

/// Cuts `path` to `len` bytes.
fn cut(path: &Path, len: u64) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len))
        .map_err(|e| format!("{}: cutting to {len} bytes: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::KernelClock;
    use crate::ctf::{self, KernelMeta, Out, StreamWriter};
    use crate::schema::id_of;
    use hushtrace_ctf::metadata::ClockDesc;

    fn meta() -> KernelMeta {
        KernelMeta {
            uuid: [3; 16],
            clock: KernelClock {
                name: "monotonic".into(),
                uuid: [4; 16],
                desc: ClockDesc {
                    freq: 1_000_000_000,
                    offset_s: 0,
                    offset: 0,
                    source: "clock_gettime".into(),
                },
                note: "n".into(),
            },
            trace_clock: "mono".into(),
            hostname: "h".into(),
            kernel_release: "6.1".into(),
            categories: "sched".into(),
            classes: Default::default(),
        }
    }

    /// Writes the metadata of [`meta`] into `dir` as the recorder does.
    fn write_metadata(dir: &Path) {
        hushtrace_ctf::file::Dir::open(dir)
            .and_then(|d| d.replace_file("metadata", ctf::to_tsdl(&meta()).as_bytes()))
            .unwrap();
    }

    /// How many events kernel trace `dir` holds, read to the end.
    fn count(dir: &Path) -> usize {
        let k = KernelTrace::open(dir).unwrap();
        let mut ev = k.events().unwrap();
        let mut n = 0;
        while ev.next().unwrap().is_some() {
            n += 1;
        }
        n
    }

    /// A kernel directory with `packets` packets of 10 events in `channel0_0`.
    fn trace(dir: &Path, packets: u64) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        write_metadata(dir);
        let path = dir.join("channel0_0");
        let mut w = StreamWriter::create(&path, meta().uuid, 0, 0).unwrap();
        for p in 0..packets {
            for i in 0..10 {
                w.event(
                    id_of("sched_waking").unwrap(),
                    p * 100 + i,
                    &[Out::Text(b"x"), Out::Int(1), Out::Int(2), Out::Int(3)],
                )
                .unwrap();
            }
            w.flush().unwrap();
        }
        path
    }

    #[test]
    fn a_partial_packet_at_the_end_is_cut_and_the_rest_reads() {
        let tmp = tempfile::tempdir().unwrap();
        let k = tmp.path().join(KERNEL_DIR);
        let stream = trace(&k, 3);
        let whole = std::fs::read(&stream).unwrap();
        let packet = whole.len() / 3;
        for keep in [
            1,
            3,
            PACKET_HEADER_LEN - 1,
            PACKET_HEADER_LEN + 5,
            packet - 1,
        ] {
            let mut b = whole.clone();
            b.extend_from_slice(&whole[..keep]);
            std::fs::write(&stream, &b).unwrap();
            std::fs::write(k.join(".metadata.tmp"), "half").unwrap();
            std::fs::write(k.join(".metadata.recover.tmp"), "half").unwrap();
            assert!(
                matches!(part(tmp.path()), Part::Unreadable(_, ref w) if w.contains("partial")),
                "{:?}",
                part(tmp.path())
            );
            let r = recover(tmp.path());
            assert_eq!(r.problem, None);
            assert_eq!(r.cut, [(stream.clone(), keep as u64)]);
            assert!(r.temp_removed);
            assert!(!k.join(".metadata.recover.tmp").exists() && !k.join(".metadata.tmp").exists());
            assert_eq!(r.readable, Some(1));
            assert_eq!(count(&k), 30);
            assert_eq!(std::fs::read(&stream).unwrap(), whole);
            assert_eq!(part(tmp.path()), Part::Readable(k.clone()));
            // Again: nothing to do.
            assert!(!recover(tmp.path()).changed());
        }
    }

    #[test]
    fn complete_from_is_the_latest_start_of_the_streams_that_lost_events() {
        let tmp = tempfile::tempdir().unwrap();
        let k = tmp.path().join(KERNEL_DIR);
        trace(&k, 1); // channel0_0: events from 0, nothing lost
        assert_eq!(complete_from(&k), None);
        let ev = |w: &mut StreamWriter, ts| {
            w.event(
                id_of("sched_waking").unwrap(),
                ts,
                &[Out::Text(b"x"), Out::Int(1), Out::Int(2), Out::Int(3)],
            )
            .unwrap()
        };
        for (cpu, first) in [(1u32, 500u64), (2, 300)] {
            let path = k.join(format!("channel0_{cpu}"));
            let mut w = StreamWriter::create(&path, meta().uuid, u64::from(cpu), cpu).unwrap();
            w.lost(7);
            ev(&mut w, first);
            ev(&mut w, first + 1000);
            w.flush().unwrap();
        }
        assert_eq!(complete_from(&k), Some(500));
    }

    #[test]
    fn damage_before_the_end_is_said_and_not_cut() {
        let tmp = tempfile::tempdir().unwrap();
        let k = tmp.path().join(KERNEL_DIR);
        let stream = trace(&k, 3);
        let mut b = std::fs::read(&stream).unwrap();
        let second = b.len() / 3;
        b[second] ^= 0xff;
        std::fs::write(&stream, &b).unwrap();
        let r = recover(tmp.path());
        assert!(r.problem.as_deref().unwrap().contains("bad magic"), "{r:?}");
        assert!(r.cut.is_empty());
        assert_eq!(std::fs::read(&stream).unwrap(), b);
        // Readers are not told to skip it: their reader names the damage and fails.
        assert_eq!(part(tmp.path()), Part::Readable(k.clone()));
        let mut ev = KernelTrace::open(&k).unwrap().events().unwrap();
        let e = std::iter::from_fn(|| ev.next().transpose())
            .find_map(Result::err)
            .expect("an error");
        assert!(e.to_string().contains("magic"), "{e}");
        // A packet claiming more than the writer ever writes is damage, not a cut write.
        let mut b = std::fs::read(&stream).unwrap();
        b[second] ^= 0xff;
        let size = PacketHeader::decode(&b).unwrap().with_len(PACKET_MAX + 1);
        size.write_to(&mut b);
        std::fs::write(&stream, &b).unwrap();
        let r = recover(tmp.path());
        assert!(
            r.problem.as_deref().unwrap().contains("impossible"),
            "{r:?}"
        );
        assert!(r.cut.is_empty());
        assert_eq!(std::fs::read(&stream).unwrap(), b);
        // A short tail that does not start as a packet is damage too, not a cut write.
        let tmp = tempfile::tempdir().unwrap();
        let k = tmp.path().join(KERNEL_DIR);
        let stream = trace(&k, 1);
        let mut b = std::fs::read(&stream).unwrap();
        b.extend_from_slice(&[0xab; 10]);
        std::fs::write(&stream, &b).unwrap();
        let r = recover(tmp.path());
        assert!(r.problem.as_deref().unwrap().contains("bad magic"), "{r:?}");
        assert_eq!(std::fs::read(&stream).unwrap(), b);
    }

    #[test]
    fn missing_metadata_and_a_live_recorder_are_said() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(part(tmp.path()), Part::None);
        let k = tmp.path().join(KERNEL_DIR);
        std::fs::create_dir(&k).unwrap();
        assert!(matches!(part(tmp.path()), Part::Unreadable(_, w) if w.contains("no events")));
        trace(&k, 1);
        std::fs::remove_file(k.join("metadata")).unwrap();
        let r = recover(tmp.path());
        assert!(r.problem.unwrap().contains("no metadata"));
        write_metadata(&k);
        // Recording: read as "still being recorded", and not touched.
        let lock = RecordingLock::take(&k).unwrap();
        assert!(RecordingLock::take(&k).is_err());
        let stream = k.join("channel0_0");
        let mut b = std::fs::read(&stream).unwrap();
        b.push(0xc1);
        std::fs::write(&stream, &b).unwrap();
        let r = recover(tmp.path());
        assert!(r.recording);
        assert!(r.problem.unwrap().contains("still being recorded"));
        assert_eq!(std::fs::read(&stream).unwrap().len(), b.len());
        drop(lock);
        let r = recover(tmp.path());
        assert_eq!((r.problem, r.readable), (None, Some(1)));
        // The kernel directory itself names the same part.
        assert_eq!(part(&k), Part::Readable(k.clone()));
    }
}
