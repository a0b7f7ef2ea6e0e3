//! asyncio tasks as async slices (`py:task`, id: the task's address, `f`: its coroutine's
//! function; on the begin, `name`: the task's name), followed from the per-call hooks alone:
//! nothing in asyncio is patched, no callback is added to a task, nothing is scheduled on the
//! event loop, so the program makes exactly the calls it makes untraced.
//!
//! * The task's **name** is `Task.get_name()` read when the task begins (the `name=` given to
//!   `create_task`, else asyncio's `Task-N`), called from the hook that saw `create_task`
//!   return: the call runs inside the hook, where the interpreter reports no events, so it
//!   adds no slice and no call the program would see. `asyncio.create_task` and
//!   `TaskGroup.create_task` name the task only after `BaseEventLoop.create_task` returned it
//!   (before 3.13): a task created by them begins when they return instead. The name is on
//!   the task's slice only (not on its coroutine's `py:call` slices: the per-call events
//!   carry nothing but the function id). A name set later (`set_name`) is not seen.
//!
//! * A task **begins** when `asyncio.base_events.BaseEventLoop.create_task` returns it: the
//!   hooks see that function's return value (`PY_RETURN`'s argument on 3.12+, the
//!   profile hook's argument below 3.12), also when the function itself
//!   is not traced (`--include`/`--exclude`). The task's coroutine (`task._coro`) is
//!   remembered by address, with a weak reference.
//! * It **ends** when that coroutine's outermost frame finally returns or unwinds (not when it
//!   yields or awaits): `PY_RETURN`/`PY_UNWIND` on 3.12+; below, the profile hook returning while the coroutine is not suspended (3.11: `cr_suspended`; 3.9
//!   and 3.10: the frame stopped at its `RETURN_VALUE`, or raised). A task
//!   cancelled before it ever ran ends there too: asyncio throws `CancelledError` into its
//!   coroutine, whose frame starts and unwinds at once.
//! * A coroutine freed without having finished (its task was never run: the loop closed
//!   first, or it was closed before starting) ends its task when it is freed (the weak
//!   reference's callback), so every begin has its end.
//!
//! Not followed: tasks not created through `BaseEventLoop.create_task` (`asyncio.Task(...)`
//! called directly, other event loops such as uvloop), and coroutines that are not Python
//! code (no code object). A task whose coroutine finished inside `create_task` (3.12+'s eager
//! tasks) is an empty slice at the return of `create_task`; an eager task that awaits begins
//! there too, after its coroutine's first steps.

use crate::funcs::{self, keeping_error, Func, Role, GENERATION};
use crate::gil::GilCell;
use pyo3::ffi;
use pyo3::Python;
use std::cell::RefMut;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// A task whose coroutine has not finished.
struct Open {
    task: u64,
    func: &'static Func,
    /// The weak reference to the coroutine (owned).
    weak: Owned,
    /// `funcs::GENERATION` at the begin: an end in another generation (a fork child, a new
    /// start of function tracing) belongs to a trace that holds no begin.
    generation: u32,
}

/// A strong reference to a Python object, touched only with the GIL held.
struct Owned(*mut ffi::PyObject);

// SAFETY: the reference is used (read, released) only by code holding the GIL, whichever thread
// that is, as with pyo3's `Py<T>`, which is `Send` for the same reason.
unsafe impl Send for Owned {}

#[derive(Default)]
struct State {
    /// Coroutine key ([`key_of`]) → its open task.
    by_coro: HashMap<usize, Open>,
    /// Weak reference address → coroutine key.
    by_weak: HashMap<usize, usize>,
}

static STATE: GilCell<Option<State>> = GilCell::new(None);

/// The task table, borrowed (checked): `None` when it is borrowed already, which only Python
/// code run under a borrow (a `__del__`) coming back here could cause; the caller then leaves
/// that task unfollowed rather than alias the table.
///
/// # Safety
/// The GIL is held.
unsafe fn state<'py>() -> Option<RefMut<'py, State>> {
    // SAFETY: the GIL is held (caller).
    let py = unsafe { Python::assume_attached() };
    let table = STATE.borrow_mut(py).ok()?;
    Some(RefMut::map(table, |t| t.get_or_insert_with(State::default)))
}

