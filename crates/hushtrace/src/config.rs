//! Session settings: defaults, limits and their validation. Pure values: no process state, no
//! system call. The error type of the control API, the statistics, the no-syscall policy, the
//! consumer's scheduling and CPU lists, and the `HUSHTRACE_*` environment parser are in
//! `config/` (`error.rs`, `stats.rs`, `policy.rs`, `sched.rs`, `cpus.rs`, `from_env.rs`).

mod cpus;
mod error;
mod from_env;
mod late;
mod policy;
mod sched;
mod stats;

pub use cpus::{cpu_list_text, parse_cpu_list, MAX_CPU};
pub use error::Error;
pub(crate) use from_env::Raw;
pub(crate) use late::LateConfig;
pub use late::{DEFAULT_LATE_INTERVAL, DEFAULT_LATE_MAX, DEFAULT_LATE_WINDOW};
pub use policy::Policy;
pub use sched::ConsumerSched;
pub use stats::Stats;

use crate::env;
use crate::ring::Mode;
use sched::sched_range_error;
use std::path::PathBuf;
use std::time::Duration;

/// Default sub-buffer (packet) size: 512 KiB.
pub const DEFAULT_SUBBUF_SIZE: usize = 512 * 1024;
/// Default number of sub-buffers per thread.
pub const DEFAULT_NUM_SUBBUFS: usize = 8;
/// Default consumer read timer.
pub const DEFAULT_READ_TIMER: Duration = Duration::from_millis(10);
/// Smallest accepted sub-buffer size.
pub const MIN_SUBBUF_SIZE: usize = 4096;
/// Largest accepted sub-buffer size: 256 MiB (a packet is written with one `write`).
pub const MAX_SUBBUF_SIZE: usize = 256 << 20;
/// Largest accepted number of sub-buffers per thread.
pub const MAX_NUM_SUBBUFS: usize = 4096;
/// Largest accepted ring (sub-buffer size × number) per thread: 4 GiB.
pub const MAX_RING_BYTES: usize = 4 << 30;
/// Largest accepted read timer: one minute (longer leaves full packets unread for longer than
/// any real-time team would want, and a stop waits for the consumer's next wake-up).
pub const MAX_READ_TIMER: Duration = Duration::from_secs(60);
/// Default flush interval: an event reaches the trace files (and the relay) within this time
/// even if its thread goes idle (`HUSHTRACE_FLUSH_MS`; LTTng's switch timer). Applies by
/// default to sessions with a relay; set it explicitly to flush a local-only session.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(1000);
/// Largest accepted flush interval.
pub const MAX_FLUSH_INTERVAL: Duration = Duration::from_secs(3600);

/// A relay daemon's address.
#[cfg(feature = "relay")]
pub(crate) type RelayUrl = hushtrace_relay::RelayUrl;
/// Without the `relay` feature no relay address is ever set.
#[cfg(not(feature = "relay"))]
pub(crate) type RelayUrl = std::convert::Infallible;

/// Settings of a session.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub output_dir: PathBuf,
    /// Globs applied at start, in order: (pattern, enable).
    pub globs: Vec<(String, bool)>,
    pub mode: Mode,
    pub subbuf_size: usize,
    pub num_subbufs: usize,
    pub read_timer: Duration,
    /// Relay daemon to stream to, besides the local directory (`HUSHTRACE_RELAY`).
    pub relay: Option<RelayUrl>,
    /// A relay address that did not parse: (value, reason), reported by `validate`.
    pub relay_bad: Option<(String, String)>,
    /// Session name on the relay; default: the output directory's name.
    pub relay_session: Option<String>,
    /// Host name on the relay; default: the machine's host name.
    pub relay_host: Option<String>,
    /// Event streams go only to the relay (`HUSHTRACE_RELAY_ONLY`), not to local stream files.
    pub relay_only: bool,
    /// Stream files written with `O_DIRECT` where the file system supports it
    /// (`HUSHTRACE_DIRECT_IO`, [`crate::SessionBuilder::direct_io`]); false: through the page
    /// cache. See docs/BENCHMARKS.md §12 for when each is better.
    pub direct_io: bool,
    /// The consumer thread's scheduling (`HUSHTRACE_CONSUMER_SCHED`).
    pub consumer_sched: ConsumerSched,
    /// The CPUs the consumer thread may run on (`HUSHTRACE_CONSUMER_CPUS`); `None`: those of
    /// the thread that started the session.
    pub consumer_cpus: Option<Vec<usize>>,
    /// The scheduling and CPUs of the thread that started the session (read at the start):
    /// what [`ConsumerSched::Inherit`] and unset `consumer_cpus` give the consumer, also the
    /// one a fork child starts from whichever thread hands over its first packet.
    pub starter_sched: (Option<crate::platform::ThreadSched>, Option<Vec<usize>>),
    /// Ship the complete events of packets left open this long (zero: never).
    pub flush_interval: Duration,
    /// The flush interval was set (builder or `HUSHTRACE_FLUSH_MS`): flush even without a
    /// relay. By default only sessions with a relay flush (see `consumer.rs`).
    pub flush_explicit: bool,
    /// Span deadlines and late-span captures (`config/late.rs`).
    pub late: LateConfig,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            output_dir: PathBuf::from("hushtrace-trace"),
            globs: Vec::new(),
            mode: Mode::Discard,
            subbuf_size: DEFAULT_SUBBUF_SIZE,
            num_subbufs: DEFAULT_NUM_SUBBUFS,
            read_timer: DEFAULT_READ_TIMER,
            relay: None,
            relay_bad: None,
            relay_session: None,
            relay_host: None,
            relay_only: false,
            direct_io: false,
            consumer_sched: ConsumerSched::Inherit,
            consumer_cpus: None,
            starter_sched: (None, None),
            flush_interval: DEFAULT_FLUSH_INTERVAL,
            flush_explicit: false,
            late: LateConfig::default(),
        }
    }
}

