//! Reading the kernel trace back: its metadata, and its per-CPU streams merged in time order.

use super::*;

/// By event id: the system call of a `syscall_entry_`/`syscall_exit_` class, and whether it
/// is the exit.
type SyscallClasses = Arc<Vec<Option<(Arc<str>, bool)>>>;

/// An error reading a kernel trace: the file, where in it, and what was wrong (the process
/// traces' reader's error).
pub type ReadError = Error;

/// A kernel trace: its metadata, and its streams, read on demand ([`KernelTrace::events`]).
#[derive(Debug)]
pub struct KernelTrace {
    /// The directory (`DIR/kernel`).
    pub dir: PathBuf,
    /// The clock the timestamps are in.
    pub clock: KernelClock,
    /// The ftrace clock used.
    pub trace_clock: String,
    /// CPUs that have a stream.
    pub cpus: Vec<u32>,
    desc: Arc<TraceDesc>,
    streams: Vec<PathBuf>,
    /// By event id: the system call of a `syscall_entry_`/`syscall_exit_` class, and whether
    /// it is the exit.
    syscalls: SyscallClasses,
}

/// The CPU of stream file `name` (`channel<k>_<cpu>`).
fn stream_cpu(name: &str) -> Option<u32> {
    name.strip_prefix(STREAM_PREFIX)?
        .split_once('_')?
        .1
        .parse()
        .ok()
}

impl KernelTrace {
    /// Opens the kernel trace in `dir` (a `kernel/` directory): reads and checks its metadata
    /// and lists its stream files.
    pub fn open(dir: &Path) -> Result<KernelTrace, ReadError> {
        // Not through a symbolic link: the directory itself is opened with O_NOFOLLOW.
        drop(hushtrace_ctf::file::Dir::open(dir)?);
        let mpath = dir.join("metadata");
        let (desc, env) = read_kernel_metadata(&mpath)?;
        // The classes must be this hushtrace's, field for field: events are decoded by them.
        let ours = event_classes(&ClassTable::default());
        let one = event_classes(&ClassTable::new(vec!["x".into()]));
        let fields_of = |i: usize| one.get(CLASSES.len() + i).and_then(|c| c.fields.clone());
        let mut syscalls = Vec::new();
        for c in &desc.events {
            let call = match (
                c.name.strip_prefix(SYSCALL_ENTRY),
                c.name.strip_prefix(SYSCALL_EXIT),
            ) {
                (Some(call), _) if c.fields == fields_of(0) => Some((call, false)),
                (_, Some(call)) if c.fields == fields_of(1) => Some((call, true)),
                _ => None,
            };
            if let Some((call, exit)) = call {
                let i = usize::from(c.id);
                if syscalls.len() <= i {
                    syscalls.resize(i + 1, None);
                }
                syscalls[i] = Some((Arc::from(call), exit));
                continue;
            }
            if !ours
                .iter()
                .any(|o| o.name == c.name && o.fields == c.fields)
            {
                return Err(Error::not_hushtrace(
                    &mpath,
                    Location::File,
                    format!(
                        "kernel event {:?} is unknown or has other fields than this hushtrace's",
                        c.name
                    ),
                ));
            }
        }
        let mut streams = Vec::new();
        let mut cpus = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let e = e.map_err(|e| Error::io(dir, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(STREAM_PREFIX) {
                if let Some(cpu) = stream_cpu(&name) {
                    if !cpus.contains(&cpu) {
                        cpus.push(cpu);
                    }
                }
                streams.push(e.path());
            }
        }
        streams.sort();
        cpus.sort_unstable();
        Ok(KernelTrace {
            dir: dir.to_path_buf(),
            clock: KernelClock {
                name: env.clock_name,
                uuid: desc.clock_uuid,
                desc: desc.clock.clone(),
                note: env.clock_note,
            },
            trace_clock: env.trace_clock,
            cpus,
            desc: Arc::new(desc),
            streams,
            syscalls: Arc::new(syscalls),
        })
    }

    /// The events of every stream in time order (per-CPU streams merged), read as they are
    /// consumed: memory is one window per stream whatever the trace's size.
    pub fn events(&self) -> Result<Events, ReadError> {
        let streams = self
            .streams
            .iter()
            .map(|p| Ok((0, StreamReader::open(self.desc.clone(), p)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Events {
            merged: Merged::new(vec![self.desc.clone()], streams)?,
            read: 0,
            syscalls: self.syscalls.clone(),
        })
    }

    /// Nanoseconds since the Unix epoch of timestamp `ts`.
    pub fn epoch_ns(&self, ts: u64) -> i128 {
        self.clock.desc.to_epoch_ns(ts)
    }

    /// [`KernelTrace::epoch_ns`] clamped to `i64` (the unit of [`crate::analysis`]).
    pub fn ns(&self, ts: u64) -> i64 {
        self.epoch_ns(ts).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

/// The events of a kernel trace in time order (see [`KernelTrace::events`]).
#[derive(Debug)]
pub struct Events {
    merged: Merged,
    read: u64,
    syscalls: SyscallClasses,
}

impl Events {
    /// The next event; `Ok(None)` at the end.
    #[allow(clippy::should_implement_trait)] // fallible
    pub fn next(&mut self) -> Result<Option<KEvent>, ReadError> {
        let (decoded, stream, offset) = {
            let Some(m) = self.merged.next()? else {
                return Ok(None);
            };
            let ev = m.event;
            let mut vals = [In::Int(0); MAX_FIELDS];
            let mut n = 0;
            let mut ok = true;
            for (_, v) in ev.fields() {
                let Some(slot) = vals.get_mut(n) else {
                    ok = false;
                    break;
                };
                *slot = match v {
                    Value::I32(x) => In::Int(x.into()),
                    Value::U32(x) => In::Int(x.into()),
                    Value::I64(x) => In::Int(x),
                    Value::Str(s) => In::Text(s),
                    _ => {
                        ok = false;
                        break;
                    }
                };
                n += 1;
            }
            let syscall = self
                .syscalls
                .get(usize::from(ev.class.id))
                .and_then(|s| s.as_ref());
            let decoded = ok
                .then(|| match syscall {
                    Some((call, exit)) => Event::syscall(call.clone(), *exit, &vals[..n]),
                    None => Event::decode(&ev.class.name, &vals[..n]),
                })
                .flatten()
                .map(|event| KEvent {
                    ts: ev.timestamp,
                    cpu: ev.packet.vpid,
                    event,
                });
            (decoded, m.stream, ev.offset)
        };
        match decoded {
            Some(e) => {
                self.read += 1;
                Ok(Some(e))
            }
            None => Err(Error::corrupt(
                self.merged.streams()[stream].1.path(),
                offset,
                "event fields do not match its class",
            )),
        }
    }

    /// Events returned so far.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Events the kernel lost, as the packets read so far say (all of them at the end).
    pub fn discarded(&self) -> u64 {
        self.merged
            .streams()
            .iter()
            .map(|(_, s)| s.events_discarded())
            .sum()
    }

    /// Tolerated defects so far (a truncated last packet: a recorder killed mid-write).
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        self.merged.take_warnings()
    }
}
