//! The relay client: one session on one relay daemon, over a control and a data connection.

use crate::error::Error;
use crate::index::PacketIndex;
use crate::url::RelayUrl;
use crate::wire;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod command;
mod options;
mod send;
pub use options::SessionOptions;
use options::{invalid, path_safe_name, relative_path};

/// Name of the metadata stream's file; the relay recognises metadata streams by it.
pub const METADATA_CHANNEL: &str = "metadata";

/// Largest metadata piece sent in one command (the relay bounds control payloads).
const METADATA_CHUNK: usize = 64 * 1024;

/// A stream announced to the relay; valid only with the client that returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamId(u64);

impl StreamId {
    /// The relay's handle of the stream.
    pub fn handle(self) -> u64 {
        self.0
    }
}

/// What the client knows about one of its streams.
#[derive(Clone, Debug)]
pub struct StreamInfo {
    /// The stream.
    pub id: StreamId,
    /// Directory of the stream's trace, relative to the session directory.
    pub path: String,
    /// File name of the stream ([`METADATA_CHANNEL`] for metadata).
    pub channel: String,
    /// Packets (data streams) or metadata bytes (metadata stream) sent.
    pub sent: u64,
    /// Whether [`RelayClient::close_stream`] was called.
    pub closed: bool,
}

impl StreamInfo {
    /// Whether this is a metadata stream.
    pub fn is_metadata(&self) -> bool {
        self.channel == METADATA_CHANNEL
    }
}

/// A session on an `lttng-relayd` (LTTng 2.11 – 2.13 consumer protocol).
///
/// Announce, per traced process, a metadata stream and one stream per stream file (all with
/// the same `path`, e.g. the pid), send the metadata, call [`RelayClient::streams_sent`] (live
/// viewers see streams from then on), then send packets as they complete. Every call either
/// succeeds or returns an [`Error`]; once one reports [`Error::connection_lost`], the client
/// is finished: drop it, count the packets that failed as lost, and [`RelayClient::connect`]
/// again (a new relay session), re-announcing the streams ([`RelayClient::streams`] lists
/// them).
///
/// ```no_run
/// use hushtrace_relay::{RelayClient, RelayUrl, SessionOptions};
///
/// let url = RelayUrl::parse("net://127.0.0.1")?;
/// let mut relay = RelayClient::connect(&url, &SessionOptions::new("demo", "host-a"))?;
/// let meta = relay.add_metadata_stream("4242")?;
/// let stream = relay.add_stream("4242", "stream_0")?;
/// relay.send_metadata(meta, &std::fs::read("/tmp/t/4242/metadata")?)?;
/// relay.streams_sent()?;
/// let file = std::fs::read("/tmp/t/4242/stream_0")?;
/// let mut lost = 0;
/// for packet in hushtrace_relay::split_packets(&file) {
///     let (bytes, _index) = packet?;
///     if let Err(e) = relay.send_packet(stream, bytes) {
///         lost += 1;
///         if e.connection_lost() { break; } // reconnect with backoff, re-announce
///     }
/// }
/// relay.close()?; // waits until the relay wrote everything, closes streams and session
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RelayClient {
    control: TcpStream,
    data: TcpStream,
    minor: u32,
    session_id: u64,
    output_path: String,
    chunk_id: u64,
    io_timeout: Duration,
    streams: Vec<StreamState>,
    /// Position in `streams` by relay handle.
    by_handle: HashMap<u64, usize>,
    broken: Option<String>,
    /// Index acknowledgements not read yet, oldest first (packets sent with
    /// [`RelayClient::send_packet_nowait`]): the stream of each.
    in_flight: VecDeque<usize>,
    /// Acknowledgements read (to let another command through) and not yet handed to
    /// [`RelayClient::collect_acks`], oldest first: accepted or refused.
    acked: VecDeque<bool>,
    /// Window of `in_flight` ([`SessionOptions::max_in_flight`]).
    max_in_flight: usize,
}

