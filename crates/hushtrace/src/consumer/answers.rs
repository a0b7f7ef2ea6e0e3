//! Answers to control requests (`hushtrace ctl`) while the session runs; a stopped session's
//! socket is served by `ctl.rs`. The `status` answer is built by `status.rs`.

use super::status::{Status, ThreadStatus};
use super::{ctl, Consumer};
use crate::control::{self, Request};
use crate::platform;
use crate::ring::{BufState, Buffer};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Consumer {
    /// Answers pending control requests.
    pub(super) fn serve_control(&mut self) {
        let Some(mut server) = self.control.take() else {
            return;
        };
        server.serve(|req| match req {
            Ok(r) => self.answer(r),
            Err(e) => control::error_answer(&e),
        });
        self.control = Some(server);
    }

    /// Whether control clients are being served (the loop then waits less).
    pub(super) fn control_busy(&self) -> bool {
        self.control.as_ref().is_some_and(|c| c.busy())
    }

    /// After the last pass: a socket `ctl stop` stopped keeps being served (`ctl.rs`).
    pub(super) fn park_control(&mut self) {
        if let Some(server) = self.control.take() {
            let stopped = ctl::Stopped {
                cfg: self.shared.cfg.clone(),
                trace_dir: self.dir.path().display().to_string(),
                written: self.shared.written.load(Ordering::Relaxed),
                discarded: self.shared.total_lost(),
                late: self.late.counts,
                control: self.shared.control,
            };
            ctl::park(server, self.shared.pid.load(Ordering::Relaxed), stopped);
        }
    }

    fn answer(&mut self, req: Request) -> String {
        let pid = self.shared.pid.load(Ordering::Relaxed);
        match req {
            Request::Ping => format!("{{\"ok\":true,\"pid\":{pid},\"state\":\"running\"}}"),
            Request::Status => self.status_json(),
            Request::List => ctl::list_json(pid, "running"),
            Request::Start => control::error_answer("the session is running"),
            Request::Enable(g) => ctl::enable(&g, true),
            Request::Disable(g) => ctl::enable(&g, false),
            Request::Snapshot(dir) => match self.snapshot(dir) {
                Ok(path) => {
                    let mut s = String::from("{\"ok\":true,\"path\":");
                    control::json_str(&mut s, &path.display().to_string());
                    s.push('}');
                    s
                }
                Err(e) => control::error_answer(&e),
            },
            Request::Stop => {
                ctl::stop_requested(pid);
                let s = self.shared.clone();
                // On a thread of its own: the stop waits for this consumer to finish.
                match platform::spawn_raw(Box::new(move || s.control.stop(&s))) {
                    Ok(_detached) => format!("{{\"ok\":true,\"pid\":{pid},\"stopping\":true}}"),
                    Err(e) => control::error_answer(&format!("cannot start the stop: {e}")),
                }
            }
        }
    }

    fn status_json(&self) -> String {
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        let threads = bufs
            .iter()
            .filter(|b| {
                matches!(
                    b.state.load(Ordering::Acquire),
                    BufState::Attached | BufState::Exited | BufState::Detached
                )
            })
            .map(|b| {
                let id = b.ident();
                let name = &id.procname[..id.procname.iter().position(|&c| c == 0).unwrap_or(16)];
                ThreadStatus {
                    stream: b.instance,
                    vtid: id.vtid,
                    name: String::from_utf8_lossy(name).into_owned(),
                    written: self.tally.written(b.instance),
                    discarded: b.lost(),
                }
            })
            .collect();
        Status {
            pid: self.shared.pid.load(Ordering::Relaxed),
            cfg: &self.shared.cfg,
            written: self.shared.written.load(Ordering::Relaxed),
            discarded: self.shared.total_lost(),
            late: self.late.counts,
            sched_error: self.sched_error.as_deref(),
            trace_dir: &self.dir.path().display().to_string(),
            threads: Some(threads),
        }
        .to_json()
    }
}
