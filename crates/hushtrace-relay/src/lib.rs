//! A client of the LTTng 2.13 relay daemon's consumer protocol, for streaming hushtrace's
//! CTF 1.8 traces to `lttng-relayd` — where they are stored per host and session, and followed
//! live with `babeltrace2 --input-format=lttng-live net://RELAY:5344/host/HOST/SESSION` or
//! Trace Compass.
//!
//! * [`RelayUrl`]: `net://HOST[:CONTROL_PORT[:DATA_PORT]]` (defaults 5342, 5343).
//! * [`RelayClient`]: one relay session over a control and a data connection: version
//!   handshake, session and trace chunk, streams (per process: a metadata stream and one per
//!   stream file, under a path such as the pid), metadata, packets with their index entries,
//!   live beacons, "streams sent", stream close, clean close.
//! * [`PacketIndex`], [`split_packets`]: the index values of hushtrace packets, read from
//!   their header and context.
//!
//! Synchronous: std `TcpStream`s with connect, read and write timeouts, for a plain consumer
//! thread; nothing blocks forever. The protocol is defined by lttng-tools
//! (`src/common/sessiond-comm/relayd.h`, `src/common/relayd/relayd.c`,
//! `src/bin/lttng-relayd/main.c`); this crate implements the 2.11+ flavour, which 2.11 – 2.13
//! relays speak.
//!
//! ```no_run
//! use hushtrace_relay::{RelayClient, RelayUrl, SessionOptions};
//!
//! let url: RelayUrl = "net://127.0.0.1".parse()?;
//! let mut relay = RelayClient::connect(&url, &SessionOptions::new("demo", "host-a"))?;
//! let meta = relay.add_metadata_stream("4242")?;
//! relay.send_metadata(meta, b"/* CTF 1.8 */ ...")?;
//! relay.streams_sent()?;
//! relay.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod client;
mod error;
mod index;
mod url;
pub mod wire;

pub use client::{
    RelayClient, SessionOptions, StreamId, StreamInfo, DEFAULT_IN_FLIGHT, MAX_IN_FLIGHT,
    METADATA_CHANNEL,
};
pub use error::Error;
pub use index::{split_packets, PacketError, PacketIndex};
pub use url::{RelayUrl, UrlError, DEFAULT_CONTROL_PORT, DEFAULT_DATA_PORT};
