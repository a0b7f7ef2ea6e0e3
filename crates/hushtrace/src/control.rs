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
//!
//! Files: `protocol.rs` (requests and answers), `socket.rs` (where the sockets are),
//! `server.rs` (the non-blocking server), `client.rs` (`hushtrace ctl`'s side).

mod client;
mod protocol;
mod server;
mod socket;

pub use client::{list, request, RETRY_BUSY_FOR};
pub(crate) use protocol::{error_answer, json_str};
pub use protocol::{parse_request, Request, MAX_REQUEST};
pub(crate) use server::Server;
pub use server::{
    ANSWER_DEADLINE, EVICT_IDLE, MAX_ANSWER, MAX_CLIENTS, MAX_PENDING_OUTPUT, REQUEST_DEADLINE,
};
pub(crate) use socket::remove_socket_if;
pub use socket::{socket_dir, socket_path};
