//! Who owns an ftrace instance, and whether that owner is provably gone.
//!
//! tracefs is one per kernel: recorders in different PID namespaces (containers) share it, and
//! each may be pid 1 in its own. An instance's name therefore carries its recorder's identity,
//! unique on the kernel and over time:
//!
//! ```text
//! hushtrace-<pid>-ns<pid namespace inode>-t<start time>[-<suffix>]
//! ```
//!
//! `pid` is the recorder's pid in its own namespace, the inode that of `/proc/self/ns/pid`,
//! the start time the process's start in clock ticks since boot (`/proc/PID/stat` field 22),
//! taken back to the initial time namespace (`/proc/self/timens_offsets`), so that two
//! processes that see boot time differently still compare equal.
//!
//! A recorder creates only instances named after itself (`mkdir`, which fails if the name
//! exists) and the stale-instance clean-up removes an instance only when its owner is
//! *provably* gone ([`Liveness::Gone`]). Proof, from the processes `/proc` shows (those of
//! `/proc`'s namespace and of every namespace below it):
//!
//! * a process in namespace `ns` whose innermost pid (`NSpid`'s last value) is `pid` and whose
//!   start time matches: alive;
//! * else, if some visible process is in namespace `ns`: all of that namespace's processes are
//!   visible, so the owner is gone;
//! * else, if `/proc` is the initial PID namespace's: every process of the machine is visible,
//!   so namespace `ns` has no process left, and the owner is gone;
//! * else (a sibling or parent namespace, e.g. another container): unknown, left alone.
//!
//! A process whose namespace cannot be read (a non-dumpable one) blocks the proof only if its
//! pid and start time are the owner's; a `/proc` that may hide processes (`hidepid`, not root)
//! or a process whose status cannot be read blocks every proof. Names of older versions (`hushtrace-<pid>`) say no namespace: never provably
//! gone.

use std::io;
use std::path::Path;

/// Prefix of hushtrace's instance names.
pub const PREFIX: &str = "hushtrace-";

/// The inode of the initial PID namespace (`PROC_PID_INIT_INO`, fixed by the kernel).
pub const INIT_PID_NS: u64 = 0xEFFF_FFFC;

/// A recorder's identity, as kept in its instances' names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    /// Pid in its own PID namespace.
    pub pid: u32,
    /// Inode of its PID namespace.
    pub ns: u64,
    /// Start time, clock ticks since boot in the initial time namespace.
    pub start: u64,
}

/// What the clean-up knows about an instance's owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// The owner runs.
    Alive,
    /// The owner has provably exited.
    Gone,
    /// Cannot tell from here (another container's recorder, or `/proc` not fully readable).
    Unknown,
}

impl Owner {
    /// This process.
    pub fn current() -> io::Result<Owner> {
        let ns = ns_inode(Path::new("/proc/self/ns/pid"))?;
        let start = start_ticks(Path::new("/proc/self/stat"))?;
        Ok(Owner {
            pid: std::process::id(),
            ns,
            start: to_initial(start, boottime_offset_ticks()),
        })
    }

    /// The name of this owner's instance; `suffix` (e.g. `sys`) tells its instances apart.
    ///
    /// ```
    /// use hushtrace_kernel::owner::Owner;
    /// let o = Owner { pid: 1, ns: 4026532290, start: 812 };
    /// assert_eq!(o.instance_name(""), "hushtrace-1-ns4026532290-t812");
    /// assert_eq!(o.instance_name("sys"), "hushtrace-1-ns4026532290-t812-sys");
    /// assert_eq!(Owner::parse(&o.instance_name("sys")), Some(o));
    /// ```
    pub fn instance_name(&self, suffix: &str) -> String {
        let mut s = format!("{PREFIX}{}-ns{}-t{}", self.pid, self.ns, self.start);
        if !suffix.is_empty() {
            s.push('-');
            s.push_str(suffix);
        }
        s
    }

    /// The owner an instance name says (`None`: not a hushtrace name, or an older one without
    /// a namespace).
    pub fn parse(name: &str) -> Option<Owner> {
        let mut parts = name.strip_prefix(PREFIX)?.split('-');
        let pid = parts.next()?.parse().ok().filter(|&p| p > 0)?;
        let ns = parts.next()?.strip_prefix("ns")?.parse().ok()?;
        let start = parts.next()?.strip_prefix('t')?.parse().ok()?;
        Some(Owner { pid, ns, start })
    }
}

