//! `hushtrace recover`: turn the rings of processes that ended without stopping (killed,
//! crashed) into ordinary CTF streams (see `hushtrace_ctf::ringfile`), and make the kernel
//! trace of a killed `record --kernel` readable (see `hushtrace_kernel::recovery`).

use hushtrace_ctf::ringfile::{recover_session, ProcessRecovery};
use hushtrace_kernel::recovery::{self, Recovery};
use std::path::Path;

/// Recovers every dead process's rings under `dir`; one line per process.
pub fn run(dir: &Path) -> Result<Vec<String>, String> {
    let done = recover_session(dir)?;
    Ok(done.iter().map(describe).collect())
}

/// One line about a process's recovery.
pub fn describe(p: &ProcessRecovery) -> String {
    let r = &p.recovered;
    let mut s = format!(
        "process {}: recovered {} events in {} packets from {} ring(s) ({} torn, {} discarded, \
         {} overwritten)",
        p.pid, r.events, r.packets, p.rings, r.torn, r.discarded, r.overwritten
    );
    if p.live > 0 {
        s.push_str(&format!(
            "; {} ring(s) left alone: process {} still runs",
            p.live, p.pid
        ));
    }
    s
}

/// Recovers the kernel trace of session `dir` (if it has one): the lines saying what was done,
/// and why it is still unreadable, if it is (not when a live recorder still writes it).
pub fn kernel(dir: &Path) -> (Vec<String>, Option<String>) {
    let r = recovery::recover(dir);
    let Some(kdir) = &r.dir else {
        return (Vec::new(), None);
    };
    // Being recorded is not a failure: it is said, and read when its recorder ends.
    let problem = r.problem.clone().filter(|_| !r.recording);
    (describe_kernel(kdir, &r), problem)
}

/// What the kernel recovery did, one line per change and one for the result.
fn describe_kernel(kdir: &Path, r: &Recovery) -> Vec<String> {
    let mut lines: Vec<String> = r
        .cut
        .iter()
        .map(|(p, n)| {
            format!(
                "kernel: cut the partial packet ({n} bytes) at the end of {}",
                p.display()
            )
        })
        .collect();
    if r.temp_removed {
        lines.push(format!(
            "kernel: removed the temporary file of an interrupted metadata update in {}",
            kdir.display()
        ));
    }
    match (&r.problem, r.readable) {
        (Some(why), _) => lines.push(format!(
            "kernel: the kernel trace {} is not readable: {why}",
            kdir.display()
        )),
        (None, Some(cpus)) if r.changed() => lines.push(format!(
            "kernel: {} reads again ({cpus} CPU(s))",
            kdir.display()
        )),
        _ => {}
    }
    lines
}

/// Before reading a trace (`report`, `convert`, `flamegraph`): recovers the rings of dead
/// processes first, and says so on stderr in one line per process.
pub fn before_reading(dir: &Path) {
    // The kernel trace of a killed recorder: made readable, said (a problem is said by the
    // kernel part of the reader itself, see `hushtrace_kernel::recovery::part`).
    let r = recovery::recover(dir);
    if let (Some(kdir), true) = (&r.dir, r.changed()) {
        for l in describe_kernel(kdir, &r) {
            eprintln!("hushtrace: {l} (as `hushtrace recover` would)");
        }
    }
    match recover_session(dir) {
        Ok(done) => {
            for p in done.iter().filter(|p| p.rings > 0) {
                eprintln!("hushtrace: {} (as `hushtrace recover` would)", describe(p));
            }
        }
        Err(e) => eprintln!(
            "hushtrace: warning: unrecovered rings could not be recovered ({e}); run `hushtrace \
             recover {}`",
            dir.display()
        ),
    }
}
