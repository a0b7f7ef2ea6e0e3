//! Recording: a private ftrace instance, one reader thread per CPU draining
//! `per_cpu/cpuN/trace_pipe_raw` into CTF stream files, the metadata written before the first
//! packet and replaced at the end (with the program's clock).

use crate::clock::KernelClock;
use crate::clock::{self, TraceClock};
use crate::ctf::{self, KernelMeta, Out, StreamWriter, KERNEL_DIR, MAX_FIELDS};
use crate::format::{EventFormat, Field, PageHeader};
use crate::owner::Owner;
use crate::page::{Missed, Page};
use crate::recovery;
use crate::schema::{Category, ClassTable, Ty, CLASSES, SYSCALL_ENTRY_FIELDS, SYSCALL_EXIT_FIELDS};
use crate::tracefs::{self, AccessError, CreateError, Instance};
use hushtrace_ctf::metadata::ClockDesc;
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

mod decode;
mod guard;
mod readers;
use decode::*;
use guard::spawn_guard;
pub use guard::GUARD_NAME;
use readers::*;

/// What to record.
#[derive(Clone, Debug)]
pub struct Options {
    /// The event categories.
    pub categories: Vec<Category>,
    /// Per-CPU buffer size of the instance, in KiB.
    pub buffer_size_kb: u32,
    /// Flight recorder (`record --mode overwrite`): the kernel's buffers keep the newest
    /// events and are read only for a snapshot ([`crate::flight`]) and at the end.
    pub overwrite: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            categories: vec![Category::Sched],
            buffer_size_kb: 4096,
            overwrite: false,
        }
    }
}

/// Parses `sched,irq,syscalls` (empty: `sched`).
///
/// ```
/// use hushtrace_kernel::{parse_categories, Category};
/// assert_eq!(parse_categories("").unwrap(), [Category::Sched]);
/// assert_eq!(parse_categories("irq").unwrap(), [Category::Sched, Category::Irq]);
/// assert!(parse_categories("sched,disk").unwrap_err().contains("disk"));
/// ```
pub fn parse_categories(s: &str) -> Result<Vec<Category>, String> {
    let mut v = vec![Category::Sched];
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let c = Category::parse(part).ok_or_else(|| {
            format!("--kernel: unknown category {part:?} (expected sched, irq or syscalls)")
        })?;
        if !v.contains(&c) {
            v.push(c);
        }
    }
    Ok(v)
}

