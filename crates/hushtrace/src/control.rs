//! Control of a running program from outside (`hushtrace ctl`): each traced process serves an
//! owner-only Unix socket, answered by its consumer thread between two passes over the
//! buffers — no work on the application's threads, none at all on no-syscall threads.
//!
//! * Where: `$XDG_RUNTIME_DIR/hushtrace/<pid>.sock`, or `/tmp/hushtrace-<uid>/<pid>.sock` when
//!   `XDG_RUNTIME_DIR` is unset. The directory is created 0700 and must belong to the user and
//!   not be writable by others (else no socket is served); the socket is 0600; a connecting
//!   peer of another user is refused (`SO_PEERCRED`).
//! * Protocol: one request line (at most [`MAX_REQUEST`] bytes), one JSON answer line, then the
//!   server closes. Requests: `status`, `list`, `enable GLOB`, `disable GLOB`,
//!   `snapshot [DIR]`, `stop`, `start`, `ping`. After `stop` the process keeps serving its
//!   socket: `status` says `"state":"stopped"` and `start` starts the session again with the
//!   same settings. A malformed or oversized request gets `{"ok":false,"error":...}`; the
//!   server keeps running.
//! * Served without ever blocking its thread (see [`Server`]): a deadline per request, bounded
//!   answers written as the client reads them, a cap on clients served at once.

