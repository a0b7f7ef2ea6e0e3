//! Control of a running program from outside (`hushtrace ctl`): each traced process serves an
//! owner-only Unix socket, answered by its consumer thread between two passes over the
//! buffers — no work on the application's threads, none at all on no-syscall threads.
//!
//! * Where: `$XDG_RUNTIME_DIR/hushtrace/<pid>.sock`, or `/tmp/hushtrace-<uid>/<pid>.sock` when
//!   `XDG_RUNTIME_DIR` is unset. The directory is created 0700 and must belong to the user and
//!   not be writable by others (else no socket is served); the socket is 0600; a connecting
//!   peer of another user is refused (`SO_PEERCRED`).
//! * Protocol: one request line (at most [`MAX_REQUEST`] bytes), one JSON answer line, then the
//!   server closes. Requests: `status`, `enable GLOB`, `disable GLOB`, `snapshot [DIR]`,
//!   `stop`, `ping`. A malformed or oversized request gets `{"ok":false,"error":...}`; the
//!   server keeps running. A client that sends nothing is dropped after 200 ms.

use crate::platform;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest request line accepted.
pub const MAX_REQUEST: usize = 4096;

/// A parsed control request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Liveness check.
    Ping,
    /// Session, mode, buffer sizes, per-thread counts.
    Status,
    /// `hushtrace::enable(glob)`.
    Enable(String),
    /// `hushtrace::disable(glob)`.
    Disable(String),
    /// A snapshot of every ring, into the given directory or `<trace dir>/snapshots/<n>/`.
    Snapshot(Option<PathBuf>),
    /// Stop the session (as `Session::stop`).
    Stop,
}

/// Parses one request. Errors say what is wrong; never panics (fuzzed).
///
/// ```
/// use hushtrace::control::{parse_request, Request};
/// assert_eq!(parse_request(b"enable app:*\n"), Ok(Request::Enable("app:*".into())));
/// assert!(parse_request(b"enable\n").unwrap_err().contains("glob"));
/// assert!(parse_request(&[b'x'; 5000]).unwrap_err().contains("longer"));
/// ```
pub fn parse_request(bytes: &[u8]) -> Result<Request, String> {
    if bytes.len() > MAX_REQUEST {
        return Err(format!(
            "request longer than {MAX_REQUEST} bytes ({} bytes)",
            bytes.len()
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "request is not UTF-8".to_string())?;
    let line = text.strip_suffix('\n').unwrap_or(text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.contains('\n') {
        return Err("one request per connection (found more than one line)".into());
    }
    let mut words = line.split_whitespace();
    let cmd = words.next().ok_or("empty request")?;
    let arg = words.next();
    if words.next().is_some() {
        return Err(format!("too many arguments for `{cmd}`"));
    }
    let glob = |what: &str| -> Result<String, String> {
        match arg {
            Some(g) if g.len() <= 1024 => Ok(g.to_string()),
            Some(_) => Err(format!("`{what}`: glob longer than 1024 bytes")),
            None => Err(format!("`{what}` needs a glob (`{what} category:name`)")),
        }
    };
    let none = |r: Request| match arg {
        None => Ok(r),
        Some(a) => Err(format!("`{cmd}` takes no argument (got {a:?})")),
    };
    match cmd {
        "ping" => none(Request::Ping),
        "status" => none(Request::Status),
        "stop" => none(Request::Stop),
        "enable" => glob("enable").map(Request::Enable),
        "disable" => glob("disable").map(Request::Disable),
        "snapshot" => Ok(Request::Snapshot(arg.map(PathBuf::from))),
        other => Err(format!(
            "unknown request {other:?} (expected ping, status, enable GLOB, disable GLOB, \
             snapshot [DIR] or stop)"
        )),
    }
}

/// Writes `s` as a JSON string (quotes and escapes included).
pub(crate) fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// An error answer.
pub(crate) fn error_answer(msg: &str) -> String {
    let mut s = String::from("{\"ok\":false,\"error\":");
    json_str(&mut s, msg);
    s.push('}');
    s
}

/// The per-user directory of control sockets (created 0700 if missing), or why there is none.
pub fn socket_dir() -> io::Result<PathBuf> {
    let base = match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("hushtrace"),
        _ => std::env::temp_dir().join(format!("hushtrace-{}", platform::geteuid())),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)?;
    let md = std::fs::symlink_metadata(&base)?;
    if !md.is_dir() || md.uid() != platform::geteuid() || md.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a private directory of this user (mode {:o}, uid {}): no control \
             socket",
            base.display(),
            md.permissions().mode() & 0o7777,
            md.uid()
        )));
    }
    Ok(base)
}

/// The control socket of process `pid`.
pub fn socket_path(pid: u32) -> io::Result<PathBuf> {
    Ok(socket_dir()?.join(format!("{pid}.sock")))
}

/// The listening side, owned by the consumer thread.
#[derive(Debug)]
pub(crate) struct Server {
    listener: UnixListener,
    path: PathBuf,
}

impl Server {
    /// Binds `<socket dir>/<pid>.sock` (replacing a stale one of a dead process with our pid).
    pub(crate) fn bind(pid: u32) -> io::Result<Server> {
        let path = socket_path(pid)?;
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        Ok(Server { listener, path })
    }

