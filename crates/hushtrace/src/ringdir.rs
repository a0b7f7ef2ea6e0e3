//! Where this process's ring files live, and the files around them.
//!
//! Rings are kept in files that outlive the process, so `hushtrace recover` can turn what a
//! killed process left into a trace:
//!
//! * on a tmpfs when there is one: `/dev/shm/hushtrace-<uid>/<pid>[.n]/` (no write-back, no
//!   write-protect faults); the file `<pid>[.n].trace` next to it names the trace directory
//!   back (outside the ring directory, which `recover` removes once it is empty);
//! * else in the trace directory's [`FALLBACK_DIR`] subdirectory, named apart from the
//!   trace directory's pointer file ([`RINGS_FILE`]).
//!
//! The trace directory's pointer file names the ring directory. Its write is checked: rings
//! that `recover` could not find would be useless, so without it they go to private memory.
//!
//! Every ring file is allocated in full when it is created ([`platform::reserve_file`]): a
//! full or small tmpfs makes the rings that do not fit fall back to private memory (one warning
//! per process), and never kills the program with SIGBUS.
//!
//! At session start ([`clean_stale`]) the ring directories that processes of this user left
//! on the tmpfs when they were killed are looked at: a directory whose process is gone and
//! that no trace points to any more (its trace was deleted or recovered) is removed; one that
//! a trace still points to is left for `hushtrace recover` (which `hushtrace report` runs),
//! and a warning says so when such rings take more than a quarter of the tmpfs. Nothing of a
//! process that may still run is ever touched.

use crate::platform;
use crate::ring::{Buffer, Mode};
use crate::tracedir::Dir;
use hushtrace_ctf::ringfile::{RINGS_FILE, RING_PREFIX, TYPES_FILE};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Subdirectory of a trace directory holding its ring files when there is no usable tmpfs.
pub(crate) const FALLBACK_DIR: &str = "ring-files";
/// Suffix of the file next to a ring directory on the tmpfs that names its trace directory.
const TRACE_SUFFIX: &str = ".trace";
/// The tmpfs ring directories go under.
const SHM: &str = "/dev/shm";

/// Whether this process already warned that a ring went to private memory.
static WARNED: AtomicBool = AtomicBool::new(false);

/// The base directory of this user's ring directories on the tmpfs.
fn shm_base() -> PathBuf {
    Path::new(SHM).join(format!("hushtrace-{}", platform::geteuid()))
}

/// Makes this process's ring directory (a new one per session and per fork child), points the
/// trace directory's pointer file at it, and installs the types mirror there. `None`: rings in
/// private memory (not crash-persistent), with a warning saying why.
pub(crate) fn setup(trace_dir: &mut Dir, pid: u32) -> Option<Dir> {
    WARNED.store(false, Ordering::Relaxed);
    let (mut rings, base) = match shm_dir(pid) {
        Some((base, d)) => (d, Some(base)),
        None => (trace_dir.open_or_create_subdir(FALLBACK_DIR).ok()?, None),
    };
    let mut pointer = rings.path().as_os_str().as_bytes().to_vec();
    pointer.push(b'\n');
    if let Err(e) = trace_dir.replace_file(RINGS_FILE, &pointer) {
        eprintln!(
            "hushtrace: {}: {e}: the rings stay in private memory (`hushtrace recover` could not \
             find them after a crash)",
            trace_dir.path().join(RINGS_FILE).display()
        );
        remove(rings);
        return None;
    }
    if let Some(mut base) = base {
        let mut back = trace_dir.path().as_os_str().as_bytes().to_vec();
        back.push(b'\n');
        // Without it the directory is only cleaned up by `recover` (never by a later start).
        let _ = base.replace_file(&back_name(rings.path()), &back);
    }
    install_types_mirror(&mut rings);
    Some(rings)
}

/// A private directory for this process's ring files on the tmpfs
/// (`/dev/shm/hushtrace-<uid>/<pid>[.n]`) with the base directory, or `None` when there is no
/// usable one.
fn shm_dir(pid: u32) -> Option<(Dir, Dir)> {
    if !Path::new(SHM).is_dir() {
        return None;
    }
    let mut root = Dir::open_root(&shm_base()).ok()?;
    let mut next = 0;
    let d = root.create_subdir(&pid.to_string(), &mut next).ok()?;
    Some((root, d))
}

/// The name of the back pointer file of the ring directory `ring_dir` (in its parent).
fn back_name(ring_dir: &Path) -> String {
    let name = ring_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name}{TRACE_SUFFIX}")
}

