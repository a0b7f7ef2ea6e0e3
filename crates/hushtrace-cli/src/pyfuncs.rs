//! Names of Python functions traced by the `hushtrace` Python package.
//!
//! Function tracing records one pair of callsites for every Python function, `py:call`
//! (span begin and end, field `f`: an interned function id) and, once per function and process
//! trace, a `py:function` instant (`f`, `module`, `qualname`, `file`, `line`) before the first
//! call that uses the id (and, in overwrite mode, again for every function when the program
//! takes a snapshot or stops: the earlier ones may have been overwritten, so the definition
//! can come after the calls that use it); asyncio tasks are `py:task` async slices (`id`, `f`, on both ends). Readers that name
//! spans after their event class would call every one `py:call`: [`PyFuncs`] keeps the
//! definitions seen so far (per process trace) and gives `py:call` and `py:task` events the
//! name `"<module>:<qualname>"`, which splits into category and name like any other; the
//! definitions themselves are not shown as events. A coroutine's calls (`py:call`, one per
//! resumption) and its task's lifetime (`py:task`) share that name: readers keep them apart
//! by kind (the report's rows: [`is_task`]).
//!
//! [`PyFuncs::of_session`] reads a session's definitions first, wherever they are in it.
//!
//! ```
//! let mut names = hushtrace_cli::pyfuncs::PyFuncs::default();
//! assert!(names.is_empty());
//! ```

use hushtrace_ctf::reader::{Error, MergedEvent, Session, Value};
use hushtrace_ctf::Kind;
use std::collections::HashMap;

/// Interned-function definitions seen so far, per process trace.
#[derive(Debug, Default)]
pub struct PyFuncs {
    /// `by_trace[trace]`: function id → `"module:qualname"`.
    by_trace: Vec<HashMap<u32, String>>,
    /// `defs[trace]`: function id → its whole definition (the Parquet export's columns).
    defs: Vec<HashMap<u32, PyDef>>,
}

/// A traced Python function's definition (a `py:function` event's fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PyDef {
    /// `__module__`.
    pub module: String,
    /// `__qualname__`.
    pub qualname: String,
    /// The source file, if recorded.
    pub file: Option<String>,
    /// The first line, if recorded.
    pub line: Option<u32>,
}

/// The `u32` value of field `name` of an event.
fn field_u32(ev: &MergedEvent<'_>, name: &str) -> Option<u32> {
    let i = ev
        .event
        .class
        .fields
        .as_ref()?
        .iter()
        .position(|(n, _)| n == name)?;
    let v = ev.event.field(i)?;
    match (v.as_u64(), v.as_i64()) {
        (Some(v), _) => u32::try_from(v).ok(),
        (_, Some(v)) => u32::try_from(v).ok(),
        _ => None,
    }
}

fn field_str<'a>(ev: &MergedEvent<'a>, name: &str) -> Option<&'a str> {
    let i = ev
        .event
        .class
        .fields
        .as_ref()?
        .iter()
        .position(|(n, _)| n == name)?;
    match ev.event.field(i)? {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

/// Whether `ev` is a `py:function` definition (it describes a function; readers do not show
/// it as something that happened).
pub fn is_definition(ev: &MergedEvent<'_>) -> bool {
    let class = ev.event.class;
    class.kind == Kind::Instant && class.name == "py:function"
}

/// Whether `ev` is a `py:task` begin or end (an asyncio task's async slice: its lifetime, not
/// a call of its coroutine's function, although both are named after that function).
pub fn is_task(ev: &MergedEvent<'_>) -> bool {
    let class = ev.event.class;
    matches!(class.kind, Kind::AsyncBegin | Kind::AsyncEnd) && class.name == "py:task"
}

impl PyFuncs {
    /// Every definition in `session`, read in a first pass over its events, so that calls
    /// recorded before their function's definition are named too (overwrite mode's state dump
    /// comes after them). Sessions without a `py:function` event class are not read.
    pub fn of_session(session: &Session) -> Result<PyFuncs, Error> {
        let mut py = PyFuncs::default();
        let python = session
            .traces
            .iter()
            .any(|t| t.desc.events.iter().any(|c| c.name == "py:function"));
        if python {
            let mut merged = session.merged()?;
            while let Some(ev) = merged.next()? {
                py.observe(&ev);
            }
        }
        Ok(py)
    }

    /// Whether no definition was seen.
    pub fn is_empty(&self) -> bool {
        self.by_trace.iter().all(|m| m.is_empty())
    }

    /// Feeds one event; returns `true` for a `py:function` definition (kept here; readers skip
    /// it: it describes functions, it is not something that happened).
    pub fn observe(&mut self, ev: &MergedEvent<'_>) -> bool {
        if !is_definition(ev) {
            return false;
        }
        if let (Some(f), Some(module), Some(qualname)) = (
            field_u32(ev, "f"),
            field_str(ev, "module"),
            field_str(ev, "qualname"),
        ) {
            if self.by_trace.len() <= ev.trace {
                self.by_trace.resize_with(ev.trace + 1, HashMap::new);
            }
            self.by_trace[ev.trace].insert(f, format!("{module}:{qualname}"));
            if self.defs.len() <= ev.trace {
                self.defs.resize_with(ev.trace + 1, HashMap::new);
            }
            let def = PyDef {
                module: module.to_owned(),
                qualname: qualname.to_owned(),
                file: field_str(ev, "file").map(str::to_owned),
                line: field_u32(ev, "line"),
            };
            self.defs[ev.trace].insert(f, def);
        }
        true
    }

    /// The definition of function `f` of process trace `trace`, if seen.
    pub fn definition(&self, trace: usize, f: u32) -> Option<&PyDef> {
        self.defs.get(trace)?.get(&f)
    }

    /// The `"module:qualname"` of function `f` of process trace `trace`, if defined.
    pub fn function(&self, trace: usize, f: u32) -> Option<&str> {
        self.by_trace.get(trace)?.get(&f).map(String::as_str)
    }

    /// For a `py:call` or `py:task` begin or end whose function was defined: the
    /// function id and its `"module:qualname"`.
    pub fn resolve(&self, ev: &MergedEvent<'_>) -> Option<(u32, &str)> {
        let class = ev.event.class;
        let ours = match class.kind {
            Kind::SpanBegin | Kind::SpanEnd => class.name == "py:call",
            Kind::AsyncBegin | Kind::AsyncEnd => is_task(ev),
            _ => false,
        };
        if !ours {
            return None;
        }
        let f = field_u32(ev, "f")?;
        let name = self.by_trace.get(ev.trace)?.get(&f)?;
        Some((f, name.as_str()))
    }
}