/// The most packets sent with [`RelayClient::send_packet_nowait`] that may wait for their
/// index acknowledgement ([`SessionOptions::max_in_flight`]); the next send reads the oldest
/// one first.
pub const MAX_IN_FLIGHT: usize = 64;

/// The default window: one packet. Measured against lttng-relayd 2.13 on loopback
/// (docs/BENCHMARKS.md §8), a wider window *lowers* the sustained lossless rate (by about
/// 40% with 2 to 64 packets in flight): the relay then receives the next packet's data while
/// it writes the previous one. One in flight still spares the sender the round trip: the
/// answer is read when the next packet goes, after the sender's other work.
pub const DEFAULT_IN_FLIGHT: usize = 1;

#[derive(Debug)]
struct StreamState {
    info: StreamInfo,
    /// Network sequence number of the next data packet.
    next_seq: u64,
}

fn random_u64(salt: u64) -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(salt);
    h.write_u32(std::process::id());
    if let Ok(d) = SystemTime::now().duration_since(UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.finish()
}

fn connect_one(
    connection: &'static str,
    host: &str,
    port: u16,
    connect_timeout: Duration,
    io_timeout: Duration,
) -> Result<TcpStream, Error> {
    let addr = format!("{host}:{port}");
    let fail = |source| Error::Connect {
        connection,
        addr: addr.clone(),
        source,
    };
    let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs().map_err(fail)?.collect();
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, connect_timeout) {
            Ok(s) => {
                let setup = || -> std::io::Result<()> {
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(io_timeout))?;
                    s.set_write_timeout(Some(io_timeout))
                };
                setup().map_err(fail)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(fail(last))
}

impl RelayClient {
    /// Connects the control and data connections, checks the protocol version, creates the
    /// session and its trace chunk. Bounded by the options' timeouts (host name resolution
    /// excepted: it uses the system resolver).
    pub fn connect(url: &RelayUrl, opts: &SessionOptions) -> Result<RelayClient, Error> {
        opts.validate()?;
        let (t, io) = (opts.connect_timeout, opts.io_timeout);
        let control = connect_one("control", url.host(), url.control_port(), t, io)?;
        let data = connect_one("data", url.host(), url.data_port(), t, io)?;
        let mut c = RelayClient {
            control,
            data,
            minor: wire::PROTOCOL_MINOR,
            session_id: 0,
            output_path: String::new(),
            chunk_id: 0,
            io_timeout: opts.io_timeout,
            streams: Vec::new(),
            by_handle: HashMap::new(),
            broken: None,
            in_flight: VecDeque::new(),
            acked: VecDeque::new(),
            max_in_flight: opts.max_in_flight,
        };

        let during = "the version handshake";
        c.send_command(
            during,
            wire::CMD_VERSION,
            &wire::version_payload(wire::PROTOCOL_MAJOR, wire::PROTOCOL_MINOR),
        )?;
        let reply = c.read_reply(during, 8)?;
        let (major, minor) = wire::parse_version(&reply).map_err(|e| c.garbage(during, e))?;
        if major != wire::PROTOCOL_MAJOR || minor < wire::MIN_PROTOCOL_MINOR {
            return Err(Error::Version { major, minor });
        }
        c.minor = minor.min(wire::PROTOCOL_MINOR);

        let during = "session creation";
        let creation = opts
            .creation_time
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut uuid = [0u8; 16];
        uuid[..8].copy_from_slice(&random_u64(1).to_le_bytes());
        uuid[8..].copy_from_slice(&random_u64(2).to_le_bytes());
        uuid[0] |= 1; // never the nil UUID, which the relay reserves for pre-2.11 peers
        let live_timer_us = opts.live_timer.map_or(0, |t| (t.as_micros() as u32).max(1));
        let payload = wire::create_session_payload(&wire::CreateSession {
            session_name: &opts.session_name,
            hostname: &opts.hostname,
            base_path: &opts.base_path,
            live_timer_us,
            sessiond_uuid: uuid,
            sessiond_session_id: random_u64(3) >> 1,
            creation_time: creation,
        });
        c.send_command(during, wire::CMD_CREATE_SESSION, &payload)?;
        let fixed = c.read_reply(during, 16)?;
        let tail = wire::create_session_reply_tail(&fixed).map_err(|e| c.garbage(during, e))?;
        let mut all = fixed;
        all.extend(c.read_reply(during, tail)?);
        match wire::parse_create_session(&all).map_err(|e| c.garbage(during, e))? {
            Ok((id, path)) => {
                c.session_id = id;
                c.output_path = path;
            }
            Err(code) => return Err(c.refused(during, code, true)),
        }

        // 2.11+ relays attach streams to the session's current trace chunk; an unnamed chunk
        // created before any rotation lives directly in the session directory.
        let during = "trace chunk creation";
        c.send_command(
            during,
            wire::CMD_CREATE_TRACE_CHUNK,
            &wire::create_trace_chunk_payload(c.chunk_id, creation),
        )?;
        c.generic_reply(during, true)?;
        Ok(c)
    }

