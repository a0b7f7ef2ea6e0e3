//! `hushtrace._hushtrace`: the CPython extension behind the `hushtrace` Python package.
//!
//! * session control (`start`, `start_from_env`, `stop`, `snapshot`, `enable`, `disable`);
//! * inline tracepoints (`event`, `counter`, `span`, and the span pairs of `@trace`), each a
//!   runtime-registered callsite found by its text ([`tracepoints`] over [`inline`]);
//! * thread and process names for the trace (`_set_thread_name`, `_set_process_name`);
//! * whole-program function tracing: the hooks of [`hook`] over the interned functions of
//!   [`funcs`], switched on and off by `hushtrace._functions` ([`functions`]); asyncio tasks
//!   followed from those hooks ([`tasks`]); the launcher's frames left out ([`launch`]);
//! * garbage collections as slices, from a `gc.callbacks` entry ([`gc`]).
//!
//! Everything runs with the GIL held; the per-call hooks do no Python-level work.

// The C interface (`ht_*`, the symbols `libhushtrace.so` exports), linked into this extension
// from `hushtrace-capi`, the crate `libhushtrace.so` is built from: the package loads the
// extension with `RTLD_GLOBAL`, so a C library loaded afterwards (linked with `-lhushtrace` or
// not) binds its tracepoints and `ht_*` calls to the runtime the Python code records into — one
// runtime, one session, one trace per process. `extern crate` links it although no Rust code
// here names it (a cdylib exports the `#[no_mangle]` functions of every crate it links).
extern crate hushtrace_capi;

mod deadline;
mod exceptions;
mod funcs;
mod functions;
mod gc;
mod gil;
mod hook;
mod inline;
mod launch;
mod tasks;
mod term;
mod tracepoints;

use hushtrace::Session;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
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
    tracepoints::add(m)?;
    m.add_function(wrap_pyfunction!(_set_thread_name, m)?)?;
    m.add_function(wrap_pyfunction!(_set_process_name, m)?)?;
    gc::add(m)?;
    exceptions::add(m)?;
    functions::add(m)
}
