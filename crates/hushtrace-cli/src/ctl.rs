//! `hushtrace ctl`: control a running traced program through its control socket (see
//! `hushtrace::control`): status, enable/disable globs, snapshots, stop; and `ctl list`.

use hushtrace::control;
use std::path::Path;

/// The processes a TARGET names: a pid, or a session / process trace directory (its processes
/// that serve a control socket).
pub fn targets(target: &str) -> Result<Vec<u32>, String> {
    if let Ok(pid) = target.parse::<u32>() {
        return Ok(vec![pid]);
    }
    let dir = Path::new(target);
    if !dir.is_dir() {
        return Err(format!("{target}: neither a pid nor a trace directory"));
    }
    let pid_of = |name: &str| name.split('.').next()?.parse::<u32>().ok();
    let mut pids: Vec<u32> = if dir.join("metadata").is_file() {
        dir.file_name()
            .and_then(|n| pid_of(&n.to_string_lossy()))
            .into_iter()
            .collect()
    } else {
        std::fs::read_dir(dir)
            .map_err(|e| format!("{target}: {e}"))?
            .flatten()
            .filter(|e| e.path().join("metadata").is_file())
            .filter_map(|e| pid_of(&e.file_name().to_string_lossy()))
            .collect()
    };
    pids.sort_unstable();
    pids.dedup();
    let live = control::list().unwrap_or_default();
    pids.retain(|p| live.contains(p));
    if pids.is_empty() {
        return Err(format!(
            "{target}: no running traced process of this session serves a control socket"
        ));
    }
    Ok(pids)
}

/// Sends `line` to every process of `target`; prints each answer (a JSON line). Returns
/// whether every process answered `"ok":true`.
pub fn run(target: &str, line: &str) -> Result<bool, String> {
    let mut all_ok = true;
    for pid in targets(target)? {
        match control::request(pid, line) {
            Ok(answer) => {
                all_ok &= answer.contains("\"ok\":true");
                println!("{answer}");
            }
            Err(e) => {
                all_ok = false;
                eprintln!("hushtrace: {e}");
            }
        }
    }
    Ok(all_ok)
}

/// `ctl list`: the traced processes of this user that answer, one line each:
/// `<pid> <command name>`.
pub fn list() -> Result<Vec<(u32, String)>, String> {
    let mut out = Vec::new();
    for pid in control::list().map_err(|e| e.to_string())? {
        if control::request(pid, "ping").is_ok_and(|a| a.contains("\"ok\":true")) {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            out.push((pid, comm));
        }
    }
    Ok(out)
}
