//! The tracer under faults and a hostile environment (issue 9): every test reproduces one
//! failure that used to happen and proves it no longer does. One file per subject under
//! `tests/faults/`: descriptors (`descriptors.rs`), directories and files (`directories.rs`),
//! resource limits and refused settings (`limits.rs`), exit and fork (`processes.rs`); this
//! file holds what they share.
//!
//! Each scenario runs in a forked child process (`in_child`), because it changes process-wide
//! state on purpose: it closes every descriptor, changes directory, lowers resource limits or
//! starts many sessions.

mod common;

use common::{babeltrace, temp_dir};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `f` in a forked child and fails the test with the child's message if it fails, panics,
/// dies or does not finish within `timeout`.
fn in_child(timeout: Duration, f: impl FnOnce() -> Result<(), String>) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (status, msg) = common::run_forked(timeout, || common::scenario_exit(f));
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "scenario failed (status {status}): {msg}"
    );
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

fn emit(n: u64) {
    for i in 0..n {
        hushtrace::event!("fault", "tick", seq = i, pad = 0u64);
    }
}

/// `babeltrace2` reads the whole session and shows `expected` `fault:tick` events.
fn readable_with(dir: &Path, expected: u64) -> Result<(), String> {
    let events = babeltrace(dir, true);
    let n = events.iter().filter(|e| e.name == "fault:tick").count() as u64;
    check!(
        n == expected,
        "babeltrace2 shows {n} fault:tick events, expected {expected}"
    );
    Ok(())
}

fn open_c(path: &Path, flags: libc::c_int) -> libc::c_int {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) }
}

const CTF_MAGIC: [u8; 4] = 0xC1FC_1FC1u32.to_le_bytes();

/// The trace directories (`<pid>`, `<pid>.<n>`) below session root `root`, sorted.
fn trace_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[path = "faults/descriptors.rs"]
mod descriptors;
#[path = "faults/directories.rs"]
mod directories;
#[path = "faults/limits.rs"]
mod limits;
#[path = "faults/processes.rs"]
mod processes;