/// An error starting or finishing a kernel recording.
#[derive(Debug)]
pub enum Error {
    /// No access to tracefs (not root, not mounted): nothing was started.
    Access(AccessError),
    /// Anything else (I/O, a format file that does not parse).
    Other(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Access(e) => e.fmt(f),
            Error::Other(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Error {}

impl From<CreateError> for Error {
    fn from(e: CreateError) -> Self {
        match e {
            CreateError::Access(a) => Error::Access(a),
            other => Error::Other(other.to_string()),
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Other(e.to_string())
    }
}

/// What one CPU's reader did.
#[derive(Clone, Debug, Default)]
pub struct CpuStats {
    /// The CPU.
    pub cpu: u32,
    /// Pages read.
    pub pages: u64,
    /// Events written.
    pub events: u64,
    /// Events the kernel lost (buffer full).
    pub lost: u64,
    /// Pages that reported lost events without a count (counted as one each).
    pub lost_uncounted: u64,
    /// Events written at the previous event's time because theirs was earlier.
    pub reordered: u64,
}

/// What a finished recording holds.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The kernel trace directory.
    pub dir: PathBuf,
    /// Per-stream statistics.
    pub cpus: Vec<CpuStats>,
    /// The ftrace clock used.
    pub trace_clock: String,
    /// How well the kernel and user clocks line up.
    pub clock_note: String,
    /// Stale instances of dead recorders removed at start.
    pub stale_removed: Vec<String>,
    /// Things worth telling (events this kernel lacks, read errors).
    pub warnings: Vec<String>,
}

impl Summary {
    /// Events written, all CPUs.
    pub fn events(&self) -> u64 {
        self.cpus.iter().map(|c| c.events).sum()
    }

    /// Events lost, all CPUs.
    pub fn lost(&self) -> u64 {
        self.cpus.iter().map(|c| c.lost).sum()
    }
}

type Reader = JoinHandle<Result<CpuStats, String>>;

/// A running kernel recording. Drop removes the instances (without writing the metadata);
/// [`Capture::finish`] stops, drains and writes the trace.
#[derive(Debug)]
pub struct Capture {
    instances: Vec<Instance>,
    readers: Vec<Reader>,
    stop: Arc<AtomicBool>,
    dir: PathBuf,
    trace_clock: TraceClock,
    /// The clock chosen at the start (`None` only before that).
    clock: Option<KernelClock>,
    /// The event classes (with the system calls recorded by name).
    classes: Arc<ClassTable>,
    uuid: [u8; 16],
    categories: Vec<Category>,
    guard: Option<Child>,
    stale: Vec<String>,
    warnings: Vec<String>,
    /// Held while recording: `hushtrace recover` leaves the directory alone meanwhile.
    recording: Option<recovery::RecordingLock>,
    /// What the readers read: each instance with its decoder.
    sources: Vec<Source>,
    /// Overwrite mode: no reader runs until a snapshot or the end.
    overwrite: bool,
}

/// One instance to read: its path, page layout, decoder and channel number.
#[derive(Debug)]
struct Source {
    inst: PathBuf,
    header: PageHeader,
    dec: Arc<Decoder>,
    channel: u32,
}

fn uuid_v4() -> [u8; 16] {
    let mut u = [0u8; 16];
    if let Ok(b) = std::fs::read("/proc/sys/kernel/random/uuid") {
        if let Some(p) = std::str::from_utf8(&b)
            .ok()
            .and_then(|s| hushtrace_ctf::metadata::parse_uuid(s.trim()))
        {
            u = p;
        }
    }
    u
}

impl Capture {
    /// Starts recording the kernel into `session_dir/kernel/`. Fails with [`Error::Access`]
    /// before anything is created when tracefs cannot be used.
    pub fn start(session_dir: &Path, opts: &Options) -> Result<Capture, Error> {
        let root = tracefs::find_or_mount().map_err(Error::Access)?;
        let stale = tracefs::remove_stale(&root).removed;
        let pid = std::process::id();
        // Instance names unique across PID namespaces: see `crate::owner`.
        let me = Owner::current().map_err(|e| {
            Error::Other(format!("--kernel: this process's identity in /proc: {e}"))
        })?;
        let main = Instance::create(&root, &me.instance_name("")).map_err(Error::from)?;
        let mut cap = Capture {
            instances: vec![main],
            readers: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            dir: session_dir.join(KERNEL_DIR),
            trace_clock: TraceClock::Mono,
            clock: None,
            classes: Arc::default(),
            uuid: uuid_v4(),
            categories: opts.categories.clone(),
            guard: None,
            stale,
            warnings: Vec::new(),
            recording: None,
            sources: Vec::new(),
            overwrite: opts.overwrite,
        };
        // From here on, an error drops `cap`, which removes the instance.
        cap.guard = spawn_guard(&[
            cap.instances[0].path.clone(),
            root.join("instances").join(me.instance_name("sys")),
        ])
        .ok();
        let header = PageHeader::parse(&tracefs::read(&root.join("events/header_page"))?)
            .map_err(|e| Error::Other(e.to_string()))?;
        let offered = tracefs::read(&cap.instances[0].file("trace_clock"))?;
        let (trace_clock, kclock) = clock::decide(&offered).map_err(Error::Other)?;
        cap.trace_clock = trace_clock;
        cap.clock = Some(kclock);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(session_dir)
            .map_err(|e| Error::Other(format!("{}: {e}", session_dir.display())))?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&cap.dir)
            .map_err(|e| Error::Other(format!("{}: {e}", cap.dir.display())))?;
        cap.recording = Some(recovery::RecordingLock::take(&cap.dir)?);

        // The metadata before the first stream file: a recorder killed at any later point
        // leaves a kernel trace that reads (see `crate::recovery`; its clock the recorder's
        // calibration; `finish` rewrites it with the program's).
        if opts.categories.contains(&Category::Syscalls) {
            cap.classes = Arc::new(ClassTable::new(syscall_names(&root)?));
        }
        cap.write_metadata(None)?;

        let main_cats: Vec<Category> = opts
            .categories
            .iter()
            .copied()
            .filter(|c| *c != Category::Syscalls)
            .collect();
        let inst = cap.instances[0].path.clone();
        let dec = cap.setup(&inst, &main_cats, opts.buffer_size_kb, None)?;
        cap.spawn_readers(&inst, &header, dec, 0)?;
        if opts.categories.contains(&Category::Syscalls) {
            let sys = Instance::create(&root, &me.instance_name("sys")).map_err(Error::from)?;
            let path = sys.path.clone();
            cap.instances.push(sys);
            let dec = cap.setup(&path, &[Category::Syscalls], opts.buffer_size_kb, Some(pid))?;
            cap.spawn_readers(&path, &header, dec, 1)?;
            // Every task this process forks from now on (the program and its threads and
            // children) is followed; the reader threads, started above, are not.
            tracefs::write(&path.join("options/event-fork"), "1")?;
            tracefs::write(&path.join("set_event_pid"), &pid.to_string())?;
            tracefs::write(&path.join("tracing_on"), "1")?;
        }
        tracefs::write(&inst.join("tracing_on"), "1")?;
        Ok(cap)
    }

    /// Configures instance `inst` for `cats` and returns its decoder.
    fn setup(
        &mut self,
        inst: &Path,
        cats: &[Category],
        buffer_size_kb: u32,
        skip_pid: Option<u32>,
    ) -> Result<Arc<Decoder>, Error> {
        tracefs::write(&inst.join("tracing_on"), "0")?;
        tracefs::write(&inst.join("trace_clock"), self.trace_clock.as_str())?;
        tracefs::write(
            &inst.join("buffer_size_kb"),
            &buffer_size_kb.max(4).to_string(),
        )?;
        let mut by_id = HashMap::new();
        let mut common = None;
        let mut common_pid = None;
        for (i, class) in CLASSES.iter().enumerate() {
            if !cats.contains(&class.category) {
                continue;
            }
            let ev = inst.join("events").join(class.sys).join(class.ftrace);
            let text = match tracefs::read(&ev.join("format")) {
                Ok(t) => t,
                // The x86 interrupt vectors (timer, IPIs) exist on x86 only.
                Err(_) if class.sys == "irq_vectors" => continue,
                Err(_) if class.name != "sched_switch" => {
                    self.warnings.push(format!(
                        "this kernel has no {}:{} event: {} not recorded",
                        class.sys, class.ftrace, class.name
                    ));
                    continue;
                }
                Err(e) => {
                    return Err(Error::Other(format!(
                        "--kernel: {}: {e}",
                        ev.join("format").display()
                    )))
                }
            };
            let f = EventFormat::parse(&text)
                .map_err(|e| Error::Other(format!("{}: {e}", ev.join("format").display())))?;
            let srcs = class
                .fields
                .iter()
                .map(|&field| source_field(&f, (class.sys, class.ftrace, class.name), field))
                .collect::<Result<Vec<_>, _>>()?;
            if common.is_none() {
                common = f.field("common_type").cloned();
                common_pid = f.field("common_pid").cloned();
            }
            by_id.insert(f.id, (i as u16, srcs));
            tracefs::write(&ev.join("enable"), "1")?;
        }
        if cats.contains(&Category::Syscalls) {
            // Each system call by name: `syscalls:sys_enter_<name>` and `sys_exit_<name>`.
            let sys = inst.join("events/syscalls");
            for (k, call) in self.classes.syscalls().iter().enumerate() {
                for (exit, prefix) in [(false, "sys_enter_"), (true, "sys_exit_")] {
                    let ftrace = format!("{prefix}{call}");
                    let path = sys.join(&ftrace).join("format");
                    let f = EventFormat::parse(&tracefs::read(&path)?)
                        .map_err(|e| Error::Other(format!("{}: {e}", path.display())))?;
                    let id = u16::try_from(CLASSES.len() + 2 * k + usize::from(exit))
                        .map_err(|_| Error::Other("--kernel: too many system calls".into()))?;
                    let name = self.classes.name(id).unwrap_or_default();
                    let spec = if exit {
                        SYSCALL_EXIT_FIELDS
                    } else {
                        SYSCALL_ENTRY_FIELDS
                    };
                    let srcs = spec
                        .iter()
                        .map(|&field| source_field(&f, ("syscalls", &ftrace, &name), field))
                        .collect::<Result<Vec<_>, _>>()?;
                    if common.is_none() {
                        common = f.field("common_type").cloned();
                        common_pid = f.field("common_pid").cloned();
                    }
                    by_id.insert(f.id, (id, srcs));
                }
            }
            tracefs::write(&sys.join("enable"), "1")?;
        }
        let common_type = common.ok_or_else(|| {
            Error::Other(format!(
                "--kernel: no event could be enabled in {}",
                inst.display()
            ))
        })?;
        let skip_pid = skip_pid.and_then(|p| Some((common_pid?, i64::from(p))));
        Ok(Arc::new(Decoder {
            by_id,
            classes: self.classes.clone(),
            common_type,
            skip_pid,
        }))
    }

    /// Adds instance `inst` to the sources and, unless in overwrite mode, starts its readers.
    fn spawn_readers(
        &mut self,
        inst: &Path,
        header: &PageHeader,
        dec: Arc<Decoder>,
        channel: u32,
    ) -> Result<(), Error> {
        let src = Source {
            inst: inst.to_path_buf(),
            header: *header,
            dec,
            channel,
        };
        if self.overwrite {
            // ftrace's own ring keeps the newest events (`options/overwrite`, its default).
            tracefs::write(&inst.join("options/overwrite"), "1")?;
        } else {
            let r = start_readers(&src, &self.dir, self.uuid, &self.stop)?;
            self.readers.extend(r);
        }
        self.sources.push(src);
        Ok(())
    }

    /// Reads everything the instances hold now into new stream files in `dir` (a snapshot):
    /// the per-CPU statistics and the errors of the readers.
    pub(crate) fn drain_to(&self, dir: &Path) -> Result<(Vec<CpuStats>, Vec<String>), Error> {
        let stop = Arc::new(AtomicBool::new(true));
        let mut readers = Vec::new();
        for src in &self.sources {
            readers.extend(start_readers(src, dir, self.uuid, &stop)?);
        }
        Ok(join_readers(readers))
    }

    /// The instances' directories.
    pub(crate) fn instance_paths(&self) -> Vec<PathBuf> {
        self.instances.iter().map(|i| i.path.clone()).collect()
    }

    /// The guard process's pid (never to be signalled by the recorder).
    pub fn guard_pid(&self) -> Option<u32> {
        self.guard.as_ref().map(|g| g.id())
    }

    /// Stops recording, drains the buffers, writes the metadata (with `user_clock`, the clock
    /// description and UUID of the user-space trace, when there is one) and removes the
    /// instances.
    pub fn finish(mut self, user_clock: Option<(ClockDesc, [u8; 16])>) -> Result<Summary, Error> {
        for inst in &self.instances {
            let _ = tracefs::write(&inst.file("tracing_on"), "0");
        }
        self.stop.store(true, Ordering::Release);
        if self.overwrite {
            // Nothing was read yet: the newest events the instances kept.
            for src in &self.sources {
                let r = start_readers(src, &self.dir, self.uuid, &self.stop)?;
                self.readers.extend(r);
            }
        }
        let mut summary = Summary {
            dir: self.dir.clone(),
            stale_removed: std::mem::take(&mut self.stale),
            warnings: std::mem::take(&mut self.warnings),
            trace_clock: self.trace_clock.as_str().into(),
            ..Summary::default()
        };
        let (cpus, errors) = join_readers(std::mem::take(&mut self.readers));
        summary.cpus = cpus;
        summary.warnings.extend(errors);
        for inst in &mut self.instances {
            inst.remove();
        }
        summary.clock_note = self.write_metadata(user_clock)?;
        Ok(summary)
    }

    /// Writes (or atomically replaces) the metadata, its clock calibrated as `user_clock`
    /// says when that is the same clock; returns the clock's note.
    fn write_metadata(&self, user_clock: Option<(ClockDesc, [u8; 16])>) -> Result<String, Error> {
        self.write_metadata_in(&self.dir, user_clock)
    }

    /// [`Capture::write_metadata`] into kernel trace directory `dir` (a snapshot's).
    pub(crate) fn write_metadata_in(
        &self,
        dir: &Path,
        user_clock: Option<(ClockDesc, [u8; 16])>,
    ) -> Result<String, Error> {
        let clock = self
            .clock
            .clone()
            .ok_or_else(|| Error::Other("--kernel: no trace clock chosen".into()))?
            .with_user(user_clock);
        let note = clock.note.clone();
        let meta = KernelMeta {
            uuid: self.uuid,
            clock,
            trace_clock: self.trace_clock.as_str().into(),
            hostname: read_trim("/proc/sys/kernel/hostname"),
            kernel_release: read_trim("/proc/sys/kernel/osrelease"),
            classes: self.classes.clone(),
            categories: self
                .categories
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(","),
        };
        hushtrace_ctf::file::Dir::open(dir)
            .and_then(|d| d.replace_file("metadata", ctf::to_tsdl(&meta).as_bytes()))
            .map_err(|e| Error::Other(e.to_string()))?;
        Ok(note)
    }
}

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Drop for Capture {
    fn drop(&mut self) {
        for inst in &self.instances {
            let _ = tracefs::write(&inst.file("tracing_on"), "0");
        }
        self.stop.store(true, Ordering::Release);
        for h in self.readers.drain(..) {
            let _ = h.join();
        }
        for inst in &mut self.instances {
            inst.remove();
        }
        if let Some(mut g) = self.guard.take() {
            drop(g.stdin.take());
            let _ = g.wait();
        }
    }
}

#[cfg(test)]
mod tests;