    /// Checks that a relay at `url` accepts TCP connections on its control and data ports
    /// (within `timeout` each), without creating a session: both connections are closed at
    /// once. The error names the connection and address that failed.
    pub fn probe(url: &RelayUrl, timeout: Duration) -> Result<(), Error> {
        connect_one("control", url.host(), url.control_port(), timeout, timeout)?;
        connect_one("data", url.host(), url.data_port(), timeout, timeout)?;
        Ok(())
    }

    /// The protocol version in use: `(2, minor)`, `minor` in 11..=13.
    pub fn protocol(&self) -> (u32, u32) {
        (wire::PROTOCOL_MAJOR, self.minor)
    }

    /// The relay's id of this session.
    pub fn relay_session_id(&self) -> u64 {
        self.session_id
    }

    /// Where the relay stores the session, relative to its output directory (e.g.
    /// `host-a/demo-20240101-120000`).
    pub fn session_path(&self) -> &str {
        &self.output_path
    }

    /// Whether an earlier error ended the connection (every call now fails with
    /// [`Error::Broken`]).
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// The streams announced so far, in order.
    pub fn streams(&self) -> impl Iterator<Item = &StreamInfo> + '_ {
        self.streams.iter().map(|s| &s.info)
    }

    /// Announces a data stream: the relay writes its packets to
    /// `<session dir>/<path>/<channel>` and their index to `<path>/index/<channel>.idx`.
    /// `path` is relative (e.g. the pid: one CTF trace per process); `channel` a file name.
    /// Viewers see it after the next [`RelayClient::streams_sent`].
    pub fn add_stream(&mut self, path: &str, channel: &str) -> Result<StreamId, Error> {
        if channel == METADATA_CHANNEL {
            return Err(Error::InvalidArgument(
                "the channel name \"metadata\" is reserved: use add_metadata_stream".into(),
            ));
        }
        self.add(path, channel)
    }

    /// Announces the metadata stream of the trace in `path` (written to
    /// `<session dir>/<path>/metadata`). Announce it before, or together with, the data
    /// streams of the same path.
    pub fn add_metadata_stream(&mut self, path: &str) -> Result<StreamId, Error> {
        self.add(path, METADATA_CHANNEL)
    }

    fn add(&mut self, path: &str, channel: &str) -> Result<StreamId, Error> {
        relative_path("stream path", path, wire::MAX_STREAM_PATH)?;
        if path.is_empty() {
            return Err(invalid("stream path", path, "is empty"));
        }
        path_safe_name("channel name", channel, wire::MAX_CHANNEL_NAME)?;
        self.usable()?;
        let during = "stream creation";
        let payload = wire::add_stream_payload(channel, path, self.chunk_id);
        self.send_command(during, wire::CMD_ADD_STREAM, &payload)?;
        let reply = self.read_reply(during, 12)?;
        let handle = match wire::parse_add_stream(&reply).map_err(|e| self.garbage(during, e))? {
            Ok(h) => h,
            Err(code) => return Err(self.refused(during, code, false)),
        };
        if self.by_handle.contains_key(&handle) {
            return Err(self.garbage(
                during,
                wire::ReplyError::Field(format!("stream handle {handle} given twice")),
            ));
        }
        let id = StreamId(handle);
        self.by_handle.insert(handle, self.streams.len());
        self.streams.push(StreamState {
            info: StreamInfo {
                id,
                path: path.to_owned(),
                channel: channel.to_owned(),
                sent: 0,
                closed: false,
            },
            next_seq: 0,
        });
        Ok(id)
    }

    /// Tells the relay that the streams announced so far are complete: it publishes them to
    /// live viewers (and tells attached viewers about new ones). Call it after announcing the
    /// streams of a new process too.
    pub fn streams_sent(&mut self) -> Result<(), Error> {
        self.usable()?;
        let during = "streams-sent";
        self.send_command(during, wire::CMD_STREAMS_SENT, &[])?;
        self.generic_reply(during, false)
    }

    /// Closes one stream (e.g. when its thread's buffer is retired, or its process ends).
    /// The relay finishes writing the packets already sent first.
    pub fn close_stream(&mut self, stream: StreamId) -> Result<(), Error> {
        let i = self.stream_index(stream, self.streams_is_metadata(stream))?;
        self.usable()?;
        let last = self.streams[i].next_seq.wrapping_sub(1); // -1: no packet
        let during = "stream close";
        self.send_command(
            during,
            wire::CMD_CLOSE_STREAM,
            &wire::close_stream_payload(stream.0, last),
        )?;
        self.generic_reply(during, false)?;
        self.streams[i].info.closed = true;
        Ok(())
    }

    /// Waits until the relay has written every packet and index sent on the open data
    /// streams (polling its "data pending" command), at most `timeout`.
    pub fn wait_written(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let mut pending: Vec<usize> = (0..self.streams.len())
            .filter(|&i| {
                let s = &self.streams[i];
                !s.info.closed && !s.info.is_metadata() && s.next_seq > 0
            })
            .collect();
        let during = "data-pending check";
        while !pending.is_empty() {
            self.usable()?;
            let mut still = Vec::new();
            for i in pending {
                let s = &self.streams[i];
                let payload = wire::close_stream_payload(s.info.id.0, s.next_seq - 1);
                self.send_command(during, 8 /* RELAYD_DATA_PENDING */, &payload)?;
                let reply = self.read_reply(during, 4)?;
                match u32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]) {
                    0 => {}
                    1 => still.push(i),
                    other => {
                        return Err(self.garbage(
                            during,
                            wire::ReplyError::Field(format!(
                                "data-pending answer {other} (expected 0 or 1)"
                            )),
                        ))
                    }
                }
            }
            pending = still;
            if !pending.is_empty() {
                if Instant::now() >= deadline {
                    return Err(self.fail(Error::Timeout { during }));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        Ok(())
    }

    /// Ends the session cleanly: waits (up to the I/O timeout) until the relay has written
    /// everything sent, closes every open stream, then both connections. Live viewers see
    /// the session end.
    pub fn close(mut self) -> Result<(), Error> {
        let t = self.io_timeout;
        self.wait_written(t)?;
        let open: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|s| !s.info.closed)
            .map(|s| s.info.id)
            .collect();
        for id in open {
            self.close_stream(id)?;
        }
        let _ = self.data.shutdown(Shutdown::Both);
        let _ = self.control.shutdown(Shutdown::Both);
        Ok(())
    }
}
