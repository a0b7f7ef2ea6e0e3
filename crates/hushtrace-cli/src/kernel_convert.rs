//! The kernel trace of `record --kernel` in the converted outputs.
//!
//! * Perfetto: per-CPU `FtraceEventBundle`s of `sched_switch`, `sched_waking`/`sched_wakeup`,
//!   fork/exit, migrations and interrupts, which the Perfetto UI shows as CPU tracks and as the
//!   state of each thread (running, runnable, sleeping) under its spans. A `ClockSnapshot`
//!   declares the bundles' clock (`BOOTTIME`, the ftrace default) equal to `REALTIME`, the
//!   clock of the rest of the file: the timestamps are the same nanoseconds since the epoch as
//!   the user-space events'.
//! * Chrome JSON: a `Kernel` process with one thread per CPU whose slices are the tasks that
//!   ran on it (`comm/tid`).

use crate::output::ConvertError;
use crate::perfetto_proto::{Clock, ClockSnapshot};
use hushtrace_ctf::reader::Session;
use hushtrace_kernel::recovery::Part;
use hushtrace_kernel::{Event, KEvent, KernelTrace};
use prost::Message;
use std::collections::HashMap;
use std::io::{self, Write};

/// The Perfetto messages for ftrace, with Perfetto's field numbers
/// (`protos/perfetto/trace/ftrace/*.proto`).
pub mod proto {
    #![allow(missing_docs)]
    use crate::perfetto_proto::ClockSnapshot;

