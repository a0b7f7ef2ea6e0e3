//! The little HTTP/1.x that `hushtrace view`'s server speaks: one request per connection, its
//! head (request line and headers) read up to [`MAX_HEAD`] bytes and parsed here; answers are
//! written with `Connection: close`. Nothing here panics on what a client sends: a request
//! that is not HTTP/1.x comes back as [`ReadError::Bad`], answered `400 Bad Request`.

use std::io::{self, Read, Write};

/// The most bytes of a request head read; a longer head is refused.
pub(super) const MAX_HEAD: usize = 16 * 1024;

/// What the server needs of a request.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Request {
    /// The method, as sent (`GET`, `OPTIONS`, ...).
    pub(super) method: String,
    /// The target's path (`/a/b.perfetto-trace`), without query string or fragment; `*` for
    /// `OPTIONS *`.
    pub(super) path: String,
    /// `Access-Control-Request-Private-Network: true`: the preflight Chrome sends before a
    /// page of a public site (the Perfetto UI) reaches an address on this machine.
    pub(super) private_network: bool,
}

/// Why no request could be read from a connection.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The connection failed, timed out or closed before a whole head came (a browser's
    /// speculative connection that it closes unused does this): nothing to answer.
    Closed,
    /// Not an HTTP/1.x request; the reason is said in the `400` answer.
    Bad(&'static str),
}

/// Reads one request head from `r` (nothing after it: bodies are not read).
pub(super) fn read_request(r: &mut impl Read) -> Result<Request, ReadError> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&head) {
            head.truncate(end);
            return parse(&head);
        }
        if head.len() >= MAX_HEAD {
            return Err(ReadError::Bad("request head too large"));
        }
        let n = match r.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Closed),
        };
        if n == 0 {
            return Err(if head.is_empty() {
                ReadError::Closed
            } else {
                ReadError::Bad("incomplete request")
            });
        }
        head.extend_from_slice(&buf[..n]);
    }
}

/// Where the head in `b` ends (after its empty line), if it does.
fn head_end(b: &[u8]) -> Option<usize> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Parses a whole head.
fn parse(head: &[u8]) -> Result<Request, ReadError> {
    let text = std::str::from_utf8(head).map_err(|_| ReadError::Bad("request is not text"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad("malformed request line"));
    };
    if method.is_empty() || !method.bytes().all(|c| c.is_ascii_alphabetic()) {
        return Err(ReadError::Bad("malformed method"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(ReadError::Bad("not an HTTP/1.x request"));
    }
    let path = target_path(target).ok_or(ReadError::Bad("malformed request target"))?;
    let mut private_network = false;
    for l in lines.filter(|l| !l.is_empty()) {
        let (name, value) = l
            .split_once(':')
            .ok_or(ReadError::Bad("malformed header line"))?;
        if name.eq_ignore_ascii_case("access-control-request-private-network") {
            private_network = value.trim().eq_ignore_ascii_case("true");
        }
    }
    Ok(Request {
        method: method.to_string(),
        path,
        private_network,
    })
}

/// The path of a request target: origin form (`/p?q`), absolute form (`http://host/p`) or `*`.
fn target_path(target: &str) -> Option<String> {
    if target == "*" {
        return Some(target.to_string());
    }
    let rest = match target.strip_prefix("http://") {
        Some(r) => &r[r.find('/')?..],
        None => target,
    };
    if !rest.starts_with('/') || rest.bytes().any(|c| c.is_ascii_control()) {
        return None;
    }
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

/// Writes a response head: the status line, `headers`, `Content-Length: len` and
/// `Connection: close`.
pub(super) fn write_head(
    w: &mut impl Write,
    status: u16,
    reason: &str,
    headers: &[(&str, &str)],
    len: u64,
) -> io::Result<()> {
    let mut h = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in headers {
        h.push_str(&format!("{name}: {value}\r\n"));
    }
    h.push_str(&format!(
        "Content-Length: {len}\r\nConnection: close\r\n\r\n"
    ));
    w.write_all(h.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(s: &str) -> Result<Request, ReadError> {
        read_request(&mut s.as_bytes())
    }

    #[test]
    fn reads_a_browser_request() {
        let r = req(
            "GET /k/t.perfetto-trace?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n\
                     Origin: https://ui.perfetto.dev\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/k/t.perfetto-trace");
        assert!(!r.private_network);
        let r = req("OPTIONS http://127.0.0.1:9001/a HTTP/1.0\n\
                     access-control-request-private-network: TRUE\n\n")
        .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("OPTIONS", "/a"));
        assert!(r.private_network);
        assert_eq!(req("OPTIONS * HTTP/1.1\r\n\r\n").unwrap().path, "*");
    }

    #[test]
    fn refuses_what_is_not_http() {
        for bad in [
            "GET / HTTP/2.0\r\n\r\n",
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "G3T / HTTP/1.1\r\n\r\n",
            "GET nopath HTTP/1.1\r\n\r\n",
            "GET http://nohost HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nno colon\r\n\r\n",
            "GET /\u{1}x HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\n",
        ] {
            assert!(matches!(req(bad), Err(ReadError::Bad(_))), "{bad:?}");
        }
        assert!(matches!(
            read_request(&mut &b"GET /\xff HTTP/1.1\r\n\r\n"[..]),
            Err(ReadError::Bad(_))
        ));
        assert!(matches!(req(""), Err(ReadError::Closed)));
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(matches!(
            req(&long),
            Err(ReadError::Bad("request head too large"))
        ));
    }

    #[test]
    fn writes_a_head() {
        let mut out = Vec::new();
        write_head(&mut out, 404, "Not Found", &[("A", "b")], 3).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 404 Not Found\r\nA: b\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
        );
    }
}
