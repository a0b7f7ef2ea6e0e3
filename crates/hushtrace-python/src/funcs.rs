//! Interned functions: one [`Func`] per Python code object (or C function), created the first
//! time the hooks see it and found again in O(1) on every later call.
//!
//! A code object's `Func` hangs off its `co_extra` slot (the per-code scratch space CPython
//! keeps for tools like this one: `PyUnstable_Code_GetExtra`, `_PyCode_GetExtra` before 3.12),
//! so a call costs one slot load and no hash or allocation; a C function's is kept in a map
//! keyed by its `PyMethodDef` (static for the life of the process). `Func`s are leaked (a few
//! dozen bytes per distinct function, bounded by the program's code).
//!
//! Each `Func` has a small id (`u32`) that the call and return events carry; its description
//! (module, qualified name, file, line) is recorded once per process trace as a `py:function`
//! event before the first call event that uses the id ([`ensure_defined`]). After `fork()` the
//! child writes a trace of its own, so the child handler starts a new definition epoch and each
//! function is described again, lazily, in the child.
//!
//! In overwrite mode (flight recorder) the ring overwrites its oldest packets, and with them
//! the definitions recorded long ago while later calls that use their ids remain. So before
//! the API takes a snapshot or stops an overwrite session, [`redefine_all`] records every
//! function seen so far again (a state dump, as LTTng's statedump does), and the snapshot
//! or final trace describes every id it may hold.

use crate::gil::GilCell;
use hushtrace::{FieldType, Kind, Registered};
use pyo3::ffi;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicIsize, AtomicU32, Ordering};
use std::sync::OnceLock;

/// Bumped whenever the per-thread depth counters must restart from 0 (each start of function
/// tracing, and in a fork child: the frames open at the fork began in the parent's trace).
/// Read by the hooks, the launcher filter and the task follower.
pub static GENERATION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// A function's part in following tasks ([`Func::task`]; used by `crate::tasks`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// None: the hooks do nothing more.
    None = 0,
    /// `BaseEventLoop.create_task`: its return value is a new task.
    CreateTask = 1,
    /// The function of a task's coroutine: its final return or unwind may end a task.
    Coroutine = 2,
}

/// The role of a function when it is interned.
pub fn role_of(module: &str, qualname: &str) -> Role {
    // Before 3.11 code objects have no qualified name: `create_task` is unique in the module.
    if module == "asyncio.base_events"
        && (qualname == "BaseEventLoop.create_task" || qualname == "create_task")
    {
        Role::CreateTask
    } else {
        Role::None
    }
}

/// One interned function.
#[derive(Debug)]
pub struct Func {
    /// The id the call and return events carry.
    pub id: u32,
    /// Not traced (`--include`/`--exclude`, or the tracer's own code).
    pub excluded: bool,
    /// Its part in following asyncio tasks: a [`Role`] (set when interned, and
    /// when a task's coroutine of this function is first seen).
    pub task: Cell<u8>,
    /// The definition epoch in which its `py:function` event was last written.
    emitted: Cell<u32>,
    module: String,
    qualname: String,
    file: String,
    line: u32,
}

// SAFETY: `emitted`, the one field with interior mutability, is read and written only with
// the GIL held (every hook and API function of this module holds it), which serializes the
// threads that share a `Func`.
unsafe impl Sync for Func {}

/// The runtime callsites of function tracing.
#[derive(Debug)]
pub struct Callsites {
    /// `py:call` begin, field `f` (the function id).
    pub begin: Registered,
    /// `py:call` end, field `f` (so readers can check and name both ends).
    pub end: Registered,
    /// `py:function`: id → module, qualname, file, line.
    pub def: Registered,
    /// `py:task` async begin: `id` (the task), `f` (its coroutine's function).
    pub task_begin: Registered,
    /// `py:task` async end: `id`, `f` (readers match async ends by name and id).
    pub task_end: Registered,
}

static CALLSITES: OnceLock<Callsites> = OnceLock::new();

