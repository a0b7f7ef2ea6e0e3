//! Writes the seed corpora: `cargo run --bin seeds` (from `fuzz/`) fills
//! `corpus/metadata/` and `corpus/stream/` with valid inputs.

mod trace;

fn main() -> std::io::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let t = trace::fixture();
    std::fs::create_dir_all(root.join("metadata"))?;
    std::fs::create_dir_all(root.join("stream"))?;
    std::fs::write(root.join("metadata/fixture"), t.metadata())?;
    let empty = hushtrace_ctf::synth::SynthTrace::new(1, "empty");
    std::fs::write(root.join("metadata/empty"), empty.metadata())?;
    let full = t.stream_bytes(0);
    std::fs::write(root.join("stream/fixture"), &full)?;
    // One packet only, and a truncated copy.
    std::fs::write(root.join("stream/one_packet"), &full[..256.min(full.len())])?;
    std::fs::write(root.join("stream/truncated"), &full[..full.len() - 7])?;
    // Packets larger than the reader's window (events straddle its refills), and a stream
    // that starts at packet_seq_num 6 with a gap later (overwrite mode, a failed write).
    let window = hushtrace_ctf::reader::WINDOW_BYTES;
    let big = trace::fixture_with(window + window / 2, 1200);
    std::fs::write(root.join("stream/large_packets"), big.stream_bytes(0))?;
    let mut lossy = trace::fixture();
    lossy.threads[0].first_seq = 6;
    lossy.threads[0].lost_packets = 2;
    std::fs::write(root.join("stream/overwritten"), lossy.stream_bytes(0))?;
    // Event headers (target `event_header`): id, timestamp and clock at the compact form's
    // edges (a step of 2^24 - 1 and 2^24, id 254 and 255, low bits wrapping).
    std::fs::create_dir_all(root.join("event_header"))?;
    for (name, id, ts, prev) in [
        ("compact_max_step", 254u16, (1u64 << 24) - 1, 0u64),
        ("extended_step", 254, 1 << 24, 0),
        ("extended_id", 255, 5, 5),
        ("wrap", 3, 0x0100_0002, 0x00ff_fffe),
    ] {
        let mut b = id.to_le_bytes().to_vec();
        b.extend_from_slice(&ts.to_le_bytes());
        b.extend_from_slice(&prev.to_le_bytes());
        b.push(1); // odd: `ts` taken as is
        hushtrace_ctf::layout::push_event_header(&mut b, id, ts, prev);
        std::fs::write(root.join("event_header").join(name), b)?;
    }
    println!("seeds written under {}", root.display());
    Ok(())
}
