//! The `HUSHTRACE_*` environment parser: a session's settings from the variables, each
//! remembered with the text it held so errors quote what the user wrote.

use super::{parse_cpu_list, Config, Error};
use crate::env;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Where each setting came from: the environment variable and the text it held, so errors
/// quote what the user wrote.
#[derive(Clone, Debug, Default)]
pub(crate) struct Raw(Vec<(&'static str, String)>);

impl Raw {
    pub(super) fn var(&self, v: &'static str) -> Option<&'static str> {
        self.0.iter().find(|(n, _)| *n == v).map(|(n, _)| *n)
    }
    pub(super) fn value(&self, v: &'static str, parsed: impl fmt::Display) -> String {
        self.0
            .iter()
            .find(|(n, _)| *n == v)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| parsed.to_string())
    }
    pub(super) fn push(&mut self, v: &'static str, text: String) {
        self.0.push((v, text));
    }
}

impl Config {
    /// The session configured by the environment, if `HUSHTRACE_OUTPUT` is set and not empty.
    /// Without it, any other `HUSHTRACE_*` variable that is set (and not empty) is an error
    /// naming both: it would otherwise be ignored without a word (`HUSHTRACE_RELAY=net://...`
    /// alone traced nothing).
    pub(crate) fn from_env() -> Result<Option<(Config, Raw)>, Error> {
        Config::from_vars(|name| std::env::var_os(name))
    }

    /// [`Config::from_env`] with the variables from `get_os` (a variable that is not valid
    /// UTF-8 counts as unset, except `HUSHTRACE_OUTPUT`, a path).
    pub(super) fn from_vars(
        get_os: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Option<(Config, Raw)>, Error> {
        let get = |name: &str| get_os(name).and_then(|v| v.into_string().ok());
        let dir = match get_os(env::OUTPUT) {
            Some(d) if !d.is_empty() => d,
            _ => return without_output(&get_os),
        };
        let mut cfg = Config {
            output_dir: PathBuf::from(dir),
            ..Config::default()
        };
        let mut raw = Raw::default();
        if let Some(m) = get(env::MODE) {
            cfg.mode = m
                .parse()
                .map_err(|e: hushtrace_core::ParseModeError| Error::Config {
                    var: Some(env::MODE),
                    value: m.clone(),
                    reason: e.to_string(),
                })?;
        }
        if let Some(v) = get(env::SUBBUF_SIZE) {
            cfg.subbuf_size = parse_size(env::SUBBUF_SIZE, &v)?;
            raw.0.push((env::SUBBUF_SIZE, v));
        }
        if let Some(v) = get(env::NUM_SUBBUFS) {
            cfg.num_subbufs = parse_size(env::NUM_SUBBUFS, &v)?;
            raw.0.push((env::NUM_SUBBUFS, v));
        }
        if let Some(v) = get(env::ENABLE) {
            cfg.globs = parse_globs(&v)?;
        }
        if let Some(v) = get(env::READ_TIMER_MS) {
            let ms = parse_size(env::READ_TIMER_MS, &v)?;
            cfg.read_timer = Duration::from_millis(ms as u64);
            raw.0.push((env::READ_TIMER_MS, v));
        }
        if let Some(v) = get(env::FLUSH_MS) {
            let ms = parse_size(env::FLUSH_MS, &v)?;
            cfg.flush_interval = Duration::from_millis(ms as u64);
            cfg.flush_explicit = true;
            raw.0.push((env::FLUSH_MS, v));
        }
        if let Some(v) = get(env::RELAY) {
            if !v.trim().is_empty() {
                cfg.set_relay(v.trim());
                raw.0.push((env::RELAY, v));
            }
        }
        if let Some(v) = get(env::RELAY_SESSION) {
            cfg.relay_session = Some(v.clone());
            raw.0.push((env::RELAY_SESSION, v));
        }
        if let Some(v) = get(env::RELAY_HOST) {
            cfg.relay_host = Some(v.clone());
            raw.0.push((env::RELAY_HOST, v));
        }
        if let Some(v) = get(env::RELAY_ONLY) {
            cfg.relay_only = parse_switch(
                env::RELAY_ONLY,
                &v,
                "1 (relay only) or 0 (relay and local directory)",
            )?;
            raw.0.push((env::RELAY_ONLY, v));
        }
        if let Some(v) = get(env::DIRECT_IO) {
            cfg.direct_io = parse_switch(
                env::DIRECT_IO,
                &v,
                "1 (O_DIRECT stream files where the file system supports it) or 0 (through the \
                 page cache)",
            )?;
            raw.0.push((env::DIRECT_IO, v));
        }
        if let Some(v) = get(env::CONSUMER_SCHED) {
            cfg.consumer_sched = v.parse().map_err(|reason| Error::Config {
                var: Some(env::CONSUMER_SCHED),
                value: v.clone(),
                reason,
            })?;
            raw.0.push((env::CONSUMER_SCHED, v));
        }
        if let Some(v) = get(env::CONSUMER_CPUS) {
            if !v.trim().is_empty() {
                cfg.consumer_cpus = Some(parse_cpu_list(&v).map_err(|reason| Error::Config {
                    var: Some(env::CONSUMER_CPUS),
                    value: v.clone(),
                    reason,
                })?);
                raw.0.push((env::CONSUMER_CPUS, v));
            }
        }
        super::late::from_vars(&mut cfg, &mut raw, get)?;
        Ok(Some((cfg, raw)))
    }
}

/// `start_from_env()` without `HUSHTRACE_OUTPUT`: nothing to start (`Ok(None)`) unless another
/// `HUSHTRACE_*` variable is set, which is refused with the variable and what is missing.
pub(super) fn without_output(
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<(Config, Raw)>, Error> {
    for var in env::VARS.iter().filter(|v| v.name != env::OUTPUT) {
        let Some(value) = get(var.name).filter(|v| !v.is_empty()) else {
            continue;
        };
        let what = if var.name == env::RELAY {
            "a relay session keeps its metadata and statistics there (the events go to the \
             relay too, or only with HUSHTRACE_RELAY_ONLY=1)"
        } else {
            "it is the session directory, and no session starts without one"
        };
        return Err(Error::Config {
            var: Some(var.name),
            value: value.to_string_lossy().into_owned(),
            reason: format!(
                "set without {}: {what}; set {}=<dir>, or unset {}",
                env::OUTPUT,
                env::OUTPUT,
                var.name
            ),
        });
    }
    Ok(None)
}

/// Parses an on/off variable (`HUSHTRACE_RELAY_ONLY`, `HUSHTRACE_DIRECT_IO`): `1`, `on`,
/// `true`, `yes` or `0`, `off`, `false`, `no`, empty, in any case and with blanks around. Another
/// value is an error naming `var` and the value; `expected` says what 1 and 0 mean.
pub(super) fn parse_switch(var: &'static str, v: &str, expected: &str) -> Result<bool, Error> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "" | "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(Error::Config {
            var: Some(var),
            value: v.to_string(),
            reason: format!("expected {expected}"),
        }),
    }
}

/// Parses `HUSHTRACE_ENABLE`: comma-separated globs, a leading `-` disables.
pub(super) fn parse_globs(v: &str) -> Result<Vec<(String, bool)>, Error> {
    v.split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(|g| {
            let (pat, on) = match g.strip_prefix('-') {
                Some(p) => (p.trim(), false),
                None => (g, true),
            };
            if pat.is_empty() || pat.contains(char::is_whitespace) {
                return Err(Error::Config {
                    var: Some(env::ENABLE),
                    value: v.to_string(),
                    reason: format!(
                        "{g:?} is not a glob: expected comma-separated `category:name` globs, \
                         `-` before one to disable"
                    ),
                });
            }
            Ok((pat.to_string(), on))
        })
        .collect()
}

/// Parses a size with an optional `k`/`K`/`m`/`M` suffix (powers of 1024).
pub(super) fn parse_size(var: &'static str, v: &str) -> Result<usize, Error> {
    let t = v.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1024),
        Some('m' | 'M') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| Error::Config {
            var: Some(var),
            value: v.to_string(),
            reason: format!(
                "expected a positive integer below 2^{}, optionally with a k or M suffix",
                usize::BITS
            ),
        })
}
