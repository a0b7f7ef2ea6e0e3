//! Code objects: a code object's [`Func`] hangs off its `co_extra` slot (see the parent
//! module's documentation), interned from the code's attributes the first time a hook sees it.

use super::{new_func, Func};
use pyo3::ffi;
use std::ffi::{c_void, CStr};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

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

/// Byte offset of the `co_extra` field in a code object, found by [`find_extra_offset`]; 0:
/// not found, the hooks go through the API call.
static EXTRA_OFFSET: AtomicUsize = AtomicUsize::new(0);

/// Reserves the `co_extra` slot (once per process) and finds where a code object keeps it.
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
    // SAFETY: GIL held; the index is reserved.
    EXTRA_OFFSET.store(unsafe { find_extra_offset(i) }, Ordering::Relaxed);
    true
}

/// The byte offset of `co_extra` in `PyCodeObject` (0: not found). The field is read
/// directly on every call, which costs a few instructions where the API call
/// (`PyUnstable_Code_GetExtra`) costs about 30. Its offset differs between CPython versions
/// and is not hard-coded: a scratch code object is read word by word before and after the
/// API sets our slot in it; the one word that changed must point to the extra block
/// (`_PyCodeObjectExtra`: its length, then one pointer per index) that holds the value set.
/// Anything else (no word, or several, changed) leaves the API in use.
///
/// # Safety
/// The GIL is held; `idx` is a reserved index.
unsafe fn find_extra_offset(idx: ffi::Py_ssize_t) -> usize {
    const WORD: usize = std::mem::size_of::<usize>();
    // SAFETY: GIL held (caller). A new code object, released at the end; its words are read
    // within the type's fixed size (`tp_basicsize`, inside the allocation); the changed word
    // is dereferenced only after the API made it the extra block, whose length is checked
    // before its entry is read.
    unsafe {
        let code = ffi::PyCode_NewEmpty(c"<hushtrace>".as_ptr(), c"probe".as_ptr(), 1);
        if code.is_null() {
            ffi::PyErr_Clear();
            return 0;
        }
        let obj = code as *mut ffi::PyObject;
        let words = (*ffi::Py_TYPE(obj)).tp_basicsize as usize / WORD;
        let w = code as *const usize;
        let before: Vec<usize> = (0..words).map(|i| *w.add(i)).collect();
        let sentinel = &EXTRA_OFFSET as *const AtomicUsize as *mut c_void;
        let mut found = 0;
        if code_set_extra(obj, idx, sentinel) == 0 {
            let changed: Vec<usize> = (1..words).filter(|&i| *w.add(i) != before[i]).collect();
            if let [i] = changed[..] {
                let block = *w.add(i) as *const ffi::Py_ssize_t;
                if !block.is_null()
                    && *block > idx
                    && *(block.add(1 + idx as usize) as *const *mut c_void) == sentinel
                {
                    found = i * WORD;
                }
            }
            if code_set_extra(obj, idx, std::ptr::null_mut()) != 0 {
                ffi::PyErr_Clear();
            }
        } else {
            ffi::PyErr_Clear();
        }
        ffi::Py_DECREF(obj);
        found
    }
}

/// Whether the hooks read `co_extra` directly ([`find_extra_offset`] found the field), not
/// through the API call.
pub fn extra_read_directly() -> bool {
    EXTRA_OFFSET.load(Ordering::Relaxed) != 0
}

/// The value of our `co_extra` slot in `code` (null when unset).
///
/// # Safety
/// The GIL is held; `code` is a live object; [`init_code_extra`] succeeded.
#[inline(always)]
unsafe fn extra(code: *mut ffi::PyObject, idx: ffi::Py_ssize_t) -> *mut c_void {
    let off = EXTRA_OFFSET.load(Ordering::Relaxed);
    // SAFETY: GIL held, live object (caller). With the offset found, an object of the exact
    // code type has its `co_extra` there: null, or the extra block, whose length is checked
    // before the entry is read.
    unsafe {
        if off != 0 && ffi::Py_TYPE(code) == std::ptr::addr_of_mut!(ffi::PyCode_Type) {
            let block = *((code as *const u8).add(off) as *const *const ffi::Py_ssize_t);
            if block.is_null() || *block <= idx {
                return std::ptr::null_mut();
            }
            return *(block.add(1 + idx as usize) as *const *mut c_void);
        }
        let mut p: *mut c_void = std::ptr::null_mut();
        if code_get_extra(code, idx, &mut p) != 0 {
            ffi::PyErr_Clear();
            return std::ptr::null_mut();
        }
        p
    }
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
    // SAFETY: GIL held, live code object, reserved index (caller).
    let p = unsafe { extra(code, idx) };
    // SAFETY: the slot holds only pointers to leaked `Func`s.
    (!p.is_null()).then(|| unsafe { &*(p as *const Func) })
}

/// [`of_code`], with the module named by the caller when the code is not the running frame's
/// (an asyncio task's coroutine, seen when the task is created).
///
/// # Safety
/// As for [`of_code`].
#[inline]
pub unsafe fn of_code_in(code: *mut ffi::PyObject, module: Option<&str>) -> Option<&'static Func> {
    let idx = EXTRA_INDEX.load(Ordering::Relaxed);
    // SAFETY: GIL held, live code object, reserved index (caller).
    let p = unsafe { extra(code, idx) };
    if !p.is_null() {
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
    let f = new_func(module, qualname, file, line, true);
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
