//! State guarded by the GIL.
//!
//! Every hook and every API function of this module runs with the GIL held (the module does not
//! declare support for free-threaded builds, so CPython re-enables the GIL when loading it), so
//! the tables the hot path reads need no lock of their own: a [`GilCell`] hands out its
//! contents only to a caller that holds the GIL.

use std::cell::UnsafeCell;

/// A value accessed only with the GIL held.
pub struct GilCell<T>(UnsafeCell<T>);

// SAFETY: every access goes through `get`, whose contract is that the GIL is held, which
// serializes the threads that touch the value.
unsafe impl<T> Sync for GilCell<T> {}

impl<T> GilCell<T> {
    /// A cell holding `v`.
    pub const fn new(v: T) -> Self {
        GilCell(UnsafeCell::new(v))
    }

    /// The value.
    ///
    /// # Safety
    /// The calling thread holds the GIL, and no other reference obtained from this cell is
    /// alive (callers keep the borrow short and do not call back into Python while holding it).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self) -> &mut T {
        // SAFETY: forwarded contract: the GIL serializes access, borrows do not overlap.
        unsafe { &mut *self.0.get() }
    }
}
