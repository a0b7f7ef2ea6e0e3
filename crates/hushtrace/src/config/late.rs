//! The late-span settings (issue 31): deadline rules, how many captures, how far apart, and how
//! much of the time before a late span each one keeps; from `HUSHTRACE_ON_LATE`,
//! `HUSHTRACE_LATE_MAX`, `HUSHTRACE_LATE_INTERVAL`, `HUSHTRACE_LATE_WINDOW`.

use super::{Config, Error, Raw};
use crate::env;
use hushtrace_core::DeadlineRules;
use std::time::Duration;

/// Default number of late-span captures per process (`HUSHTRACE_LATE_MAX`): a production
/// process that misses deadlines all the time keeps the first 16 and counts the others.
pub const DEFAULT_LATE_MAX: u64 = 16;
/// Default least time between two late-span captures (`HUSHTRACE_LATE_INTERVAL`).
pub const DEFAULT_LATE_INTERVAL: Duration = Duration::from_secs(1);
/// Default time before a late span's begin that its capture keeps at least
/// (`HUSHTRACE_LATE_WINDOW`), when the rings hold it.
pub const DEFAULT_LATE_WINDOW: Duration = Duration::from_millis(100);
/// Largest accepted late window and interval: one hour.
pub const MAX_LATE_DURATION: Duration = Duration::from_secs(3600);

/// The late-span part of a session's settings.
#[derive(Clone, Debug)]
pub(crate) struct LateConfig {
    /// Deadline rules (`HUSHTRACE_ON_LATE`, `SessionBuilder::on_late`).
    pub rules: DeadlineRules,
    /// A builder spec that did not parse: (spec, reason), reported by `validate`.
    pub bad: Option<(String, String)>,
    /// Most captures (`HUSHTRACE_LATE_MAX`); 0: late spans are only counted.
    pub max: u64,
    /// Least time between two captures (`HUSHTRACE_LATE_INTERVAL`).
    pub interval: Duration,
    /// Time before a late span's begin a capture keeps (`HUSHTRACE_LATE_WINDOW`).
    pub window: Duration,
}

impl Default for LateConfig {
    fn default() -> LateConfig {
        LateConfig {
            rules: DeadlineRules::new(),
            bad: None,
            max: DEFAULT_LATE_MAX,
            interval: DEFAULT_LATE_INTERVAL,
            window: DEFAULT_LATE_WINDOW,
        }
    }
}

impl LateConfig {
    /// Appends the rules of `spec`; a spec that does not parse is kept for `validate`.
    pub(crate) fn add_spec(&mut self, spec: &str) {
        if let Err(e) = self.rules.extend_from_spec(spec) {
            self.bad.get_or_insert((spec.to_string(), e.to_string()));
        }
    }

    /// Checks the limits; the error names the variable (if any) and the value.
    pub(super) fn validate(&self, raw: &Raw) -> Result<(), Error> {
        if let Some((spec, reason)) = &self.bad {
            return Err(Error::Config {
                var: raw.var(env::ON_LATE),
                value: spec.clone(),
                reason: reason.clone(),
            });
        }
        for (var, d) in [
            (env::LATE_INTERVAL, self.interval),
            (env::LATE_WINDOW, self.window),
        ] {
            if d > MAX_LATE_DURATION {
                return Err(Error::Config {
                    var: raw.var(var),
                    value: raw.value(var, format!("{}ms", d.as_millis())),
                    reason: format!("at most {}s", MAX_LATE_DURATION.as_secs()),
                });
            }
        }
        Ok(())
    }
}

