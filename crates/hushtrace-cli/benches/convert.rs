//! Throughput of `hushtrace convert --to chrome`, `--to perfetto` and `--to parquet` (and their
//! output sizes) against `babeltrace2` text output, on the same synthetic trace, in the same
//! run.
//!
//! ```text
//! cargo bench -p hushtrace-cli --bench convert            # 512 MB of CTF
//! HUSHTRACE_BENCH_MB=64 cargo bench -p hushtrace-cli --bench convert
//! ```
//!
//! Without `--bench` (e.g. `cargo test --benches`) it converts a 2 MB trace once, as a smoke
//! test.
//!
//! The trace is generated once under `$HUSHTRACE_BENCH_DIR` (default: the system temporary
//! directory) and reused by later runs of the same size. `babeltrace2` is skipped with a note
//! if it is not installed.

use hushtrace_cli::{chrome, perfetto};
use hushtrace_ctf::reader::Session;
use hushtrace_ctf::synth::{PacketIdentity, StreamWriter, SynthEvent, SynthTrace};
use hushtrace_ctf::FieldType;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const PROCESSES: u32 = 2;
const THREADS: u32 = 4;
const PACKET_BYTES: usize = 256 << 10;

/// Writes about `mb` MB of CTF: per thread, nested spans with fields, an instant and a counter.
fn generate(dir: &Path, mb: u64) -> std::io::Result<()> {
    let per_stream = (mb << 20) / (PROCESSES * THREADS) as u64;
    for p in 0..PROCESSES {
        let pid = 1000 + p * 100;
        let mut t = SynthTrace::new(pid, "bench");
        let (job_b, job_e) = t.span("bench:job", &[("id", FieldType::U64)]);
        let (step_b, step_e) = t.span(
            "bench:step",
            &[("n", FieldType::U32), ("what", FieldType::Str)],
        );
        let tick = t.instant(
            "bench:tick",
            &[("load", FieldType::F64), ("ok", FieldType::Bool)],
        );
        let mem = t.counter("bench:mem", FieldType::I64);
        // Metadata and stats via SynthTrace; the streams are written incrementally below.
        t.write_session(dir)?;
        for th in 0..THREADS {
            let vtid = pid + 1 + th;
            let path = dir.join(format!("{pid}/stream_{th}"));
            let file = std::io::BufWriter::new(std::fs::File::create(path)?);
            let id = PacketIdentity {
                uuid: t.desc.uuid,
                stream_instance_id: th as u64,
                vpid: pid,
                vtid,
                procname: format!("worker-{th}"),
                pthread_id: vtid as u64,
            };
            let mut w = StreamWriter::new(file, id, PACKET_BYTES);
            let mut ts = 1_000 + th as u64 * 3 + p as u64;
            let mut written = 0u64;
            let mut k = 0u64;
            while written < per_stream {
                let evs = [
                    SynthEvent::new(job_b, ts).u64(k),
                    SynthEvent::new(step_b, ts + 50)
                        .u32(k as u32)
                        .str("parse request"),
                    SynthEvent::new(tick, ts + 80)
                        .f64(k as f64 * 0.5)
                        .bool(k.is_multiple_of(3)),
                    SynthEvent::new(step_e, ts + 300),
                    SynthEvent::new(mem, ts + 310).i64(k as i64 * 64),
                    SynthEvent::new(job_e, ts + 400),
                ];
                for e in &evs {
                    let mut v = Vec::new();
                    e.encode(e.timestamp, &mut v); // compact: gaps of at most 300 ns
                    written += v.len() as u64;
                    w.event(e)?;
                }
                ts += 500;
                k += 1;
            }
            w.finish()?;
        }
    }
    Ok(())
}

/// A sink that counts the bytes written.
struct Counting(u64);

