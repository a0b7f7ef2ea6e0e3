//! Against a real `lttng-relayd` (2.13): a real hushtrace trace (two threads and a forked
//! child) streamed through the client, read back with babeltrace2 from the relay's output
//! directory and live; a relay killed mid-stream.

mod common;

use common::*;
use hushtrace_relay::{split_packets, Error, RelayClient, SessionOptions};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn opts(name: &str) -> SessionOptions {
    SessionOptions::new(name, "hushhost")
        .base_path(name)
        .io_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(2))
}

/// Waits until the relay's verbose log (`lttng-relayd -v`) holds every one of `lines`; fails
/// naming `what` after a 60 s watchdog (a hang, not slowness).
fn wait_for_log(relay: &Relayd, lines: &[&str], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = relay.stderr();
        if lines.iter().all(|l| log.contains(l)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what} (relayd log lines {lines:?}); relayd log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn streamed_trace_reads_back_with_exact_counts() {
    let rec = record();
    let local = count_events(&babeltrace(&rec.root));
    let mut relay = Relayd::start();
    let mut client = RelayClient::connect(&relay_url(&relay), &opts("exact")).expect("connect");
    assert_eq!(client.protocol(), (2, 13));
    assert_eq!(client.session_path(), "hushhost/exact");
    let mut packets = 0;
    for p in &rec.processes {
        let ids = announce(&mut client, &p.pid.to_string(), p);
        packets += send_all(&mut client, &ids, p);
    }
    assert!(
        packets > 4,
        "the trace should span several packets, got {packets}"
    );
    client.close().expect("close");

    let session_dir = relay.traces().join("hushhost/exact");
    for p in &rec.processes {
        let d = session_dir.join(p.pid.to_string());
        assert_eq!(std::fs::read(d.join("metadata")).unwrap(), p.metadata);
        for (name, bytes) in &p.streams {
            assert_eq!(&std::fs::read(d.join(name)).unwrap(), bytes, "{name}");
            assert!(d.join("index").join(format!("{name}.idx")).is_file());
        }
    }
    let text = babeltrace(&session_dir);
    let counts = count_events(&text);
    assert_eq!(counts, local, "relay copy differs from the local trace");
    assert_eq!(by_process(&counts), expected(&rec));
    assert_eq!(counts.get(&(rec.child, rec.child)), Some(&CHILD_MAIN));
    relay.stop();
}

#[test]
fn live_viewer_sees_events_before_the_session_closes() {
    let rec = record();
    let relay = Relayd::start();
    let mut client = RelayClient::connect(&relay_url(&relay), &opts("livesess")).expect("connect");
    // the parent process first; the forked child's streams arrive later, as in a real run
    let parent = &rec.processes[0];
    let parent_ids = announce(&mut client, &parent.pid.to_string(), parent);

    let url = relay.live_url("hushhost", "livesess");
    let mut viewer = Command::new("babeltrace2")
        .args(["--input-format=lttng-live", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("babeltrace2");
    let rx = hushtrace_testsupport::stdout_lines(&mut viewer);
    // A live viewer starts at the newest data: the data goes out once it is attached, which
    // it is when it polls for its streams' next index.
    wait_for_log(
        &relay,
        &["Viewer get next index"],
        "the live viewer to attach",
    );

    send_all(&mut client, &parent_ids, parent);
    let child = &rec.processes[1];
    let child_ids = announce(&mut client, &child.pid.to_string(), child);
    send_all(&mut client, &child_ids, child);
    // idle streams: tell the viewer there is nothing more before the last timestamp
    let end = rec
        .processes
        .iter()
        .flat_map(|p| p.streams.iter())
        .flat_map(|(_, b)| split_packets(b).map(|r| r.unwrap().1.timestamp_end))
        .max()
        .unwrap();
    for &id in parent_ids.iter().chain(&child_ids) {
        client.send_beacon(id, 0, end).expect("beacon");
    }

    let want: u64 = PARENT_MAIN + PARENT_WORKER + CHILD_MAIN + CHILD_WORKER;
    let mut seen = String::new();
    let mut n = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    while n < want && Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                if line.contains("relaytest:ev") {
                    n += 1;
                    seen.push_str(&line);
                    seen.push('\n');
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // keep the beacons fresh while the viewer catches up
                for &id in parent_ids.iter().chain(&child_ids) {
                    client.send_beacon(id, 0, end).expect("beacon");
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    assert!(
        viewer.try_wait().unwrap().is_none(),
        "the viewer ended before the session closed"
    );
    let counts_before_close = count_events(&seen);
    client.close().expect("close");
    let status = hushtrace_testsupport::wait_or_kill(&mut viewer, Duration::from_secs(20));
    assert_eq!(
        n,
        want,
        "live viewer saw {n} of {want} events before the close; relayd log:\n{}",
        relay.stderr()
    );
    assert_eq!(by_process(&counts_before_close), expected(&rec));
    assert!(
        status.is_some(),
        "the viewer did not end after the session closed"
    );
}

#[test]
fn killed_relay_gives_errors_not_hangs() {
    let rec = record();
    let mut relay = Relayd::start();
    let io = Duration::from_secs(2);
    let mut client =
        RelayClient::connect(&relay_url(&relay), &opts("killed").io_timeout(io)).expect("connect");
    let p = &rec.processes[0];
    let ids = announce(&mut client, &p.pid.to_string(), p);
    let packets: Vec<&[u8]> = p
        .streams
        .iter()
        .flat_map(|(_, b)| split_packets(b).map(|r| r.unwrap().0))
        .collect();
    client
        .send_packet(ids[0], packets[0])
        .expect("first packet");
    relay.kill();

    // (How long these sends take is measured by benches/give_up.rs.)
    let mut delivered = 0;
    let mut lost = 0;
    let mut first_err = None;
    for _ in 0..50 {
        match client.send_packet(ids[0], packets[0]) {
            Ok(_) => delivered += 1,
            Err(e) => {
                assert!(e.connection_lost(), "{e}");
                lost += 1;
                first_err.get_or_insert(e);
            }
        }
    }
    let e = first_err.expect("sending to a killed relay must fail");
    assert!(
        matches!(
            e,
            Error::Closed { .. } | Error::Io { .. } | Error::Timeout { .. }
        ),
        "{e:?}"
    );
    assert_eq!(delivered, 0, "{e}");
    assert_eq!(lost, 50);
    assert!(client.is_broken());
    assert!(matches!(client.close(), Err(Error::Broken { .. })));

    // a new client to the dead relay: a clear connect error, at once
    let err = RelayClient::connect(&relay_url(&relay), &opts("killed")).unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains("lttng-relayd"), "{err}");
}

#[test]
fn reconnect_announces_a_new_session() {
    let rec = record();
    let mut relay = Relayd::start();
    let p = &rec.processes[1];
    let packets: Vec<&[u8]> = p
        .streams
        .iter()
        .flat_map(|(_, b)| split_packets(b).map(|r| r.unwrap().0))
        .collect();
    // first connection: drop it abruptly mid-session (as after a failure)
    let mut first = RelayClient::connect(&relay_url(&relay), &opts("recon")).unwrap();
    let ids = announce(&mut first, "a", p);
    first.send_packet(ids[0], packets[0]).unwrap();
    let announced: Vec<_> = first
        .streams()
        .map(|s| (s.path.clone(), s.channel.clone()))
        .collect();
    drop(first);
    // second connection: same streams under a new path; the whole process's trace
    let mut second = RelayClient::connect(&relay_url(&relay), &opts("recon2")).unwrap();
    assert_eq!(announced.len(), p.streams.len() + 1);
    let ids = announce(&mut second, "b", p);
    let n = send_all(&mut second, &ids, p);
    assert_eq!(n, packets.len());
    second.close().unwrap();
    let text = babeltrace(&relay.traces().join("hushhost/recon2"));
    let counts = by_process(&count_events(&text));
    assert_eq!(
        counts.get(&rec.child),
        Some(&vec![CHILD_WORKER, CHILD_MAIN])
    );
    relay.stop();
}

#[test]
fn relay_log_has_no_errors() {
    let rec = record();
    let mut relay = Relayd::start();
    let mut client = RelayClient::connect(&relay_url(&relay), &opts("clean")).expect("connect");
    for p in &rec.processes {
        let ids = announce(&mut client, &p.pid.to_string(), p);
        send_all(&mut client, &ids, p);
        for &id in &ids {
            client.send_beacon(id, 0, u64::MAX / 2).expect("beacon");
        }
    }
    client.close().expect("close");
    // What the relay logs about the session happens before it notes both connections closed.
    wait_for_log(
        &relay,
        &["Control connection closed", "Data connection closed"],
        "the relay to close the connections",
    );
    relay.stop();
    let log = relay.stderr();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Error:") || l.contains("ERROR") || l.contains("PERROR"))
        .collect();
    assert!(
        errors.is_empty(),
        "relayd reported errors:\n{}",
        errors.join("\n")
    );
}
