//! `sys.monitoring` callbacks, registered for the events by `hushtrace._functions`. A
//! callback for an excluded function returns `sys.monitoring.DISABLE` where the event allows
//! it, so CPython stops calling it for that code location: an excluded function costs nothing
//! after its first call.
//!
//! Each callback is a vectorcall function in an object of its own small type ([`callback`]),
//! not a builtin function: CPython calls it straight from its event dispatch, without the
//! builtin function's call wrapper (its thread-state lookup and recursion check), which
//! would run twice per traced Python call.
use super::*;
use std::ffi::c_void;
use std::sync::atomic::AtomicPtr;

/// A callback object: the vectorcall function CPython calls.
#[repr(C)]
struct Callback {
    ob_base: ffi::PyObject,
    vectorcall: ffi::vectorcallfunc,
}

/// The type of the callback objects (made once, under the GIL).
static CALLBACK_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

/// A new object that CPython calls through `f` (a new reference, or NULL with an exception).
///
/// # Safety
/// The GIL is held.
pub unsafe fn callback(f: ffi::vectorcallfunc) -> *mut ffi::PyObject {
    // SAFETY: GIL held (caller); the type's spec, slots and members are leaked ('static, as
    // CPython keeps pointers to them); the new object is a `Callback` (the type's basic size),
    // whose function pointer is written before it is shared.
    unsafe {
        let mut tp = CALLBACK_TYPE.load(Ordering::Relaxed);
        if tp.is_null() {
            let members = Box::leak(Box::new([
                ffi::PyMemberDef {
                    name: c"__vectorcalloffset__".as_ptr(),
                    type_code: ffi::Py_T_PYSSIZET,
                    offset: std::mem::offset_of!(Callback, vectorcall) as ffi::Py_ssize_t,
                    flags: ffi::Py_READONLY,
                    doc: std::ptr::null(),
                },
                ffi::PyMemberDef::default(),
            ]));
            let slots = Box::leak(Box::new([
                ffi::PyType_Slot {
                    slot: ffi::Py_tp_call,
                    pfunc: ffi::PyVectorcall_Call as *mut c_void,
                },
                ffi::PyType_Slot {
                    slot: ffi::Py_tp_members,
                    pfunc: members.as_mut_ptr() as *mut c_void,
                },
                ffi::PyType_Slot {
                    slot: 0,
                    pfunc: std::ptr::null_mut(),
                },
            ]));
            let spec = Box::leak(Box::new(ffi::PyType_Spec {
                name: c"hushtrace._hushtrace.Callback".as_ptr(),
                basicsize: std::mem::size_of::<Callback>() as std::os::raw::c_int,
                itemsize: 0,
                flags: (ffi::Py_TPFLAGS_DEFAULT
                    | ffi::Py_TPFLAGS_HAVE_VECTORCALL
                    | ffi::Py_TPFLAGS_DISALLOW_INSTANTIATION)
                    as std::os::raw::c_uint,
                slots: slots.as_mut_ptr(),
            }));
            tp = ffi::PyType_FromSpec(spec) as *mut ffi::PyTypeObject;
            if tp.is_null() {
                return std::ptr::null_mut();
            }
            CALLBACK_TYPE.store(tp, Ordering::Relaxed);
        }
        let o = ffi::PyType_GenericAlloc(tp, 0);
        if !o.is_null() {
            std::ptr::addr_of_mut!((*(o as *mut Callback)).vectorcall).write(f);
        }
        o
    }
}

/// The positional arguments' count of a vectorcall.
#[inline(always)]
fn nargs_of(nargsf: usize) -> ffi::Py_ssize_t {
    (nargsf & !(1usize << (usize::BITS - 1))) as ffi::Py_ssize_t
}

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

/// `None`, returned as a new reference without an incref: it is immortal on 3.12+ (PEP 683),
/// its reference count is neither read nor changed by the caller's decref.
#[inline(always)]
unsafe fn none() -> *mut ffi::PyObject {
    // SAFETY: GIL held (callback); the immortal `None` needs no reference counting.
    unsafe { ffi::Py_None() }
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
#[inline(always)]
unsafe fn code_func(
    args: *const *mut ffi::PyObject,
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
        /// A `sys.monitoring` callback (see the module docs): a vectorcall function.
        ///
        /// # Safety
        /// Called by CPython with the GIL held and `nargsf` live positional arguments.
        pub unsafe extern "C" fn $name(
            _callable: *mut ffi::PyObject,
            args: *const *mut ffi::PyObject,
            nargsf: usize,
            _kwnames: *mut ffi::PyObject,
        ) -> *mut ffi::PyObject {
            let nargs = nargs_of(nargsf);
            // The task follower reads the arguments only.
            let args_mut = args as *mut *mut ffi::PyObject;
            // SAFETY: forwarded contract.
            unsafe {
                match code_func(args, nargs) {
                    Some(f) if !f.excluded => {
                        $act(f);
                        if f.task.get() != 0 {
                            $tasks(f, args_mut, nargs);
                        }
                        none()
                    }
                    Some(f) if f.task.get() != 0 => {
                        $tasks(f, args_mut, nargs);
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

/// `PY_UNWIND(code, offset, exception)`: [`unwind`], then the task follower. Never disabled
/// (the event does not allow it).
///
/// # Safety
/// Called by CPython with the GIL held and `nargsf` live positional arguments.
pub unsafe extern "C" fn py_unwind(
    _callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    _kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let nargs = nargs_of(nargsf);
    // SAFETY: forwarded contract; the exception is the third argument.
    unsafe {
        if let Some(f) = code_func(args, nargs) {
            if !f.excluded {
                let exc = if nargs >= 3 {
                    *args.add(2)
                } else {
                    std::ptr::null_mut()
                };
                unwind(f, exc);
            }
            if f.task.get() != 0 {
                crate::tasks::on_unwind(f, args as *mut *mut ffi::PyObject, nargs);
            }
        }
        none()
    }
}

macro_rules! c_callback {
    ($name:ident, $act:ident) => {
        /// A `sys.monitoring` callback for C calls: `(code, offset, callable, arg0)`, a
        /// vectorcall function.
        ///
        /// # Safety
        /// Called by CPython with the GIL held and `nargsf` live positional arguments.
        pub unsafe extern "C" fn $name(
            _callable: *mut ffi::PyObject,
            args: *const *mut ffi::PyObject,
            nargsf: usize,
            _kwnames: *mut ffi::PyObject,
        ) -> *mut ffi::PyObject {
            // SAFETY: forwarded contract.
            unsafe {
                if nargs_of(nargsf) >= 3 && C_CALLS.load(Ordering::Relaxed) {
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
