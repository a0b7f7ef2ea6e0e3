//! The per-call hooks: `sys.monitoring` callbacks (3.12+) and the C profile hook (below).
//!
//! Both come down to [`enter`] and [`exit`]: a `co_extra` load to find the interned function,
//! a thread-local depth counter, and one `py:call` begin or end through the runtime's
//! record path (no lock, no allocation, no system call). A generator or coroutine is exited
//! at each `yield`/`await` and entered again when resumed, so a suspended one is not one long
//! slice. An exception unwinding through a frame exits it (`PY_UNWIND`, or the profile hook's
//! return). Ends whose begin this thread never recorded (frames that were running when tracing
//! started, or that began in the parent before `fork()`) are not written, so every thread's
//! begins and ends balance.

use crate::funcs::{self, Func};
use pyo3::ffi;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Bumped whenever the per-thread depth counters must restart from 0 (each start of function
/// tracing, and in a fork child: the frames open at the fork began in the parent's trace).
pub static GENERATION: AtomicU32 = AtomicU32::new(1);
/// `--max-stack-depth` (u32::MAX: none).
pub static MAX_DEPTH: AtomicU32 = AtomicU32::new(u32::MAX);
/// Record C function calls (`--c-calls`).
pub static C_CALLS: AtomicBool = AtomicBool::new(false);

std::thread_local! {
    /// (generation, depth of recorded-or-skipped-by-depth frames). Const-initialized.
    static DEPTH: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// A function starts or resumes on this thread.
#[inline]
pub fn enter(f: &Func) {
    let generation = GENERATION.load(Ordering::Relaxed);
    let _ = DEPTH.try_with(|d| {
        let (g, n) = d.get();
        let n = if g == generation { n } else { 0 };
        d.set((generation, n + 1));
        if n < MAX_DEPTH.load(Ordering::Relaxed) {
            funcs::ensure_defined(f);
            funcs::cs().begin.record_typed((f.id,));
        }
    });
}

/// A function returns, yields or unwinds on this thread.
#[inline]
pub fn exit(f: &Func) {
    let generation = GENERATION.load(Ordering::Relaxed);
    let _ = DEPTH.try_with(|d| {
        let (g, n) = d.get();
        if g != generation || n == 0 {
            return; // its begin was not recorded in this trace
        }
        d.set((g, n - 1));
        if n - 1 < MAX_DEPTH.load(Ordering::Relaxed) {
            funcs::cs().end.record_typed((f.id,));
        }
    });
}

/// Ends, on this thread, the recorded frames still open on its Python stack (innermost
/// first): a session stopped from a signal handler or `os._exit()` in the middle of the
/// program leaves no slice open in the trace. Frames that began before tracing started (or in
/// the parent before `fork()`) are not counted by the depth counter and get no end.
///
/// # Safety
/// The GIL is held.
pub unsafe fn close_open_frames() {
    // SAFETY: GIL held (caller); borrowed current frame, then owned references walked outward
    // and released.
    unsafe {
        let mut frame = ffi::PyEval_GetFrame();
        if frame.is_null() {
            return;
        }
        ffi::Py_INCREF(frame as *mut ffi::PyObject);
        while !frame.is_null() {
            let code = ffi::PyFrame_GetCode(frame) as *mut ffi::PyObject;
            if let Some(f) = funcs::of_code(code) {
                if !f.excluded {
                    exit(f);
                }
            }
            ffi::Py_DECREF(code);
            let back = ffi::PyFrame_GetBack(frame);
            ffi::Py_DECREF(frame as *mut ffi::PyObject);
            frame = back;
        }
    }
}

#[cfg(Py_3_12)]
pub use monitoring::*;

#[cfg(Py_3_12)]
mod monitoring {
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
                            none()
                        }
                        Some(_) if $can_disable => disable(),
                        _ => none(),
                    }
                }
            }
        };
    }

    code_callback!(py_start, enter, true);
    code_callback!(py_resume, enter, true);
    code_callback!(py_throw, enter, false);
    code_callback!(py_return, exit, true);
    code_callback!(py_yield, exit, true);
    code_callback!(py_unwind, exit, false);

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
}

#[cfg(not(Py_3_12))]
pub use evalframe::set_eval_frame;