/// The attribute `name` of `o` (new reference), or NULL with no exception set.
///
/// # Safety
/// The GIL is held; `o` is live.
unsafe fn attr(o: *mut ffi::PyObject, name: &std::ffi::CStr) -> *mut ffi::PyObject {
    // SAFETY: forwarded contract; a failed lookup leaves an exception, cleared here.
    unsafe {
        let v = ffi::PyObject_GetAttrString(o, name.as_ptr());
        if v.is_null() {
            ffi::PyErr_Clear();
        }
        v
    }
}

/// Whether the running frame (`BaseEventLoop.create_task`'s, returning) was called by a
/// function that names the task afterwards ([`Role::NamingCreateTask`]): its return begins
/// the task then.
///
/// # Safety
/// The GIL is held.
unsafe fn called_by_namer() -> bool {
    // SAFETY: GIL held (caller); borrowed running frame; new references released.
    unsafe {
        let frame = ffi::PyEval_GetFrame();
        if frame.is_null() {
            return false;
        }
        let back = ffi::PyFrame_GetBack(frame);
        if back.is_null() {
            return false;
        }
        let code = ffi::PyFrame_GetCode(back) as *mut ffi::PyObject;
        ffi::Py_DECREF(back as *mut ffi::PyObject);
        if code.is_null() {
            return false;
        }
        let namer =
            funcs::known(code).is_some_and(|f| f.task.get() == Role::NamingCreateTask as u8);
        ffi::Py_DECREF(code);
        namer
    }
}

/// `BaseEventLoop.create_task` returned `task`: begins its slice, unless the function that
/// called it names the task first and begins it when it returns.
///
/// # Safety
/// The GIL is held; `task` is live.
unsafe fn loop_created(task: *mut ffi::PyObject) {
    // SAFETY: forwarded contract.
    unsafe {
        if !called_by_namer() {
            created(task);
        }
    }
}

/// A function that creates tasks returned `task`: begins its slice and remembers its
/// coroutine.
///
/// # Safety
/// The GIL is held; `task` is live.
unsafe fn created(task: *mut ffi::PyObject) {
    // SAFETY: GIL held (caller); references taken here are released here.
    unsafe {
        let mut coro = attr(task, c"_coro");
        if coro.is_null() {
            return; // not an asyncio task (a custom task factory's object)
        }
        if coro == ffi::Py_None() {
            // A task that finished inside create_task (3.12+'s eager tasks) has let go of its
            // coroutine: create_task's argument, in its frame (the running one at PY_RETURN).
            ffi::Py_DECREF(coro);
            coro = create_task_argument();
            if coro.is_null() {
                return;
            }
        }
        begin(task, coro);
        ffi::Py_DECREF(coro);
    }
}

/// The `coro` argument of the running `create_task` frame (new reference), or NULL.
///
/// # Safety
/// The GIL is held.
unsafe fn create_task_argument() -> *mut ffi::PyObject {
    #[cfg(Py_3_12)]
    // SAFETY: GIL held (caller); borrowed frame; a failed lookup's exception is cleared.
    unsafe {
        let frame = ffi::PyEval_GetFrame();
        if frame.is_null() {
            return std::ptr::null_mut();
        }
        let v = ffi::PyFrame_GetVarString(frame, c"coro".as_ptr().cast_mut());
        if v.is_null() {
            ffi::PyErr_Clear();
        }
        v
    }
    #[cfg(not(Py_3_12))]
    std::ptr::null_mut() // no eager tasks before 3.12
}

