//! [`SessionBuilder`]: a session's settings, set one by one, checked, then started.

use super::start::{start_with, Existing};
use super::Session;
use crate::config::{Config, Error, Raw};
use crate::ring::Mode;
use std::path::PathBuf;
use std::time::Duration;

/// Builds a [`Session`].
///
/// ```no_run
/// use std::time::Duration;
/// let session = hushtrace::Session::builder()
///     .output_dir("/tmp/my-trace")
///     .mode(hushtrace::Mode::Overwrite)
///     .subbuf_size(64 * 1024)
///     .num_subbufs(4)
///     .read_timer(Duration::from_millis(5))
///     .start()?;
/// hushtrace::event!("app", "hello", answer = 42u32);
/// let stats = session.stop()?;
/// println!("{} events", stats.events_written);
/// # Ok::<(), hushtrace::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SessionBuilder {
    pub(super) cfg: Config,
    /// Add to a directory that already holds a trace ([`SessionBuilder::append`]).
    pub(super) append: bool,
}

impl SessionBuilder {
    /// Directory of the session; each process writes `<dir>/<pid>/`. Default `hushtrace-trace`.
    pub fn output_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cfg.output_dir = dir.into();
        self
    }
    /// Discard (default) or overwrite (flight recorder).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.cfg.mode = mode;
        self
    }
    /// Bytes per sub-buffer (one packet), 4 KiB to 256 MiB. Default 512 KiB.
    pub fn subbuf_size(mut self, bytes: usize) -> Self {
        self.cfg.subbuf_size = bytes;
        self
    }
    /// Sub-buffers per thread, 2 to 4096. Default 8.
    pub fn num_subbufs(mut self, n: usize) -> Self {
        self.cfg.num_subbufs = n;
        self
    }
    /// How often the consumer looks for full sub-buffers, 1 ms to 60 s. Default 10 ms.
    pub fn read_timer(mut self, every: Duration) -> Self {
        self.cfg.read_timer = every;
        self
    }
    /// Also streams the session to an LTTng relay daemon (`lttng-relayd`) at
    /// `net://HOST[:CONTROL_PORT[:DATA_PORT]]` (ports default to 5342 and 5343), besides the
    /// local directory, which stays complete. Each process appears on the relay under
    /// `<host>/<session>/<trace dir name>/`; follow it live with
    /// `babeltrace2 --input-format=lttng-live net://HOST:5344/host/<host>/<session>`. If the
    /// relay cannot be reached, [`SessionBuilder::start`] fails with [`Error::Relay`]; a
    /// connection lost later is retried with backoff, and packets that could not be delivered
    /// are counted as discarded.
    ///
    /// ```
    /// let err = hushtrace::Session::builder().relay("http://x").validate().unwrap_err();
    /// assert!(err.to_string().contains("http://x"));
    /// ```
    pub fn relay(mut self, url: &str) -> Self {
        self.cfg.set_relay(url);
        self
    }
    /// Sends the event streams only to the relay, not to the local directory (which then
    /// holds the metadata and the statistics file only): the relay *instead of* the disk, for
    /// machines whose disk is slow, small or not to be written. Packets the relay could not
    /// get are lost (and counted). Needs [`SessionBuilder::relay`]; `HUSHTRACE_RELAY_ONLY=1`.
    ///
    /// ```
    /// let err = hushtrace::Session::builder().relay_only(true).validate().unwrap_err();
    /// assert!(err.to_string().contains("needs a relay"));
    /// assert!(hushtrace::Session::builder().relay("net://127.0.0.1").relay_only(true)
    ///     .validate().is_ok());
    /// ```
    pub fn relay_only(mut self, only: bool) -> Self {
        self.cfg.relay_only = only;
        self
    }
    /// Writes the stream files with `O_DIRECT` where the file system supports it (Linux): the
    /// device reads each packet from the ring itself, with no copy into the page cache, and
    /// every packet is padded with zeros to the block size (its `packet_size` covers the
    /// padding, its `content_size` the events). The consumer then waits for the disk, so the
    /// rings must hold more than the disk's worst stall (docs/BENCHMARKS.md §12). A file system
    /// without `O_DIRECT` (and macOS) writes through the page cache. Default: false (the page
    /// cache). Sessions started from the environment take it from `HUSHTRACE_DIRECT_IO`; a
    /// builder session, like every builder setting, only from here. The control status says
    /// `"direct_io":true|false`.
    ///
    /// ```
    /// let b = hushtrace::Session::builder()
    ///     .output_dir("/tmp/my-trace")
    ///     .subbuf_size(4 << 20)
    ///     .direct_io(true);
    /// assert!(b.validate().is_ok());
    /// ```
    pub fn direct_io(mut self, direct: bool) -> Self {
        self.cfg.direct_io = direct;
        self
    }
    /// How the consumer thread (and the relay sender it starts) is scheduled; see
    /// [`ConsumerSched`](crate::ConsumerSched). Default: as the thread that started the
    /// session. Sessions started from the environment take it from `HUSHTRACE_CONSUMER_SCHED`. The
    /// control status says `"consumer_sched":"fifo:10"` and, if the kernel refused it,
    /// `"consumer_sched_error"`.
    ///
    /// ```
    /// use hushtrace::ConsumerSched;
    /// let b = hushtrace::Session::builder()
    ///     .output_dir("/tmp/my-trace")
    ///     .consumer_sched(ConsumerSched::Fifo(1))
    ///     .consumer_cpus([0]);
    /// assert!(b.validate().is_ok());
    /// let bad = hushtrace::Session::builder().consumer_sched(ConsumerSched::Nice(20));
    /// assert!(bad.validate().unwrap_err().to_string().contains("-20 to 19"));
    /// ```
    pub fn consumer_sched(mut self, sched: crate::ConsumerSched) -> Self {
        self.cfg.consumer_sched = sched;
        self
    }
    /// The CPUs the consumer thread (and the relay sender) may run on: a housekeeping core,
    /// away from the cores of real-time threads. Default: those of the thread that started the
    /// session.
    /// Sessions started from the environment take it from `HUSHTRACE_CONSUMER_CPUS`. An empty
    /// list or a CPU above 1023 is refused by [`SessionBuilder::validate`]; a CPU that is not
    /// online is reported like a refused [`SessionBuilder::consumer_sched`].
    pub fn consumer_cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut cpus: Vec<usize> = cpus.into_iter().collect();
        cpus.sort_unstable();
        cpus.dedup();
        self.cfg.consumer_cpus = Some(cpus);
        self
    }
    /// The session's name on the relay. Default: the output directory's name.
    pub fn relay_session_name(mut self, name: impl Into<String>) -> Self {
        self.cfg.relay_session = Some(name.into());
        self
    }
    /// The host name the relay files the session under. Default: this machine's host name.
    pub fn relay_host_name(mut self, name: impl Into<String>) -> Self {
        self.cfg.relay_host = Some(name.into());
        self
    }
    /// An event of a thread that then goes idle is written out (to the stream files and the
    /// relay) within about this time, instead of waiting for its packet to fill: the consumer
    /// ships the complete events of a packet left open this long as a packet of their own.
    /// Discard mode only. Zero turns it off. Default: 1 s for sessions with a relay, off for
    /// local-only sessions unless set here or by `HUSHTRACE_FLUSH_MS` (crash recovery of a
    /// flushed stream is exact only outside rare full-ring races; see the README).
    pub fn flush_interval(mut self, every: Duration) -> Self {
        self.cfg.flush_interval = every;
        self.cfg.flush_explicit = true;
        self
    }

    /// Span deadlines without a code change: `GLOB>DURATION` rules, comma-separated
    /// (`"rt:cycle>1500us,app:*>2ms"`; units ns, us, ms, s; globs on `category:name`, a later
    /// rule wins, and rules win over deadlines in the code), as `HUSHTRACE_ON_LATE` gives them.
    /// Repeatable (the rules add up). A span that ends later than its deadline after its begin
    /// is noted by its thread (no system call, lock or allocation) and captured by the
    /// consumer at its next tick: in `<dir>/late/<n>/<pid>/` a trace of every thread's newest
    /// events (overwrite mode) or of the packets around the span (discard mode), and a line in
    /// `<dir>/late/index.json` (`n`, `span`, `pid`, `tid`, `start_ns`, `duration_ns`,
    /// `deadline_ns`, `dir`). A spec that does not parse fails [`SessionBuilder::start`],
    /// naming it.
    ///
    /// ```
    /// let err = hushtrace::Session::builder().on_late("rt:cycle>15xs").validate().unwrap_err();
    /// assert!(err.to_string().contains("rt:cycle>15xs"));
    /// hushtrace::Session::builder().on_late("rt:cycle>1500us").validate()?;
    /// # Ok::<(), hushtrace::Error>(())
    /// ```
    pub fn on_late(mut self, spec: &str) -> Self {
        self.cfg.late.add_spec(spec);
        self
    }
    /// At most this many late-span captures per process; later late spans are counted
    /// (`late_not_captured`). 0: count only. Default [`crate::DEFAULT_LATE_MAX`] (16);
    /// `HUSHTRACE_LATE_MAX`.
    pub fn late_max(mut self, n: u64) -> Self {
        self.cfg.late.max = n;
        self
    }
    /// At least this long between two late-span captures (up to an hour); late spans in
    /// between are counted, not captured. Default [`crate::DEFAULT_LATE_INTERVAL`] (1 s);
    /// `HUSHTRACE_LATE_INTERVAL`.
    pub fn late_interval(mut self, every: Duration) -> Self {
        self.cfg.late.interval = every;
        self
    }
    /// How much of the time before a late span's begin its capture keeps (up to an hour; in
    /// overwrite mode as much as the rings still hold). Default [`crate::DEFAULT_LATE_WINDOW`]
    /// (100 ms); `HUSHTRACE_LATE_WINDOW`.
    pub fn late_window(mut self, window: Duration) -> Self {
        self.cfg.late.window = window;
        self
    }

    /// Adds this process's trace to an output directory that already holds a trace of other
    /// processes (as `hushtrace record --append` does). Without it, [`SessionBuilder::start`]
    /// refuses such a directory, as `hushtrace record` does without `--force`/`--append`:
    /// `hushtrace report` would merge the old and the new processes into one trace. A
    /// directory this process (or the process it was forked from) wrote a session to before is
    /// always accepted: each session gets a new `<pid>.<n>` directory in it. Sessions started
    /// from the environment ([`crate::start_from_env`]) always add to their directory: every
    /// process of a recorded command writes its part there, and `hushtrace record` checks the
    /// directory once, before the command starts.
    ///
    /// ```no_run
    /// let first = hushtrace::Session::builder().output_dir("/tmp/t").start()?;
    /// first.stop()?;
    /// // Another program, later:
    /// let err = hushtrace::Session::builder().output_dir("/tmp/t").start().unwrap_err();
    /// assert!(err.to_string().contains("already holds a trace"));
    /// let s = hushtrace::Session::builder().output_dir("/tmp/t").append(true).start()?;
    /// # Ok::<(), hushtrace::Error>(())
    /// ```
    pub fn append(mut self, append: bool) -> Self {
        self.append = append;
        self
    }

    /// Checks the settings against the limits without starting anything: the same check
    /// [`SessionBuilder::start`] makes (`hushtrace record` uses it to refuse bad flags).
    ///
    /// ```
    /// let err = hushtrace::Session::builder().num_subbufs(65536).validate().unwrap_err();
    /// assert!(err.to_string().contains("4096"));
    /// ```
    pub fn validate(&self) -> Result<(), Error> {
        self.cfg.validate(&Raw::default())
    }

    /// Starts the session: calibrates the clock (about 20 ms, once per process), creates the
    /// output directory (mode 0700) and this process's trace directory, writes the metadata,
    /// starts the consumer thread and gives every registered thread a buffer.
    /// Refuses a directory that already holds a trace of other processes unless
    /// [`SessionBuilder::append`] is set.
    pub fn start(self) -> Result<Session, Error> {
        let existing = if self.append {
            Existing::Append
        } else {
            Existing::Refuse
        };
        start_with(self.cfg, &Raw::default(), existing)
    }
}
