//! The client side (`hushtrace ctl`): one request, one answer line.

use super::socket::{socket_dir, socket_path};
use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long [`request`] keeps retrying a "busy" answer before it returns it.
pub const RETRY_BUSY_FOR: Duration = Duration::from_secs(5);

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