use crate::platform;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// Stop the session (as `Session::stop`); the process keeps serving its socket, stopped.
    Stop,
    /// Start the session again, with the settings it had, after a `stop`.
    Start,
    /// Every tracepoint of the process with its state (enabled or not).
    List,
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
        "start" => none(Request::Start),
        "list" => none(Request::List),
        "enable" => glob("enable").map(Request::Enable),
        "disable" => glob("disable").map(Request::Disable),
        "snapshot" => Ok(Request::Snapshot(arg.map(PathBuf::from))),
        other => Err(format!(
            "unknown request {other:?} (expected ping, status, list, enable GLOB, disable GLOB, \
             snapshot [DIR], stop or start)"
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

/// Connections served at once; a client beyond them gets an error answer and is closed.
pub const MAX_CLIENTS: usize = 16;

/// Time a client has from its connection to the end of its request line.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(1);

/// A served client that has made no progress (no byte read or written) for this long is
/// dropped when a new client of the same user arrives and all [`MAX_CLIENTS`] places are taken:
/// the one idle longest makes room, so idle connections never lock the owner out.
pub const EVICT_IDLE: Duration = Duration::from_millis(100);

/// How long [`request`] keeps retrying a "busy" answer before it returns it.
pub const RETRY_BUSY_FOR: Duration = Duration::from_secs(5);

/// Time a client has to read its answer once it is ready.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(5);

/// The largest answer sent; a larger one is replaced by an error answer.
pub const MAX_ANSWER: usize = 4 << 20;

/// Answer bytes waiting to be read by all clients together; a request whose answer does not
/// fit gets a short error answer instead.
pub const MAX_PENDING_OUTPUT: usize = 8 << 20;

/// Clients refused (beyond [`MAX_CLIENTS`], or of another user) whose request is read before
/// they get their error answer; beyond them, a connection is answered and closed at once.
const MAX_REFUSED: usize = 64;

/// Connections accepted per call of [`Server::serve`] (a flood of connections cannot keep the
/// consumer in the accept loop).
const ACCEPTS_PER_PASS: usize = 64;

/// The least time between two looks for new connections. The consumer passes once per packet
/// hand-over, and an `accept4` on every pass was about a tenth of its CPU at high event rates
/// (docs/BENCHMARKS.md, "The consumer"); clients already connected move on every pass.
const ACCEPT_INTERVAL: Duration = Duration::from_millis(10);

/// What an oversized request's rest is read (and dropped) up to, so its client gets the error
/// answer instead of a connection reset.
const DISCARD_MAX: usize = 1 << 20;

/// The listening side, owned by the consumer thread (or, after `ctl PID stop`, by the thread
/// that serves the stopped process).
///
/// Nothing in it blocks: the listener and every connection are non-blocking and served a step
/// at a time on each pass ([`Server::serve`]). A client has [`REQUEST_DEADLINE`] for its whole
/// request (not per read: a client that drips one byte at a time is dropped all the same) and
/// [`ANSWER_DEADLINE`] to read its answer; at most [`MAX_CLIENTS`] are served at once, and the
/// answers waiting to be read are bounded ([`MAX_ANSWER`], [`MAX_PENDING_OUTPUT`]).
#[derive(Debug)]
pub(crate) struct Server {
    listener: UnixListener,
    path: PathBuf,
    /// The socket file's (device, inode): removed on drop only while it is still ours.
    id: (u64, u64),
    clients: Vec<Client>,
    /// Answer bytes not yet written, over all clients.
    pending_output: usize,
    /// When to look for new connections next (see [`ACCEPT_INTERVAL`]).
    next_accept: Instant,
}

#[derive(Debug)]
struct Client {
    conn: UnixStream,
    /// End of the current phase: the request's deadline, then the answer's.
    deadline: Instant,
    /// When it last made progress (connected, or a byte read or written).
    active: Instant,
    phase: Phase,
    /// Why this client is refused (its request gets this error whatever it asks).
    refuse: Option<String>,
}

#[derive(Debug)]
enum Phase {
    /// Reading the request line.
    Reading(Vec<u8>),
    /// Reading and dropping the rest of an oversized request (bytes left to drop).
    Discarding(usize),
    /// Writing the answer (bytes, how many are written).
    Writing(Vec<u8>, usize),
}

/// What a client's step came to.
enum Step {
    /// Waiting for the client (more input, or room to write).
    Pending,
    /// Its request is complete: answer it.
    Request(Result<Request, String>),
    /// Done (answered, gone, or out of time): close it.
    Close,
}

impl Server {
    /// Binds `<socket dir>/<pid>.sock` (replacing a stale one of a dead process with our pid).
    pub(crate) fn bind(pid: u32) -> io::Result<Server> {
        let path = socket_path(pid)?;
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let md = std::fs::symlink_metadata(&path)?;
        Ok(Server {
            listener,
            path,
            id: (md.dev(), md.ino()),
            clients: Vec::new(),
            pending_output: 0,
            next_accept: Instant::now(),
        })
    }

    /// Whether the socket file still is this server's (not replaced by a newer server).
    pub(crate) fn still_bound(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|md| (md.dev(), md.ino()) == self.id)
    }

    /// The socket file's path and (device, inode).
    pub(crate) fn file(&self) -> (PathBuf, (u64, u64)) {
        (self.path.clone(), self.id)
    }

    /// Whether clients are being served (the caller polls sooner meanwhile).
    pub(crate) fn busy(&self) -> bool {
        !self.clients.is_empty()
    }

    /// Accepts new connections, moves every client a step on (never waits for one) and
    /// answers each complete request with `answer(request)`.
    pub(crate) fn serve(&mut self, mut answer: impl FnMut(Result<Request, String>) -> String) {
        let now = Instant::now();
        if now >= self.next_accept {
            self.accept();
            self.next_accept = now + ACCEPT_INTERVAL;
        }
        let mut i = 0;
        while i < self.clients.len() {
            let c = &mut self.clients[i];
            let step = c.step(now);
            let close = match step {
                Step::Pending => false,
                Step::Close => true,
                Step::Request(req) => {
                    let mut text = match c.refuse.take() {
                        Some(e) => error_answer(&e),
                        None => answer(req),
                    };
                    if text.len() > MAX_ANSWER {
                        text = error_answer(&format!(
                            "the answer ({} bytes) is larger than {MAX_ANSWER} bytes",
                            text.len()
                        ));
                    } else if self.pending_output + text.len() > MAX_PENDING_OUTPUT {
                        text = error_answer(&format!(
                            "busy: {} bytes of answers are waiting to be read by other clients",
                            self.pending_output
                        ));
                    }
                    let mut bytes = text.into_bytes();
                    bytes.push(b'\n');
                    self.pending_output += bytes.len();
                    let c = &mut self.clients[i];
                    c.phase = Phase::Writing(bytes, 0);
                    c.deadline = Instant::now() + ANSWER_DEADLINE;
                    matches!(c.step(Instant::now()), Step::Close)
                }
            };
            if close {
                let c = self.clients.swap_remove(i);
                if let Phase::Writing(b, _) = &c.phase {
                    self.pending_output -= b.len();
                }
            } else {
                i += 1;
            }
        }
    }

    /// Drops the served client idle longest, if it has been idle for [`EVICT_IDLE`] at least,
    /// telling it why when it is still sending its request. Returns whether one was dropped.
    fn evict_idlest(&mut self, now: Instant) -> bool {
        let idlest = (self.clients.iter().enumerate())
            .filter(|(_, c)| c.refuse.is_none() && now.duration_since(c.active) >= EVICT_IDLE)
            .min_by_key(|(_, c)| c.active)
            .map(|(i, _)| i);
        let Some(i) = idlest else { return false };
        let c = self.clients.swap_remove(i);
        match &c.phase {
            Phase::Writing(b, _) => self.pending_output -= b.len(),
            _ => {
                let ms = now.duration_since(c.active).as_millis();
                let why = format!("dropped: idle for {ms} ms while another client waited");
                // One non-blocking write into a connection that has been sent nothing yet.
                let _ = (&c.conn).write(format!("{}\n", error_answer(&why)).as_bytes());
            }
        }
        true
    }

    /// Accepts pending connections: checks the peer, makes room by dropping the client idle
    /// longest (or else refuses) when the cap is reached.
    fn accept(&mut self) {
        for _ in 0..ACCEPTS_PER_PASS {
            let conn = match self.listener.accept() {
                Ok((c, _)) => c,
                Err(_) => return, // WouldBlock: nothing pending (or a transient error)
            };
            if conn.set_nonblocking(true).is_err() {
                continue;
            }
            let served = self.clients.iter().filter(|c| c.refuse.is_none()).count();
            let now = Instant::now();
            let refuse = match platform::peer_uid(std::os::fd::AsFd::as_fd(&conn)) {
                Err(e) => Some(format!("cannot identify the peer: {e}")),
                Ok(uid) if uid != platform::geteuid() => Some(format!(
                    "refused: the peer (uid {uid}) is not this process's user"
                )),
                Ok(_) if served >= MAX_CLIENTS && !self.evict_idlest(now) => Some(format!(
                    "busy: {MAX_CLIENTS} control clients are being served; try again"
                )),
                Ok(_) => None,
            };
            if refuse.is_some() && self.clients.len() >= MAX_CLIENTS + MAX_REFUSED {
                // A flood: one non-blocking write into the fresh connection's empty buffer,
                // then close.
                let e = refuse.unwrap_or_default();
                let _ = (&conn).write(format!("{}\n", error_answer(&e)).as_bytes());
                continue;
            }
            // A refused client's request is read all the same (closing a connection with
            // unread input resets it, and the client would not see why).
            self.clients.push(Client {
                conn,
                deadline: now + REQUEST_DEADLINE,
                active: now,
                phase: Phase::Reading(Vec::with_capacity(256)),
                refuse,
            });
        }
    }
}

impl Client {
    /// Reads or writes what can be without waiting.
    fn step(&mut self, now: Instant) -> Step {
        let mut chunk = [0u8; 4096];
        match &mut self.phase {
            Phase::Reading(buf) => loop {
                match (&self.conn).read(&mut chunk) {
                    Ok(0) => return Step::Request(parse_request(buf)),
                    Ok(n) => {
                        self.active = now;
                        buf.extend_from_slice(&chunk[..n]);
                        if buf.len() > MAX_REQUEST {
                            self.phase = Phase::Discarding(DISCARD_MAX);
                            return self.step(now);
                        }
                        if buf.contains(&b'\n') {
                            return Step::Request(parse_request(buf));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if now < self.deadline {
                            return Step::Pending;
                        }
                        let ms = REQUEST_DEADLINE.as_millis();
                        return Step::Request(Err(format!(
                            "no complete request within {ms} ms ({} bytes received)",
                            buf.len()
                        )));
                    }
                    Err(_) => return Step::Close,
                }
            },
            Phase::Discarding(left) => loop {
                let too_long = Err(format!("request longer than {MAX_REQUEST} bytes"));
                match (&self.conn).read(&mut chunk) {
                    Ok(0) => return Step::Request(too_long),
                    Ok(n) => {
                        *left = left.saturating_sub(n);
                        if *left == 0 {
                            return Step::Request(too_long);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && now < self.deadline => {
                        return Step::Pending
                    }
                    Err(_) => return Step::Request(too_long),
                }
            },
            Phase::Writing(bytes, done) => loop {
                if *done == bytes.len() {
                    return Step::Close;
                }
                match (&self.conn).write(&bytes[*done..]) {
                    Ok(0) => return Step::Close,
                    Ok(n) => {
                        self.active = now;
                        *done += n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // The client does not read: dropped once its time is up.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && now < self.deadline => {
                        return Step::Pending
                    }
                    Err(_) => return Step::Close,
                }
            },
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        remove_socket_if(&self.path, self.id);
    }
}

/// Removes the socket file `path` if it still is the one with (device, inode) `id`.
pub(crate) fn remove_socket_if(path: &Path, id: (u64, u64)) {
    if std::fs::symlink_metadata(path).is_ok_and(|md| (md.dev(), md.ino()) == id) {
        let _ = std::fs::remove_file(path);
    }
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
    // A "busy" answer (every place taken by clients still working, or too many answers
    // waiting to be read) is retried, with a growing pause, for up to RETRY_BUSY_FOR.
    let give_up = Instant::now() + RETRY_BUSY_FOR;
    let mut pause = Duration::from_millis(10);
    loop {
        let answer = request_once(pid, line)?;
        if !answer.starts_with("{\"ok\":false,\"error\":\"busy") || Instant::now() >= give_up {
            return Ok(answer);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// One request and its answer line (see [`request`]).
fn request_once(pid: u32, line: &str) -> io::Result<String> {
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
    // One answer line: read up to its newline, not to the end of the connection (a fork
    // child of the process may hold the connection open after the process closed it).
    let mut out = String::new();
    io::BufRead::read_line(&mut io::BufReader::new(&conn), &mut out)
        .map_err(|e| io::Error::new(e.kind(), format!("process {pid} did not answer: {e}")))?;
    if out.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("process {pid} closed the connection without an answer"),
        ));
    }
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
