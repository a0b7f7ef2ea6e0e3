//! Below 3.12: the C profile hook (`Py_tracefunc`), the slot cProfile uses, installed on
//! every thread: on the running ones through `_PyEval_SetProfile(tstate, ...)`, on threads
//! started later by a `threading.setprofile` bootstrap function that installs it on its
//! own thread. CPython calls it for every Python frame it starts or resumes, whatever
//! path entered the frame (3.11 runs the generic form of its specialised instructions
//! while a profile function is set), and 3.11 still inlines Python-to-Python calls, so
//! a deep recursion uses no more C stack than untraced.
//!
//! There is one profile slot per thread. When a thread's slot is already taken (cProfile,
//! `sys.setprofile`) as hushtrace starts, the hook takes the slot and calls the previous
//! function after itself for every event (a [`Chain`]), and gives the slot back when
//! hushtrace stops: both tools see every call. While tracing, `sys.setprofile` is
//! [`setprofile`], which chains the function it sets the same way (`profile.Profile`,
//! `sys.setprofile` tools), and `threading.setprofile`'s function is chained on each new
//! thread; cProfile's `enable` and `disable`, which set the slot directly, are followed by
//! a one-shot trace function that takes it back ([`retake::arm_retake`]). Another C profiler that
//! sets the slot directly (or cProfile while the trace slot is taken) takes the slot over,
//! and gives none back when it stops: hushtrace records nothing more on that thread, and
//! [`set_all_threads`] counts such threads when it stops so that the caller warns. Threads
//! started with `_thread.start_new_thread` (no `threading` bootstrap) are not traced, as
//! cProfile does not profile them either.
//!
//! The previous function is read from the thread state's `c_profilefunc`/`c_profileobj`
//! fields (no API returns a thread's C profile function). Their offset is not hard-coded:
//! [`slot::slot_offset`] finds it once by setting a probe function and object on a fresh thread
//! state and looking for that pair; an interpreter where it is not found is refused with
//! a clear error instead of guessed at.
mod retake;
mod slot;

use super::*;
use crate::gil::GilCell;
use retake::{arm_retake, find_lsprof, is_cprofile_switch};
pub use slot::NO_SLOT;
use slot::{slot, slot_offset};
use std::collections::HashSet;
use std::ffi::{c_void, CStr};
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
    fn _PyEval_SetProfile(
        ts: *mut ffi::PyThreadState,
        f: Option<TraceFunc>,
        arg: *mut ffi::PyObject,
    ) -> c_int;
}

/// The profile function a thread had before the hook took its slot; the hook's own
/// profile object is a capsule holding it (NULL when the slot was free).
struct Chain {
    func: TraceFunc,
    /// Owned reference (or NULL).
    obj: *mut ffi::PyObject,
}

const CHAIN: &CStr = c"hushtrace._profile_chain";

/// The capsule destructor: releases the chained function's object.
unsafe extern "C" fn drop_chain(capsule: *mut ffi::PyObject) {
    // SAFETY: called by CPython (GIL held) on our capsule, whose pointer is a boxed
    // `Chain` made by `install`, freed only here.
    unsafe {
        let p = ffi::PyCapsule_GetPointer(capsule, CHAIN.as_ptr()) as *mut Chain;
        if !p.is_null() {
            let c = Box::from_raw(p);
            ffi::Py_XDECREF(c.obj);
        }
    }
}

/// The chain held by the hook's profile object `obj` (not NULL).
///
/// # Safety
/// GIL held; `obj` is the profile object the hook was installed with.
#[inline]
unsafe fn chain_of(obj: *mut ffi::PyObject) -> Option<&'static Chain> {
    // SAFETY: forwarded; the hook is only ever installed with one of our capsules.
    let p = unsafe { ffi::PyCapsule_GetPointer(obj, CHAIN.as_ptr()) } as *const Chain;
    // SAFETY: alive as long as the capsule, which the thread state holds while the hook
    // can be called with it.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The profile hook.