/// Reads the late-span variables into `cfg` (and `raw`, for the errors of `validate`).
pub(super) fn from_vars(
    cfg: &mut Config,
    raw: &mut Raw,
    get: impl Fn(&str) -> Option<String>,
) -> Result<(), Error> {
    if let Some(v) = get(env::ON_LATE).filter(|v| !v.trim().is_empty()) {
        cfg.late.rules = v
            .parse()
            .map_err(|e: hushtrace_core::DeadlineError| Error::Config {
                var: Some(env::ON_LATE),
                value: v.clone(),
                reason: e.to_string(),
            })?;
        raw.push(env::ON_LATE, v);
    }
    if let Some(v) = get(env::LATE_MAX) {
        cfg.late.max = v.trim().parse().map_err(|_| Error::Config {
            var: Some(env::LATE_MAX),
            value: v.clone(),
            reason: "expected a whole number of captures (0: count late spans, capture none)"
                .into(),
        })?;
        raw.push(env::LATE_MAX, v);
    }
    if let Some(v) = get(env::LATE_INTERVAL) {
        cfg.late.interval = parse_duration(env::LATE_INTERVAL, &v)?;
        raw.push(env::LATE_INTERVAL, v);
    }
    if let Some(v) = get(env::LATE_WINDOW) {
        cfg.late.window = parse_duration(env::LATE_WINDOW, &v)?;
        raw.push(env::LATE_WINDOW, v);
    }
    Ok(())
}

/// A duration with a unit (`1s`, `500ms`, `1.5ms`, `250us`), or `0`.
fn parse_duration(var: &'static str, v: &str) -> Result<Duration, Error> {
    let t = v.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    hushtrace_core::parse_duration_ns(t)
        .map(Duration::from_nanos)
        .map_err(|_| Error::Config {
            var: Some(var),
            value: v.to_string(),
            reason: "expected a duration with a unit, ns, us, ms or s (as in 1s or 500ms)".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Result<Config, Error> {
        let mut cfg = Config::default();
        let mut raw = Raw::default();
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        from_vars(&mut cfg, &mut raw, |n| {
            owned.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
        })?;
        cfg.validate(&raw)?;
        Ok(cfg)
    }

    #[test]
    fn variables_set_the_late_settings() {
        let cfg = vars(&[
            (env::ON_LATE, "rt:cycle>1500us,app:handle>2ms"),
            (env::LATE_MAX, "3"),
            (env::LATE_INTERVAL, "500ms"),
            (env::LATE_WINDOW, "20ms"),
        ])
        .unwrap();
        assert_eq!(cfg.late.rules.deadline_ns("rt", "cycle"), Some(1_500_000));
        assert_eq!(cfg.late.max, 3);
        assert_eq!(cfg.late.interval, Duration::from_millis(500));
        assert_eq!(cfg.late.window, Duration::from_millis(20));
        let d = vars(&[]).unwrap();
        assert_eq!(d.late.max, DEFAULT_LATE_MAX);
        assert_eq!(d.late.interval, DEFAULT_LATE_INTERVAL);
    }

    #[test]
    fn bad_values_name_the_variable_and_the_value() {
        let e = vars(&[(env::ON_LATE, "rt:cycle>15xs")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid HUSHTRACE_ON_LATE=\"rt:cycle>15xs\": deadline rule 'rt:cycle>15xs': \
             unknown unit 'xs' (expected ns, us, ms or s)"
        );
        let e = vars(&[(env::LATE_MAX, "many")]).unwrap_err().to_string();
        assert!(e.starts_with("invalid HUSHTRACE_LATE_MAX=\"many\""), "{e}");
        let e = vars(&[(env::LATE_INTERVAL, "1h")]).unwrap_err().to_string();
        assert!(
            e.starts_with("invalid HUSHTRACE_LATE_INTERVAL=\"1h\""),
            "{e}"
        );
        let e = vars(&[(env::LATE_WINDOW, "2h")]).unwrap_err().to_string();
        assert!(e.contains("HUSHTRACE_LATE_WINDOW"), "{e}");
        let e = vars(&[(env::LATE_WINDOW, "7200s")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("HUSHTRACE_LATE_WINDOW=\"7200s\""), "{e}");
    }
}
