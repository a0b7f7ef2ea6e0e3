//! A signal handler that traces while its thread is registering with the tracer (first
//! tracepoint: context and buffer set up under the tracer's locks) must neither deadlock nor
//! lose events uncounted. Runs `test_signal_register` (`crates/hushtrace-testbins`) as a
//! subprocess with a time limit, since the failure mode is a hang.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

fn json_u64(line: &str, key: &str) -> u64 {
    let k = format!("\"{key}\":");
    let rest = &line[line
        .find(&k)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + k.len()..];
    rest.split([',', '}'])
        .next()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("bad {key} in {line}"))
}

#[test]
fn signal_during_thread_registration_neither_hangs_nor_loses_events() {
    let exe = common::testbin_path("test_signal_register");
    let dir = common::temp_dir("sigreg");
    let rounds = 200;
    let mut child = Command::new(&exe)
        .arg(&dir)
        .arg(rounds.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run test_signal_register");
    let Some(status) = hushtrace_testsupport::wait_or_kill(&mut child, Duration::from_secs(30))
    else {
        panic!(
            "test_signal_register did not finish in 30 s ({rounds} rounds): deadlock of a \
             tracepoint in a signal handler during thread registration"
        );
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "test_signal_register failed: {err}");
    let line = out.trim();
    let (emitted, handled) = (json_u64(line, "emitted"), json_u64(line, "handled"));
    let (w, d) = (json_u64(line, "written"), json_u64(line, "discarded"));
    assert!(handled > 0, "no signal handled: {line}");
    assert_eq!(w + d, emitted, "written + discarded = emitted: {line}");
    {
        let events = common::babeltrace(&dir, d > 0);
        assert_eq!(events.len() as u64, w, "babeltrace count == written");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