/// The callsites (registered on first use).
pub fn callsites() -> Result<&'static Callsites, hushtrace::Error> {
    if let Some(c) = CALLSITES.get() {
        return Ok(c);
    }
    let f = ("f", FieldType::U32);
    let c = Callsites {
        begin: hushtrace::register_callsite("py", "call", Kind::SpanBegin, &[f])?,
        end: hushtrace::register_callsite("py", "call", Kind::SpanEnd, &[f])?,
        def: hushtrace::register_callsite(
            "py",
            "function",
            Kind::Instant,
            &[
                f,
                ("module", FieldType::Str),
                ("qualname", FieldType::Str),
                ("file", FieldType::Str),
                ("line", FieldType::U32),
            ],
        )?,
        task_begin: hushtrace::register_callsite(
            "py",
            "task",
            Kind::AsyncBegin,
            &[("id", FieldType::U64), f],
        )?,
        task_end: hushtrace::register_callsite(
            "py",
            "task",
            Kind::AsyncEnd,
            &[("id", FieldType::U64), f],
        )?,
    };
    Ok(CALLSITES.get_or_init(|| c))
}

/// The callsites, once [`callsites`] succeeded (the hooks are installed only after it did).
#[inline]
pub fn cs() -> &'static Callsites {
    // The hooks are installed only after `callsites()` succeeded.
    CALLSITES
        .get()
        .expect("callsites registered before the hooks")
}

/// The definition epoch: bumped by every start of function tracing and in a fork child.
pub static DEF_EPOCH: AtomicU32 = AtomicU32::new(1);

/// Records `f`'s `py:function` event if it was not recorded in this epoch.
#[inline]
pub fn ensure_defined(f: &Func) {
    let epoch = DEF_EPOCH.load(Ordering::Relaxed);
    if f.emitted.get() != epoch {
        define(f, epoch);
    }
}

/// Starts a new definition epoch and records the `py:function` event of every traced
/// function seen so far in this process, on the calling thread (a state dump: see the module
/// documentation). A function whose event could not be written (the callsite disabled) is
/// described again lazily at its next call, as usual. Returns how many were written.
///
/// # Safety
/// The GIL is held.
pub unsafe fn redefine_all() -> usize {
    if CALLSITES.get().is_none() {
        return 0; // function tracing never prepared: no function was interned
    }
    let epoch = DEF_EPOCH.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    // SAFETY: GIL held (caller); `define` records an event and does not call into Python, so
    // the borrow is the only one alive.
    let t = unsafe { table() };
    let mut written = 0;
    for f in &t.funcs {
        define(f, epoch);
        written += usize::from(f.emitted.get() == epoch);
    }
    written
}

#[cold]
#[inline(never)]
fn define(f: &Func, epoch: u32) {
    let written = cs().def.record_typed((
        f.id,
        f.module.as_str(),
        f.qualname.as_str(),
        f.file.as_str(),
        f.line,
    ));
    if written {
        f.emitted.set(epoch);
    }
}

/// Include and exclude globs, applied when a function is first seen.
#[derive(Debug, Default)]
pub struct Filter {
    /// Trace only functions whose module or `module.qualname` matches one (none: all).
    pub include: Vec<String>,
    /// Never trace functions whose module or `module.qualname` matches one.
    pub exclude: Vec<String>,
}

struct Table {
    next_id: u32,
    filter: Filter,
    c_funcs: HashMap<usize, &'static Func>,
    /// Every traced (not excluded) function interned so far, for [`redefine_all`].
    funcs: Vec<&'static Func>,
}

static TABLE: GilCell<Option<Table>> = GilCell::new(None);

/// Sets the filter for functions seen from now on (and forgets the verdicts on C functions;
/// code objects seen before keep theirs).
///
/// # Safety
/// The GIL is held.
pub unsafe fn set_filter(filter: Filter) {
    // SAFETY: GIL held (caller); the borrow ends in this function.
    let t = unsafe { table() };
    t.filter = filter;
    t.c_funcs.clear();
}

/// # Safety
/// The GIL is held; the borrow is not kept across calls into Python.
unsafe fn table() -> &'static mut Table {
    // SAFETY: forwarded contract.
    let t = unsafe { TABLE.get() };
    t.get_or_insert_with(|| Table {
        next_id: 1,
        filter: Filter::default(),
        c_funcs: HashMap::new(),
        funcs: Vec::new(),
    })
}

