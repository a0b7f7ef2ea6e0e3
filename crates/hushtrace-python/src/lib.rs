//! `hushtrace._hushtrace`: the CPython extension behind the `hushtrace` Python package.
//!
//! * session control (`start`, `start_from_env`, `stop`, `snapshot`, `enable`, `disable`);
//! * inline tracepoints (`event`, `counter`, `span`, and the span pairs of `@trace`), each a
//!   runtime-registered callsite found by its text ([`inline`]);
//! * thread and process names for the trace (`_set_thread_name`, `_set_process_name`);
//! * whole-program function tracing: the hooks of [`hook`] over the interned functions of
//!   [`funcs`], switched on and off by `hushtrace._functions`; asyncio tasks followed from
//!   those hooks ([`tasks`]); the launcher's frames left out ([`launch`]).
//!
//! Everything runs with the GIL held; the per-call hooks do no Python-level work.

// The C interface (`ht_*`, the symbols `libhushtrace.so` exports), linked into this extension
// from `hushtrace-capi`, the crate `libhushtrace.so` is built from: the package loads the
// extension with `RTLD_GLOBAL`, so a C library loaded afterwards (linked with `-lhushtrace` or
// not) binds its tracepoints and `ht_*` calls to the runtime the Python code records into — one
// runtime, one session, one trace per process. `extern crate` links it although no Rust code
// here names it (a cdylib exports the `#[no_mangle]` functions of every crate it links).
extern crate hushtrace_capi;

mod funcs;
mod gil;
mod hook;
mod inline;
mod launch;
mod tasks;
mod term;

use hushtrace::{Kind, Registered, Session};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
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
/// hold calls whose definition the ring overwrote. `timeout`: seconds to wait for it, a
/// finite number at least 0 (default 10).
#[pyfunction]
#[pyo3(signature = (timeout = None))]
fn snapshot(py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let wait = match timeout {
        None => Duration::from_secs(10),
        Some(t) => snapshot_timeout(t)?,
    };
    dump_definitions(py);
    py.detach(|| hushtrace::snapshot()?.wait(wait))
        .map(|p| p.display().to_string())
        .map_err(err)
}

/// `snapshot`'s timeout as a duration: an int or float (not a bool), finite, at least 0.
fn snapshot_timeout(timeout: &Bound<'_, PyAny>) -> PyResult<Duration> {
    if timeout.is_instance_of::<pyo3::types::PyBool>()
        || !(timeout.is_instance_of::<pyo3::types::PyInt>()
            || timeout.is_instance_of::<pyo3::types::PyFloat>())
    {
        return Err(PyTypeError::new_err(format!(
            "snapshot(): timeout must be a number of seconds, not {}",
            timeout.get_type().name()?
        )));
    }
    let secs: f64 = timeout.extract()?;
    Duration::try_from_secs_f64(secs).map_err(|_| {
        PyValueError::new_err(format!(
            "snapshot(): timeout must be a finite number of seconds, at least 0, not {secs}"
        ))
    })
}

/// Names the calling thread in the trace (its packets' thread name; its kernel name is left
/// alone): Python thread names, set by `hushtrace._names`.
#[pyfunction]
fn _set_thread_name(name: &str) {
    hushtrace::set_thread_trace_name(name);
}

/// Names this process in its trace (the metadata's process name) instead of the
/// interpreter's kernel name.
#[pyfunction]
fn _set_process_name(name: &str) {
    hushtrace::set_process_name(name);
}

// ---- inline tracepoints ----

