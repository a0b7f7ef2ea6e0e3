//! The `status` answer of `hushtrace ctl`, built in one place for a running session
//! (`answers.rs`) and a stopped one (`ctl.rs`). Its field names and their order are a contract
//! (scripts and the CLI read them).

use crate::config::Config;
use crate::control;

/// What a `status` answer says about the session.
#[derive(Debug)]
pub(super) struct Status<'a> {
    pub pid: u32,
    /// The session's settings.
    pub cfg: &'a Config,
    /// Events written and discarded by the session so far.
    pub written: u64,
    pub discarded: u64,
    /// The late-span counters.
    pub late: super::late::LateCounts,
    /// What the kernel refused of the consumer's scheduling or CPUs.
    pub sched_error: Option<&'a str>,
    pub trace_dir: &'a str,
    /// A running session's threads; `None` for a stopped session (no threads, and no
    /// `threads_omitted` field).
    pub threads: Option<Vec<ThreadStatus>>,
}

/// One thread (stream) of a running session in a `status` answer.
#[derive(Debug)]
pub(super) struct ThreadStatus {
    /// The buffer instance (the stream's number).
    pub stream: u64,
    pub vtid: u32,
    pub name: String,
    pub written: u64,
    pub discarded: u64,
}

impl Status<'_> {
    /// The answer: `{"ok":true,"pid":..,"session":..,"state":..,...,"threads":[..]}`, threads
    /// past what fits under the control server's answer limit counted in `threads_omitted`.
    pub(super) fn to_json(&self) -> String {
        let running = self.threads.is_some();
        let cfg = self.cfg;
        let mut s = format!(
            "{{\"ok\":true,\"pid\":{},\"session\":{running},\"state\":\"{}\",\"mode\":\"{}\",\
             \"subbuf_size\":{},\"num_subbufs\":{},\"read_timer_ms\":{},\"direct_io\":{},\
             \"written\":{},\"discarded\":{},{},",
            self.pid,
            if running { "running" } else { "stopped" },
            cfg.mode,
            cfg.subbuf_size,
            cfg.num_subbufs,
            cfg.read_timer.as_millis(),
            cfg.direct_io,
            self.written,
            self.discarded,
            self.late.json_fields(),
        );
        sched_json(&mut s, cfg, self.sched_error);
        s.push_str(",\"trace_dir\":");
        control::json_str(&mut s, self.trace_dir);
        s.push_str(",\"threads\":[");
        let Some(threads) = &self.threads else {
            s.push_str("]}");
            return s;
        };
        let mut omitted = 0u64;
        for (i, t) in threads.iter().enumerate() {
            // The answer stays under the control server's size limit.
            if s.len() > control::MAX_ANSWER - 4096 {
                omitted += 1;
                continue;
            }
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!(
                "{{\"stream\":{},\"vtid\":{},\"name\":",
                t.stream, t.vtid
            ));
            control::json_str(&mut s, &t.name);
            s.push_str(&format!(
                ",\"written\":{},\"discarded\":{}}}",
                t.written, t.discarded
            ));
        }
        s.push_str(&format!("],\"threads_omitted\":{omitted}}}"));
        s
    }
}

