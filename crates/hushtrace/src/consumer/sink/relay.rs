//! The relay output ([`Sink`]): this process's trace streamed to an LTTng relay daemon
//! (`lttng-relayd`), besides the local trace directory, which stays the source of truth.
//!
//! * One relay session per process (a fork child's consumer makes its own connection), stored
//!   by the relay under `<host>/<session>/<trace dir name>/`: the metadata stream and one stream
//!   per buffer (`stream_<instance>`, as locally), announced when their first packet comes.
//! * Metadata is append-only on the relay: the header is sent once, then each event class as
//!   soon as its field types are known (a class whose types are unknown has no event yet).
//! * The relay has a thread of its own (`hushtrace-relay`): the consumer writes each packet to
//!   the local trace, then hands a copy to a bounded queue ([`RELAY_QUEUE_BYTES`]) and goes on;
//!   local draining, thread registration and exit never wait for relay I/O. When the relay
//!   cannot keep up or stalls (stopped, unreachable), the queue fills and the packets that do
//!   not fit are the relay copy's loss only (a gap in its packet sequence numbers, counted and
//!   reported at the end); the local trace stays complete. In relay-only mode they are the
//!   session's loss (counted as discarded).
//! * A lost connection is retried with backoff (100 ms doubling to 5 s) on the sender thread.
//!   A new connection is a new relay session whose streams live in `<trace dir name>-<n>/`,
//!   so the relay does not truncate what the earlier connection stored.
//! * Packets are pipelined: each is sent with its index without waiting for the relay's
//!   acknowledgement ([`hushtrace_relay::RelayClient::send_packet_nowait`]); the sender collects the
//!   acknowledgements once per batch, which says, in order, which packets the relay took and
//!   which it did not (lost: a refused index, or no answer before the connection went).
//! * At the session's end the sender gets the rest of the queue and closes the relay session;
//!   the consumer waits for it only while it makes progress: a sender stuck in one relay
//!   operation for [`CLOSE_STALL`] is left behind, and what it had not delivered is lost.
//!
//! One file per job: this one is the consumer's handle ([`RelaySink`]); `relay/link.rs` what
//! the handle and the sender thread share (the queue); `relay/sender.rs` the sender thread;
//! `relay/conn.rs` its connection state machine.

mod conn;
mod link;
mod sender;

use super::{Fate, Handed, Outcome, Packet, RelayFailure, Sink, SinkError};
use crate::config::{Config, Error};
use crate::platform;
use conn::Conn;
use hushtrace_ctf::metadata::TraceDesc;
use link::{Link, Msg, QUEUE_MESSAGES, RELAY_QUEUE_BYTES};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// At the end, a sender that has been inside one relay operation this long is left behind.
pub(crate) const CLOSE_STALL: Duration = Duration::from_secs(1);

/// The longest the end of a session waits for the sender, even while it makes progress.
const CLOSE_MAX: Duration = Duration::from_secs(30);

/// Whether this process's relay sender was stuck in one relay operation for [`CLOSE_STALL`]
/// when the consumer last looked. A fork child inherits the value: a child whose own sender
/// never got through to the relay does not wait for it at exit when the parent's was stuck.
static RELAY_STALLED: AtomicBool = AtomicBool::new(false);

/// The consumer's handle to the relay's sender thread.
#[derive(Debug)]
pub(crate) struct RelaySink {
    url: String,
    /// Relay-only mode: the relay's copy is the trace (its fates count).
    relay_only: bool,
    link: Arc<Link>,
    /// The connection state until the sender thread starts (it is started on first use, on
    /// the consumer's thread).
    conn: Option<Conn>,
    thread: Option<platform::RawThread>,
    /// Buffer instances whose stream was announced to the sender.
    announced: HashSet<u64>,
    /// Events handed to the sender and not reported yet, per instance (lost if it is left
    /// behind).
    unresolved: HashMap<u64, u64>,
    /// Packets not delivered to the relay (not queued, refused, or lost with a connection).
    lost: Lost,
    /// Packets that were never queued, whose fate is not reported yet.
    dropped: Vec<Handed>,
    /// The relay was stalled when this process was forked from its parent.
    inherited_stall: bool,
}

/// Packets the relay did not get, and the events in them.
#[derive(Debug, Default)]
struct Lost {
    packets: u64,
    events: u64,
}

impl Lost {
    /// Counts `o` if it was not delivered, and reports it to `each`.
    fn report(&mut self, o: Outcome, each: &mut dyn FnMut(Outcome)) {
        if !o.delivered {
            self.packets += 1;
            self.events += o.events;
        }
        each(o);
    }
}

