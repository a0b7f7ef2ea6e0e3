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
//!   acknowledgement ([`RelayClient::send_packet_nowait`]); the sender collects the
//!   acknowledgements once per batch, which says, in order, which packets the relay took and
//!   which it did not (lost: a refused index, or no answer before the connection went).
//! * At the session's end the sender gets the rest of the queue and closes the relay session;
//!   the consumer waits for it only while it makes progress: a sender stuck in one relay
//!   operation for [`CLOSE_STALL`] is left behind, and what it had not delivered is lost.

use super::{relay_default_names, Fate, Packet, Sink};
use crate::config::{Config, Error};
use crate::platform;
use hushtrace_ctf::layout::STREAM_PREFIX;
use hushtrace_ctf::metadata::{to_tsdl, TraceDesc};
use hushtrace_relay::{RelayClient, RelayUrl, SessionOptions, StreamId};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// First wait before reconnecting; doubled after every failed attempt up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Packet bytes queued for the relay's sender at most; a packet that does not fit is not sent.
pub(crate) const RELAY_QUEUE_BYTES: usize = 16 << 20;

/// Other messages (stream announcements, beacons) queued at most.
const QUEUE_MESSAGES: usize = 1 << 16;

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
    lost_packets: u64,
    /// Events in them.
    lost_events: u64,
    /// Fates not reported yet of packets that were never queued: (instance, events).
    dropped: Vec<(u64, u64)>,
    /// The relay was stalled when this process was forked from its parent.
    inherited_stall: bool,
}

/// What the consumer and the sender share.
#[derive(Debug)]
struct Link {
    state: Mutex<LinkState>,
    /// Signalled when there is work for the sender (or the end).
    work: Condvar,
    /// Signalled when the sender finished.
    finished: Condvar,
    epoch: Instant,
    /// When the sender last completed a step (ms since `epoch`).
    progress_ms: AtomicU64,
    /// Whether the sender is working (not waiting for work).
    busy: AtomicBool,
    /// Whether the sender ever had a working connection.
    connected: AtomicBool,
}

#[derive(Debug, Default)]
struct LinkState {
    queue: VecDeque<Msg>,
    /// Packet bytes in `queue` and in the sender's current batch.
    queued_bytes: usize,
    /// The newest metadata and its number (bumped by each update).
    desc: Option<Arc<TraceDesc>>,
    desc_gen: u64,
    /// Fates of sent packets not collected by the consumer yet: (instance, events, delivered).
    results: Vec<(u64, u64, bool)>,
    /// Packet copies to reuse.
    free: Vec<Vec<u8>>,
    closing: bool,
    finished: bool,
    /// The consumer left the sender behind: it reports nothing more and ends.
    abandoned: bool,
    close_error: Option<String>,
}

#[derive(Debug)]
enum Msg {
    Packet {
        instance: u64,
        bytes: Vec<u8>,
        events: u64,
    },
    Announce(u64),
    Forget(u64),
    Beacon(u64, u64),
}

