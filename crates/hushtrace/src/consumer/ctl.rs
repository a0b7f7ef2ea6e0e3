//! The control answers that need no consumer state (`list`), and the control socket of a
//! process whose session `hushtrace ctl PID stop` stopped: a small thread keeps serving it, so
//! `status` says the process is stopped (not "not traced") and `start` starts the session
//! again with the settings it had.

use super::status::Status;
use crate::config::Config;
use crate::control::{self, Request, Server};
use crate::platform;
use crate::state::{self, SessionControl};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How often the stopped process's socket is served.
const PARKED_POLL: Duration = Duration::from_millis(20);

/// The pid whose session the last `ctl PID stop` stopped (0: none). The consumer that ends
/// after it keeps the control socket served ([`park`]).
static STOPPED_BY_CTL: AtomicU32 = AtomicU32::new(0);

/// A socket file served for a stopped process: (pid, path, (device, inode)).
type ParkedSocket = (u32, std::path::PathBuf, (u64, u64));

/// The socket file served by the stopped process's thread. Removed at process exit if it is
/// still that one.
static PARKED: Mutex<Option<ParkedSocket>> = Mutex::new(None);

/// Notes that `ctl stop` is stopping the session of process `pid`.
pub(super) fn stop_requested(pid: u32) {
    STOPPED_BY_CTL.store(pid, Ordering::Relaxed);
}

/// What the stopped process says about its last session.
#[derive(Debug)]
pub(super) struct Stopped {
    pub cfg: Config,
    pub trace_dir: String,
    pub written: u64,
    pub discarded: u64,
    /// The late-span counters of the session.
    pub late: super::late::LateCounts,
    /// The session layer's start (`ctl PID start`).
    pub control: &'static dyn SessionControl,
}

/// After the consumer's last pass: when `ctl stop` stopped this session, keeps `server` served
/// by a thread of its own until a new session binds the socket or the process exits; else
/// drops it (the socket goes away with the session).
pub(super) fn park(server: Server, pid: u32, stopped: Stopped) {
    if STOPPED_BY_CTL.swap(0, Ordering::Relaxed) != pid || !server.still_bound() {
        return;
    }
    let (path, id) = server.file();
    if let Ok(mut p) = PARKED.lock() {
        let first = p.is_none();
        *p = Some((pid, path, id));
        if first {
            platform::atexit(remove_parked_socket);
        }
    }
    let _ = platform::spawn_raw(Box::new(move || {
        platform::block_signals_forever();
        platform::set_thread_name("hushtrace-ctl");
        serve_stopped(server, pid, stopped);
    }));
}

/// Serves the socket of a stopped process until another server took the socket's path (a new
/// session) and the clients of this one are answered.
fn serve_stopped(mut server: Server, pid: u32, stopped: Stopped) {
    while server.still_bound() || server.busy() {
        server.serve(|req| match req {
            Ok(r) => answer_stopped(r, pid, &stopped),
            Err(e) => control::error_answer(&e),
        });
        std::thread::sleep(PARKED_POLL);
    }
}

fn answer_stopped(req: Request, pid: u32, st: &Stopped) -> String {
    match req {
        Request::Ping => format!("{{\"ok\":true,\"pid\":{pid},\"state\":\"stopped\"}}"),
        Request::Status => Status {
            pid,
            cfg: &st.cfg,
            written: st.written,
            discarded: st.discarded,
            late: st.late,
            sched_error: None,
            trace_dir: &st.trace_dir,
            threads: None,
        }
        .to_json(),
        Request::List => list_json(pid, "stopped"),
        Request::Enable(g) => enable(&g, true),
        Request::Disable(g) => enable(&g, false),
        Request::Snapshot(_) => control::error_answer(
            "the session is stopped (`hushtrace ctl PID start` starts it again)",
        ),
        Request::Stop => control::error_answer("the session is already stopped"),
        Request::Start => {
            let mut cfg = st.cfg.clone();
            // The callsites keep the state `enable`/`disable` gave them since the start.
            cfg.globs.clear();
            match st.control.start(cfg) {
                Ok(()) => {
                    let dir = state::current_session()
                        .map(|s| s.inner.lock().trace_dir.display().to_string())
                        .unwrap_or_default();
                    let mut s =
                        format!("{{\"ok\":true,\"pid\":{pid},\"state\":\"running\",\"trace_dir\":");
                    control::json_str(&mut s, &dir);
                    s.push('}');
                    s
                }
                Err(e) => control::error_answer(&format!("cannot start the session: {e}")),
            }
        }
    }
}

/// `enable GLOB` / `disable GLOB`.
pub(super) fn enable(glob: &str, on: bool) -> String {
    let n = hushtrace_core::set_enabled(glob, on);
    format!("{{\"ok\":true,\"matched\":{n}}}")
}

/// `list`: every tracepoint of the process with its kind, state and place in the source;
/// `state`: the session's (`running` or `stopped`).
pub(super) fn list_json(pid: u32, state: &str) -> String {
    let mut s = format!("{{\"ok\":true,\"pid\":{pid},\"state\":\"{state}\",\"tracepoints\":[");
    for (i, cs) in hushtrace_core::all_callsites().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"name\":");
        control::json_str(&mut s, &cs.full_name());
        s.push_str(&format!(
            ",\"kind\":\"{}\",\"enabled\":{},\"file\":",
            cs.kind.as_str(),
            cs.state.interest().is_enabled()
        ));
        control::json_str(&mut s, cs.file);
        s.push_str(&format!(",\"line\":{}}}", cs.line));
    }
    s.push_str("]}");
    s
}

/// At process exit: removes the stopped process's socket file if it still is the one served.
extern "C" fn remove_parked_socket() {
    let Ok(p) = PARKED.lock() else {
        return;
    };
    if let Some((pid, path, id)) = p.as_ref() {
        if *pid == platform::getpid() {
            control::remove_socket_if(path, *id);
        }
    }
}
