//! The consumer's outputs behind one interface. Each output is one file below this one:
//! `file.rs` (the trace directory's stream files and metadata) and `relay.rs` (an LTTng relay
//! daemon, feature `relay`). A new output implements [`Sink`] and is added in `setup.rs`.
//! What goes wrong in an output is a [`SinkError`] (`error.rs`).

mod error;
pub(crate) mod file;
#[cfg(feature = "relay")]
pub(crate) mod relay;

#[cfg(feature = "relay")]
pub(crate) use error::RelayFailure;
pub(crate) use error::SinkError;

use crate::config::Error;
use hushtrace_ctf::metadata::TraceDesc;

/// One packet as an output gets it: `header` followed by `body` (the header is a renumbered
/// copy when the flush of idle threads changed the stream, else the ring's own bytes; the body
/// is never copied on the consumer's side).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packet<'a> {
    /// The buffer instance: the stream.
    pub instance: u64,
    /// The packet header and context.
    pub header: &'a [u8],
    /// The events.
    pub body: &'a [u8],
    /// How many events it holds.
    pub events: u64,
}

impl Packet<'_> {
    /// Bytes of the packet.
    pub fn len(&self) -> usize {
        self.header.len() + self.body.len()
    }
}

/// The events of one packet of stream `instance`, whose fate an output reports later
/// ([`Fate::Pending`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handed {
    /// The buffer instance: the stream.
    pub instance: u64,
    /// How many events the packet holds.
    pub events: u64,
}

impl Handed {
    /// Its fate: delivered or not.
    pub fn fate(self, delivered: bool) -> Outcome {
        Outcome {
            instance: self.instance,
            events: self.events,
            delivered,
        }
    }
}

/// The fate of a packet an output took as [`Fate::Pending`], as [`Sink::settle`] and
/// [`Sink::close`] report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The buffer instance: the stream.
    pub instance: u64,
    /// How many events the packet held.
    pub events: u64,
    /// Whether the output got it (else its events are lost to that output).
    pub delivered: bool,
}

/// What became of a packet handed to an output.
#[derive(Debug)]
pub(crate) enum Fate {
    /// Written.
    Delivered,
    /// Not written; the error says why.
    Failed(SinkError),
    /// Handed on; [`Sink::settle`] reports its fate later.
    Pending,
    /// This output takes no packets (relay-only mode's local directory).
    Skipped,
}

/// An output of the consumer. Called from the consumer thread only.
pub(crate) trait Sink: Send + std::fmt::Debug {
    /// Whether its deliveries are the session's record: their events count as written (or as
    /// lost when they fail). The stream files, or the relay in relay-only mode.
    fn counts(&self) -> bool;

    /// Session start: connects now if the output has a connection; the error says why it
    /// cannot be used.
    fn connect_now(&mut self, _desc: &TraceDesc) -> Result<(), Error> {
        Ok(())
    }

    /// The metadata changed (new event classes).
    fn metadata(&mut self, desc: &TraceDesc) -> Result<(), Error>;

    /// Whether the output must have the metadata of an event's class before the packet that
    /// holds it (a live stream): the consumer then checks for new types before each packet.
    fn metadata_first(&self) -> bool {
        false
    }

    /// Whether the output wants the flush of idle threads (live viewers).
    fn wants_flush(&self) -> bool {
        false
    }

    /// A live buffer's stream exists (called every pass; announce it once).
    fn announce(&mut self, _instance: u64) {}

    /// One packet.
    fn packet(&mut self, p: &Packet<'_>) -> Fate;

    /// Stream `instance` has no event before `timestamp` (cycles): an idle thread.
    fn beacon(&mut self, _instance: u64, _timestamp: u64) {}

    /// A buffer was freed: stream `instance` ends.
    fn forget(&mut self, _instance: u64) {}

    /// Reports the fates of [`Fate::Pending`] packets known so far, in order, to `each`.
    /// Never waits.
    fn settle(&mut self, _each: &mut dyn FnMut(Outcome)) {}

    /// The session ends: writes what is pending and closes; reports the last fates like
    /// [`Sink::settle`]. The error says what the output could not do.
    fn close(&mut self, _each: &mut dyn FnMut(Outcome)) -> Result<(), SinkError> {
        Ok(())
    }
}

/// The `(host, session)` names a session with a relay is filed under on the relay when none
/// are set: this machine's host name and the output directory's last component (both made
/// safe as relay path components).
///
/// ```
/// let (host, session) = hushtrace::relay_default_names(std::path::Path::new("/tmp/run-7"));
/// assert_eq!(session, "run-7");
/// assert!(!host.is_empty());
/// ```
pub fn relay_default_names(output: &std::path::Path) -> (String, String) {
    let root = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (
        default_session_name(&crate::platform::hostname()),
        default_session_name(&root),
    )
}

/// A name the relay accepts as a directory: `/` and NUL replaced, no leading `.`, at most 200
/// bytes; `hushtrace` if nothing is left.
fn default_session_name(s: &str) -> String {
    let mut n: String = s
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
        .collect();
    while n.starts_with('.') {
        n.remove(0);
    }
    while n.len() > 200 {
        n.pop();
    }
    if n.is_empty() {
        n.push_str("hushtrace");
    }
    n
}
