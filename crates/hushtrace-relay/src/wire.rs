//! Byte layout of the relay daemon's consumer protocol (LTTng 2.11–2.13 flavour).
//!
//! Every integer on the wire is big-endian and every structure is packed. The control
//! connection carries [`CTRL_HEADER_LEN`]-byte command headers followed by a payload; most
//! commands are answered with a fixed-size reply. The data connection carries
//! [`DATA_HEADER_LEN`]-byte data headers followed by one packet, and is never answered.
//!
//! Encoders return owned buffers; decoders take the exact reply bytes and return
//! [`ReplyError`] on anything unexpected — they never panic, whatever the input
//! (proptest-checked below).

/// `RELAYD_ADD_STREAM`.
pub const CMD_ADD_STREAM: u32 = 1;
/// `RELAYD_CREATE_SESSION`.
pub const CMD_CREATE_SESSION: u32 = 2;
/// `RELAYD_VERSION`.
pub const CMD_VERSION: u32 = 5;
/// `RELAYD_SEND_METADATA` (not answered).
pub const CMD_SEND_METADATA: u32 = 6;
/// `RELAYD_CLOSE_STREAM`.
pub const CMD_CLOSE_STREAM: u32 = 7;
/// `RELAYD_SEND_INDEX`.
pub const CMD_SEND_INDEX: u32 = 13;
/// `RELAYD_STREAMS_SENT`.
pub const CMD_STREAMS_SENT: u32 = 16;
/// `RELAYD_CREATE_TRACE_CHUNK` (2.11+).
pub const CMD_CREATE_TRACE_CHUNK: u32 = 19;

/// The relay's success code (`LTTNG_OK`).
pub const LTTNG_OK: u32 = 10;

/// Protocol major version (LTTng 2.x).
pub const PROTOCOL_MAJOR: u32 = 2;
/// The minor version this client announces; the relay answers with its own and both use the
/// lower one.
pub const PROTOCOL_MINOR: u32 = 13;
/// The oldest minor version whose messages this client writes (trace chunks, variable-length
/// names: LTTng 2.11).
pub const MIN_PROTOCOL_MINOR: u32 = 11;

/// `circuit_id u64, data_size u64, cmd u32, cmd_version u32`.
pub const CTRL_HEADER_LEN: usize = 24;
/// `circuit_id u64, stream_id u64, net_seq_num u64, data_size u32, padding_size u32`.
pub const DATA_HEADER_LEN: usize = 32;
/// Length of a `RELAYD_SEND_INDEX` payload with the 2.8+ fields (index format 1.1).
pub const INDEX_PAYLOAD_LEN: usize = 80;
/// Fixed part of the 2.11 create-session payload, before the names.
pub const CREATE_SESSION_FIXED_LEN: usize = 59;
/// Fixed part of the 2.11 add-stream payload, before the names.
pub const ADD_STREAM_FIXED_LEN: usize = 32;

/// Longest session name the relay accepts, including the terminating NUL (`LTTNG_NAME_MAX`).
pub const MAX_SESSION_NAME: usize = 255;
/// Longest host name the relay accepts, including the NUL (`LTTNG_HOST_NAME_MAX`).
pub const MAX_HOSTNAME: usize = 64;
/// Longest base path the relay accepts, including the NUL (`LTTNG_PATH_MAX`).
pub const MAX_BASE_PATH: usize = 4096;
/// Longest stream path the relay accepts, including the NUL (`LTTNG_NAME_MAX`).
pub const MAX_STREAM_PATH: usize = 255;
/// Longest channel (stream file) name the relay accepts, including the NUL.
pub const MAX_CHANNEL_NAME: usize = 264;

/// A reply that is not what the protocol prescribes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyError {
    /// The reply has the wrong length.
    Length {
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
    /// A field holds a value the protocol does not allow.
    Field(String),
}

impl std::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplyError::Length { expected, got } => {
                write!(f, "reply of {got} bytes where {expected} were expected")
            }
            ReplyError::Field(s) => f.write_str(s),
        }
    }
}

fn be32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_be_bytes(a)
}

fn be64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(a)
}

fn exact(b: &[u8], expected: usize) -> Result<(), ReplyError> {
    if b.len() == expected {
        Ok(())
    } else {
        Err(ReplyError::Length {
            expected,
            got: b.len(),
        })
    }
}

/// A control command: header plus payload, ready to write.
pub fn command(cmd: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(CTRL_HEADER_LEN + payload.len());
    v.extend_from_slice(&0u64.to_be_bytes()); // circuit id: unused
    v.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    v.extend_from_slice(&cmd.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes()); // command version
    v.extend_from_slice(payload);
    v
}

/// The data-connection header announcing one packet of `len` bytes for `stream`.
pub fn data_header(stream: u64, net_seq_num: u64, len: u32) -> [u8; DATA_HEADER_LEN] {
    let mut h = [0u8; DATA_HEADER_LEN];
    h[8..16].copy_from_slice(&stream.to_be_bytes());
    h[16..24].copy_from_slice(&net_seq_num.to_be_bytes());
    h[24..28].copy_from_slice(&len.to_be_bytes());
    // circuit id and padding size stay 0
    h
}

