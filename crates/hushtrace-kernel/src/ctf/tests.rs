use super::*;
use crate::event::{Comm, SchedSwitch, Wake};
use hushtrace_ctf::metadata::ClockDesc;

pub(crate) fn meta() -> KernelMeta {
    KernelMeta {
        uuid: [3; 16],
        clock: KernelClock {
            name: "hushtrace".into(),
            uuid: [4; 16],
            desc: ClockDesc {
                freq: 1_000_000_000,
                offset_s: 5,
                offset: 7,
                source: "tsc".into(),
            },
            note: "same clock".into(),
        },
        trace_clock: "x86-tsc".into(),
        hostname: "h".into(),
        kernel_release: "6.1".into(),
        categories: "sched".into(),
        classes: Arc::default(),
    }
}

fn all(t: &KernelTrace) -> Result<Vec<KEvent>, ReadError> {
    let mut ev = t.events()?;
    let mut v = Vec::new();
    while let Some(e) = ev.next()? {
        v.push(e);
    }
    Ok(v)
}

#[test]
fn write_then_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let m = meta();
    std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
    let mut w = StreamWriter::create(&dir.path().join("channel0_1"), m.uuid, 1, 1).unwrap();
    let sw = SchedSwitch {
        prev_comm: Comm::new(b"a"),
        prev_tid: 10,
        prev_prio: 120,
        prev_state: 1,
        next_comm: Comm::new(b"b"),
        next_tid: 11,
        next_prio: -51,
    };
    w.write(&KEvent {
        ts: 100,
        cpu: 1,
        event: Event::SchedSwitch(sw),
    })
    .unwrap();
    w.lost(3);
    w.write(&KEvent {
        ts: 90,
        cpu: 1,
        event: Event::SoftirqEntry { vec: 1 },
    })
    .unwrap();
    // Values that do not match the class are refused, not written as 0.
    let id = crate::schema::id_of("sched_waking").unwrap();
    assert!(w.event(id, 120, &[Out::Int(1)]).is_err());
    w.flush().unwrap();
    assert_eq!(w.reordered, 1);
    let t = KernelTrace::open(dir.path()).unwrap();
    assert_eq!(t.cpus, [1]);
    let mut ev = t.events().unwrap();
    let e = ev.next().unwrap().unwrap();
    assert_eq!((&*e.name(), e.ts, e.cpu), ("sched_switch", 100, 1));
    assert_eq!(e.event, Event::SchedSwitch(sw));
    let e = ev.next().unwrap().unwrap();
    assert_eq!((e.ts, e.event), (100, Event::SoftirqEntry { vec: 1 }));
    assert!(ev.next().unwrap().is_none());
    assert_eq!(ev.discarded(), 3);
    assert_eq!(t.clock, m.clock);
    assert_eq!(t.trace_clock, "x86-tsc");
}

#[test]
fn system_calls_are_written_and_read_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let classes = Arc::new(ClassTable::new(vec!["futex".into(), "read".into()]));
    let m = KernelMeta {
        classes: classes.clone(),
        ..meta()
    };
    std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
    let p = dir.path().join("channel1_0");
    let mut w = StreamWriter::create(&p, m.uuid, 1 << 16, 0)
        .unwrap()
        .with_classes(classes);
    let call: Arc<str> = "read".into();
    w.write(&KEvent {
        ts: 5,
        cpu: 0,
        event: Event::SyscallEntry {
            call: call.clone(),
            tid: 7,
            id: 0,
        },
    })
    .unwrap();
    w.write(&KEvent {
        ts: 6,
        cpu: 0,
        event: Event::SyscallExit {
            call,
            tid: 7,
            id: 0,
            ret: 12,
        },
    })
    .unwrap();
    w.flush().unwrap();
    let v = all(&KernelTrace::open(dir.path()).unwrap()).unwrap();
    let names: Vec<_> = v.iter().map(|e| e.name().into_owned()).collect();
    assert_eq!(names, ["syscall_entry_read", "syscall_exit_read"]);
    assert!(matches!(
        &v[1].event,
        Event::SyscallExit {
            ret: 12,
            tid: 7,
            ..
        }
    ));
}

#[test]
fn streams_are_merged_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let m = meta();
    std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
    let wake = |tid| {
        Event::SchedWaking(Wake {
            comm: Comm::new(b"x"),
            tid,
            prio: 120,
            target_cpu: 0,
        })
    };
    for cpu in 0..3u32 {
        let p = dir.path().join(format!("channel0_{cpu}"));
        let mut w = StreamWriter::create(&p, m.uuid, cpu.into(), cpu).unwrap();
        for i in 0..1000u64 {
            // Far apart: some headers compact, some extended.
            let ts = i * (1 << 20) * (u64::from(cpu) + 1) + u64::from(cpu);
            w.write(&KEvent {
                ts,
                cpu,
                event: wake(i as i32),
            })
            .unwrap();
        }
        w.flush().unwrap();
    }
    let t = KernelTrace::open(dir.path()).unwrap();
    let v = all(&t).unwrap();
    assert_eq!(v.len(), 3000);
    assert!(v.windows(2).all(|w| w[0].ts <= w[1].ts));
    assert_eq!(t.cpus, [0, 1, 2]);
}

#[test]
fn random_and_truncated_streams_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let m = meta();
    std::fs::write(dir.path().join("metadata"), to_tsdl(&m)).unwrap();
    let path = dir.path().join("channel0_0");
    let mut w = StreamWriter::create(&path, m.uuid, 0, 0).unwrap();
    for i in 0..20 {
        w.write(&KEvent {
            ts: i,
            cpu: 0,
            event: Event::SchedWaking(Wake {
                comm: Comm::new(b"x"),
                tid: 1,
                prio: 2,
                target_cpu: 3,
            }),
        })
        .unwrap();
    }
    w.flush().unwrap();
    let good = std::fs::read(&path).unwrap();
    let mut seed = 7u64;
    for round in 0..800 {
        let mut b = good.clone();
        if round % 3 == 0 {
            b.truncate(round % good.len());
        } else {
            for _ in 0..1 + round % 4 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let at = (seed >> 33) as usize % b.len();
                b[at] = (seed >> 24) as u8;
            }
        }
        std::fs::write(&path, &b).unwrap();
        if let Ok(t) = KernelTrace::open(dir.path()) {
            let _ = all(&t);
        }
    }
}

#[test]
fn foreign_and_broken_traces_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("metadata"), "/* CTF 1.8 */\n").unwrap();
    let e = KernelTrace::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("not a hushtrace trace"), "{e}");
    // A process trace's metadata is not a kernel trace's.
    let (desc, _) = meta().to_desc();
    std::fs::write(
        dir.path().join("metadata"),
        hushtrace_ctf::metadata::to_tsdl(&desc),
    )
    .unwrap();
    let e = KernelTrace::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("metadata"), "{e}");
    std::fs::write(dir.path().join("metadata"), to_tsdl(&meta())).unwrap();
    std::fs::write(dir.path().join("channel0_0"), [0u8; 200]).unwrap();
    let t = KernelTrace::open(dir.path()).unwrap();
    let e = all(&t).unwrap_err();
    assert!(e.to_string().contains("magic"), "{e}");
}
