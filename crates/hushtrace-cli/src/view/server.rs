//! The server of `hushtrace view`: a `TcpListener` on 127.0.0.1 whose connections are each
//! answered on a thread of their own (a browser may open a connection and leave it idle: it
//! must not hold up the one the UI's request comes on), until the trace has been sent whole
//! once.
//!
//! * `GET` (or `HEAD`) of the trace's path: `200`, `application/octet-stream`, its length, and
//!   the CORS header that lets the Perfetto UI's page read it
//!   (`Access-Control-Allow-Origin: https://ui.perfetto.dev`); a complete `GET` ends the
//!   server.
//! * `OPTIONS` (a CORS preflight): `204` with the allowed methods, and
//!   `Access-Control-Allow-Private-Network: true` when the browser asks for it (Chrome, before
//!   a public site's page reaches 127.0.0.1).
//! * Anything else (the UI also probes `/status` of `trace_processor_shell --httpd`, which
//!   uses the same port): `404`. A request that is not HTTP/1.x: `400`.

use super::http::{self, ReadError, Request};
use super::UI_ORIGIN;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How long a client may take to send its request head, and to take each part of an answer:
/// a connection that stalls is dropped.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The most connections answered at once; more are closed unanswered.
const MAX_CONNECTIONS: usize = 32;

/// The trace a server hands out.
#[derive(Debug)]
pub(super) struct Trace {
    /// The file (read at offsets, never seeked: connections share it).
    pub(super) file: File,
    /// Its length in bytes.
    pub(super) len: u64,
    /// The path it is served at (`/<key>/<name>`).
    pub(super) path: String,
}

/// What one connection came to.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The whole trace was sent.
    Sent,
    /// Anything else (another path, a preflight, a `HEAD`, a bad request, a dropped
    /// connection).
    Other,
}

/// Answers connections on `listener` until one `GET` has received the whole trace, and returns
/// then (connections still open are dropped when the process ends); fails if the listener
/// does.
pub(super) fn serve_once(listener: TcpListener, trace: Trace) -> io::Result<()> {
    let (done, finished) = mpsc::channel();
    let trace = Arc::new(trace);
    std::thread::Builder::new()
        .name("view-accept".into())
        .spawn(move || accept(&listener, &trace, &done))?;
    finished
        .recv()
        .unwrap_or_else(|_| Err(io::Error::other("the trace server stopped")))
}

/// The accepting thread: a thread per connection; reports on `done` once the trace was sent
/// whole, or the listener's failure.
fn accept(listener: &TcpListener, trace: &Arc<Trace>, done: &mpsc::Sender<io::Result<()>>) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            // The client gave up before we accepted it, or a signal came: wait for the next.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                let _ = done.send(Err(e));
                return;
            }
        };
        if active.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::Relaxed);
            continue; // dropped: closed unanswered
        }
        let (trace, done, count) = (Arc::clone(trace), done.clone(), Arc::clone(&active));
        let spawned = std::thread::Builder::new()
            .name("view-conn".into())
            .spawn(move || {
                match answer(stream, &trace) {
                    Ok(Outcome::Sent) => {
                        let _ = done.send(Ok(()));
                    }
                    Ok(Outcome::Other) => {}
                    // Its client went away or stalled: the others are served.
                    Err(e) => {
                        eprintln!("hushtrace: warning: a connection to the trace server: {e}")
                    }
                }
                count.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            // No thread for it (its stream was dropped with the closure): closed unanswered.
            active.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Reads one request from `stream` and answers it.
fn answer(mut stream: TcpStream, trace: &Trace) -> io::Result<Outcome> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let outcome = match http::read_request(&mut stream) {
        Ok(req) => respond(&mut stream, &req, trace)?,
        Err(ReadError::Bad(why)) => {
            let body = format!("bad request: {why}\n");
            text(&mut stream, 400, "Bad Request", &body)?;
            Outcome::Other
        }
        Err(ReadError::Closed) => return Ok(Outcome::Other),
    };
    stream.flush()?;
    close(stream);
    Ok(outcome)
}

/// Answers a well-formed request.
fn respond(w: &mut TcpStream, req: &Request, trace: &Trace) -> io::Result<Outcome> {
    let cors = ("Access-Control-Allow-Origin", UI_ORIGIN);
    match req.method.as_str() {
        "GET" | "HEAD" if req.path == trace.path => {
            let headers = [
                ("Content-Type", "application/octet-stream"),
                cors,
                ("Cache-Control", "no-cache"),
            ];
            http::write_head(w, 200, "OK", &headers, trace.len)?;
            if req.method == "HEAD" {
                return Ok(Outcome::Other);
            }
            send_file(w, trace)?;
            Ok(Outcome::Sent)
        }
        "OPTIONS" => {
            let mut headers = vec![
                cors,
                ("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS"),
                ("Access-Control-Allow-Headers", "*"),
                ("Access-Control-Max-Age", "600"),
            ];
            if req.private_network {
                headers.push(("Access-Control-Allow-Private-Network", "true"));
            }
            http::write_head(w, 204, "No Content", &headers, 0)?;
            Ok(Outcome::Other)
        }
        _ => {
            text(w, 404, "Not Found", "not found\n")?;
            Ok(Outcome::Other)
        }
    }
}

/// Writes the trace's bytes to `w`.
fn send_file(w: &mut TcpStream, trace: &Trace) -> io::Result<()> {
    let mut buf = vec![0u8; 1 << 16];
    let mut at = 0u64;
    while at < trace.len {
        let want = (trace.len - at).min(buf.len() as u64) as usize;
        let n = trace.file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            // The file cannot shrink (it is ours alone, unlinked); said rather than assumed.
            return Err(io::Error::other(format!(
                "the trace ended at {at} of its {} bytes",
                trace.len
            )));
        }
        w.write_all(&buf[..n])?;
        at += n as u64;
    }
    Ok(())
}

/// A plain-text answer (with the CORS header, so the UI can read why).
fn text(w: &mut TcpStream, status: u16, reason: &str, body: &str) -> io::Result<()> {
    let headers = [
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Access-Control-Allow-Origin", UI_ORIGIN),
    ];
    http::write_head(w, status, reason, &headers, body.len() as u64)?;
    w.write_all(body.as_bytes())
}

/// Closes a connection gracefully: ends our side, then reads (and drops) what the client still
/// sends, up to a bound, so that unread request bytes do not make the kernel reset the
/// connection before the client has read the answer.
fn close(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let mut sink = [0u8; 4096];
    let mut left: usize = 1 << 20;
    while left > 0 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}
