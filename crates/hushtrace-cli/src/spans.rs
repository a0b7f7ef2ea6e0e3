//! Matching span begin and end events per thread.
//!
//! Spans nest per thread: an end closes the innermost open begin of the same name on the same
//! stream. Spans still open when their thread's stream ends (or changes thread) are *unclosed*;
//! ends with no open begin of that name (their begin was lost) are *unmatched*.

use crate::pyfuncs::PyFuncs;
use hushtrace_ctf::reader::MergedEvent;
use hushtrace_ctf::Kind;
use std::collections::HashMap;

/// Interns span names to small integers, caching per (trace, event class).
#[derive(Debug, Default)]
pub struct Names {
    by_name: HashMap<String, u32>,
    names: Vec<String>,
    /// `cache[trace][class id]` = name id + 1 (0 = not cached).
    cache: Vec<Vec<u32>>,
    /// Python function names (`py:call` events are named after their function).
    py: PyFuncs,
    /// (trace, Python function id) → name id.
    py_cache: HashMap<(usize, u32), u32>,
}

impl Names {
    /// Names for reading `session`: its Python function definitions are read first
    /// ([`PyFuncs::of_session`]).
    pub fn for_session(
        session: &hushtrace_ctf::reader::Session,
    ) -> Result<Names, hushtrace_ctf::reader::Error> {
        Ok(Names {
            py: PyFuncs::of_session(session)?,
            ..Names::default()
        })
    }

    /// The id of the event's `"category:name"` (for a traced Python function's events, its
    /// `"module:qualname"`: see [`crate::pyfuncs`]).
    pub fn id(&mut self, ev: &MergedEvent<'_>) -> u32 {
        if !self.py.observe(ev) {
            if let Some((f, name)) = self.py.resolve(ev) {
                if let Some(&id) = self.py_cache.get(&(ev.trace, f)) {
                    return id;
                }
                let name = name.to_owned();
                let id = self.intern(&name);
                self.py_cache.insert((ev.trace, f), id);
                return id;
            }
        }
        let class = ev.event.class;
        let slot = self
            .cache
            .get(ev.trace)
            .and_then(|c| c.get(class.id as usize))
            .copied()
            .unwrap_or(0);
        if slot != 0 {
            return slot - 1;
        }
        let id = match self.by_name.get(&class.name) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as u32;
                self.names.push(class.name.clone());
                self.by_name.insert(class.name.clone(), id);
                id
            }
        };
        if self.cache.len() <= ev.trace {
            self.cache.resize(ev.trace + 1, Vec::new());
        }
        let c = &mut self.cache[ev.trace];
        if c.len() <= class.id as usize {
            c.resize(class.id as usize + 1, 0);
        }
        c[class.id as usize] = id + 1;
        id
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.by_name.insert(name.to_owned(), id);
        id
    }

    /// The Python function definitions of the session ([`Names::for_session`]).
    pub fn py(&self) -> &PyFuncs {
        &self.py
    }

    /// The name of `id`.
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |s| s.as_str())
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name was interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// A span that is open on a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenSpan {
    /// Interned name.
    pub name: u32,
    /// Begin time, ns since the epoch.
    pub start_ns: i128,
    /// Time spent in closed child spans, ns.
    pub child_ns: i128,
}

/// A span that just closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClosedSpan {
    /// Interned name.
    pub name: u32,
    /// Begin time, ns since the epoch.
    pub start_ns: i128,
    /// Inclusive duration, ns.
    pub duration_ns: i128,
    /// Duration minus closed children, ns.
    pub self_ns: i128,
}

#[derive(Debug, Default)]
struct Thread {
    vpid: u32,
    vtid: u32,
    stack: Vec<OpenSpan>,
}

/// Per-stream span stacks.
#[derive(Debug, Default)]
pub struct SpanStacks {
    /// Indexed by merged stream index.
    threads: Vec<Thread>,
    /// Spans left open (stream ended, or the stream moved to another thread).
    pub unclosed: u64,
    /// Ends without an open begin of the same name.
    pub unmatched_ends: u64,
}

impl SpanStacks {
    /// Feeds one event; returns the span it closes, if any. `name` is the event's interned
    /// name (only looked at for span events).
    pub fn feed(&mut self, ev: &MergedEvent<'_>, name: u32) -> Option<ClosedSpan> {
        let kind = ev.event.class.kind;
        if !matches!(kind, Kind::SpanBegin | Kind::SpanEnd) {
            return None;
        }
        if self.threads.len() <= ev.stream {
            self.threads.resize_with(ev.stream + 1, Thread::default);
        }
        let th = &mut self.threads[ev.stream];
        let p = ev.event.packet;
        if (th.vpid, th.vtid) != (p.vpid, p.vtid) {
            self.unclosed += th.stack.len() as u64;
            th.stack.clear();
            th.vpid = p.vpid;
            th.vtid = p.vtid;
        }
        if kind == Kind::SpanBegin {
            th.stack.push(OpenSpan {
                name,
                start_ns: ev.time_ns,
                child_ns: 0,
            });
            return None;
        }
        let Some(pos) = th.stack.iter().rposition(|s| s.name == name) else {
            self.unmatched_ends += 1;
            return None;
        };
        self.unclosed += (th.stack.len() - pos - 1) as u64;
        th.stack.truncate(pos + 1);
        let open = th.stack.pop()?;
        let duration_ns = ev.time_ns - open.start_ns;
        if let Some(parent) = th.stack.last_mut() {
            parent.child_ns += duration_ns;
        }
        Some(ClosedSpan {
            name,
            start_ns: open.start_ns,
            duration_ns,
            self_ns: duration_ns - open.child_ns,
        })
    }