/// Whether `name` is a hushtrace instance name (of any version).
pub fn is_hushtrace(name: &str) -> bool {
    name.strip_prefix(PREFIX)
        .and_then(|r| r.split('-').next())
        .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// One process as `/proc` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proc {
    /// Its PID namespace's inode (`None`: not readable here, e.g. a non-dumpable process).
    pub ns: Option<u64>,
    /// Its pid in that namespace (`NSpid`'s last value).
    pub pid: u32,
    /// Start time, ticks since boot in the initial time namespace.
    pub start: u64,
}

/// The processes `/proc` shows, read once.
#[derive(Clone, Debug, Default)]
pub struct ProcView {
    /// The processes.
    pub procs: Vec<Proc>,
    /// `/proc`'s own PID namespace, if known.
    pub view_ns: Option<u64>,
    /// Whether some process may be missing or could not be read (a permission error, not an
    /// exit; `hidepid`): then no owner is provably gone.
    pub incomplete: bool,
}

impl ProcView {
    /// Reads `/proc`.
    pub fn read() -> ProcView {
        let root = Path::new("/proc");
        let mut v = ProcView {
            view_ns: view_ns(root),
            incomplete: hides_pids(root),
            ..ProcView::default()
        };
        let Ok(rd) = std::fs::read_dir(root) else {
            v.incomplete = true;
            return v;
        };
        let offset = boottime_offset_ticks();
        for e in rd.flatten() {
            let name = e.file_name();
            if name.to_str().and_then(|n| n.parse::<u32>().ok()).is_none() {
                continue;
            }
            let dir = e.path();
            let read = || -> io::Result<Proc> {
                let pid = nspids(&dir.join("status"))?
                    .last()
                    .copied()
                    .ok_or_else(|| io::Error::other("no NSpid line"))?;
                let start = to_initial(start_ticks(&dir.join("stat"))?, offset);
                // Unreadable for some processes (non-dumpable ones of other users, even to
                // root without CAP_SYS_PTRACE over them).
                let ns = ns_inode(&dir.join("ns/pid")).ok();
                Ok(Proc { ns, pid, start })
            };
            match read() {
                Ok(p) => v.procs.push(p),
                // Exited meanwhile (ENOENT, ESRCH): not a gap in the view.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => {}
                Err(_) => v.incomplete = true,
            }
        }
        v
    }

    /// Whether `owner` runs, is provably gone, or cannot be told (see the module docs).
    pub fn liveness(&self, owner: &Owner) -> Liveness {
        let same = |p: &&Proc| p.pid == owner.pid && p.start == owner.start;
        if self
            .procs
            .iter()
            .filter(same)
            .any(|p| p.ns == Some(owner.ns))
        {
            return Liveness::Alive;
        }
        // A process that could be it, its namespace unreadable: cannot tell.
        if self.incomplete || self.procs.iter().filter(same).any(|p| p.ns.is_none()) {
            return Liveness::Unknown;
        }
        if self.procs.iter().any(|p| p.ns == Some(owner.ns)) || self.view_ns == Some(INIT_PID_NS) {
            Liveness::Gone
        } else {
            Liveness::Unknown
        }
    }
}

/// The PID namespace `/proc` at `root` shows: this process's own when it is there with a single
/// pid (so in that namespace itself), else that of its pid 1 if readable.
fn view_ns(root: &Path) -> Option<u64> {
    if nspids(&root.join("self/status")).is_ok_and(|p| p.len() == 1) {
        if let Ok(ns) = ns_inode(&root.join("self/ns/pid")) {
            return Some(ns);
        }
    }
    ns_inode(&root.join("1/ns/pid")).ok()
}

/// Whether `/proc` at `root` may hide processes from this user (`hidepid` other than 0, and
/// not root).
fn hides_pids(root: &Path) -> bool {
    // SAFETY: geteuid has no memory effects and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return false;
    }
    let Ok(mi) = std::fs::read_to_string(root.join("self/mountinfo")) else {
        return true;
    };
    mi.lines()
        .filter(|l| l.split_whitespace().nth(4) == root.to_str())
        .any(|l| {
            l.split(',')
                .any(|o| o.contains("hidepid=") && !o.ends_with("=0") && !o.ends_with("=off"))
        })
}

/// The pids of a `/proc/PID/status` file's `NSpid` line, outermost first.
fn nspids(status: &Path) -> io::Result<Vec<u32>> {
    let s = std::fs::read_to_string(status)?;
    s.lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .ok_or_else(|| io::Error::other(format!("{}: no NSpid line", status.display())))
}

