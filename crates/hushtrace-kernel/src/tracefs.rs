//! tracefs: finding (or mounting) it, and the private ftrace instances hushtrace records in.

use crate::owner::{self, Liveness, Owner, ProcView};
use std::io;
use std::path::{Path, PathBuf};

/// Prefix of hushtrace's instance names (see [`crate::owner`] for the rest).
pub const INSTANCE_PREFIX: &str = owner::PREFIX;

/// Why the kernel cannot be traced.
#[derive(Debug)]
pub enum AccessError {
    /// tracefs is not mounted and cannot be mounted here.
    NotMounted(String),
    /// tracefs is there but this user may not create instances in it.
    NoPermission(String),
}

impl std::fmt::Display for AccessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessError::NotMounted(s) | AccessError::NoPermission(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for AccessError {}

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs mount point: an existing mount, or `/sys/kernel/tracing` mounted now (root
/// only). `HUSHTRACE_TRACEFS` names another mount point.
pub fn find_or_mount() -> Result<PathBuf, AccessError> {
    if let Some(p) = std::env::var_os("HUSHTRACE_TRACEFS") {
        let p = PathBuf::from(p);
        return if p.join("instances").is_dir() {
            Ok(p)
        } else {
            Err(AccessError::NotMounted(format!(
                "HUSHTRACE_TRACEFS={}: no tracefs there (no `instances` directory)",
                p.display()
            )))
        };
    }
    for c in CANDIDATES {
        if Path::new(c).join("instances").is_dir() {
            return Ok(PathBuf::from(c));
        }
    }
    // Mounted, but not readable by this user (tracefs is root-only by default).
    if let Some(m) = mounted_tracefs() {
        if let Err(e) = std::fs::read_dir(m.join("instances")) {
            return Err(AccessError::NoPermission(format!(
                "--kernel needs write access to tracefs: it is mounted at {} but this user \
                 cannot use it ({e}); run as root, or give this user access to it (its group \
                 and mode: `mount -o remount,gid=GROUP,mode=0750 {}`, and write access to \
                 `instances`)",
                m.display(),
                m.display()
            )));
        }
        return Ok(m);
    }
    let target = CANDIDATES[0];
    let e = match mount_tracefs(target) {
        Ok(()) if Path::new(target).join("instances").is_dir() => return Ok(PathBuf::from(target)),
        Ok(()) => io::Error::other("mounted, but it has no `instances` directory"),
        Err(e) => e,
    };
    Err(AccessError::NotMounted(format!(
        "--kernel needs tracefs: it is not mounted at {} and mounting it failed ({e}); run as \
         root, or mount it (`mount -t tracefs nodev /sys/kernel/tracing`) and give this user \
         write access to it",
        CANDIDATES.join(" or ")
    )))
}

/// `mount -t tracefs nodev TARGET`.
#[cfg(target_os = "linux")]
fn mount_tracefs(target: &str) -> io::Result<()> {
    let tgt = std::ffi::CString::new(target).map_err(io::Error::other)?;
    // SAFETY: all pointers are valid NUL-terminated strings for the call; data may be null.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            tgt.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// tracefs is Linux's.
#[cfg(not(target_os = "linux"))]
fn mount_tracefs(_target: &str) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "tracefs exists on Linux only",
    ))
}

/// The first tracefs mount point in `/proc/self/mounts`.
fn mounted_tracefs() -> Option<PathBuf> {
    let m = std::fs::read_to_string("/proc/self/mounts").ok()?;
    m.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_, dir, fstype) = (f.next()?, f.next()?, f.next()?);
        (fstype == "tracefs").then(|| PathBuf::from(dir.replace("\\040", " ")))
    })
}

/// Writes `value` to tracefs file `path`, naming the file in the error.
pub fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing {value:?} to {}: {e}", path.display()),
        )
    })
}

/// Reads tracefs file `path` as text, with large reads: some tracefs files (`header_page`)
/// end a read early at a small buffer size and return nothing after it.
pub fn read(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let name = |e: io::Error| io::Error::new(e.kind(), format!("reading {}: {e}", path.display()));
    let mut f = std::fs::File::open(path).map_err(name)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).map_err(name)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Why an instance could not be created.