/// `event(cat, name, **fields)`: records an instant event with keyword fields (int, float,
/// bool, str). A raw `METH_FASTCALL | METH_KEYWORDS` function: when the tracepoint is
/// disabled it returns `False` after one cache probe and the interest loads, before any
/// argument is converted.
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
    // SAFETY: CPython's contract (above): the GIL is held and `args` holds `nargs` positional
    // arguments then one per keyword name, all borrowed for the call.
    unsafe {
        let py = Python::assume_attached();
        if nargs == 2 && inline::event_cached_disabled(py, *args, *args.add(1)) {
            let f = ffi::Py_False();
            ffi::Py_INCREF(f);
            return f;
        }
        let r = (|| -> PyResult<bool> {
            if nargs != 2 {
                return Err(PyTypeError::new_err(format!(
                    "event() takes the category and the name ({nargs} positional arguments \
                     given), then keyword fields"
                )));
            }
            let cat = inline::text_arg(Bound::from_borrowed_ptr(py, *args), "category")?;
            let name = inline::text_arg(Bound::from_borrowed_ptr(py, *args.add(1)), "name")?;
            let mut fields = inline::Fields::none();
            if !kwnames.is_null() {
                let names = Bound::from_borrowed_ptr(py, kwnames);
                for (i, k) in names.try_iter()?.enumerate() {
                    let v = Bound::from_borrowed_ptr(py, *args.add(2 + i));
                    fields.push(k?.cast_into::<PyString>()?, v)?;
                }
            }
            inline::event(py, &cat, &name, &fields)
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

/// Records a counter sample `cat:name` (an int or a float); returns whether it was written.
#[pyfunction]
fn counter(
    py: Python<'_>,
    cat: Bound<'_, PyAny>,
    name: Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let cat = inline::text_arg(cat, "category")?;
    let name = inline::text_arg(name, "name")?;
    inline::counter(py, &cat, &name, value)
}

/// `with hushtrace.span(cat, name, **fields):` — begins on entry, ends on exit. One object
/// may be entered again before it is exited (recursion, or several threads): the spans nest,
/// each exit ends the innermost one its own thread entered.
#[pyclass(module = "hushtrace")]
struct Span {
    cat: Py<PyString>,
    name: Py<PyString>,
    /// The fields, checked when the span was made: (name, value).
    fields: Vec<(Py<PyString>, Py<PyAny>)>,
    /// The entries not exited yet: (thread, end callsite if the begin was written).
    open: Vec<(libc::pthread_t, Option<Registered>)>,
}

#[pymethods]
impl Span {
    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        let py = slf.py();
        let (cat, name) = (slf.cat.bind(py).clone(), slf.name.bind(py).clone());
        let mut fields = inline::Fields::none();
        for (k, v) in &slf.fields {
            fields.push(k.bind(py).clone(), v.bind(py).clone())?;
        }
        let end = inline::span_begin(py, &cat, &name, &fields)?;
        // SAFETY: pthread_self has no preconditions.
        slf.open.push((unsafe { libc::pthread_self() }, end));
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        let Some(i) = self.open.iter().rposition(|(t, _)| *t == me) else {
            return Err(PyRuntimeError::new_err(
                "span exited on a thread that did not enter it",
            ));
        };
        if let (_, Some(end)) = self.open.remove(i) {
            end.record_typed(());
        }
        Ok(false)
    }
}

/// `span(cat, name, **fields)`: a context manager recording a span (see [`Span`]).
#[pyfunction]
#[pyo3(signature = (cat, name, **fields))]
fn span(
    cat: Bound<'_, PyAny>,
    name: Bound<'_, PyAny>,
    fields: Option<Bound<'_, PyDict>>,
) -> PyResult<Span> {
    let cat = inline::text_arg(cat, "category")?;
    let name = inline::text_arg(name, "name")?;
    // The field types are checked now (a TypeError here, not at `with`).
    let mut checked = inline::Fields::none();
    let mut kept = Vec::new();
    if let Some(d) = &fields {
        for (k, v) in d.iter() {
            let k = k.cast_into::<PyString>()?;
            checked.push(k.clone(), v.clone())?;
            kept.push((k.unbind(), v.unbind()));
        }
    }
    Ok(Span {
        cat: cat.unbind(),
        name: name.unbind(),
        fields: kept,
        open: Vec::new(),
    })
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

/// The inline API's counters: `callsites` registered, their `limit`, and `discarded`: the
/// records not written because their callsite was past the limit.
#[pyfunction]
fn _inline_stats(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let (n, limit, discarded) = inline::stats(py)?;
    let d = PyDict::new(py);
    d.set_item("callsites", n)?;
    d.set_item("limit", limit)?;
    d.set_item("discarded", discarded)?;
    Ok(d.unbind())
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
    m.add_function(wrap_pyfunction!(_inline_stats, m)?)?;
    m.add_function(wrap_pyfunction!(_set_thread_name, m)?)?;
    m.add_function(wrap_pyfunction!(_set_process_name, m)?)?;
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