#[cfg(not(Py_3_12))]
mod evalframe {
    //! Below 3.12, without C calls: a PEP 523 frame evaluation function. CPython calls it for
    //! every frame it evaluates — a call, and each resumption of a generator or coroutine —
    //! on every thread; it records the begin, evaluates the frame with the default evaluator,
    //! and records the end when the evaluation returns, yields or raises. Unlike the profile
    //! hook, it makes CPython allocate no frame object per call. (Setting it turns off 3.11's
    //! inlining of Python-to-Python calls, as the profile hook does.)
    use super::*;
    use std::ffi::c_void;
    use std::os::raw::c_int;

    type EvalFn =
        unsafe extern "C" fn(*mut ffi::PyThreadState, *mut c_void, c_int) -> *mut ffi::PyObject;

    extern "C" {
        fn _PyInterpreterState_SetEvalFrameFunc(interp: *mut ffi::PyInterpreterState, f: EvalFn);
        fn _PyInterpreterState_GetEvalFrameFunc(interp: *mut ffi::PyInterpreterState) -> EvalFn;
        fn _PyEval_EvalFrameDefault(
            ts: *mut ffi::PyThreadState,
            frame: *mut c_void,
            throwflag: c_int,
        ) -> *mut ffi::PyObject;
    }

    /// The code object and globals of the frame being evaluated (borrowed).
    ///
    /// # Safety
    /// `frame` is the frame CPython passes to the evaluation function.
    #[inline]
    unsafe fn code_and_globals(frame: *mut c_void) -> (*mut ffi::PyObject, *mut ffi::PyObject) {
        let words = frame as *mut *mut ffi::PyObject;
        // SAFETY: 3.11's `_PyInterpreterFrame` starts with f_func, f_globals, f_builtins,
        // f_locals, f_code; 3.9's and 3.10's `PyFrameObject` with the variable-size object
        // header (3 words), f_back, f_code, f_builtins, f_globals.
        unsafe {
            #[cfg(Py_3_11)]
            return (*words.add(4), *words.add(1));
            #[cfg(not(Py_3_11))]
            return (*words.add(4), *words.add(6));
        }
    }

    /// Whether this evaluation of a generator-like function's frame only creates the generator
    /// (3.11 runs the frame up to `RETURN_GENERATOR` on the calling thread's stack; the
    /// generator's own frames are owned by it). Not a call to show: 3.12's `sys.monitoring`
    /// does not report it either; the generator's first resumption is its first slice.
    #[inline]
    unsafe fn creates_generator(frame: *mut c_void) -> bool {
        #[cfg(Py_3_11)]
        {
            const FRAME_OWNED_BY_GENERATOR: u8 = 1;
            // SAFETY: 3.11's `_PyInterpreterFrame`: 8 pointers, `int stacktop`, `bool
            // is_entry`, then `char owner` at byte 69.
            unsafe { *(frame as *const u8).add(69) != FRAME_OWNED_BY_GENERATOR }
        }
        #[cfg(not(Py_3_11))]
        {
            let _ = frame;
            false // 3.9 and 3.10 create generators without evaluating their frame
        }
    }

    unsafe extern "C" fn eval(
        ts: *mut ffi::PyThreadState,
        frame: *mut c_void,
        throwflag: c_int,
    ) -> *mut ffi::PyObject {
        // SAFETY: called by CPython with the GIL held and a live frame.
        unsafe {
            let (code, globals) = code_and_globals(frame);
            match funcs::of_code_globals(code, globals) {
                Some(f) if !(f.excluded || f.generator && creates_generator(frame)) => {
                    enter(f);
                    let r = _PyEval_EvalFrameDefault(ts, frame, throwflag);
                    exit(f);
                    r
                }
                _ => _PyEval_EvalFrameDefault(ts, frame, throwflag),
            }
        }
    }

    /// Installs (`on`) or removes the evaluation function; returns false when another one
    /// (a debugger's, a JIT's) is installed: the caller uses the profile hook then.
    ///
    /// # Safety
    /// The GIL is held.
    pub unsafe fn set_eval_frame(on: bool) -> bool {
        // SAFETY: GIL held (caller).
        unsafe {
            let interp = ffi::PyInterpreterState_Get();
            let cur = _PyInterpreterState_GetEvalFrameFunc(interp);
            let default: EvalFn = _PyEval_EvalFrameDefault;
            let ours: EvalFn = eval;
            if on {
                if cur as usize != default as usize && cur as usize != ours as usize {
                    return false;
                }
                _PyInterpreterState_SetEvalFrameFunc(interp, ours);
            } else if cur as usize == ours as usize {
                _PyInterpreterState_SetEvalFrameFunc(interp, default);
            }
            true
        }
    }
}

