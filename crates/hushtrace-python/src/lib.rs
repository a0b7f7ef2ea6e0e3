//! `hushtrace._hushtrace`: the CPython extension behind the `hushtrace` Python package.
//!
//! * session control (`start`, `start_from_env`, `stop`, `snapshot`, `enable`, `disable`);
//! * inline tracepoints (`event`, `counter`, `span`, and the span pairs of `@trace`), each a
//!   runtime-registered callsite cached per (category, name, field names and types);
//! * whole-program function tracing: the hooks of [`hook`] over the interned functions of
//!   [`funcs`], switched on and off by `hushtrace._functions`; asyncio tasks followed from
//!   those hooks ([`tasks`]); the launcher's frames left out ([`launch`]).
//!
//! Everything runs with the GIL held; the per-call hooks do no Python-level work.

// The runtime under the name the C interface's source uses.
extern crate hushtrace as hushtrace_rt;

/// The C interface (`ht_*`, the symbols `libhushtrace.so` exports), compiled into this
/// extension from the very source of `crates/hushtrace-c`: the package loads the extension
/// with `RTLD_GLOBAL`, so a C library loaded afterwards (linked with `-lhushtrace` or not)
/// binds its tracepoints and `ht_*` calls to the runtime the Python code records into — one
/// runtime, one session, one trace per process.
#[allow(missing_docs, clippy::all)]
#[path = "../../hushtrace-c/src/lib.rs"]
mod capi;
mod funcs;
mod gil;
mod hook;
mod launch;
mod tasks;
mod term;

use gil::GilCell;
use hushtrace::{FieldType, Kind, Registered, Session, Value};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

/// The session this module started (`start`, `start_from_env`).
static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// When [`SESSION`] runs in overwrite mode, records every traced function's definition again
/// on this thread, so a snapshot or the final trace taken next holds them all (the ring may
/// have overwritten the ones recorded long ago). Discard mode never loses a definition:
/// nothing to do there.
fn dump_definitions(_py: Python<'_>) {
    let overwrite = SESSION
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .is_some_and(|s| s.mode() == hushtrace::Mode::Overwrite);
    if overwrite {
        // SAFETY: GIL held (the `Python` token).
        unsafe { funcs::redefine_all() };
    }
}

