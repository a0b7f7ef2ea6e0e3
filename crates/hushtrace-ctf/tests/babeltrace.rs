//! The real `babeltrace2` reads what `synth` (hence the runtime's layout) writes.
//!
//! Fails when `babeltrace2` is missing, unless `HUSHTRACE_SKIP_EXTERNAL=1`.

mod common;

use std::process::Command;

fn babeltrace2() -> Option<Command> {
    match Command::new("babeltrace2").arg("--version").output() {
        Ok(o) if o.status.success() => Some(Command::new("babeltrace2")),
        _ if std::env::var("HUSHTRACE_SKIP_EXTERNAL").as_deref() == Ok("1") => None,
        r => panic!(
            "babeltrace2 is not runnable ({r:?}); install it or set HUSHTRACE_SKIP_EXTERNAL=1"
        ),
    }
}

#[test]
fn babeltrace2_reads_synthetic_traces() {
    let Some(mut cmd) = babeltrace2() else { return };
    let dir = tempfile::tempdir().unwrap();
    common::rich_trace(4000, 20)
        .write_session(dir.path())
        .unwrap();
    common::rich_trace(4100, 3)
        .write_session(dir.path())
        .unwrap();
    let out = cmd.arg(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "babeltrace2 failed: {stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // 2 threads x 4 events per step, in both processes.
    assert_eq!(lines.len(), 2 * 4 * 20 + 2 * 4 * 3, "{text}");
    let every = lines
        .iter()
        .find(|l| l.contains("types:every") && l.contains("vpid = 4000"))
        .unwrap();
    for needle in [
        "a_u64 = 18446744073709551615",
        "a_i32 = -2147483648",
        "a_f64 = 0.25",
        "a_str = \"x\\\"y\\\\z\"",
        "vtid = 4001",
        "procname = \"worker-0\"",
    ] {
        assert!(every.contains(needle), "{needle} not in {every}");
    }
    assert!(text.contains("label = \"step 0 é\""), "{text}");
}
