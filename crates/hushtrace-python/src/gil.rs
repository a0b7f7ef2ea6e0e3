//! State guarded by the GIL.
//!
//! Every hook and every API function of this module runs with the GIL held (the module does not
//! declare support for free-threaded builds, so CPython re-enables the GIL when loading it), so
//! the tables the hot path reads need no lock of their own. A [`GilCell`] is to the GIL what a
//! `Mutex` is to its lock: shared between threads only when its contents may move between
//! threads (`T: Send`), and borrowed through a [`Python`] token, which proves the GIL is held.
//! The borrow is checked: code that runs Python (a `__del__`, a `__str__`) while the cell is
//! borrowed and comes back to it gets an error, not a second mutable reference.

use pyo3::exceptions::PyRuntimeError;
use pyo3::{PyResult, Python};
use std::cell::{RefCell, RefMut};

/// A value accessed only with the GIL held.
pub struct GilCell<T>(RefCell<T>);

// SAFETY: every access holds the GIL (a `Python` token for `borrow_mut`, the contract of
// `get`), which serializes the threads that touch the value and its borrow flag, as a mutex
// would; so, as for `Mutex<T>`, sharing the cell only needs the value to be sendable.
unsafe impl<T: Send> Sync for GilCell<T> {}

impl<T> GilCell<T> {
    /// A cell holding `v`.
    pub const fn new(v: T) -> Self {
        GilCell(RefCell::new(v))
    }

    /// The value, for as long as the guard lives; an error (`RuntimeError`) if it is borrowed
    /// already (Python code run under a borrow re-entered this module).
    pub fn borrow_mut<'a>(&'a self, _py: Python<'a>) -> PyResult<RefMut<'a, T>> {
        self.0.try_borrow_mut().map_err(|_| {
            PyRuntimeError::new_err("hushtrace: re-entered while its tables are in use")
        })
    }

    /// The value, unchecked: for the per-call hooks, which never call into Python.
    ///
    /// # Safety
    /// The calling thread holds the GIL, and no other reference obtained from this cell is
    /// alive (callers keep the borrow short and do not call back into Python while holding it).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self) -> &mut T {
        // SAFETY: forwarded contract: the GIL serializes access, borrows do not overlap.
        unsafe { &mut *self.0.as_ptr() }
    }
}