#[cfg(not(Py_3_12))]
pub use profile::*;

#[cfg(not(Py_3_12))]
mod profile {
    //! The C profile hook (`Py_tracefunc`), installed on every thread: on the running ones
    //! through `_PyEval_SetProfile(tstate, ...)`, on threads started later by a
    //! `threading.setprofile` bootstrap function that installs it on its own thread.
    use super::*;
    use std::os::raw::c_int;

    const PY_TRACE_CALL: c_int = 0;
    const PY_TRACE_RETURN: c_int = 3;
    const PY_TRACE_C_CALL: c_int = 4;
    const PY_TRACE_C_EXCEPTION: c_int = 5;
    const PY_TRACE_C_RETURN: c_int = 6;

    type TraceFunc = unsafe extern "C" fn(
        *mut ffi::PyObject,
        *mut ffi::PyFrameObject,
        c_int,
        *mut ffi::PyObject,
    ) -> c_int;

    extern "C" {
        fn PyEval_SetProfile(f: Option<TraceFunc>, arg: *mut ffi::PyObject);
        fn _PyEval_SetProfile(
            ts: *mut ffi::PyThreadState,
            f: Option<TraceFunc>,
            arg: *mut ffi::PyObject,
        ) -> c_int;
    }

    /// The profile hook.
    ///
    /// # Safety
    /// Called by CPython with the GIL held and a live frame.
    pub unsafe extern "C" fn hook(
        _obj: *mut ffi::PyObject,
        frame: *mut ffi::PyFrameObject,
        what: c_int,
        arg: *mut ffi::PyObject,
    ) -> c_int {
        // SAFETY: GIL held, live frame and argument (CPython's contract).
        unsafe {
            match what {
                PY_TRACE_CALL | PY_TRACE_RETURN => {
                    let code = ffi::PyFrame_GetCode(frame) as *mut ffi::PyObject;
                    if let Some(f) = funcs::of_code(code) {
                        if !f.excluded {
                            if what == PY_TRACE_CALL {
                                enter(f)
                            } else {
                                exit(f)
                            }
                        }
                    }
                    ffi::Py_DECREF(code);
                }
                PY_TRACE_C_CALL | PY_TRACE_C_RETURN | PY_TRACE_C_EXCEPTION
                    if C_CALLS.load(Ordering::Relaxed) && !arg.is_null() =>
                {
                    if let Some(f) = funcs::of_c_callable(arg) {
                        if !f.excluded {
                            if what == PY_TRACE_C_CALL {
                                enter(f)
                            } else {
                                exit(f)
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        0
    }

    /// Installs (or with `on == false` removes) the hook on every thread of the interpreter.
    ///
    /// # Safety
    /// The GIL is held.
    pub unsafe fn set_all_threads(on: bool) {
        let f: Option<TraceFunc> = if on { Some(hook) } else { None };
        // SAFETY: GIL held (caller): the thread-state list is stable while we walk it.
        unsafe {
            let interp = ffi::PyInterpreterState_Get();
            let mut ts = ffi::PyInterpreterState_ThreadHead(interp);
            while !ts.is_null() {
                if _PyEval_SetProfile(ts, f, std::ptr::null_mut()) < 0 {
                    ffi::PyErr_Clear();
                }
                ts = ffi::PyThreadState_Next(ts);
            }
        }
    }

    /// `threading.setprofile` bootstrap for threads started later: `(frame, event, arg)`.
    /// Installs the C hook on this thread and records the call it was called for.
    ///
    /// # Safety
    /// Called by CPython with the GIL held and `nargs` live arguments.
    pub unsafe extern "C" fn thread_bootstrap(
        _slf: *mut ffi::PyObject,
        args: *mut *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
    ) -> *mut ffi::PyObject {
        // SAFETY: GIL held; arguments live (CPython's contract).
        unsafe {
            PyEval_SetProfile(Some(hook), std::ptr::null_mut());
            if nargs >= 2 {
                let frame = *args;
                let event = funcs::str_of(*args.add(1));
                if event.as_deref() == Some("call") && ffi::PyFrame_Check(frame) != 0 {
                    hook(
                        std::ptr::null_mut(),
                        frame as *mut ffi::PyFrameObject,
                        PY_TRACE_CALL,
                        std::ptr::null_mut(),
                    );
                }
            }
            let n = ffi::Py_None();
            ffi::Py_INCREF(n);
            n
        }
    }
}