impl RelaySink {
    /// The sink for `cfg.relay` (None without one). `root`: the session's output directory
    /// (its name is the default session name, see [`relay_default_names`]).
    pub(crate) fn new(cfg: &Config, root: &std::path::Path, dir_name: &str) -> Option<RelaySink> {
        let conn = Conn::new(cfg, root, dir_name)?;
        Some(RelaySink {
            url: conn.url(),
            relay_only: cfg.relay_only,
            link: Arc::new(Link::new()),
            conn: Some(conn),
            thread: None,
            announced: HashSet::new(),
            unresolved: HashMap::new(),
            lost: Lost::default(),
            dropped: Vec::new(),
            inherited_stall: RELAY_STALLED.swap(false, Ordering::Relaxed),
        })
    }

    /// Whether the sender has been inside one relay operation for [`CLOSE_STALL`].
    fn stalled(&self) -> bool {
        let now = self.link.epoch.elapsed();
        let last = Duration::from_millis(self.link.progress_ms.load(Ordering::Relaxed));
        self.thread.is_some()
            && self.link.busy.load(Ordering::Relaxed)
            && now.saturating_sub(last) > CLOSE_STALL
    }

    /// Once per consumer pass: notes whether the relay is stalled (for fork children).
    fn watch(&self) {
        RELAY_STALLED.store(self.stalled(), Ordering::Relaxed);
    }

    /// The relay's address, for messages.
    pub(crate) fn url(&self) -> String {
        self.url.clone()
    }

    /// Connects now (session start, before the sender thread runs): an error says why the
    /// relay cannot be used.
    fn connect_first(&mut self, desc: &TraceDesc) -> Result<(), Error> {
        let r = match self.conn.as_mut() {
            Some(c) => c.connect_now(desc),
            None => Ok(()),
        };
        if r.is_ok() {
            self.link.connected.store(true, Ordering::Relaxed);
        }
        r
    }

    /// Starts the sender thread if it is not running yet.
    fn start(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let link = self.link.clone();
        link.note_progress();
        match platform::spawn_raw(Box::new(move || {
            platform::block_signals_forever();
            platform::set_thread_name("hushtrace-relay");
            sender::send_loop(conn, &link);
        })) {
            Ok(t) => self.thread = Some(t),
            Err(_) => {
                // No thread: nothing reaches the relay; every packet counts as its loss.
                let mut st = self.link.lock();
                st.finished = true;
                st.close_error = Some(RelayFailure::NoSender);
            }
        }
    }

    fn push(&mut self, msg: Msg) -> bool {
        self.start();
        let mut st = self.link.lock();
        if st.finished || st.queue.len() >= QUEUE_MESSAGES {
            return false;
        }
        st.queue.push_back(msg);
        drop(st);
        self.link.work.notify_one();
        true
    }

    /// The metadata changed (new event classes): the sender sends what the relay lacks before
    /// its next packet.
    fn set_metadata(&mut self, desc: &TraceDesc) {
        let mut st = self.link.lock();
        st.desc = Some(Arc::new(desc.clone()));
        st.desc_gen += 1;
    }

    /// Hands a copy of one packet of buffer `instance` (holding `events` events) to the
    /// sender, or counts it lost at once when the queue is full. [`RelaySink::settle`] reports
    /// its fate.
    fn queue_packet(&mut self, p: &Packet<'_>) {
        let (instance, events) = (p.instance, p.events);
        self.start();
        let mut st = self.link.lock();
        let fits = st.queued_bytes + p.len() <= RELAY_QUEUE_BYTES;
        if !fits || st.finished || st.queue.len() >= QUEUE_MESSAGES {
            drop(st);
            self.dropped.push(Handed { instance, events });
            return;
        }
        let mut copy = st.free.pop().unwrap_or_default();
        drop(st);
        // The one copy of the packet on the consumer's side, outside the lock: the sender
        // (which holds the lock only to take a batch) keeps sending meanwhile.
        copy.clear();
        copy.reserve(p.len());
        copy.extend_from_slice(p.header);
        copy.extend_from_slice(p.body);
        let mut st = self.link.lock();
        st.queued_bytes += copy.len();
        st.queue.push_back(Msg::Packet {
            instance,
            bytes: copy,
            events,
        });
        drop(st);
        self.link.work.notify_one();
        *self.unresolved.entry(instance).or_default() += events;
    }

    /// Announces the stream of a live buffer (once): live viewers that attach meanwhile know
    /// it before its first packet.
    fn announce_stream(&mut self, instance: u64) {
        if !self.announced.contains(&instance) && self.push(Msg::Announce(instance)) {
            self.announced.insert(instance);
        }
    }

    /// A buffer was freed: its stream is not announced again on a new connection.
    fn forget_stream(&mut self, instance: u64) {
        if self.announced.remove(&instance) {
            self.push(Msg::Forget(instance));
        }
    }

