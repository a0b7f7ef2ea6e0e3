//! The connection state machine of the relay's sender thread: one relay session per
//! connection, its streams and metadata, packets sent without waiting and their
//! acknowledgements, and reconnection with backoff after a lost connection.

use super::super::{relay_default_names, Handed, Outcome};
use crate::config::{Config, Error};
use hushtrace_ctf::layout::STREAM_PREFIX;
use hushtrace_ctf::metadata::{to_tsdl, TraceDesc};
use hushtrace_relay::{RelayClient, RelayUrl, SessionOptions, StreamId};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// First wait before reconnecting; doubled after every failed attempt up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A relay session of one process, owned by its sender thread ([`RelaySink`] is the
/// consumer's handle to it).
#[derive(Debug)]
pub(super) struct Conn {
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
    fates: Fates,
}

/// The fates of the packets given to the connection.
#[derive(Debug, Default)]
struct Fates {
    /// Packets sent on the current connection whose acknowledgement is not collected yet,
    /// oldest first.
    in_flight: VecDeque<Handed>,
    /// Packets whose fate is known and not reported yet, in order. Not delivered: not sent,
    /// refused, or in flight on a lost connection.
    done: Vec<Outcome>,
}

impl Fates {
    /// The oldest packet in flight got its answer.
    fn ack(&mut self, delivered: bool) {
        if let Some(h) = self.in_flight.pop_front() {
            self.done.push(h.fate(delivered));
        }
    }

    /// The connection went: what it still owed never arrives.
    fn lose_in_flight(&mut self) {
        self.done
            .extend(self.in_flight.drain(..).map(|h| h.fate(false)));
    }
}

impl Conn {
    /// The connection state for `cfg.relay` (None without one). `root`: the session's output directory
    /// (its name is the default session name, see [`relay_default_names`]).
    pub(super) fn new(cfg: &Config, root: &std::path::Path, dir_name: &str) -> Option<Conn> {
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
            fates: Fates::default(),
        })
    }

    /// Whether a connection is up (or was, until an operation found it broken).
    pub(super) fn connected(&self) -> bool {
        self.client.is_some()
    }

    /// Connections made so far (a new one means the streams must be announced again).
    pub(super) fn connections(&self) -> u32 {
        self.connections
    }

    /// The relay's address, for messages.
    pub(super) fn url(&self) -> String {
        self.url.to_string()
    }

    /// Connects now (session start): an error says why the relay cannot be used.
    pub(super) fn connect_now(&mut self, desc: &TraceDesc) -> Result<(), Error> {
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
            c.take_read_acks(|ok| self.fates.ack(ok));
        }
        self.fates.lose_in_flight();
        self.meta = None;
        self.streams.clear();
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// Sends new event classes (types published since the last call).
    pub(super) fn metadata(&mut self, desc: &TraceDesc) {
        if self.client.is_some() && self.send_metadata(desc).is_err() {
            self.lost_connection();
        }
    }

    /// Sends one packet of buffer `instance` holding `events` events, without waiting for the
    /// relay's answer: [`Conn::settle`] reports whether it was delivered.
    pub(super) fn packet(&mut self, instance: u64, bytes: &[u8], events: u64, desc: &TraceDesc) {
        if self.ready(desc) && self.try_packet(instance, bytes).is_ok() {
            self.fates.in_flight.push_back(Handed { instance, events });
            return;
        }
        self.not_sent(Handed { instance, events });
        if self.client.as_ref().is_some_and(|c| c.is_broken()) {
            self.lost_connection();
        }
    }

    fn try_packet(&mut self, instance: u64, bytes: &[u8]) -> Result<(), hushtrace_relay::Error> {
        let id = self.stream(instance)?;
        let index = hushtrace_relay::PacketIndex::from_packet(bytes)?;
        self.client_mut()?.send_packet_nowait(id, bytes, &index)
    }

    /// A packet that was not sent (no metadata yet to send it with): lost to the relay.
    pub(super) fn not_sent(&mut self, h: Handed) {
        self.fates.done.push(h.fate(false));
    }

    /// Collects the relay's answers for the packets sent since the last call and reports each
    /// packet's fate in order to `each`. Waits for the answers still in flight (bounded by
    /// the connection's I/O timeout).
    pub(super) fn settle(&mut self, mut each: impl FnMut(Outcome)) {
        match self.client.as_mut() {
            Some(c) => {
                let r = c.collect_acks(|ok| self.fates.ack(ok));
                if r.is_err() && c.is_broken() {
                    self.lost_connection();
                }
            }
            None => self.fates.lose_in_flight(),
        }
        for o in self.fates.done.drain(..) {
            each(o);
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
    pub(super) fn announce(&mut self, instance: u64) {
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
    pub(super) fn beacon(&mut self, instance: u64, timestamp: u64) {
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
    pub(super) fn close(mut self) -> Result<(), hushtrace_relay::Error> {
        match self.client.take() {
            Some(c) => c.close(),
            None => Ok(()),
        }
    }
}
