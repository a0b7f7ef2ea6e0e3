//! Loopback throughput of the relay client against a real `lttng-relayd` (2.13): one index
//! round trip per packet (`send_packet`) against pipelined acknowledgements
//! (`send_packet_nowait`, windows of 1 and 8), same run, each twice, on the packets of a real
//! hushtrace trace (docs/BENCHMARKS.md):
//!
//! ```text
//! cargo bench -p hushtrace-relay --bench throughput
//! ```
//!
//! Without `--bench` (`cargo test --benches`) each row runs for 0.2 s instead of 2 s. Fails
//! when `lttng-relayd` or `babeltrace2` is not on `PATH`.

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use common::*;
use hushtrace_relay::{split_packets, RelayClient, SessionOptions};
use std::time::{Duration, Instant};

fn opts(name: &str) -> SessionOptions {
    SessionOptions::new(name, "hushhost")
        .base_path(name)
        .io_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(2))
}

fn main() {
    for tool in ["lttng-relayd", "babeltrace2"] {
        assert!(
            hushtrace_testsupport::which(tool).is_some(),
            "{tool} is not on PATH (apt-get install lttng-tools babeltrace2; .ci/run installs them)"
        );
    }
    let secs = if std::env::args().any(|a| a == "--bench") {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(200)
    };
    let rec = record();
    let relay = Relayd::start();
    for (name, window) in [("sync", 0), ("window 1", 1), ("window 8", 8)].repeat(2) {
        let pipelined = window > 0;
        let o = opts(&name.replace(' ', "")).max_in_flight(window);
        let mut client = RelayClient::connect(&relay_url(&relay), &o).expect("connect");
        let p = &rec.processes[0];
        let ids = announce(&mut client, &p.pid.to_string(), p);
        let packets: Vec<(&[u8], hushtrace_relay::PacketIndex)> =
            split_packets(&p.streams[0].1).map(|r| r.unwrap()).collect();
        let started = Instant::now();
        let (mut n, mut bytes) = (0u64, 0u64);
        while started.elapsed() < secs {
            for (pk, ix) in &packets {
                if pipelined {
                    client.send_packet_nowait(ids[0], pk, ix).expect("send");
                } else {
                    client.send_packet(ids[0], pk).expect("send");
                }
                n += 1;
                bytes += pk.len() as u64;
            }
        }
        let mut acked = 0u64;
        client
            .collect_acks(|ok| acked += u64::from(ok))
            .expect("acks");
        client.close().expect("close");
        let s = started.elapsed().as_secs_f64();
        println!(
            "{name:>9}: {n} packets of ~{} B in {s:.2} s: {:.0} packets/s, {:.1} MB/s",
            bytes / n,
            n as f64 / s,
            bytes as f64 / s / 1e6
        );
        if pipelined {
            assert_eq!(acked, n, "every pipelined packet acknowledged");
        }
    }
}
