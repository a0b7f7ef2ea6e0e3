//! DIR/kernel, the kernel trace of `record --kernel`, under hostile input: read through the same
//! safe layer as the process traces.

use super::*;

/// A session of process 90 (one thread, spans) and a kernel trace of two CPUs in `dir`:
/// sched_switch events of thread 90 in and out. Returns the good bytes of `channel0_0`.
fn kernel_session(dir: &Path) -> Vec<u8> {
    use hushtrace_kernel::ctf::{to_tsdl, KernelMeta, StreamWriter};
    use hushtrace_kernel::event::{Comm, SchedSwitch};
    use hushtrace_kernel::{Event, KEvent};
    small_trace(dir, 90, 20, true);
    let user = hushtrace_ctf::reader::Session::open(dir).unwrap().traces[0]
        .desc
        .clone();
    let k = dir.join("kernel");
    std::fs::create_dir(&k).unwrap();
    let meta = KernelMeta::synthetic(&user);
    std::fs::write(k.join("metadata"), to_tsdl(&meta)).unwrap();
    for cpu in 0..2u32 {
        let mut w = StreamWriter::create(
            &k.join(format!("channel0_{cpu}")),
            meta.uuid,
            cpu.into(),
            cpu,
        )
        .unwrap();
        for i in 0..400u64 {
            let (prev, next) = if i % 2 == 0 { (0, 90) } else { (90, 0) };
            let sw = SchedSwitch {
                prev_comm: Comm::new(b"x"),
                prev_tid: prev,
                prev_prio: 120,
                prev_state: (i % 4) as i64 / 2,
                next_comm: Comm::new(b"main"),
                next_tid: next,
                next_prio: 120,
            };
            w.write(&KEvent {
                ts: i + u64::from(cpu),
                cpu,
                event: Event::SchedSwitch(sw),
            })
            .unwrap();
            if i == 200 {
                w.flush().unwrap(); // two packets per stream
            }
        }
        w.flush().unwrap();
    }
    std::fs::read(k.join("channel0_0")).unwrap()
}

/// `report` and `convert` (Chrome and Perfetto) of `dir`: their outputs, each bounded in time.
fn read_all_ways(dir: &Path) -> Vec<Output> {
    let d = dir.to_str().unwrap();
    let json = dir.join("o.json");
    let pf = dir.join("o.pftrace");
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&pf);
    vec![
        hushtrace(&["report", d, "--slowest", "work:job"]),
        hushtrace(&["convert", d, "-o", json.to_str().unwrap(), "-q"]),
        hushtrace(&[
            "convert",
            d,
            "--to",
            "perfetto",
            "-o",
            pf.to_str().unwrap(),
            "-q",
        ]),
    ]
}

/// Every way of reading `dir` fails with exit 1 and an error that contains each of `words`.
fn all_fail_with(dir: &Path, words: &[&str]) {
    for o in read_all_ways(dir) {
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        for w in words {
            assert!(err.contains(w), "no {w:?} in: {err}");
        }
    }
}