#[derive(Debug)]
pub enum CreateError {
    /// No permission to create instances.
    Access(AccessError),
    /// An instance of that name exists: another recorder's (or a name clash). It was not
    /// touched.
    Exists(String),
    /// Anything else (the kernel refused it: out of memory, no `instances` directory).
    Other(String),
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CreateError::Access(e) => e.fmt(f),
            CreateError::Exists(s) | CreateError::Other(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for CreateError {}

/// A private ftrace instance, removed on drop.
#[derive(Debug)]
pub struct Instance {
    /// `…/instances/<name>`.
    pub path: PathBuf,
    removed: bool,
}

impl Instance {
    /// Creates instance `name` under tracefs `root`. `mkdir` is atomic: if the name exists,
    /// this fails and the existing instance is left exactly as it was (never reset, reused
    /// or removed).
    pub fn create(root: &Path, name: &str) -> Result<Instance, CreateError> {
        let instances = root.join("instances");
        let path = instances.join(name);
        std::fs::create_dir(&path).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => CreateError::Exists(format!(
                "--kernel: the ftrace instance {} exists already (another recorder's, left \
                 untouched)",
                path.display()
            )),
            io::ErrorKind::PermissionDenied => {
                CreateError::Access(AccessError::NoPermission(format!(
                    "--kernel: cannot create the ftrace instance {}: {e}; run as root or give \
                     this user write access to {}",
                    path.display(),
                    instances.display()
                )))
            }
            _ => CreateError::Other(format!(
                "--kernel: the kernel refused to create the ftrace instance {}: {e}",
                path.display()
            )),
        })?;
        Ok(Instance {
            path,
            removed: false,
        })
    }

    /// A file of the instance.
    pub fn file(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Stops recording and removes the instance (idempotent).
    pub fn remove(&mut self) {
        if !self.removed {
            self.removed = true;
            remove_dir(&self.path);
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Turns an instance off and removes it; errors are ignored (it may be gone already). Only
/// for this recorder's own instances and those of provably gone recorders.
fn remove_dir(path: &Path) {
    let _ = std::fs::write(path.join("tracing_on"), "0");
    let _ = std::fs::write(path.join("events/enable"), "0");
    let _ = std::fs::write(path.join("set_event_pid"), "");
    let _ = std::fs::remove_dir(path);
}

/// What the stale-instance clean-up did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cleanup {
    /// Instances of provably gone recorders, removed.
    pub removed: Vec<String>,
    /// Instances left alone although no recorder here runs them, with the reason (a recorder
    /// in a PID namespace not visible from here, an older name without the namespace, files
    /// still open).
    pub left: Vec<(String, String)>,
}

/// Removes the hushtrace instances under tracefs `root` whose recorder is provably gone (see
/// [`crate::owner`]); instances of live recorders, or of recorders that cannot be proven
/// gone, are not touched (not even turned off).
pub fn remove_stale(root: &Path) -> Cleanup {
    let mut out = Cleanup::default();
    let Ok(rd) = std::fs::read_dir(root.join("instances")) else {
        return out;
    };
    let mut view = None;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !owner::is_hushtrace(&name) {
            continue;
        }
        let Some(o) = Owner::parse(&name) else {
            out.left.push((
                name,
                "named by an older hushtrace, without its recorder's PID namespace: not \
                 provably unused (rmdir it if no recorder runs)"
                    .into(),
            ));
            continue;
        };
        match view.get_or_insert_with(ProcView::read).liveness(&o) {
            Liveness::Alive => {}
            Liveness::Unknown => out.left.push((
                name,
                format!(
                    "its recorder (pid {} in PID namespace {}) cannot be seen from here",
                    o.pid, o.ns
                ),
            )),
            Liveness::Gone => match std::fs::remove_dir(e.path()) {
                Ok(()) => out.removed.push(name),
                // Something still reads it (its guard, a tool): left as it is.
                Err(err) if err.raw_os_error() == Some(libc::EBUSY) => out
                    .left
                    .push((name, "its recorder is gone but its files are open".into())),
                Err(_) => {
                    remove_dir(&e.path());
                    if e.path().exists() {
                        out.left.push((name, "rmdir failed".into()));
                    } else {
                        out.removed.push(name);
                    }
                }
            },
        }
    }
    out.removed.sort();
    out.left.sort();
    out
}

/// [`remove_stale`] on this machine's tracefs, found without mounting it.
pub fn remove_stale_anywhere() -> Cleanup {
    let mut all = Cleanup::default();
    for c in CANDIDATES
        .iter()
        .filter(|c| Path::new(c).join("instances").is_dir())
    {
        let one = remove_stale(Path::new(c));
        all.removed.extend(one.removed);
        all.left.extend(one.left);
    }
    all
}

/// The online CPUs: the `per_cpu/cpuN` directories of an instance.
pub fn cpus(instance: &Path) -> io::Result<Vec<u32>> {
    let dir = instance.join("per_cpu");
    let mut v: Vec<u32> = std::fs::read_dir(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_string_lossy()
                .strip_prefix("cpu")
                .and_then(|n| n.parse().ok())
        })
        .collect();
    v.sort_unstable();
    Ok(v)
}
