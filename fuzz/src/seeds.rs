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
    println!("seeds written under {}", root.display());
    Ok(())
}