impl Config {
    /// Checks every limit; the error names the variable (if any), the value and the limit.
    pub(crate) fn validate(&self, raw: &Raw) -> Result<(), Error> {
        let bad = |v: &'static str, parsed: String, reason: String| Error::Config {
            var: raw.var(v),
            value: raw.value(v, parsed),
            reason,
        };
        if self.subbuf_size < MIN_SUBBUF_SIZE || self.subbuf_size > MAX_SUBBUF_SIZE {
            return Err(bad(
                env::SUBBUF_SIZE,
                self.subbuf_size.to_string(),
                format!(
                    "the sub-buffer size must be between {MIN_SUBBUF_SIZE} and {MAX_SUBBUF_SIZE} \
                     bytes (256 MiB)"
                ),
            ));
        }
        if self.num_subbufs < 2 || self.num_subbufs > MAX_NUM_SUBBUFS {
            return Err(bad(
                env::NUM_SUBBUFS,
                self.num_subbufs.to_string(),
                format!("the number of sub-buffers must be between 2 and {MAX_NUM_SUBBUFS}"),
            ));
        }
        let ring = self.subbuf_size.checked_mul(self.num_subbufs);
        if ring.is_none_or(|r| r > MAX_RING_BYTES) {
            return Err(bad(
                env::NUM_SUBBUFS,
                self.num_subbufs.to_string(),
                format!(
                    "a ring of {} x {} bytes exceeds the limit of {MAX_RING_BYTES} bytes (4 GiB) \
                     per thread",
                    self.num_subbufs, self.subbuf_size
                ),
            ));
        }
        if self.read_timer.is_zero() || self.read_timer > MAX_READ_TIMER {
            return Err(bad(
                env::READ_TIMER_MS,
                self.read_timer.as_millis().to_string(),
                format!(
                    "the read timer must be between 1 ms and {} ms",
                    MAX_READ_TIMER.as_millis()
                ),
            ));
        }
        if self.flush_interval > MAX_FLUSH_INTERVAL {
            return Err(bad(
                env::FLUSH_MS,
                self.flush_interval.as_millis().to_string(),
                format!(
                    "the flush interval must be at most {} ms (0 turns flushing off)",
                    MAX_FLUSH_INTERVAL.as_millis()
                ),
            ));
        }
        self.late.validate(raw)?;
        if let Some(cpus) = &self.consumer_cpus {
            if cpus.is_empty() {
                return Err(bad(
                    env::CONSUMER_CPUS,
                    String::new(),
                    "the consumer needs at least one CPU".into(),
                ));
            }
            if let Some(c) = cpus.iter().find(|&&c| c > MAX_CPU) {
                return Err(bad(
                    env::CONSUMER_CPUS,
                    cpu_list_text(cpus),
                    format!("CPU {c} is above {MAX_CPU}"),
                ));
            }
        }
        let range = match self.consumer_sched {
            ConsumerSched::Inherit => None,
            ConsumerSched::Fifo(p) | ConsumerSched::RoundRobin(p) => {
                sched_range_error(true, p.into())
            }
            ConsumerSched::Nice(n) => sched_range_error(false, n.into()),
        };
        if let Some(reason) = range {
            return Err(bad(
                env::CONSUMER_SCHED,
                self.consumer_sched.to_string(),
                reason,
            ));
        }
        if self.relay_only && self.relay.is_none() && self.relay_bad.is_none() {
            return Err(Error::Config {
                var: raw.var(env::RELAY_ONLY),
                value: "1".into(),
                reason: "relay-only needs a relay (HUSHTRACE_RELAY or SessionBuilder::relay)"
                    .into(),
            });
        }
        if let Some((value, reason)) = &self.relay_bad {
            return Err(Error::Config {
                var: raw.var(env::RELAY),
                value: value.clone(),
                reason: reason.clone(),
            });
        }
        for (what, var, v) in [
            ("session name", env::RELAY_SESSION, &self.relay_session),
            ("host name", env::RELAY_HOST, &self.relay_host),
        ] {
            #[cfg(not(feature = "relay"))]
            let _ = (what, var, v);
            #[cfg(feature = "relay")]
            if let Some(v) = v {
                if let Err(e) =
                    hushtrace_relay::SessionOptions::new(v.clone(), v.clone()).validate()
                {
                    return Err(Error::Config {
                        var: raw.var(var),
                        value: v.clone(),
                        reason: format!("not a valid relay {what}: {e}"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Sets the relay address from its text (`net://HOST[:CONTROL_PORT[:DATA_PORT]]`); a bad
    /// one is reported by [`Config::validate`].
    pub(crate) fn set_relay(&mut self, url: &str) {
        #[cfg(not(feature = "relay"))]
        {
            self.relay = None;
            self.relay_bad = Some((
                url.to_string(),
                "this program's hushtrace was built without relay support (the `relay` cargo \
                 feature)"
                    .into(),
            ));
        }
        #[cfg(feature = "relay")]
        match url.parse::<hushtrace_relay::RelayUrl>() {
            Ok(u) => {
                self.relay = Some(u);
                self.relay_bad = None;
            }
            Err(e) => {
                self.relay = None;
                self.relay_bad = Some((url.to_string(), format!("not a relay address: {e}")));
            }
        }
    }
}

#[cfg(test)]
mod tests;
