//! `hushtrace ctl`: control a running traced program through its control socket (see
//! `hushtrace::control`): status, the tracepoints and their state, enable/disable globs,
//! snapshots, stop and start again; and `ctl list`.

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

/// A process that answers on its control socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traced {
    /// Process id.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub name: String,
    /// `running`, or `stopped` (by `ctl PID stop`; `ctl PID start` starts it again).
    pub state: String,
}

/// `ctl list`: the traced processes of this user that answer.
pub fn list() -> Result<Vec<Traced>, String> {
    let mut out = Vec::new();
    for pid in control::list().map_err(|e| e.to_string())? {
        let Ok(answer) = control::request(pid, "ping") else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&answer) else {
            continue;
        };
        if v["ok"] != true {
            continue;
        }
        out.push(Traced {
            pid,
            name: comm(pid),
            state: v["state"].as_str().unwrap_or("running").to_string(),
        });
    }
    Ok(out)
}

/// The command name of process `pid`, or "" when it cannot be read.
fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// `ctl TARGET list`: the tracepoints of each process of `target` with their state, as
/// `lttng list -u` shows them:
///
/// ```text
/// PID: 1234 - Name: server (running)
///       app:request (type: span) [enabled]
///       app:debug (type: instant) [disabled]
/// ```
///
/// Returns whether every process answered.
pub fn tracepoints(target: &str) -> Result<bool, String> {
    let mut all_ok = true;
    for pid in targets(target)? {
        let answer = match control::request(pid, "list") {
            Ok(a) => a,
            Err(e) => {
                all_ok = false;
                eprintln!("hushtrace: {e}");
                continue;
            }
        };
        match format_tracepoints(pid, &comm(pid), &answer) {
            Ok(text) => print!("{text}"),
            Err(e) => {
                all_ok = false;
                eprintln!("hushtrace: process {pid}: {e}");
            }
        }
    }
    Ok(all_ok)
}

/// The text of `ctl PID list` from the process's `list` answer (an error answer's message as
/// the error).
///
/// ```
/// let answer = r#"{"ok":true,"pid":7,"state":"running","tracepoints":[
///     {"name":"app:req","kind":"span","enabled":true,"file":"src/main.rs","line":3}]}"#;
/// let text = hushtrace_cli::ctl::format_tracepoints(7, "server", answer).unwrap();
/// assert_eq!(
///     text,
///     "PID: 7 - Name: server (running)\n      app:req (type: span) [enabled]\n"
/// );
/// ```
pub fn format_tracepoints(pid: u32, name: &str, answer: &str) -> Result<String, String> {
    let v: serde_json::Value =
        serde_json::from_str(answer).map_err(|e| format!("unreadable answer ({e}): {answer}"))?;
    if v["ok"] != true {
        return Err(v["error"].as_str().unwrap_or(answer).to_string());
    }
    let state = v["state"].as_str().unwrap_or("running");
    let mut out = format!("PID: {pid} - Name: {name} ({state})\n");
    let tps = v["tracepoints"].as_array().cloned().unwrap_or_default();
    if tps.is_empty() {
        out.push_str("      (no tracepoint)\n");
    }
    for tp in tps {
        out.push_str(&format!(
            "      {} (type: {}) [{}]\n",
            tp["name"].as_str().unwrap_or("?"),
            tp["kind"].as_str().unwrap_or("?"),
            if tp["enabled"] == true {
                "enabled"
            } else {
                "disabled"
            }
        ));
    }
    Ok(out)
}
