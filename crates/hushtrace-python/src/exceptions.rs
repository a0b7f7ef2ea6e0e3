//! Exceptions that unwind traced frames (`python -m hushtrace run --exceptions`,
//! `start(..., exceptions=True)`): a `py:exception` instant (category `py`, name `exception`)
//! recorded on the thread just before the `py:call` end of each frame an exception unwinds,
//! so it falls inside that frame's slice (an instant inside the slice in Chrome and Perfetto).
//! Fields: `f` (the unwound frame's function id, as on its `py:call` end), `type` (the
//! exception's class, `module.qualname`, the module left out for builtins: `ValueError`,
//! `app.errors.Timeout`) and `message`.
//!
//! The message is the exception's first argument (`args[0]`) when it is a `str`, cut at
//! [`MESSAGE_CAP`] bytes on a UTF-8 character boundary; otherwise (no arguments, a non-str
//! first argument, a string that cannot be encoded) it is empty and the type alone is
//! recorded. `str()` of the exception is never called: no Python code runs in the hook, so an
//! exception whose `__str__` raises, is slow or has side effects leaves the program as it was.
//!
//! Whether it was caught is decided by readers (`hushtrace report --exceptions`): an
//! exception propagates outward through consecutive unwound frames; it was caught further up
//! when the next enclosing recorded frame ends by a return (no `py:exception` before its end),
//! uncaught when it unwinds the thread's outermost recorded frame.
//!
//! Below Python 3.12 the profile hook sees that a frame ends by an exception (a return event
//! with no value) but not the exception (CPython takes it out of the thread state while the
//! hook runs): the event is recorded with an empty `type` and `message`.

use crate::gil::GilCell;
use hushtrace::{FieldType, Kind, Registered};
use pyo3::ffi;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The message's limit in bytes (the runtime's string field limit).
pub const MESSAGE_CAP: usize = hushtrace::STR_CAP;

/// Record exceptions (`--exceptions`).
pub static ENABLED: AtomicBool = AtomicBool::new(false);

static CALLSITE: OnceLock<Registered> = OnceLock::new();

fn callsite() -> Result<&'static Registered, hushtrace::Error> {
    if let Some(c) = CALLSITE.get() {
        return Ok(c);
    }
    let c = hushtrace::register_callsite(
        "py",
        "exception",
        Kind::Instant,
        &[
            ("f", FieldType::U32),
            ("type", FieldType::Str),
            ("message", FieldType::Str),
        ],
    )?;
    Ok(CALLSITE.get_or_init(|| c))
}

