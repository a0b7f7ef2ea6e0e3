//! cProfile's `enable` and `disable` set this thread's profile slot directly: the hook sees
//! them coming (their C call event) and arms a one-shot trace function that takes the slot
//! back, chaining what cProfile left there (see the parent module's documentation).

use super::slot::slot_offset;
use super::{install, REAL};
use crate::gil::GilCell;
use pyo3::ffi;
use std::os::raw::c_int;

/// The method definitions of cProfile's `enable` and `disable` (`_lsprof.Profiler`),
/// which set this thread's profile slot directly (0: not found).
static LSPROF: GilCell<(usize, usize)> = GilCell::new((0, 0));

/// Finds [`LSPROF`] (once): `_lsprof` is a small C module of the standard library.
///
/// # Safety
/// The GIL is held.
pub(super) unsafe fn find_lsprof() {
    // SAFETY: GIL held (caller); new references released; `d_method` of an exact method
    // descriptor is its static `PyMethodDef`.
    unsafe {
        if LSPROF.get().0 != 0 {
            return;
        }
        let m = ffi::PyImport_ImportModule(c"_lsprof".as_ptr());
        if m.is_null() {
            ffi::PyErr_Clear();
            return;
        }
        let cls = ffi::PyObject_GetAttrString(m, c"Profiler".as_ptr());
        ffi::Py_DECREF(m);
        if cls.is_null() {
            ffi::PyErr_Clear();
            return;
        }
        let mut defs = [0usize; 2];
        for (d, name) in defs.iter_mut().zip([c"enable", c"disable"]) {
            let meth = ffi::PyObject_GetAttrString(cls, name.as_ptr());
            if meth.is_null() {
                ffi::PyErr_Clear();
                continue;
            }
            if ffi::Py_TYPE(meth) == std::ptr::addr_of_mut!(ffi::PyMethodDescr_Type) {
                *d = (*(meth as *mut ffi::PyMethodDescrObject)).d_method as usize;
            }
            ffi::Py_DECREF(meth);
        }
        ffi::Py_DECREF(cls);
        *LSPROF.get() = (defs[0], defs[1]);
    }
}

/// Whether the C function about to be called is a cProfile `enable` or `disable` (a
/// bound builtin method: CPython binds method descriptors for the profile events).
///
/// # Safety
/// GIL held; `arg` a live object or NULL.
#[inline]
pub(super) unsafe fn is_cprofile_switch(arg: *mut ffi::PyObject) -> bool {
    // SAFETY: GIL held; the `m_ml` read follows the PyCFunction type check.
    unsafe {
        let (enable, disable) = *LSPROF.get();
        if arg.is_null() || enable == 0 || ffi::PyCFunction_Check(arg) == 0 {
            return false;
        }
        let ml = (*(arg as *mut ffi::PyCFunctionObject)).m_ml as usize;
        ml == enable || ml == disable
    }
}

/// Before cProfile's `enable` or `disable` sets this thread's profile slot (to its own
/// function, or to none): sets a one-shot C trace function, if the trace slot is free,
/// that takes the profile slot back at the thread's next trace event (the next line,
/// call or return, which CPython reports to the trace function before the profile
/// function), chaining what cProfile left there. cProfile then sees every event it sees
/// untraced (the C return of its own `enable`, which it ignores, aside), and hushtrace
/// keeps the thread. With the trace slot taken (a debugger, coverage.py's tracer), cProfile
/// takes the thread over (see the module documentation).
///
/// # Safety
/// The GIL is held.
#[cold]
#[inline(never)]
pub(super) unsafe fn arm_retake() {
    // SAFETY: GIL held (caller); the current thread's own slots.
    unsafe {
        let Some(off) = slot_offset() else { return };
        let w = ffi::PyThreadState_Get() as *const usize;
        if *w.add(off + 1) != 0 {
            return; // the trace slot is taken
        }
        ffi::PyEval_SetTrace(Some(retake), std::ptr::null_mut());
    }
}

/// The one-shot trace function of [`arm_retake`].
unsafe extern "C" fn retake(
    _: *mut ffi::PyObject,
    _: *mut ffi::PyFrameObject,
    _: c_int,
    _: *mut ffi::PyObject,
) -> c_int {
    // SAFETY: called by CPython with the GIL held, on the thread it armed.
    unsafe {
        ffi::PyEval_SetTrace(None, std::ptr::null_mut());
        if REAL.get().0 != 0 {
            // Still tracing (stop() drops REAL first).
            if let Some(off) = slot_offset() {
                install(ffi::PyThreadState_Get(), off);
            }
        }
    }
    0
}
