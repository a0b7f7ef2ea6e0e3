use super::*;

const M: u64 = 1 << 24;

fn roundtrip(id: u16, ts: u64, prev: u64) -> EventHeader {
    let mut b = Vec::new();
    let n = push_event_header(&mut b, id, ts, prev);
    assert_eq!(n, b.len());
    let h = parse_event_header(&b, prev).unwrap();
    assert_eq!(
        (h.id, h.ts, h.len),
        (id, ts, n),
        "id {id} ts {ts:#x} prev {prev:#x}"
    );
    h
}

#[test]
fn delta_just_below_two_to_the_24_is_compact_and_two_to_the_24_is_extended() {
    for prev in [0, 1, M - 1, M, 5 * M + 12_345, u64::MAX / 2, u64::MAX - M] {
        assert!(roundtrip(3, prev + M - 1, prev).compact, "prev {prev:#x}");
        assert!(!roundtrip(3, prev + M, prev).compact, "prev {prev:#x}");
        assert!(roundtrip(3, prev, prev).compact, "delta 0");
    }
}

#[test]
fn low_bits_wrapping_carry_into_the_high_bits() {
    // Current low bits near the top: the next event's low bits are smaller, so the
    // decoder adds 2^24.
    let prev = 7 * M + (M - 2);
    let h = roundtrip(1, 8 * M + 5, prev);
    assert!(h.compact);
    // Exactly at the wrap and one below it.
    assert!(roundtrip(1, 8 * M, prev).compact);
    assert!(roundtrip(1, 8 * M - 1, prev).compact);
    // The whole 64-bit range wraps the same way (wrapping arithmetic, as babeltrace2).
    let h = roundtrip(2, 3, u64::MAX - 1);
    assert!(h.compact);
}

#[test]
fn id_255_and_up_and_going_backwards_are_extended() {
    assert!(!roundtrip(255, 10, 10).compact);
    assert!(!roundtrip(u16::MAX, 10, 10).compact);
    assert!(roundtrip(254, 10, 10).compact);
    assert!(!roundtrip(4, 9, 10).compact, "earlier than the clock");
}

#[test]
fn compact_word_layout() {
    // id in the low byte, the timestamp's low 24 bits above it, little-endian.
    assert_eq!(
        compact_word(0xab, 0x7712_3456).to_le_bytes(),
        [0xab, 0x56, 0x34, 0x12]
    );
    let mut b = Vec::new();
    push_event_header(&mut b, 0x1234, 0x0102_0304_0506_0708, 0);
    assert_eq!(
        b,
        [255, 0x34, 0x12, 8, 7, 6, 5, 4, 3, 2, 1],
        "tag, u16 id, u64 timestamp"
    );
}

#[test]
fn short_input_is_none() {
    assert_eq!(parse_event_header(&[], 0), None);
    assert_eq!(parse_event_header(&[1, 2, 3], 0), None);
    assert!(parse_event_header(&[1, 2, 3, 4], 0).is_some());
    assert_eq!(
        parse_event_header(&[255, 1, 0, 0, 0, 0, 0, 0, 0, 0], 0),
        None
    );
    assert!(parse_event_header(&[255; 11], 0).is_some());
}

fn sample() -> PacketHeader {
    PacketHeader {
        uuid: [7; 16],
        stream_instance_id: 0x0102_0304_0506_0708,
        timestamp_begin: 11,
        timestamp_end: 12,
        content_size: 13,
        packet_size: 14,
        seq: 15,
        events_discarded: 16,
        vpid: 17,
        vtid: 18,
        procname: *b"worker-thread\0\0\0",
        pthread_id: 19,
    }
}

