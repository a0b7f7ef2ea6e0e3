//! `record --kernel --mode overwrite` writes the kernel's newest events beside a late-span
//! capture (`DIR/late/<n>/kernel/`) as beside a snapshot, and `report --late` explains the
//! capture's span from them exactly as `report --slowest` does. The capture is made by hand
//! here, as the program's consumer will (`hushtrace ctl PID snapshot -o DIR/late/1` writes
//! `DIR/late/1/<pid>/`; the index line is written by the test).
//!
//! Needs root and tracefs: fails (never skips) without them. Shares the kernel tests' lock
//! file (ftrace instances are global).

mod common;

use common::{hushtrace, wait_until};
use hushtrace_cli::kernel_report;
use hushtrace_ctf::reader::Session;
use hushtrace_kernel::recovery::{self, Part};
use std::time::Duration;

#[test]
fn a_late_capture_gets_the_kernel_part_and_report_late_explains_it() {
    if let Err(e) = hushtrace_kernel::tracefs::find_or_mount() {
        panic!("this test needs tracefs (run it as root): {e}");
    }
    let _l = hushtrace_testsupport::cross_process_lock("hushtrace-kernel-tests");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let (record, mut group) = common::record_pingpong_overwrite(&dir);
    // The program: the process whose trace directory appears, once it answers `ctl`.
    let mut program = 0u32;
    wait_until("the program answers ctl", || {
        program = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .find_map(|e| e.file_name().to_str()?.parse().ok())
            .unwrap_or(0);
        program != 0
            && hushtrace(&["ctl", &program.to_string(), "status"])
                .status
                .success()
    });
    std::thread::sleep(Duration::from_millis(300));
    let capture = dir.join("late/1");
    let o = hushtrace(&[
        "ctl",
        &program.to_string(),
        "snapshot",
        "-o",
        capture.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    wait_until("the capture's kernel part", || {
        matches!(recovery::part(&capture), Part::Readable(_))
    });

    // A round of the capture that its kernel part covers, explained by report --slowest.
    let session = Session::open(&capture).unwrap();
    let k = kernel_report::compute(&session, Some("pp:round"), 200).unwrap();
    let sp = k
        .slowest
        .iter()
        .find(|s| s.why.as_ref().is_some_and(|x| x.off_cpu_ns() > 0))
        .unwrap_or_else(|| panic!("no explained round:\n{}", k.slowest_text()));
    let x = sp.why.as_ref().unwrap();
    let deadline = sp.duration_ns / 2;
    let line = serde_json::json!({"n": 1, "span": "pp:round", "pid": sp.pid, "tid": sp.tid,
        "start_ns": sp.start_ns, "duration_ns": sp.duration_ns, "deadline_ns": deadline,
        "dir": "late/1"});
    std::fs::write(dir.join("late/index.json"), format!("{line}\n")).unwrap();

    let o = hushtrace(&[
        "report",
        "--late",
        dir.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let text = common::text(&o.stdout);
    assert!(o.status.success(), "{text}{}", common::stderr(&o));
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    let c = &j["captures"][0];
    assert_eq!(c["late_by_ns"], sp.duration_ns - deadline);
    let kw = &c["kernel"];
    assert!(
        kw["kernel_dir"]
            .as_str()
            .unwrap()
            .ends_with("late/1/kernel"),
        "{text}"
    );
    assert_eq!(kw["runnable_ns"], x.runnable_ns, "{text}");
    assert_eq!(kw["blocked_ns"], x.blocked_ns, "{text}");
    assert_eq!(
        kw["running_ns"].as_i64().unwrap(),
        sp.duration_ns - x.off_cpu_ns()
    );
    // Who woke it or ran instead: the workload's other thread, by name and tid.
    let named = kw["woken_by"]
        .as_array()
        .unwrap()
        .iter()
        .chain(kw["ran_instead"].as_array().unwrap())
        .any(|w| w["name"] == "kernel_workload" && w["tid"].as_i64().is_some_and(|t| t > 0));
    assert!(named, "{text}");

    // SIGTERM: the program ends; record said it wrote the capture's kernel part.
    // SAFETY: signals our own child.
    unsafe { libc::kill(record as i32, libc::SIGTERM) };
    let out = group.0.take().unwrap().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hushtrace: kernel: late capture: ") && stderr.contains("late/1/kernel"),
        "{stderr}"
    );
}
