//! `hushtrace report --exceptions DIR`: the Python exceptions of a trace (`py:exception`
//! events, recorded by the Python package's `--exceptions`: one just before the `py:call` end
//! of each frame an exception unwound, fields `f`, `type`, `message`), by type and function,
//! each counted as caught or uncaught.
//!
//! Whether an exception was caught is read from the slices around it: an exception unwinds
//! a run of nested frames, each with its `py:exception` event; it was caught in the first
//! enclosing recorded frame that ends by a return, or that goes on to unwind with an exception
//! of another type (the handler raised a new one); uncaught when it unwinds the outermost
//! recorded frame of its thread. An exception whose enclosing frames are still open when the
//! trace ends is counted in neither.

use crate::pyfuncs::PyFuncs;
use crate::report::table;
use hushtrace_ctf::reader::{Error, MergedEvent, Session, Value};
use hushtrace_ctf::Kind;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The report: one row per exception type and function.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ExceptionsReport {
    /// By count, descending, then type and function.
    pub rows: Vec<ExceptionRow>,
}

/// The frames of one function that one exception type unwound.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ExceptionRow {
    /// The exception's class (`ValueError`, `app.errors.Timeout`; empty below Python 3.12).
    #[serde(rename = "type")]
    pub type_: String,
    /// The unwound function, `module:qualname` (`#id` when its definition is missing).
    pub function: String,
    /// Frames of the function unwound by the type.
    pub count: u64,
    /// Of those, whose exception was caught further up.
    pub caught: u64,
    /// Of those, whose exception unwound the thread's outermost recorded frame.
    pub uncaught: u64,
    /// The first message seen (may be empty).
    pub message: String,
}

/// An open `py:call` frame: the exceptions delivered by its unwound callees (type and their
/// occurrences), and its own, recorded just before its end.
#[derive(Default)]
struct Frame {
    pending: Vec<(String, Vec<usize>)>,
    own: Option<(String, usize)>,
}

fn field<'a>(ev: &MergedEvent<'a>, name: &str) -> Option<Value<'a>> {
    let i = ev
        .event
        .class
        .fields
        .as_ref()?
        .iter()
        .position(|(n, _)| n == name)?;
    ev.event.field(i)
}

fn field_str<'a>(ev: &MergedEvent<'a>, name: &str) -> &'a str {
    match field(ev, name) {
        Some(Value::Str(s)) => s,
        _ => "",
    }
}

/// Reads the session and computes the report.
pub fn compute(session: &Session) -> Result<ExceptionsReport, Error> {
    let funcs = PyFuncs::of_session(session)?;
    let mut merged = session.merged()?;
    let mut stacks: HashMap<(usize, u32), Vec<Frame>> = HashMap::new();
    // Per occurrence: its row, and whether it was caught (None: not known).
    let mut occ: Vec<(usize, Option<bool>)> = Vec::new();
    let mut rows: Vec<ExceptionRow> = Vec::new();
    let mut row_of: HashMap<(String, String), usize> = HashMap::new();
    let settle = |occ: &mut Vec<(usize, Option<bool>)>, chain: &[usize], caught: bool| {
        for &o in chain {
            occ[o].1 = Some(caught);
        }
    };
    while let Some(ev) = merged.next()? {
        let class = ev.event.class;
        let key = (ev.trace, ev.event.packet.vtid);
        match class.kind {
            Kind::SpanBegin if class.name == "py:call" => {
                stacks.entry(key).or_default().push(Frame::default());
            }
            Kind::Instant if class.name == "py:exception" => {
                let ty = field_str(&ev, "type").to_string();
                let f = field(&ev, "f").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
                let function = funcs
                    .function(ev.trace, f)
                    .map_or_else(|| format!("#{f}"), str::to_string);
                let r = *row_of
                    .entry((ty.clone(), function.clone()))
                    .or_insert_with(|| {
                        rows.push(ExceptionRow {
                            type_: ty.clone(),
                            function,
                            count: 0,
                            caught: 0,
                            uncaught: 0,
                            message: field_str(&ev, "message").to_string(),
                        });
                        rows.len() - 1
                    });
                rows[r].count += 1;
                occ.push((r, None));
                if let Some(top) = stacks.get_mut(&key).and_then(|s| s.last_mut()) {
                    top.own = Some((ty, occ.len() - 1));
                }
            }
            Kind::SpanEnd if class.name == "py:call" => {
                let Some(stack) = stacks.get_mut(&key) else {
                    continue;
                };
                let Some(mut frame) = stack.pop() else {
                    continue;
                };
                let Some((ty, o)) = frame.own else {
                    // Ended by a return: what its callees raised was caught here.
                    for (_, chain) in &frame.pending {
                        settle(&mut occ, chain, true);
                    }
                    continue;
                };
                // The latest exception of the same type goes on (the handler re-raised it, or
                // had none); the others were caught here.
                let mut chain = match frame.pending.iter().rposition(|(t, _)| *t == ty) {
                    Some(i) => frame.pending.remove(i).1,
                    None => Vec::new(),
                };
                chain.push(o);
                for (_, c) in &frame.pending {
                    settle(&mut occ, c, true);
                }
                match stack.last_mut() {
                    Some(parent) => parent.pending.push((ty, chain)),
                    None => settle(&mut occ, &chain, false),
                }
            }
            _ => {}
        }
    }
    for (r, caught) in occ {
        match caught {
            Some(true) => rows[r].caught += 1,
            Some(false) => rows[r].uncaught += 1,
            None => {}
        }
    }
    rows.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.type_.cmp(&b.type_))
            .then_with(|| a.function.cmp(&b.function))
    });
    Ok(ExceptionsReport { rows })
}

impl ExceptionsReport {
    /// The text form: a table by type and function, with totals per type.
    pub fn to_text(&self) -> String {
        if self.rows.is_empty() {
            return "No Python exceptions in the trace (py:exception events: `python -m \
                    hushtrace run --exceptions`).\n"
                .into();
        }
        let mut per_type: BTreeMap<&str, u64> = BTreeMap::new();
        for r in &self.rows {
            *per_type.entry(r.type_.as_str()).or_default() += r.count;
        }
        let name = |t: &str| {
            if t.is_empty() {
                "(unknown)".to_string()
            } else {
                t.to_string()
            }
        };
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let mut m: String = r.message.chars().take(60).collect();
                if m.len() < r.message.len() {
                    m.push('…');
                }
                vec![
                    name(&r.type_),
                    r.function.clone(),
                    r.count.to_string(),
                    r.caught.to_string(),
                    r.uncaught.to_string(),
                    m,
                ]
            })
            .collect();
        let mut s = String::from("Python exceptions (frames unwound, by type and function):\n");
        s.push_str(&table(
            &[
                "type", "function", "frames", "caught", "uncaught", "message",
            ],
            &rows,
        ));
        s.push_str("\nBy type:\n");
        let totals: Vec<Vec<String>> = per_type
            .into_iter()
            .map(|(t, n)| vec![name(t), n.to_string()])
            .collect();
        s.push_str(&table(&["type", "frames"], &totals));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_report_says_how_to_record() {
        let r = ExceptionsReport::default();
        assert!(r.to_text().contains("--exceptions"));
    }
}