/// `RELAYD_VERSION` payload.
pub fn version_payload(major: u32, minor: u32) -> [u8; 8] {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&major.to_be_bytes());
    p[4..].copy_from_slice(&minor.to_be_bytes());
    p
}

/// Decodes the `RELAYD_VERSION` reply: `(major, minor)`.
pub fn parse_version(b: &[u8]) -> Result<(u32, u32), ReplyError> {
    exact(b, 8)?;
    Ok((be32(b, 0), be32(b, 4)))
}

/// Fields of the 2.11 `RELAYD_CREATE_SESSION` command.
#[derive(Clone, Debug)]
pub struct CreateSession<'a> {
    /// Session name (path-safe).
    pub session_name: &'a str,
    /// Host name (path-safe).
    pub hostname: &'a str,
    /// Directory under `<relay output>/<hostname>/`; empty: `<session name>-<date>-<time>`.
    pub base_path: &'a str,
    /// Live timer in microseconds; 0: not a live session.
    pub live_timer_us: u32,
    /// The "session daemon" instance UUID; must not be nil.
    pub sessiond_uuid: [u8; 16],
    /// The "session daemon" session id.
    pub sessiond_session_id: u64,
    /// Creation time, seconds since the epoch.
    pub creation_time: u64,
}

/// `RELAYD_CREATE_SESSION` payload (2.11 layout: lengths, then NUL-terminated names).
pub fn create_session_payload(c: &CreateSession<'_>) -> Vec<u8> {
    let names = [c.session_name, c.hostname, c.base_path];
    let mut v = Vec::with_capacity(CREATE_SESSION_FIXED_LEN + 64);
    for n in names {
        v.extend_from_slice(&(n.len() as u32 + 1).to_be_bytes());
    }
    v.extend_from_slice(&c.live_timer_us.to_be_bytes());
    v.push(0); // snapshot
    v.push(0); // session name contains creation time
    v.extend_from_slice(&c.sessiond_uuid);
    v.extend_from_slice(&c.sessiond_session_id.to_be_bytes());
    v.extend_from_slice(&c.creation_time.to_be_bytes());
    v.push(0); // current chunk id: not set (a chunk is created with its own command)
    v.extend_from_slice(&0u64.to_be_bytes());
    debug_assert_eq!(v.len(), CREATE_SESSION_FIXED_LEN);
    for n in names {
        v.extend_from_slice(n.as_bytes());
        v.push(0);
    }
    v
}

/// The 2.11 create-session reply: `(relay session id, output path)`, or the relay's error code.
pub fn parse_create_session(b: &[u8]) -> Result<Result<(u64, String), u32>, ReplyError> {
    if b.len() < 16 {
        return Err(ReplyError::Length {
            expected: 16,
            got: b.len(),
        });
    }
    let id = be64(b, 0);
    let code = be32(b, 8);
    let path_len = be32(b, 12) as usize;
    exact(b, 16 + path_len)?;
    if code != LTTNG_OK {
        return Ok(Err(code));
    }
    let path = &b[16..];
    let path = match path.split_last() {
        None => "",
        Some((0, p)) => std::str::from_utf8(p)
            .map_err(|_| ReplyError::Field("output path is not UTF-8".into()))?,
        Some(_) => {
            return Err(ReplyError::Field(
                "output path is not NUL-terminated".into(),
            ))
        }
    };
    Ok(Ok((id, path.to_owned())))
}

/// Length of the create-session reply's variable part, from its 16-byte fixed part.
pub fn create_session_reply_tail(fixed: &[u8]) -> Result<usize, ReplyError> {
    exact(fixed, 16)?;
    let n = be32(fixed, 12) as usize;
    if n > MAX_BASE_PATH * 2 {
        return Err(ReplyError::Field(format!(
            "output path length {n} exceeds the protocol's limit"
        )));
    }
    Ok(n)
}

/// `RELAYD_CREATE_TRACE_CHUNK` payload: chunk id, creation time, no name override.
pub fn create_trace_chunk_payload(chunk_id: u64, creation_time: u64) -> [u8; 20] {
    let mut p = [0u8; 20];
    p[..8].copy_from_slice(&chunk_id.to_be_bytes());
    p[8..16].copy_from_slice(&creation_time.to_be_bytes());
    p
}

/// `RELAYD_ADD_STREAM` payload (2.11 layout).
pub fn add_stream_payload(channel: &str, path: &str, chunk_id: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(ADD_STREAM_FIXED_LEN + channel.len() + path.len() + 2);
    v.extend_from_slice(&(channel.len() as u32 + 1).to_be_bytes());
    v.extend_from_slice(&(path.len() as u32 + 1).to_be_bytes());
    v.extend_from_slice(&0u64.to_be_bytes()); // tracefile size: unlimited
    v.extend_from_slice(&0u64.to_be_bytes()); // tracefile count: unlimited
    v.extend_from_slice(&chunk_id.to_be_bytes());
    v.extend_from_slice(channel.as_bytes());
    v.push(0);
    v.extend_from_slice(path.as_bytes());
    v.push(0);
    v
}