impl std::io::Write for Counting {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let mb: u64 = if full {
        std::env::var("HUSHTRACE_BENCH_MB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(512)
    } else {
        2
    };
    let base =
        std::env::var_os("HUSHTRACE_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!("hushtrace-bench-{mb}mb"));
    let done = dir.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create bench dir");
        let t = Instant::now();
        generate(&dir, mb).expect("generate trace");
        std::fs::write(&done, b"").expect("mark complete");
        eprintln!(
            "generated {} in {:.1} s",
            dir.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let session = Session::open(&dir).expect("open bench trace");
    let bytes = session.stream_bytes();
    let mb_read = bytes as f64 / (1 << 20) as f64;
    println!("trace: {} ({mb_read:.0} MB of CTF)", dir.display());

    let t = Instant::now();
    let mut json_bytes = Counting(0);
    let summary = chrome::convert(&session, &mut json_bytes, &mut |_, _| {}).expect("convert");
    let ours = t.elapsed().as_secs_f64();
    println!(
        "hushtrace convert --to chrome: {:>8.1} MB/s  ({} events in {ours:.2} s, {:.1} M events/s, {:.0} MB of JSON)",
        mb_read / ours,
        summary.events,
        summary.events as f64 / ours / 1e6,
        json_bytes.0 as f64 / (1 << 20) as f64
    );

    let t = Instant::now();
    let mut pb_bytes = Counting(0);
    let summary = perfetto::convert(&session, &mut pb_bytes, &mut |_, _| {}).expect("convert");
    let pf = t.elapsed().as_secs_f64();
    println!(
        "hushtrace convert --to perfetto: {:>6.1} MB/s  ({} events in {pf:.2} s, {:.1} M events/s, {:.0} MB of protobuf)",
        mb_read / pf,
        summary.events,
        summary.events as f64 / pf / 1e6,
        pb_bytes.0 as f64 / (1 << 20) as f64
    );
    println!(
        "perfetto vs chrome: size 1/{:.1}, speed {:.2}x",
        json_bytes.0 as f64 / pb_bytes.0 as f64,
        ours / pf
    );

    #[cfg(feature = "parquet")]
    let pq = {
        let out = base.join(format!("hushtrace-bench-{mb}mb-parquet"));
        let _ = std::fs::remove_dir_all(&out);
        let t = Instant::now();
        let options = hushtrace_cli::parquet_export::Options::default();
        let s = hushtrace_cli::parquet_export::export(&session, &out, &options, &mut |_, _| {})
            .expect("parquet export");
        let secs = t.elapsed().as_secs_f64();
        let size: u64 = std::fs::read_dir(&s.dir)
            .expect("read the export")
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        let slices = s
            .rows
            .iter()
            .find(|(n, _)| *n == "slices")
            .map_or(0, |r| r.1);
        println!(
            "hushtrace convert --to parquet: {:>7.1} MB/s  ({slices} slices in {secs:.2} s, {:.0} MB of Parquet, 1/{:.1} of the CTF)",
            mb_read / secs,
            size as f64 / (1 << 20) as f64,
            bytes as f64 / size.max(1) as f64
        );
        let _ = std::fs::remove_dir_all(&out);
        secs
    };

    let t = Instant::now();
    match Command::new("babeltrace2")
        .arg(&dir)
        .stdout(Stdio::null())
        .status()
    {
        Ok(st) if st.success() => {
            let theirs = t.elapsed().as_secs_f64();
            println!(
                "babeltrace2 <dir> > /dev/null: {:>8.1} MB/s  ({theirs:.2} s)",
                mb_read / theirs
            );
            println!(
                "ratio: hushtrace convert is {:.1}x babeltrace2",
                theirs / ours
            );
            #[cfg(feature = "parquet")]
            println!(
                "ratio: hushtrace convert --to parquet is {:.1}x babeltrace2",
                theirs / pq
            );
        }
        Ok(st) => println!("babeltrace2 failed: {st}"),
        Err(e) => println!("babeltrace2 not run: {e}"),
    }
}