fn err(e: hushtrace::Error) -> PyErr {
    match e {
        hushtrace::Error::Config { .. } => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

fn mode_of(mode: &str) -> PyResult<hushtrace::Mode> {
    match mode {
        "discard" => Ok(hushtrace::Mode::Discard),
        "overwrite" => Ok(hushtrace::Mode::Overwrite),
        _ => Err(PyValueError::new_err(format!(
            "mode must be 'discard' or 'overwrite', not {mode:?}"
        ))),
    }
}

fn install_atfork() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn child() {
        // A fork child writes a trace of its own: describe functions again there, and do not
        // end in it the frames that began in the parent's trace.
        funcs::DEF_EPOCH.fetch_add(1, Ordering::Relaxed);
        hook::GENERATION.fetch_add(1, Ordering::Relaxed);
    }
    ONCE.call_once(|| {
        // SAFETY: a plain 'static handler doing two atomic adds (async-signal-safe).
        unsafe { libc::pthread_atfork(None, None, Some(child)) };
    });
}

/// Starts a session writing to `dir`.
#[pyfunction]
#[pyo3(signature = (dir, mode = "discard", subbuf_size = None, num_subbufs = None, consumer_sched = None, consumer_cpus = None))]
fn start(
    py: Python<'_>,
    dir: std::path::PathBuf,
    mode: &str,
    subbuf_size: Option<usize>,
    num_subbufs: Option<usize>,
    consumer_sched: Option<&str>,
    consumer_cpus: Option<Vec<usize>>,
) -> PyResult<String> {
    let mut b = Session::builder().output_dir(dir).mode(mode_of(mode)?);
    if let Some(n) = subbuf_size {
        b = b.subbuf_size(n);
    }
    if let Some(n) = num_subbufs {
        b = b.num_subbufs(n);
    }
    if let Some(s) = consumer_sched {
        let sched: hushtrace::ConsumerSched = s
            .parse()
            .map_err(|e| PyValueError::new_err(format!("consumer_sched={s:?}: {e}")))?;
        b = b.consumer_sched(sched);
    }
    if let Some(cpus) = consumer_cpus {
        b = b.consumer_cpus(cpus);
    }
    install_atfork();
    let s = py.detach(|| b.start()).map_err(err)?;
    let dir = s.trace_dir().display().to_string();
    *SESSION.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
    Ok(dir)
}

/// Starts a session from the `HUSHTRACE_*` environment; returns whether one started.
#[pyfunction]
fn start_from_env(py: Python<'_>) -> PyResult<bool> {
    install_atfork();
    match py.detach(hushtrace::start_from_env).map_err(err)? {
        None => Ok(false),
        Some(s) => {
            *SESSION.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
            Ok(true)
        }
    }
}

/// Whether this module's session is running.
#[pyfunction]
fn is_running() -> bool {
    SESSION.lock().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// Stops the session; returns its statistics, or `None` if none was running. In overwrite
/// mode, first records every traced function's definition again (the final rings then hold
/// them all).
#[pyfunction]
fn stop(py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
    if !is_running() {
        return Ok(None);
    }
    dump_definitions(py);
    let s = SESSION.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(s) = s else { return Ok(None) };
    let stats = py.detach(|| s.stop());
    let stats = match stats {
        Ok(st) => st,
        Err(hushtrace::Error::Stop { stats, .. }) => stats,
        Err(e) => return Err(err(e)),
    };
    let d = PyDict::new(py);
    d.set_item("events_written", stats.events_written)?;
    d.set_item("events_discarded", stats.events_discarded)?;
    d.set_item("trace_dir", stats.trace_dir.display().to_string())?;
    Ok(Some(d.unbind()))
}

/// Enables the callsites matching `glob`; returns how many matched.
#[pyfunction]
fn enable(glob: &str) -> usize {
    hushtrace::enable(glob)
}

/// Disables the callsites matching `glob`; returns how many matched.
#[pyfunction]
fn disable(glob: &str) -> usize {
    hushtrace::disable(glob)
}

/// Writes a snapshot of the rings (overwrite mode); returns its directory. With function
/// tracing, first records every traced function's definition (`py:function`) again on this
/// thread, so the snapshot describes every function id its `py:call` events hold. A snapshot
/// taken from another process (`hushtrace ctl snapshot`) cannot call into Python: it may
/// hold calls whose definition the ring overwrote.
#[pyfunction]
#[pyo3(signature = (timeout = 10.0))]
fn snapshot(py: Python<'_>, timeout: f64) -> PyResult<String> {
    dump_definitions(py);
    py.detach(|| {
        let s = hushtrace::snapshot()?;
        s.wait(Duration::from_secs_f64(timeout.max(0.0)))
    })
    .map(|p| p.display().to_string())
    .map_err(err)
}

// ---- inline tracepoints ----

const T_INT: u8 = 0;
const T_FLOAT: u8 = 1;
const T_BOOL: u8 = 2;
const T_STR: u8 = 3;

/// One registered variant of a (category, name): its field names (held, compared by
/// identity: keyword names are interned strings) and types.
struct Variant {
    names: Vec<Py<PyString>>,
    types: Vec<u8>,
    cs: Registered,
}

/// Every variant of one (category, name) pair, keyed by the two string objects' addresses
/// (held here, so the addresses stay theirs).
struct Group {
    _cat: Py<PyString>,
    _name: Py<PyString>,
    kind: Kind,
    variants: Vec<Variant>,
    /// The end callsite of a span group.
    end: Option<Registered>,
}

impl Group {
    fn any_enabled(&self) -> bool {
        self.variants.iter().any(|v| v.cs.is_enabled())
    }
}

type GroupKey = (usize, usize, u8);
static GROUPS: GilCell<Option<HashMap<GroupKey, Box<Group>>>> = GilCell::new(None);

fn type_code(v: &Bound<'_, PyAny>, field: &str) -> PyResult<u8> {
    if v.is_instance_of::<PyBool>() {
        Ok(T_BOOL)
    } else if v.is_instance_of::<PyInt>() {
        Ok(T_INT)
    } else if v.is_instance_of::<PyFloat>() {
        Ok(T_FLOAT)
    } else if v.is_instance_of::<PyString>() {
        Ok(T_STR)
    } else {
        Err(PyTypeError::new_err(format!(
            "field {field:?}: hushtrace records int, float, bool and str, not {}",
            v.get_type().name()?
        )))
    }
}

fn field_type(t: u8) -> FieldType {
    match t {
        T_INT => FieldType::I64,
        T_FLOAT => FieldType::F64,
        T_BOOL => FieldType::Bool,
        _ => FieldType::Str,
    }
}

/// The group of (cat, name, kind), created on first use. The returned pointer stays valid
/// (boxed, never removed).
fn group(
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    kind: Kind,
) -> PyResult<&'static mut Group> {
    let key = (cat.as_ptr() as usize, name.as_ptr() as usize, kind as u8);
    // SAFETY: GIL held (a `Bound` proves it); the borrow ends before any call into Python.
    let groups = unsafe { GROUPS.get() }.get_or_insert_with(HashMap::new);
    if let Some(g) = groups.get_mut(&key) {
        // SAFETY: boxed and never removed: the address is stable for the process.
        return Ok(unsafe { &mut *(g.as_mut() as *mut Group) });
    }
    let (c, n) = (cat.to_str()?, name.to_str()?);
    let end = if kind == Kind::SpanBegin {
        Some(hushtrace::register_callsite(c, n, Kind::SpanEnd, &[]).map_err(err)?)
    } else {
        None
    };
    let g = Box::new(Group {
        _cat: cat.clone().unbind(),
        _name: name.clone().unbind(),
        kind,
        variants: Vec::new(),
        end,
    });
    // SAFETY: as above; no other borrow of GROUPS is alive.
    let groups = unsafe { GROUPS.get() }.get_or_insert_with(HashMap::new);
    let g = groups.entry(key).or_insert(g);
    // SAFETY: boxed and never removed.
    Ok(unsafe { &mut *(g.as_mut() as *mut Group) })
}

/// Records `fields` on the group's variant for their names and types (registered on first
/// use). Returns whether written.
fn record_fields(
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    g: &mut Group,
    fields: Option<&Bound<'_, PyDict>>,
) -> PyResult<bool> {
    let mut names: Vec<Bound<'_, PyString>> = Vec::new();
    let mut vals: Vec<Bound<'_, PyAny>> = Vec::new();
    let mut types: Vec<u8> = Vec::new();
    if let Some(d) = fields {
        for (k, v) in d.iter() {
            let k = k.cast_into::<PyString>()?;
            types.push(type_code(&v, k.to_str()?)?);
            names.push(k);
            vals.push(v);
        }
    }
    let found = g.variants.iter().position(|v| {
        v.types == types
            && v.names.len() == names.len()
            && v.names.iter().zip(&names).all(|(a, b)| {
                a.as_ptr() == b.as_ptr() || a.bind(cat.py()).to_str().ok() == b.to_str().ok()
            })
    });
    let cs = match found {
        Some(i) => g.variants[i].cs,
        None => {
            let desc: Vec<(String, FieldType)> = names
                .iter()
                .zip(&types)
                .map(|(n, t)| Ok((n.to_str()?.to_owned(), field_type(*t))))
                .collect::<PyResult<_>>()?;
            let desc: Vec<(&str, FieldType)> = desc.iter().map(|(n, t)| (n.as_str(), *t)).collect();
            let cs = hushtrace::register_callsite(cat.to_str()?, name.to_str()?, g.kind, &desc)
                .map_err(err)?;
            g.variants.push(Variant {
                names: names.iter().map(|n| n.clone().unbind()).collect(),
                types: types.clone(),
                cs,
            });
            cs
        }
    };
    if !cs.is_enabled() {
        return Ok(false);
    }
    let mut owned: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    for (v, t) in vals.iter().zip(&types) {
        if *t == T_STR {
            owned.push(v.cast::<PyString>()?.to_cow()?);
        }
    }
    let mut strs = owned.iter();
    let mut values: Vec<Value<'_>> = Vec::with_capacity(vals.len());
    for (v, t) in vals.iter().zip(&types) {
        values.push(match *t {
            T_BOOL => Value::Bool(v.is_truthy()?),
            T_INT => match v.extract::<i64>() {
                Ok(i) => Value::I64(i),
                Err(_) => {
                    return Err(PyValueError::new_err(
                        "an int field must fit in 64 bits (signed)",
                    ))
                }
            },
            T_FLOAT => Value::F64(v.extract::<f64>()?),
            _ => Value::Str(strs.next().map(|s| s.as_ref()).unwrap_or("")),
        });
    }
    Ok(cs.record(&values))
}

/// The slow path of `event`: look the group up (or create it), record.
fn event_slow(
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    fields: Option<&Bound<'_, PyDict>>,
) -> PyResult<bool> {
    let g = group(cat, name, Kind::Instant)?;
    remember_event_group(cat, name, g);
    if !g.variants.is_empty() && !g.any_enabled() {
        return Ok(false);
    }
    record_fields(cat, name, g, fields)
}

/// A direct-mapped cache in front of the group map for `event`: (category object, name
/// object) → group. The groups hold references to both strings, so a matching pair of
/// addresses is that very pair of objects.
type EventCacheSlot = (usize, usize, *const Group);
static EVENT_CACHE: GilCell<[EventCacheSlot; 256]> = GilCell::new([(0, 0, std::ptr::null()); 256]);

#[inline]
fn event_slot(cat: usize, name: usize) -> usize {
    ((cat >> 4) ^ (name >> 3)).wrapping_mul(0x9E37_79B9) >> 8 & 255
}

fn remember_event_group(cat: &Bound<'_, PyString>, name: &Bound<'_, PyString>, g: &Group) {
    let (c, n) = (cat.as_ptr() as usize, name.as_ptr() as usize);
    // SAFETY: GIL held (a `Bound`); the borrow ends here.
    let cache = unsafe { EVENT_CACHE.get() };
    cache[event_slot(c, n)] = (c, n, g as *const Group);
}

/// `event(cat, name, **fields)`: records an instant event with keyword fields (int, float,
/// bool, str). A raw `METH_FASTCALL | METH_KEYWORDS` function: when the tracepoint is
/// disabled it returns `False` after one cache probe and the interest loads, before any
/// argument is converted or any dict is built.
///
/// # Safety
/// Called by CPython with the GIL held, `nargs` positional arguments in `args` followed by
/// one per name in `kwnames` (a tuple, or NULL).
unsafe extern "C" fn event_fast(
    _slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython's contract (above); the cache holds pointers to boxed groups that are
    // never freed.
    unsafe {
        if nargs == 2 {
            let (c, n) = (*args as usize, *args.add(1) as usize);
            let (sc, sn, g) = EVENT_CACHE.get()[event_slot(c, n)];
            if sc == c && sn == n && !g.is_null() {
                let g = &*g;
                if !g.variants.is_empty() && !g.any_enabled() {
                    let f = ffi::Py_False();
                    ffi::Py_INCREF(f);
                    return f;
                }
            }
        }
        let py = Python::assume_attached();
        let r = (|| -> PyResult<bool> {
            if nargs != 2 {
                return Err(PyTypeError::new_err(
                    "event() takes the category and the name, then keyword fields",
                ));
            }
            let cat = Bound::from_borrowed_ptr(py, *args).cast_into::<PyString>()?;
            let name = Bound::from_borrowed_ptr(py, *args.add(1)).cast_into::<PyString>()?;
            let fields = if kwnames.is_null() {
                None
            } else {
                let names = Bound::from_borrowed_ptr(py, kwnames);
                let d = PyDict::new(py);
                for (i, k) in names.try_iter()?.enumerate() {
                    d.set_item(k?, Bound::from_borrowed_ptr(py, *args.add(2 + i)))?;
                }
                Some(d)
            };
            event_slow(&cat, &name, fields.as_ref())
        })();
        match r {
            Ok(b) => {
                let o = if b { ffi::Py_True() } else { ffi::Py_False() };
                ffi::Py_INCREF(o);
                o
            }
            Err(e) => {
                e.restore(py);
                std::ptr::null_mut()
            }
        }
    }
}

fn add_fastcall_keywords(
    m: &Bound<'_, PyModule>,
    name: &'static std::ffi::CStr,
    doc: &'static std::ffi::CStr,
    f: ffi::PyCFunctionFastWithKeywords,
) -> PyResult<()> {
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: f,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: doc.as_ptr(),
    }));
    // SAFETY: GIL held (module init); `def` is leaked ('static) as CPython requires.
    let obj = unsafe {
        let p = ffi::PyCFunction_NewEx(def, std::ptr::null_mut(), std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(m.py(), p)?
    };
    m.add(name.to_str().expect("ASCII name"), obj)
}

