//! The late-span counters of each process, from its statistics file
//! (`DIR/<pid>.stats.json`: `late_spans`, `late_captured`, `late_not_captured`), shown by
//! `report --late` and by the plain `report` when present.

use serde::Serialize;
use std::path::Path;

/// The counters of one process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LateCounters {
    /// Process id (the statistics file's `pid`).
    pub pid: u64,
    /// Spans that ended after their deadline.
    pub late_spans: u64,
    /// Of those, the ones captured into `DIR/late/<n>/`.
    pub late_captured: u64,
    /// The ones not captured (`--late-max` reached, within `--late-interval` of the previous
    /// capture, or overwritten before the consumer saw them).
    pub late_not_captured: u64,
}

/// Files larger than this are not statistics files.
const MAX_STATS_BYTES: u64 = hushtrace_ctf::stats::MAX_STATS_BYTES;

/// The counters in statistics file text `text`: `None` when it has none of them.
fn parse(text: &str) -> Result<Option<LateCounters>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let get = |k: &str| -> Result<Option<u64>, String> {
        match v.get(k) {
            None => Ok(None),
            Some(x) => x
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("`{k}` is not a count")),
        }
    };
    let (spans, captured, not) = (
        get("late_spans")?,
        get("late_captured")?,
        get("late_not_captured")?,
    );
    if spans.is_none() && captured.is_none() && not.is_none() {
        return Ok(None);
    }
    Ok(Some(LateCounters {
        pid: get("pid")?.unwrap_or(0),
        late_spans: spans.unwrap_or(0),
        late_captured: captured.unwrap_or(0),
        late_not_captured: not.unwrap_or(0),
    }))
}

/// The counters of every process of session `dir` whose statistics file has them, by pid; and
/// a warning for each statistics file that cannot be read.
pub fn read_counters(dir: &Path) -> (Vec<LateCounters>, Vec<String>) {
    let (mut v, mut warnings) = (Vec::new(), Vec::new());
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (v, warnings);
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if hushtrace_ctf::stats::trace_name(&name).is_none() {
            continue;
        }
        let path = e.path();
        let text = match hushtrace_ctf::file::read_regular(&path, MAX_STATS_BYTES) {
            Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
            Ok(None) => {
                warnings.push(format!(
                    "{}: too large for a statistics file",
                    path.display()
                ));
                continue;
            }
            Err(err) => {
                warnings.push(err.to_string());
                continue;
            }
        };
        match parse(&text) {
            Ok(Some(c)) => v.push(c),
            Ok(None) => {}
            Err(why) => warnings.push(format!(
                "{}: malformed statistics file ({why})",
                path.display()
            )),
        }
    }
    v.sort_by_key(|c| c.pid);
    (v, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_when_present() {
        let c = parse(
            r#"{"pid":7,"written":1,"discarded":0,"late_spans":12,"late_captured":3,"late_not_captured":9}"#,
        );
        assert_eq!(
            c,
            Ok(Some(LateCounters {
                pid: 7,
                late_spans: 12,
                late_captured: 3,
                late_not_captured: 9
            }))
        );
        assert_eq!(parse(r#"{"pid":7,"written":1,"discarded":0}"#), Ok(None));
        assert!(parse(r#"{"pid":7,"late_spans":-1}"#).is_err());
        assert!(parse("{").is_err());
    }
}