    /// `TracePacket` with only the fields this module writes.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KernelPacket {
        #[prost(message, optional, tag = "1")]
        pub ftrace_events: Option<FtraceEventBundle>,
        #[prost(message, optional, tag = "6")]
        pub clock_snapshot: Option<ClockSnapshot>,
        #[prost(uint32, optional, tag = "10")]
        pub trusted_packet_sequence_id: Option<u32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FtraceEventBundle {
        #[prost(uint32, optional, tag = "1")]
        pub cpu: Option<u32>,
        #[prost(message, repeated, tag = "2")]
        pub event: Vec<FtraceEvent>,
        #[prost(bool, optional, tag = "3")]
        pub lost_events: Option<bool>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FtraceEvent {
        #[prost(uint64, optional, tag = "1")]
        pub timestamp: Option<u64>,
        #[prost(uint32, optional, tag = "2")]
        pub pid: Option<u32>,
        #[prost(message, optional, tag = "4")]
        pub sched_switch: Option<SchedSwitch>,
        #[prost(message, optional, tag = "17")]
        pub sched_wakeup: Option<SchedWake>,
        #[prost(message, optional, tag = "20")]
        pub sched_waking: Option<SchedWake>,
        #[prost(message, optional, tag = "24")]
        pub softirq_entry: Option<Softirq>,
        #[prost(message, optional, tag = "25")]
        pub softirq_exit: Option<Softirq>,
        #[prost(message, optional, tag = "36")]
        pub irq_handler_entry: Option<IrqEntry>,
        #[prost(message, optional, tag = "37")]
        pub irq_handler_exit: Option<IrqExit>,
        #[prost(message, optional, tag = "114")]
        pub sched_wakeup_new: Option<SchedWake>,
        #[prost(message, optional, tag = "238")]
        pub sched_process_exit: Option<ProcessExit>,
        #[prost(message, optional, tag = "239")]
        pub sched_process_fork: Option<ProcessFork>,
        #[prost(message, optional, tag = "491")]
        pub sched_migrate_task: Option<MigrateTask>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SchedSwitch {
        #[prost(string, optional, tag = "1")]
        pub prev_comm: Option<String>,
        #[prost(int32, optional, tag = "2")]
        pub prev_pid: Option<i32>,
        #[prost(int32, optional, tag = "3")]
        pub prev_prio: Option<i32>,
        #[prost(int64, optional, tag = "4")]
        pub prev_state: Option<i64>,
        #[prost(string, optional, tag = "5")]
        pub next_comm: Option<String>,
        #[prost(int32, optional, tag = "6")]
        pub next_pid: Option<i32>,
        #[prost(int32, optional, tag = "7")]
        pub next_prio: Option<i32>,
    }

    /// `SchedWaking`, `SchedWakeup` and `SchedWakeupNew` share this layout.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SchedWake {
        #[prost(string, optional, tag = "1")]
        pub comm: Option<String>,
        #[prost(int32, optional, tag = "2")]
        pub pid: Option<i32>,
        #[prost(int32, optional, tag = "3")]
        pub prio: Option<i32>,
        #[prost(int32, optional, tag = "4")]
        pub success: Option<i32>,
        #[prost(int32, optional, tag = "5")]
        pub target_cpu: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProcessFork {
        #[prost(string, optional, tag = "1")]
        pub parent_comm: Option<String>,
        #[prost(int32, optional, tag = "2")]
        pub parent_pid: Option<i32>,
        #[prost(string, optional, tag = "3")]
        pub child_comm: Option<String>,
        #[prost(int32, optional, tag = "4")]
        pub child_pid: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProcessExit {
        #[prost(string, optional, tag = "1")]
        pub comm: Option<String>,
        #[prost(int32, optional, tag = "2")]
        pub pid: Option<i32>,
        #[prost(int32, optional, tag = "4")]
        pub prio: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct MigrateTask {
        #[prost(string, optional, tag = "1")]
        pub comm: Option<String>,
        #[prost(int32, optional, tag = "2")]
        pub pid: Option<i32>,
        #[prost(int32, optional, tag = "3")]
        pub prio: Option<i32>,
        #[prost(int32, optional, tag = "4")]
        pub orig_cpu: Option<i32>,
        #[prost(int32, optional, tag = "5")]
        pub dest_cpu: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct IrqEntry {
        #[prost(int32, optional, tag = "1")]
        pub irq: Option<i32>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct IrqExit {
        #[prost(int32, optional, tag = "1")]
        pub irq: Option<i32>,
        #[prost(int32, optional, tag = "2")]
        pub ret: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Softirq {
        #[prost(uint32, optional, tag = "1")]
        pub vec: Option<u32>,
    }
}

use proto::*;

/// The sequence id of the kernel packets (apart from the user-space sequences, 1, 2, ...).
pub const KERNEL_SEQUENCE: u32 = 0x7fff_0001;
/// Events per bundle.
const BUNDLE_EVENTS: usize = 1024;
const CLOCK_BOOTTIME: u32 = 6;
const CLOCK_REALTIME: u32 = 1;

/// The session's kernel trace, if it has one; one that cannot be read as it is (still being
/// recorded, no metadata) is said on stderr and left out.
fn open(session: &Session) -> Result<Option<KernelTrace>, ConvertError> {
    let dir = match hushtrace_kernel::recovery::part(&session.dir) {
        Part::Readable(d) => d,
        Part::Unreadable(d, why) => {
            eprintln!(
                "hushtrace: warning: the kernel trace {} is not included: {why}",
                d.display()
            );
            return Ok(None);
        }
        Part::None => return Ok(None),
    };
    KernelTrace::open(&dir)
        .map(Some)
        .map_err(ConvertError::Read)
}

fn ns(k: &KernelTrace, e: &KEvent) -> u64 {
    k.epoch_ns(e.ts).clamp(0, u64::MAX as i128) as u64
}

fn ftrace_event(e: &KEvent, ts: u64, current: i32) -> Option<FtraceEvent> {
    let s = |c: &hushtrace_kernel::event::Comm| Some(c.as_str().to_string());
    let wake = |w: &hushtrace_kernel::event::Wake| SchedWake {
        comm: s(&w.comm),
        pid: Some(w.tid),
        prio: Some(w.prio),
        success: Some(1),
        target_cpu: Some(w.target_cpu),
    };
    let mut f = FtraceEvent {
        timestamp: Some(ts),
        pid: Some(current.max(0) as u32),
        ..Default::default()
    };
    match &e.event {
        Event::SchedSwitch(x) => {
            f.pid = Some(x.prev_tid.max(0) as u32);
            f.sched_switch = Some(SchedSwitch {
                prev_comm: s(&x.prev_comm),
                prev_pid: Some(x.prev_tid),
                prev_prio: Some(x.prev_prio),
                prev_state: Some(x.prev_state),
                next_comm: s(&x.next_comm),
                next_pid: Some(x.next_tid),
                next_prio: Some(x.next_prio),
            });
        }
        Event::SchedWaking(w) => f.sched_waking = Some(wake(w)),
        Event::SchedWakeup(w) => f.sched_wakeup = Some(wake(w)),
        Event::SchedWakeupNew(w) => f.sched_wakeup_new = Some(wake(w)),
        Event::SchedMigrateTask(m) => {
            f.sched_migrate_task = Some(MigrateTask {
                comm: s(&m.comm),
                pid: Some(m.tid),
                prio: Some(m.prio),
                orig_cpu: Some(m.orig_cpu),
                dest_cpu: Some(m.dest_cpu),
            })
        }
        Event::SchedProcessFork(p) => {
            f.sched_process_fork = Some(ProcessFork {
                parent_comm: s(&p.parent_comm),
                parent_pid: Some(p.parent_tid),
                child_comm: s(&p.child_comm),
                child_pid: Some(p.child_tid),
            })
        }
        Event::SchedProcessExit(p) => {
            f.sched_process_exit = Some(ProcessExit {
                comm: s(&p.comm),
                pid: Some(p.tid),
                prio: Some(p.prio),
            })
        }
        Event::IrqHandlerEntry { irq, name } => {
            f.irq_handler_entry = Some(IrqEntry {
                irq: Some(*irq),
                name: Some(name.clone()),
            })
        }
        Event::IrqHandlerExit { irq, ret } => {
            f.irq_handler_exit = Some(IrqExit {
                irq: Some(*irq),
                ret: Some(*ret),
            })
        }
        Event::SoftirqEntry { vec } => f.softirq_entry = Some(Softirq { vec: Some(*vec) }),
        Event::SoftirqExit { vec } => f.softirq_exit = Some(Softirq { vec: Some(*vec) }),
        _ => return None,
    }
    Some(f)
}

fn packet<W: Write>(out: &mut W, p: &KernelPacket, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    buf.push(0x0a); // `Trace.packet`, field 1, length-delimited
    p.encode_length_delimited(buf).map_err(io::Error::other)?;
    out.write_all(buf)
}

/// Appends the kernel trace of `session` (if any) to a Perfetto trace being written to `out`;
/// returns the number of kernel events written.
pub fn perfetto<W: Write>(session: &Session, out: &mut W) -> Result<u64, ConvertError> {
    let Some(k) = open(session)? else {
        return Ok(0);
    };
    let mut buf = Vec::new();
    // The first event's time (a first pass reads one event).
    let t0 = k.events()?.next()?.map_or(0, |e| ns(&k, &e));
    packet(
        out,
        &KernelPacket {
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![
                    Clock {
                        clock_id: Some(CLOCK_BOOTTIME),
                        timestamp: Some(t0),
                        is_incremental: None,
                    },
                    Clock {
                        clock_id: Some(CLOCK_REALTIME),
                        timestamp: Some(t0),
                        is_incremental: None,
                    },
                ],
                primary_trace_clock: None,
            }),
            trusted_packet_sequence_id: Some(KERNEL_SEQUENCE),
            ..Default::default()
        },
        &mut buf,
    )?;
    let mut bundles: HashMap<u32, FtraceEventBundle> = HashMap::new();
    let mut current: HashMap<u32, i32> = HashMap::new();
    let mut written = 0;
    let flush = |out: &mut W, b: FtraceEventBundle, buf: &mut Vec<u8>| {
        packet(
            out,
            &KernelPacket {
                ftrace_events: Some(b),
                trusted_packet_sequence_id: Some(KERNEL_SEQUENCE),
                ..Default::default()
            },
            buf,
        )
    };
    let mut events = k.events()?;
    while let Some(e) = events.next()? {
        let e = &e;
        let cur = current.get(&e.cpu).copied().unwrap_or(0);
        if let Event::SchedSwitch(s) = &e.event {
            current.insert(e.cpu, s.next_tid);
        }
        let Some(f) = ftrace_event(e, ns(&k, e), cur) else {
            continue;
        };
        // Losses seen so far (the packets carry the stream's running count).
        let lost = events.discarded() > 0;
        let b = bundles.entry(e.cpu).or_insert_with(|| FtraceEventBundle {
            cpu: Some(e.cpu),
            event: Vec::new(),
            lost_events: lost.then_some(true),
        });
        b.event.push(f);
        written += 1;
        if b.event.len() >= BUNDLE_EVENTS {
            let full = std::mem::replace(
                b,
                FtraceEventBundle {
                    cpu: Some(e.cpu),
                    event: Vec::new(),
                    lost_events: None,
                },
            );
            flush(out, full, &mut buf)?;
        }
    }
    let mut rest: Vec<_> = bundles.into_iter().collect();
    rest.sort_by_key(|(cpu, _)| *cpu);
    for (_, b) in rest {
        if !b.event.is_empty() {
            flush(out, b, &mut buf)?;
        }
    }
    Ok(written)
}

/// Process id of the `Kernel` pseudo-process in the Chrome JSON (no real pid is this large).
pub const CHROME_KERNEL_PID: u32 = 0x7fff_fff0;

fn chrome_line<W: Write>(out: &mut W, first: &mut bool, line: &str) -> io::Result<()> {
    if !*first {
        out.write_all(b",")?;
    }
    *first = false;
    out.write_all(b"\n")?;
    out.write_all(line.as_bytes())
}

fn us(ns: i128) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// Appends the kernel trace of `session` (if any) to a Chrome JSON `traceEvents` array being
/// written to `out`: a `Kernel` process, a `CPU n` thread per CPU, and a complete (`X`) slice
/// per stretch a task ran on that CPU, named `comm/tid` (the idle task is left out).
/// `first` says whether the array is still empty; `base_ns` is subtracted from every time
/// (the `--relative-time` origin, or 0).
pub fn chrome<W: Write>(
    session: &Session,
    out: &mut W,
    first: &mut bool,
    base_ns: i128,
) -> Result<u64, ConvertError> {
    let Some(k) = open(session)? else {
        return Ok(0);
    };
    let pid = CHROME_KERNEL_PID;
    chrome_line(
        out,
        first,
        &format!(
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":\"Kernel\"}}}}"
        ),
    )?;
    for cpu in &k.cpus {
        chrome_line(
            out,
            first,
            &format!(
                "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{cpu},\"args\":{{\"name\":\"CPU {cpu}\"}}}}"
            ),
        )?;
    }
    let mut running: HashMap<u32, (i32, hushtrace_kernel::event::Comm, i128)> = HashMap::new();
    let mut n = 0;
    let mut emit = |out: &mut W, cpu: u32, tid: i32, comm: &str, start: i128, end: i128| {
        if tid == 0 || end <= start {
            return Ok::<(), io::Error>(());
        }
        let mut name = Vec::new();
        crate::output::json_str(&mut name, &format!("{comm}/{tid}"));
        let name = String::from_utf8_lossy(&name).into_owned();
        n += 1;
        chrome_line(
            out,
            first,
            &format!(
                "{{\"name\":{name},\"cat\":\"sched\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{pid},\"tid\":{cpu},\"args\":{{\"tid\":{tid}}}}}",
                us(start - base_ns),
                us(end - start)
            ),
        )
    };
    let mut last = 0i128;
    let mut events = k.events()?;
    while let Some(e) = events.next()? {
        let Event::SchedSwitch(s) = &e.event else {
            continue;
        };
        let t = k.epoch_ns(e.ts);
        last = last.max(t);
        if let Some((tid, comm, since)) = running.remove(&e.cpu) {
            emit(out, e.cpu, tid, comm.as_str(), since, t)?;
        }
        running.insert(e.cpu, (s.next_tid, s.next_comm, t));
    }
    let mut rest: Vec<_> = running.into_iter().collect();
    rest.sort_by_key(|(cpu, _)| *cpu);
    for (cpu, (tid, comm, since)) in rest {
        emit(out, cpu, tid, comm.as_str(), since, last)?;
    }
    Ok(n)
}
