//! Span deadlines given as text: `HUSHTRACE_ON_LATE='rt:cycle>1500us,app:handle>2ms'` and
//! `hushtrace record --on-late 'rt:cycle>1500us'`.
//!
//! A rule is `GLOB>DURATION`: the glob selects spans by `category:name` exactly as
//! `HUSHTRACE_ENABLE` does (`*` and `?`; a glob without `:` matches the full name), the
//! duration is a positive number with a unit, `ns`, `us`, `ms` or `s` (`1.5ms` is allowed; the
//! result is rounded down to whole nanoseconds and must be at least 1 ns). Rules apply in order
//! and a later rule overrides an earlier one for the spans both select, as `HUSHTRACE_ENABLE`'s
//! do, so `*>10ms,rt:*>500us` gives `rt` spans 500 µs and the others 10 ms.
//!
//! Parsing happens once, before anything runs; a span's deadline is resolved once per callsite
//! (at registration or on its first hit), so the tracepoint itself only compares.
//!
//! ```
//! use hushtrace_core::DeadlineRules;
//! let rules: DeadlineRules = "rt:cycle>1500us, app:*>2ms".parse().unwrap();
//! assert_eq!(rules.deadline_ns("rt", "cycle"), Some(1_500_000));
//! assert_eq!(rules.deadline_ns("app", "handle"), Some(2_000_000));
//! assert_eq!(rules.deadline_ns("db", "query"), None);
//!
//! let err = "rt:cycle>15xs".parse::<DeadlineRules>().unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "deadline rule 'rt:cycle>15xs': unknown unit 'xs' (expected ns, us, ms or s)"
//! );
//! ```

use crate::glob_match;
use std::fmt;
use std::str::FromStr;

/// The most rules one specification may hold (a bound on the work of resolving a callsite).
pub const MAX_DEADLINE_RULES: usize = 64;

/// One `GLOB>DURATION` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlineRule {
    /// The `category:name` glob (or a glob over the full name).
    pub glob: String,
    /// The deadline in nanoseconds, at least 1.
    pub deadline_ns: u64,
}

impl DeadlineRule {
    /// Whether this rule selects the span `category:name`.
    pub fn selects(&self, category: &str, name: &str) -> bool {
        match self.glob.split_once(':') {
            Some((gc, gn)) => glob_match(gc, category) && glob_match(gn, name),
            None => {
                // A glob without ':' is matched against the full name "category:name".
                // Resolved once per callsite, never on a tracepoint: the allocation is fine.
                let mut full = String::with_capacity(category.len() + 1 + name.len());
                full.push_str(category);
                full.push(':');
                full.push_str(name);
                glob_match(&self.glob, &full)
            }
        }
    }
}

impl fmt::Display for DeadlineRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}>{}", self.glob, DisplayNs(self.deadline_ns))
    }
}

/// A duration in nanoseconds shown in the largest unit that divides it exactly.
struct DisplayNs(u64);

impl fmt::Display for DisplayNs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (div, unit) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
            if n.is_multiple_of(div) {
                return write!(f, "{}{unit}", n / div);
            }
        }
        write!(f, "{n}ns")
    }
}

/// An ordered list of deadline rules (see the [module docs](self)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeadlineRules {
    rules: Vec<DeadlineRule>,
}

impl DeadlineRules {
    /// No rules: no span has a deadline.
    pub const fn new() -> Self {
        DeadlineRules { rules: Vec::new() }
    }

    /// The rules, in the order they apply.
    pub fn rules(&self) -> &[DeadlineRule] {
        &self.rules
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Appends the rules of `spec` (one rule or a comma-separated list), as a repeated
    /// `--on-late` does.
    pub fn extend_from_spec(&mut self, spec: &str) -> Result<(), DeadlineError> {
        for item in spec.split(',') {
            let rule = parse_rule(item)?;
            if self.rules.len() == MAX_DEADLINE_RULES {
                return Err(DeadlineError {
                    rule: item.trim().to_string(),
                    kind: DeadlineErrorKind::TooMany,
                });
            }
            self.rules.push(rule);
        }
        Ok(())
    }

    /// The deadline of the span `category:name`: that of the last rule selecting it.
    pub fn deadline_ns(&self, category: &str, name: &str) -> Option<u64> {
        self.rules
            .iter()
            .rev()
            .find(|r| r.selects(category, name))
            .map(|r| r.deadline_ns)
    }
}

impl FromStr for DeadlineRules {
    type Err = DeadlineError;