/// # Safety
/// The GIL is held; `task` and `coro` are live.
unsafe fn begin(task: *mut ffi::PyObject, coro: *mut ffi::PyObject) {
    let Ok(cs) = funcs::callsites() else { return };
    // SAFETY: GIL held (caller); owned references released before returning.
    unsafe {
        let mut code = attr(coro, c"cr_code");
        if code.is_null() {
            code = attr(coro, c"gi_code"); // a generator-based coroutine
        }
        if code.is_null() {
            return;
        }
        let func = if ffi::PyCode_Check(code) == 0 {
            None
        } else {
            match funcs::known(code) {
                Some(f) => Some(f),
                None => funcs::of_code_in(code, Some(&module_of(coro))),
            }
        };
        let Some(func) = func.filter(|f| !f.excluded) else {
            ffi::Py_DECREF(code);
            return;
        };
        let id = task as usize as u64;
        funcs::ensure_defined(func);
        let name = task_name(task);
        if !cs
            .task_begin
            .record_typed((id, func.id, name.as_deref().unwrap_or("")))
        {
            ffi::Py_DECREF(code);
            return; // not recording: nothing to end
        }
        if !pending(task) {
            // Ran to its end inside create_task (an eager task): nothing left to follow.
            cs.task_end.record_typed((id, func.id));
            ffi::Py_DECREF(code);
            return;
        }
        ffi::Py_DECREF(code);
        let weak = ffi::PyWeakref_NewRef(coro, freed_callback());
        if weak.is_null() {
            ffi::PyErr_Clear();
            cs.task_end.record_typed((id, func.id)); // cannot follow it: keep the trace balanced
            return;
        }
        func.task.set(Role::Coroutine as u8);
        let Some(mut st) = state() else {
            ffi::Py_DECREF(weak);
            cs.task_end.record_typed((id, func.id)); // cannot follow it: keep the trace balanced
            return;
        };
        let key = key_of(coro);
        if let Some(old) = st.by_coro.remove(&key) {
            // Only possible if the same coroutine is given to two tasks (asyncio refuses):
            // keep the newest.
            st.by_weak.remove(&(old.weak.0 as usize));
            end(old);
        }
        st.by_weak.insert(weak as usize, key);
        st.by_coro.insert(
            key,
            Open {
                task: id,
                func,
                weak: Owned(weak),
                generation: GENERATION.load(Ordering::Relaxed),
            },
        );
    }
}

/// `task.get_name()` as a string, or `None` (no such method, it raised, or not a str).
///
/// # Safety
/// The GIL is held; `task` is live.
unsafe fn task_name(task: *mut ffi::PyObject) -> Option<String> {
    // SAFETY: GIL held (caller); owned references released; a failure's exception cleared.
    unsafe {
        let get = attr(task, c"get_name");
        if get.is_null() {
            return None;
        }
        let name = ffi::PyObject_CallNoArgs(get);
        ffi::Py_DECREF(get);
        if name.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        let s = funcs::str_of(name);
        ffi::Py_DECREF(name);
        s
    }
}

/// The key of a coroutine in [`State`]: its address on 3.11+; before, the address of its
/// frame object (the profile hook gets the frame, which
/// the coroutine keeps for its whole life on those versions, and cannot reach the coroutine).
///
/// # Safety
/// The GIL is held; `coro` is live.
unsafe fn key_of(coro: *mut ffi::PyObject) -> usize {
    #[cfg(Py_3_11)]
    return coro as usize;
    #[cfg(not(Py_3_11))]
    // SAFETY: GIL held (caller); the frame is kept alive by the coroutine, the reference
    // taken here is released.
    unsafe {
        let mut frame = attr(coro, c"cr_frame");
        if frame.is_null() {
            frame = attr(coro, c"gi_frame");
        }
        if frame.is_null() {
            return coro as usize; // never matches a frame: the weak reference ends the task
        }
        let key = frame as usize;
        ffi::Py_DECREF(frame);
        key
    }
}

/// Whether the task's `_state` is still `"PENDING"` (true when it cannot be read).
///
/// # Safety
/// The GIL is held; `task` is live.
unsafe fn pending(task: *mut ffi::PyObject) -> bool {
    // SAFETY: GIL held (caller); owned reference released.
    unsafe {
        let s = attr(task, c"_state");
        if s.is_null() {
            return true;
        }
        let p = funcs::str_of(s).is_none_or(|s| s == "PENDING");
        ffi::Py_DECREF(s);
        p
    }
}

/// The `__name__` of the globals of a coroutine's frame, or `"?"` (the coroutine has not run:
/// its function is interned here, not in a hook that sees its frame running).
///
/// # Safety
/// The GIL is held; `coro` is live.
unsafe fn module_of(coro: *mut ffi::PyObject) -> String {
    // SAFETY: GIL held (caller); owned references released.
    unsafe {
        let mut frame = attr(coro, c"cr_frame");
        if frame.is_null() {
            frame = attr(coro, c"gi_frame");
        }
        if frame.is_null() {
            return "?".into();
        }
        let g = attr(frame, c"f_globals");
        ffi::Py_DECREF(frame);
        if g.is_null() {
            return "?".into();
        }
        let name = if ffi::PyDict_Check(g) != 0 {
            funcs::str_of(ffi::PyDict_GetItemString(g, c"__name__".as_ptr()))
        } else {
            None
        };
        ffi::Py_DECREF(g);
        name.unwrap_or_else(|| "?".into())
    }
}