/// Records a counter sample `cat:name` (an int or a float).
#[pyfunction]
fn counter(
    cat: &Bound<'_, PyString>,
    name: &Bound<'_, PyString>,
    value: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let g = group(cat, name, Kind::Counter)?;
    if !g.variants.is_empty() && !g.any_enabled() {
        return Ok(false);
    }
    let t = type_code(value, "value")?;
    let ty = match t {
        T_INT => FieldType::I64,
        T_FLOAT => FieldType::F64,
        _ => {
            return Err(PyTypeError::new_err(
                "a counter's value is an int or a float",
            ))
        }
    };
    let cs = match g.variants.iter().find(|v| v.types[0] == t) {
        Some(v) => v.cs,
        None => {
            let cs = hushtrace::register_callsite(
                cat.to_str()?,
                name.to_str()?,
                Kind::Counter,
                &[("value", ty)],
            )
            .map_err(err)?;
            g.variants.push(Variant {
                names: vec![PyString::intern(cat.py(), "value").unbind()],
                types: vec![t],
                cs,
            });
            cs
        }
    };
    if !cs.is_enabled() {
        return Ok(false);
    }
    Ok(if t == T_INT {
        cs.record_typed((value.extract::<i64>()?,))
    } else {
        cs.record_typed((value.extract::<f64>()?,))
    })
}

