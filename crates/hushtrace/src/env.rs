//! The one table of `HUSHTRACE_*` environment variables: their names, what they hold, and who
//! reads them. [`crate::start_from_env`] parses them; `hushtrace record` sets them.

/// Session directory; `start_from_env()` starts a session only when it is set and not empty,
/// and refuses to start without it when any other variable of [`VARS`] is set.
pub const OUTPUT: &str = "HUSHTRACE_OUTPUT";
/// `discard` (default) or `overwrite`.
pub const MODE: &str = "HUSHTRACE_MODE";
/// Bytes per sub-buffer, with an optional `k`/`M` suffix.
pub const SUBBUF_SIZE: &str = "HUSHTRACE_SUBBUF_SIZE";
/// Sub-buffers per thread.
pub const NUM_SUBBUFS: &str = "HUSHTRACE_NUM_SUBBUFS";
/// Consumer read timer in milliseconds.
pub const READ_TIMER_MS: &str = "HUSHTRACE_READ_TIMER_MS";
/// What a no-syscall thread does when it would need a system call: `zero`, `log` or `abort`.
pub const NO_SYSCALL_POLICY: &str = "HUSHTRACE_NO_SYSCALL_POLICY";
/// `monotonic` forces the `clock_gettime` fallback instead of the cycle counter (testing).
pub const CLOCK: &str = "HUSHTRACE_CLOCK";
/// Comma-separated `category:name` globs applied in order at session start; a leading `-`
/// disables (`HUSHTRACE_ENABLE=-*,app:*` records only `app`).
pub const ENABLE: &str = "HUSHTRACE_ENABLE";
/// `net://HOST[:CONTROL_PORT[:DATA_PORT]]`: also stream the session to this `lttng-relayd`.
pub const RELAY: &str = "HUSHTRACE_RELAY";
/// Session name on the relay (default: the output directory's name).
pub const RELAY_SESSION: &str = "HUSHTRACE_RELAY_SESSION";
/// Host name on the relay (default: the machine's host name).
pub const RELAY_HOST: &str = "HUSHTRACE_RELAY_HOST";
/// `1`: send the event streams only to the relay (`HUSHTRACE_RELAY`), not to the local
/// directory, which then holds the metadata and statistics only. `0` (default): both.
pub const RELAY_ONLY: &str = "HUSHTRACE_RELAY_ONLY";
/// Milliseconds after which the complete events of a packet still open (an idle thread) are
/// written out anyway (default 1000; 0: never).
pub const FLUSH_MS: &str = "HUSHTRACE_FLUSH_MS";
/// `1` (or `on`, `true`, `yes`): write the stream files with `O_DIRECT` where the file system
/// supports it (packets padded to the block size, no copy into the page cache); `0` (default;
/// `off`, `false`, `no`, empty): through the page cache. Read with the other variables by
/// `start_from_env()`; a builder session uses `SessionBuilder::direct_io` instead. See
/// docs/BENCHMARKS.md, "The consumer", for when each is better.
pub const DIRECT_IO: &str = "HUSHTRACE_DIRECT_IO";
/// How the consumer thread is scheduled: `inherit` (default), `fifo:N` or `rr:N` (real-time
/// priority 1–99) or `nice:N` (−20–19); see [`crate::ConsumerSched`]. A builder session uses
/// `SessionBuilder::consumer_sched` instead.
pub const CONSUMER_SCHED: &str = "HUSHTRACE_CONSUMER_SCHED";
/// The CPUs the consumer thread may run on, as `taskset -c` writes them (`0`, `0-1,4`):
/// a housekeeping core, away from the real-time ones. Default: those of the thread that
/// started the session. A builder session uses `SessionBuilder::consumer_cpus` instead.
pub const CONSUMER_CPUS: &str = "HUSHTRACE_CONSUMER_CPUS";

