//! The fixed trace the stream fuzz target and the seed corpus share.
#![allow(dead_code)]

use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_ctf::{FieldType, Kind};

/// Process id of the fixture (its trace directory name).
pub const PID: u32 = 77;

/// A small trace with every field type; thread 0's stream is what the fuzzer mutates.
pub fn fixture() -> SynthTrace {
    fixture_with(256, 6)
}

/// The fixture's classes with `rounds` rounds of 5 events in packets of `packet_bytes`: the
/// same metadata, so its streams are inputs of the `stream` target too.
pub fn fixture_with(packet_bytes: usize, rounds: u64) -> SynthTrace {
    let mut t = SynthTrace::new(PID, "fuzz");
    t.packet_bytes = packet_bytes;
    let all = [
        ("u8", FieldType::U8),
        ("u16", FieldType::U16),
        ("u32", FieldType::U32),
        ("u64", FieldType::U64),
        ("i8", FieldType::I8),
        ("i16", FieldType::I16),
        ("i32", FieldType::I32),
        ("i64", FieldType::I64),
        ("f64", FieldType::F64),
        ("b", FieldType::Bool),
        ("s", FieldType::Str),
    ];
    let every = t.instant("f:every", &all);
    let (b, e) = t.span("f:span", &[("label", FieldType::Str)]);
    let c = t.counter("f:ctr", FieldType::F64);
    t.class("f:never", Kind::Instant, None);
    // Classes never recorded up to id 254, then one recorded with id 255: its events have the
    // extended event header (`layout`), as have those after a pause of 2^24 cycles below.
    while t.desc.events.len() < 255 {
        let k = t.desc.events.len();
        t.instant(&format!("f:pad{k}"), &[]);
    }
    let high = t.instant("f:high", &[("v", FieldType::U32)]);
    let th = t.thread(PID + 1, "fz");
    for k in 0..rounds {
        // Every other round begins after a pause: an extended header.
        let t0 = k * 100 + (k / 2) * (1 << 24);
        th.event(SynthEvent::new(b, t0).str("lbl"));
        th.event(
            SynthEvent::new(every, t0 + 10)
                .u8(1)
                .u16(2)
                .u32(3)
                .u64(k)
                .i8(-1)
                .i16(-2)
                .i32(-3)
                .i64(-4)
                .f64(0.5)
                .bool(true)
                .str("é"),
        );
        th.event(SynthEvent::new(c, t0 + 20).f64(k as f64));
        th.event(SynthEvent::new(high, t0 + 25).u32(k as u32));
        th.event(SynthEvent::new(e, t0 + 30));
    }
    th.discarded = 3;
    t
}