///
/// # Safety
/// Called by CPython with the GIL held and a live frame.
pub unsafe extern "C" fn hook(
    obj: *mut ffi::PyObject,
    frame: *mut ffi::PyFrameObject,
    what: c_int,
    arg: *mut ffi::PyObject,
) -> c_int {
    // SAFETY: GIL held, live frame and argument (CPython's contract).
    unsafe {
        if what == PY_TRACE_C_CALL && is_cprofile_switch(arg) {
            arm_retake();
        }
        match what {
            PY_TRACE_CALL | PY_TRACE_RETURN => {
                let code = ffi::PyFrame_GetCode(frame) as *mut ffi::PyObject;
                if let Some(f) = funcs::of_code(code) {
                    if !f.excluded {
                        if what == PY_TRACE_CALL {
                            enter(f)
                        } else if arg.is_null() {
                            // Unwound by an exception, which CPython holds aside meanwhile.
                            unwind(f, std::ptr::null_mut())
                        } else {
                            exit(f)
                        }
                    }
                    if what == PY_TRACE_RETURN && f.task.get() != 0 {
                        crate::tasks::profile_return(f, frame, arg);
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
        if obj.is_null() {
            return 0;
        }
        chained(obj, frame, what, arg)
    }
}

/// Calls the profile function the hook displaced (see the module documentation).
#[cold]
#[inline(never)]
unsafe fn chained(
    obj: *mut ffi::PyObject,
    frame: *mut ffi::PyFrameObject,
    what: c_int,
    arg: *mut ffi::PyObject,
) -> c_int {
    if (what == PY_TRACE_C_RETURN || what == PY_TRACE_C_EXCEPTION)
        && SWALLOW_C_END.with(|s| s.replace(false))
    {
        return 0; // the end of the `sys.setprofile` call that chained this function
    }
    // SAFETY: GIL held; `obj` is the hook's capsule (caller). The chained function may
    // replace this thread's profile function and so release the capsule: its object is
    // kept alive across the call.
    unsafe {
        let Some(c) = chain_of(obj) else {
            ffi::PyErr_Clear();
            return 0;
        };
        let (func, o) = (c.func, c.obj);
        ffi::Py_XINCREF(o);
        let r = func(o, frame, what, arg);
        ffi::Py_XDECREF(o);
        r
    }
}

std::thread_local! {
    /// The next C return or exception event is that of the `sys.setprofile` call that
    /// chained the profile function it set ([`setprofile`]): not forwarded to it, as
    /// untraced it would not see it (profiling was off when the call began).
    static SWALLOW_C_END: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The interpreter's own `sys.setprofile` and `sys.getprofile`, while [`setprofile`] and
/// [`getprofile`] stand in for them (between [`set_all_threads`]`(true)` and `(false)`).
static REAL: GilCell<(usize, usize)> = GilCell::new((0, 0));

/// Stands in for `sys.setprofile` while tracing: sets the profile function as the real
/// one does, then takes the slot back with the new function chained, so a profiler set
/// with `sys.setprofile` (`profile.Profile`, line profilers, ...) after hushtrace started
/// and hushtrace both see every call. (A C-level profiler such as cProfile sets the slot
/// directly: it takes the thread over, see the module documentation.)
///
/// # Safety
/// Called by CPython with the GIL held and `nargs` live arguments.
pub unsafe extern "C" fn setprofile(
    _slf: *mut ffi::PyObject,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    // SAFETY: GIL held, live arguments (CPython's contract); REAL holds live functions
    // while this one is installed.
    unsafe {
        let real = REAL.get().0 as *mut ffi::PyObject;
        if real.is_null() {
            ffi::PyErr_SetString(ffi::PyExc_RuntimeError, c"hushtrace: not tracing".as_ptr());
            return std::ptr::null_mut();
        }
        let ts = ffi::PyThreadState_Get();
        let off = slot_offset();
        let was_ours = off.is_some_and(|o| slot(ts, o).0 == hook_addr());
        let r = ffi::PyObject_Vectorcall(real, args, nargs as usize, std::ptr::null_mut());
        if r.is_null() || !was_ours {
            return r;
        }
        if let Some(off) = off {
            let chained = install(ts, off);
            SWALLOW_C_END.with(|s| s.set(chained));
        }
        r
    }
}

/// Stands in for `sys.getprofile` while tracing: the chained profile function's object
/// (what `sys.getprofile()` returns untraced), not the hook's.
///
/// # Safety
/// Called by CPython with the GIL held and `nargs` live arguments.
pub unsafe extern "C" fn getprofile(
    _slf: *mut ffi::PyObject,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    // SAFETY: GIL held, live arguments (CPython's contract); REAL holds live functions
    // while this one is installed; the returned object gets a new reference.
    unsafe {
        let real = REAL.get().1 as *mut ffi::PyObject;
        let ts = ffi::PyThreadState_Get();
        if let Some(off) = slot_offset() {
            let (f, obj) = slot(ts, off);
            if f == hook_addr() {
                let o = match (!obj.is_null()).then(|| chain_of(obj)).flatten() {
                    Some(c) if !c.obj.is_null() => c.obj,
                    _ => ffi::Py_None(),
                };
                ffi::Py_INCREF(o);
                return o;
            }
        }
        if real.is_null() {
            let n = ffi::Py_None();
            ffi::Py_INCREF(n);
            return n;
        }
        ffi::PyObject_Vectorcall(real, args, nargs as usize, std::ptr::null_mut())
    }
}

/// Keeps (`on`) or drops the interpreter's `sys.setprofile` and `sys.getprofile`.
///
/// # Safety
/// The GIL is held.
unsafe fn keep_real(on: bool) {
    // SAFETY: GIL held (caller); new references kept in REAL, released when dropped.
    unsafe {
        let real = REAL.get();
        for p in [real.0, real.1] {
            ffi::Py_XDECREF(p as *mut ffi::PyObject);
        }
        *real = (0, 0);
        if !on {
            return;
        }
        let sys = ffi::PyImport_ImportModule(c"sys".as_ptr());
        if sys.is_null() {
            ffi::PyErr_Clear();
            return;
        }
        let set = ffi::PyObject_GetAttrString(sys, c"setprofile".as_ptr());
        let get = ffi::PyObject_GetAttrString(sys, c"getprofile".as_ptr());
        ffi::PyErr_Clear();
        ffi::Py_DECREF(sys);
        *real = (set as usize, get as usize);
    }
}

/// The thread states the hook was installed on (to count those whose slot was taken
/// over when it stops). Entries of threads gone are dropped at stop.
static INSTALLED: GilCell<Option<HashSet<usize>>> = GilCell::new(None);

fn hook_addr() -> usize {
    hook as TraceFunc as usize
}

/// Sets `f`/`obj` as `ts`'s profile function, keeping `keep` alive across the swap
/// (3.9 and 3.10 release the old object before taking a reference to the new one).
///
/// # Safety
/// GIL held, live thread state and objects (or NULL).
unsafe fn set(
    ts: *mut ffi::PyThreadState,
    f: Option<TraceFunc>,
    obj: *mut ffi::PyObject,
    keep: *mut ffi::PyObject,
) {
    // SAFETY: forwarded contract.
    unsafe {
        ffi::Py_XINCREF(keep);
        if _PyEval_SetProfile(ts, f, obj) < 0 {
            ffi::PyErr_Clear();
        }
        ffi::Py_XDECREF(keep);
    }
}

/// Installs the hook on `ts`, chaining the profile function found there. Returns whether
/// one was chained.
///
/// # Safety
/// GIL held, live thread state.
unsafe fn install(ts: *mut ffi::PyThreadState, off: usize) -> bool {
    // SAFETY: GIL held, live thread state (caller).
    unsafe {
        // SAFETY: GIL held; the borrow ends before any call into Python.
        INSTALLED
            .get()
            .get_or_insert_with(HashSet::new)
            .insert(ts as usize);
        let (prev, prev_obj) = slot(ts, off);
        if prev == hook_addr() {
            return false; // already ours (tracing restarted)
        }
        if prev == 0 {
            set(ts, Some(hook), std::ptr::null_mut(), prev_obj);
            return false;
        }
        // SAFETY: a non-null `c_profilefunc` is a `Py_tracefunc`.
        let func = std::mem::transmute::<usize, TraceFunc>(prev);
        ffi::Py_XINCREF(prev_obj);
        let chain = Box::into_raw(Box::new(Chain {
            func,
            obj: prev_obj,
        }));
        let cap = ffi::PyCapsule_New(chain as *mut c_void, CHAIN.as_ptr(), Some(drop_chain));
        if cap.is_null() {
            // Out of memory: leave the other profiler alone on this thread.
            ffi::PyErr_Clear();
            drop(Box::from_raw(chain));
            ffi::Py_XDECREF(prev_obj);
            return false;
        }
        set(ts, Some(hook), cap, prev_obj);
        ffi::Py_DECREF(cap); // the thread state holds it now
        true
    }
}

/// Removes the hook from `ts`, giving the slot back to the function it chained. Returns
/// false when the hook was no longer there (another profiler took the slot over).
///
/// # Safety
/// GIL held, live thread state.
unsafe fn uninstall(ts: *mut ffi::PyThreadState, off: usize) -> bool {
    // SAFETY: GIL held, live thread state (caller).
    unsafe {
        let (cur, obj) = slot(ts, off);
        if cur != hook_addr() {
            return false;
        }
        match (!obj.is_null()).then(|| chain_of(obj)).flatten() {
            Some(c) => {
                let (func, o) = (c.func, c.obj);
                // `o` must outlive the capsule, which the swap releases.
                set(ts, Some(func), o, o);
            }
            None => set(ts, None, std::ptr::null_mut(), std::ptr::null_mut()),
        }
        true
    }
}

/// Installs (`on`) the hook on every thread of the interpreter, chaining the profilers
/// found there; returns how many were chained. Or removes it (`!on`), giving each slot
/// back; returns on how many threads it had been displaced by another profiler.
///
/// # Safety
/// The GIL is held.
pub unsafe fn set_all_threads(on: bool) -> Result<usize, &'static CStr> {
    // SAFETY: GIL held (caller): the thread-state list is stable while we walk it.
    unsafe {
        let off = slot_offset().ok_or(NO_SLOT)?;
        let interp = ffi::PyInterpreterState_Get();
        let mut live = HashSet::new();
        let mut ts = ffi::PyInterpreterState_ThreadHead(interp);
        while !ts.is_null() {
            live.insert(ts as usize);
            ts = ffi::PyThreadState_Next(ts);
        }
        keep_real(on);
        if on {
            find_lsprof();
        }
        let mut n = 0;
        if on {
            for &ts in &live {
                n += usize::from(install(ts as *mut ffi::PyThreadState, off));
            }
        } else {
            let ours = INSTALLED.get().take().unwrap_or_default();
            for &ts in ours.intersection(&live) {
                n += usize::from(!uninstall(ts as *mut ffi::PyThreadState, off));
            }
        }
        Ok(n)
    }
}

/// `threading.setprofile` bootstrap for threads started later: `(frame, event, arg)`.
/// Installs the C hook on this thread (chaining what the caller left in the slot) and
/// records the call it was called for.
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
        let Some(off) = slot_offset() else {
            ffi::PyErr_SetString(ffi::PyExc_RuntimeError, NO_SLOT.as_ptr());
            return std::ptr::null_mut();
        };
        let ts = ffi::PyThreadState_Get();
        install(ts, off);
        if nargs >= 2 {
            let frame = *args;
            let event = funcs::str_of(*args.add(1));
            if event.as_deref() == Some("call") && ffi::PyFrame_Check(frame) != 0 {
                // The hook's own object: the chained function sees this call too.
                let (f, obj) = slot(ts, off);
                let obj = if f == hook_addr() {
                    obj
                } else {
                    std::ptr::null_mut()
                };
                let r = hook(
                    obj,
                    frame as *mut ffi::PyFrameObject,
                    PY_TRACE_CALL,
                    std::ptr::null_mut(),
                );
                if r < 0 {
                    return std::ptr::null_mut();
                }
            }
        }
        let n = ffi::Py_None();
        ffi::Py_INCREF(n);
        n
    }
}
