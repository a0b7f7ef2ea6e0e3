//! Writes a synthetic session with a large kernel trace, to measure `report --slowest` on it:
//! `cargo run --release -p hushtrace-cli --example synth_kernel_trace -- DIR MEGABYTES`.
//!
//! Process 90 (one thread, 1000 `work:job` spans) and a kernel trace of two CPUs where thread
//! 90 and 50 other tasks take turns (sched_switch, sched_waking), MEGABYTES in all.

use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_kernel::ctf::{to_tsdl, KernelMeta, StreamWriter};
use hushtrace_kernel::event::{Comm, SchedSwitch, Wake};
use hushtrace_kernel::{Event, KEvent};
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("DIR"));
    let mb: u64 = args.next().expect("MEGABYTES").parse().expect("a number");
    let per_cpu = mb << 20 >> 1;
    // The user trace: spans spread over the kernel trace's time (1 cycle a ns, 10 us per
    // kernel event pair).
    let mut t = SynthTrace::new(90, "p90");
    let (b, e) = t.span("work:job", &[]);
    let events_per_cpu = per_cpu / 60;
    let span_every = events_per_cpu * 10_000 / 1000;
    let th = t.thread(90, "main");
    for k in 0..1000 {
        th.event(SynthEvent::new(b, k * span_every))
            .event(SynthEvent::new(e, k * span_every + span_every / 2 + k));
    }
    t.write_session(&dir).unwrap();
    let user = hushtrace_ctf::reader::Session::open(&dir).unwrap().traces[0]
        .desc
        .clone();
    let k = dir.join("kernel");
    std::fs::create_dir(&k).unwrap();
    let meta = KernelMeta::synthetic(&user);
    std::fs::write(k.join("metadata"), to_tsdl(&meta)).unwrap();
    for cpu in 0..2u32 {
        let path = k.join(format!("channel0_{cpu}"));
        let mut w = StreamWriter::create(&path, meta.uuid, cpu.into(), cpu).unwrap();
        let mut ts = 0u64;
        let mut i = 0i32;
        while std::fs::metadata(&path).unwrap().len() < per_cpu {
            for _ in 0..10_000 {
                i += 1;
                // CPU 0: thread 90 alternates with others; CPU 1: others only.
                let prev = if cpu == 0 && i % 2 == 0 {
                    90
                } else {
                    1000 + i % 50
                };
                let next = if cpu == 0 && i % 2 == 1 {
                    90
                } else {
                    1000 + (i + 1) % 50
                };
                ts += 5_000;
                w.write(&KEvent {
                    ts,
                    cpu,
                    event: Event::SchedWaking(Wake {
                        comm: Comm::new(b"task"),
                        tid: next,
                        prio: 120,
                        target_cpu: cpu as i32,
                    }),
                })
                .unwrap();
                ts += 5_000;
                w.write(&KEvent {
                    ts,
                    cpu,
                    event: Event::SchedSwitch(SchedSwitch {
                        prev_comm: Comm::new(b"task"),
                        prev_tid: prev,
                        prev_prio: 120,
                        prev_state: i64::from(i % 3 == 0),
                        next_comm: Comm::new(b"task"),
                        next_tid: next,
                        next_prio: 120,
                    }),
                })
                .unwrap();
            }
        }
        w.flush().unwrap();
    }
}
