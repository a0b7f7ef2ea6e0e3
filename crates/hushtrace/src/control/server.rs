//! The server side, answered by the consumer thread between two passes over the buffers,
//! never blocking it (see [`Server`]).

use super::protocol::{error_answer, parse_request, Request, MAX_REQUEST};
use super::socket::{remove_socket_if, socket_path};
use crate::platform;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Connections served at once; a client beyond them gets an error answer and is closed.
pub const MAX_CLIENTS: usize = 16;

/// Time a client has from its connection to the end of its request line.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(1);

/// A served client that has made no progress (no byte read or written) for this long is
/// dropped when a new client of the same user arrives and all [`MAX_CLIENTS`] places are taken:
/// the one idle longest makes room, so idle connections never lock the owner out.
pub const EVICT_IDLE: Duration = Duration::from_millis(100);

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
