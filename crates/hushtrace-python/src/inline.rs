//! The callsites of the inline API (`event`, `counter`, `span`): registered at run time on
//! first use and found again by their text, so names made at run time (`"q" + str(i % 4)`)
//! cost one entry per distinct text, never one per string object.
//!
//! * [`Tables`]: (kind, category, name) → group → variants (field names and types), each
//!   variant a registered callsite; a span group also holds its end callsite.
//! * A direct-mapped cache of 256 slots in front of it for `event`, keyed by the two string
//!   objects' addresses. A slot holds strong references to its strings (only exact `str`
//!   objects, whose release runs no Python code), so a matching pair of addresses is that very
//!   pair of objects; a new pair evicts the old one: at most 512 strings are kept alive.
//! * A limit, [`MAX_CALLSITES`]: past it, a new (category, name, field names and types) is not
//!   registered; its events are counted as discarded (the session's statistics and the
//!   trace's discarded count show them) and a warning says so once on stderr, as in the
//!   `tracing` bridge. A callsite the runtime's registry refuses because it is full is handled
//!   the same way.
//!
//! Everything is reached through [`TABLES`], a [`GilCell`]: the GIL serializes the threads,
//! the cell's borrow check the re-entrant calls (a `__del__` that records an event while the
//! tables are borrowed gets an error, never a second reference). No borrow is held across a
//! call into Python.

use crate::gil::GilCell;
use hushtrace::{FieldType, Kind, Registered, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// The most callsites the inline API registers: half of the runtime's registry
/// ([`hushtrace_core::MAX_REGISTERED`]), which C, Rust and function tracing share with it. A
/// group counts one per variant (distinct field names and types), a span group one more for
/// its end.
pub const MAX_CALLSITES: usize = hushtrace_core::MAX_REGISTERED / 2;

/// The type of one field value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    Int,
    Float,
    Bool,
    Str,
}

impl Ty {
    fn of(v: &Bound<'_, PyAny>, field: &str) -> PyResult<Ty> {
        if v.is_instance_of::<PyBool>() {
            Ok(Ty::Bool)
        } else if v.is_instance_of::<PyInt>() {
            Ok(Ty::Int)
        } else if v.is_instance_of::<PyFloat>() {
            Ok(Ty::Float)
        } else if v.is_instance_of::<PyString>() {
            Ok(Ty::Str)
        } else {
            Err(PyTypeError::new_err(format!(
                "field {field:?}: hushtrace records int, float, bool and str, not {}",
                v.get_type().name()?
            )))
        }
    }

    fn field_type(self) -> FieldType {
        match self {
            Ty::Int => FieldType::I64,
            Ty::Float => FieldType::F64,
            Ty::Bool => FieldType::Bool,
            Ty::Str => FieldType::Str,
        }
    }
}

/// One registered variant of a group: its field names and types.
struct Variant {
    names: Box<[Box<str>]>,
    types: Box<[Ty]>,
    cs: Registered,
}

/// Every variant of one (kind, category, name).
struct Group {
    variants: Vec<Variant>,
    /// The end callsite of a span group.
    end: Option<Registered>,
}

impl Group {
    /// Whether a record may be written: no variant yet (the first one decides), or one is
    /// enabled (the globs apply to the category and name, so variants agree).
    fn may_record(&self) -> bool {
        self.variants.is_empty() || self.variants.iter().any(|v| v.cs.is_enabled())
    }
}

/// A slot of the `event` cache: the category and name objects and their group.
struct Slot {
    cat: Option<Py<PyString>>,
    name: Option<Py<PyString>>,
    group: usize,
}

const CACHE_SLOTS: usize = 256;

/// Category → name → index of a group.
type ByText = HashMap<Box<str>, HashMap<Box<str>, usize>>;

