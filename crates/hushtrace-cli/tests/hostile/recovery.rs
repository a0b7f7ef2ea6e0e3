//! Crash recovery under hostile input: dead rings whose stream files are symbolic links, FIFOs
//! or devices, ring headers with absurd geometry, thousands of threads, one hostile process among
//! good ones.

use super::*;

/// A process that died without stopping, as recovery finds it: `<dir>/<pid>/metadata` (class
/// `r:v` with a `u32`, and `r:late` whose field types only the types mirror knows), a ring
/// directory `<dir>/ringdir` named by the trace's pointer file, and in it `ring_0` with one
/// committed packet of three `r:v` events. The pid is one that is no longer running.
struct DeadRing {
    trace: std::path::PathBuf,
    ring_dir: std::path::PathBuf,
}

fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn dead_ring(dir: &Path, geometry: Option<(u64, u64)>) -> DeadRing {
    use hushtrace_ctf::layout::OFF_MAGIC;
    use hushtrace_ctf::ringfile::*;
    use hushtrace_ctf::synth::{packet_header, PacketIdentity};
    let pid = dead_pid();
    let mut t = SynthTrace::new(pid, "dead");
    t.write_stats = false;
    let v = t.instant("r:v", &[("v", FieldType::U32)]);
    t.class("r:late", Kind::Instant, None);
    t.write_session(dir).unwrap();
    let trace = dir.join(pid.to_string());
    let ring_dir = dir.join("ringdir");
    std::fs::create_dir(&ring_dir).unwrap();
    std::fs::write(trace.join(RINGS_FILE), format!("{}\n", ring_dir.display())).unwrap();
    let (subbuf, num) = geometry.unwrap_or((4096, 2));
    let mut hdr = vec![0u8; HEADER_LEN];
    hdr[..8].copy_from_slice(&RING_MAGIC);
    hdr[8..12].copy_from_slice(&1u32.to_le_bytes());
    hdr[16..24].copy_from_slice(&subbuf.to_le_bytes());
    hdr[24..32].copy_from_slice(&num.to_le_bytes());
    hdr[40..44].copy_from_slice(&pid.to_le_bytes());
    hdr[OFF_OPEN_SEQ..OFF_OPEN_SEQ + 8].copy_from_slice(&1u64.to_le_bytes());
    let id = PacketIdentity {
        uuid: t.desc.uuid,
        stream_instance_id: 0,
        vpid: pid,
        vtid: pid,
        procname: "dead".into(),
        pthread_id: 1,
    };
    let mut events = Vec::new();
    for k in 0..3u32 {
        SynthEvent::new(v, 100 + u64::from(k))
            .u32(k)
            .encode(99 + u64::from(k), &mut events);
    }
    let len = (PACKET_HEADER_LEN + events.len()) as u64;
    let mut slot0 = packet_header(&id, 100, 102, len, 0, 0).to_vec();
    assert_eq!(slot0[OFF_MAGIC], 0xc1);
    slot0.extend_from_slice(&events);
    slot0.resize(4096, 0);
    let mut f = hdr;
    f.extend_from_slice(&slot0);
    f.resize(HEADER_LEN + 2 * 4096, 0);
    std::fs::write(ring_dir.join("ring_0"), &f).unwrap();
    DeadRing { trace, ring_dir }
}

/// Issue 18.5: a dead ring next to `stream_0`, a symbolic link to a file elsewhere (root's,
/// in the attack): `recover` and `report` (which recovers first) never truncate or write the
/// link's target; they say what `stream_0` is.
#[test]
fn recovery_never_writes_through_a_symlinked_stream() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "precious contents").unwrap();
    let d = dead_ring(dir.path(), None);
    std::os::unix::fs::symlink(&victim, d.trace.join("stream_0")).unwrap();
    let p = dir.path().to_str().unwrap();
    for args in [vec!["recover", p], vec!["report", p]] {
        let o = hushtrace(&args);
        let err = text(&o.stderr);
        assert!(
            err.contains("stream_0") && err.contains("symbolic link"),
            "{args:?}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious contents",
            "{args:?}"
        );
    }
    assert!(d.ring_dir.join("ring_0").exists(), "the ring is kept");
}