    /// Answers every pending connection with `answer(request)`; never blocks for long.
    pub(crate) fn serve(&self, mut answer: impl FnMut(Result<Request, String>) -> String) {
        loop {
            let (mut conn, _) = match self.listener.accept() {
                Ok(c) => c,
                Err(_) => return, // WouldBlock: nothing pending (or a transient error)
            };
            let reply = match read_request(&mut conn) {
                Ok(req) => answer(req),
                Err(e) => error_answer(&e),
            };
            let _ = conn.write_all(reply.as_bytes());
            let _ = conn.write_all(b"\n");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads one request from a connection: checks the peer's uid, bounds size and time.
fn read_request(conn: &mut UnixStream) -> Result<Result<Request, String>, String> {
    let uid = platform::peer_uid(std::os::fd::AsFd::as_fd(&*conn))
        .map_err(|e| format!("cannot identify the peer: {e}"))?;
    if uid != platform::geteuid() {
        return Err(format!(
            "refused: the peer (uid {uid}) is not this process's user"
        ));
    }
    conn.set_nonblocking(false).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        match conn.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.contains(&b'\n') || buf.len() > MAX_REQUEST {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err("no complete request within 200 ms".into()),
        }
    }
    if buf.len() > MAX_REQUEST {
        // Read (and drop) the rest, up to 1 MiB or the time limit, so the client gets the
        // answer instead of a connection reset.
        let mut left = 1 << 20;
        while let Ok(n @ 1..) = conn.read(&mut chunk) {
            left -= n.min(left);
            if left == 0 {
                break;
            }
        }
        return Ok(Err(format!("request longer than {MAX_REQUEST} bytes")));
    }
    Ok(parse_request(&buf))
}

/// Client side (the `hushtrace ctl` command): sends one request to process `pid` and returns
/// the answer line. Errors name the problem: no such process, no socket (not traced, or not
/// this user's), a server that does not answer.
///
/// ```no_run
/// let answer = hushtrace::control::request(1234, "status")?;
/// println!("{answer}");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn request(pid: u32, line: &str) -> io::Result<String> {
    let path = socket_path(pid)?;
    let mut conn = UnixStream::connect(&path).map_err(|e| {
        let alive = Path::new(&format!("/proc/{pid}")).exists();
        io::Error::new(
            e.kind(),
            if alive {
                format!(
                    "process {pid} serves no control socket at {} ({e}): not traced by \
                     hushtrace, or another user's",
                    path.display()
                )
            } else {
                format!("no process {pid} (no control socket at {})", path.display())
            },
        )
    })?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    conn.write_all(line.as_bytes())?;
    conn.write_all(b"\n")?;
    conn.shutdown(std::net::Shutdown::Write)?;
    let mut out = String::new();
    conn.read_to_string(&mut out)
        .map_err(|e| io::Error::new(e.kind(), format!("process {pid} did not answer: {e}")))?;
    Ok(out.trim_end().to_string())
}

/// The pids with a control socket in this user's socket directory (some may be stale: a
/// process killed before it could remove its socket; [`request`] tells).
pub fn list() -> io::Result<Vec<u32>> {
    let mut pids: Vec<u32> = std::fs::read_dir(socket_dir()?)?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".sock")?.parse().ok())
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        assert_eq!(parse_request(b"status"), Ok(Request::Status));
        assert_eq!(parse_request(b"ping\r\n"), Ok(Request::Ping));
        assert_eq!(
            parse_request(b"disable  net:*  \n"),
            Ok(Request::Disable("net:*".into()))
        );
        assert_eq!(parse_request(b"snapshot\n"), Ok(Request::Snapshot(None)));
        assert_eq!(
            parse_request(b"snapshot /tmp/x\n"),
            Ok(Request::Snapshot(Some("/tmp/x".into())))
        );
        for bad in [
            &b""[..],
            b"\n",
            b"stop now",
            b"status\nstop\n",
            b"\xff\xfe",
            b"enable a b",
            b"launch",
        ] {
            assert!(parse_request(bad).is_err(), "{bad:?}");
        }
    }

    /// Random and mutated requests: an answer or an error, never a panic (the cargo-fuzz
    /// target `control_request` runs the same check coverage-guided).
    #[test]
    fn random_requests_never_panic() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let seeds: [&[u8]; 4] = [
            b"enable app:*\n",
            b"snapshot /tmp/x\n",
            b"status",
            b"stop\r\n",
        ];
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut buf = seeds[i % seeds.len()].to_vec();
            for _ in 0..(x % 6) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let pos = (x as usize) % (buf.len() + 1);
                match x % 3 {
                    0 => buf.insert(pos, (x >> 8) as u8),
                    1 if !buf.is_empty() => {
                        buf.remove(pos.min(buf.len() - 1));
                    }
                    _ => buf.extend(std::iter::repeat_n(b'a', (x % 3000) as usize)),
                }
            }
            let _ = parse_request(&buf);
        }
    }

    #[test]
    fn json_strings_are_escaped() {
        let mut s = String::new();
        json_str(&mut s, "a\"b\\c\nd\u{1}");
        assert_eq!(s, r#""a\"b\\c\nd\u0001""#);
    }
}
