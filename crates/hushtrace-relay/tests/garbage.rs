//! A fake relay that answers garbage, nothing, or hangs up: the client returns errors naming
//! the problem — never a panic, never a hang. (How long it takes to give up is measured by
//! `benches/give_up.rs`, not asserted here.)

use hushtrace_relay::wire;
use hushtrace_relay::{Error, RelayClient, RelayUrl, SessionOptions};
use proptest::prelude::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the fake relay does after each command it reads on the control connection.
#[derive(Clone, Debug)]
enum Step {
    /// Writes these bytes.
    Answer(Vec<u8>),
    /// Writes nothing and keeps the connection open for this long.
    Silence(Duration),
    /// Closes both connections.
    HangUp,
}

struct Fake {
    url: RelayUrl,
    _thread: JoinHandle<()>,
}

fn read_command(s: &mut TcpStream) -> Option<u32> {
    let mut h = [0u8; wire::CTRL_HEADER_LEN];
    s.read_exact(&mut h).ok()?;
    let len = u64::from_be_bytes(h[8..16].try_into().unwrap());
    let cmd = u32::from_be_bytes(h[16..20].try_into().unwrap());
    let mut payload = vec![0u8; len.min(1 << 20) as usize];
    s.read_exact(&mut payload).ok()?;
    Some(cmd)
}

fn fake(script: Vec<Step>) -> Fake {
    let control = TcpListener::bind("127.0.0.1:0").unwrap();
    let data = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = RelayUrl::new(
        "127.0.0.1",
        control.local_addr().unwrap().port(),
        data.local_addr().unwrap().port(),
    );
    let thread = std::thread::spawn(move || {
        let Ok((mut c, _)) = control.accept() else {
            return;
        };
        let Ok((_d, _)) = data.accept() else { return };
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for step in script {
            if read_command(&mut c).is_none() {
                return;
            }
            match step {
                Step::Answer(b) => {
                    if c.write_all(&b).is_err() {
                        return;
                    }
                }
                Step::Silence(d) => std::thread::sleep(d),
                Step::HangUp => return,
            }
        }
    });
    Fake {
        url,
        _thread: thread,
    }
}

fn version_reply(major: u32, minor: u32) -> Vec<u8> {
    wire::version_payload(major, minor).to_vec()
}

fn session_reply(id: u64, code: u32, path: &[u8]) -> Vec<u8> {
    let mut v = id.to_be_bytes().to_vec();
    v.extend_from_slice(&code.to_be_bytes());
    v.extend_from_slice(&(path.len() as u32).to_be_bytes());
    v.extend_from_slice(path);
    v
}

fn ok() -> Vec<u8> {
    wire::LTTNG_OK.to_be_bytes().to_vec()
}

fn opts(io: Duration) -> SessionOptions {
    SessionOptions::new("s", "h")
        .io_timeout(io)
        .connect_timeout(Duration::from_secs(1))
}

/// Runs `f` on a thread of its own and returns what it returns; fails the test if it has not
/// returned after [`WATCHDOG`]: a hang, not slowness (the client gives up within its I/O
/// timeout, well under a second here).
fn no_hang<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} hung (no result in {WATCHDOG:?})"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// How long a test waits before it calls the client hung.
const WATCHDOG: Duration = Duration::from_secs(60);

fn connect(script: Vec<Step>, io: Duration) -> Result<RelayClient, Error> {
    // the fake's thread ends with its script; it is not joined (a silent one sleeps)
    let f = fake(script);
    RelayClient::connect(
        &f.url,
        &opts(io).max_in_flight(hushtrace_relay::MAX_IN_FLIGHT),
    )
}

#[test]
fn a_good_fake_session_works() {
    let mut stream = 7u64.to_be_bytes().to_vec();
    stream.extend_from_slice(&ok());
    let script = vec![
        Step::Answer(version_reply(2, 13)),
        Step::Answer(session_reply(1, wire::LTTNG_OK, b"h/s\0")),
        Step::Answer(ok()),
        Step::Answer(stream),
        Step::Answer(ok()),
    ];
    let mut c = connect(script, Duration::from_secs(2)).expect("connect");
    assert_eq!(c.session_path(), "h/s");
    let id = c.add_metadata_stream("1").unwrap();
    assert_eq!(id.handle(), 7);
    c.streams_sent().unwrap();
}