#[test]
fn a_good_synthetic_kernel_trace_reads_every_way() {
    let dir = tempfile::tempdir().unwrap();
    kernel_session(dir.path());
    for o in read_all_ways(dir.path()) {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
    assert!(
        text(&o.stdout).contains("800 events on 2 CPU(s)"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn symlinks_in_a_kernel_trace_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    kernel_session(dir.path());
    let k = dir.path().join("kernel");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "TOPS3CR3T").unwrap();
    // A stream file.
    std::fs::remove_file(k.join("channel0_1")).unwrap();
    std::os::unix::fs::symlink(&secret, k.join("channel0_1")).unwrap();
    all_fail_with(dir.path(), &["kernel/channel0_1", "symbolic link"]);
    // The metadata.
    let moved = dir.path().join("kmeta");
    std::fs::rename(k.join("metadata"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, k.join("metadata")).unwrap();
    all_fail_with(dir.path(), &["kernel/metadata", "symbolic link"]);
    // The kernel directory itself.
    let elsewhere = tempfile::tempdir().unwrap();
    let dir2 = elsewhere.path().join("s");
    std::fs::create_dir(&dir2).unwrap();
    kernel_session(&dir2);
    std::fs::rename(dir2.join("kernel"), elsewhere.path().join("real")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join("real"), dir2.join("kernel")).unwrap();
    all_fail_with(&dir2, &["kernel", "symbolic links are not followed"]);
}

#[test]
fn fifos_in_a_kernel_trace_never_block() {
    let dir = tempfile::tempdir().unwrap();
    kernel_session(dir.path());
    let k = dir.path().join("kernel");
    std::fs::remove_file(k.join("channel0_0")).unwrap();
    mkfifo(&k.join("channel0_0"));
    all_fail_with(dir.path(), &["kernel/channel0_0", "FIFO"]);
    std::fs::remove_file(k.join("metadata")).unwrap();
    mkfifo(&k.join("metadata"));
    all_fail_with(dir.path(), &["kernel/metadata", "FIFO"]);
}

#[test]
fn a_truncated_kernel_stream_reads_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let good = kernel_session(dir.path());
    let k = dir.path().join("kernel");
    // Cut in the middle of the second packet: the reader reads its whole events, with a
    // warning.
    let cut = &good[..good.len() - 100];
    std::fs::write(k.join("channel0_0"), cut).unwrap();
    let kt = hushtrace_kernel::KernelTrace::open(&k).unwrap();
    let mut ev = kt.events().unwrap();
    let mut n = 0;
    while ev.next().unwrap().is_some() {
        n += 1;
    }
    let warnings: Vec<String> = ev.take_warnings().iter().map(|w| w.to_string()).collect();
    assert!(n > 600 && n < 800, "{n}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("kernel/channel0_0") && w.contains("truncated")),
        "{warnings:?}"
    );
    // `report` and `convert` first cut the partial packet (as `hushtrace recover`, so that
    // babeltrace2 reads it too), say so, and read the rest.
    let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("kernel/channel0_0") && err.contains("cut the partial packet"),
        "{err}"
    );
    std::fs::write(k.join("channel0_0"), cut).unwrap();
    for o in read_all_ways(dir.path()) {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    // Cut inside the first packet's header: an error at offset 0.
    std::fs::write(k.join("channel0_0"), &good[..50]).unwrap();
    for o in read_all_ways(dir.path()) {
        let err = text(&o.stderr) + &text(&o.stdout);
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn huge_kernel_packet_claims_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = kernel_session(dir.path());
    let k = dir.path().join("kernel");
    // A packet claiming 1 TiB.
    let mut b = good.clone();
    for off in [OFF_CONTENT_SIZE, OFF_PACKET_SIZE] {
        b[off..off + 8].copy_from_slice(&(8u64 << 40).to_le_bytes());
    }
    std::fs::write(k.join("channel0_0"), &b).unwrap();
    all_fail_with(
        dir.path(),
        &["kernel/channel0_0", "byte offset 56", "exceeds"],
    );
    // A sparse stream of 1 GiB of zeros after a good packet: a hole, at its offset.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(k.join("channel0_0"))
        .unwrap();
    f.set_len(0).unwrap();
    std::io::Write::write_all(&mut &f, &good).unwrap();
    f.set_len(good.len() as u64 + (1 << 30)).unwrap();
    all_fail_with(
        dir.path(),
        &["kernel/channel0_0", &format!("byte offset {}", good.len())],
    );
}

#[test]
fn mutated_kernel_packets_never_panic_or_hang() {
    let dir = tempfile::tempdir().unwrap();
    let good = kernel_session(dir.path());
    let path = dir.path().join("kernel/channel0_0");
    let mut seed = 11u64;
    let mut failed = 0;
    for round in 0..40 {
        let mut b = good.clone();
        for _ in 0..1 + round % 5 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Headers and the first events: where a flip changes the most.
            let at = (seed >> 33) as usize % 400.min(b.len());
            b[at] = (seed >> 24) as u8;
        }
        std::fs::write(&path, &b).unwrap();
        let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
        let err = text(&o.stderr);
        assert!(!err.contains("panicked"), "round {round}: {err}");
        if !o.status.success() {
            failed += 1;
            assert!(
                err.contains("kernel/channel0_0") && err.contains("byte offset"),
                "round {round}: {err}"
            );
        }
    }
    assert!(failed > 0, "no mutation was detected");
}
