//! 10,000 short-lived threads, each writing a few events, leave memory bounded (buffers of
//! exited threads are drained and recycled) and every event is accounted: written + discarded
//! equals what was emitted, and babeltrace2 shows exactly the written events.

mod common;

use std::collections::HashMap;

/// Resident set size of this process, in KiB.
fn vm_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmRSS value")
}

/// Open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn ten_thousand_short_lived_threads_bounded_and_accounted() {
    const THREADS: u64 = 10_000;
    const BATCH: u64 = 50;
    const PER_THREAD: u64 = 5;
    let dir = common::temp_dir("threads");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(4)
        .start()
        .expect("start session");
    let rss_before = vm_rss_kib();
    let fds_before = open_fds();
    let mut rss_mid = 0;
    let mut fds_max = 0;
    for b in 0..THREADS / BATCH {
        let handles: Vec<_> = (0..BATCH)
            .map(|i| {
                let id = b * BATCH + i;
                std::thread::spawn(move || {
                    for k in 0..PER_THREAD {
                        hushtrace::event!("short", "ev", id = id, k = k);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("short-lived thread");
        }
        fds_max = fds_max.max(open_fds());
        if b == THREADS / BATCH / 2 {
            rss_mid = vm_rss_kib();
        }
    }
    let rss_after = vm_rss_kib();
    let stats = session.stop().expect("stop session");
    let growth_mib = rss_after.saturating_sub(rss_before) / 1024;
    eprintln!(
        "VmRSS before {rss_before} KiB, half-way {rss_mid} KiB, after {rss_after} KiB; \
         fds before {fds_before}, max {fds_max}; {stats:?}"
    );
    assert!(
        growth_mib < 200,
        "VmRSS grew by {growth_mib} MiB over {THREADS} threads"
    );
    // Recycling, not accumulation: the second half of the run adds little. (Without recycling
    // each of its 5,000 threads would leave at least one touched 4 KiB page: 20 MiB.)
    let late_growth_mib = rss_after.saturating_sub(rss_mid) / 1024;
    assert!(
        late_growth_mib < 16,
        "VmRSS still growing: +{late_growth_mib} MiB in the second half"
    );
    // No file left open once the session stopped. (How many are open at once depends on how
    // far the consumer lags behind thread exits; the stop above would have failed if the
    // process had run out of descriptors.)
    let fds_after = open_fds();
    assert!(
        fds_after <= fds_before,
        "files left open after the stop: {fds_before} before, {fds_after} after"
    );
    // One stream file per buffer ever created (a recycled buffer continues its stream).
    let streams = std::fs::read_dir(&stats.trace_dir)
        .expect("trace dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("stream_"))
        })
        .count();
    eprintln!("{streams} stream files, at most {fds_max} descriptors open at once");

    let total = THREADS * PER_THREAD;
    assert_eq!(
        stats.events_written + stats.events_discarded,
        total,
        "every event written or discarded: {stats:?}"
    );
    let events = common::babeltrace(&dir, stats.events_discarded > 0);
    assert_eq!(
        events.len() as u64,
        stats.events_written,
        "babeltrace count == written"
    );
    // Each thread's events are in order and share one vtid (one packet identity).
    let mut per: HashMap<i128, (u32, i128)> = HashMap::new();
    for e in &events {
        assert_eq!(e.name, "short:ev");
        assert_eq!(e.vpid, std::process::id());
        let id = e.int("id");
        let k = e.int("k");
        match per.get_mut(&id) {
            None => {
                per.insert(id, (e.vtid, k));
            }
            Some((vtid, last)) => {
                assert_eq!(*vtid, e.vtid, "thread {id} changes vtid");
                assert!(k > *last, "thread {id}: k out of order");
                *last = k;
            }
        }
    }
    if stats.events_discarded == 0 {
        assert_eq!(per.len() as u64, THREADS, "events of every thread present");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