#[test]
fn refused_connection_is_a_connect_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // closed again: nobody listens there
    let e = RelayClient::connect(
        &RelayUrl::new("127.0.0.1", port, port),
        &opts(Duration::from_secs(1)),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Connect {
                connection: "control",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("127.0.0.1"), "{e}");
}

#[test]
fn old_or_foreign_versions_are_refused() {
    for (major, minor) in [(2, 10), (3, 0), (0, 0), (u32::MAX, u32::MAX)] {
        let e = connect(
            vec![Step::Answer(version_reply(major, minor))],
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Version { .. }), "{e:?}");
        assert!(e.to_string().contains("2.11"), "{e}");
    }
}

/// A relay that stays silent longer than the watchdog: only the client's own I/O timeout can
/// end the wait, with a timeout error (a hang fails the test after the watchdog).
#[test]
fn silence_is_a_timeout_not_a_hang() {
    let e = no_hang("connect to a silent relay", || {
        connect(
            vec![Step::Silence(2 * WATCHDOG)],
            Duration::from_millis(300),
        )
        .map(|_| ())
    })
    .unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
}

#[test]
fn hang_up_is_closed() {
    for at in 0..3 {
        let mut script = vec![
            Step::Answer(version_reply(2, 13)),
            Step::Answer(session_reply(1, wire::LTTNG_OK, b"h/s\0")),
        ];
        script.truncate(at);
        script.push(Step::HangUp);
        let e = connect(script, Duration::from_secs(2)).unwrap_err();
        assert!(matches!(e, Error::Closed { .. }), "step {at}: {e:?}");
    }
}

#[test]
fn refused_session_and_bad_path() {
    let e = connect(
        vec![
            Step::Answer(version_reply(2, 13)),
            Step::Answer(session_reply(0, 12, b"")),
        ],
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Refused { code: 12, .. }), "{e:?}");
    let e = connect(
        vec![
            Step::Answer(version_reply(2, 13)),
            Step::Answer(session_reply(1, wire::LTTNG_OK, b"no-nul")),
        ],
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Garbage at any step of the connection (and of a stream creation afterwards) is an
    /// error, never a panic or a hang.
    #[test]
    fn garbage_at_any_step(step in 0usize..4, junk in proptest::collection::vec(any::<u8>(), 0..40)) {
        let mut script = vec![
            Step::Answer(version_reply(2, 13)),
            Step::Answer(session_reply(1, wire::LTTNG_OK, b"h/s\0")),
            Step::Answer(ok()),
            Step::Answer(ok()),
        ];
        script.truncate(step);
        script.push(Step::Answer(junk));
        script.push(Step::HangUp);
        let errors = no_hang("the client on garbage", move || {
            let mut errors = Vec::new();
            match connect(script, Duration::from_millis(500)) {
                Ok(mut c) => {
                    if let Err(e) = c.add_stream("1", "stream_0") {
                        errors.push(e.to_string());
                    }
                    // whatever happened, the client answers from now on
                    let _ = c.streams_sent();
                }
                Err(e) => errors.push(e.to_string()),
            }
            errors
        });
        for e in errors {
            prop_assert!(!e.is_empty());
        }
    }
}

/// A client connected to a fake relay that accepts the session and one data stream, then
/// answers the commands after that with `after` (index acknowledgements, mostly); the stream.
fn pipelined_client(after: Vec<Step>) -> (RelayClient, hushtrace_relay::StreamId) {
    let mut stream = 9u64.to_be_bytes().to_vec();
    stream.extend_from_slice(&ok());
    let mut script = vec![
        Step::Answer(version_reply(2, 13)),
        Step::Answer(session_reply(1, wire::LTTNG_OK, b"h/s\0")),
        Step::Answer(ok()), // trace chunk
        Step::Answer(stream),
        Step::Answer(ok()), // streams sent
    ];
    script.extend(after);
    let mut c = connect(script, Duration::from_secs(2)).expect("connect");
    let id = c.add_stream("1", "stream_0").unwrap();
    c.streams_sent().unwrap();
    (c, id)
}

