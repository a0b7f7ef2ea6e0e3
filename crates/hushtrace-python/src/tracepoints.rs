//! The inline tracepoints' Python functions (`event`, `counter`, `span`, the span pairs of
//! `@trace`, `_inline_stats`) over the runtime-registered callsites of [`crate::inline`].

use crate::{deadline, err, inline};
use hushtrace::{Kind, Registered};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::time::Duration;

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

/// `with hushtrace.span(cat, name, deadline=None, **fields):` — begins on entry, ends on
/// exit, checking the span's deadline (`deadline.rs`). One object may be entered again before
/// it is exited (recursion, or several threads): the spans nest, each exit ends the innermost
/// one its own thread entered.
#[pyclass(module = "hushtrace")]
struct Span {
    cat: Py<PyString>,
    name: Py<PyString>,
    /// The fields, checked when the span was made: (name, value).
    fields: Vec<(Py<PyString>, Py<PyAny>)>,
    /// The deadline given to `span()`, checked when it was made.
    deadline: Option<Duration>,
    /// The entries not exited yet: (thread, end callsite and begin timestamp if the begin was
    /// written).
    open: Vec<(libc::pthread_t, Option<(Registered, u64)>)>,
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
        if let Some((cs, _)) = end {
            deadline::declare(cs, slf.deadline);
        }
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
        if let (_, Some((end, start))) = self.open.remove(i) {
            deadline::end(end, start);
        }
        Ok(false)
    }
}

/// `span(cat, name, deadline=None, **fields)`: a context manager recording a span (see
/// [`Span`]); `deadline`, in seconds, makes a span that ends later a late span (checked here,
/// before anything is recorded: `TypeError`/`ValueError`).
#[pyfunction]
#[pyo3(signature = (cat, name, *, deadline=None, **fields))]
fn span(
    cat: Bound<'_, PyAny>,
    name: Bound<'_, PyAny>,
    deadline: Option<Bound<'_, PyAny>>,
    fields: Option<Bound<'_, PyDict>>,
) -> PyResult<Span> {
    let cat = inline::text_arg(cat, "category")?;
    let name = inline::text_arg(name, "name")?;
    let deadline = deadline::deadline_arg(deadline.as_ref())?;
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
        deadline,
        open: Vec::new(),
    })
}

/// A begin/end pair registered once (for `@trace`): no lookup per call. Its deadline (in
/// seconds, `deadline.rs`) is declared when it is made.
#[pyclass(frozen, module = "hushtrace")]
struct SpanPair {
    begin: Registered,
    end: Registered,
}

#[pymethods]
impl SpanPair {
    #[new]
    #[pyo3(signature = (cat, name, deadline=None))]
    fn new(cat: &str, name: &str, deadline: Option<Bound<'_, PyAny>>) -> PyResult<Self> {
        let deadline = deadline::deadline_arg(deadline.as_ref())?;
        let pair = SpanPair {
            begin: hushtrace::register_callsite(cat, name, Kind::SpanBegin, &[]).map_err(err)?,
            end: hushtrace::register_callsite(cat, name, Kind::SpanEnd, &[]).map_err(err)?,
        };
        deadline::declare(pair.end, deadline);
        Ok(pair)
    }

    /// Records the begin if enabled; returns its timestamp (an int, for `end`) if it was
    /// written, else None.
    fn begin(&self) -> Option<u64> {
        let cs = self.begin.callsite();
        let interest = cs.state.interest();
        if !interest.is_enabled() {
            return None;
        }
        hushtrace::__private::begin_timed(cs, interest, ())
    }

    /// Records the end of a span whose `begin()` returned `start` (not None), and checks the
    /// span's deadline.
    #[pyo3(signature = (start=0))]
    fn end(&self, start: u64) {
        deadline::end(self.end, start);
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

/// Adds the inline tracepoints' functions and classes to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_fastcall_keywords(
        m,
        c"event",
        c"event(cat, name, **fields): records an instant event (fields: int, float, bool, str); returns whether it was written.",
        event_fast,
    )?;
    m.add_function(wrap_pyfunction!(counter, m)?)?;
    m.add_function(wrap_pyfunction!(span, m)?)?;
    m.add_function(wrap_pyfunction!(_inline_stats, m)?)?;
    m.add_function(wrap_pyfunction!(deadline::_check_deadline, m)?)?;
    m.add_class::<Span>()?;
    m.add_class::<SpanPair>()
}
