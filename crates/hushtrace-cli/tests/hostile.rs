//! The `hushtrace` command under faults and hostile input (issue 9): huge packet claims in
//! sparse files, FIFOs and symbolic links in a trace directory, lost packets, crashed and
//! killed processes, private outputs, flags the runtime would refuse.

mod common;

use common::{text, BIN};
use hushtrace_ctf::layout::{OFF_CONTENT_SIZE, OFF_PACKET_SIZE, PACKET_HEADER_LEN};
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_ctf::{FieldType, Kind};
use serde_json::Value as J;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn hushtrace(args: &[&str]) -> Output {
    run_bounded(Command::new(BIN).args(args))
}

/// Runs `cmd`, killing it if it has not exited after a generous minute: a command that blocks
/// fails the test instead of hanging it.
fn run_bounded(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let Some(status) = hushtrace_testsupport::wait_or_kill(&mut child, Duration::from_secs(60))
    else {
        panic!("{cmd:?} still running after 60 s: blocked");
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// One process `pid` with one thread of `n` spans (a flame graph needs them).
fn small_trace(dir: &Path, pid: u32, n: u64, stats: bool) -> SynthTrace {
    let mut t = SynthTrace::new(pid, &format!("p{pid}"));
    t.write_stats = stats;
    let (b, e) = t.span("work:job", &[]);
    let th = t.thread(pid, "main");
    for k in 0..n {
        th.event(SynthEvent::new(b, 10 * k))
            .event(SynthEvent::new(e, 10 * k + 5));
    }
    t.write_session(dir).unwrap();
    t
}

/// Issue 9.6: three sparse streams (a few KB on disk) whose packet headers claim 1 GiB each.
/// `report` used to allocate every claimed packet and die; under a 512 MiB address-space
/// limit it now reads a window per stream and reports the hole as corrupt, at its offset.
#[test]
fn report_of_sparse_gigabyte_packets_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(9, "sparse");
    t.packet_bytes = 1 << 20;
    t.class("never:hit", Kind::Instant, None); // id 0: what the zeros of a hole decode as
    let tick = t.instant("x:tick", &[("n", FieldType::U64)]);
    for tid in 10..13 {
        let th = t.thread(tid, "t");
        for k in 0..50 {
            th.event(SynthEvent::new(tick, k).u64(k));
        }
    }
    t.write_session(dir.path()).unwrap();
    for i in 0..3 {
        let p = dir.path().join(format!("9/stream_{i}"));
        let mut b = std::fs::read(&p).unwrap();
        let claim = hushtrace_ctf::reader::MAX_PACKET_BYTES;
        b[OFF_CONTENT_SIZE..OFF_CONTENT_SIZE + 8].copy_from_slice(&(claim * 8).to_le_bytes());
        b[OFF_PACKET_SIZE..OFF_PACKET_SIZE + 8].copy_from_slice(&(claim * 8).to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(claim).unwrap();
    }
    let o = run_bounded(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 524288 && exec \"$0\" \"$@\"")
            .arg(BIN)
            .args(["report", dir.path().to_str().unwrap()]),
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{:?}: {err}", o.status);
    // 50 events of a compact header and a u64.
    let hole = PACKET_HEADER_LEN + 50 * (hushtrace_ctf::layout::COMPACT_HEADER_LEN + 8);
    assert!(
        err.contains(&format!(": byte offset {hole}: corrupt trace")),
        "{err}"
    );
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

/// Issue 9.7: a FIFO named like a statistics file or a stream file never blocks a reader.
#[test]
fn fifos_in_a_trace_directory_never_block() {
    let dir = tempfile::tempdir().unwrap();
    small_trace(dir.path(), 70, 3, false);
    mkfifo(&dir.path().join("70.stats.json"));
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("o.json");
    let svg = dir.path().join("o.svg");
    // A FIFO as statistics file: ignored with a warning naming it; the trace is read.
    for args in [
        vec!["report", d],
        vec!["convert", d, "-o", out.to_str().unwrap()],
        vec!["flamegraph", d, "-o", svg.to_str().unwrap()],
    ] {
        let o = hushtrace(&args);
        let err = text(&o.stderr);
        assert!(o.status.success(), "{args:?}: {err}");
        assert!(
            err.contains("70.stats.json") && err.contains("FIFO"),
            "{err}"
        );
    }
    // A FIFO as stream file: an error naming it.
    mkfifo(&dir.path().join("70/stream_1"));
    for args in [
        vec!["report", d],
        vec!["convert", d, "-o", out.to_str().unwrap()],
    ] {
        let o = hushtrace(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("70/stream_1") && err.contains("FIFO"), "{err}");
    }
    // `record`'s summary reads the statistics files too.
    let o = hushtrace(&["record", "-o", d, "--append", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Issue 9.7: a symbolic link `stream_3` is not followed, and its target's bytes never appear
/// in the error (they used to, as a "bad packet magic").
#[test]
fn a_symlinked_stream_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    small_trace(dir.path(), 71, 3, true);
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "TOPS3CR3T").unwrap();
    std::os::unix::fs::symlink(&secret, dir.path().join("71/stream_3")).unwrap();
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("o.json");
    for args in [
        vec!["report", d],
        vec!["convert", d, "-o", out.to_str().unwrap()],
    ] {
        let o = hushtrace(&args);
        let all = text(&o.stderr) + &text(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{all}");
        assert!(
            all.contains("71/stream_3") && all.contains("symbolic link"),
            "{all}"
        );
        // "TOPS" read as a little-endian magic number.
        assert!(
            !all.contains("TOPS") && !all.to_lowercase().contains("53504f54"),
            "{all}"
        );
    }
}

/// Issue 9.8: a stream that starts at packet_seq_num 6 (overwrite mode dropped packets 0..5)
/// and misses one more later: report counts 7 lost packets for the thread and says what they
/// are, next to the discarded events.
#[test]
fn report_counts_overwritten_leading_packets() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(80, "flight");
    t.packet_bytes = PACKET_HEADER_LEN + 40;
    let e = t.instant("x:y", &[]);
    let th = t.thread(81, "t");
    th.first_seq = 6;
    th.lost_packets = 1;
    th.discarded = 5;
    for k in 0..12 {
        th.event(SynthEvent::new(e, k));
    }
    t.write_session(dir.path()).unwrap();
    let d = dir.path().to_str().unwrap();
    let o = hushtrace(&["report", d, "--format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: J = serde_json::from_slice(&o.stdout).unwrap();
    let p = &r["processes"][0];
    assert_eq!(p["lost_packets"], 7, "{p}");
    assert_eq!(p["threads"][0]["lost_packets"], 7, "{p}");
    assert_eq!(p["threads"][0]["discarded"], 5, "{p}");
    assert_eq!(p["complete"], true);
    let o = hushtrace(&["report", d]);
    let out = text(&o.stdout);
    let row = out.lines().find(|l| l.contains("thread t")).unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[cols.len() - 3..], ["12", "5", "7"], "{out}");
    assert!(out.contains("LOST PKTS: whole packets missing"), "{out}");
}

/// Issue 9.11: outputs derived from a trace are created 0600, whatever the umask.
#[test]
fn convert_and_flamegraph_outputs_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    small_trace(dir.path(), 90, 3, true);
    let d = dir.path().to_str().unwrap();
    let json = dir.path().join("t.json");
    let gz = dir.path().join("t.json.gz");
    let svg = dir.path().join("f.svg");
    std::fs::write(&svg, "old").unwrap();
    std::fs::set_permissions(&svg, std::fs::Permissions::from_mode(0o644)).unwrap();
    for args in [
        vec!["convert", d, "-o", json.to_str().unwrap()],
        vec!["convert", d, "-o", gz.to_str().unwrap()],
        vec!["flamegraph", d, "-o", svg.to_str().unwrap()],
    ] {
        let o = run_bounded(
            Command::new("sh")
                .arg("-c")
                .arg("umask 000 && exec \"$0\" \"$@\"")
                .arg(BIN)
                .args(&args),
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    for p in [&json, &gz, &svg] {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
    }
}

/// Issue 9.12: a process that died without stopping (no statistics file) is named as
/// incomplete by report (text and JSON), convert and flamegraph, even when it left no event.
#[test]
fn a_crashed_process_is_named_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    small_trace(dir.path(), 60, 3, true);
    small_trace(dir.path(), 61, 3, false);
    // Died before its first packet: metadata only.
    let mut empty = SynthTrace::new(62, "early");
    empty.write_stats = false;
    empty.write_session(dir.path()).unwrap();
    let d = dir.path().to_str().unwrap();

    let o = hushtrace(&["report", d, "--format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: J = serde_json::from_slice(&o.stdout).unwrap();
    let complete: Vec<(u64, bool)> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["pid"].as_u64().unwrap(), p["complete"].as_bool().unwrap()))
        .collect();
    assert_eq!(complete, [(60, true), (61, false), (62, false)]);

    let o = hushtrace(&["report", d]);
    let out = text(&o.stdout);
    assert!(out.contains("INCOMPLETE: process 61 (p61)"), "{out}");
    assert!(out.contains("INCOMPLETE: process 62 (early)"), "{out}");
    assert!(!out.contains("process 60 (p60) did not"), "{out}");

    let json = dir.path().join("o.json");
    let svg = dir.path().join("o.svg");
    for args in [
        vec!["report", d],
        vec!["convert", d, "-o", json.to_str().unwrap()],
        vec!["flamegraph", d, "-o", svg.to_str().unwrap()],
    ] {
        let o = hushtrace(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let err = text(&o.stderr);
        for pid in ["61", "62"] {
            assert!(
                err.lines()
                    .any(|l| l.contains("incomplete trace")
                        && l.contains(&format!("{pid}.stats.json"))),
                "{args:?}: {err}"
            );
        }
        assert!(!err.contains("60.stats.json"), "{err}");
    }

    // Only the process that left no event: the empty result is not silent.
    let only = tempfile::tempdir().unwrap();
    empty.write_session(only.path()).unwrap();
    let o = hushtrace(&[
        "convert",
        only.path().to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(
        err.contains("incomplete trace") && err.contains("0 events"),
        "{err}"
    );
}

/// Issue 9.12: `record` of a program killed by a signal says so, with the signal's name and
/// number, instead of asking whether it called start_from_env().
#[test]
fn record_of_a_killed_program_says_it_was_killed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let o = hushtrace(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "kill -9 $$",
    ]);
    assert_eq!(o.status.code(), Some(128 + 9));
    let err = text(&o.stderr);
    assert!(err.contains("killed by signal SIGKILL (9)"), "{err}");
    let stdout = text(&o.stdout);
    assert!(!stdout.contains("start_from_env"), "{stdout}");
    assert!(stdout.contains("killed before it wrote"), "{stdout}");

    // A trace left without stats by the killed program is named incomplete.
    small_trace(&out, 63, 1, false);
    let o = hushtrace(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--append",
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    ]);
    assert_eq!(o.status.code(), Some(128 + 15));
    assert!(text(&o.stderr).contains("SIGTERM (15)"));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("process 63 (p63): incomplete trace"),
        "{stdout}"
    );
}

/// Issue 9.10 and issue 8 point 7: `record` refuses the buffer flags and modes the runtime
/// would refuse, before running anything (exit code 2, the runtime's message).
#[test]
fn record_refuses_what_the_runtime_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let out = dir.path().join("s");
    for (flags, needles) in [
        (
            &["--num-subbufs", "65536"][..],
            &["--num-subbufs", "65536", "4096"][..],
        ),
        (&["--subbuf-size", "100"][..], &["--subbuf-size", "100"][..]),
        (
            &["--subbuf-size", "268435456", "--num-subbufs", "4096"][..],
            &["--num-subbufs", "exceeds"][..],
        ),
        (
            &["--mode", "sometimes"][..],
            &["sometimes", "discard", "overwrite"][..],
        ),
    ] {
        let mut args = vec!["record", "-o", out.to_str().unwrap()];
        args.extend_from_slice(flags);
        args.extend(["--", "sh", "-c", &script]);
        let o = hushtrace(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{flags:?}: {n} not in {err}");
        }
        assert!(!marker.exists(), "{flags:?}: the command ran");
    }
    // Valid values pass through to the environment.
    let o = hushtrace(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--mode",
        "overwrite",
        "--subbuf-size",
        "65536",
        "--num-subbufs",
        "4",
        "--",
        "sh",
        "-c",
        "env | grep ^HUSHTRACE_ | sort",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let env = text(&o.stdout);
    assert!(
        env.contains("HUSHTRACE_MODE=overwrite\nHUSHTRACE_NUM_SUBBUFS=4\n")
            && env.contains("HUSHTRACE_SUBBUF_SIZE=65536\n"),
        "{env}"
    );
}

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

// ---------------------------------------------------------------------------------------------
// DIR/kernel: the kernel trace of `record --kernel`, read through the same safe layer.

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