/// `s` cut to at most `cap` bytes on a character boundary (tests/test_exceptions.py: a
/// message of 1000 `é` keeps 127 of them, 254 bytes).
fn cut(s: &str, cap: usize) -> &str {
    if s.len() <= cap {
        return s;
    }
    let mut end = cap;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The UTF-8 text of a `str` object (borrowed from it), or None (the error cleared).
///
/// # Safety
/// GIL held; `s` is a live `str`.
unsafe fn utf8<'a>(s: *mut ffi::PyObject) -> Option<&'a str> {
    let mut n: ffi::Py_ssize_t = 0;
    // SAFETY: forwarded contract; the buffer lives as long as `s` (its cached UTF-8 form).
    unsafe {
        let p = ffi::PyUnicode_AsUTF8AndSize(s, &mut n);
        if p.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        std::str::from_utf8(std::slice::from_raw_parts(p as *const u8, n as usize)).ok()
    }
}

/// The qualified name of `exc`'s class.
///
/// # Safety
/// GIL held; `exc` is live.
unsafe fn type_name(exc: *mut ffi::PyObject) -> String {
    // SAFETY: forwarded contract; a heap type is a `PyHeapTypeObject` with a dict; the
    // objects read are borrowed and checked to be `str` before they are read.
    unsafe {
        let tp = ffi::Py_TYPE(exc);
        let name = || {
            std::ffi::CStr::from_ptr((*tp).tp_name)
                .to_string_lossy()
                .into_owned()
        };
        if (*tp).tp_flags & ffi::Py_TPFLAGS_HEAPTYPE == 0 {
            return name(); // a static type: its full name ("ValueError", "_io.Error")
        }
        let ht = tp as *mut ffi::PyHeapTypeObject;
        let qual = (*ht).ht_qualname;
        let Some(qual) = (!qual.is_null() && ffi::PyUnicode_Check(qual) != 0)
            .then(|| utf8(qual))
            .flatten()
        else {
            return name();
        };
        let dict = (*tp).tp_dict;
        let module = if dict.is_null() {
            std::ptr::null_mut()
        } else {
            ffi::PyDict_GetItemString(dict, c"__module__".as_ptr())
        };
        match (!module.is_null() && ffi::PyUnicode_Check(module) != 0)
            .then(|| utf8(module))
            .flatten()
        {
            Some("builtins") | None => qual.to_owned(),
            Some(m) => format!("{m}.{qual}"),
        }
    }
}

/// Records `exc`'s message through `record` (empty when it has none: see the module docs).
///
/// # Safety
/// GIL held; `exc` is a live exception.
unsafe fn with_message<R>(exc: *mut ffi::PyObject, record: impl FnOnce(&str) -> R) -> R {
    // SAFETY: forwarded contract; `args` is the exception's own tuple (checked), its item
    // borrowed; the substring is a new reference released after use.
    unsafe {
        let args = (*(exc as *mut ffi::PyBaseExceptionObject)).args;
        if args.is_null() || ffi::PyTuple_Check(args) == 0 || ffi::PyTuple_Size(args) < 1 {
            return record("");
        }
        let first = ffi::PyTuple_GetItem(args, 0);
        if first.is_null() || ffi::PyUnicode_Check(first) == 0 {
            ffi::PyErr_Clear();
            return record("");
        }
        // Not more characters than bytes kept: a long message is not encoded whole.
        let cap = MESSAGE_CAP as ffi::Py_ssize_t;
        let part = if ffi::PyUnicode_GetLength(first) > cap {
            ffi::PyUnicode_Substring(first, 0, cap)
        } else {
            ffi::Py_INCREF(first);
            first
        };
        if part.is_null() {
            ffi::PyErr_Clear();
            return record("");
        }
        let r = record(utf8(part).map_or("", |s| cut(s, MESSAGE_CAP)));
        ffi::Py_DECREF(part);
        r
    }
}

/// The last exception class named: its address (a strong reference kept, so the address is
/// not reused by another class while it is here) and its name. A program that raises keeps
/// raising the same few classes: the name is built once per change of class.
static LAST_TYPE: GilCell<(usize, String)> = GilCell::new((0, String::new()));

/// Calls `use_name` with the qualified name of `exc`'s class, built once per change of class.
///
/// # Safety
/// GIL held; `exc` is live; `use_name` does not call into Python.
unsafe fn with_type_name<R>(exc: *mut ffi::PyObject, use_name: impl FnOnce(&str) -> R) -> R {
    // SAFETY: GIL held (caller): the cell's borrow ends before anything can call into Python
    // again (the name is built first; the old class is released after the borrow).
    unsafe {
        let tp = ffi::Py_TYPE(exc);
        let last = LAST_TYPE.get();
        if last.0 == tp as usize {
            return use_name(&last.1);
        }
        let name = type_name(exc);
        ffi::Py_INCREF(tp as *mut ffi::PyObject);
        let old = std::mem::replace(last, (tp as usize, name)).0;
        let r = use_name(&last.1);
        ffi::Py_XDECREF(old as *mut ffi::PyObject);
        r
    }
}

/// Records the `py:exception` event of `exc` unwinding function `f` (NULL: not known).
///
/// # Safety
/// GIL held; `exc` is a live exception object or NULL.
#[cold]
#[inline(never)]
pub unsafe fn record(f: u32, exc: *mut ffi::PyObject) {
    let Some(cs) = CALLSITE.get() else {
        return;
    };
    if exc.is_null() {
        cs.record_typed((f, "", ""));
        return;
    }
    // SAFETY: forwarded contract; the exception pending (if any) is left as it was.
    unsafe {
        crate::funcs::keeping_error(|| {
            with_message(exc, |m| {
                with_type_name(exc, |ty| cs.record_typed((f, ty, m)))
            });
        })
    }
}

/// Turns recording exceptions on or off (registering the callsite).
#[pyfunction]
fn _set_exceptions(on: bool) -> PyResult<()> {
    if on {
        callsite().map_err(crate::err)?;
    }
    ENABLED.store(on, Ordering::Relaxed);
    Ok(())
}

/// Adds the switch to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_set_exceptions, m)?)
}
