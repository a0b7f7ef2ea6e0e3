//! Garbage collections as slices (`python -m hushtrace run --gc`, `start(..., gc=True)`).
//!
//! `hushtrace._gc` appends [`_gc_callback`](callback) to `gc.callbacks` (nothing is installed
//! when the option is off, so it costs nothing then). CPython calls it on the thread that runs
//! the collection, with phase `"start"` before and `"stop"` after, and an info dict: each
//! collection becomes a `py:gc` span on that thread (category `py`, name `gc`), its begin
//! carrying `generation`, its end `generation`, `collected` and `uncollectable` (the info
//! dict's values at `"stop"`). The callback is a builtin function: no Python frame runs for
//! it, so it adds no `py:call` slice, and it never raises (a value it cannot read is 0).
//!
//! An end is recorded only when its begin was (on that thread, in the same generation of
//! function tracing: not across a fork), so every end has its begin.

use crate::funcs::GENERATION;
use hushtrace::{FieldType, Kind, Registered};
use pyo3::ffi;
use pyo3::prelude::*;
use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

/// The `py:gc` span's callsites: (begin, end).
static CALLSITES: OnceLock<(Registered, Registered)> = OnceLock::new();

thread_local! {
    /// The generation of function tracing in which this thread's running collection's begin
    /// was recorded; 0: none was.
    static OPEN: Cell<u32> = const { Cell::new(0) };
}

/// Registers the `py:gc` callsites (once).
fn callsites() -> Result<&'static (Registered, Registered), hushtrace::Error> {
    if let Some(c) = CALLSITES.get() {
        return Ok(c);
    }
    let g = ("generation", FieldType::U32);
    let begin = hushtrace::register_callsite("py", "gc", Kind::SpanBegin, &[g])?;
    let end = hushtrace::register_callsite(
        "py",
        "gc",
        Kind::SpanEnd,
        &[
            g,
            ("collected", FieldType::U64),
            ("uncollectable", FieldType::U64),
        ],
    )?;
    Ok(CALLSITES.get_or_init(|| (begin, end)))
}

/// The integer `key` of the info dict (0 when missing, not an int or negative).
///
/// # Safety
/// The GIL is held; `info` is live.
unsafe fn info_u64(info: *mut ffi::PyObject, key: &CStr) -> u64 {
    // SAFETY: GIL held (caller); the type is checked before the dict and int reads; the
    // value is borrowed; an overflow's error is cleared.
    unsafe {
        if ffi::PyDict_Check(info) == 0 {
            return 0;
        }
        let v = ffi::PyDict_GetItemString(info, key.as_ptr());
        if v.is_null() || ffi::PyLong_Check(v) == 0 {
            return 0;
        }
        let n = ffi::PyLong_AsUnsignedLongLong(v);
        if n == u64::MAX && !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear();
            return 0;
        }
        n
    }
}

/// `gc.callbacks` entry: `(phase, info)`.
///
/// # Safety
/// Called by CPython with the GIL held and `nargs` borrowed arguments in `args`.
unsafe extern "C" fn callback(
    _slf: *mut ffi::PyObject,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    // SAFETY: CPython's contract (above); the exception pending when the collection started
    // (if any) is left as it was.
    unsafe {
        if nargs == 2 {
            crate::funcs::keeping_error(|| collection(*args, *args.add(1)));
        }
        let n = ffi::Py_None();
        ffi::Py_INCREF(n);
        n
    }
}

/// One call of the callback: begins or ends this thread's collection slice.
///
/// # Safety
/// The GIL is held; `phase` and `info` are live.
unsafe fn collection(phase: *mut ffi::PyObject, info: *mut ffi::PyObject) {
    let Ok((begin, end)) = callsites() else {
        return;
    };
    // SAFETY: GIL held (caller), live objects; a failed comparison's error is cleared.
    let (start, generation) = unsafe {
        if ffi::PyUnicode_Check(phase) == 0 {
            return;
        }
        let start = ffi::PyUnicode_CompareWithASCIIString(phase, c"start".as_ptr()) == 0;
        ffi::PyErr_Clear();
        let generation = u32::try_from(info_u64(info, c"generation")).unwrap_or(u32::MAX);
        (start, generation)
    };
    let now = GENERATION.load(Ordering::Relaxed);
    if start {
        let written = begin.record_typed((generation,));
        OPEN.with(|o| o.set(if written { now } else { 0 }));
    } else if OPEN.with(|o| o.replace(0)) == now {
        // SAFETY: as above.
        let (collected, uncollectable) = unsafe {
            (
                info_u64(info, c"collected"),
                info_u64(info, c"uncollectable"),
            )
        };
        end.record_typed((generation, collected, uncollectable));
    }
}

/// Registers the callsites and returns the callback to append to `gc.callbacks` (the same
/// object each time).
#[pyfunction]
fn _gc_callback(py: Python<'_>) -> PyResult<Py<PyAny>> {
    callsites().map_err(crate::err)?;
    static OBJ: OnceLock<Py<PyAny>> = OnceLock::new();
    if let Some(o) = OBJ.get() {
        return Ok(o.clone_ref(py));
    }
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: c"_gc_collection".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFast: callback,
        },
        ml_flags: ffi::METH_FASTCALL,
        ml_doc: std::ptr::null(),
    }));
    // SAFETY: GIL held (the `Python` token); `def` is leaked ('static) as CPython requires;
    // a new reference or NULL with an exception.
    let obj = unsafe {
        let p = ffi::PyCFunction_NewEx(def, std::ptr::null_mut(), std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(py, p)?
    };
    Ok(OBJ.get_or_init(|| obj.unbind()).clone_ref(py))
}

/// Adds the garbage collection callback's factory to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_gc_callback, m)?)
}
