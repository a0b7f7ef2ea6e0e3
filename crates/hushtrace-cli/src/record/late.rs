//! `record --on-late SPEC --late-max N --late-interval D --late-window D`: span deadlines and
//! the bounds of the late-span captures (issue 31), checked with the runtime's own parsers
//! (`hushtrace_core::DeadlineRules`, `parse_duration_ns`) before the command runs, then handed
//! to it in the environment.

use hushtrace_core::{parse_duration_ns, DeadlineErrorKind, DeadlineRules};
use std::ffi::OsString;
use std::fmt;

/// The variables, from the runtime's one table of them (`hushtrace::env`).
pub use hushtrace::env::{LATE_INTERVAL, LATE_MAX, LATE_WINDOW, ON_LATE};

/// The late-span settings of `record`, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LateOptions {
    /// Every `--on-late` rule, in order (a later one overrides an earlier one).
    pub rules: DeadlineRules,
    /// `--late-max`.
    pub max: Option<u64>,
    /// `--late-interval`, as given (a valid duration).
    pub interval: Option<String>,
    /// `--late-window`, as given (a valid duration).
    pub window: Option<String>,
}

/// A late-span flag that does not parse: the flag and the parser's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LateFlagError {
    /// `--on-late`, `--late-interval` or `--late-window`.
    pub flag: &'static str,
    /// What is wrong (for `--on-late`, the rule parser's message, which quotes the rule).
    pub message: String,
}

impl fmt::Display for LateFlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.flag, self.message)
    }
}

impl std::error::Error for LateFlagError {}

/// Checks a `--late-interval` / `--late-window` value with the runtime's duration parser.
fn duration(flag: &'static str, text: &str) -> Result<String, LateFlagError> {
    let text = text.trim();
    parse_duration_ns(text).map_err(|kind| LateFlagError {
        flag,
        message: match kind {
            DeadlineErrorKind::Zero => format!("'{text}': the duration must be at least 1 ns"),
            DeadlineErrorKind::TooLong => format!("'{text}': does not fit in 64-bit ns"),
            _ => format!(
                "'{text}' is not a duration: expected a number and a unit (ns, us, ms or s), \
                 as in 500ms"
            ),
        },
    })?;
    Ok(text.to_string())
}

impl LateOptions {
    /// Parses the flags: each `--on-late` SPEC (one rule or a comma-separated list) in order.
    ///
    /// ```
    /// use hushtrace_cli::record::LateOptions;
    /// let o = LateOptions::from_flags(&["rt:cycle>1500us".into(), "app:*>2ms".into()],
    ///                                 Some(4), Some("1s"), None).unwrap();
    /// let env: Vec<_> = o.env().into_iter()
    ///     .map(|(k, v)| format!("{k}={}", v.to_string_lossy())).collect();
    /// assert_eq!(env, ["HUSHTRACE_ON_LATE=rt:cycle>1500us,app:*>2ms", "HUSHTRACE_LATE_MAX=4",
    ///                  "HUSHTRACE_LATE_INTERVAL=1s"]);
    ///
    /// let e = LateOptions::from_flags(&["rt:cycle>15xs".into()], None, None, None).unwrap_err();
    /// assert_eq!(e.to_string(),
    ///     "--on-late: deadline rule 'rt:cycle>15xs': unknown unit 'xs' (expected ns, us, ms or s)");
    /// let e = LateOptions::from_flags(&[], None, None, Some("10")).unwrap_err();
    /// assert_eq!(e.flag, "--late-window");
    /// ```
    pub fn from_flags(
        on_late: &[String],
        max: Option<u64>,
        interval: Option<&str>,
        window: Option<&str>,
    ) -> Result<LateOptions, LateFlagError> {
        let mut rules = DeadlineRules::new();
        for spec in on_late {
            rules.extend_from_spec(spec).map_err(|e| LateFlagError {
                flag: "--on-late",
                message: e.to_string(),
            })?;
        }
        Ok(LateOptions {
            rules,
            max,
            interval: interval
                .map(|d| duration("--late-interval", d))
                .transpose()?,
            window: window.map(|d| duration("--late-window", d)).transpose()?,
        })
    }

    /// The environment variables to set: only those of the flags given.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut env = Vec::new();
        if !self.rules.is_empty() {
            env.push((ON_LATE, self.rules.to_string().into()));
        }
        if let Some(n) = self.max {
            env.push((LATE_MAX, n.to_string().into()));
        }
        if let Some(d) = &self.interval {
            env.push((LATE_INTERVAL, d.into()));
        }
        if let Some(d) = &self.window {
            env.push((LATE_WINDOW, d.into()));
        }
        env
    }
}