/// The inode of a namespace link (`pid:[4026531836]`).
fn ns_inode(link: &Path) -> io::Result<u64> {
    let t = std::fs::read_link(link)?;
    let t = t.to_string_lossy();
    t.split_once('[')
        .and_then(|(_, r)| r.strip_suffix(']')?.parse().ok())
        .ok_or_else(|| io::Error::other(format!("{}: unexpected link {t:?}", link.display())))
}

/// Field 22 (start time, clock ticks since boot) of a `/proc/PID/stat` file.
fn start_ticks(stat: &Path) -> io::Result<u64> {
    let s = std::fs::read_to_string(stat)?;
    // The command name (field 2) may hold spaces and parentheses: fields after its last `)`.
    s.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19)?.parse().ok())
        .ok_or_else(|| io::Error::other(format!("{}: no start time", stat.display())))
}

/// A start time seen in a time namespace whose boot-time offset is `offset` ticks, in the
/// initial time namespace.
fn to_initial(start: u64, offset: i64) -> u64 {
    (i128::from(start) - i128::from(offset)).clamp(0, i128::from(u64::MAX)) as u64
}

/// This process's time namespace's boot-time offset, in clock ticks (0 in the initial one).
fn boottime_offset_ticks() -> i64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/timens_offsets") else {
        return 0;
    };
    let Some((secs, nsecs)) = s.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next()? == "boottime").then_some(())?;
        Some((
            f.next()?.parse::<i64>().ok()?,
            f.next()?.parse::<i64>().ok()?,
        ))
    }) else {
        return 0;
    };
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as i64;
    secs.saturating_mul(hz) + nsecs * hz / 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_old_names_have_no_owner() {
        let o = Owner {
            pid: 42,
            ns: 4026531836,
            start: 7,
        };
        assert_eq!(Owner::parse(&o.instance_name("")), Some(o));
        assert_eq!(Owner::parse(&o.instance_name("sys")), Some(o));
        for old in [
            "hushtrace-1",
            "hushtrace-1-sys",
            "hushtrace-x",
            "other-1-ns2-t3",
        ] {
            assert_eq!(Owner::parse(old), None, "{old}");
        }
        assert!(is_hushtrace("hushtrace-1-sys") && is_hushtrace(&o.instance_name("")));
        assert!(!is_hushtrace("hushtrace-") && !is_hushtrace("other"));
    }

    #[test]
    fn this_process_is_alive_in_the_view_of_proc() {
        let me = Owner::current().unwrap();
        assert_eq!(me.pid, std::process::id());
        let v = ProcView::read();
        assert_eq!(v.liveness(&me), Liveness::Alive);
        // Same pid and namespace, another start: a recycled pid, the owner is gone.
        let recycled = Owner {
            start: me.start + 1,
            ..me
        };
        assert_eq!(v.liveness(&recycled), Liveness::Gone);
    }

    #[test]
    fn gone_only_when_provable() {
        let p = |ns, pid, start| Proc {
            ns: Some(ns),
            pid,
            start,
        };
        let o = Owner {
            pid: 1,
            ns: 10,
            start: 5,
        };
        let view = |procs: Vec<Proc>, view_ns, incomplete| ProcView {
            procs,
            view_ns: Some(view_ns),
            incomplete,
        };
        // Seen: alive, even with gaps in the view.
        assert_eq!(
            view(vec![p(10, 1, 5)], 20, true).liveness(&o),
            Liveness::Alive
        );
        // Its namespace seen without it: gone; unless the view has gaps.
        assert_eq!(
            view(vec![p(10, 1, 6), p(10, 2, 5)], 20, false).liveness(&o),
            Liveness::Gone
        );
        assert_eq!(
            view(vec![p(10, 2, 5)], 20, true).liveness(&o),
            Liveness::Unknown
        );
        // A process with its pid and start time, its namespace unreadable: maybe it.
        let hidden = Proc {
            ns: None,
            pid: 1,
            start: 5,
        };
        assert_eq!(
            view(vec![hidden, p(10, 2, 5)], 20, false).liveness(&o),
            Liveness::Unknown
        );
        // Its namespace not seen: gone from the initial namespace only.
        assert_eq!(
            view(vec![p(11, 1, 5)], INIT_PID_NS, false).liveness(&o),
            Liveness::Gone
        );
        assert_eq!(
            view(vec![p(11, 1, 5)], 20, false).liveness(&o),
            Liveness::Unknown
        );
    }
}
