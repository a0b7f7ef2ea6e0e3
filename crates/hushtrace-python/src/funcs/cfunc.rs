//! C functions (`--c-calls`): a builtin callable's [`Func`], interned by its `PyMethodDef`.

use super::code::str_of;
use super::{new_func, table, Func};
use pyo3::ffi;
use std::ffi::CStr;

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
        new_func(owner, name, "<built-in>".into(), 0, false)
    }
}

unsafe fn type_name(o: *mut ffi::PyObject) -> String {
    // SAFETY: GIL held, live object (caller); tp_name is a NUL-terminated static string.
    unsafe { CStr::from_ptr((*ffi::Py_TYPE(o)).tp_name) }
        .to_string_lossy()
        .into_owned()
}
