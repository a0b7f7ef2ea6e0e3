//! How long the relay client takes to give up: against a relay that never answers (it should
//! take about its I/O timeout), and for each of 50 packets sent after the relay was killed (the
//! first notices, the others fail at once: the client is broken). The tests prove that the
//! client gives up with a clear error (`tests/garbage.rs`, `tests/relayd.rs`); the times are
//! measured here, where a loaded machine makes a number slower, not a test red:
//!
//! ```text
//! cargo bench -p hushtrace-relay --bench give_up
//! ```
//!
//! The killed-relay row needs `lttng-relayd` on `PATH` (skipped, saying so, without it).

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use common::*;
use hushtrace_relay::{split_packets, Error, RelayClient, RelayUrl, SessionOptions};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// Runs: each row's median is reported.
const RUNS: usize = 5;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A relay that accepts both connections and never answers; its address.
fn silent_relay() -> RelayUrl {
    let control = TcpListener::bind("127.0.0.1:0").unwrap();
    let data = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = RelayUrl::new(
        "127.0.0.1",
        control.local_addr().unwrap().port(),
        data.local_addr().unwrap().port(),
    );
    std::thread::spawn(move || {
        let Ok(c) = control.accept() else { return };
        let Ok(d) = data.accept() else { return };
        // Holds both connections open, silent, until the process ends.
        std::thread::sleep(Duration::from_secs(3600));
        drop((c, d));
    });
    url
}

/// The time `connect` takes to fail against a silent relay with I/O timeout `io`.
fn silent(io: Duration) -> Duration {
    let url = silent_relay();
    let opts = SessionOptions::new("s", "h")
        .io_timeout(io)
        .connect_timeout(Duration::from_secs(1));
    let t = Instant::now();
    let e = RelayClient::connect(&url, &opts).expect_err("a silent relay cannot be connected");
    let took = t.elapsed();
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    took
}

/// The time 50 packets take to fail after the relay was killed (I/O timeout 2 s).
fn killed(rec: &Recording) -> Duration {
    let mut relay = hushtrace_testsupport::Relayd::start();
    let opts = SessionOptions::new("killed", "hushhost")
        .base_path("killed")
        .io_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2));
    let mut client = RelayClient::connect(&relay_url(&relay), &opts).expect("connect");
    let p = &rec.processes[0];
    let ids = announce(&mut client, &p.pid.to_string(), p);
    let (_, bytes) = &p.streams[0];
    let packet = split_packets(bytes).next().unwrap().unwrap().0;
    client.send_packet(ids[0], packet).expect("first packet");
    relay.kill();
    let t = Instant::now();
    for _ in 0..50 {
        assert!(client.send_packet(ids[0], packet).is_err());
    }
    t.elapsed()
}

fn main() {
    println!("relay client giving up (median of {RUNS} runs)");
    println!("{:<44} {:>10} {:>12}", "case", "time", "x timeout");
    for io in [100, 300, 1000].map(Duration::from_millis) {
        let took = median((0..RUNS).map(|_| silent(io)).collect());
        println!(
            "{:<44} {:>7.0} ms {:>12.2}",
            format!("silent relay, I/O timeout {} ms", io.as_millis()),
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() / io.as_secs_f64()
        );
    }
    if hushtrace_testsupport::which("lttng-relayd").is_none() {
        println!("killed relay: skipped (lttng-relayd is not on PATH)");
        return;
    }
    let rec = record();
    let took = median((0..RUNS).map(|_| killed(&rec)).collect());
    println!(
        "{:<44} {:>7.0} ms {:>12.2}",
        "50 packets after the relay died, I/O 2 s",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() / 2.0
    );
}
