//! Answers to control requests (`hushtrace ctl`) while the session runs; a stopped session's
//! socket is served by `ctl.rs`.

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
        let cfg = &self.shared.cfg;
        let mut s = format!(
            "{{\"ok\":true,\"pid\":{},\"session\":true,\"state\":\"running\",\"mode\":\"{}\",\"subbuf_size\":{},\
             \"num_subbufs\":{},\"read_timer_ms\":{},\"direct_io\":{},\"written\":{},\"discarded\":{},",
            self.shared.pid.load(Ordering::Relaxed),
            cfg.mode,
            cfg.subbuf_size,
            cfg.num_subbufs,
            cfg.read_timer.as_millis(),
            cfg.direct_io,
            self.shared.written.load(Ordering::Relaxed),
            self.shared.total_lost(),
        );
        ctl::sched_json(&mut s, cfg, self.sched_error.as_deref());
        s.push_str(",\"trace_dir\":");
        control::json_str(&mut s, &self.dir.path().display().to_string());
        s.push_str(",\"threads\":[");
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        let mut first = true;
        let mut omitted = 0u64;
        for b in bufs.iter().filter(|b| {
            matches!(
                b.state.load(Ordering::Acquire),
                BufState::Attached | BufState::Exited | BufState::Detached
            )
        }) {
            // The answer stays under the control server's size limit.
            if s.len() > control::MAX_ANSWER - 4096 {
                omitted += 1;
                continue;
            }
            let id = b.ident();
            if !first {
                s.push(',');
            }
            first = false;
            let name = String::from_utf8_lossy(
                &id.procname[..id.procname.iter().position(|&c| c == 0).unwrap_or(16)],
            )
            .into_owned();
            s.push_str(&format!(
                "{{\"stream\":{},\"vtid\":{},\"name\":",
                b.instance, id.vtid
            ));
            control::json_str(&mut s, &name);
            s.push_str(&format!(
                ",\"written\":{},\"discarded\":{}}}",
                self.written_by_stream
                    .get(&b.instance)
                    .copied()
                    .unwrap_or(0),
                b.lost()
            ));
        }
        s.push_str(&format!("],\"threads_omitted\":{omitted}}}"));
        s
    }
}