    /// The spans still open on stream `stream` (outermost first): after [`SpanStacks::feed`]
    /// returned a closed span, its parents.
    pub fn open(&self, stream: usize) -> &[OpenSpan] {
        self.threads.get(stream).map_or(&[], |t| &t.stack)
    }

    /// Counts every span still open as unclosed (call at the end).
    pub fn finish(&mut self) {
        for t in &mut self.threads {
            self.unclosed += t.stack.len() as u64;
            t.stack.clear();
        }
    }
}

/// Async spans (`Kind::AsyncBegin`/`AsyncEnd`, first field `id`), matched by process, name and
/// id whatever thread records the end: one span, its real duration.
#[derive(Debug, Default)]
pub struct AsyncSpans {
    /// (pid, interned name, id) -> begin time, ns.
    open: HashMap<(u32, u32, u64), i128>,
    /// Ends without a begin.
    pub unmatched_ends: u64,
}

impl AsyncSpans {
    /// Feeds one event; returns the async span it ends, if any (`self_ns` = `duration_ns`).
    pub fn feed(&mut self, ev: &MergedEvent<'_>, name: u32) -> Option<ClosedSpan> {
        let kind = ev.event.class.kind;
        let id = ev.event.field(0)?.as_u64()?;
        let key = (ev.event.packet.vpid, name, id);
        match kind {
            Kind::AsyncBegin => {
                self.open.insert(key, ev.time_ns);
                None
            }
            Kind::AsyncEnd => {
                let Some(start_ns) = self.open.remove(&key) else {
                    self.unmatched_ends += 1;
                    return None;
                };
                let duration_ns = ev.time_ns - start_ns;
                Some(ClosedSpan {
                    name,
                    start_ns,
                    duration_ns,
                    self_ns: duration_ns,
                })
            }
            _ => None,
        }
    }

    /// Async spans begun and not ended.
    pub fn unclosed(&self) -> u64 {
        self.open.len() as u64
    }
}

/// The `id` (field 0) of an async begin or end.
pub fn async_id(ev: &MergedEvent<'_>) -> Option<u64> {
    ev.event.field(0).and_then(|v| v.as_u64())
}

/// The `parent` of an async begin (its second field, when it is named `parent`: the `id` of
/// the parent span, 0 for a root); 0 for traces recorded before parents were.
pub fn async_parent(ev: &MergedEvent<'_>) -> u64 {
    let named = ev
        .event
        .class
        .fields
        .as_ref()
        .and_then(|f| f.get(1))
        .is_some_and(|(n, _)| n == "parent");
    match ev.event.field(1).and_then(|v| v.as_u64()) {
        Some(p) if named => p,
        _ => 0,
    }
}

/// An async span that is open, in an [`AsyncTree`].
#[derive(Clone, Debug, PartialEq, Eq)]
struct AsyncOpen {
    name: u32,
    start_ns: i128,
    child_ns: i128,
    /// Its parent's id and begin time, if the parent was open when it began (0: a root). The
    /// time tells the parent from a later span that reused its id.
    parent: (u64, i128),
    /// Interned names from its root to itself.
    path: Vec<u32>,
}

/// Async spans with their parents: matched by process and `id` (the end's name must be the
/// begin's), each placed under its parent (the span whose `id` its begin names as `parent`,
/// when that span is open in the same process; else it is a root). Memory: the open spans.
#[derive(Debug, Default)]
pub struct AsyncTree {
    open: HashMap<(u32, u64), AsyncOpen>,
    /// Ends without a begin.
    pub unmatched_ends: u64,
}

impl AsyncTree {
    /// Feeds one event; for the end of an async span, returns it (`self_ns` = its duration
    /// minus its children's, at least 0) and its stack of names from its root to itself.
    pub fn feed(&mut self, ev: &MergedEvent<'_>, name: u32) -> Option<(ClosedSpan, Vec<u32>)> {
        let kind = ev.event.class.kind;
        if !matches!(kind, Kind::AsyncBegin | Kind::AsyncEnd) {
            return None;
        }
        let id = async_id(ev)?;
        let pid = ev.event.packet.vpid;
        if kind == Kind::AsyncBegin {
            let parent = async_parent(ev);
            let (parent, mut path) = match self.open.get(&(pid, parent)) {
                Some(p) if parent != 0 && parent != id => ((parent, p.start_ns), p.path.clone()),
                _ => ((0, 0), Vec::new()),
            };
            path.push(name);
            self.open.insert(
                (pid, id),
                AsyncOpen {
                    name,
                    start_ns: ev.time_ns,
                    child_ns: 0,
                    parent,
                    path,
                },
            );
            return None;
        }
        if self.open.get(&(pid, id)).is_none_or(|o| o.name != name) {
            self.unmatched_ends += 1;
            return None;
        }
        let open = self.open.remove(&(pid, id))?;
        let duration_ns = ev.time_ns - open.start_ns;
        let (parent, parent_start) = open.parent;
        match self.open.get_mut(&(pid, parent)) {
            Some(p) if parent != 0 && p.start_ns == parent_start => p.child_ns += duration_ns,
            _ => {}
        }
        let closed = ClosedSpan {
            name,
            start_ns: open.start_ns,
            duration_ns,
            self_ns: (duration_ns - open.child_ns).max(0),
        };
        Some((closed, open.path))
    }

    /// Async spans begun and not ended.
    pub fn unclosed(&self) -> u64 {
        self.open.len() as u64
    }
}