/// Issue 18.5: recovered streams are created 0600 (the README's promise), whatever the umask.
#[test]
fn recovered_streams_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dead_ring(dir.path(), None);
    let o = hushtrace(&["recover", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("recovered 3 events"),
        "{}",
        text(&o.stdout)
    );
    let mode = std::fs::metadata(d.trace.join("stream_0"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        !d.ring_dir.exists(),
        "the recovered ring directory is removed"
    );
    let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Issue 18.5: a FIFO, or a link to `/dev/zero`, where recovery reads the ring pointer, the
/// types mirror, a ring or a stream: `report` finishes promptly (it used to block on the FIFO
/// for good, or read gigabytes of zeros) and names the file and what it is.
#[test]
fn fifos_and_devices_in_place_of_recovery_files_never_block() {
    use hushtrace_ctf::ringfile::{RINGS_FILE, TYPES_FILE};
    type Plant = fn(&DeadRing) -> (std::path::PathBuf, &'static str);
    let cases: [(&str, Plant); 6] = [
        ("pointer FIFO", |d| (d.trace.join(RINGS_FILE), "fifo")),
        ("pointer /dev/zero", |d| (d.trace.join(RINGS_FILE), "zero")),
        ("types FIFO", |d| (d.ring_dir.join(TYPES_FILE), "fifo")),
        ("types /dev/zero", |d| (d.ring_dir.join(TYPES_FILE), "zero")),
        ("stream FIFO", |d| (d.trace.join("stream_0"), "fifo")),
        ("ring FIFO", |d| (d.ring_dir.join("ring_0"), "fifo")),
    ];
    for (what, plant) in cases {
        let dir = tempfile::tempdir().unwrap();
        let d = dead_ring(dir.path(), None);
        let (path, how) = plant(&d);
        let _ = std::fs::remove_file(&path);
        if how == "fifo" {
            mkfifo(&path);
        } else {
            std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
        let err = text(&o.stderr);
        if what == "ring FIFO" {
            // Not a ring file: nothing to recover, the trace reads.
            assert!(o.status.success(), "{what}: {err}");
            continue;
        }
        let kind = if how == "fifo" {
            "FIFO"
        } else {
            "symbolic link"
        };
        assert!(err.contains(&name) && err.contains(kind), "{what}: {err}");
    }
}

/// Issue 18.5: a ring header that declares 64 slots of 1 GiB in a 12 KiB file: `recover`
/// says so (it used to allocate every slot and abort), even with 1 GiB of address space.
#[test]
fn a_ring_header_declaring_huge_slots_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    dead_ring(dir.path(), Some((1 << 30, 64)));
    let cmd = format!(
        "ulimit -v 1048576 && exec {BIN} recover {}",
        dir.path().display()
    );
    let o = run_bounded(Command::new("sh").args(["-c", &cmd]));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ring_0") && err.contains("declares 64 slots of 1073741824 bytes"),
        "{err}"
    );
}

/// Issue 18.9: a trace of 4,000 threads (4,000 stream files) is read under the default limit
/// of 1,024 descriptors: `report` and `convert` keep a bounded number of streams open (they
/// used to fail at stream 1,019 with EMFILE).
#[test]
fn a_4000_thread_trace_reads_under_1024_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(90, "wide");
    let (b, e) = t.span("w:job", &[]);
    let tick = t.instant("w:tick", &[("n", FieldType::U64)]);
    const THREADS: u32 = 4000;
    for k in 0..THREADS {
        let th = t.thread(1000 + k, "w");
        // Interleaved in time across threads: the merge needs every stream at once.
        for j in 0..3u64 {
            let ts = 1000 * j + u64::from(k);
            th.event(SynthEvent::new(b, ts))
                .event(SynthEvent::new(tick, ts).u64(j))
                .event(SynthEvent::new(e, ts + 1));
        }
    }
    t.write_session(dir.path()).unwrap();
    let d = dir.path().display();
    let out = dir.path().join("o.json");
    for args in [
        format!("report --format json {d}"),
        format!("convert {d} -o {}", out.display()),
    ] {
        let cmd = format!("ulimit -n 1024 && exec {BIN} {args}");
        let o = run_bounded(Command::new("sh").args(["-c", &cmd]));
        let err = text(&o.stderr);
        assert!(o.status.success(), "{args}: {err}");
        if args.starts_with("report") {
            let j: J = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(j["events"], 4000 * 9, "{j}");
        }
    }
    let json = std::fs::read_to_string(&out).unwrap();
    assert_eq!(json.matches(r#""ph":"B""#).count(), 4000 * 3);
}

/// Issue 18.5: one process's hostile files (a FIFO as its ring pointer) do not keep another
/// process of the session from being recovered; the error names the hostile file.
#[test]
fn one_hostile_process_does_not_block_the_recovery_of_others() {
    use hushtrace_ctf::ringfile::RINGS_FILE;
    let dir = tempfile::tempdir().unwrap();
    let good = dead_ring(dir.path(), None);
    let other = tempfile::tempdir().unwrap();
    let bad = dead_ring(other.path(), None);
    let bad_trace = dir.path().join(format!("{}", 1u64 << 40));
    std::fs::rename(&bad.trace, &bad_trace).unwrap();
    let pointer = bad_trace.join(RINGS_FILE);
    std::fs::remove_file(&pointer).unwrap();
    mkfifo(&pointer);
    let o = hushtrace(&["recover", dir.path().to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(RINGS_FILE) && err.contains("FIFO"), "{err}");
    assert!(good.trace.join("stream_0").is_file(), "{err}");
    assert!(!good.ring_dir.exists(), "{err}");
}
