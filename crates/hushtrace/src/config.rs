//! Session settings: defaults, limits, validation, the `HUSHTRACE_*` environment parser and the
//! error type of the control API. Pure values: no process state, no system call.

use crate::env;
use crate::ring::Mode;
use std::fmt;
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

/// Errors of the tracer's control API. Tracepoints never fail: they count what they drop.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is invalid. `var` names the environment variable it came from.
    Config {
        /// The environment variable, if the value came from one.
        var: Option<&'static str>,
        /// The offending value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// The output directory or a trace file could not be created or written.
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A session is already running in this process.
    AlreadyRunning,
    /// Tracing is not implemented on this operating system (tracepoints are no-ops there).
    Unsupported,
    /// No session is running in this process.
    NotRunning,
    /// The operation needs overwrite mode (snapshots: the flight recorder); in discard mode
    /// the trace on disk is already current.
    NeedsOverwriteMode,
    /// The session stopped, but writing its trace failed: `stats` are what was written and
    /// lost (the failed packets are counted in `events_discarded`), the trace on disk is
    /// readable up to the last complete packet of each stream.
    Stop {
        /// What the session recorded.
        stats: Stats,
        /// The file that could not be written.
        path: PathBuf,
        /// The first error.
        source: std::io::Error,
    },
    /// The relay daemon (`lttng-relayd`) given with `relay(...)` / `HUSHTRACE_RELAY` could not
    /// be reached or refused the session when the session started.
    Relay {
        /// The relay's address (`net://HOST:CONTROL:DATA`).
        url: String,
        /// What went wrong.
        reason: String,
    },
}