/// A ring in a new file `ring_<instance>` of the ring directory, its pages allocated (see the
/// module docs). `None` when the file cannot be made or its pages cannot be had: the file is
/// removed, the caller uses private memory, and the first such ring of the process is
/// reported on stderr.
pub(crate) fn new_ring(
    dir: &mut Dir,
    instance: u64,
    subbuf_size: usize,
    num_subbufs: usize,
    mode: Mode,
    uuid: [u8; 16],
) -> Option<Buffer> {
    let name = format!("{RING_PREFIX}{instance}");
    let r = dir.create_rw_file(&name).and_then(|fd| {
        Buffer::new_in_file(
            rustix::fd::AsFd::as_fd(&fd),
            subbuf_size,
            num_subbufs,
            mode,
            instance,
            uuid,
        )
    });
    match r {
        Ok(b) => Some(b),
        Err(e) => {
            dir.remove_file(&name);
            if !WARNED.swap(true, Ordering::Relaxed) {
                let bytes = hushtrace_ctf::ringfile::HEADER_LEN + subbuf_size * num_subbufs;
                eprintln!(
                    "hushtrace: no room for a ring of {bytes} bytes in {} ({e}): the rings that \
                     do not fit are kept in private memory (the tracing goes on, but `hushtrace \
                     recover` cannot restore them after a crash); free space there or use \
                     smaller rings (HUSHTRACE_SUBBUF_SIZE, HUSHTRACE_NUM_SUBBUFS)",
                    dir.path().display()
                );
            }
            None
        }
    }
}

/// Maps `<ring dir>/types` (allocated in full, like the rings) and installs it as
/// hushtrace-core's types mirror (field types and names of every callsite as soon as they are
/// known, for crash recovery). The mapping is never unmapped (a publishing thread may write to
/// it at any time); a later session maps a new one. Without room for it there is no mirror.
fn install_types_mirror(rings: &mut Dir) {
    let records = hushtrace_core::all_callsites().count() + hushtrace_core::MAX_REGISTERED;
    let Ok(fd) = rings.create_rw_file(TYPES_FILE) else {
        return;
    };
    let len = records * hushtrace_core::mirror::RECORD_LEN;
    let fd_ref = rustix::fd::AsFd::as_fd(&fd);
    match platform::reserve_file(fd_ref, len as u64)
        .ok()
        .and_then(|()| platform::map_shared(fd_ref, len))
    {
        // SAFETY: `p` maps `len` = records * RECORD_LEN bytes and is never unmapped.
        Some(p) => unsafe { hushtrace_core::mirror::set_types_mirror(p, records) },
        None => {
            drop(fd);
            rings.remove_file(TYPES_FILE);
        }
    }
}

/// Removes a ring directory whose rings are all drained or gone: its types mirror, then the
/// directory itself if nothing else is left in it, then its back pointer on the tmpfs.
pub(crate) fn remove(mut rings: Dir) {
    rings.remove_file(TYPES_FILE);
    rings.remove_if_empty();
    if rings.path().parent() == Some(shm_base().as_path()) && !rings.path().exists() {
        let _ = std::fs::remove_file(shm_base().join(back_name(rings.path())));
    }
}

/// What [`clean_stale`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Stale {
    /// Ring directories removed (their process is gone, no trace points to them).
    pub removed: usize,
    /// Ring directories left for `hushtrace recover`: the trace directories they belong to.
    pub recoverable: Vec<PathBuf>,
    /// Bytes of the ring files in them.
    pub recoverable_bytes: u64,
}

/// Session start: removes the ring directories of this user's processes that are gone and
/// that no trace points to (see the module docs), and warns about the ones that still wait for
/// `hushtrace recover`.
pub(crate) fn clean_stale() {
    let base = shm_base();
    if std::fs::symlink_metadata(&base).is_err() {
        return;
    }
    let Ok(mut root) = Dir::open_root(&base) else {
        return;
    };
    let stale = clean_stale_in(&mut root);
    // Said only when they take a good part of the tmpfs (a quarter): a few crashed traces
    // waiting for `recover` are normal, and `hushtrace report` recovers them.
    if platform::fs_size(&base).is_none_or(|size| stale.recoverable_bytes <= size / 4) {
        return;
    }
    let n = stale.recoverable.len();
    let shown: Vec<String> = stale
        .recoverable
        .iter()
        .take(3)
        .map(|p| p.display().to_string())
        .collect();
    let more = if n > 3 { ", ..." } else { "" };
    let plural = if n == 1 { "y" } else { "ies" };
    eprintln!(
        "hushtrace: {n} ring director{plural} of killed processes ({} MiB) in {} wait for \
         `hushtrace recover` on their trace ({}{more}); they hold memory until then",
        stale.recoverable_bytes >> 20,
        base.display(),
        shown.join(", ")
    );
}

