//! The control protocol: one request line, one JSON answer line.

/// The longest request line accepted.
pub const MAX_REQUEST: usize = 4096;

use std::path::PathBuf;

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