    /// Tells live viewers that stream `instance` has no event before `timestamp` (cycles).
    /// Dropped when the sender is behind.
    fn send_beacon(&mut self, instance: u64, timestamp: u64) {
        if !self.announced.contains(&instance) {
            return;
        }
        if self.link.lock().queue.len() < QUEUE_MESSAGES / 2 {
            self.push(Msg::Beacon(instance, timestamp));
        }
    }

    /// Reports the fates known so far of the packets handed over, in order, to `each`. Never
    /// waits for the relay.
    fn settle_fates(&mut self, each: &mut dyn FnMut(Outcome)) {
        // Taken out of the lock: the sender is not held up while they are counted.
        let results = std::mem::take(&mut self.link.lock().results);
        for o in results {
            if let Some(n) = self.unresolved.get_mut(&o.instance) {
                *n = n.saturating_sub(o.events);
                if *n == 0 {
                    self.unresolved.remove(&o.instance);
                }
            }
            self.lost.report(o, each);
        }
        for h in self.dropped.drain(..) {
            self.lost.report(h.fate(false), each);
        }
    }

    /// Ends the relay session: the sender sends what is queued and closes the session (waits
    /// until the relay wrote everything). Waits for the sender only while it makes progress
    /// ([`CLOSE_STALL`]); left behind, what it had not delivered is reported lost. Reports
    /// the last fates like [`RelaySink::settle`].
    fn close_session(&mut self, each: &mut dyn FnMut(Outcome)) -> Result<(), RelayFailure> {
        if self.conn.as_ref().is_some_and(|c| !c.connected()) && self.link.lock().queue.is_empty() {
            // Never connected and nothing to send: no thread to start.
            self.settle_fates(each);
            return Ok(());
        }
        self.start();
        let started = Instant::now();
        let mut st = self.link.lock();
        st.closing = true;
        self.link.work.notify_one();
        let finished = loop {
            if st.finished {
                break true;
            }
            // A fork child of a process whose relay was stuck, still not through to it.
            let stuck_before = self.inherited_stall && !self.link.connected.load(Ordering::Relaxed);
            if self.stalled() || stuck_before || started.elapsed() > CLOSE_MAX {
                st.abandoned = true;
                break false;
            }
            st = self
                .link
                .finished
                .wait_timeout(st, Duration::from_millis(10))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        let error = st.close_error.take();
        drop(st);
        self.settle_fates(each);
        if finished {
            if let Some(t) = self.thread.take() {
                t.join();
            }
            return error.map_or(Ok(()), Err);
        }
        // Left behind (it ends when its relay operation times out): what it had is lost.
        for (instance, events) in self.unresolved.drain() {
            self.lost
                .report(Handed { instance, events }.fate(false), each);
        }
        Err(RelayFailure::Stalled(CLOSE_STALL))
    }
}

impl Sink for RelaySink {
    fn counts(&self) -> bool {
        self.relay_only
    }

    fn connect_now(&mut self, desc: &TraceDesc) -> Result<(), Error> {
        self.connect_first(desc)
    }

    fn metadata(&mut self, desc: &TraceDesc) -> Result<(), Error> {
        self.set_metadata(desc);
        Ok(())
    }

    fn metadata_first(&self) -> bool {
        true
    }

    fn wants_flush(&self) -> bool {
        true
    }

    fn announce(&mut self, instance: u64) {
        self.announce_stream(instance);
    }

    /// Hands a copy to the sender; its fate is reported by [`Sink::settle`].
    fn packet(&mut self, p: &Packet<'_>) -> Fate {
        self.queue_packet(p);
        Fate::Pending
    }

    fn beacon(&mut self, instance: u64, timestamp: u64) {
        self.send_beacon(instance, timestamp);
    }

    fn forget(&mut self, instance: u64) {
        self.forget_stream(instance);
    }

    fn settle(&mut self, each: &mut dyn FnMut(Outcome)) {
        self.settle_fates(each);
        self.watch();
    }

    /// Ends the relay session. Packets the relay could not get are reported: in relay-only
    /// mode they are the session's loss (counted by the caller), else only the relay copy's.
    fn close(&mut self, each: &mut dyn FnMut(Outcome)) -> Result<(), SinkError> {
        let closed = self.close_session(each);
        let Lost { packets, events } = self.lost;
        let url = self.url();
        if packets > 0 {
            eprintln!(
                "hushtrace: {packets} packets ({events} events) could not be streamed to the \
                 relay at {url} ({})",
                if self.relay_only {
                    "counted as discarded"
                } else {
                    "the relay's copy lacks them; the local trace has them"
                }
            );
        }
        closed.map_err(|failure| SinkError::Relay {
            url,
            failure,
            relay_only: self.relay_only,
        })
    }
}
