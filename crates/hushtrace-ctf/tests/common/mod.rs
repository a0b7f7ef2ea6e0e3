//! Shared fixtures for the reader tests.
#![allow(dead_code)]

use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_ctf::FieldType;

/// A trace exercising every field type, spans, a counter, an instant and a never-hit class, and
/// both event header forms (compact; extended for ids of 255 and up and after pauses).
pub fn rich_trace(pid: u32, events_per_thread: u64) -> SynthTrace {
    let mut t = SynthTrace::new(pid, "rich");
    t.packet_bytes = 512;
    let all = [
        ("a_u8", FieldType::U8),
        ("a_u16", FieldType::U16),
        ("a_u32", FieldType::U32),
        ("a_u64", FieldType::U64),
        ("a_i8", FieldType::I8),
        ("a_i16", FieldType::I16),
        ("a_i32", FieldType::I32),
        ("a_i64", FieldType::I64),
        ("a_f64", FieldType::F64),
        ("a_bool", FieldType::Bool),
        ("a_str", FieldType::Str),
    ];
    let every = t.instant("types:every", &all);
    let (begin, end) = t.span(
        "work:step",
        &[("n", FieldType::U64), ("label", FieldType::Str)],
    );
    // Classes never recorded, so that the counter's id is 255, the first one with an extended
    // event header (`layout`): these traces hold both header forms.
    while t.desc.events.len() < 255 {
        let k = t.desc.events.len();
        t.instant(&format!("pad:p{k}"), &[]);
    }
    let ctr = t.counter("mem:bytes", FieldType::I64);
    assert_eq!(ctr, 255);
    t.class("never:hit", hushtrace_ctf::Kind::Instant, None);
    for th in 0..2u32 {
        let tid = pid + 1 + th;
        let thread = t.thread(tid, &format!("worker-{th}"));
        let mut ts = 1_000 + th as u64;
        for i in 0..events_per_thread {
            if i % 4 == 3 {
                ts += 1 << 24; // a pause: the next header is extended
            }
            thread.event(
                SynthEvent::new(begin, ts)
                    .u64(i)
                    .str(&format!("step {i} é")),
            );
            ts += 10;
            thread.event(
                SynthEvent::new(every, ts)
                    .u8(i as u8)
                    .u16(i as u16)
                    .u32(i as u32)
                    .u64(u64::MAX - i)
                    .i8(-(i as i8 & 0x3f))
                    .i16(-7)
                    .i32(i32::MIN)
                    .i64(-(i as i64))
                    .f64(i as f64 + 0.25)
                    .bool(i % 2 == 0)
                    .str("x\"y\\z"),
            );
            ts += 5;
            thread.event(SynthEvent::new(ctr, ts).i64(i as i64 * 100));
            ts += 5;
            thread.event(SynthEvent::new(end, ts));
            ts += 20;
        }
    }
    t
}
