//! The guard process that removes the instances when the recorder dies, however it dies.

use super::*;

/// The guard process's `$0` (how the signal forwarder recognises it).
pub const GUARD_NAME: &str = "hushtrace-kernel-guard";

/// A process that removes the instances when this one dies, however it dies (SIGKILL
/// included): it waits for end-of-file on a pipe only this process holds the writing end of.
/// It runs in its own process group, so a terminal's Ctrl-C does not kill it too.
pub(super) fn spawn_guard(paths: &[PathBuf]) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // rmdir fails (EBUSY) while a file of the instance is open: the dying recorder may
    // close its pipe to the guard before its trace_pipe_raw files, so it is retried.
    let script = "read _ignored; for d in \"$@\"; do \
                  [ -d \"$d\" ] || continue; echo 0 > \"$d/tracing_on\"; \
                  echo 0 > \"$d/events/enable\"; echo > \"$d/set_event_pid\"; n=0; \
                  until rmdir \"$d\" || [ $n -ge 100 ]; do sleep 0.1; n=$((n+1)); done; \
                  done";
    Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .arg(GUARD_NAME)
        .args(paths)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
}
