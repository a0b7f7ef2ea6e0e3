//! Crash recovery of events whose class the metadata does not list: a callsite registered at
//! run time after the consumer last wrote the metadata (Python's `py:call` and `py:function`,
//! its inline events, the C interface's), in a process killed before the next rewrite. The
//! class comes from the types mirror, written by hushtrace-core's registry itself here.

use hushtrace_core::mirror::{set_types_mirror, RECORD_LEN};
use hushtrace_core::{FieldType, Kind};
use hushtrace_ctf::layout::*;
use hushtrace_ctf::metadata::to_tsdl;
use hushtrace_ctf::reader::{read_metadata, StreamReader};
use hushtrace_ctf::ringfile::*;
use hushtrace_ctf::synth::{packet_header, PacketIdentity, SynthTrace};
use std::sync::Arc;

const SUBBUF: usize = 4096;
/// Events of the registered class in the ring.
const EVENTS: u64 = 50;

#[test]
fn events_of_a_class_registered_after_the_metadata_are_recovered() {
    // The types mirror as the runtime installs it: never unmapped (here, leaked).
    let records = hushtrace_core::all_callsites().count() + hushtrace_core::MAX_REGISTERED;
    let len = records * RECORD_LEN;
    let mirror = Box::into_raw(vec![0u8; len].into_boxed_slice()) as *mut u8;
    // SAFETY: `mirror` holds `len` bytes and is never freed.
    unsafe { set_types_mirror(mirror, records) };
    let cs = hushtrace_core::register_callsite(
        "late",
        "registered",
        Kind::Instant,
        &[("v", FieldType::U64)],
    )
    .unwrap();
    let id = cs.id();
    // SAFETY: the leaked mirror, read after the registry wrote it on this thread.
    let mirror_bytes = unsafe { std::slice::from_raw_parts(mirror, len) }.to_vec();

    // The metadata as the consumer last wrote it: every class before `id`, not `id`.
    let mut t = SynthTrace::new(70, "late");
    while (t.desc.events.len() as u16) < id {
        let k = t.desc.events.len();
        t.instant(&format!("r:pad{k}"), &[]);
    }
    let dir = tempfile::tempdir().unwrap();
    let td = dir.path().join("session").join("70");
    let rings = dir.path().join("rings");
    std::fs::create_dir_all(&td).unwrap();
    std::fs::create_dir_all(&rings).unwrap();
    std::fs::write(td.join(METADATA_FILE), to_tsdl(&t.desc)).unwrap();
    let mut pointer = rings.to_str().unwrap().as_bytes().to_vec();
    pointer.push(b'\n');
    std::fs::write(td.join(RINGS_FILE), pointer).unwrap();
    std::fs::write(rings.join(TYPES_FILE), &mirror_bytes).unwrap();

    // A ring of pid 0 (never a live process) with one open packet of EVENTS events of `id`.
    let ident = PacketIdentity {
        uuid: t.desc.uuid,
        stream_instance_id: 0,
        vpid: 70,
        vtid: 71,
        procname: "late".into(),
        pthread_id: 1,
    };
    let begin = 1000;
    let mut slot = packet_header(&ident, begin, 0, 0, 0, 0).to_vec();
    slot[OFF_CONTENT_SIZE..OFF_CONTENT_SIZE + 16].fill(0);
    let mut prev = begin;
    for v in 0..EVENTS {
        let ts = begin + 10 * (v + 1);
        push_event_header(&mut slot, id, ts, prev);
        slot.extend_from_slice(&v.to_le_bytes());
        prev = ts;
    }
    let done = slot.len();
    slot.resize(2 * SUBBUF, 0);
    let mut hdr = vec![0u8; HEADER_LEN];
    hdr[..8].copy_from_slice(&RING_MAGIC);
    hdr[8..12].copy_from_slice(&1u32.to_le_bytes());
    hdr[16..24].copy_from_slice(&(SUBBUF as u64).to_le_bytes());
    hdr[24..32].copy_from_slice(&2u64.to_le_bytes());
    hdr[OFF_DONE..OFF_DONE + 8].copy_from_slice(&(done as u64).to_le_bytes());
    hdr.extend_from_slice(&slot);
    std::fs::write(rings.join(format!("{RING_PREFIX}0")), hdr).unwrap();

    let done = recover_session(&dir.path().join("session")).unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(
        (done[0].rings, done[0].recovered.events),
        (1, EVENTS),
        "{done:?}"
    );
    // The metadata now lists the class, and the stream reads back every event.
    let desc = read_metadata(&td.join(METADATA_FILE)).unwrap();
    let class = desc.events.iter().find(|c| c.id == id).unwrap();
    assert_eq!(
        (class.name.as_str(), class.kind, class.fields.clone()),
        (
            "late:registered",
            Kind::Instant,
            Some(vec![("v".to_string(), FieldType::U64)])
        )
    );
    let mut r = StreamReader::open(Arc::new(desc), &td.join(format!("{STREAM_PREFIX}0"))).unwrap();
    let mut got = Vec::new();
    while r.advance().unwrap() {
        let e = r.current().unwrap();
        got.push((e.class.id, e.field(0).and_then(|v| v.as_u64())));
    }
    let want: Vec<_> = (0..EVENTS).map(|v| (id, Some(v))).collect();
    assert_eq!(got, want);
}