/// `*` and `?` glob match.
pub fn glob(pat: &str, s: &str) -> bool {
    let (p, s) = (pat.as_bytes(), s.as_bytes());
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (usize::MAX, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = pi;
            mark = si;
            pi += 1;
        } else if star != usize::MAX {
            pi = star + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

fn excluded(filter: &Filter, module: &str, qualname: &str) -> bool {
    if module == "hushtrace" || module.starts_with("hushtrace.") {
        return true; // the tracer's own Python code
    }
    let full = format!("{module}.{qualname}");
    let hit = |g: &String| glob(g, module) || glob(g, &full);
    (!filter.include.is_empty() && !filter.include.iter().any(hit))
        || filter.exclude.iter().any(hit)
}

fn new_func(module: String, qualname: String, file: String, line: u32) -> &'static Func {
    // SAFETY: called from the hooks or API functions, GIL held; the borrow ends here.
    let t = unsafe { table() };
    let id = t.next_id;
    t.next_id = t.next_id.wrapping_add(1);
    let excluded = excluded(&t.filter, &module, &qualname);
    let f: &'static Func = Box::leak(Box::new(Func {
        id,
        excluded,
        task: Cell::new(role_of(&module, &qualname) as u8),
        emitted: Cell::new(0),
        module,
        qualname,
        file,
        line,
    }));
    if !excluded {
        t.funcs.push(f);
    }
    f
}

impl Func {
    /// Whether this is the code of the program's main module (`<module>` run as `__main__`).
    pub fn is_main_module(&self) -> bool {
        self.qualname == "<module>" && self.module == "__main__"
    }
}

// ---- code objects ----

#[cfg(Py_3_12)]
extern "C" {
    fn PyUnstable_Eval_RequestCodeExtraIndex(
        free: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> ffi::Py_ssize_t;
    fn PyUnstable_Code_GetExtra(
        code: *mut ffi::PyObject,
        index: ffi::Py_ssize_t,
        extra: *mut *mut c_void,
    ) -> c_int;
    fn PyUnstable_Code_SetExtra(
        code: *mut ffi::PyObject,
        index: ffi::Py_ssize_t,
        extra: *mut c_void,
    ) -> c_int;
}
#[cfg(Py_3_12)]
use {
    PyUnstable_Code_GetExtra as code_get_extra, PyUnstable_Code_SetExtra as code_set_extra,
    PyUnstable_Eval_RequestCodeExtraIndex as request_extra_index,
};

#[cfg(not(Py_3_12))]
extern "C" {
    fn _PyEval_RequestCodeExtraIndex(
        free: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> ffi::Py_ssize_t;
    fn _PyCode_GetExtra(
        code: *mut ffi::PyObject,
        index: ffi::Py_ssize_t,
        extra: *mut *mut c_void,
    ) -> c_int;
    fn _PyCode_SetExtra(
        code: *mut ffi::PyObject,
        index: ffi::Py_ssize_t,
        extra: *mut c_void,
    ) -> c_int;
}
#[cfg(not(Py_3_12))]
use {
    _PyCode_GetExtra as code_get_extra, _PyCode_SetExtra as code_set_extra,
    _PyEval_RequestCodeExtraIndex as request_extra_index,
};

static EXTRA_INDEX: AtomicIsize = AtomicIsize::new(-1);

/// Reserves the `co_extra` slot (once per process).
///
/// # Safety
/// The GIL is held.
pub unsafe fn init_code_extra() -> bool {
    if EXTRA_INDEX.load(Ordering::Relaxed) >= 0 {
        return true;
    }
    // SAFETY: GIL held (caller); no free function: the slot holds a leaked `Func`.
    let i = unsafe { request_extra_index(None) };
    if i < 0 {
        return false;
    }
    EXTRA_INDEX.store(i, Ordering::Relaxed);
    true
}

/// The function of code object `code`, interned on first sight.
///
/// # Safety
/// The GIL is held; `code` is a live code object; [`init_code_extra`] succeeded.
#[inline]
pub unsafe fn of_code(code: *mut ffi::PyObject) -> Option<&'static Func> {
    // SAFETY: forwarded contract.
    unsafe { of_code_in(code, None) }
}

/// The function of code object `code` if it was interned already (no interning).
///
/// # Safety
/// As for [`of_code`].
#[inline]
pub unsafe fn known(code: *mut ffi::PyObject) -> Option<&'static Func> {
    let idx = EXTRA_INDEX.load(Ordering::Relaxed);
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: GIL held, live code object, reserved index (caller).
    if unsafe { code_get_extra(code, idx, &mut p) } == 0 && !p.is_null() {
        // SAFETY: the slot holds only pointers to leaked `Func`s.
        return Some(unsafe { &*(p as *const Func) });
    }
    None
}