/// [`clean_stale`] on the base directory `root` (a directory private to this user).
pub(crate) fn clean_stale_in(root: &mut Dir) -> Stale {
    let mut out = Stale::default();
    let me = platform::getpid();
    let Ok(entries) = root.entries() else {
        return out;
    };
    // `<pid>` or `<pid>.<n>`, of a process that is gone; anything else is not ours to judge.
    let gone = |name: &str| {
        name.split('.')
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(|pid| pid != me && platform::process_gone(pid))
    };
    for (name, _) in entries.iter().filter(|(n, is_dir)| *is_dir && gone(n)) {
        // Refuses a link, or a directory that is not this user's alone.
        let Ok(mut d) = root.open_subdir(name) else {
            continue;
        };
        let Ok(files) = d.entries() else {
            continue;
        };
        let has_rings = files.iter().any(|(f, _)| f.starts_with(RING_PREFIX));
        let back = root
            .read_small(&back_name(d.path()), 4096)
            .ok()
            .map(|b| PathBuf::from(std::ffi::OsStr::from_bytes(b.trim_ascii_end())));
        let pointed_to = back.as_deref().is_some_and(|t| points_to(t, d.path()));
        match (has_rings, back) {
            // The trace still names these rings: `recover` needs them.
            (true, Some(t)) if pointed_to => {
                out.recoverable.push(t);
                out.recoverable_bytes += files
                    .iter()
                    .filter(|(f, _)| f.starts_with(RING_PREFIX))
                    .filter_map(|(f, _)| std::fs::symlink_metadata(d.path().join(f)).ok())
                    .map(|m| m.len())
                    .sum::<u64>();
                continue;
            }
            // Rings of an older version (no back pointer): `recover` of their trace may still
            // want them.
            (true, None) => continue,
            _ => {}
        }
        // Nothing to recover from here: remove the files the tracer makes, then the
        // directory (left alone if anything else is in it), then its back pointer.
        for (f, sub) in &files {
            if !sub && (f.starts_with(RING_PREFIX) || f == TYPES_FILE || f.starts_with('.')) {
                d.remove_file(f);
            }
        }
        let back = back_name(d.path());
        drop(d);
        if root.remove_subdir(name).is_ok() {
            root.remove_file(&back);
            out.removed += 1;
        }
    }
    // Back pointers whose ring directory is gone (removed by `recover`).
    for (name, _) in entries.iter().filter(|(_, is_dir)| !*is_dir) {
        if let Some(dir) = name.strip_suffix(TRACE_SUFFIX) {
            if gone(dir) && !entries.iter().any(|(n, d)| *d && n == dir) {
                root.remove_file(name);
            }
        }
    }
    out
}

/// Whether the trace directory `trace` may still want the ring directory `ring_dir`: false
/// only when it is known not to (the trace directory or its pointer file is gone, or the file
/// names another directory); any other doubt keeps the rings.
fn points_to(trace: &Path, ring_dir: &Path) -> bool {
    use hushtrace_ctf::reader::ErrorKind;
    match hushtrace_ctf::ringfile::read_pointer_file(&trace.join(RINGS_FILE)) {
        Ok(Some(b)) => b.trim_ascii_end() == ring_dir.as_os_str().as_bytes(),
        // Larger than a pointer file: not one the runtime wrote, but no proof either.
        Ok(None) => true,
        // Gone: the trace no longer wants the rings. Anything else (a link, a FIFO, no
        // permission) is a doubt.
        Err(e) => {
            !matches!(&e.kind, ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh trace directory under the system temp dir.
    fn trace_dir(tag: &str) -> PathBuf {
        let d = hushtrace_testsupport::fresh_temp_path("hushtrace-ringdir", tag);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn points_to_follows_the_pointer_file_and_keeps_rings_in_doubt() {
        let ring = Path::new("/dev/shm/hushtrace-0/123");
        // The trace directory, or its pointer file, is gone: the rings are not wanted.
        assert!(!points_to(
            Path::new("/nonexistent/hushtrace-ringdir"),
            ring
        ));
        let t = trace_dir("pointer");
        assert!(!points_to(&t, ring));
        // The pointer names these rings (with the newline the runtime writes), or others.
        std::fs::write(t.join(RINGS_FILE), b"/dev/shm/hushtrace-0/123\n").unwrap();
        assert!(points_to(&t, ring));
        std::fs::write(t.join(RINGS_FILE), b"/dev/shm/hushtrace-0/124\n").unwrap();
        assert!(!points_to(&t, ring));
        // Larger than a pointer file: in doubt.
        std::fs::write(t.join(RINGS_FILE), vec![b'/'; 5000]).unwrap();
        assert!(points_to(&t, ring));
        // A symbolic link to a file naming the rings: not followed, in doubt.
        std::fs::remove_file(t.join(RINGS_FILE)).unwrap();
        std::fs::write(t.join("other"), b"/dev/shm/hushtrace-0/124\n").unwrap();
        std::os::unix::fs::symlink(t.join("other"), t.join(RINGS_FILE)).unwrap();
        assert!(points_to(&t, ring));
        // A FIFO: never waited on, in doubt.
        std::fs::remove_file(t.join(RINGS_FILE)).unwrap();
        let fifo = std::ffi::CString::new(t.join(RINGS_FILE).as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(points_to(&t, ring));
        std::fs::remove_dir_all(&t).unwrap();
    }
}
