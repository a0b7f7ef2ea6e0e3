//! Where a thread state keeps its C profile function: the offset of `c_profilefunc` and
//! `c_profileobj` in `PyThreadState`, found once by a probe (see the parent module's
//! documentation), and the read of a thread's pair at that offset.

use super::{_PyEval_SetProfile, TraceFunc};
use crate::gil::GilCell;
use pyo3::ffi;
use std::ffi::CStr;
use std::os::raw::c_int;

/// Never called: the function the slot probe installs on a scratch thread state.
unsafe extern "C" fn probe(
    _: *mut ffi::PyObject,
    _: *mut ffi::PyFrameObject,
    _: c_int,
    _: *mut ffi::PyObject,
) -> c_int {
    0
}

/// Words of `PyThreadState` the probe looks through (`c_profilefunc` is word 7 or 8 on
/// 3.9-3.11; the struct is far larger than this).
const PROBE_WORDS: usize = 16;

/// Word offset of `c_profilefunc` in `PyThreadState` (`c_tracefunc`, `c_profileobj`,
/// `c_traceobj` follow it), or `None`: found once per process (see the module docs).
static SLOT: GilCell<Option<Option<usize>>> = GilCell::new(None);

/// # Safety
/// The GIL is held.
pub(super) unsafe fn slot_offset() -> Option<usize> {
    // SAFETY: GIL held (caller); the borrow ends in this function.
    let cached = unsafe { *SLOT.get() };
    if let Some(off) = cached {
        return off;
    }
    // SAFETY: GIL held.
    let off = unsafe { find_slot() };
    // SAFETY: GIL held.
    unsafe { *SLOT.get() = Some(off) };
    off
}

/// # Safety
/// The GIL is held.
unsafe fn find_slot() -> Option<usize> {
    // SAFETY: GIL held (caller). A scratch thread state, never attached to a thread:
    // created, given the probe pair, read within its first words (all inside the struct),
    // cleared and deleted. The sentinel is a new object, so its address is unique.
    unsafe {
        let sentinel = ffi::PyList_New(0);
        if sentinel.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        let ts = ffi::PyThreadState_New(ffi::PyInterpreterState_Get());
        if ts.is_null() {
            ffi::Py_DECREF(sentinel);
            return None;
        }
        let mut found = None;
        if _PyEval_SetProfile(ts, Some(probe), sentinel) == 0 {
            let w = ts as *const usize;
            let p = probe as TraceFunc as usize;
            found = (0..PROBE_WORDS - 3).find(|&i| {
                *w.add(i) == p
                    && *w.add(i + 1) == 0
                    && *w.add(i + 2) == sentinel as usize
                    && *w.add(i + 3) == 0
            });
            if _PyEval_SetProfile(ts, None, std::ptr::null_mut()) < 0 {
                ffi::PyErr_Clear();
            }
        } else {
            ffi::PyErr_Clear();
        }
        ffi::PyThreadState_Clear(ts);
        ffi::PyThreadState_Delete(ts);
        ffi::Py_DECREF(sentinel);
        found
    }
}

/// A thread's profile function and object (borrowed).
///
/// # Safety
/// GIL held; `ts` a live thread state; `off` from [`slot_offset`].
pub(super) unsafe fn slot(ts: *mut ffi::PyThreadState, off: usize) -> (usize, *mut ffi::PyObject) {
    let w = ts as *const usize;
    // SAFETY: the probe found the fields at these words of every `PyThreadState` of this
    // interpreter; the GIL keeps their thread from changing them meanwhile.
    unsafe { (*w.add(off), *w.add(off + 2) as *mut ffi::PyObject) }
}

/// The error when [`slot_offset`] finds no slot.
pub const NO_SLOT: &CStr = c"hushtrace: cannot locate the profile function fields of this \
    interpreter's PyThreadState (unknown CPython build): function tracing is not supported \
    on it";
