//! `hushtrace view DIR` (issue 32.6): the real binary serves a recorded trace (the demo's) to
//! the Perfetto UI, fetched here with a real HTTP client (`minreq`): the UI's CORS headers,
//! the bytes of `convert --to perfetto`, one download and then the end; Ctrl-C; no browser;
//! a busy port; a bad DIR.

mod common;

use common::{hushtrace, stderr, wait_until, Group, BIN};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ChildStderr, Command, Stdio};

const UI: &str = "https://ui.perfetto.dev";

/// A recorded trace (the demo's) in a temporary directory, and `convert --to perfetto`'s
/// output for it.
struct Fixture {
    _tmp: tempfile::TempDir,
    trace: PathBuf,
    perfetto: Vec<u8>,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("demo");
    let o = hushtrace(&["demo", "-o", trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = tmp.path().join("demo.perfetto-trace");
    common::convert(&trace, "perfetto", &out);
    let perfetto = std::fs::read(&out).unwrap();
    assert!(perfetto.len() > 1000, "{} bytes", perfetto.len());
    Fixture {
        _tmp: tmp,
        trace,
        perfetto,
    }
}

/// A running `hushtrace view`, its link (read from the first line of its stdout) and stderr.
struct Viewer {
    group: Group,
    link: String,
    stderr: BufReader<ChildStderr>,
}

impl Viewer {
    /// Starts `hushtrace view DIR ARGS...` with `env` set and `unset` removed, and waits for
    /// its link.
    fn start(dir: &Path, args: &[&str], env: &[(&str, &str)], unset: &[&str]) -> Viewer {
        let mut cmd = Command::new(BIN);
        cmd.arg("view").arg(dir).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        for k in unset {
            cmd.env_remove(k);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut link = String::new();
        out.read_line(&mut link).unwrap();
        let mut group = Group(Some(child));
        if link.is_empty() {
            let status = group.0.take().unwrap().wait().unwrap();
            let mut e = String::new();
            let _ = err.read_to_string(&mut e);
            panic!("no link printed ({status}): {e}");
        }
        Viewer {
            group,
            link: link.trim_end().to_string(),
            stderr: err,
        }
    }

    /// The trace's URL on 127.0.0.1 (the link's `url=`).
    fn url(&self) -> &str {
        let prefix = format!("{UI}/#!/?url=");
        self.link
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("not a Perfetto UI link: {}", self.link))
    }

    /// `http://127.0.0.1:PORT`.
    fn origin(&self) -> &str {
        let url = self.url();
        let path = url["http://".len()..].find('/').unwrap() + "http://".len();
        &url[..path]
    }

    fn pid(&self) -> i32 {
        self.group.0.as_ref().unwrap().id() as i32
    }

    /// Reads stderr lines until one contains `what`; returns the lines read.
    fn wait_stderr(&mut self, what: &str) -> String {
        let mut seen = String::new();
        loop {
            let mut l = String::new();
            let n = self.stderr.read_line(&mut l).unwrap();
            assert!(n > 0, "stderr ended without {what:?}: {seen}");
            seen.push_str(&l);
            if l.contains(what) {
                return seen;
            }
        }
    }

    /// Waits for the command to end (the test fails if it does not, see [`wait_until`]); its
    /// status and the rest of its stderr.
    fn wait(mut self) -> (std::process::ExitStatus, String) {
        let child = self.group.0.as_mut().unwrap();
        let mut status = None;
        wait_until("hushtrace view ended", || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        self.group.0 = None;
        let status = status.unwrap();
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        (status, rest)
    }
}

/// The temporary files of process `pid`'s conversion still named in the temporary directory.
fn named_temp_files(pid: i32) -> Vec<String> {
    let prefix = format!("hushtrace-view-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Sends `raw` on a new connection and returns all of the answer.
fn raw_request(origin: &str, raw: &[u8]) -> String {
    let mut s = TcpStream::connect(&origin["http://".len()..]).unwrap();
    s.write_all(raw).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn serves_the_perfetto_trace_once_with_the_ui_headers() {
    let f = fixture();
    let mut v = Viewer::start(&f.trace, &["--no-browser", "--port", "0"], &[], &[]);
    let url = v.url().to_string();
    let origin = v.origin().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(url.ends_with("/demo.perfetto-trace"), "{url}");
    v.wait_stderr("open the link above in a browser");
    // The converted trace has no name on disk while it is served.
    assert_eq!(named_temp_files(v.pid()), Vec::<String>::new());

    // A connection that never sends anything (a browser's speculative one) holds up nothing.
    let idle = TcpStream::connect(&origin["http://".len()..]).unwrap();

    // The CORS preflight, with Chrome's Private Network Access question.
    let r = minreq::Request::new(minreq::Method::Options, url.as_str())
        .with_header("Origin", UI)
        .with_header("Access-Control-Request-Method", "GET")
        .with_header("Access-Control-Request-Private-Network", "true")
        .send()
        .unwrap();
    assert_eq!(r.status_code, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some(UI));
    assert!(r
        .header("access-control-allow-methods")
        .is_some_and(|m| m.contains("GET")));
    assert_eq!(
        r.header("access-control-allow-private-network"),
        Some("true")
    );

    // Anything but the trace's path is 404: the UI's probe of trace_processor_shell, the
    // trace's name under another key, another method.
    let wrong_key = format!("{origin}/0000000000000000/demo.perfetto-trace");
    for u in [format!("{origin}/status"), format!("{origin}/"), wrong_key] {
        let r = minreq::get(u.as_str()).send().unwrap();
        assert_eq!(r.status_code, 404, "{u}");
        assert_eq!(r.header("access-control-allow-origin"), Some(UI), "{u}");
    }
    let r = minreq::post(url.as_str()).with_body("x").send().unwrap();
    assert_eq!(r.status_code, 404);

    // What is not HTTP/1.x is answered 400, and the server goes on.
    for raw in [
        &b"garbage\r\n\r\n"[..],
        b"GET / HTTP/2.0\r\n\r\n",
        b"\xff\xfe\r\n\r\n",
    ] {
        let a = raw_request(&origin, raw);
        assert!(
            a.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{raw:?}: {a}"
        );
    }

    // HEAD: the headers of the trace, no body, and not the download that ends the server.
    let r = minreq::head(url.as_str()).send().unwrap();
    assert_eq!(r.status_code, 200);
    let len = f.perfetto.len().to_string();
    assert_eq!(r.header("content-length"), Some(len.as_str()));
    assert!(r.as_bytes().is_empty());

    // The UI's GET: the bytes of `convert --to perfetto`, readable by the UI's origin.
    let r = minreq::get(url.as_str())
        .with_header("Origin", UI)
        .send()
        .unwrap();
    assert_eq!(r.status_code, 200);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.header("access-control-allow-origin"), Some(UI));
    assert_eq!(r.header("content-length"), Some(len.as_str()));
    assert!(
        r.as_bytes() == f.perfetto,
        "served bytes differ from convert's"
    );

    // One download, then the command ends by itself, with the idle connection still open.
    let (status, rest) = v.wait();
    assert!(status.success(), "{status}: {rest}");
    assert!(rest.contains("the trace was sent"), "{rest}");
    drop(idle);
}

#[test]
fn ctrl_c_ends_it_and_leaves_no_file() {
    let f = fixture();
    let v = Viewer::start(&f.trace, &["--no-browser", "--port", "0"], &[], &[]);
    let pid = v.pid();
    // SAFETY: signals the child this test started (still running: its link was just read).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let (status, _) = v.wait();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status}");
    assert_eq!(named_temp_files(pid), Vec::<String>::new());
}

#[test]
fn without_a_browser_it_prints_the_link_and_serves() {
    let f = fixture();
    let unset = ["BROWSER", "DISPLAY", "WAYLAND_DISPLAY"];
    let mut v = Viewer::start(&f.trace, &["--port", "0"], &[], &unset);
    let said = v.wait_stderr("no browser to open");
    assert!(said.contains("open the link above"), "{said}");
    let r = minreq::get(v.url()).send().unwrap();
    assert!(r.as_bytes() == f.perfetto);
    let (status, rest) = v.wait();
    assert!(status.success(), "{status}: {rest}");
}

#[test]
fn the_browser_of_browser_gets_the_link() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let got = dir.path().join("url");
    let script = dir.path().join("fake-browser");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > '{0}.tmp' && mv '{0}.tmp' '{0}'\n",
            got.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let browser = script.to_str().unwrap();
    let mut v = Viewer::start(&f.trace, &["--port", "0"], &[("BROWSER", browser)], &[]);
    v.wait_stderr("opening the link above with");
    wait_until("the browser command ran", || got.exists());
    assert_eq!(std::fs::read_to_string(&got).unwrap(), v.link);
    let r = minreq::get(v.url()).send().unwrap();
    assert!(r.as_bytes() == f.perfetto);
    let (status, rest) = v.wait();
    assert!(status.success(), "{status}: {rest}");
}

#[test]
fn a_busy_port_is_said() {
    let f = fixture();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let o = hushtrace(&[
        "view",
        f.trace.to_str().unwrap(),
        "--no-browser",
        "--port",
        &port,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&format!("127.0.0.1:{port} is in use")), "{e}");
    assert!(e.contains("--port N"), "{e}");
    assert!(o.stdout.is_empty());
}

#[test]
fn a_bad_dir_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for (dir, says) in [
        (&missing, "no such file or directory"),
        (&empty, "no hushtrace trace here"),
    ] {
        let o = hushtrace(&["view", dir.to_str().unwrap(), "--no-browser"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(dir.to_str().unwrap()) && e.contains(says), "{e}");
        assert!(o.stdout.is_empty());
    }
    let o = hushtrace(&["view", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("--no-browser"));
}

/// A stdout that cannot be written (`/dev/full`) does not lose the link: it goes to stderr.
#[test]
fn an_unwritable_stdout_does_not_lose_the_link() {
    let f = fixture();
    let mut child = Command::new(BIN)
        .arg("view")
        .arg(&f.trace)
        .args(["--no-browser", "--port", "0"])
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let group = Group(Some(child));
    let prefix = format!("{UI}/#!/?url=");
    let url = loop {
        let mut l = String::new();
        assert!(err.read_line(&mut l).unwrap() > 0, "no link on stderr");
        if let Some(u) = l.trim_end().strip_prefix(&prefix) {
            break u.to_string();
        }
    };
    let r = minreq::get(url.as_str()).send().unwrap();
    assert!(r.as_bytes() == f.perfetto);
    let v = Viewer {
        group,
        link: format!("{prefix}{url}"),
        stderr: err,
    };
    let (status, rest) = v.wait();
    assert!(status.success(), "{status}: {rest}");
}