/// A 64-byte packet and its index (the fake relay reads neither).
fn small_packet() -> ([u8; 64], hushtrace_relay::PacketIndex) {
    let index = hushtrace_relay::PacketIndex {
        packet_size_bits: 64 * 8,
        content_size_bits: 64 * 8,
        ..Default::default()
    };
    ([0u8; 64], index)
}

/// Pipelined packets: the relay's answers to their indexes are handed over in order, a refused
/// one as `false` (that packet alone is lost), and a command sent meanwhile reads its own reply,
/// not an index acknowledgement.
#[test]
fn pipelined_acks_keep_their_order_and_refusals() {
    let refused = 1u32.to_be_bytes().to_vec();
    let (mut c, id) = pipelined_client(vec![
        Step::Answer(ok()), // index 0
        Step::Answer(refused.clone()),
        Step::Answer(ok()),    // index 2
        Step::Answer(ok()),    // streams sent again: must not be taken as an ack
        Step::Answer(refused), // index 3
        Step::Answer(ok()),    // index 4
    ]);
    let (packet, index) = small_packet();
    for _ in 0..3 {
        c.send_packet_nowait(id, &packet, &index).unwrap();
    }
    assert_eq!(c.in_flight(), 3);
    c.streams_sent().unwrap(); // reads the three acks first, then its own reply
    assert_eq!(c.in_flight(), 0);
    for _ in 0..2 {
        c.send_packet_nowait(id, &packet, &index).unwrap();
    }
    let mut acks = Vec::new();
    c.collect_acks(|ok| acks.push(ok)).unwrap();
    assert_eq!(acks, [true, false, true, false, true]);
    assert!(
        !c.is_broken(),
        "a refused index does not break the connection"
    );
    let sent = c.streams().find(|s| s.id == id).unwrap().sent;
    assert_eq!(sent, 3, "only accepted packets count as sent");
}

/// A connection that goes away with packets in flight: `collect_acks` hands over the answers
/// that arrived, then the error; the rest are still in flight (lost), never reported as sent.
#[test]
fn pipelined_acks_after_a_hang_up() {
    let (mut c, id) = pipelined_client(vec![
        Step::Answer(ok()), // index 0
        Step::HangUp,       // index 1: no answer
    ]);
    let (packet, index) = small_packet();
    let mut sent = 0;
    for _ in 0..3 {
        // the third send may already see the hang-up
        if c.send_packet_nowait(id, &packet, &index).is_ok() {
            sent += 1;
        }
    }
    let mut acks = Vec::new();
    let r = c.collect_acks(|ok| acks.push(ok));
    assert!(r.is_err(), "the hang-up is reported");
    assert_eq!(acks, [true], "only the answered packet is acknowledged");
    assert_eq!(
        c.in_flight(),
        sent - 1,
        "the unanswered ones stay in flight"
    );
    assert!(c.is_broken());
}

/// More packets than [`hushtrace_relay::MAX_IN_FLIGHT`]: the oldest answers are read to make
/// room, kept, and handed over with the rest, all in order.
#[test]
fn pipelined_window_keeps_every_answer() {
    let n = hushtrace_relay::MAX_IN_FLIGHT + 10;
    // every seventh index refused
    let answers = (0..n).map(|i| {
        Step::Answer(if i % 7 == 3 {
            2u32.to_be_bytes().to_vec()
        } else {
            ok()
        })
    });
    let (mut c, id) = pipelined_client(answers.collect());
    let (packet, index) = small_packet();
    for _ in 0..n {
        c.send_packet_nowait(id, &packet, &index).unwrap();
        assert!(c.in_flight() <= hushtrace_relay::MAX_IN_FLIGHT);
    }
    let mut acks = Vec::new();
    c.collect_acks(|ok| acks.push(ok)).unwrap();
    let want: Vec<bool> = (0..n).map(|i| i % 7 != 3).collect();
    assert_eq!(acks, want);
}