/// Records the end of `open`'s task (if it began in this generation) and drops its weak
/// reference.
///
/// # Safety
/// The GIL is held; `open` was removed from both maps.
unsafe fn end(open: Open) {
    if open.generation == GENERATION.load(Ordering::Relaxed) {
        if let Ok(cs) = funcs::callsites() {
            cs.task_end.record_typed((open.task, open.func.id));
        }
    }
    // SAFETY: GIL held (caller); the reference taken by `PyWeakref_NewRef`. Freeing the weak
    // reference unregisters its callback.
    unsafe { ffi::Py_DECREF(open.weak.0) };
}

/// The coroutine of key `coro` (of function `f`) finished: ends its task, if it has one open.
///
/// # Safety
/// The GIL is held.
unsafe fn finished(f: &Func, coro: usize) {
    // SAFETY: GIL held (caller); the borrow ends before `end` (which calls no Python code but
    // may free a weak reference).
    let open = unsafe {
        let Some(mut st) = state() else { return };
        match st.by_coro.get(&coro) {
            Some(o) if std::ptr::eq(o.func, f) => {}
            _ => return,
        }
        let o = st.by_coro.remove(&coro);
        if let Some(o) = &o {
            st.by_weak.remove(&(o.weak.0 as usize));
        }
        o
    };
    if let Some(o) = open {
        // SAFETY: GIL held; removed from both maps above.
        unsafe { end(o) };
    }
}

/// The weak reference's callback: the coroutine is being freed without having finished.
unsafe extern "C" fn on_freed(
    _slf: *mut ffi::PyObject,
    weak: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and the weak reference (borrowed).
    unsafe {
        let open = state().and_then(|mut st| {
            let coro = st.by_weak.remove(&(weak as usize))?;
            st.by_coro.remove(&coro)
        });
        if let Some(o) = open {
            keeping_error(|| end(o));
        }
        let n = ffi::Py_None();
        ffi::Py_INCREF(n);
        n
    }
}

/// The callback object given to every weak reference (created once, kept for the process).
///
/// # Safety
/// The GIL is held.
unsafe fn freed_callback() -> *mut ffi::PyObject {
    static CALLBACK: std::sync::atomic::AtomicPtr<ffi::PyObject> =
        std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
    // SAFETY: GIL held (caller); the method definition is leaked ('static) as CPython
    // requires, and the function object is kept for the life of the process.
    unsafe {
        let mut cb = CALLBACK.load(Ordering::Relaxed);
        if cb.is_null() {
            let def = Box::leak(Box::new(ffi::PyMethodDef {
                ml_name: c"_task_coroutine_freed".as_ptr(),
                ml_meth: ffi::PyMethodDefPointer {
                    PyCFunction: on_freed,
                },
                ml_flags: ffi::METH_O,
                ml_doc: std::ptr::null(),
            }));
            cb = ffi::PyCFunction_NewEx(def, std::ptr::null_mut(), std::ptr::null_mut());
            if cb.is_null() {
                ffi::PyErr_Clear();
            }
            CALLBACK.store(cb, Ordering::Relaxed);
        }
        cb // NULL: no callback (a coroutine freed unfinished then leaves its slice open)
    }
}

/// `PY_RETURN` of a function with a role; its arguments are (code, offset, return value).
///
/// # Safety
/// The GIL is held; `args` holds `nargs` live objects (CPython's callback contract).
#[cfg(Py_3_12)]
pub unsafe fn on_return(f: &Func, args: *mut *mut ffi::PyObject, nargs: ffi::Py_ssize_t) {
    // SAFETY: forwarded contract.
    unsafe {
        match f.task.get() {
            r if r == Role::CreateTask as u8 && nargs >= 3 => {
                keeping_error(|| loop_created(*args.add(2)))
            }
            r if r == Role::NamingCreateTask as u8 && nargs >= 3 => {
                keeping_error(|| created(*args.add(2)))
            }
            r if r == Role::Coroutine as u8 => current_finished(f),
            _ => {}
        }
    }
}

/// `PY_UNWIND` of a function with a role: a coroutine finished.
///
/// # Safety
/// The GIL is held.
#[cfg(Py_3_12)]
pub unsafe fn on_unwind(f: &Func, _args: *mut *mut ffi::PyObject, _nargs: ffi::Py_ssize_t) {
    if f.task.get() == Role::Coroutine as u8 {
        // SAFETY: forwarded contract; the exception being raised is kept.
        unsafe { keeping_error(|| current_finished(f)) };
    }
}

