//! `hushtrace recover`: turn the rings of processes that ended without stopping (killed,
//! crashed) into ordinary CTF streams (see `hushtrace_ctf::ringfile`).

use hushtrace_ctf::ringfile::{recover_session, ProcessRecovery};
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

/// Before reading a trace (`report`, `convert`, `flamegraph`): recovers the rings of dead
/// processes first, and says so on stderr in one line per process.
pub fn before_reading(dir: &Path) {
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