/// What a session recorded in this process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events written to the trace.
    pub events_written: u64,
    /// Events lost: dropped on a full buffer (discard mode), overwritten (overwrite mode),
    /// dropped by a nested tracepoint at a packet boundary, or lost to a write error.
    pub events_discarded: u64,
    /// This process's trace directory (`<output_dir>/<pid>`), absolute.
    pub trace_dir: PathBuf,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config {
                var: Some(var),
                value,
                reason,
            } => write!(f, "invalid {var}={value:?}: {reason}"),
            Error::Config {
                var: None,
                value,
                reason,
            } => write!(f, "invalid value {value:?}: {reason}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::AlreadyRunning => write!(f, "a hushtrace session is already running"),
            Error::Stop {
                stats,
                path,
                source,
            } => write!(
                f,
                "{}: {source} (the trace is readable up to the failure: {} events written, {} \
                 lost)",
                path.display(),
                stats.events_written,
                stats.events_discarded
            ),
            Error::Relay { url, reason } => write!(
                f,
                "cannot stream the session to the relay daemon at {url}: {reason} (is \
                 lttng-relayd running there? start it with `lttng-relayd -d`, or trace without \
                 a relay)"
            ),
            Error::NotRunning => write!(f, "no hushtrace session is running in this process"),
            Error::NeedsOverwriteMode => write!(
                f,
                "snapshots need a session in overwrite mode (the flight recorder); in discard \
                 mode the trace on disk is already current"
            ),
            Error::Unsupported => write!(
                f,
                "hushtrace cannot trace on this platform (unsupported platform: Linux only); \
                 tracepoints are no-ops"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Stop { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What a tracepoint on a no-syscall thread does when it would still need a system call
/// (`HUSHTRACE_NO_SYSCALL_POLICY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Policy {
    /// Record zeros instead of the missing value (the default).
    #[default]
    Zero = 0,
    /// Record a `hushtrace:no_syscall_violation` event naming what was needed (once per thread
    /// and kind of violation), itself without a system call; the missing value is zero.
    Log = 1,
    /// Abort the process.
    Abort = 2,
}

impl Policy {
    /// Parses `HUSHTRACE_NO_SYSCALL_POLICY`'s value (`None` = unset).
    pub(crate) fn parse_env(value: Option<String>) -> Result<Policy, Error> {
        let Some(v) = value else {
            return Ok(Policy::Zero);
        };
        match v.trim() {
            "zero" | "" => Ok(Policy::Zero),
            "log" => Ok(Policy::Log),
            "abort" => Ok(Policy::Abort),
            _ => Err(Error::Config {
                var: Some(env::NO_SYSCALL_POLICY),
                value: v,
                reason: "expected `zero`, `log` or `abort`".into(),
            }),
        }
    }

    pub(crate) fn from_u8(v: u8) -> Policy {
        match v {
            1 => Policy::Log,
            2 => Policy::Abort,
            _ => Policy::Zero,
        }
    }
}

/// How the consumer thread (and the relay sender, which it starts) is scheduled: the one
/// setting a real-time deployment needs for the tracer's own thread. `HUSHTRACE_CONSUMER_SCHED`
/// or [`crate::SessionBuilder::consumer_sched`]; its text form is what [`fmt::Display`] prints
/// and [`str::parse`] reads: `inherit`, `fifo:N`, `rr:N` (priority 1–99) or `nice:N` (−20–19).
///
/// With two producers spinning on a 2-core machine, the consumer at `SCHED_OTHER` waits up to
/// several milliseconds for a core after each wake-up, longer than a 4 MiB ring lasts at
/// 100 M events/s; at `fifo:1` it runs when woken (docs/BENCHMARKS.md §12). A priority above
/// `SCHED_OTHER` needs `CAP_SYS_NICE` or an `RLIMIT_RTPRIO` (`ulimit -r`) that allows it, as a
/// negative nice value does; when the kernel refuses, the consumer says so once on stderr and
/// runs as it would have (the control status has the error).
///
/// ```
/// use hushtrace::ConsumerSched;
/// assert_eq!("fifo:10".parse::<ConsumerSched>().unwrap(), ConsumerSched::Fifo(10));
/// assert_eq!(ConsumerSched::Nice(-5).to_string(), "nice:-5");
/// assert!("fifo:0".parse::<ConsumerSched>().unwrap_err().contains("1 to 99"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsumerSched {
    /// What the thread that started the session had when it started it (also for the
    /// consumer of a fork child, which another thread may start).
    #[default]
    Inherit,
    /// `SCHED_FIFO` at this priority (1–99).
    Fifo(u8),
    /// `SCHED_RR` at this priority (1–99).
    RoundRobin(u8),
    /// `SCHED_OTHER` at this nice value (−20–19).
    Nice(i8),
}

impl fmt::Display for ConsumerSched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConsumerSched::Inherit => f.write_str("inherit"),
            ConsumerSched::Fifo(p) => write!(f, "fifo:{p}"),
            ConsumerSched::RoundRobin(p) => write!(f, "rr:{p}"),
            ConsumerSched::Nice(n) => write!(f, "nice:{n}"),
        }
    }
}

impl std::str::FromStr for ConsumerSched {
    /// What was expected, to follow the value in an error.
    type Err = String;
    fn from_str(v: &str) -> Result<ConsumerSched, String> {
        const EXPECTED: &str = "expected `inherit`, `fifo:N` or `rr:N` (N from 1 to 99), or \
                                `nice:N` (N from -20 to 19)";
        let v = v.trim().to_ascii_lowercase();
        if v.is_empty() || v == "inherit" {
            return Ok(ConsumerSched::Inherit);
        }
        let (kind, n) = v.split_once(':').ok_or_else(|| EXPECTED.to_string())?;
        let n: i64 = n.trim().parse().map_err(|_| EXPECTED.to_string())?;
        let realtime = matches!(kind.trim(), "fifo" | "rr");
        if let Some(e) = sched_range_error(realtime, n) {
            return Err(format!("{e} ({EXPECTED})"));
        }
        match kind.trim() {
            "fifo" => Ok(ConsumerSched::Fifo(n as u8)),
            "rr" => Ok(ConsumerSched::RoundRobin(n as u8)),
            "nice" => Ok(ConsumerSched::Nice(n as i8)),
            _ => Err(EXPECTED.to_string()),
        }
    }
}

