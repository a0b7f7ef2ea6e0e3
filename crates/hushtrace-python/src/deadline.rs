//! Span deadlines from Python (issue 31): the `deadline=` argument of `span()` and `@trace`
//! (seconds, a positive int or float), declared on the span's end callsite, and the end of a
//! span that checks it (the runtime's `end_span`: one compare; a late span is captured as a
//! late Rust span is). The session's rules (`HUSHTRACE_ON_LATE`, `record --on-late`) apply to
//! every Python span, with or without `deadline=`, and win over it.

use hushtrace::Registered;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt};
use std::time::Duration;

/// The `deadline` argument: `None` → no deadline; a positive, finite int or float of seconds
/// → its duration (at least 1 ns); anything else a `TypeError` (not a number, or a bool) or a
/// `ValueError` (zero, negative, not finite, too large).
pub fn deadline_arg(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if v.is_instance_of::<PyBool>()
        || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>())
    {
        return Err(PyTypeError::new_err(format!(
            "deadline must be a number of seconds (int or float), not {}",
            v.get_type().name()?
        )));
    }
    let secs: f64 = v.extract()?;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(PyValueError::new_err(format!(
            "deadline must be a positive number of seconds, not {secs}"
        )));
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) => Ok(Some(d.max(Duration::from_nanos(1)))),
        Err(_) => Err(PyValueError::new_err(format!(
            "deadline {secs} s is too large"
        ))),
    }
}

/// Declares `deadline` (if any) for the spans ending at `end`. The latest declaration for a
/// category and name wins; the session's rules win over all.
pub fn declare(end: Registered, deadline: Option<Duration>) {
    if let Some(d) = deadline {
        hushtrace::__private::declare_span_deadline(end.callsite(), d);
    }
}

/// Ends a span begun at `start` (its begin's timestamp) at `end`, if the end is enabled, and
/// checks the span's deadline (the rules', else the declared one).
pub fn end(end: Registered, start: u64) {
    let cs = end.callsite();
    let interest = cs.state.interest();
    if interest.is_enabled() {
        hushtrace::__private::end_span(cs, interest, (), start);
    }
}

/// `_check_deadline(deadline)`: raises what `span(..., deadline=...)` would for a bad
/// deadline (for `@trace(deadline=...)`, checked when the decorator is made).
#[pyfunction]
pub fn _check_deadline(deadline: Option<Bound<'_, PyAny>>) -> PyResult<()> {
    deadline_arg(deadline.as_ref()).map(|_| ())
}