/// [`of_code`], with the module named by the caller when the code is not the running frame's
/// (an asyncio task's coroutine, seen when the task is created).
///
/// # Safety
/// As for [`of_code`].
#[inline]
pub unsafe fn of_code_in(code: *mut ffi::PyObject, module: Option<&str>) -> Option<&'static Func> {
    let idx = EXTRA_INDEX.load(Ordering::Relaxed);
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: GIL held, live code object, reserved index (caller).
    if unsafe { code_get_extra(code, idx, &mut p) } == 0 && !p.is_null() {
        // SAFETY: the slot holds only pointers to leaked `Func`s, set below.
        return Some(unsafe { &*(p as *const Func) });
    }
    // SAFETY: forwarded contract.
    unsafe { intern_code(code, idx, module) }
}

/// Keeps the exception being raised (if any) across `f`, which may clear it.
///
/// # Safety
/// The GIL is held.
pub(crate) unsafe fn keeping_error<R>(f: impl FnOnce() -> R) -> R {
    let (mut t, mut v, mut tb) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    // SAFETY: GIL held (caller); takes the pending exception and gives it back. (Fetch and
    // Restore exist on every supported version; their 3.12 replacements do not on 3.9-3.11.)
    #[allow(deprecated)]
    unsafe {
        ffi::PyErr_Fetch(&mut t, &mut v, &mut tb)
    };
    let r = f();
    // SAFETY: as above.
    #[allow(deprecated)]
    unsafe {
        ffi::PyErr_Restore(t, v, tb)
    };
    r
}

#[cold]
#[inline(never)]
unsafe fn intern_code(
    code: *mut ffi::PyObject,
    idx: ffi::Py_ssize_t,
    module: Option<&str>,
) -> Option<&'static Func> {
    // The reads below may fail and clear the error indicator: keep the pending exception (a
    // generator resumed by `throw()` has one) and put it back.
    // SAFETY: GIL held (caller); forwarded contract.
    unsafe { keeping_error(|| intern_code_inner(code, idx, module)) }
}

unsafe fn intern_code_inner(
    code: *mut ffi::PyObject,
    idx: ffi::Py_ssize_t,
    module: Option<&str>,
) -> Option<&'static Func> {
    // SAFETY: GIL held and live object (caller); attribute reads of a code object.
    let (qualname, file, line) = unsafe {
        #[cfg(Py_3_11)]
        let q = attr_str(code, c"co_qualname");
        #[cfg(not(Py_3_11))]
        let q = attr_str(code, c"co_name");
        (
            q,
            attr_str(code, c"co_filename"),
            attr_int(code, c"co_firstlineno"),
        )
    };
    let module = match module {
        Some(m) => m.to_owned(),
        // SAFETY: GIL held; the globals of the running frame (the one that runs `code` when a
        // hook sees it first), borrowed.
        None => unsafe { module_of_current_frame() },
    };
    let f = new_func(module, qualname, file, line);
    // SAFETY: GIL held, live code object, reserved index; the pointer is to a leaked `Func`.
    if unsafe { code_set_extra(code, idx, f as *const Func as *mut c_void) } != 0 {
        // SAFETY: GIL held; a failed set leaves an exception to clear.
        unsafe { ffi::PyErr_Clear() };
    }
    Some(f)
}

/// `__name__` of the running frame's globals, or `"?"`.
unsafe fn module_of_current_frame() -> String {
    // SAFETY: GIL held (caller); borrowed reference or NULL.
    let g = unsafe { ffi::PyEval_GetGlobals() };
    if g.is_null() {
        return "?".into();
    }
    // SAFETY: `g` is a dict (frame globals); borrowed result or NULL, no exception set.
    let name = unsafe { ffi::PyDict_GetItemString(g, c"__name__".as_ptr()) };
    // SAFETY: GIL held; `name` borrowed or NULL.
    unsafe { str_of(name) }.unwrap_or_else(|| "?".into())
}

/// The object's attribute `name` as a string ("?" on failure).
unsafe fn attr_str(o: *mut ffi::PyObject, name: &CStr) -> String {
    // SAFETY: GIL held, live object (caller); new reference or NULL.
    let v = unsafe { ffi::PyObject_GetAttrString(o, name.as_ptr()) };
    // SAFETY: `v` is owned or NULL.
    let s = unsafe { str_of(v) };
    // SAFETY: `v` is owned or NULL.
    unsafe { ffi::Py_XDECREF(v) };
    if s.is_none() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
    }
    s.unwrap_or_else(|| "?".into())
}

unsafe fn attr_int(o: *mut ffi::PyObject, name: &CStr) -> u32 {
    // SAFETY: GIL held, live object (caller); new reference or NULL.
    let v = unsafe { ffi::PyObject_GetAttrString(o, name.as_ptr()) };
    if v.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return 0;
    }
    // SAFETY: `v` is a live object.
    let n = unsafe { ffi::PyLong_AsLong(v) };
    // SAFETY: owned reference.
    unsafe { ffi::Py_DECREF(v) };
    if n < 0 {
        // SAFETY: GIL held (an error may be set).
        unsafe { ffi::PyErr_Clear() };
        return 0;
    }
    n as u32
}