    fn from_str(spec: &str) -> Result<Self, DeadlineError> {
        let mut rules = DeadlineRules::new();
        rules.extend_from_spec(spec)?;
        Ok(rules)
    }
}

impl fmt::Display for DeadlineRules {
    /// The rules in the form they parse from (`rt:cycle>1500us,app:*>2ms`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.rules.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// A deadline rule that does not parse: the rule's text and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlineError {
    /// The rule as given (trimmed).
    pub rule: String,
    /// What is wrong.
    pub kind: DeadlineErrorKind,
}

/// What is wrong with a deadline rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeadlineErrorKind {
    /// An empty rule (for example a doubled or trailing comma).
    Empty,
    /// No `>` between the glob and the duration.
    NoSeparator,
    /// Nothing before the `>`.
    EmptyGlob,
    /// No number before the unit.
    NoNumber,
    /// A number that does not parse.
    BadNumber(String),
    /// No unit after the number.
    NoUnit,
    /// A unit other than `ns`, `us`, `ms`, `s`.
    UnknownUnit(String),
    /// Zero, or under one nanosecond once converted.
    Zero,
    /// More than `u64::MAX` nanoseconds.
    TooLong,
    /// More than [`MAX_DEADLINE_RULES`] rules.
    TooMany,
}

impl fmt::Display for DeadlineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "deadline rule '{}': ", self.rule)?;
        match &self.kind {
            DeadlineErrorKind::Empty => f.write_str("empty (a doubled or trailing comma?)"),
            DeadlineErrorKind::NoSeparator => {
                f.write_str("expected GLOB>DURATION, as in 'rt:cycle>1500us'")
            }
            DeadlineErrorKind::EmptyGlob => f.write_str("no category:name glob before '>'"),
            DeadlineErrorKind::NoNumber => f.write_str("no number after '>'"),
            DeadlineErrorKind::BadNumber(s) => write!(f, "'{s}' is not a number"),
            DeadlineErrorKind::NoUnit => f.write_str("no unit (ns, us, ms or s) after the number"),
            DeadlineErrorKind::UnknownUnit(u) => {
                write!(f, "unknown unit '{u}' (expected ns, us, ms or s)")
            }
            DeadlineErrorKind::Zero => f.write_str("the deadline must be at least 1 ns"),
            DeadlineErrorKind::TooLong => f.write_str("the deadline does not fit in 64-bit ns"),
            DeadlineErrorKind::TooMany => {
                write!(f, "more than {MAX_DEADLINE_RULES} deadline rules")
            }
        }
    }
}

impl std::error::Error for DeadlineError {}

fn parse_rule(item: &str) -> Result<DeadlineRule, DeadlineError> {
    let rule = item.trim();
    let err = |kind| DeadlineError {
        rule: rule.to_string(),
        kind,
    };
    if rule.is_empty() {
        return Err(err(DeadlineErrorKind::Empty));
    }
    let (glob, dur) = rule
        .rsplit_once('>')
        .ok_or_else(|| err(DeadlineErrorKind::NoSeparator))?;
    let glob = glob.trim();
    if glob.is_empty() {
        return Err(err(DeadlineErrorKind::EmptyGlob));
    }
    let deadline_ns = parse_duration_ns(dur.trim()).map_err(err)?;
    Ok(DeadlineRule {
        glob: glob.to_string(),
        deadline_ns,
    })
}

