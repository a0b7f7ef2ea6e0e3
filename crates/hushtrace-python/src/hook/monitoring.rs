//! `sys.monitoring` callbacks: builtin functions (`METH_FASTCALL`) registered for the
//! events by `hushtrace._functions`. A callback for an excluded function returns
//! `sys.monitoring.DISABLE` where the event allows it, so CPython stops calling it for that
//! code location: an excluded function costs nothing after its first call.
use super::*;
use std::sync::atomic::AtomicPtr;

/// `sys.monitoring.DISABLE` (written once, under the GIL, before any callback runs).
static DISABLE: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());

/// Keeps `sys.monitoring.DISABLE` (a strong reference, for the life of the process).
///
/// # Safety
/// The GIL is held; `obj` is a live object.
pub unsafe fn set_disable(obj: *mut ffi::PyObject) {
    // SAFETY: GIL held, live object (caller).
    unsafe {
        ffi::Py_INCREF(obj);
        DISABLE.store(obj, std::sync::atomic::Ordering::Relaxed);
    }
}

#[inline]
unsafe fn none() -> *mut ffi::PyObject {
    // SAFETY: GIL held (callback); None is immortal on 3.12+, the incref is kept for form.
    unsafe {
        let n = ffi::Py_None();
        ffi::Py_INCREF(n);
        n
    }
}

#[inline]
unsafe fn disable() -> *mut ffi::PyObject {
    // SAFETY: GIL held (callback); set before the callbacks are registered.
    unsafe {
        let d = DISABLE.load(std::sync::atomic::Ordering::Relaxed);
        if d.is_null() {
            return none();
        }
        ffi::Py_INCREF(d);
        d
    }
}

/// The function of the code object in `args[0]`.
#[inline]
unsafe fn code_func(
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> Option<&'static Func> {
    if nargs < 1 {
        return None;
    }
    // SAFETY: CPython passes `nargs` live arguments; the first is the code object; GIL held.
    unsafe { funcs::of_code(*args) }
}

macro_rules! code_callback {
    ($name:ident, $act:ident, $can_disable:expr) => {
        code_callback!($name, $act, $can_disable, no_tasks);
    };
    // `$tasks(f, args, nargs)` after `$act` for a function with a part in following asyncio
    // tasks (`crate::tasks`), traced or not (such a function is never disabled).
    ($name:ident, $act:ident, $can_disable:expr, $tasks:expr) => {
        /// A `sys.monitoring` callback (see the module docs).
        ///
        /// # Safety
        /// Called by CPython with the GIL held and `nargs` live arguments.
        pub unsafe extern "C" fn $name(
            _slf: *mut ffi::PyObject,
            args: *mut *mut ffi::PyObject,
            nargs: ffi::Py_ssize_t,
        ) -> *mut ffi::PyObject {
            // SAFETY: forwarded contract.
            unsafe {
                match code_func(args, nargs) {
                    Some(f) if !f.excluded => {
                        $act(f);
                        if f.task.get() != 0 {
                            $tasks(f, args, nargs);
                        }
                        none()
                    }
                    Some(f) if f.task.get() != 0 => {
                        $tasks(f, args, nargs);
                        none()
                    }
                    Some(_) if $can_disable => disable(),
                    _ => none(),
                }
            }
        }
    };
}

#[inline]
unsafe fn no_tasks(_: &Func, _: *mut *mut ffi::PyObject, _: ffi::Py_ssize_t) {}

code_callback!(py_start, enter, true);
code_callback!(py_resume, enter, true);
code_callback!(py_throw, enter, false);
code_callback!(py_return, exit, true, crate::tasks::on_return);
code_callback!(py_yield, exit, true);
code_callback!(py_unwind, exit, false, crate::tasks::on_unwind);

macro_rules! c_callback {
    ($name:ident, $act:ident) => {
        /// A `sys.monitoring` callback for C calls: `(code, offset, callable, arg0)`.
        ///
        /// # Safety
        /// Called by CPython with the GIL held and `nargs` live arguments.
        pub unsafe extern "C" fn $name(
            _slf: *mut ffi::PyObject,
            args: *mut *mut ffi::PyObject,
            nargs: ffi::Py_ssize_t,
        ) -> *mut ffi::PyObject {
            // SAFETY: forwarded contract.
            unsafe {
                if nargs >= 3 && C_CALLS.load(Ordering::Relaxed) {
                    if let Some(f) = funcs::of_c_callable(*args.add(2)) {
                        if !f.excluded {
                            $act(f);
                        }
                    }
                }
                none()
            }
        }
    };
}

c_callback!(call, enter);
c_callback!(c_return, exit);
c_callback!(c_raise, exit);
