//! `net://HOST[:CONTROL_PORT[:DATA_PORT]]` relay addresses.

use std::fmt;
use std::str::FromStr;

/// The relay daemon's default control port (`lttng-relayd -C`).
pub const DEFAULT_CONTROL_PORT: u16 = 5342;
/// The relay daemon's default data port (`lttng-relayd -D`).
pub const DEFAULT_DATA_PORT: u16 = 5343;

/// Where a relay daemon listens: a host and its control and data ports.
///
/// ```
/// use hushtrace_relay::RelayUrl;
///
/// let url = RelayUrl::parse("net://relay.example:6000:6001")?;
/// assert_eq!((url.host(), url.control_port(), url.data_port()), ("relay.example", 6000, 6001));
/// let url = RelayUrl::parse("net://[::1]")?;
/// assert_eq!((url.host(), url.control_port(), url.data_port()), ("::1", 5342, 5343));
/// # Ok::<(), hushtrace_relay::UrlError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RelayUrl {
    host: String,
    control_port: u16,
    data_port: u16,
}

/// Why a relay address was rejected; the message quotes the address and says what is expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlError {
    input: String,
    problem: String,
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid relay address {:?}: {} (expected net://HOST[:CONTROL_PORT[:DATA_PORT]], \
             e.g. net://127.0.0.1 or net://relay:5342:5343)",
            self.input, self.problem
        )
    }
}

impl std::error::Error for UrlError {}

impl RelayUrl {
    /// A relay at `host` with explicit ports.
    ///
    /// ```
    /// let url = hushtrace_relay::RelayUrl::new("127.0.0.1", 5342, 5343);
    /// assert_eq!(url.to_string(), "net://127.0.0.1:5342:5343");
    /// ```
    pub fn new(host: impl Into<String>, control_port: u16, data_port: u16) -> RelayUrl {
        RelayUrl {
            host: host.into(),
            control_port,
            data_port,
        }
    }

    /// Parses `net://HOST[:CONTROL_PORT[:DATA_PORT]]` (also `net6://`; an IPv6 host in
    /// brackets, `net://[::1]:5342`). Missing ports default to 5342 (control) and, when the
    /// control port is given, control port + 1, else 5343 (data).
    ///
    /// ```
    /// use hushtrace_relay::RelayUrl;
    /// assert_eq!(RelayUrl::parse("net://h:7000")?.data_port(), 7001);
    /// assert!(RelayUrl::parse("tcp://h").is_err());
    /// assert!(RelayUrl::parse("net://h:70000").is_err());
    /// # Ok::<(), hushtrace_relay::UrlError>(())
    /// ```
    pub fn parse(s: &str) -> Result<RelayUrl, UrlError> {
        let err = |problem: &str| UrlError {
            input: s.to_owned(),
            problem: problem.to_owned(),
        };
        let rest = s
            .strip_prefix("net://")
            .or_else(|| s.strip_prefix("net6://"))
            .ok_or_else(|| err("the scheme must be net://"))?;
        if rest.is_empty() {
            return Err(err("the host is missing"));
        }
        let (host, ports) = if let Some(bracketed) = rest.strip_prefix('[') {
            let end = bracketed
                .find(']')
                .ok_or_else(|| err("an IPv6 host opened with '[' must close with ']'"))?;
            let after = &bracketed[end + 1..];
            let ports = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(err("only ':PORT' may follow ']'")),
            };
            (&bracketed[..end], ports)
        } else {
            match rest.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        if host.is_empty() {
            return Err(err("the host is missing"));
        }
        if host.contains(['/', '?', '#', '@', ' ']) {
            return Err(err(
                "the host may not contain '/', '?', '#', '@' or spaces (no path)",
            ));
        }
        let port = |p: &str, which: &str| -> Result<u16, UrlError> {
            match p.parse::<u16>() {
                Ok(0) | Err(_) => Err(err(&format!(
                    "the {which} port {p:?} is not a number in 1..=65535"
                ))),
                Ok(n) => Ok(n),
            }
        };
        let (control_port, data_port) = match ports {
            None => (DEFAULT_CONTROL_PORT, DEFAULT_DATA_PORT),
            Some(p) => {
                let mut it = p.split(':');
                let c = port(it.next().unwrap_or(""), "control")?;
                let d = match it.next() {
                    Some(d) => port(d, "data")?,
                    None => c
                        .checked_add(1)
                        .ok_or_else(|| err("control port 65535 leaves no default data port"))?,
                };
                if it.next().is_some() {
                    return Err(err("at most two ports (CONTROL:DATA) may follow the host"));
                }
                (c, d)
            }
        };
        Ok(RelayUrl {
            host: host.to_owned(),
            control_port,
            data_port,
        })
    }

    /// The host name or address (without IPv6 brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The control port.
    pub fn control_port(&self) -> u16 {
        self.control_port
    }

    /// The data port.
    pub fn data_port(&self) -> u16 {
        self.data_port
    }
}

impl FromStr for RelayUrl {
    type Err = UrlError;
    fn from_str(s: &str) -> Result<RelayUrl, UrlError> {
        RelayUrl::parse(s)
    }
}

impl fmt::Display for RelayUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(
                f,
                "net://[{}]:{}:{}",
                self.host, self.control_port, self.data_port
            )
        } else {
            write!(
                f,
                "net://{}:{}:{}",
                self.host, self.control_port, self.data_port
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let p = |s| RelayUrl::parse(s).map(|u| (u.host, u.control_port, u.data_port));
        assert_eq!(p("net://h"), Ok(("h".into(), 5342, 5343)));
        assert_eq!(p("net://h:1"), Ok(("h".into(), 1, 2)));
        assert_eq!(p("net://h:1:9"), Ok(("h".into(), 1, 9)));
        assert_eq!(p("net6://[fe80::1]:1:9"), Ok(("fe80::1".into(), 1, 9)));
        assert_eq!(p("net://[::1]"), Ok(("::1".into(), 5342, 5343)));
        for bad in [
            "",
            "net://",
            "h",
            "tcp://h",
            "net://:1",
            "net://h:",
            "net://h:x",
            "net://h:0",
            "net://h:1:2:3",
            "net://h/path",
            "net://[::1",
            "net://[::1]x",
            "net://h:65535",
            "net://h:1:",
            "net://h:99999",
        ] {
            let e = RelayUrl::parse(bad).expect_err(bad);
            let msg = e.to_string();
            assert!(msg.contains("net://HOST"), "{msg}");
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["net://h:1:2", "net://[::1]:5342:5343"] {
            assert_eq!(RelayUrl::parse(s).unwrap().to_string(), s);
        }
    }
}