/// The add-stream reply: the relay's stream handle, or its error code.
pub fn parse_add_stream(b: &[u8]) -> Result<Result<u64, u32>, ReplyError> {
    exact(b, 12)?;
    let handle = be64(b, 0);
    match be32(b, 8) {
        LTTNG_OK if handle == u64::MAX => Err(ReplyError::Field(
            "stream handle -1 with a success code".into(),
        )),
        LTTNG_OK => Ok(Ok(handle)),
        code => Ok(Err(code)),
    }
}

/// A generic 4-byte reply: `Ok(())` for `LTTNG_OK`, else the code.
pub fn parse_generic(b: &[u8]) -> Result<Result<(), u32>, ReplyError> {
    exact(b, 4)?;
    match be32(b, 0) {
        LTTNG_OK => Ok(Ok(())),
        code => Ok(Err(code)),
    }
}

/// `RELAYD_SEND_METADATA` payload header (stream handle, padding 0), followed by the bytes.
pub fn metadata_payload(stream: u64, bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(12 + bytes.len());
    v.extend_from_slice(&stream.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(bytes);
    v
}

/// `RELAYD_CLOSE_STREAM` payload.
pub fn close_stream_payload(stream: u64, last_net_seq_num: u64) -> [u8; 16] {
    let mut p = [0u8; 16];
    p[..8].copy_from_slice(&stream.to_be_bytes());
    p[8..].copy_from_slice(&last_net_seq_num.to_be_bytes());
    p
}

/// `RELAYD_SEND_INDEX` payload (index format 1.1: ten big-endian `u64`).
pub fn index_payload(stream: u64, net_seq_num: u64, ix: &crate::PacketIndex) -> Vec<u8> {
    let fields = [
        stream,
        net_seq_num,
        ix.packet_size_bits,
        ix.content_size_bits,
        ix.timestamp_begin,
        ix.timestamp_end,
        ix.events_discarded,
        ix.stream_id,
        ix.stream_instance_id,
        ix.packet_seq_num,
    ];
    let mut v = Vec::with_capacity(INDEX_PAYLOAD_LEN);
    for f in fields {
        v.extend_from_slice(&f.to_be_bytes());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_match_the_packed_structs() {
        let c = CreateSession {
            session_name: "s",
            hostname: "h",
            base_path: "",
            live_timer_us: 1,
            sessiond_uuid: [1; 16],
            sessiond_session_id: 2,
            creation_time: 3,
        };
        assert_eq!(
            create_session_payload(&c).len(),
            CREATE_SESSION_FIXED_LEN + 2 + 2 + 1
        );
        assert_eq!(
            add_stream_payload("c", "p", 0).len(),
            ADD_STREAM_FIXED_LEN + 4
        );
        assert_eq!(command(1, &[9; 3]).len(), CTRL_HEADER_LEN + 3);
        let ix = crate::PacketIndex::default();
        assert_eq!(index_payload(1, 2, &ix).len(), INDEX_PAYLOAD_LEN);
    }

    #[test]
    fn replies() {
        let mut r = 7u64.to_be_bytes().to_vec();
        r.extend_from_slice(&LTTNG_OK.to_be_bytes());
        assert_eq!(parse_add_stream(&r), Ok(Ok(7)));
        r[11] = 11;
        assert_eq!(parse_add_stream(&r), Ok(Err(11)));
        assert!(parse_add_stream(&r[..11]).is_err());
        assert_eq!(parse_generic(&10u32.to_be_bytes()), Ok(Ok(())));
        let mut s = 5u64.to_be_bytes().to_vec();
        s.extend_from_slice(&LTTNG_OK.to_be_bytes());
        s.extend_from_slice(&3u32.to_be_bytes());
        s.extend_from_slice(b"a/\0");
        assert_eq!(parse_create_session(&s), Ok(Ok((5, "a/".into()))));
        let n = s.len();
        s[n - 1] = b'x';
        assert!(parse_create_session(&s).is_err());
    }

    proptest! {
        #[test]
        fn garbage_replies_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_version(&b);
            let _ = parse_create_session(&b);
            let _ = parse_add_stream(&b);
            let _ = parse_generic(&b);
            if b.len() >= 16 {
                let _ = create_session_reply_tail(&b[..16]);
            }
        }

        #[test]
        fn wrong_lengths_are_errors(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(parse_version(&b).is_ok(), b.len() == 8);
            prop_assert!(parse_generic(&b).is_ok() == (b.len() == 4));
            if b.len() != 12 {
                prop_assert!(parse_add_stream(&b).is_err());
            }
        }
    }
}