/// `with hushtrace.span(cat, name, **fields):` — begins on entry, ends on exit.
#[pyclass(unsendable, module = "hushtrace")]
struct Span {
    cat: Py<PyString>,
    name: Py<PyString>,
    fields: Option<Py<PyDict>>,
    end: Option<Registered>,
}

#[pymethods]
impl Span {
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let py = slf.py();
        {
            let mut me = slf.borrow_mut();
            let (cat, name) = (me.cat.bind(py).clone(), me.name.bind(py).clone());
            let g = group(&cat, &name, Kind::SpanBegin)?;
            if g.variants.is_empty() || g.any_enabled() {
                let fields = me.fields.as_ref().map(|f| f.bind(py).clone());
                if record_fields(&cat, &name, g, fields.as_ref())? {
                    me.end = g.end;
                }
            }
        }
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        if let Some(end) = self.end.take() {
            end.record_typed(());
        }
        false
    }
}

/// A span whose begin and end the caller records (the `@trace` decorator): `begin()` returns
/// whether the begin was written; call `end()` exactly when it was.
#[pyfunction]
#[pyo3(signature = (cat, name, **fields))]
fn span(
    cat: Bound<'_, PyString>,
    name: Bound<'_, PyString>,
    fields: Option<Bound<'_, PyDict>>,
) -> Span {
    Span {
        cat: cat.unbind(),
        name: name.unbind(),
        fields: fields.map(|f| f.unbind()),
        end: None,
    }
}