/// Parses `1500us`, `1.5ms`, `2s`, `250ns` into nanoseconds (rounded down, at least 1).
pub fn parse_duration_ns(text: &str) -> Result<u64, DeadlineErrorKind> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    if num.is_empty() {
        return Err(DeadlineErrorKind::NoNumber);
    }
    let unit = unit.trim();
    let scale: u64 = match unit {
        "" => return Err(DeadlineErrorKind::NoUnit),
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        other => return Err(DeadlineErrorKind::UnknownUnit(other.to_string())),
    };
    let bad = || DeadlineErrorKind::BadNumber(num.to_string());
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(bad());
    }
    let whole: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let mut ns = whole.checked_mul(scale).ok_or(DeadlineErrorKind::TooLong)?;
    // The fraction, digit by digit, exact to the nanosecond (further digits round down).
    let mut place = scale;
    for d in frac.bytes() {
        place /= 10;
        if place == 0 {
            break;
        }
        ns = ns
            .checked_add(u64::from(d - b'0') * place)
            .ok_or(DeadlineErrorKind::TooLong)?;
    }
    if ns == 0 {
        return Err(DeadlineErrorKind::Zero);
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(spec: &str) -> DeadlineErrorKind {
        spec.parse::<DeadlineRules>().unwrap_err().kind
    }

    #[test]
    fn units_and_fractions() {
        assert_eq!(parse_duration_ns("250ns"), Ok(250));
        assert_eq!(parse_duration_ns("1500us"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration_ns(".5us"), Ok(500));
        assert_eq!(parse_duration_ns("1.0009us"), Ok(1_000));
        assert_eq!(parse_duration_ns("3 ms"), Ok(3_000_000));
    }

    #[test]
    fn later_rules_override_earlier_ones() {
        let r: DeadlineRules = "*>10ms,rt:*>500us".parse().unwrap();
        assert_eq!(r.deadline_ns("rt", "cycle"), Some(500_000));
        assert_eq!(r.deadline_ns("app", "x"), Some(10_000_000));
        let r: DeadlineRules = "rt:*>500us,*>10ms".parse().unwrap();
        assert_eq!(r.deadline_ns("rt", "cycle"), Some(10_000_000));
    }

    #[test]
    fn globs_without_a_colon_match_the_full_name() {
        let r: DeadlineRules = "rt*cycle>1ms".parse().unwrap();
        assert_eq!(r.deadline_ns("rt", "cycle"), Some(1_000_000));
        assert_eq!(r.deadline_ns("rt", "sample"), None);
    }

    #[test]
    fn repeated_specs_append() {
        let mut r = DeadlineRules::new();
        r.extend_from_spec("rt:cycle>1500us").unwrap();
        r.extend_from_spec("app:handle>2ms").unwrap();
        assert_eq!(r.to_string(), "rt:cycle>1500us,app:handle>2ms");
        assert_eq!(r.to_string().parse::<DeadlineRules>().unwrap(), r);
    }

    #[test]
    fn bad_rules_name_the_problem() {
        assert_eq!(kind(""), DeadlineErrorKind::Empty);
        assert_eq!(kind("rt:cycle>1ms,"), DeadlineErrorKind::Empty);
        assert_eq!(kind("rt:cycle"), DeadlineErrorKind::NoSeparator);
        assert_eq!(kind(">1ms"), DeadlineErrorKind::EmptyGlob);
        assert_eq!(kind("rt:cycle>ms"), DeadlineErrorKind::NoNumber);
        assert_eq!(kind("rt:cycle>1500"), DeadlineErrorKind::NoUnit);
        assert_eq!(
            kind("rt:cycle>15m"),
            DeadlineErrorKind::UnknownUnit("m".into())
        );
        assert_eq!(
            kind("rt:cycle>1.2.3ms"),
            DeadlineErrorKind::BadNumber("1.2.3".into())
        );
        assert_eq!(kind("rt:cycle>0us"), DeadlineErrorKind::Zero);
        assert_eq!(kind("rt:cycle>0.1ns"), DeadlineErrorKind::Zero);
        assert_eq!(
            kind("rt:cycle>99999999999999999999s"),
            DeadlineErrorKind::BadNumber("99999999999999999999".into())
        );
        assert_eq!(kind("rt:cycle>99999999999s"), DeadlineErrorKind::TooLong);
        let many = vec!["a:b>1ms"; MAX_DEADLINE_RULES + 1].join(",");
        assert_eq!(kind(&many), DeadlineErrorKind::TooMany);
    }

    #[test]
    fn errors_quote_the_rule() {
        let e = "a:b>1ms, rt:cycle>1500 "
            .parse::<DeadlineRules>()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "deadline rule 'rt:cycle>1500': no unit (ns, us, ms or s) after the number"
        );
    }
}