impl Link {
    fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note_progress(&self) {
        self.progress_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
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
            link: Arc::new(Link {
                state: Mutex::new(LinkState::default()),
                work: Condvar::new(),
                finished: Condvar::new(),
                epoch: Instant::now(),
                progress_ms: AtomicU64::new(0),
                busy: AtomicBool::new(false),
                connected: AtomicBool::new(false),
            }),
            conn: Some(conn),
            thread: None,
            announced: HashSet::new(),
            unresolved: HashMap::new(),
            lost_packets: 0,
            lost_events: 0,
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
            send_loop(conn, &link);
        })) {
            Ok(t) => self.thread = Some(t),
            Err(_) => {
                // No thread: nothing reaches the relay; every packet counts as its loss.
                let mut st = self.link.lock();
                st.finished = true;
                st.close_error = Some("cannot start the relay sender thread".into());
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
            self.dropped.push((instance, events));
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

    /// Reports the fates known so far of the packets handed over: `each(instance, events,
    /// delivered)`. Never waits for the relay.
    fn settle_fates(&mut self, mut each: impl FnMut(u64, u64, bool)) {
        let results = std::mem::take(&mut self.link.lock().results);
        for (instance, events, delivered) in results {
            if let Some(n) = self.unresolved.get_mut(&instance) {
                *n = n.saturating_sub(events);
                if *n == 0 {
                    self.unresolved.remove(&instance);
                }
            }
            self.report(instance, events, delivered, &mut each);
        }
        for (instance, events) in std::mem::take(&mut self.dropped) {
            self.report(instance, events, false, &mut each);
        }
    }

    fn report(
        &mut self,
        instance: u64,
        events: u64,
        delivered: bool,
        each: &mut impl FnMut(u64, u64, bool),
    ) {
        if !delivered {
            self.lost_packets += 1;
            self.lost_events += events;
        }
        each(instance, events, delivered);
    }

    /// Ends the relay session: the sender sends what is queued and closes the session (waits
    /// until the relay wrote everything). Waits for the sender only while it makes progress
    /// ([`CLOSE_STALL`]); left behind, what it had not delivered is reported lost. Reports
    /// the last fates like [`RelaySink::settle`].
    fn close_session(&mut self, mut each: impl FnMut(u64, u64, bool)) -> Result<(), String> {
        if self.conn.as_ref().is_some_and(|c| c.client.is_none())
            && self.link.lock().queue.is_empty()
        {
            // Never connected and nothing to send: no thread to start.
            self.settle_fates(&mut each);
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
        self.settle_fates(&mut each);
        if finished {
            if let Some(t) = self.thread.take() {
                t.join();
            }
            return error.map_or(Ok(()), Err);
        }
        // Left behind (it ends when its relay operation times out): what it had is lost.
        for (instance, events) in std::mem::take(&mut self.unresolved) {
            self.report(instance, events, false, &mut each);
        }
        Err(format!(
            "the relay did not answer for {} s: stopped waiting for it",
            CLOSE_STALL.as_secs()
        ))
    }
}

/// The sender thread: sends the queued messages to the relay in batches, collects the relay's
/// answers after each batch, and closes the relay session at the end.
fn send_loop(mut conn: Conn, link: &Link) {
    let mut desc: Option<Arc<TraceDesc>> = None;
    let mut desc_gen = 0;
    let mut sent_gen = 0;
    let mut wanted: HashSet<u64> = HashSet::new();
    let mut connections = conn.connections;
    let mut results = Vec::new();
    let mut spare = Vec::new();
    loop {
        let (batch, closing) = {
            let mut st = link.lock();
            st.free.append(&mut spare);
            st.free.truncate(64);
            st.results.append(&mut results);
            loop {
                if st.abandoned {
                    return;
                }
                if !st.queue.is_empty() || st.closing {
                    break;
                }
                link.busy.store(false, Ordering::Relaxed);
                st = link
                    .work
                    .wait_timeout(st, Duration::from_millis(100))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            link.busy.store(true, Ordering::Relaxed);
            link.note_progress();
            if st.desc_gen != desc_gen {
                desc_gen = st.desc_gen;
                desc = st.desc.clone();
            }
            (std::mem::take(&mut st.queue), st.closing)
        };
        // New event classes (a new connection sends them all itself).
        if sent_gen != desc_gen {
            if let Some(d) = &desc {
                conn.metadata(d);
            }
            sent_gen = desc_gen;
        }
        let mut bytes_done = 0;
        for msg in batch {
            match msg {
                Msg::Packet {
                    instance,
                    bytes,
                    events,
                } => {
                    match &desc {
                        Some(d) => conn.packet(instance, &bytes, events, d),
                        None => conn.done.push((instance, events, false)),
                    }
                    bytes_done += bytes.len();
                    spare.push(bytes);
                }
                Msg::Announce(i) => {
                    wanted.insert(i);
                    conn.announce(i);
                }
                Msg::Forget(i) => {
                    wanted.remove(&i);
                }
                Msg::Beacon(i, ts) => conn.beacon(i, ts),
            }
            link.note_progress();
            if conn.client.is_some() {
                link.connected.store(true, Ordering::Relaxed);
            }
            // A new connection: its streams are announced again.
            if conn.connections != connections && conn.client.is_some() {
                connections = conn.connections;
                for &i in &wanted {
                    conn.announce(i);
                }
            }
        }
        conn.settle(|i, n, ok| results.push((i, n, ok)));
        link.note_progress();
        {
            let mut st = link.lock();
            st.queued_bytes = st.queued_bytes.saturating_sub(bytes_done);
        }
        if closing && link.lock().queue.is_empty() {
            let r = conn.close();
            let mut st = link.lock();
            if !st.abandoned {
                st.results.append(&mut results);
                st.close_error = r.err();
                st.finished = true;
                link.finished.notify_all();
            }
            return;
        }
    }
}

/// A relay session of one process, owned by its sender thread ([`RelaySink`] is the
/// consumer's handle to it).
#[derive(Debug)]
struct Conn {
    url: RelayUrl,
    session: String,
    host: String,
    /// Name of this process's trace directory (`<pid>` or `<pid>.<n>`): the stream path.
    dir_name: String,
    live_timer: Duration,
    client: Option<RelayClient>,
    /// Connections made so far: the first stores under `dir_name`, later ones `dir_name-<n>`.
    connections: u32,
    meta: Option<StreamId>,
    /// Data streams announced on the current connection, by buffer instance.
    streams: HashMap<u64, StreamId>,
    /// Event classes whose declaration the current connection has sent, by id.
    sent_classes: Vec<bool>,
    retry_at: Option<Instant>,
    backoff: Duration,
    /// Packets sent on the current connection whose acknowledgement is not collected yet,
    /// oldest first: (buffer instance, events).
    in_flight: VecDeque<(u64, u64)>,
    /// Packets whose fate is known and not reported yet, in order: (instance, events,
    /// delivered). Not delivered: not sent, refused, or in flight on a lost connection.
    done: Vec<(u64, u64, bool)>,
}

impl Conn {
    /// The connection state for `cfg.relay` (None without one). `root`: the session's output directory
    /// (its name is the default session name, see [`relay_default_names`]).
    fn new(cfg: &Config, root: &std::path::Path, dir_name: &str) -> Option<Conn> {
        let url = cfg.relay.clone()?;
        let (host, session) = relay_default_names(root);
        Some(Conn {
            url,
            session: cfg.relay_session.clone().unwrap_or(session),
            host: cfg.relay_host.clone().unwrap_or(host),
            dir_name: dir_name.to_string(),
            live_timer: cfg
                .flush_interval
                .clamp(Duration::from_millis(100), MAX_BACKOFF),
            client: None,
            connections: 0,
            meta: None,
            streams: HashMap::new(),
            sent_classes: Vec::new(),
            retry_at: None,
            backoff: FIRST_BACKOFF,
            in_flight: VecDeque::new(),
            done: Vec::new(),
        })
    }

    /// The relay's address, for messages.
    fn url(&self) -> String {
        self.url.to_string()
    }

    /// Connects now (session start): an error says why the relay cannot be used.
    fn connect_now(&mut self, desc: &TraceDesc) -> Result<(), Error> {
        self.connect(desc).map_err(|e| Error::Relay {
            url: self.url(),
            reason: e.to_string(),
        })
    }

    fn stream_path(&self) -> String {
        match self.connections {
            0 => self.dir_name.clone(),
            n => format!("{}-{n}", self.dir_name),
        }
    }

    fn connect(&mut self, desc: &TraceDesc) -> Result<(), hushtrace_relay::Error> {
        let opts = SessionOptions::new(self.session.clone(), self.host.clone())
            .base_path(self.session.clone())
            .live_timer(Some(self.live_timer))
            .connect_timeout(Duration::from_secs(2))
            .io_timeout(Duration::from_secs(5));
        let mut client = RelayClient::connect(&self.url, &opts)?;
        let path = self.stream_path();
        let meta = client.add_metadata_stream(&path)?;
        self.connections += 1;
        self.streams.clear();
        self.sent_classes.clear();
        self.meta = Some(meta);
        self.client = Some(client);
        self.retry_at = None;
        self.backoff = FIRST_BACKOFF;
        self.send_metadata(desc)?;
        self.client_mut()?.streams_sent()?;
        Ok(())
    }

    fn client_mut(&mut self) -> Result<&mut RelayClient, hushtrace_relay::Error> {
        self.client
            .as_mut()
            .ok_or_else(|| hushtrace_relay::Error::InvalidArgument("not connected".into()))
    }

    /// Sends the metadata the relay does not have yet: the header on a new connection, then
    /// every event class whose field types are known and not sent yet.
    fn send_metadata(&mut self, desc: &TraceDesc) -> Result<(), hushtrace_relay::Error> {
        let Some(meta) = self.meta else {
            return Ok(());
        };
        let header_desc = TraceDesc {
            events: Vec::new(),
            ..desc.clone()
        };
        let header = to_tsdl(&header_desc);
        let mut text = String::new();
        if self.sent_classes.is_empty() {
            text.push_str(&header);
        } else {
            // lttng-live viewers decode each piece of plain-text metadata they fetch on its
            // own, and each must start with the signature (a comment to everyone else).
            text.push_str("/* CTF 1.8 */\n");
        }
        let bare = text.len();
        for e in &desc.events {
            let id = usize::from(e.id);
            if e.fields.is_none() || self.sent_classes.get(id).copied().unwrap_or(false) {
                continue;
            }
            let one = to_tsdl(&TraceDesc {
                events: vec![e.clone()],
                ..header_desc.clone()
            });
            text.push_str(&one[header.len()..]);
            if self.sent_classes.len() <= id {
                self.sent_classes.resize(id + 1, false);
            }
            self.sent_classes[id] = true;
        }
        if self.sent_classes.is_empty() {
            self.sent_classes.push(false); // the header is sent: never empty again
        }
        if text.len() > bare || bare == header.len() {
            self.client_mut()?.send_metadata(meta, text.as_bytes())?;
        }
        Ok(())
    }

    /// Whether a connection is up; reconnects when the backoff allows.
    fn ready(&mut self, desc: &TraceDesc) -> bool {
        if self.client.as_ref().is_some_and(|c| !c.is_broken()) {
            return true;
        }
        if self.client.is_some() {
            self.lost_connection();
        }
        if self.retry_at.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        match self.connect(desc) {
            Ok(()) => true,
            Err(_) => {
                self.lost_connection();
                false
            }
        }
    }

    fn lost_connection(&mut self) {
        // Answers read before the loss count; what the connection still owed never arrives.
        if let Some(mut c) = self.client.take() {
            c.take_read_acks(|ok| self.note_ack(ok));
        }
        self.done
            .extend(self.in_flight.drain(..).map(|(i, n)| (i, n, false)));
        self.meta = None;
        self.streams.clear();
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// Sends new event classes (types published since the last call).
    fn metadata(&mut self, desc: &TraceDesc) {
        if self.client.is_some() && self.send_metadata(desc).is_err() {
            self.lost_connection();
        }
    }

    /// Sends one packet of buffer `instance` holding `events` events, without waiting for the
    /// relay's answer: [`Conn::settle`] reports whether it was delivered.
    fn packet(&mut self, instance: u64, bytes: &[u8], events: u64, desc: &TraceDesc) {
        if self.ready(desc) && self.try_packet(instance, bytes).is_ok() {
            self.in_flight.push_back((instance, events));
            return;
        }
        self.done.push((instance, events, false));
        if self.client.as_ref().is_some_and(|c| c.is_broken()) {
            self.lost_connection();
        }
    }

    fn try_packet(&mut self, instance: u64, bytes: &[u8]) -> Result<(), hushtrace_relay::Error> {
        let id = self.stream(instance)?;
        let index = hushtrace_relay::PacketIndex::from_packet(bytes)?;
        self.client_mut()?.send_packet_nowait(id, bytes, &index)
    }

    /// The oldest packet in flight got its answer.
    fn note_ack(&mut self, delivered: bool) {
        if let Some((instance, events)) = self.in_flight.pop_front() {
            self.done.push((instance, events, delivered));
        }
    }

    /// Collects the relay's answers for the packets sent since the last call and reports each
    /// packet's fate in order: `each(instance, events, delivered)`. Waits for the answers
    /// still in flight (bounded by the connection's I/O timeout).
    fn settle(&mut self, mut each: impl FnMut(u64, u64, bool)) {
        if let Some(mut c) = self.client.take() {
            let r = c.collect_acks(|ok| self.note_ack(ok));
            let broken = r.is_err() && c.is_broken();
            self.client = Some(c);
            if broken {
                self.lost_connection();
            }
        } else {
            self.done
                .extend(self.in_flight.drain(..).map(|(i, n)| (i, n, false)));
        }
        for (instance, events, delivered) in self.done.drain(..) {
            each(instance, events, delivered);
        }
    }

    /// The relay stream of buffer `instance`, announced now if it is new.
    fn stream(&mut self, instance: u64) -> Result<StreamId, hushtrace_relay::Error> {
        if let Some(&id) = self.streams.get(&instance) {
            return Ok(id);
        }
        let path = self.stream_path_current();
        let c = self.client_mut()?;
        let id = c.add_stream(&path, &format!("{STREAM_PREFIX}{instance}"))?;
        c.streams_sent()?;
        self.streams.insert(instance, id);
        Ok(id)
    }

    /// Announces the stream of a new buffer before its first packet (if connected), so a live
    /// viewer that attaches meanwhile knows it: lttng-live viewers that attach to a session
    /// without any data stream see nothing.
    fn announce(&mut self, instance: u64) {
        if self.streams.contains_key(&instance) || self.client.is_none() {
            return;
        }
        if self.stream(instance).is_err() && self.client.as_ref().is_some_and(|c| c.is_broken()) {
            self.lost_connection();
        }
    }

    /// The stream path of the current connection (the counter was bumped when it was made).
    fn stream_path_current(&self) -> String {
        match self.connections {
            0 | 1 => self.dir_name.clone(),
            n => format!("{}-{}", self.dir_name, n - 1),
        }
    }

    /// Tells live viewers that stream `instance` has no event before `timestamp` (cycles).
    fn beacon(&mut self, instance: u64, timestamp: u64) {
        let Some(&id) = self.streams.get(&instance) else {
            return;
        };
        if let Some(c) = self.client.as_mut() {
            if c.send_beacon(id, 0, timestamp).is_err() && c.is_broken() {
                self.lost_connection();
            }
        }
    }

    /// Ends the relay session cleanly (waits until the relay wrote everything).
    fn close(mut self) -> Result<(), String> {
        match self.client.take() {
            Some(c) => c.close().map_err(|e| e.to_string()),
            None => Ok(()),
        }
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

    fn settle(&mut self, each: &mut dyn FnMut(u64, u64, bool)) {
        self.settle_fates(each);
        self.watch();
    }

    /// Ends the relay session. Packets the relay could not get are reported: in relay-only
    /// mode they are the session's loss (counted by the caller), else only the relay copy's.
    fn close(&mut self, each: &mut dyn FnMut(u64, u64, bool)) -> Result<(), String> {
        let url = self.url();
        // Lost so far, and what the close reports.
        let (mut packets, mut events) = (self.lost_packets, self.lost_events);
        let closed = self.close_session(|instance, n, delivered| {
            if !delivered {
                packets += 1;
                events += n;
            }
            each(instance, n, delivered);
        });
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
        closed.map_err(|e| {
            if self.relay_only {
                format!("relay {url}: {e}")
            } else {
                format!("relay {url}: {e} (the local trace is complete)")
            }
        })
    }
}