/// The tables of the inline API.
pub struct Tables {
    /// Per kind (see [`kind_index`]): category → name → index in `groups`.
    by_text: [ByText; 3],
    groups: Vec<Group>,
    /// Callsites registered here.
    registered: usize,
    /// Records counted as discarded because their callsite could not be registered.
    past_limit: u64,
    cache: Vec<Slot>,
}

/// The inline API's tables.
pub static TABLES: GilCell<Option<Tables>> = GilCell::new(None);

fn kind_index(kind: Kind) -> usize {
    match kind {
        Kind::Instant => 0,
        Kind::Counter => 1,
        _ => 2,
    }
}

fn tables<'a>(py: Python<'a>) -> PyResult<std::cell::RefMut<'a, Tables>> {
    let t = TABLES.borrow_mut(py)?;
    Ok(std::cell::RefMut::map(t, |t| {
        t.get_or_insert_with(|| Tables {
            by_text: Default::default(),
            groups: Vec::new(),
            registered: 0,
            past_limit: 0,
            cache: (0..CACHE_SLOTS)
                .map(|_| Slot {
                    cat: None,
                    name: None,
                    group: 0,
                })
                .collect(),
        })
    }))
}

/// Whether `e` is the runtime's registry being full.
fn registry_full(e: &hushtrace::Error) -> bool {
    matches!(e, hushtrace::Error::Config { reason, .. }
        if *reason == hushtrace_core::RegisterError::Full.to_string())
}

/// Registers a callsite unless the limit is reached or the registry is full (`Ok(None)`: its
/// events are to be discarded); other refusals (a name the trace cannot hold) are errors.
fn register(
    t: &mut Tables,
    cat: &str,
    name: &str,
    kind: Kind,
    fields: &[(&str, FieldType)],
) -> PyResult<Option<Registered>> {
    if t.registered >= MAX_CALLSITES {
        warn_limit(cat, name);
        return Ok(None);
    }
    match hushtrace::register_callsite(cat, name, kind, fields) {
        Ok(cs) => {
            t.registered += 1;
            Ok(Some(cs))
        }
        Err(e) if registry_full(&e) => Ok(None), // the runtime warned
        Err(e) => Err(PyValueError::new_err(e.to_string())),
    }
}

fn warn_limit(cat: &str, name: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "hushtrace: warning: the inline API registered {MAX_CALLSITES} callsites (distinct \
             category, name, field names and types); the events of {cat}:{name} and of every \
             later new one are not recorded (counted as discarded)"
        );
    }
}

impl Tables {
    /// The group of (kind, cat, name), created on first use; `None` past the limit.
    fn group(&mut self, kind: Kind, cat: &str, name: &str) -> PyResult<Option<usize>> {
        if let Some(&g) = self.by_text[kind_index(kind)]
            .get(cat)
            .and_then(|m| m.get(name))
        {
            return Ok(Some(g));
        }
        let end = if kind == Kind::SpanBegin {
            match register(self, cat, name, Kind::SpanEnd, &[])? {
                Some(cs) => Some(cs),
                None => return Ok(None),
            }
        } else {
            None
        };
        let g = self.groups.len();
        self.groups.push(Group {
            variants: Vec::new(),
            end,
        });
        self.by_text[kind_index(kind)]
            .entry(cat.into())
            .or_default()
            .insert(name.into(), g);
        Ok(Some(g))
    }

    /// The callsite of group `g` for these field names and types, registered on first use;
    /// `None` past the limit.
    fn variant(
        &mut self,
        g: usize,
        kind: Kind,
        cat: &str,
        name: &str,
        names: &[&str],
        types: &[Ty],
    ) -> PyResult<Option<Registered>> {
        let found = self.groups[g]
            .variants
            .iter()
            .find(|v| *v.types == *types && v.names.iter().map(|n| &**n).eq(names.iter().copied()));
        if let Some(v) = found {
            return Ok(Some(v.cs));
        }
        let desc: Vec<(&str, FieldType)> = names
            .iter()
            .zip(types)
            .map(|(n, t)| (*n, t.field_type()))
            .collect();
        let Some(cs) = register(self, cat, name, kind, &desc)? else {
            return Ok(None);
        };
        self.groups[g].variants.push(Variant {
            names: names.iter().map(|n| Box::from(*n)).collect(),
            types: types.into(),
            cs,
        });
        Ok(Some(cs))
    }
}

