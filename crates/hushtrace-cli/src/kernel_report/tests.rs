use super::*;
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_kernel::ctf::{to_tsdl, KernelMeta, StreamWriter};
use hushtrace_kernel::event::{Comm, SchedSwitch, Wake};
use hushtrace_kernel::{Event, KEvent};

/// Process 90 with 300 spans, and 200,000 kernel events on two CPUs (thread 90 preempted,
/// blocked and woken in turn on CPU 0, other tasks on CPU 1, its fork of thread 91).
fn session(dir: &std::path::Path) {
    let mut t = SynthTrace::new(90, "p90");
    let (b, e) = t.span("work:job", &[]);
    let th = t.thread(90, "main");
    for k in 0..300u64 {
        th.event(SynthEvent::new(b, k * 300_000 + 1_000))
            .event(SynthEvent::new(e, k * 300_000 + 1_000 + 40_000 + k * 97));
    }
    t.write_session(dir).unwrap();
    let user = Session::open(dir).unwrap().traces[0].desc.clone();
    let k = dir.join("kernel");
    std::fs::create_dir(&k).unwrap();
    let meta = KernelMeta::synthetic(&user);
    std::fs::write(k.join("metadata"), to_tsdl(&meta)).unwrap();
    let comm = Comm::new(b"t");
    for cpu in 0..2u32 {
        let p = k.join(format!("channel0_{cpu}"));
        let mut w = StreamWriter::create(&p, meta.uuid, cpu.into(), cpu).unwrap();
        let mut ts = 0;
        if cpu == 0 {
            w.write(&KEvent {
                ts,
                cpu,
                event: Event::SchedProcessFork(hushtrace_kernel::event::ProcessFork {
                    parent_comm: comm,
                    parent_tid: 90,
                    child_comm: comm,
                    child_tid: 91,
                }),
            })
            .unwrap();
        }
        for i in 0..80_000i32 {
            let me = if cpu == 0 { 90 } else { 91 };
            let other = 1000 + i % 7;
            let (prev, next) = if i % 2 == 0 { (me, other) } else { (other, me) };
            ts += 1_000 + u64::from(i as u32 % 13) * 100;
            if i % 4 == 1 {
                w.write(&KEvent {
                    ts,
                    cpu,
                    event: Event::SchedWaking(Wake {
                        comm,
                        tid: me,
                        prio: 120,
                        target_cpu: cpu as i32,
                    }),
                })
                .unwrap();
                ts += 300;
            }
            w.write(&KEvent {
                ts,
                cpu,
                event: Event::SchedSwitch(SchedSwitch {
                    prev_comm: comm,
                    prev_tid: prev,
                    prev_prio: 120,
                    prev_state: i64::from(i % 4 == 0),
                    next_comm: comm,
                    next_tid: next,
                    next_prio: 120,
                }),
            })
            .unwrap();
        }
        w.flush().unwrap();
    }
}

#[test]
fn streamed_explanations_equal_the_whole_timeline() {
    let dir = tempfile::tempdir().unwrap();
    session(dir.path());
    let s = Session::open(dir.path()).unwrap();
    // Pruned at every span event (the real period, PRUNE_EVERY, prunes less).
    let r = compute_pruning(&s, Some("work:job"), 300, 1).unwrap();
    let (k, _) = r.kernel.as_ref().unwrap();
    let whole = Timeline::build(k, Some(&[90])).unwrap();
    assert_eq!(r.slowest.len(), 300);
    let mut row = SpanRow {
        name: "work:job".into(),
        ..SpanRow::default()
    };
    for sp in &r.slowest {
        let x = whole.explain(sp.tid as i32, sp.start_ns, sp.start_ns + sp.duration_ns);
        assert_eq!(sp.why.as_ref(), Some(&x), "span at {}", sp.start_ns);
        assert!(x.off_cpu_ns() > 0);
        row.count += 1;
        row.total_ns += sp.duration_ns;
        row.runnable_ns += x.runnable_ns;
        row.blocked_ns += x.blocked_ns;
    }
    let got = &r.rows[0];
    assert_eq!(
        (got.count, got.total_ns, got.runnable_ns, got.blocked_ns),
        (row.count, row.total_ns, row.runnable_ns, row.blocked_ns)
    );
}
