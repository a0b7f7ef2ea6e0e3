//! Issue 20.3 and 20.4 through the bridge: a request → fetch → parse hierarchy of
//! `#[instrument]`ed async functions on a tokio multi-thread runtime, 20,000 requests 16 at a
//! time. Each span records its parent; Chrome JSON nests children under their root (the root's
//! id and category) and its durations, read as doubles, are the CTF's to the nanosecond;
//! Perfetto lays the 60,000 slices on a few named lanes (decoded with Perfetto's own protos);
//! the flame graph draws request;fetch;parse.

mod common;

use hushtrace_ctf::reader::{Session, Value};
use hushtrace_ctf::Kind;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use tracing::instrument;

const REQUESTS: u64 = 20_000;
const CONCURRENT: u64 = 16;

#[instrument(target = "svc")]
async fn request(n: u64) -> u64 {
    fetch(n).await
}

#[instrument(target = "net")]
async fn fetch(n: u64) -> u64 {
    tokio::task::yield_now().await;
    parse(n).await
}

#[instrument(target = "codec")]
async fn parse(n: u64) -> u64 {
    tokio::task::yield_now().await;
    n
}

/// (name, id, begin ns, duration ns) of every async span of the CTF, in the order they end.
fn ctf_spans(session: &Session) -> Vec<(String, u64, i128, i128)> {
    let mut merged = session.merged().unwrap();
    let mut open: HashMap<u64, i128> = HashMap::new();
    let mut out = Vec::new();
    while let Some(ev) = merged.next().unwrap() {
        let Some(Value::U64(id)) = ev.event.field(0) else {
            continue;
        };
        match ev.event.class.kind {
            Kind::AsyncBegin => {
                open.insert(id, ev.time_ns);
            }
            Kind::AsyncEnd => {
                let b = open.remove(&id).unwrap();
                let name = ev.event.class.name.clone();
                out.push((name, id, b, ev.time_ns - b));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn request_fetch_parse_nests_in_chrome_perfetto_and_the_flame_graph() {
    let dir = common::trace_dir("hierarchy");
    let trace = dir.join("trace");
    let session = hushtrace::Session::builder()
        .output_dir(&trace)
        .subbuf_size(1 << 20)
        .num_subbufs(8)
        .start()
        .unwrap();
    common::install_layer();
    let rt = common::tokio_runtime();
    rt.block_on(async {
        for wave in 0..REQUESTS / CONCURRENT {
            let handles: Vec<_> = (0..CONCURRENT)
                .map(|k| tokio::spawn(request(wave * CONCURRENT + k)))
                .collect();
            for h in handles {
                h.await.unwrap();
            }
        }
    });
    drop(rt);
    let stats = session.stop().unwrap();
    assert_eq!(stats.events_discarded, 0);

    let session = Session::open(&trace).unwrap();
    let ctf = ctf_spans(&session);
    assert_eq!(ctf.len() as u64, 3 * REQUESTS);

    // Chrome: every fetch and parse is nested under its request (the request's id2 and
    // category); its parent is in its args. Durations read as f64 equal the CTF's.
    let mut json = Vec::new();
    let summary = hushtrace_cli::chrome::convert(&session, &mut json, &mut |_, _| {}).unwrap();
    assert_eq!(summary.unmatched_ends, 0);
    let doc: Json = serde_json::from_slice(&json).unwrap();
    // id -> (name, cat, id2.local, begin ts in µs as f64)
    let mut open: HashMap<u64, (String, String, String, f64)> = HashMap::new();
    let mut nested = 0;
    let mut durations = Vec::new();
    for e in doc["traceEvents"].as_array().unwrap() {
        let ph = e["ph"].as_str().unwrap();
        if ph != "b" && ph != "e" {
            continue;
        }
        let id = e["args"]["id"].as_u64().unwrap();
        let name = e["name"].as_str().unwrap().to_string();
        let cat = e["cat"].as_str().unwrap().to_string();
        let root = e["id2"]["local"].as_str().unwrap().to_string();
        let ts = e["ts"].as_f64().unwrap();
        if ph == "b" {
            let parent = e["args"]["parent"].as_u64().unwrap();
            if name == "request" {
                assert_eq!(parent, 0, "{e}");
                assert_eq!((cat.as_str(), root.clone()), ("svc", format!("0x{id:x}")));
            } else {
                let (pname, pcat, proot, _) = &open[&parent];
                let want = if name == "fetch" { "request" } else { "fetch" };
                assert_eq!(pname, want, "{e}");
                assert_eq!(
                    (&cat, &root),
                    (pcat, proot),
                    "not nested under its root: {e}"
                );
                assert_eq!(cat, "svc");
                let own = if name == "fetch" { "net" } else { "codec" };
                assert_eq!(e["args"]["category"], own, "{e}");
                nested += 1;
            }
            open.insert(id, (name, cat, root, ts));
        } else {
            let (bname, _, broot, bts) = open.remove(&id).unwrap();
            assert_eq!((bname.as_str(), &broot), (name.as_str(), &root), "{e}");
            durations.push(((ts - bts) * 1000.0).round() as i128);
        }
    }
    assert_eq!(nested, 2 * REQUESTS);
    let want: Vec<i128> = ctf.iter().map(|s| s.3).collect();
    assert_eq!(durations.len(), want.len());
    let differ = durations.iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(differ, 0, "durations differ from the CTF's");

    // Perfetto: a few named lanes (16 requests at a time), children nested on them.
    let pf = dir.join("t.perfetto-trace");
    let file = std::fs::File::create(&pf).unwrap();
    let summary = hushtrace_cli::perfetto::convert(&session, file, &mut |_, _| {}).unwrap();
    assert_eq!(summary.unmatched_ends, 0);
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hushtrace-cli/tests/perfetto_async_check.py");
    let o = Command::new(hushtrace_testsupport::perfetto_python())
        .arg(script)
        .arg(&pf)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["async_slices"], 3 * REQUESTS, "{s}");
    assert_eq!(s["nested"], 2 * REQUESTS, "{s}");
    assert_eq!(s["unclosed"], 0, "{s}");
    let tracks = s["async_tracks"].as_u64().unwrap();
    eprintln!(
        "{tracks} async tracks for {REQUESTS} requests: {}",
        s["lanes"]
    );
    assert!(
        (1..=2 * CONCURRENT).contains(&tracks),
        "{tracks} async tracks for {REQUESTS} requests {CONCURRENT} at a time: {s}"
    );
    let lanes = s["lanes"].as_object().unwrap();
    assert_eq!(lanes.len(), 1);
    let names: Vec<&str> = lanes
        .values()
        .next()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(names[0], "request", "{names:?}");
    assert!(
        names[1..].iter().all(|n| n.starts_with("request ")),
        "{names:?}"
    );

    // The flame graph draws the hierarchy.
    let folded = hushtrace_cli::flame::folded(&session, false).unwrap();
    assert!(
        folded
            .iter()
            .any(|l| l.starts_with("svc:request;net:fetch;codec:parse ")),
        "{folded:?}"
    );
    assert!(
        folded.iter().all(|l| l.starts_with("svc:request")),
        "{folded:?}"
    );
    let mut svg = Vec::new();
    hushtrace_cli::flame::write_svg(&session, false, &mut svg).unwrap();
    assert!(String::from_utf8(svg).unwrap().contains("codec:parse"));

    let _ = std::fs::remove_dir_all(&dir);
}