/// The consumer's scheduling in a status answer: `"consumer_sched":"fifo:10",
/// "consumer_cpus":[0,1]` (`null`: inherited), `"consumer_sched_error":null` or what the
/// kernel refused.
fn sched_json(s: &mut String, cfg: &Config, error: Option<&str>) {
    s.push_str(&format!(
        "\"consumer_sched\":\"{}\",\"consumer_cpus\":",
        cfg.consumer_sched
    ));
    match &cfg.consumer_cpus {
        Some(cpus) => s.push_str(&format!("[{}]", crate::config::cpu_list_text(cpus))),
        None => s.push_str("null"),
    }
    s.push_str(",\"consumer_sched_error\":");
    match error {
        Some(e) => control::json_str(s, e),
        None => s.push_str("null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConsumerSched;
    use std::time::Duration;

    fn cfg() -> Config {
        Config {
            subbuf_size: 4096,
            num_subbufs: 8,
            read_timer: Duration::from_millis(200),
            consumer_sched: ConsumerSched::Fifo(10),
            consumer_cpus: Some(vec![0, 1]),
            ..Config::default()
        }
    }

    fn thread(stream: u64, name: &str) -> ThreadStatus {
        ThreadStatus {
            stream,
            vtid: 100 + stream as u32,
            name: name.into(),
            written: 7 * stream,
            discarded: stream,
        }
    }

    /// The running answer, byte for byte as `hushtrace ctl PID status` prints it.
    #[test]
    fn running_status_is_the_contract() {
        let cfg = cfg();
        let status = Status {
            pid: 42,
            cfg: &cfg,
            written: 12,
            discarded: 3,
            late: super::super::late::LateCounts {
                spans: 5,
                captured: 2,
                not_captured: 3,
            },
            sched_error: Some("no \"CAP_SYS_NICE\""),
            trace_dir: "/tmp/t/42",
            threads: Some(vec![thread(1, "main"), thread(2, "worker")]),
        };
        assert_eq!(
            status.to_json(),
            "{\"ok\":true,\"pid\":42,\"session\":true,\"state\":\"running\",\"mode\":\"discard\",\
             \"subbuf_size\":4096,\"num_subbufs\":8,\"read_timer_ms\":200,\"direct_io\":false,\
             \"written\":12,\"discarded\":3,\"late_spans\":5,\"late_captured\":2,\
             \"late_not_captured\":3,\"consumer_sched\":\"fifo:10\",\
             \"consumer_cpus\":[0,1],\"consumer_sched_error\":\"no \\\"CAP_SYS_NICE\\\"\",\
             \"trace_dir\":\"/tmp/t/42\",\"threads\":[{\"stream\":1,\"vtid\":101,\
             \"name\":\"main\",\"written\":7,\"discarded\":1},{\"stream\":2,\"vtid\":102,\
             \"name\":\"worker\",\"written\":14,\"discarded\":2}],\"threads_omitted\":0}"
        );
    }

    /// The stopped answer: no threads and no `threads_omitted`.
    #[test]
    fn stopped_status_is_the_contract() {
        let cfg = Config {
            consumer_sched: ConsumerSched::Inherit,
            consumer_cpus: None,
            ..cfg()
        };
        let status = Status {
            pid: 42,
            cfg: &cfg,
            written: 12,
            discarded: 3,
            late: super::super::late::LateCounts {
                spans: 5,
                captured: 2,
                not_captured: 3,
            },
            sched_error: None,
            trace_dir: "/tmp/t/42",
            threads: None,
        };
        assert_eq!(
            status.to_json(),
            "{\"ok\":true,\"pid\":42,\"session\":false,\"state\":\"stopped\",\"mode\":\"discard\",\
             \"subbuf_size\":4096,\"num_subbufs\":8,\"read_timer_ms\":200,\"direct_io\":false,\
             \"written\":12,\"discarded\":3,\"late_spans\":5,\"late_captured\":2,\
             \"late_not_captured\":3,\"consumer_sched\":\"inherit\",\
             \"consumer_cpus\":null,\"consumer_sched_error\":null,\
             \"trace_dir\":\"/tmp/t/42\",\"threads\":[]}"
        );
    }

    /// Threads past the answer limit are counted, not listed, and the answer stays under it.
    #[test]
    fn threads_past_the_limit_are_counted() {
        let cfg = cfg();
        let long = "x".repeat(15);
        let n = control::MAX_ANSWER / 60 + 1000;
        let status = Status {
            pid: 1,
            cfg: &cfg,
            written: 0,
            discarded: 0,
            late: Default::default(),
            sched_error: None,
            trace_dir: "/",
            threads: Some((0..n as u64).map(|i| thread(i, &long)).collect()),
        };
        let json = status.to_json();
        assert!(json.len() <= control::MAX_ANSWER, "{}", json.len());
        let listed = json.matches("\"stream\":").count();
        let tail = format!("],\"threads_omitted\":{}}}", n - listed);
        assert!(listed > 0 && listed < n, "{listed} of {n}");
        assert!(json.ends_with(&tail), "{}", &json[json.len() - 60..]);
    }
}