/// A begin/end pair registered once (for `@trace`): no lookup per call.
#[pyclass(frozen, module = "hushtrace")]
struct SpanPair {
    begin: Registered,
    end: Registered,
}

#[pymethods]
impl SpanPair {
    #[new]
    fn new(cat: &str, name: &str) -> PyResult<Self> {
        Ok(SpanPair {
            begin: hushtrace::register_callsite(cat, name, Kind::SpanBegin, &[]).map_err(err)?,
            end: hushtrace::register_callsite(cat, name, Kind::SpanEnd, &[]).map_err(err)?,
        })
    }

    /// Records the begin if enabled; returns whether it was written.
    fn begin(&self) -> bool {
        self.begin.record_typed(())
    }

    /// Records the end (call it only after a `begin()` that returned True).
    fn end(&self) {
        self.end.record_typed(());
    }
}

// ---- function tracing ----

/// Prepares function tracing: registers the callsites, reserves the `co_extra` slot, sets the
/// options, and starts a new generation (depth counters restart, functions are described
/// again).
#[pyfunction]
#[pyo3(signature = (c_calls = false, max_depth = None, include = Vec::new(), exclude = Vec::new()))]
fn _prepare_functions(
    _py: Python<'_>,
    c_calls: bool,
    max_depth: Option<u32>,
    include: Vec<String>,
    exclude: Vec<String>,
) -> PyResult<()> {
    funcs::callsites().map_err(err)?;
    // SAFETY: GIL held (the `Python` token).
    if !unsafe { funcs::init_code_extra() } {
        return Err(PyRuntimeError::new_err(
            "no free co_extra slot for hushtrace's function table",
        ));
    }
    // SAFETY: GIL held.
    unsafe { funcs::set_filter(funcs::Filter { include, exclude }) };
    hook::C_CALLS.store(c_calls, Ordering::Relaxed);
    hook::MAX_DEPTH.store(max_depth.unwrap_or(u32::MAX), Ordering::Relaxed);
    hook::GENERATION.fetch_add(1, Ordering::Relaxed);
    funcs::DEF_EPOCH.fetch_add(1, Ordering::Relaxed);
    install_atfork();
    Ok(())
}

