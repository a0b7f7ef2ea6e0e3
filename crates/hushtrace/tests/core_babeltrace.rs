//! The real `babeltrace2` reads what the library wrote, with no warning: event counts, names,
//! field values of every type (string cap at a character boundary included), per-stream
//! timestamp order, and the per-packet thread identity (vpid, vtid, procname). Also the
//! `count` example as a subprocess.

mod common;

use common::BtEvent;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Barrier, Mutex};

/// Sessions are process-global: the in-process session tests of this file run one at a time.
static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Events of one stream (one vtid) must have non-decreasing timestamps, in output order.
fn assert_stream_order(events: &[BtEvent]) {
    let mut last: BTreeMap<u32, i128> = BTreeMap::new();
    for e in events {
        let prev = last.insert(e.vtid, e.ts_ns);
        if let Some(p) = prev {
            assert!(
                p <= e.ts_ns,
                "timestamps go backwards in the stream of vtid {}: {p} then {} ({e:?})",
                e.vtid,
                e.ts_ns
            );
        }
    }
}

/// A string longer than `STR_CAP` whose byte `STR_CAP` is inside a 3-byte character:
/// `"a"` + 100 × `"€"` = 301 bytes; character boundaries are at 1 + 3k, so the last boundary
/// at or below 255 is 253.
fn long_string() -> String {
    let mut s = String::from("a");
    for _ in 0..100 {
        s.push('€');
    }
    s
}

const THREADS: usize = 3;
const PER_THREAD: u64 = 300;

/// What thread `t` records as its `k`-th pair of events.
struct Expected {
    u8v: u8,
    u16v: u16,
    u32v: u32,
    u64v: u64,
    i8v: i8,
    i16v: i16,
    i32v: i32,
    i64v: i64,
    f: f64,
    b: bool,
    dynamic: String,
}

fn expected(t: usize, k: u64) -> Expected {
    // Extremes on the first events, then values that vary with k.
    match k {
        0 => Expected {
            u8v: u8::MAX,
            u16v: u16::MAX,
            u32v: u32::MAX,
            u64v: u64::MAX,
            i8v: i8::MIN,
            i16v: i16::MIN,
            i32v: i32::MIN,
            i64v: i64::MIN,
            f: -1234.5,
            b: true,
            dynamic: format!("thread {t}, first"),
        },
        1 => Expected {
            u8v: 0,
            u16v: 0,
            u32v: 0,
            u64v: 0,
            i8v: i8::MAX,
            i16v: i16::MAX,
            i32v: i32::MAX,
            i64v: i64::MAX,
            f: 0.0,
            b: false,
            // Not the empty string: babeltrace2 2.0.x prints an empty string field with the
            // value of the same field in an earlier event (fixed upstream after 2.0.4, see
            // https://review.lttng.org/c/babeltrace/+/4528); the bytes hushtrace writes are
            // right. A NUL inside a string ends it (CTF strings are NUL-terminated).
            dynamic: "nul\0cut".to_string(),
        },
        _ => Expected {
            u8v: (k * 7) as u8,
            u16v: (k * 301) as u16,
            u32v: (k * 100_003) as u32,
            u64v: k * 1_000_000_007 + t as u64,
            i8v: -((k % 128) as i8),
            i16v: -((k * 97) as i16),
            i32v: -((k * 100_019) as i32),
            i64v: -((k * 1_000_000_009) as i64),
            f: k as f64 * 0.25 - 10.0,
            b: k.is_multiple_of(3),
            dynamic: format!("t{t} k{k} é✓"),
        },
    }
}

/// Thread 0 hits every callsite first and then releases the other threads at `warm`, so that
/// this test does not depend on concurrent first hits (see `core_first_hit.rs` for those).
fn worker(t: usize, long: &str, warm: &Barrier) -> u32 {
    // Context before the first event: registered with a buffer, then renamed, so the first
    // packet already carries the new name.
    if t == 0 {
        hushtrace::init_thread();
    } else {
        warm.wait();
    }
    hushtrace::set_thread_name(&format!("ht-bt-{t}"));
    let tid = gettid();
    {
        let _g = hushtrace::span!("types", "span", thread = t as u32);
        hushtrace::counter!("types", "counter", 42u32 + t as u32);
    }
    for k in 0..PER_THREAD {
        let e = expected(t, k);
        hushtrace::event!(
            "types",
            "ints",
            thread = t as u32,
            k = k,
            a_u8 = e.u8v,
            a_u16 = e.u16v,
            a_u32 = e.u32v,
            a_u64 = e.u64v,
            a_i8 = e.i8v,
            a_i16 = e.i16v,
            a_i32 = e.i32v,
            a_i64 = e.i64v,
        );
        hushtrace::event!(
            "types",
            "misc",
            thread = t as u32,
            k = k,
            f = e.f,
            flag = e.b,
            stat = "static-str",
            dynamic = e.dynamic.as_str(),
            long = long,
        );
        if t == 0 && k == 0 {
            warm.wait();
        }
    }
    tid
}

