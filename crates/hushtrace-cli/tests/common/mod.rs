//! Helpers shared by the CLI's integration tests: run the built `hushtrace` binary, build the
//! workspace programs they record, convert a trace.
#![allow(dead_code)] // each test binary uses some of them

use hushtrace_testsupport::Artifact;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `hushtrace` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_hushtrace");

/// Every event of kernel trace `k` in time order, and the count of events the kernel lost.
pub fn kernel_events(k: &hushtrace_kernel::KernelTrace) -> (Vec<hushtrace_kernel::KEvent>, u64) {
    let mut ev = k.events().unwrap();
    let mut v = Vec::new();
    while let Some(e) = ev.next().unwrap() {
        v.push(e);
    }
    (v, ev.discarded())
}

/// Runs `hushtrace ARGS` to completion.
pub fn hushtrace(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// Bytes of a program's output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A program's stderr as text.
pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// The directory of the `hushtrace` binary (`<target-dir>/[<triple>/]<profile-dir>`).
fn bin_dir() -> &'static Path {
    Path::new(BIN).parent().unwrap()
}

/// A binary of the unpublished `hushtrace-testbins` crate, built beside the `hushtrace` binary
/// (same profile and target directory).
pub fn testbin(name: &str) -> PathBuf {
    hushtrace_testsupport::cargo_build(bin_dir(), "hushtrace-testbins", Artifact::Bin(name))
}

/// An example of the `hushtrace` package, built beside the `hushtrace` binary.
pub fn example(name: &str) -> PathBuf {
    hushtrace_testsupport::cargo_build(bin_dir(), "hushtrace", Artifact::Example(name))
}

/// `hushtrace convert DIR --to TO -o OUT`; asserts it succeeds.
pub fn convert(dir: &Path, to: &str, out: &Path) {
    convert_with(dir, to, out, &[]);
}

/// `hushtrace convert DIR --to TO -o OUT EXTRA...`; asserts it succeeds.
pub fn convert_with(dir: &Path, to: &str, out: &Path, extra: &[&str]) {
    let mut args = vec![
        "convert",
        dir.to_str().unwrap(),
        "--to",
        to,
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = hushtrace(&args);
    assert!(o.status.success(), "{to}: {}", stderr(&o));
}

/// Runs `hushtrace ARGS` with the variables `env` added; returns its exit code (-1 when killed
/// by a signal), stdout and stderr.
pub fn hushtrace_status_env(args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run hushtrace");
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// [`hushtrace_status_env`] without added variables.
pub fn hushtrace_status(args: &[&str]) -> (i32, String, String) {
    hushtrace_status_env(args, &[])
}

/// A path under the system temporary directory that nothing is at.
pub fn temp(tag: &str) -> PathBuf {
    hushtrace_testsupport::fresh_temp_path("hushtrace-cli", tag)
}

/// Polls `f` every 20 ms until it holds; fails the test naming `what` after 30 s.
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child in a process group of its own, killed with its group if the test fails.
pub struct Group(pub Option<Child>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: signals the process group this test created.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// `hushtrace record --kernel sched --mode overwrite -o DIR -- kernel_workload pingpong ...`
/// (a program that never ends by itself), in a process group of its own; returns `record`'s
/// pid and the group.
pub fn record_pingpong_overwrite(dir: &Path) -> (u32, Group) {
    let child = Command::new(BIN)
        .args(["record", "--kernel", "sched", "--mode", "overwrite", "-o"])
        .arg(dir)
        .arg("--")
        .arg(testbin("kernel_workload"))
        .args(["pingpong", "1000000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    (child.id(), Group(Some(child)))
}

/// The converters' shared synthetic workload. Two processes (pid 100 with threads 101 and 102,
/// pid 200 with thread 200); per thread and k: `work:job` [s, s+600] with `work:step`
/// [s+100, s+300] inside (fields n: u64, tag: str = `tag(k)`, load: f64, delta: i64), an
/// instant `app:mark` (ok: bool) at s+400, counters `net:errors` (u64) at s+450 and
/// `disk:errors` (f64) at s+500, where s = base + 1000k. Thread 102 also begins with the end of
/// a span whose begin is missing; with `losses` it reports 5 discarded events and 2 lost
/// packets.
pub fn write_span_workload(dir: &Path, n: u64, tag: fn(u64) -> String, losses: bool) {
    use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
    use hushtrace_ctf::FieldType;
    for (pid, tids) in [(100u32, vec![101u32, 102]), (200, vec![200])] {
        let mut t = SynthTrace::new(pid, &format!("proc{pid}"));
        t.packet_bytes = 400;
        let (job_b, job_e) = t.span("work:job", &[]);
        let (step_b, step_e) = t.span(
            "work:step",
            &[
                ("n", FieldType::U64),
                ("tag", FieldType::Str),
                ("load", FieldType::F64),
                ("delta", FieldType::I64),
            ],
        );
        let mark = t.instant("app:mark", &[("ok", FieldType::Bool)]);
        let net = t.counter("net:errors", FieldType::U64);
        let disk = t.counter("disk:errors", FieldType::F64);
        for (i, &tid) in tids.iter().enumerate() {
            let th = t.thread(tid, &format!("t{tid}"));
            let base = 1_000_000 + pid as u64 * 7 + i as u64 * 13;
            if tid == 102 {
                th.event(SynthEvent::new(job_e, base - 1));
                if losses {
                    th.discarded = 5;
                    th.lost_packets = 2;
                }
            }
            for k in 0..n {
                let s = base + 1000 * k;
                th.event(SynthEvent::new(job_b, s));
                th.event(
                    SynthEvent::new(step_b, s + 100)
                        .u64(k)
                        .str(&tag(k))
                        .f64(k as f64 * 0.25)
                        .i64(-(k as i64)),
                );
                th.event(SynthEvent::new(step_e, s + 300));
                th.event(SynthEvent::new(mark, s + 400).bool(k % 2 == 0));
                th.event(SynthEvent::new(net, s + 450).u64(k));
                th.event(SynthEvent::new(disk, s + 500).f64(k as f64 * 1.5));
                th.event(SynthEvent::new(job_e, s + 600));
            }
        }
        t.write_session(dir).unwrap();
    }
}
