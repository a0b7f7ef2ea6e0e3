//! A session recovered: each dead process's ring directory found, its rings recovered and its
//! metadata completed.

use super::ring::recover_ring_file;
use super::*;

/// The most bytes a ring directory pointer file may hold.
const MAX_POINTER_BYTES: u64 = 4096;

/// The most bytes of a types mirror read: a record per possible event id.
const MAX_TYPES_BYTES: u64 = (u16::MAX as u64 + 1) * hushtrace_core::mirror::RECORD_LEN as u64;

/// Reads the ring directory pointer file at `path` through the safe-open layer: only a regular
/// file, never through a symbolic link, never blocking, at most 4096 bytes read.
/// `Ok(None)` when it is larger than that; an error names the path and what it is otherwise
/// (a missing file is an [`ErrorKind::Io`](crate::reader::ErrorKind::Io) of kind `NotFound`).
pub fn read_pointer_file(path: &Path) -> Result<Option<Vec<u8>>, crate::reader::Error> {
    file::read_regular(path, MAX_POINTER_BYTES)
}

/// The ring directory of the trace directory `td`: the directory its pointer file names
/// ([`RINGS_FILE`], or [`LEGACY_RINGS_FILE`] of older versions), a legacy `rings`
/// subdirectory, or `None` (no rings). Every entry is opened through the safe-open layer: a
/// pointer that is a FIFO, a device or a link is an error naming it, and the directory it
/// names must belong to the trace directory's owner.
fn ring_dir(td: &Dir) -> Result<Option<Dir>, String> {
    use rustix::fs::FileType;
    let pointer = [RINGS_FILE, LEGACY_RINGS_FILE]
        .into_iter()
        .find_map(|n| td.file_type(n).map(|t| (n, t)));
    let Some((name, ft)) = pointer else {
        return Ok(None);
    };
    if name == LEGACY_RINGS_FILE && ft == FileType::Directory {
        // An older runtime's fallback ring directory, whose pointer file could not be written.
        return td.subdir(name).map(Some).map_err(|e| e.to_string());
    }
    let path = td.join(name);
    let bytes = td
        .read_file(name, MAX_POINTER_BYTES)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{}: larger than {MAX_POINTER_BYTES} bytes", path.display()))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| format!("{}: not a directory name", path.display()))?
        .trim();
    let target = Path::new(text);
    if !target.is_absolute() {
        return Err(format!(
            "{}: {text:?} is not an absolute directory name",
            path.display()
        ));
    }
    let dir = match Dir::open(target) {
        Ok(d) => d,
        // Removed already (a reboot cleared /dev/shm): nothing to recover.
        Err(e) if matches!(&e.kind, ErrorKind::Io(io) if io.kind() == io::ErrorKind::NotFound) => {
            return Ok(None)
        }
        Err(e) => {
            return Err(format!(
                "{} (named by {}): {}",
                text,
                path.display(),
                e.kind
            ))
        }
    };
    if dir.uid() != td.uid() {
        return Err(format!(
            "{}: the ring directory it names, {text}, belongs to uid {}, not to the trace's \
             owner (uid {}): not read",
            path.display(),
            dir.uid(),
            td.uid()
        ));
    }
    Ok(Some(dir))
}

/// The rings of `ring_dir` that still need recovery: `(file name, header)`, by instance.
/// Entries that are not regular files, or not ring files, are skipped.
fn rings_in(ring_dir: &Dir) -> Vec<(String, RingHeader)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(ring_dir.path()) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if !name.starts_with(RING_PREFIX) {
            continue;
        }
        let Ok(f) = ring_dir.open_file(&name) else {
            continue;
        };
        let mut hdr = vec![0u8; HEADER_LEN];
        if f.read_exact_at(&mut hdr, 0).is_err() {
            continue;
        }
        if let Ok(h) = RingHeader::parse(&hdr) {
            if !h.clean {
                out.push((name, h));
            }
        }
    }
    out.sort_by_key(|(_, h)| h.instance);
    out
}

/// The ring files of a process trace directory that still need recovery: `(path, header)`.
/// Nothing if the directory or its ring directory cannot be opened safely.
pub fn unrecovered_rings(trace_dir: &Path) -> Vec<(PathBuf, RingHeader)> {
    let Ok(td) = Dir::open(trace_dir) else {
        return Vec::new();
    };
    let Ok(Some(rd)) = ring_dir(&td) else {
        return Vec::new();
    };
    rings_in(&rd)
        .into_iter()
        .map(|(n, h)| (rd.join(&n), h))
        .collect()
}

/// What `recover_session` did for one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessRecovery {
    /// The process's trace directory.
    pub trace_dir: PathBuf,
    /// The process that wrote the rings.
    pub pid: u32,
    /// Rings recovered (each removed afterwards).
    pub rings: usize,
    /// Totals over its rings.
    pub recovered: Recovered,
    /// Rings left alone because their process still runs.
    pub live: usize,
}

