//! Bad configuration and unwritable output give clear errors and the application keeps
//! running; trace directories and files are owner-only (README, "Output").
//!
//! Environment cases run `test_env` (`crates/hushtrace-testbins`) as a subprocess (the
//! environment is process-global); the in-process cases are serialized by `LOCK` (one session
//! per process).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn run_env(vars: &[(&str, &str)], events: u64) -> Vec<String> {
    common::run_test_env(vars, events)
}

/// `HUSHTRACE_OUTPUT=<fresh dir>` plus `var=value`: the start fails with a message naming
/// both, tracepoints after it do nothing (no trace appears), the process carries on, and a
/// session started afterwards with the builder works.
fn bad_value(var: &str, value: &str) {
    let dir = common::temp_dir("cfg-bad");
    let retry = common::temp_dir("cfg-retry");
    let lines = run_env(
        &[
            ("HUSHTRACE_OUTPUT", dir.to_str().unwrap()),
            ("TEST_ENV_RETRY_DIR", retry.to_str().unwrap()),
            (var, value),
        ],
        100,
    );
    let first = &lines[0];
    assert!(
        first.starts_with("start: err: "),
        "{var}={value:?} must be rejected: {lines:?}"
    );
    assert!(first.contains(var), "the error names {var}: {first}");
    assert!(
        first.contains(&format!("\"{value}\"")) || first.contains(&format!(" {value} ")),
        "the error names the value {value:?} as given: {first}"
    );
    assert_eq!(lines.last().map(String::as_str), Some("alive"), "{lines:?}");
    assert!(
        !dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none(),
        "no trace written after a failed start: {}",
        dir.display()
    );
    // The retry uses the builder but still sees the process environment: only the no-syscall
    // policy variable applies to it.
    if var == "HUSHTRACE_NO_SYSCALL_POLICY" {
        assert!(
            lines[1].starts_with("retry: err: ") && lines[1].contains(var),
            "{lines:?}"
        );
    } else {
        assert_eq!(
            lines[1], "retry: ok",
            "a failed start leaves the tracer usable"
        );
        assert_eq!(lines[2], r#"{"written":100,"discarded":0}"#, "{lines:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&retry);
}

#[test]
fn bad_mode_is_an_error_naming_it() {
    bad_value("HUSHTRACE_MODE", "bogus");
}

#[test]
fn bad_subbuf_size_is_an_error_naming_it() {
    bad_value("HUSHTRACE_SUBBUF_SIZE", "12x");
}

#[test]
fn too_few_subbufs_is_an_error_naming_it() {
    bad_value("HUSHTRACE_NUM_SUBBUFS", "1");
}

#[test]
fn negative_subbufs_is_an_error_naming_it() {
    bad_value("HUSHTRACE_NUM_SUBBUFS", "-3");
}

#[test]
fn bad_no_syscall_policy_is_an_error_naming_it() {
    bad_value("HUSHTRACE_NO_SYSCALL_POLICY", "sometimes");
}

#[test]
fn zero_read_timer_is_an_error_naming_it() {
    bad_value("HUSHTRACE_READ_TIMER_MS", "0");
}

/// A value that parses but is out of range is named as the user wrote it, not as the number
/// it was parsed to.
#[test]
fn out_of_range_size_is_named_as_written() {
    bad_value("HUSHTRACE_SUBBUF_SIZE", "1k");
}

/// A regular file where a directory is needed.
fn file_parent() -> (PathBuf, PathBuf) {
    let base = common::temp_dir("cfg-file");
    std::fs::create_dir_all(&base).unwrap();
    let file = base.join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    (base, file.join("trace"))
}

#[test]
fn unwritable_output_from_env_is_a_clear_error() {
    let (base, out) = file_parent();
    let lines = run_env(&[("HUSHTRACE_OUTPUT", out.to_str().unwrap())], 100);
    assert!(
        lines[0].starts_with("start: err: ") && lines[0].contains(out.to_str().unwrap()),
        "the error names the path {}: {lines:?}",
        out.display()
    );
    assert_eq!(lines.last().map(String::as_str), Some("alive"));
    let _ = std::fs::remove_dir_all(&base);
}

/// Unwritable outputs (tests may run as root, so permission bits alone would not stop them):
/// a path under a regular file, under `/proc`, and a symbolic link. Each start fails with an
/// `Error::Io` naming the path, tracepoints stay harmless, and a good session works afterwards.
#[test]
fn unwritable_output_dir_is_a_clear_error_and_tracing_continues() {
    let _l = lock();
    let (base, under_file) = file_parent();
    let link_target = base.join("real-dir");
    std::fs::create_dir_all(&link_target).unwrap();
    let link = base.join("link");
    std::os::unix::fs::symlink(&link_target, &link).unwrap();
    let cases: Vec<(PathBuf, &str)> = vec![
        (under_file.clone(), "a path under a regular file"),
        (
            PathBuf::from("/proc/hushtrace-no-such-dir"),
            "a path in /proc",
        ),
        (
            under_file.join("deeper/still"),
            "a nested path under a file",
        ),
        (link.clone(), "a symbolic link (not followed)"),
    ];
    for (path, what) in &cases {
        match hushtrace::Session::builder().output_dir(path).start() {
            Ok(s) => {
                let _ = s.stop();
                panic!("{what} ({}) accepted as output", path.display());
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    matches!(e, hushtrace::Error::Io { .. }),
                    "{what}: an I/O error: {e:?}"
                );
                assert!(
                    msg.contains(path.to_str().unwrap()),
                    "{what}: the message names {}: {msg}",
                    path.display()
                );
            }
        }
        // Tracepoints after the failed start are no-ops; the program carries on.
        for i in 0..100u64 {
            hushtrace::event!("cfg", "after_failed_start", i = i);
        }
    }
    assert!(
        std::fs::read_dir(&link_target).unwrap().next().is_none(),
        "nothing written through the symbolic link"
    );
    let good = common::temp_dir("cfg-good");
    let session = hushtrace::Session::builder()
        .output_dir(&good)
        .start()
        .expect("a good session after failed ones");
    for i in 0..10u64 {
        hushtrace::event!("cfg", "good", i = i);
    }
    let stats = session.stop().expect("stop");
    assert_eq!((stats.events_written, stats.events_discarded), (10, 0));
    {
        let events = common::babeltrace(&good, false);
        assert_eq!(events.len(), 10);
        assert!(events.iter().all(|e| e.name == "cfg:good"));
    }
    let _ = std::fs::remove_dir_all(&good);
    let _ = std::fs::remove_dir_all(&base);
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every directory the session creates (including missing parents) is 0700 and every file
/// 0600, whatever the umask allows.
#[test]
fn trace_directories_0700_and_files_0600() {
    let _l = lock();
    let root = common::temp_dir("cfg-modes");
    let out = root.join("a").join("b");
    // SAFETY: umask only changes this process's file-creation mask; 0 lets any bits through,
    // so the modes below are the ones the library asks for.
    let old = unsafe { libc::umask(0) };
    let started = hushtrace::Session::builder().output_dir(&out).start();
    // SAFETY: as above, restores the previous mask.
    unsafe { libc::umask(old) };
    let session = started.expect("start");
    // This thread first (its buffer stays attached), then a worker: two streams.
    for i in 0..10u64 {
        hushtrace::event!("cfg", "mode", i = i);
    }
    let worker = std::thread::spawn(|| {
        for i in 0..10u64 {
            hushtrace::event!("cfg", "mode", i = i);
        }
    });
    worker.join().unwrap();
    let stats = session.stop().expect("stop");
    let mut dirs = vec![root.join("a"), out.clone(), stats.trace_dir.clone()];
    let mut files = Vec::new();
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p.clone());
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    assert!(
        files.iter().any(|f| f.ends_with("metadata")),
        "metadata among {files:?}"
    );
    assert!(
        files
            .iter()
            .filter(|f| f
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("stream_"))
            .count()
            >= 2,
        "a stream file per thread among {files:?}"
    );
    for d in &dirs {
        assert_eq!(mode_of(d), 0o700, "directory {}", d.display());
    }
    for f in &files {
        assert_eq!(mode_of(f), 0o600, "file {}", f.display());
    }
    let _ = std::fs::remove_dir_all(&root);
}