/// Why `n` is out of range for a real-time priority (1–99) or a nice value (−20–19), if it is:
/// the one range check of the text form and of a builder's [`ConsumerSched`].
fn sched_range_error(realtime: bool, n: i64) -> Option<String> {
    match realtime {
        true if !(1..=99).contains(&n) => {
            Some(format!("a real-time priority goes from 1 to 99, not {n}"))
        }
        false if !(-20..=19).contains(&n) => {
            Some(format!("a nice value goes from -20 to 19, not {n}"))
        }
        _ => None,
    }
}

/// Largest CPU number accepted in `HUSHTRACE_CONSUMER_CPUS` (the kernel's `CPU_SETSIZE` − 1).
pub const MAX_CPU: usize = 1023;

/// Parses a CPU list as `taskset -c` and `isolcpus=` write it (`HUSHTRACE_CONSUMER_CPUS`):
/// sorted, without repeats; the error says what was expected.
///
/// ```
/// assert_eq!(hushtrace::parse_cpu_list("3,0-1"), Ok(vec![0, 1, 3]));
/// assert!(hushtrace::parse_cpu_list("1-0").is_err());
/// ```
pub fn parse_cpu_list(v: &str) -> Result<Vec<usize>, String> {
    const EXPECTED: &str = "expected CPU numbers and ranges such as `0`, `0,2` or `0-3,6`";
    let mut cpus = Vec::new();
    for part in v.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = match (a.trim().parse(), b.trim().parse()) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            _ => return Err(EXPECTED.to_string()),
        };
        if b > MAX_CPU {
            return Err(format!("CPU {b} is above {MAX_CPU} ({EXPECTED})"));
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// A CPU list as [`parse_cpu_list`] reads it back, numbers only (`0,1,3`): for messages and
/// the environment of a recorded program.
///
/// ```
/// assert_eq!(hushtrace::cpu_list_text(&[0, 1, 3]), "0,1,3");
/// ```
pub fn cpu_list_text(cpus: &[usize]) -> String {
    let text: Vec<String> = cpus.iter().map(usize::to_string).collect();
    text.join(",")
}

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
        }
    }
}