#[test]
fn packet_header_roundtrips_at_the_documented_offsets() {
    let h = sample();
    let b = h.encode();
    assert_eq!(PacketHeader::decode(&b), Some(h));
    assert!(PacketHeader::magic_ok(&b));
    assert_eq!(&b[OFF_MAGIC..OFF_MAGIC + 4], &MAGIC.to_le_bytes());
    assert_eq!(&b[OFF_UUID..OFF_UUID + 16], &[7; 16]);
    assert_eq!(read_u32(&b, OFF_STREAM_ID), Some(0));
    for (off, v) in [
        (OFF_STREAM_INSTANCE_ID, 0x0102_0304_0506_0708),
        (OFF_TIMESTAMP_BEGIN, 11),
        (OFF_TIMESTAMP_END, 12),
        (OFF_CONTENT_SIZE, 13),
        (OFF_PACKET_SIZE, 14),
        (OFF_PACKET_SEQ_NUM, 15),
        (OFF_EVENTS_DISCARDED, 16),
        (OFF_PTHREAD_ID, 19),
    ] {
        assert_eq!(read_u64(&b, off), Some(v), "offset {off}");
    }
    assert_eq!(read_u32(&b, OFF_VPID), Some(17));
    assert_eq!(read_u32(&b, OFF_VTID), Some(18));
    assert_eq!(&b[OFF_PROCNAME..OFF_PROCNAME + 13], b"worker-thread");
    assert_eq!(h.procname_lossy(), "worker-thread");
    let full = PacketHeader {
        procname: *b"sixteen-byte-nam",
        ..h
    };
    assert_eq!(
        full.procname_lossy(),
        "sixteen-byte-nam",
        "no NUL: all 16 bytes"
    );
    // The fields tile the header: no gap, no overlap.
    assert_eq!(OFF_PTHREAD_ID + 8, PACKET_HEADER_LEN);
    // write_to leaves the bytes after the header alone.
    let mut big = [0xeeu8; PACKET_HEADER_LEN + 4];
    h.write_to(&mut big);
    assert_eq!(&big[..PACKET_HEADER_LEN], &b[..]);
    assert_eq!(big[PACKET_HEADER_LEN..], [0xee; 4]);
}

#[test]
fn short_or_foreign_packet_headers() {
    let b = sample().encode();
    assert_eq!(PacketHeader::decode(&b[..PACKET_HEADER_LEN - 1]), None);
    assert_eq!(PacketHeader::decode(&[]), None);
    assert!(!PacketHeader::magic_ok(&b[..3]));
    let mut bad = b;
    bad[0] ^= 1;
    assert!(!PacketHeader::magic_ok(&bad));
    // Any bytes decode (the magic is the caller's check).
    assert!(PacketHeader::decode(&bad).is_some());
    assert_eq!(PacketHeader::magic(&bad), Some(MAGIC ^ 1));
    assert_eq!(PacketHeader::magic(&b[..3]), None);
    assert_eq!(PacketHeader::stream_id(&b), Some(0));
    assert_eq!(PacketHeader::stream_id(&b[..OFF_STREAM_ID + 3]), None);
    let mut other = b;
    other[OFF_STREAM_ID] = 5;
    assert_eq!(PacketHeader::stream_id(&other), Some(5));
}

