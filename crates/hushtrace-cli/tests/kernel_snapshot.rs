//! `record --kernel --mode overwrite`: the kernel's buffers are rings too, and every snapshot
//! of the program (`hushtrace ctl PID snapshot`) gets the kernel's newest events beside it,
//! on the same clock, so `report --slowest` on the snapshot says why spans were late.
//!
//! Needs root and tracefs: fails (never skips) without them. Shares the kernel tests' lock
//! file (ftrace instances are global).

mod common;

use common::{hushtrace, wait_until};
use hushtrace_cli::kernel_report;
use hushtrace_ctf::layout::PacketHeader;
use hushtrace_ctf::reader::Session;
use hushtrace_kernel::owner::Owner;
use hushtrace_kernel::recovery::{self, Part};
use std::path::{Path, PathBuf};

/// The children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|k| k.parse().ok())
        .collect()
}

/// `hushtrace ctl PID snapshot`: the snapshot directory (`<session>/snapshots/<n>`).
fn snapshot(pid: u32) -> PathBuf {
    let o = hushtrace(&["ctl", &pid.to_string(), "snapshot"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    Path::new(v["path"].as_str().unwrap())
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn snapshots_in_overwrite_mode_include_the_kernel_and_explain_late_spans() {
    let root = hushtrace_kernel::tracefs::find_or_mount()
        .unwrap_or_else(|e| panic!("this test needs tracefs (run it as root): {e}"));
    let _l = hushtrace_testsupport::cross_process_lock("hushtrace-kernel-tests");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let (record, mut group) = common::record_pingpong_overwrite(&dir);

    // The program, once it answers `ctl`.
    let guard = hushtrace_kernel::capture::GUARD_NAME;
    let mut program = 0;
    wait_until("the program answers ctl", || {
        let p = children(record).into_iter().find(|k| {
            !std::fs::read(format!("/proc/{k}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == guard.as_bytes()))
        });
        program = p.unwrap_or(0);
        program != 0
            && hushtrace(&["ctl", &program.to_string(), "status"])
                .status
                .success()
    });
    // The kernel's buffer is a ring (ftrace's overwrite mode).
    let me = Owner::current().unwrap();
    let inst = std::fs::read_dir(root.join("instances"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            Owner::parse(&n).is_some_and(|o| o.pid == record && o.ns == me.ns)
        })
        .expect("record's instance");
    let ow = std::fs::read_to_string(inst.join("options/overwrite")).unwrap();
    assert_eq!(ow.trim(), "1");

    for round in 0..2 {
        let snap = snapshot(program);
        wait_until("the snapshot's kernel part", || {
            matches!(recovery::part(&snap), Part::Readable(_))
        });
        let session = Session::open(&snap).unwrap();
        let k = kernel_report::compute(&session, Some("pp:round"), 5).unwrap();
        let (kt, _) = k.kernel.as_ref().expect("a kernel part");
        // On the program's clock: babeltrace2 and the report line them up exactly.
        assert_eq!(kt.clock.uuid, session.traces[0].desc.clock_uuid);
        // Why late: the rounds' off-CPU time, with the other thread of the workload as who
        // ran instead or who woke them.
        let row = k
            .rows
            .iter()
            .find(|r| r.name == "pp:round")
            .unwrap_or_else(|| panic!("snapshot {round}: {}", k.to_text()));
        assert!(
            row.count > 0 && row.runnable_ns + row.blocked_ns > 0,
            "{}",
            k.to_text()
        );
        assert!(
            row.ran_instead
                .iter()
                .chain(&row.woken_by)
                .any(|(who, _)| who.starts_with("kernel_workload/")),
            "{}",
            k.to_text()
        );
        // Every slowest round is explained, unless it began before every CPU's ring does
        // (the rings wrapped at different times): then it is said to be older, never taken
        // for time on the CPU.
        // (Where that is: the latest first event of the CPUs whose ring wrapped, seen in the
        // events of this trace.)
        let mut first = std::collections::HashMap::new();
        for e in common::kernel_events(kt).0 {
            first.entry(e.cpu).or_insert(e.ts);
        }
        let wrapped: Vec<u64> = std::fs::read_dir(&kt.dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("channel"))
            .filter_map(|e| {
                let h = PacketHeader::decode(&std::fs::read(e.path()).ok()?)?;
                // The kernel's packets carry the CPU where process packets have the pid.
                let (lost, cpu) = (h.events_discarded, h.vpid);
                (lost > 0).then(|| first.get(&cpu).copied()).flatten()
            })
            .collect();
        let begin = wrapped
            .iter()
            .max()
            .map_or(i64::MIN, |&ts| kt.epoch_ns(ts) as i64);
        let k = kernel_report::compute(&session, Some("pp:round"), 50).unwrap();
        let text = k.slowest_text();
        for sp in &k.slowest {
            assert_eq!(sp.why.is_some(), sp.start_ns >= begin, "{text}");
        }
        if k.slowest.iter().any(|sp| sp.why.is_none()) {
            assert!(text.contains("before the kernel trace"), "{text}");
        }
        let o = hushtrace(&["report", snap.to_str().unwrap(), "--slowest", "pp:round"]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && !text.contains("no kernel trace"),
            "{text}"
        );
    }

    // SIGTERM: the program ends, record writes the rings' newest events into DIR/kernel.
    // SAFETY: signals our own child.
    unsafe { libc::kill(record as i32, libc::SIGTERM) };
    let out = group.0.take().unwrap().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{stderr}");
    assert_eq!(
        stderr.matches("hushtrace: kernel: snapshot: ").count(),
        2,
        "{stderr}"
    );
    assert!(stderr.contains("flight recorder"), "{stderr}");
    hushtrace_kernel::KernelTrace::open(&dir.join("kernel")).unwrap();
    assert!(!inst.exists());
}