/// Span deadlines, `GLOB>DURATION` rules separated by commas (`rt:cycle>1500us,app:*>2ms`;
/// units ns, us, ms, s; globs on `category:name`, a later rule wins): a span that ends later
/// than its deadline is captured in `<dir>/late/<n>/` (see `hushtrace_core::DeadlineRules`).
/// A builder session uses `SessionBuilder::on_late` instead.
pub const ON_LATE: &str = "HUSHTRACE_ON_LATE";
/// Most late-span captures per process (default 16; 0: late spans are only counted).
pub const LATE_MAX: &str = "HUSHTRACE_LATE_MAX";
/// Least time between two late-span captures, a duration with a unit (`1s`, `500ms`; default
/// 1 s); late spans in between are counted, not captured.
pub const LATE_INTERVAL: &str = "HUSHTRACE_LATE_INTERVAL";
/// Time before a late span's begin that its capture keeps (`100ms` by default), as far as the
/// rings hold it.
pub const LATE_WINDOW: &str = "HUSHTRACE_LATE_WINDOW";

/// One documented environment variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var {
    /// The variable's name.
    pub name: &'static str,
    /// What it holds.
    pub doc: &'static str,
}

/// Every `HUSHTRACE_*` variable the runtime reads. Without [`OUTPUT`], `start_from_env()`
/// fails naming the first of the others that is set: none is ignored without a word.
///
/// ```
/// assert!(hushtrace::env::VARS.iter().any(|v| v.name == "HUSHTRACE_OUTPUT"));
/// ```
pub const VARS: &[Var] = &[
    Var {
        name: OUTPUT,
        doc: "session directory; nothing starts without it",
    },
    Var {
        name: MODE,
        doc: "`discard` (default) or `overwrite`",
    },
    Var {
        name: SUBBUF_SIZE,
        doc: "bytes per sub-buffer (k/M suffixes)",
    },
    Var {
        name: NUM_SUBBUFS,
        doc: "sub-buffers per thread",
    },
    Var {
        name: READ_TIMER_MS,
        doc: "consumer read timer, milliseconds",
    },
    Var {
        name: NO_SYSCALL_POLICY,
        doc: "`zero` (default), `log` or `abort`",
    },
    Var {
        name: CLOCK,
        doc: "`monotonic` forces the clock_gettime fallback",
    },
    Var {
        name: ENABLE,
        doc: "comma-separated `category:name` globs applied at start; `-` before one disables",
    },
    Var {
        name: RELAY,
        doc: "`net://HOST[:CONTROL_PORT[:DATA_PORT]]`: also stream to this lttng-relayd",
    },
    Var {
        name: RELAY_SESSION,
        doc: "session name on the relay (default: the output directory's name)",
    },
    Var {
        name: RELAY_HOST,
        doc: "host name on the relay (default: this machine's host name)",
    },
    Var {
        name: RELAY_ONLY,
        doc: "`1`: event streams go only to the relay, not the local directory (default `0`)",
    },
    Var {
        name: FLUSH_MS,
        doc: "flush idle threads' events within this many ms (default 1000; 0: never)",
    },
    Var {
        name: DIRECT_IO,
        doc: "`1`: stream files written with O_DIRECT where supported (default `0`: page cache)",
    },
    Var {
        name: CONSUMER_SCHED,
        doc: "consumer thread scheduling: `inherit` (default), `fifo:N`, `rr:N` or `nice:N`",
    },
    Var {
        name: CONSUMER_CPUS,
        doc: "CPUs the consumer thread may run on, as `taskset -c` (`0`, `0-1,4`)",
    },
    Var {
        name: ON_LATE,
        doc: "span deadlines `GLOB>DURATION,...` (`rt:cycle>1500us`): late spans are captured",
    },
    Var {
        name: LATE_MAX,
        doc: "most late-span captures (default 16; 0: count only)",
    },
    Var {
        name: LATE_INTERVAL,
        doc: "least time between two late-span captures (default `1s`)",
    },
    Var {
        name: LATE_WINDOW,
        doc: "time before a late span a capture keeps (default `100ms`)",
    },
];