#[test]
fn babeltrace_reads_every_type_name_identity_and_order() {
    let _l = lock();
    let dir = common::temp_dir("bt-types");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096) // many packets per stream
        .num_subbufs(64)
        .start()
        .expect("start session");
    let long = long_string();
    let warm = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let long = long.clone();
            let warm = warm.clone();
            std::thread::spawn(move || worker(t, &long, &warm))
        })
        .collect();
    let tids: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let stats = session.stop().expect("stop session");

    let per_thread = PER_THREAD * 2 + 3; // ints + misc per k, span begin/end, counter
    let total = per_thread * THREADS as u64;
    assert_eq!(stats.events_discarded, 0, "{stats:?}");
    assert_eq!(stats.events_written, total, "{stats:?}");
    let events = common::babeltrace(&dir, false);
    assert_eq!(events.len() as u64, total, "babeltrace event count");
    assert_stream_order(&events);

    let pid = std::process::id();
    let cut = &long[..253];
    assert_eq!(cut.len(), 253);
    assert!(cut.len() <= hushtrace::STR_CAP);
    let mut next_k = [[0u64; 2]; THREADS];
    let mut tail = [0u8; THREADS];
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for e in &events {
        *names.entry(e.name.clone()).or_default() += 1;
        assert_eq!(e.vpid, pid, "vpid of {e:?}");
        let t = tids
            .iter()
            .position(|&tid| tid == e.vtid)
            .unwrap_or_else(|| panic!("vtid of {e:?} is none of the workers' tids {tids:?}"));
        assert_eq!(e.procname, format!("ht-bt-{t}"), "procname of {e:?}");
        match e.name.as_str() {
            "types:ints" | "types:misc" => {
                assert_eq!(e.int("thread"), t as i128, "{e:?}");
                assert_eq!(tail[t], 3, "the span comes first in each stream: {e:?}");
                let which = usize::from(e.name == "types:misc");
                let k = e.int("k") as u64;
                assert_eq!(k, next_k[t][which], "events of a thread in order: {e:?}");
                next_k[t][which] += 1;
                let x = expected(t, k);
                if which == 0 {
                    assert_eq!(e.int("a_u8"), x.u8v as i128, "{e:?}");
                    assert_eq!(e.int("a_u16"), x.u16v as i128, "{e:?}");
                    assert_eq!(e.int("a_u32"), x.u32v as i128, "{e:?}");
                    assert_eq!(e.int("a_u64"), x.u64v as i128, "{e:?}");
                    assert_eq!(e.int("a_i8"), x.i8v as i128, "{e:?}");
                    assert_eq!(e.int("a_i16"), x.i16v as i128, "{e:?}");
                    assert_eq!(e.int("a_i32"), x.i32v as i128, "{e:?}");
                    assert_eq!(e.int("a_i64"), x.i64v as i128, "{e:?}");
                    assert_eq!(e.fields.len(), 10, "{e:?}");
                } else {
                    let f: f64 = e.fields["f"]
                        .parse()
                        .unwrap_or_else(|_| panic!("f64 field not a number: {e:?}"));
                    assert_eq!(f, x.f, "{e:?}");
                    assert_eq!(e.int("flag"), i128::from(x.b), "{e:?}");
                    assert_eq!(e.fields["stat"], "static-str", "{e:?}");
                    let want = x.dynamic.split('\0').next().unwrap();
                    assert_eq!(e.fields["dynamic"], want, "{e:?}");
                    assert_eq!(
                        e.fields["long"], cut,
                        "a string longer than STR_CAP is cut at the last char boundary"
                    );
                    assert_eq!(e.fields.len(), 7, "{e:?}");
                }
            }
            // Per thread, in stream order: span begin (with its field), counter, span end, then
            // the k events (checked by `next_k`).
            "types:span" if tail[t] == 0 => {
                assert_eq!(e.int("thread"), t as i128, "span begin: {e:?}");
                assert_eq!(e.fields.len(), 1, "span begin: {e:?}");
                tail[t] += 1;
            }
            "types:counter" if tail[t] == 1 => {
                assert_eq!(e.int("value"), 42 + t as i128, "{e:?}");
                tail[t] += 1;
            }
            "types:span" if tail[t] == 2 => {
                assert!(e.fields.is_empty(), "span end has no fields: {e:?}");
                tail[t] += 1;
            }
            other => panic!("unexpected event {other} here: {e:?}"),
        }
    }
    for (t, k) in next_k.iter().enumerate() {
        assert_eq!(*k, [PER_THREAD; 2], "events of thread {t}");
        assert_eq!(tail[t], 3, "span begin, counter, span end of thread {t}");
    }
    let want: BTreeMap<String, usize> = [
        ("types:ints", PER_THREAD as usize * THREADS),
        ("types:misc", PER_THREAD as usize * THREADS),
        ("types:span", 2 * THREADS),
        ("types:counter", THREADS),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(names, want, "event names and counts");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The main thread renamed before its first event, several sessions in a row in one process:
/// each trace is complete and carries this thread's identity.
#[test]
fn consecutive_sessions_each_read_cleanly() {
    let _l = lock();
    let tid = gettid();
    for round in 0..3u64 {
        let dir = common::temp_dir(&format!("bt-round{round}"));
        let session = hushtrace::Session::builder()
            .output_dir(&dir)
            .start()
            .expect("start session");
        for i in 0..100u64 {
            hushtrace::event!("round", "ev", round = round, i = i);
        }
        let stats = session.stop().expect("stop session");
        assert_eq!((stats.events_written, stats.events_discarded), (100, 0));
        let events = common::babeltrace(&dir, false);
        assert_eq!(events.len(), 100, "round {round}");
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e.name, "round:ev");
            assert_eq!((e.vpid, e.vtid), (std::process::id(), tid), "{e:?}");
            assert_eq!(e.int("round"), round as i128);
            assert_eq!(e.int("i"), i as i128);
        }
        assert_stream_order(&events);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `examples/count.rs` as a subprocess: one JSON line, W + D = total, babeltrace shows exactly
/// W `bench:tick` events, per-thread `seq` in order (complete when nothing was discarded).
#[test]
fn count_example_output_matches_babeltrace() {
    let (threads, n): (u64, u64) = if cfg!(debug_assertions) {
        (4, 100_000)
    } else {
        (4, 1_000_000)
    };
    let dir = common::temp_dir("bt-count");
    let exe = common::example_path("count");
    assert!(
        exe.exists(),
        "{} missing: build the examples (cargo test / cargo nextest build them)",
        exe.display()
    );
    let out = Command::new(&exe)
        .arg(&dir)
        .arg(threads.to_string())
        .arg(n.to_string())
        .output()
        .expect("run count example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "count failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line of output: {stdout:?}");
    let (w, d) = parse_counts(lines[0]);
    assert_eq!(
        w + d,
        threads * n,
        "written + discarded = total: {}",
        lines[0]
    );

    // Discarded events are reported by babeltrace2 as warnings: allowed only then.
    let events = stream_babeltrace(&dir, d > 0);
    let mut next: BTreeMap<u32, (u32, Option<u64>, u64)> = BTreeMap::new(); // vtid -> thread, last seq, count
    let mut total = 0u64;
    for (name, vtid, thread, seq) in events {
        assert_eq!(name, "bench:tick");
        total += 1;
        let e = next.entry(vtid).or_insert((thread, None, 0));
        assert_eq!(e.0, thread, "one stream per thread");
        if d == 0 {
            assert_eq!(
                seq,
                e.1.map_or(0, |s| s + 1),
                "thread {thread}: seq in order"
            );
        } else if let Some(prev) = e.1 {
            assert!(seq > prev, "thread {thread}: seq strictly increasing");
        }
        e.1 = Some(seq);
        e.2 += 1;
    }
    assert_eq!(total, w, "babeltrace shows exactly W events");
    if d == 0 {
        assert_eq!(next.len() as u64, threads);
        for (thread, last, count) in next.values() {
            assert_eq!(
                (*last, *count),
                (Some(n - 1), n),
                "thread {thread} complete"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `{"written":W,"discarded":D}`.
fn parse_counts(line: &str) -> (u64, u64) {
    let num = |key: &str| -> u64 {
        let k = format!("\"{key}\":");
        let i = line
            .find(&k)
            .unwrap_or_else(|| panic!("no {key} in {line}"))
            + k.len();
        let rest = &line[i..];
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end].parse().expect("a number")
    };
    assert!(
        line.starts_with('{') && line.ends_with('}'),
        "not a JSON object: {line}"
    );
    (num("written"), num("discarded"))
}

/// Streams `babeltrace2 --clock-seconds` output line by line through `common::parse_line`
/// (millions of events do not fit comfortably in memory as `BtEvent`s) and returns
/// (name, vtid, thread, seq) per event. Fails on any diagnostic or parse error.
/// (A candidate for `common`: a streaming variant of `common::babeltrace`.)
fn stream_babeltrace(dir: &std::path::Path, allow_warnings: bool) -> Vec<(String, u32, u32, u64)> {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    let child = Command::new("babeltrace2")
        .arg("--clock-seconds")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = child.unwrap_or_else(|e| panic!("babeltrace2 is required for this test ({e})"));
    let mut stderr = child.stderr.take().unwrap();
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut out = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.expect("babeltrace2 output is UTF-8");
        if !line.starts_with('[') {
            continue;
        }
        let e = common::parse_line(&line).unwrap_or_else(|| panic!("unparsable line: {line}"));
        out.push((
            e.name.clone(),
            e.vtid,
            e.int("thread") as u32,
            e.int("seq") as u64,
        ));
    }
    let status = child.wait().unwrap();
    let stderr = err_thread.join().unwrap();
    assert!(status.success(), "babeltrace2 failed: {stderr}");
    assert!(
        allow_warnings || stderr.trim().is_empty(),
        "babeltrace2 printed diagnostics: {stderr}"
    );
    out
}
