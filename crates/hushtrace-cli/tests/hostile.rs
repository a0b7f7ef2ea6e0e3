//! The `hushtrace` command under faults and hostile input (issue 9): huge packet claims in
//! sparse files, FIFOs and symbolic links in a trace directory, lost packets, crashed and
//! killed processes, private outputs, flags the runtime would refuse. Crash recovery's cases are
//! in `hostile/recovery.rs`, the kernel trace's in `hostile/kernel.rs`.

mod common;
#[path = "hostile/kernel.rs"]
mod kernel;
#[path = "hostile/recovery.rs"]
mod recovery;

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