#[test]
fn packet_end_stores_exactly_its_fields() {
    let h = sample();
    let end = PacketEnd {
        timestamp_end: 900,
        len: 4096,
        events_discarded: 5,
    };
    let mut b = h.encode();
    end.write_to(&mut b);
    // The words and the decoded header's setter agree; nothing else changed.
    assert_eq!(PacketHeader::decode(&b), Some(h.with_end(end)));
    assert_eq!(h.with_end(end).end(), end);
    let mut by_words = h.encode();
    for (off, v) in end.words() {
        by_words[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }
    assert_eq!(by_words, b);
    let changed: Vec<usize> = (0..PACKET_HEADER_LEN)
        .filter(|&i| h.encode()[i] != b[i])
        .collect();
    assert!(changed
        .iter()
        .all(|&i| (OFF_TIMESTAMP_END..OFF_PACKET_SEQ_NUM).contains(&i)
            || (OFF_EVENTS_DISCARDED..OFF_EVENTS_DISCARDED + 8).contains(&i)));
    assert_eq!(h.with_end(end).len(), 4096);
    assert_eq!(h.with_end(end).packet_size, 4096 * 8);
}

fn ring_sample() -> RingFileHeader {
    RingFileHeader {
        overwrite: true,
        subbuf_size: 65536,
        num_subbufs: 8,
        instance: 42,
        pid: 1234,
    }
}

#[test]
fn ring_file_header_roundtrips_at_the_documented_offsets() {
    for overwrite in [false, true] {
        let h = RingFileHeader {
            overwrite,
            ..ring_sample()
        };
        let b = h.encode();
        assert_eq!(RingFileHeader::decode(&b), Ok(h));
        assert_eq!(&b[RING_OFF_MAGIC..RING_OFF_MAGIC + 8], b"HTRING01");
        assert_eq!(read_u32(&b, RING_OFF_VERSION), Some(RING_VERSION));
        assert_eq!(read_u32(&b, RING_OFF_MODE), Some(u32::from(overwrite)));
        assert_eq!(read_u64(&b, RING_OFF_SUBBUF_SIZE), Some(65536));
        assert_eq!(read_u64(&b, RING_OFF_NUM_SUBBUFS), Some(8));
        assert_eq!(read_u64(&b, RING_OFF_INSTANCE), Some(42));
        assert_eq!(read_u32(&b, RING_OFF_PID), Some(1234));
    }
    // The fields tile the fixed part (which ends before the first live word: a
    // compile-time check in `ringfile`).
    assert_eq!(RING_OFF_PID + 4, RING_FIXED_LEN);
    // A whole header page decodes from its start; what follows is not read.
    let mut page = vec![0xeeu8; 4096];
    page[..RING_FIXED_LEN].copy_from_slice(&ring_sample().encode());
    assert_eq!(RingFileHeader::decode(&page), Ok(ring_sample()));
}

/// The bytes the runtime wrote before the codec existed (`ring.rs`' `write_ring_header`
/// storing at the literal offsets 8, 12, 16, 24, 32, 40), hard-coded: ring files of older
/// versions still decode to the same values.
#[test]
fn ring_file_header_written_by_the_literal_offset_code_decodes_the_same() {
    #[rustfmt::skip]
        let old: [u8; 48] = [
            b'H', b'T', b'R', b'I', b'N', b'G', b'0', b'1', // magic
            1, 0, 0, 0,                                     // version 1
            1, 0, 0, 0,                                     // mode: overwrite
            0x00, 0x00, 0x01, 0, 0, 0, 0, 0,                // subbuf_size 65536
            8, 0, 0, 0, 0, 0, 0, 0,                         // num_subbufs 8
            42, 0, 0, 0, 0, 0, 0, 0,                        // instance 42
            0xd2, 0x04, 0, 0,                               // pid 1234
            0, 0, 0, 0,                                     // (unused)
        ];
    assert_eq!(RingFileHeader::decode(&old), Ok(ring_sample()));
    assert_eq!(ring_sample().encode()[..], old[..RING_FIXED_LEN]);
    let mut discard = old;
    discard[RING_OFF_MODE] = 0;
    let h = RingFileHeader::decode(&discard).unwrap();
    assert!(!h.overwrite);
    // Any mode but 1 read as discard, as before.
    discard[RING_OFF_MODE] = 7;
    assert!(!RingFileHeader::decode(&discard).unwrap().overwrite);
}

#[test]
fn short_or_foreign_ring_file_headers_are_clear_errors() {
    let b = ring_sample().encode();
    for n in [0, 1, 8, RING_FIXED_LEN - 1] {
        let e = RingFileHeader::decode(&b[..n]).unwrap_err();
        assert_eq!(e, RingFileHeaderError::Short { len: n });
        assert!(e.to_string().contains("shorter than its header"), "{e}");
    }
    // Foreign files: short or not, a wrong magic is named as such.
    assert_eq!(
        RingFileHeader::decode(b"\x7fELF"),
        Err(RingFileHeaderError::BadMagic)
    );
    let mut elf = [0u8; 4096];
    elf[..4].copy_from_slice(b"\x7fELF");
    let e = RingFileHeader::decode(&elf).unwrap_err();
    assert_eq!(e, RingFileHeaderError::BadMagic);
    assert_eq!(e.to_string(), "not a hushtrace ring file (bad magic)");
    let mut v2 = b;
    v2[RING_OFF_VERSION] = 2;
    let e = RingFileHeader::decode(&v2).unwrap_err();
    assert_eq!(e, RingFileHeaderError::Version(2));
    assert_eq!(e.to_string(), "unsupported ring file version 2");
    let mut magic = b;
    magic[7] = b'2';
    assert_eq!(
        RingFileHeader::decode(&magic),
        Err(RingFileHeaderError::BadMagic)
    );
}