/// With `on`, function tracing records nothing before the program's main module starts
/// ([`launch`]): `python -m hushtrace run` (`launcher`: nor on its thread after it returned),
/// and interpreter start-up (`hushtrace record`, traced children). `False` when the program
/// has returned.
#[pyfunction]
#[pyo3(signature = (on, launcher = true))]
fn _await_main(on: bool, launcher: bool) {
    let state = match (on, launcher) {
        (false, _) => launch::OFF,
        (true, true) => launch::AWAITING_MAIN,
        (true, false) => launch::AWAITING_MAIN_ONLY,
    };
    launch::STATE.store(state, Ordering::Relaxed);
}

/// Stops recording C calls (before the hooks are removed: the call that removes them would
/// otherwise begin a slice whose end is never seen).
#[pyfunction]
fn _stop_c_calls() {
    hook::C_CALLS.store(false, Ordering::Relaxed);
}

/// Puts the SIGTERM safety net ([`term`]) under the Python SIGTERM handler just installed;
/// also in a fork child. Returns whether it is in place.
#[pyfunction]
fn _sigterm_net() -> PyResult<bool> {
    term::install().map(|()| true).map_err(|e| {
        pyo3::exceptions::PyOSError::new_err(format!("hushtrace: SIGTERM watcher: {e}"))
    })
}

/// The Python SIGTERM handler started ([`term::handler_started`]).
#[pyfunction]
fn _sigterm_handler_started() {
    term::handler_started();
}

/// Ends this thread's recorded frames still open (see [`hook::close_open_frames`]).
#[pyfunction]
fn _close_open_frames(_py: Python<'_>) {
    if funcs_ready().is_some() {
        // SAFETY: GIL held (the `Python` token).
        unsafe { hook::close_open_frames() };
    }
}

fn funcs_ready() -> Option<&'static funcs::Callsites> {
    funcs::callsites().ok()
}

