//! `hushtrace demo`: a built-in workload traced by the embedded in-process tracer.
//!
//! The workload shows what hushtrace is for:
//!
//! * three worker threads doing nested spans with fields (`demo:job` ⊃ `demo:parse`,
//!   `demo:compute` ⊃ `demo:kernel`), an instant `demo:done` and a counter `demo:queue_depth`;
//! * one real-time thread in no-syscall mode ([`hushtrace::NoSyscallGuard`]) running a short
//!   control loop of `rt:cycle` spans and an `rt:error` counter;
//! * one forked worker process tracing `child:batch` ⊃ `child:item` into its own
//!   `<dir>/<childpid>/`.
//!
//! Then it converts the trace to `<dir>/trace.json` and draws `<dir>/flame.svg`.

use crate::{chrome, flame, report};
use anyhow::{bail, Context as _};
use hushtrace_ctf::reader::Session as TraceSession;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Jobs per worker thread.
const JOBS: u64 = 300;
/// Worker threads.
const WORKERS: u64 = 3;
/// Control loop iterations of the real-time thread.
const RT_CYCLES: u64 = 2_000;
/// Batches of the forked child.
const CHILD_BATCHES: u64 = 50;

/// What the demo produced.
#[derive(Debug)]
pub struct DemoOutput {
    /// The session directory (CTF traces, one per process).
    pub dir: PathBuf,
    /// Chrome JSON.
    pub chrome_json: PathBuf,
    /// Flame graph.
    pub flame_svg: PathBuf,
    /// Statistics of the parent process's session.
    pub stats: hushtrace::Stats,
    /// The report of the whole session (both processes).
    pub report: report::Report,
}

/// Burns about `n` iterations of arithmetic without system calls.
fn spin(n: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        x = black_box(x.rotate_left(5) ^ i).wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    x
}

fn worker(w: u64) {
    hushtrace::set_thread_name(&format!("worker-{w}"));
    hushtrace::init_thread();
    for job in 0..JOBS {
        let _job = hushtrace::span!("demo", "job", id = job, worker = w);
        {
            let _p = hushtrace::span!("demo", "parse", bytes = 512 + (job % 7) * 128);
            spin(2_000 + (job % 5) * 500);
        }
        {
            let _c = hushtrace::span!("demo", "compute", iterations = 4u32);
            for k in 0..4u32 {
                let _k = hushtrace::span!("demo", "kernel", k = k);
                spin(1_500 + w * 300);
            }
        }
        hushtrace::event!("demo", "done", job = job, ok = job % 17 != 0, label = "ok");
        hushtrace::counter!("demo", "queue_depth", (JOBS - job) as i64);
    }
}

/// The real-time thread: enters no-syscall mode, then only computes and traces.
fn control_loop() {
    hushtrace::set_thread_name("rt-control");
    let _rt = hushtrace::NoSyscallGuard::new();
    let (mut position, target) = (0.0f64, 1.0f64);
    for cycle in 0..RT_CYCLES {
        let _g = hushtrace::span!("rt", "cycle", cycle = cycle);
        let error = target - position;
        position += 0.01 * error;
        spin(800);
        if cycle % 10 == 0 {
            hushtrace::counter!("rt", "error", error);
        }
    }
}

/// The forked child's work; runs in the child only.
fn child_work() {
    hushtrace::set_thread_name("forked-worker");
    for batch in 0..CHILD_BATCHES {
        let _b = hushtrace::span!("child", "batch", batch = batch);
        for item in 0..8u32 {
            let _i = hushtrace::span!("child", "item", item = item);
            spin(1_000);
        }
    }
}

/// Forks a worker process; returns its pid (in the parent).
fn fork_worker() -> anyhow::Result<libc::pid_t> {
    // SAFETY: fork() has no memory-safety preconditions; hushtrace's atfork handlers make the
    // tracer usable in the child, which runs the workload and exits without returning here.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork failed: {}", std::io::Error::last_os_error());
    }
    if pid == 0 {
        child_work();
        // Exit runs the tracer's exit flush, which writes the child's trace and stats.
        std::process::exit(0);
    }
    Ok(pid)
}

fn wait_child(pid: libc::pid_t) -> anyhow::Result<()> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer for the duration of the call.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            bail!("waitpid({pid}): {err}");
        }
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        bail!("the forked worker {pid} failed (status {status:#x})");
    }
    Ok(())
}

/// Removes what an earlier demo wrote into `dir`; refuses a directory with anything else.
fn clear_previous_demo(dir: &Path) -> anyhow::Result<()> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut ours = Vec::new();
    for e in rd {
        let e = e.with_context(|| format!("reading {}", dir.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e.file_type()?;
        let trace_name =
            |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.');
        let is_ours = (ft.is_dir() && trace_name(&name) && e.path().join("metadata").exists())
            || (ft.is_file()
                && (name == "trace.json"
                    || name == "flame.svg"
                    || hushtrace_ctf::stats::trace_name(&name).is_some_and(trace_name)));
        if !is_ours {
            bail!(
                "{} is not empty and not an earlier demo output ({name:?}); choose another directory",
                dir.display()
            );
        }
        ours.push((e.path(), ft.is_dir()));
    }
    for (p, is_dir) in ours {
        if is_dir {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        }
        .with_context(|| format!("removing {}", p.display()))?;
    }
    Ok(())
}

/// Runs the workload into `dir`, then writes `trace.json` and `flame.svg` there and computes
/// the report.
pub fn run(dir: &Path) -> anyhow::Result<DemoOutput> {
    clear_previous_demo(dir)?;
    let session = hushtrace::Session::builder()
        .output_dir(dir)
        .mode(hushtrace::Mode::Discard)
        .subbuf_size(64 * 1024)
        .num_subbufs(16)
        .read_timer(Duration::from_millis(5))
        .start()
        .with_context(|| format!("starting a trace session in {}", dir.display()))?;
    hushtrace::set_thread_name("demo-main");
    let child = {
        let _s = hushtrace::span!("demo", "fork");
        fork_worker()?
    };
    let threads: Vec<_> = (0..WORKERS)
        .map(|w| {
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || worker(w))
        })
        .chain(std::iter::once(
            std::thread::Builder::new()
                .name("rt-control".into())
                .spawn(control_loop),
        ))
        .collect::<Result<_, _>>()
        .context("spawning workload threads")?;
    for t in threads {
        if t.join().is_err() {
            bail!("a workload thread panicked");
        }
    }
    wait_child(child)?;
    let stats = session.stop().context("stopping the trace session")?;

    let trace = TraceSession::open(dir)?;
    let chrome_json = dir.join("trace.json");
    let file = crate::create_private(&chrome_json)
        .with_context(|| format!("creating {}", chrome_json.display()))?;
    chrome::convert(&trace, file, &mut |_, _| {})?;
    let flame_svg = dir.join("flame.svg");
    let file = crate::create_private(&flame_svg)
        .with_context(|| format!("creating {}", flame_svg.display()))?;
    flame::write_svg(&trace, false, std::io::BufWriter::new(file))?;
    let report = report::compute(&trace)?;
    Ok(DemoOutput {
        dir: dir.to_path_buf(),
        chrome_json,
        flame_svg,
        stats,
        report,
    })
}