/// Counts a record whose callsite could not be registered as discarded.
fn discard(t: &mut Tables) {
    t.past_limit += 1;
    hushtrace::discard_unregistered();
}

/// The fields of one record, checked and converted before any table is borrowed.
pub struct Fields<'py> {
    names: Vec<Bound<'py, PyString>>,
    types: Vec<Ty>,
    values: Vec<Bound<'py, PyAny>>,
}

impl<'py> Fields<'py> {
    /// No fields.
    pub fn none() -> Self {
        Fields {
            names: Vec::new(),
            types: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Adds field `name` = `value` (int, float, bool or str, else a `TypeError`).
    pub fn push(&mut self, name: Bound<'py, PyString>, value: Bound<'py, PyAny>) -> PyResult<()> {
        self.types.push(Ty::of(&value, name.to_str()?)?);
        self.names.push(name);
        self.values.push(value);
        Ok(())
    }

    fn name_strs(&self) -> PyResult<Vec<&str>> {
        self.names.iter().map(|n| n.to_str()).collect()
    }

    /// Records the values on `cs`; whether written.
    fn record(&self, cs: Registered) -> PyResult<bool> {
        Ok(self.record_timed(cs)?.is_some())
    }

    /// Records the values on `cs`; the event's timestamp if written (a span's begin, whose
    /// end checks the span's deadline).
    fn record_timed(&self, cs: Registered) -> PyResult<Option<u64>> {
        let mut values: Vec<Value<'_>> = Vec::with_capacity(self.values.len());
        for (v, t) in self.values.iter().zip(&self.types) {
            values.push(match t {
                Ty::Bool => Value::Bool(v.is_truthy()?),
                Ty::Int => match v.extract::<i64>() {
                    Ok(i) => Value::I64(i),
                    Err(_) => {
                        return Err(PyValueError::new_err(
                            "an int field must fit in 64 bits (signed)",
                        ))
                    }
                },
                Ty::Float => Value::F64(v.extract::<f64>()?),
                Ty::Str => Value::Str(v.cast::<PyString>()?.to_str()?),
            });
        }
        Ok(hushtrace::__private::emit_values_timed(
            cs.callsite(),
            &values,
        ))
    }
}

/// The category or name argument `what` as a `str` (else a `TypeError`).
pub fn text_arg<'py>(v: Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyString>> {
    match v.cast_into::<PyString>() {
        Ok(s) => Ok(s),
        Err(e) => Err(PyTypeError::new_err(format!(
            "the {what} must be a str, not {}",
            e.into_inner().get_type().name()?
        ))),
    }
}

/// The callsite to record `fields` on for (kind, cat, name): `Ok(None)` when disabled or
/// past the limit (then counted as discarded). Also returns the group.
fn resolve(
    py: Python<'_>,
    kind: Kind,
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    fields: &Fields<'_>,
) -> PyResult<(Option<usize>, Option<Registered>)> {
    let (c, n) = (cat.to_str()?, name.to_str()?);
    let names = fields.name_strs()?;
    let mut t = tables(py)?;
    let Some(g) = t.group(kind, c, n)? else {
        discard(&mut t);
        return Ok((None, None));
    };
    if !t.groups[g].may_record() {
        return Ok((Some(g), None));
    }
    match t.variant(g, kind, c, n, &names, &fields.types)? {
        Some(cs) => Ok((Some(g), cs.is_enabled().then_some(cs))),
        None => {
            discard(&mut t);
            Ok((Some(g), None))
        }
    }
}

/// `event`'s fast path: true when the cache knows the pair `cat`, `name` (object addresses)
/// and its group records nothing (return `False` at once); false: take the slow path.
pub fn event_cached_disabled(
    py: Python<'_>,
    cat: *mut ffi::PyObject,
    name: *mut ffi::PyObject,
) -> bool {
    let Ok(t) = tables(py) else { return false };
    let s = &t.cache[cache_slot(cat as usize, name as usize)];
    s.cat.as_ref().is_some_and(|p| p.as_ptr() == cat)
        && s.name.as_ref().is_some_and(|p| p.as_ptr() == name)
        && !t.groups[s.group].may_record()
}

#[inline]
fn cache_slot(cat: usize, name: usize) -> usize {
    (((cat >> 4) ^ (name >> 3)).wrapping_mul(0x9E37_79B9) >> 8) & (CACHE_SLOTS - 1)
}

/// Records an instant event; whether written.
pub fn event(
    py: Python<'_>,
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    fields: &Fields<'_>,
) -> PyResult<bool> {
    let (g, cs) = resolve(py, Kind::Instant, cat, name, fields)?;
    if let Some(g) = g {
        remember(py, cat, name, g)?;
    }
    match cs {
        Some(cs) => fields.record(cs),
        None => Ok(false),
    }
}

/// Puts (cat, name) → `g` in the `event` cache (exact `str` objects only).
fn remember(
    py: Python<'_>,
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    g: usize,
) -> PyResult<()> {
    // SAFETY: live objects (`Bound`s), GIL held.
    let exact = unsafe {
        ffi::PyUnicode_CheckExact(cat.as_ptr()) != 0
            && ffi::PyUnicode_CheckExact(name.as_ptr()) != 0
    };
    if !exact {
        return Ok(());
    }
    let new = Slot {
        cat: Some(cat.clone().unbind()),
        name: Some(name.clone().unbind()),
        group: g,
    };
    let old = {
        let mut t = tables(py)?;
        let i = cache_slot(cat.as_ptr() as usize, name.as_ptr() as usize);
        std::mem::replace(&mut t.cache[i], new)
    };
    // Released after the borrow ended (exact strings: no Python code runs anyway), as
    // `Bound`s: dropping a `Py` in `event`, which CPython calls without PyO3's trampoline,
    // would defer the release to PyO3's pool of pending decrefs, which nothing here drains.
    drop(old.cat.map(|p| p.into_bound(py)));
    drop(old.name.map(|p| p.into_bound(py)));
    Ok(())
}

/// Records a counter sample (an int or a float); whether written.
pub fn counter(
    py: Python<'_>,
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    value: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let ty = Ty::of(value, "value").ok();
    if !matches!(ty, Some(Ty::Int | Ty::Float)) {
        return Err(PyTypeError::new_err(format!(
            "a counter's value is an int or a float, not {}",
            value.get_type().name()?
        )));
    }
    let mut fields = Fields::none();
    fields.push(PyString::intern(py, "value"), value.clone())?;
    match resolve(py, Kind::Counter, cat, name, &fields)?.1 {
        Some(cs) => fields.record(cs),
        None => Ok(false),
    }
}

/// Records a span's begin; returns its end callsite and the begin's timestamp (for the end's
/// deadline check) if the begin was written.
pub fn span_begin(
    py: Python<'_>,
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    fields: &Fields<'_>,
) -> PyResult<Option<(Registered, u64)>> {
    let (g, cs) = resolve(py, Kind::SpanBegin, cat, name, fields)?;
    let (Some(g), Some(cs)) = (g, cs) else {
        return Ok(None);
    };
    let Some(start) = fields.record_timed(cs)? else {
        return Ok(None);
    };
    Ok(tables(py)?.groups[g].end.map(|end| (end, start)))
}

/// The inline API's counters: callsites registered, the limit, records discarded past it.
pub fn stats(py: Python<'_>) -> PyResult<(usize, usize, u64)> {
    let t = tables(py)?;
    Ok((t.registered, MAX_CALLSITES, t.past_limit))
}