fn add_fastcall(
    m: &Bound<'_, PyModule>,
    name: &'static std::ffi::CStr,
    f: unsafe extern "C" fn(
        *mut ffi::PyObject,
        *mut *mut ffi::PyObject,
        ffi::Py_ssize_t,
    ) -> *mut ffi::PyObject,
) -> PyResult<()> {
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunctionFast: f },
        ml_flags: ffi::METH_FASTCALL,
        ml_doc: std::ptr::null(),
    }));
    // SAFETY: GIL held (module init); `def` is leaked ('static) as CPython requires.
    let obj = unsafe {
        let p = ffi::PyCFunction_NewEx(def, std::ptr::null_mut(), std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(m.py(), p)?
    };
    m.add(name.to_str().expect("ASCII name"), obj)
}

#[cfg(Py_3_12)]
#[pyfunction]
fn _set_disable(obj: &Bound<'_, PyAny>) {
    // SAFETY: GIL held (a `Bound`), live object.
    unsafe { hook::set_disable(obj.as_ptr()) };
}

/// Installs (`on`: returns how many other profilers it chained) or removes (returns on how
/// many threads another profiler had taken the slot over) the profile hook on every thread.
#[cfg(not(Py_3_12))]
#[pyfunction]
fn _profile_all_threads(_py: Python<'_>, on: bool) -> PyResult<usize> {
    // SAFETY: GIL held (the `Python` token).
    unsafe { hook::set_all_threads(on) }
        .map_err(|e| PyRuntimeError::new_err(e.to_string_lossy().into_owned()))
}

#[pymodule]
fn _hushtrace(m: &Bound<'_, PyModule>) -> PyResult<()> {
    hook::check_interpreter().map_err(pyo3::exceptions::PyImportError::new_err)?;
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(start_from_env, m)?)?;
    m.add_function(wrap_pyfunction!(stop, m)?)?;
    m.add_function(wrap_pyfunction!(is_running, m)?)?;
    m.add_function(wrap_pyfunction!(enable, m)?)?;
    m.add_function(wrap_pyfunction!(disable, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot, m)?)?;
    add_fastcall_keywords(
        m,
        c"event",
        c"event(cat, name, **fields): records an instant event (fields: int, float, bool, str); returns whether it was written.",
        event_fast,
    )?;
    m.add_function(wrap_pyfunction!(counter, m)?)?;
    m.add_function(wrap_pyfunction!(span, m)?)?;
    m.add_class::<Span>()?;
    m.add_class::<SpanPair>()?;
    m.add_function(wrap_pyfunction!(_prepare_functions, m)?)?;
    m.add_function(wrap_pyfunction!(_await_main, m)?)?;
    m.add_function(wrap_pyfunction!(_close_open_frames, m)?)?;
    m.add_function(wrap_pyfunction!(_sigterm_net, m)?)?;
    m.add_function(wrap_pyfunction!(_sigterm_handler_started, m)?)?;
    m.add_function(wrap_pyfunction!(_stop_c_calls, m)?)?;
    #[cfg(Py_3_12)]
    {
        m.add("MONITORING", true)?;
        m.add_function(wrap_pyfunction!(_set_disable, m)?)?;
        add_fastcall(m, c"_mon_py_start", hook::py_start)?;
        add_fastcall(m, c"_mon_py_resume", hook::py_resume)?;
        add_fastcall(m, c"_mon_py_throw", hook::py_throw)?;
        add_fastcall(m, c"_mon_py_return", hook::py_return)?;
        add_fastcall(m, c"_mon_py_yield", hook::py_yield)?;
        add_fastcall(m, c"_mon_py_unwind", hook::py_unwind)?;
        add_fastcall(m, c"_mon_call", hook::call)?;
        add_fastcall(m, c"_mon_c_return", hook::c_return)?;
        add_fastcall(m, c"_mon_c_raise", hook::c_raise)?;
    }
    #[cfg(not(Py_3_12))]
    {
        m.add("MONITORING", false)?;
        m.add_function(wrap_pyfunction!(_profile_all_threads, m)?)?;
        add_fastcall(m, c"_profile_thread_bootstrap", hook::thread_bootstrap)?;
        add_fastcall(m, c"_setprofile", hook::setprofile)?;
        add_fastcall(m, c"_getprofile", hook::getprofile)?;
    }
    Ok(())
}