/// Fills in the field types the metadata lacks (callsites first hit shortly before the
/// crash) from the types mirror in the ring directory, and rewrites the metadata if any.
fn complete_metadata(td: &Dir, ring_dir: &Dir, desc: &mut TraceDesc) -> Result<(), String> {
    if desc.events.iter().all(|c| c.fields.is_some()) {
        return Ok(());
    }
    if ring_dir.file_type(TYPES_FILE).is_none() {
        return Ok(());
    }
    let Some(bytes) = ring_dir
        .read_file(TYPES_FILE, MAX_TYPES_BYTES)
        .map_err(|e| e.to_string())?
    else {
        return Err(format!(
            "{}: larger than a types mirror can be ({MAX_TYPES_BYTES} bytes)",
            ring_dir.join(TYPES_FILE).display()
        ));
    };
    let mut changed = false;
    for c in desc.events.iter_mut().filter(|c| c.fields.is_none()) {
        if let Some(f) = hushtrace_core::mirror::read_record(&bytes, c.id) {
            c.fields = Some(f);
            changed = true;
        }
    }
    if changed {
        td.replace_file(METADATA_FILE, crate::metadata::to_tsdl(desc).as_bytes())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Whether process `pid` still exists (`/proc/<pid>`; a reused pid counts as alive, which
/// only delays a recovery).
fn alive(pid: u32) -> bool {
    pid != 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// Recovers every ring of a session directory (or of one process trace directory) whose
/// process ended without stopping: appends what they hold to the stream files, marks each ring
/// clean and deletes it. Idempotent; rings of processes that still run are left alone.
///
/// Every file is opened through the safe-open layer (no symbolic link followed, regular files
/// only, never blocking, sizes bounded by the files' real sizes): a FIFO, a device or a link
/// where a pointer, a types mirror, a ring or a stream should be is an error naming it.
pub fn recover_session(dir: &Path) -> Result<Vec<ProcessRecovery>, String> {
    let top = Dir::open(dir).map_err(|e| e.to_string())?;
    let mut dirs = Vec::new();
    if top.file_type(METADATA_FILE).is_some() {
        dirs.push(top);
    } else {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut names: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| top.file_type(n) == Some(rustix::fs::FileType::Directory))
            .collect();
        names.sort();
        for n in names {
            if let Ok(td) = top.subdir(&n) {
                if td.file_type(METADATA_FILE).is_some() {
                    dirs.push(td);
                }
            }
        }
    }
    let mut out = Vec::new();
    // One process's hostile or broken files do not keep the others from being recovered: each
    // is tried, and the errors are returned together afterwards.
    let mut errors = Vec::new();
    for td in dirs {
        match recover_process(&td) {
            Ok(Some(pr)) => out.push(pr),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(out)
}

/// Recovers the dead rings of one process trace directory (`None`: it has none).
fn recover_process(td: &Dir) -> Result<Option<ProcessRecovery>, String> {
    let Some(ring_dir) = ring_dir(td)? else {
        return Ok(None);
    };
    let rings = rings_in(&ring_dir);
    if rings.is_empty() {
        return Ok(None);
    }
    let mut pr = ProcessRecovery {
        trace_dir: td.path().to_path_buf(),
        pid: rings[0].1.pid,
        rings: 0,
        recovered: Recovered::default(),
        live: 0,
    };
    let mut desc =
        crate::reader::read_metadata(&td.join(METADATA_FILE)).map_err(|e| e.to_string())?;
    complete_metadata(td, &ring_dir, &mut desc)?;
    // A ring that cannot be recovered is kept (and named in the error); the others are.
    let mut errors = Vec::new();
    for (name, h) in &rings {
        if alive(h.pid) {
            pr.live += 1;
            continue;
        }
        let ring_path = ring_dir.join(name);
        let f = match ring_dir.open_file_rw(name) {
            Ok(f) => f,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        let stream = format!("{STREAM_PREFIX}{}", h.instance);
        let r = match recover_ring_file(&f, &ring_path, &desc, td, &stream) {
            Ok(r) => r,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        pr.rings += 1;
        pr.recovered.packets += r.packets;
        pr.recovered.events += r.events;
        pr.recovered.torn += r.torn;
        pr.recovered.discarded += r.discarded;
        pr.recovered.overwritten += r.overwritten;
        // Done: mark it clean (a second run skips it even if the removal fails), remove it.
        let _ = f.write_all_at(&1u64.to_le_bytes(), OFF_CLEAN as u64);
        drop(f);
        ring_dir.remove_file(name);
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    if pr.live == 0 {
        ring_dir.remove_file(TYPES_FILE);
        let _ = std::fs::remove_dir(ring_dir.path());
        td.remove_file(RINGS_FILE);
        if td.file_type(LEGACY_RINGS_FILE) == Some(rustix::fs::FileType::Directory) {
            td.remove_dir(LEGACY_RINGS_FILE);
        } else {
            td.remove_file(LEGACY_RINGS_FILE);
        }
        // Readers tell a recovered trace (no statistics file, nothing missing) from one whose
        // process still runs or whose rings are gone.
        let _ = td.replace_file(
            crate::reader::RECOVERED_MARKER,
            format!("{}\n", pr.recovered.events).as_bytes(),
        );
    }
    Ok(Some(pr))
}
