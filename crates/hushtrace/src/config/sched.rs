//! The consumer thread's scheduling ([`ConsumerSched`]): its text form and range checks.

use std::fmt;

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
pub(super) fn sched_range_error(realtime: bool, n: i64) -> Option<String> {
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