/// Where each setting came from: the environment variable and the text it held, so errors
/// quote what the user wrote.
#[derive(Clone, Debug, Default)]
pub(crate) struct Raw(Vec<(&'static str, String)>);

impl Raw {
    fn var(&self, v: &'static str) -> Option<&'static str> {
        self.0.iter().find(|(n, _)| *n == v).map(|(n, _)| *n)
    }
    fn value(&self, v: &'static str, parsed: impl fmt::Display) -> String {
        self.0
            .iter()
            .find(|(n, _)| *n == v)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| parsed.to_string())
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

    /// The session configured by the environment, if `HUSHTRACE_OUTPUT` is set and not empty.
    /// Without it, any other `HUSHTRACE_*` variable that is set (and not empty) is an error
    /// naming both: it would otherwise be ignored without a word (`HUSHTRACE_RELAY=net://...`
    /// alone traced nothing).
    pub(crate) fn from_env() -> Result<Option<(Config, Raw)>, Error> {
        Config::from_vars(|name| std::env::var_os(name))
    }

    /// [`Config::from_env`] with the variables from `get_os` (a variable that is not valid
    /// UTF-8 counts as unset, except `HUSHTRACE_OUTPUT`, a path).
    fn from_vars(
        get_os: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Option<(Config, Raw)>, Error> {
        let get = |name: &str| get_os(name).and_then(|v| v.into_string().ok());
        let dir = match get_os(env::OUTPUT) {
            Some(d) if !d.is_empty() => d,
            _ => return without_output(&get_os),
        };
        let mut cfg = Config {
            output_dir: PathBuf::from(dir),
            ..Config::default()
        };
        let mut raw = Raw::default();
        if let Some(m) = get(env::MODE) {
            cfg.mode = m
                .parse()
                .map_err(|e: hushtrace_core::ParseModeError| Error::Config {
                    var: Some(env::MODE),
                    value: m.clone(),
                    reason: e.to_string(),
                })?;
        }
        if let Some(v) = get(env::SUBBUF_SIZE) {
            cfg.subbuf_size = parse_size(env::SUBBUF_SIZE, &v)?;
            raw.0.push((env::SUBBUF_SIZE, v));
        }
        if let Some(v) = get(env::NUM_SUBBUFS) {
            cfg.num_subbufs = parse_size(env::NUM_SUBBUFS, &v)?;
            raw.0.push((env::NUM_SUBBUFS, v));
        }
        if let Some(v) = get(env::ENABLE) {
            cfg.globs = parse_globs(&v)?;
        }
        if let Some(v) = get(env::READ_TIMER_MS) {
            let ms = parse_size(env::READ_TIMER_MS, &v)?;
            cfg.read_timer = Duration::from_millis(ms as u64);
            raw.0.push((env::READ_TIMER_MS, v));
        }
        if let Some(v) = get(env::FLUSH_MS) {
            let ms = parse_size(env::FLUSH_MS, &v)?;
            cfg.flush_interval = Duration::from_millis(ms as u64);
            cfg.flush_explicit = true;
            raw.0.push((env::FLUSH_MS, v));
        }
        if let Some(v) = get(env::RELAY) {
            if !v.trim().is_empty() {
                cfg.set_relay(v.trim());
                raw.0.push((env::RELAY, v));
            }
        }
        if let Some(v) = get(env::RELAY_SESSION) {
            cfg.relay_session = Some(v.clone());
            raw.0.push((env::RELAY_SESSION, v));
        }
        if let Some(v) = get(env::RELAY_HOST) {
            cfg.relay_host = Some(v.clone());
            raw.0.push((env::RELAY_HOST, v));
        }
        if let Some(v) = get(env::RELAY_ONLY) {
            cfg.relay_only = parse_switch(
                env::RELAY_ONLY,
                &v,
                "1 (relay only) or 0 (relay and local directory)",
            )?;
            raw.0.push((env::RELAY_ONLY, v));
        }
        if let Some(v) = get(env::DIRECT_IO) {
            cfg.direct_io = parse_switch(
                env::DIRECT_IO,
                &v,
                "1 (O_DIRECT stream files where the file system supports it) or 0 (through the \
                 page cache)",
            )?;
            raw.0.push((env::DIRECT_IO, v));
        }
        if let Some(v) = get(env::CONSUMER_SCHED) {
            cfg.consumer_sched = v.parse().map_err(|reason| Error::Config {
                var: Some(env::CONSUMER_SCHED),
                value: v.clone(),
                reason,
            })?;
            raw.0.push((env::CONSUMER_SCHED, v));
        }
        if let Some(v) = get(env::CONSUMER_CPUS) {
            if !v.trim().is_empty() {
                cfg.consumer_cpus = Some(parse_cpu_list(&v).map_err(|reason| Error::Config {
                    var: Some(env::CONSUMER_CPUS),
                    value: v.clone(),
                    reason,
                })?);
                raw.0.push((env::CONSUMER_CPUS, v));
            }
        }
        Ok(Some((cfg, raw)))
    }
}

/// `start_from_env()` without `HUSHTRACE_OUTPUT`: nothing to start (`Ok(None)`) unless another
/// `HUSHTRACE_*` variable is set, which is refused with the variable and what is missing.
fn without_output(
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<(Config, Raw)>, Error> {
    for var in env::VARS.iter().filter(|v| v.name != env::OUTPUT) {
        let Some(value) = get(var.name).filter(|v| !v.is_empty()) else {
            continue;
        };
        let what = if var.name == env::RELAY {
            "a relay session keeps its metadata and statistics there (the events go to the \
             relay too, or only with HUSHTRACE_RELAY_ONLY=1)"
        } else {
            "it is the session directory, and no session starts without one"
        };
        return Err(Error::Config {
            var: Some(var.name),
            value: value.to_string_lossy().into_owned(),
            reason: format!(
                "set without {}: {what}; set {}=<dir>, or unset {}",
                env::OUTPUT,
                env::OUTPUT,
                var.name
            ),
        });
    }
    Ok(None)
}

/// Parses an on/off variable (`HUSHTRACE_RELAY_ONLY`, `HUSHTRACE_DIRECT_IO`): `1`, `on`,
/// `true`, `yes` or `0`, `off`, `false`, `no`, empty, in any case and with blanks around. Another
/// value is an error naming `var` and the value; `expected` says what 1 and 0 mean.
pub(crate) fn parse_switch(var: &'static str, v: &str, expected: &str) -> Result<bool, Error> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "" | "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(Error::Config {
            var: Some(var),
            value: v.to_string(),
            reason: format!("expected {expected}"),
        }),
    }
}

/// Parses `HUSHTRACE_ENABLE`: comma-separated globs, a leading `-` disables.
pub(crate) fn parse_globs(v: &str) -> Result<Vec<(String, bool)>, Error> {
    v.split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(|g| {
            let (pat, on) = match g.strip_prefix('-') {
                Some(p) => (p.trim(), false),
                None => (g, true),
            };
            if pat.is_empty() || pat.contains(char::is_whitespace) {
                return Err(Error::Config {
                    var: Some(env::ENABLE),
                    value: v.to_string(),
                    reason: format!(
                        "{g:?} is not a glob: expected comma-separated `category:name` globs, \
                         `-` before one to disable"
                    ),
                });
            }
            Ok((pat.to_string(), on))
        })
        .collect()
}

/// Parses a size with an optional `k`/`K`/`m`/`M` suffix (powers of 1024).
fn parse_size(var: &'static str, v: &str) -> Result<usize, Error> {
    let t = v.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1024),
        Some('m' | 'M') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| Error::Config {
            var: Some(var),
            value: v.to_string(),
            reason: format!(
                "expected a positive integer below 2^{}, optionally with a k or M suffix",
                usize::BITS
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_without_output_is_refused_naming_both() {
        let none = without_output(|_| None).unwrap();
        assert!(none.is_none());
        // Empty counts as unset.
        assert!(without_output(|_| Some("".into())).unwrap().is_none());
        let e = without_output(|n| (n == env::RELAY).then(|| "net://collector".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HUSHTRACE_RELAY=\"net://collector\"")
                && e.contains("without HUSHTRACE_OUTPUT"),
            "{e}"
        );
        for var in env::VARS.iter().filter(|v| v.name != env::OUTPUT) {
            let e = without_output(|n| (n == var.name).then(|| "x".into())).unwrap_err();
            assert!(e.to_string().contains(var.name), "{e}");
        }
    }

    /// The environment of [`Config::from_vars`]: `HUSHTRACE_OUTPUT=/tmp/x` and `vars`.
    fn vars(vars: &[(&'static str, &str)]) -> Result<Option<(Config, Raw)>, Error> {
        let vars: Vec<(&str, String)> = vars.iter().map(|(n, v)| (*n, v.to_string())).collect();
        Config::from_vars(|name| {
            if name == env::OUTPUT {
                return Some("/tmp/x".into());
            }
            vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.into())
        })
    }

    #[test]
    fn on_off_switches_share_one_parser() {
        let on = ["1", "on", "true", "yes", " YES ", "On", "TRUE"];
        let off = ["0", "off", "false", "no", "", " 0 ", "OFF", "No"];
        for var in [env::RELAY_ONLY, env::DIRECT_IO] {
            for (words, want) in [(&on[..], true), (&off[..], false)] {
                for v in words {
                    assert_eq!(parse_switch(var, v, "1 or 0").unwrap(), want, "{var}={v:?}");
                }
            }
            let e = parse_switch(var, "maybe", "1 or 0")
                .unwrap_err()
                .to_string();
            assert!(e.contains(var) && e.contains("\"maybe\""), "{e}");
        }
    }

    #[test]
    fn consumer_sched_texts_round_trip_and_bad_ones_say_why() {
        let cfg = |v: &[(&'static str, &str)]| vars(v).unwrap().unwrap().0;
        for (text, want) in [
            ("", ConsumerSched::Inherit),
            ("inherit", ConsumerSched::Inherit),
            ("fifo:1", ConsumerSched::Fifo(1)),
            (" FIFO:99 ", ConsumerSched::Fifo(99)),
            ("rr:50", ConsumerSched::RoundRobin(50)),
            ("nice:-20", ConsumerSched::Nice(-20)),
            ("nice: 19", ConsumerSched::Nice(19)),
        ] {
            assert_eq!(text.parse::<ConsumerSched>(), Ok(want), "{text:?}");
            assert_eq!(want.to_string().parse::<ConsumerSched>(), Ok(want));
        }
        for (text, why) in [
            ("fifo:0", "1 to 99"),
            ("rr:100", "1 to 99"),
            ("nice:20", "-20 to 19"),
            ("nice:-21", "-20 to 19"),
            ("fifo", "expected"),
            ("deadline:5", "expected"),
            ("fifo:high", "expected"),
            ("fifo:99999999999999999999", "expected"),
        ] {
            let e = text.parse::<ConsumerSched>().unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        let c = cfg(&[(env::CONSUMER_SCHED, "rr:3")]);
        assert_eq!(c.consumer_sched, ConsumerSched::RoundRobin(3));
        assert_eq!(
            cfg(&[]).consumer_sched,
            ConsumerSched::Inherit,
            "inherit by default"
        );
        let e = vars(&[(env::CONSUMER_SCHED, "fifo:0")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HUSHTRACE_CONSUMER_SCHED=\"fifo:0\"") && e.contains("1 to 99"),
            "{e}"
        );
        // A builder value out of range (the enum's fields are wider than the ranges).
        for bad in [
            ConsumerSched::Fifo(0),
            ConsumerSched::RoundRobin(100),
            ConsumerSched::Nice(20),
        ] {
            let c = Config {
                consumer_sched: bad,
                ..Config::default()
            };
            assert!(c.validate(&Raw::default()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn consumer_cpus_are_a_taskset_list() {
        let cfg = |v: &[(&'static str, &str)]| vars(v).unwrap().unwrap().0;
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(parse_cpu_list(" 3, 0-1 ,1"), Ok(vec![0, 1, 3]));
        assert_eq!(parse_cpu_list("1023"), Ok(vec![1023]));
        for bad in ["", "a", "1-0", "0,", "-1", "2-", "1024", "0-2000"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            cfg(&[(env::CONSUMER_CPUS, "0-1")]).consumer_cpus,
            Some(vec![0, 1])
        );
        assert_eq!(cfg(&[(env::CONSUMER_CPUS, " ")]).consumer_cpus, None);
        let e = vars(&[(env::CONSUMER_CPUS, "0-x")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("HUSHTRACE_CONSUMER_CPUS=\"0-x\""), "{e}");
        for bad in [vec![], vec![0, 1024]] {
            let c = Config {
                consumer_cpus: Some(bad.clone()),
                ..Config::default()
            };
            assert!(c.validate(&Raw::default()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn direct_io_from_the_environment() {
        let cfg = |v: &[(&'static str, &str)]| vars(v).unwrap().unwrap().0;
        assert!(!cfg(&[]).direct_io, "off by default");
        assert!(!Config::default().direct_io);
        for v in ["1", "on", "yes", "true"] {
            assert!(cfg(&[(env::DIRECT_IO, v)]).direct_io, "{v:?}");
        }
        for v in ["0", "off", "no", "false", ""] {
            assert!(!cfg(&[(env::DIRECT_IO, v)]).direct_io, "{v:?}");
        }
        let e = vars(&[(env::DIRECT_IO, "fast")]).unwrap_err().to_string();
        assert!(
            e.contains("HUSHTRACE_DIRECT_IO=\"fast\"") && e.contains("page cache"),
            "{e}"
        );
        // Both switches through the same parser, in the same environment.
        let (c, _) = vars(&[
            (env::RELAY, "net://127.0.0.1"),
            (env::RELAY_ONLY, "on"),
            (env::DIRECT_IO, "yes"),
        ])
        .unwrap()
        .unwrap();
        assert!(c.relay_only && c.direct_io);
        let e = vars(&[(env::RELAY_ONLY, "maybe")]).unwrap_err().to_string();
        assert!(
            e.contains("HUSHTRACE_RELAY_ONLY=\"maybe\"") && e.contains("relay only"),
            "{e}"
        );
        // Without HUSHTRACE_OUTPUT, HUSHTRACE_DIRECT_IO alone is refused like the others.
        let e = Config::from_vars(|n| (n == env::DIRECT_IO).then(|| "1".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("HUSHTRACE_DIRECT_IO") && e.contains("without HUSHTRACE_OUTPUT"));
    }

    #[test]
    fn relay_only_values() {
        // relay-only without a relay is refused, naming what is missing
        let cfg = Config {
            relay_only: true,
            ..Config::default()
        };
        let e = cfg.validate(&Raw::default()).unwrap_err().to_string();
        assert!(e.contains("needs a relay"), "{e}");
    }

    #[test]
    fn limits_name_the_value_and_the_limit() {
        let cfg = Config {
            num_subbufs: 65536,
            ..Config::default()
        };
        let e = cfg.validate(&Raw::default()).unwrap_err().to_string();
        assert!(e.contains("65536") && e.contains("4096"), "{e}");
        let cfg = Config {
            read_timer: Duration::from_millis(u64::MAX),
            ..Config::default()
        };
        let e = cfg.validate(&Raw::default()).unwrap_err().to_string();
        assert!(e.contains("60000 ms"), "{e}");
        let cfg = Config {
            subbuf_size: 128 << 20,
            num_subbufs: 64,
            ..Config::default()
        };
        let e = cfg.validate(&Raw::default()).unwrap_err().to_string();
        assert!(e.contains("4 GiB"), "{e}");
        assert!(Config::default().validate(&Raw::default()).is_ok());
    }

    #[test]
    fn sizes_take_suffixes_and_reject_garbage() {
        assert_eq!(parse_size("X", "64k").unwrap(), 65536);
        assert_eq!(parse_size("X", " 2M ").unwrap(), 2 << 20);
        let e = parse_size("X", "18446744073709551616")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("X=") && e.contains("18446744073709551616"),
            "{e}"
        );
        assert!(parse_size("X", "-1").is_err());
    }

    #[test]
    fn enable_globs() {
        assert_eq!(
            parse_globs("-*, app:*,-app:noisy").unwrap(),
            vec![
                ("*".to_string(), false),
                ("app:*".to_string(), true),
                ("app:noisy".to_string(), false)
            ]
        );
        let e = parse_globs("app:*,-").unwrap_err().to_string();
        assert!(e.contains("HUSHTRACE_ENABLE"), "{e}");
    }

    #[test]
    fn policy_values() {
        assert_eq!(Policy::parse_env(None).unwrap(), Policy::Zero);
        assert_eq!(Policy::parse_env(Some("log".into())).unwrap(), Policy::Log);
        let e = Policy::parse_env(Some("sometimes".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("HUSHTRACE_NO_SYSCALL_POLICY") && e.contains("sometimes"));
    }
}
