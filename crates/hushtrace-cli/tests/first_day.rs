//! Issue 20.6: the `hushtrace` command as a new user meets it — `--help` and the README list
//! every subcommand, a missing path is said once, an interrupted `convert` leaves no
//! `.partial` file, snapshots and recovered traces are not called incomplete, `record` names
//! the processes, a `bool` counter prints as a bool and names sort naturally. Every check runs
//! the built binary.

mod common;

use common::{example, hushtrace, text, BIN};
use hushtrace_ctf::synth::{SynthEvent, SynthTrace};
use hushtrace_ctf::FieldType;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The subcommands `hushtrace --help` lists.
fn help_commands() -> Vec<String> {
    let o = hushtrace(&["--help"]);
    assert!(o.status.success());
    let help = text(&o.stdout);
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

#[test]
fn help_and_readme_list_every_subcommand() {
    let commands = help_commands();
    for c in [
        "record",
        "convert",
        "report",
        "flamegraph",
        "recover",
        "ctl",
        "demo",
    ] {
        assert!(
            commands.iter().any(|x| x == c),
            "--help lacks {c}: {commands:?}"
        );
    }
    let help = text(&hushtrace(&["--help"]).stdout);
    let about = help.lines().next().unwrap();
    for c in &commands {
        assert!(
            about.contains(c.as_str()),
            "the first line lacks {c}: {about}"
        );
    }
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = readme
        .split("## The `hushtrace` command")
        .nth(1)
        .expect("README section `The hushtrace command`")
        .split("\n## ")
        .next()
        .unwrap();
    for c in &commands {
        assert!(
            section.contains(&format!("hushtrace {c} ")),
            "README's command section lacks `hushtrace {c}`"
        );
    }
    assert!(
        section.contains("cargo install --path crates/hushtrace-cli"),
        "README does not say how to install the command"
    );
}

#[test]
fn a_missing_path_is_said_once_without_advising_recover() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-trace");
    let m = missing.to_str().unwrap();
    let out = dir.path().join("o.json");
    for args in [
        vec!["report", m],
        vec!["convert", m, "-o", out.to_str().unwrap()],
        vec![
            "convert",
            m,
            "--to",
            "perfetto",
            "-o",
            out.to_str().unwrap(),
        ],
        vec!["flamegraph", m, "-o", out.to_str().unwrap()],
    ] {
        let o = hushtrace(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(
            err.lines().count(),
            1,
            "{args:?}: said more than once: {err}"
        );
        assert!(
            err.contains(m) && err.contains("no such file or directory"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("recover"), "{args:?}: {err}");
        assert!(!out.exists());
    }
}

/// A trace large enough that converting it takes a while (to gzip, in a debug build).
fn big_trace(dir: &Path) {
    let mut t = SynthTrace::new(300, "big");
    let ev = t.instant("big:ev", &[("n", FieldType::U64), ("s", FieldType::Str)]);
    for tid in 300..304u32 {
        let th = t.thread(tid, "t");
        for k in 0..150_000u64 {
            th.event(
                SynthEvent::new(ev, 1_000 + k * 10)
                    .u64(k)
                    .str("a string field"),
            );
        }
    }
    t.write_session(dir).unwrap();
}

#[test]
fn an_interrupted_convert_removes_its_partial_file() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    big_trace(&trace);
    for (sig, name) in [(libc::SIGINT, "INT"), (libc::SIGTERM, "TERM")] {
        let out = dir.path().join(format!("out-{name}.json.gz"));
        let partial = dir.path().join(format!("out-{name}.json.gz.partial"));
        let mut child = Command::new(BIN)
            .args([
                "convert",
                trace.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ])
            .spawn()
            .unwrap();
        // Interrupt it while it writes (or, if it already finished, there is nothing to check).
        let deadline = Instant::now() + Duration::from_secs(60);
        while !partial.exists() && Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(
            partial.exists(),
            "convert never wrote {}",
            partial.display()
        );
        let killed = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        let status = child.wait().unwrap();
        if status.success() {
            eprintln!("convert finished before SIG{name} came: nothing to check");
            continue;
        }
        assert_eq!(status.signal(), Some(sig), "{status:?}");
        assert!(
            !partial.exists(),
            "SIG{name} left {} behind",
            partial.display()
        );
        assert!(!out.exists());
    }
}

/// A process traced by this test in overwrite mode: `ctl snapshot` of it, and a killed child's
/// recovered trace, read as complete (no INCOMPLETE, no warning).
#[test]
fn snapshots_and_recovered_traces_are_not_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let session_dir = dir.path().join("live");
    let session = hushtrace::Session::builder()
        .output_dir(&session_dir)
        .mode(hushtrace::Mode::Overwrite)
        .read_timer(Duration::from_millis(2))
        .start()
        .unwrap();
    // A thread that keeps tracing (an idle thread's open packet is not in a snapshot).
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tracer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                hushtrace::event!("snap", "ev", n = n);
                n += 1;
                if n.is_multiple_of(64) {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        })
    };
    let pid = std::process::id().to_string();
    // The snapshot holds the packets the tracing thread closed when asked, within 2 ms: on a
    // loaded machine a try can come out empty, which is not what this test is about.
    let (mut out, mut err) = (String::new(), String::new());
    for attempt in 0..20 {
        let snap = dir.path().join(format!("snap{attempt}"));
        let o = hushtrace(&["ctl", &pid, "snapshot", "-o", snap.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let o = hushtrace(&["report", snap.to_str().unwrap()]);
        (out, err) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "{err}");
        if out.contains("snap:ev") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    tracer.join().unwrap();
    assert!(out.contains("snap:ev"), "{out}");
    assert!(
        !out.contains("INCOMPLETE") && !err.contains("incomplete"),
        "{out}{err}"
    );
    assert!(
        out.contains(&format!("process {pid} (")) && out.contains("a snapshot"),
        "{out}"
    );
    session.stop().unwrap();

    let crashed = dir.path().join("crashed");
    // SAFETY: the child traces and kills itself; it never returns into the test harness.
    let child = unsafe { libc::fork() };
    assert!(child >= 0);
    if child == 0 {
        let _s = hushtrace::Session::builder()
            .output_dir(&crashed)
            .mode(hushtrace::Mode::Overwrite)
            .start()
            .unwrap();
        for seq in 0..1000u64 {
            hushtrace::event!("crash", "seq", seq = seq);
        }
        // SAFETY: dying without stopping the session, as a crash would.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
    let c = crashed.to_str().unwrap();
    // report recovers first (and says so on stderr), then reads a complete trace; so does a
    // second report of the recovered trace.
    for round in 0..2 {
        let o = hushtrace(&["report", c]);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "{err}");
        assert!(out.contains("crash:seq"), "{out}");
        assert!(
            !out.contains("INCOMPLETE") && !err.contains("incomplete"),
            "round {round}: {out}{err}"
        );
        assert!(
            out.contains("recovered: it ended without stopping"),
            "{out}"
        );
    }
}

#[test]
fn bool_counters_print_as_bools_and_names_sort_naturally() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = SynthTrace::new(7, "app");
    let flag = t.counter("app:flag", FieldType::Bool);
    let num = t.counter("app:num", FieldType::U64);
    let names = ["main.rs:10", "main.rs:7", "main.rs:100", "main.rs:9"];
    let ids: Vec<u16> = names.iter().map(|n| t.instant(n, &[])).collect();
    let th = t.thread(7, "main");
    for (k, v) in [true, false, true, false].into_iter().enumerate() {
        th.event(SynthEvent::new(flag, 10 + k as u64).bool(v));
        th.event(SynthEvent::new(num, 20 + k as u64).u64(k as u64));
    }
    for (k, &id) in ids.iter().enumerate() {
        th.event(SynthEvent::new(id, 100 + k as u64));
    }
    t.write_session(dir.path()).unwrap();
    let o = hushtrace(&["report", dir.path().to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let row = |name: &str| -> Vec<String> {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row {name}: {out}"));
        line.split_whitespace().map(String::from).collect()
    };
    assert_eq!(
        row("app:flag")[1..],
        ["4", "false", "true", "false"],
        "{out}"
    );
    assert_eq!(row("app:num")[1..], ["4", "0", "3", "3"], "{out}");
    let order: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("main.rs:"))
        .collect();
    assert_eq!(
        order,
        ["main.rs:7", "main.rs:9", "main.rs:10", "main.rs:100"],
        "{out}"
    );
}

/// Issue 20.7: the flight recorder section's commands with its example, `control_app`: it
/// runs until stopped with its session from the environment, `ctl` finds, describes and
/// snapshots it, SIGTERM ends it with its session stopped, and both the snapshot and the
/// session read as complete traces.
#[test]
fn flight_recorder_example_runs_until_stopped() {
    use std::os::unix::process::ExitStatusExt;
    let app = example("control_app");
    let dir = tempfile::tempdir().unwrap();
    let fr = dir.path().join("fr");
    let mut child = Command::new(&app)
        .env("HUSHTRACE_OUTPUT", &fr)
        .env("HUSHTRACE_MODE", "overwrite")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = hushtrace(&["ctl", "list"]);
        if text(&o.stdout)
            .lines()
            .any(|l| l.starts_with(&format!("{pid} ")))
        {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "control_app ended by itself"
        );
        assert!(
            Instant::now() < deadline,
            "control_app never showed in ctl list"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = hushtrace(&["ctl", &pid, "status"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("overwrite"), "{}", text(&o.stdout));
    // Still running a while later: it does not end by itself.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "control_app ended by itself"
    );
    // (A snapshot on a loaded machine can miss the packets still open: try again then.)
    let mut out = String::new();
    for attempt in 0..20 {
        let snap = dir.path().join(format!("snap{attempt}"));
        let o = hushtrace(&["ctl", &pid, "snapshot", "-o", snap.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let o = hushtrace(&["report", snap.to_str().unwrap()]);
        out = text(&o.stdout);
        assert!(o.status.success(), "{out}{}", text(&o.stderr));
        if out.contains("ctl:cycle") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(out.contains("ctl:cycle"), "{out}");
    assert!(!out.contains("INCOMPLETE"), "{out}");

    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{:?} {}",
        o.status.signal(),
        text(&o.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(summary["cycles"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["written"].as_u64().unwrap() > 0, "{summary}");
    let o = hushtrace(&["report", fr.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["processes"][0]["complete"], true, "{r}");
    assert!(r["spans"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == "ctl:cycle"));
}

/// What of a report does not depend on timing or pids: the headers and notes as they are, the
/// time range's shape, and per row its name and counts (rows sorted: spans are ordered by total
/// time, which varies).
fn report_shape(report: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rows = Vec::new();
    let mut section = "";
    let rfc3339 = |t: &str| {
        t.len() == 30 && t.ends_with('Z') && t.as_bytes()[10] == b'T' && t.as_bytes()[19] == b'.'
    };
    for line in report.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied() {
            None => continue,
            Some("Trace") => out.push(format!("Trace {}", words[2..].join(" "))),
            Some("Time") => {
                assert!(
                    words.len() == 7 && rfc3339(words[2]) && rfc3339(words[4]),
                    "time range: {line}"
                );
                out.push("Time range: T .. T (D)".into());
            }
            Some("PROCESS") | Some("SPAN") | Some("EVENT") | Some("COUNTER") => {
                rows.sort();
                out.append(&mut rows);
                section = words[0];
                out.push(words.join(" "));
            }
            Some(w) if w.starts_with('(') => out.push(line.to_string()),
            Some(_) => rows.push(match section {
                // label, then pid (and tid for threads), then counts
                "PROCESS" => {
                    let skip = if words[0] == "process" { 3 } else { 4 };
                    format!("{} {} | {}", words[0], words[1], words[skip..].join(" "))
                }
                // name and count; durations vary
                "SPAN" => format!("{} {}", words[0], words[1]),
                "COUNTER" => format!("{} {}", words[0], words[1]),
                _ => words.join(" "),
            }),
        }
    }
    rows.sort();
    out.append(&mut rows);
    out
}

/// Issue 20.8: the README's sample report is what `hushtrace demo` prints today, up to times,
/// durations and pids (the demo's counts are fixed).
#[test]
fn readme_sample_report_matches_the_demo() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let start = readme
        .find("```text\nTrace /tmp/hushtrace-demo")
        .expect("README's sample report");
    let sample = &readme[start + 8..];
    let sample = &sample[..sample.find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hushtrace-demo");
    let o = hushtrace(&["demo", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let printed = text(&o.stdout);
    let report = &printed[..printed.find("This process wrote").unwrap()];
    assert_eq!(
        report_shape(sample),
        report_shape(report),
        "README's sample report differs from today's output:\n{report}"
    );
}

/// Issue 20.8: the description of the test command (docs/CI.md since issue 30.8, which the
/// README links to) names every package `.ci/run` and its `ci/` scripts install
/// (`missing+=(...)`, `rustup ... add`).
#[test]
fn readme_says_what_the_test_command_installs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains("[docs/CI.md](docs/CI.md)"),
        "README links to docs/CI.md"
    );
    let ci = std::fs::read_to_string(root.join("docs/CI.md")).unwrap();
    let described = ci
        .split("What `.ci/run` installs")
        .nth(1)
        .expect("docs/CI.md describes what .ci/run installs")
        .split("\n\n")
        .next()
        .unwrap()
        .replace('\n', " ");
    let mut scripts = vec![root.join(".ci/run")];
    for e in std::fs::read_dir(root.join("ci")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "sh") {
            scripts.push(e.path());
        }
    }
    let mut packages = Vec::new();
    for s in &scripts {
        for line in std::fs::read_to_string(s).unwrap().lines() {
            if let Some(list) = line.split("missing+=(").nth(1) {
                let list = list.split(')').next().unwrap();
                packages.extend(list.split_whitespace().map(String::from));
            }
            if line.contains("rustup component add") || line.contains("rustup target add") {
                let words: Vec<&str> = line.split_whitespace().collect();
                let after = words.iter().position(|w| *w == "add").unwrap() + 1;
                packages.extend(
                    words[after..]
                        .iter()
                        .filter(|w| !w.starts_with('-') && !w.starts_with('"') && **w != "nightly")
                        .map(|w| w.to_string()),
                );
            }
        }
    }
    assert!(packages.iter().any(|p| p == "lttng-tools"), "{packages:?}");
    for p in &packages {
        assert!(
            described.contains(p.as_str()),
            "docs/CI.md does not say .ci/run installs {p}"
        );
    }
    assert!(described.contains("cargo-nextest"));
}

/// Issue 20.6: `record`'s summary names each process (`process 8456 (8456)` before).
#[test]
fn record_summary_names_the_process() {
    let app = example("control_app");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let o = Command::new(BIN)
        .args(["record", "-o", out.to_str().unwrap(), "--"])
        .arg(&app)
        .arg("0")
        .output()
        .unwrap();
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", text(&o.stderr));
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("process "))
        .unwrap_or_else(|| panic!("no process line: {stdout}"));
    let pid = line.split_whitespace().nth(1).unwrap();
    assert!(
        line.contains(&format!("process {pid} (control_app): ")) && line.contains("events written"),
        "{line}"
    );
}