/// The running frame (of a coroutine of `f`) returns or unwinds for the last time.
#[cfg(Py_3_12)]
unsafe fn current_finished(f: &Func) {
    // SAFETY: GIL held (caller); borrowed frame, owned generator released.
    unsafe {
        let frame = ffi::PyEval_GetFrame();
        if frame.is_null() {
            return;
        }
        let gen = ffi::PyFrame_GetGenerator(frame);
        if gen.is_null() {
            return;
        }
        finished(f, gen as usize);
        ffi::Py_DECREF(gen);
    }
}

/// The profile hook saw `frame` (of `f`, which has a role) return `arg` (its return value, or
/// what it yielded; NULL or None when it raised).
///
/// # Safety
/// The GIL is held; `frame` is live; `arg` live or NULL.
#[cfg(not(Py_3_12))]
pub unsafe fn profile_return(f: &Func, frame: *mut ffi::PyFrameObject, arg: *mut ffi::PyObject) {
    // SAFETY: forwarded contract.
    unsafe {
        match f.task.get() {
            x if x == Role::CreateTask as u8 && !arg.is_null() => {
                keeping_error(|| loop_created(arg))
            }
            x if x == Role::NamingCreateTask as u8 && !arg.is_null() => {
                keeping_error(|| created(arg))
            }
            #[cfg(Py_3_11)]
            x if x == Role::Coroutine as u8 => {
                let gen = ffi::PyFrame_GetGenerator(frame);
                if !gen.is_null() {
                    let open = state().is_some_and(|st| st.by_coro.contains_key(&(gen as usize)));
                    if open && !suspended(gen) {
                        keeping_error(|| finished(f, gen as usize));
                    }
                    ffi::Py_DECREF(gen);
                }
            }
            // A frame that raised returns NULL to the hook; a yield never does.
            #[cfg(not(Py_3_11))]
            x if x == Role::Coroutine as u8 => {
                let key = frame as usize;
                if state().is_some_and(|st| st.by_coro.contains_key(&key))
                    && (arg.is_null() || returned(frame as *mut ffi::PyObject))
                {
                    keeping_error(|| finished(f, key));
                }
            }
            _ => {}
        }
        let _ = frame;
    }
}

/// Whether the coroutine (or generator) is suspended at a yield or await (3.11+:
/// `cr_suspended`, `gi_suspended`), rather than finishing.
///
/// # Safety
/// The GIL is held; `coro` is live.
#[cfg(all(Py_3_11, not(Py_3_12)))]
unsafe fn suspended(coro: *mut ffi::PyObject) -> bool {
    // SAFETY: forwarded contract; the exception being raised (if any) is kept.
    unsafe {
        keeping_error(|| {
            let mut s = attr(coro, c"cr_suspended");
            if s.is_null() {
                s = attr(coro, c"gi_suspended");
            }
            if s.is_null() {
                return false;
            }
            let b = ffi::PyObject_IsTrue(s) == 1;
            ffi::Py_DECREF(s);
            b
        })
    }
}

/// 3.9 and 3.10: whether the frame (of a coroutine or generator) stopped at its
/// `RETURN_VALUE` instruction, rather than at a yield or an await (`f_lasti`, as Python
/// shows it, is a byte offset into `co_code`; a suspended `await` points before its
/// `YIELD_FROM`).
///
/// # Safety
/// The GIL is held; `frame` is a live frame object.
#[cfg(not(Py_3_11))]
unsafe fn returned(frame: *mut ffi::PyObject) -> bool {
    const RETURN_VALUE: u8 = 83;
    // SAFETY: GIL held (caller); owned references released; the bytes read are within the
    // code's `co_code` (index checked).
    unsafe {
        keeping_error(|| {
            let lasti = attr(frame, c"f_lasti");
            let code = attr(frame, c"f_code");
            let bytes = if code.is_null() {
                std::ptr::null_mut()
            } else {
                attr(code, c"co_code")
            };
            let mut ret = false;
            if !lasti.is_null() && !bytes.is_null() && ffi::PyBytes_Check(bytes) != 0 {
                let i = ffi::PyLong_AsSsize_t(lasti);
                let n = ffi::PyBytes_Size(bytes);
                if i >= 0 && i < n {
                    ret = *(ffi::PyBytes_AsString(bytes) as *const u8).offset(i) == RETURN_VALUE;
                }
                ffi::PyErr_Clear();
            }
            for o in [lasti, code, bytes] {
                ffi::Py_XDECREF(o);
            }
            ret
        })
    }
}