/// A `str` object's text, or `None` (NULL, not a str).
pub unsafe fn str_of(o: *mut ffi::PyObject) -> Option<String> {
    // SAFETY: GIL held (caller); NULL checked; type check before the UTF-8 read.
    unsafe {
        if o.is_null() || ffi::PyUnicode_Check(o) == 0 {
            return None;
        }
        let mut n: ffi::Py_ssize_t = 0;
        let p = ffi::PyUnicode_AsUTF8AndSize(o, &mut n);
        if p.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        let b = std::slice::from_raw_parts(p as *const u8, n as usize);
        Some(String::from_utf8_lossy(b).into_owned())
    }
}

// ---- C functions ----

/// The function of a builtin callable (`builtin_function_or_method` or `method_descriptor`),
/// interned by its `PyMethodDef`; `None` for other callables.
///
/// # Safety
/// The GIL is held; `callable` is a live object.
#[inline]
pub unsafe fn of_c_callable(callable: *mut ffi::PyObject) -> Option<&'static Func> {
    // SAFETY: GIL held, live object (caller).
    let def = unsafe { method_def(callable) }?;
    // SAFETY: GIL held; the borrow ends before any call into Python (intern_c does not call
    // Python code that could re-enter the hooks: it reads type and module names only).
    let t = unsafe { table() };
    if let Some(f) = t.c_funcs.get(&(def as usize)) {
        return Some(f);
    }
    // SAFETY: forwarded contract; `def` is the callable's live method definition.
    let f = unsafe { intern_c(callable, def) };
    // SAFETY: as above; the previous borrow ended.
    unsafe { table() }.c_funcs.insert(def as usize, f);
    Some(f)
}

unsafe fn method_def(callable: *mut ffi::PyObject) -> Option<*mut ffi::PyMethodDef> {
    // SAFETY: GIL held, live object (caller); layouts of the two builtin types checked by
    // exact type test first.
    unsafe {
        let ty = ffi::Py_TYPE(callable);
        if ty == std::ptr::addr_of_mut!(ffi::PyCFunction_Type) {
            let m = (*(callable as *mut ffi::PyCFunctionObject)).m_ml;
            return (!m.is_null()).then_some(m);
        }
        if ty == std::ptr::addr_of_mut!(ffi::PyMethodDescr_Type) {
            let m = (*(callable as *mut ffi::PyMethodDescrObject)).d_method;
            return (!m.is_null()).then_some(m);
        }
    }
    None
}

#[cold]
#[inline(never)]
unsafe fn intern_c(callable: *mut ffi::PyObject, def: *mut ffi::PyMethodDef) -> &'static Func {
    // SAFETY: GIL held, live objects (caller); exact types checked by `method_def`.
    unsafe {
        let name = CStr::from_ptr((*def).ml_name)
            .to_string_lossy()
            .into_owned();
        let ty = ffi::Py_TYPE(callable);
        let owner = if ty == std::ptr::addr_of_mut!(ffi::PyCFunction_Type) {
            let o = callable as *mut ffi::PyCFunctionObject;
            let from_module = str_of((*o).m_module);
            match from_module {
                Some(m) => m,
                None if !(*o).m_self.is_null() && ffi::PyModule_Check((*o).m_self) == 0 => {
                    type_name((*o).m_self)
                }
                None => "builtins".into(),
            }
        } else {
            let d = callable as *mut ffi::PyMethodDescrObject;
            let t = (*d).d_common.d_type;
            if t.is_null() {
                "?".into()
            } else {
                CStr::from_ptr((*t).tp_name).to_string_lossy().into_owned()
            }
        };
        new_func(owner, name, "<built-in>".into(), 0)
    }
}

unsafe fn type_name(o: *mut ffi::PyObject) -> String {
    // SAFETY: GIL held, live object (caller); tp_name is a NUL-terminated static string.
    unsafe { CStr::from_ptr((*ffi::Py_TYPE(o)).tp_name) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::glob;
    #[test]
    fn globs() {
        assert!(glob("json*", "json.decoder"));
        assert!(glob("*.fib", "__main__.fib"));
        assert!(!glob("json", "json.decoder"));
        assert!(glob("a?c", "abc"));
    }
}
