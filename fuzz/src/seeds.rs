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
    println!("seeds written under {}", root.display());
    Ok(())
}
