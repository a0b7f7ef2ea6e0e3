//! Function tracing's switches, called by `hushtrace._functions`: prepare (callsites,
//! `co_extra` slot, options, a new generation, the calling thread's ring faulted in), the launcher's wait for the main module, the
//! hooks' registration (`sys.monitoring` callbacks on 3.12+, the profile hook below), the end
//! of the frames still open, and the SIGTERM safety net that ends them when the program is
//! killed ([`crate::term`]).

use crate::{err, funcs, hook, install_atfork, launch, term};
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use std::sync::atomic::Ordering;

/// Prepares function tracing: registers the callsites, reserves the `co_extra` slot, sets the
/// options, and starts a new generation (depth counters restart, functions are described
/// again).
#[pyfunction]
#[pyo3(signature = (c_calls = false, max_depth = None, include = Vec::new(), exclude = Vec::new(), include_files = Vec::new(), exclude_files = Vec::new(), ignore_frozen = false))]
#[allow(clippy::too_many_arguments)]
fn _prepare_functions(
    _py: Python<'_>,
    c_calls: bool,
    max_depth: Option<u32>,
    include: Vec<String>,
    exclude: Vec<String>,
    include_files: Vec<String>,
    exclude_files: Vec<String>,
    ignore_frozen: bool,
) -> PyResult<()> {
    funcs::callsites().map_err(err)?;
    // SAFETY: GIL held (the `Python` token).
    if !unsafe { funcs::init_code_extra() } {
        return Err(PyRuntimeError::new_err(
            "no free co_extra slot for hushtrace's function table",
        ));
    }
    // SAFETY: GIL held.
    unsafe {
        funcs::set_filter(funcs::Filter {
            include,
            exclude,
            include_files,
            exclude_files,
            ignore_frozen,
        })
    };
    hook::C_CALLS.store(c_calls, Ordering::Relaxed);
    hook::MAX_DEPTH.store(max_depth.unwrap_or(u32::MAX), Ordering::Relaxed);
    hook::GENERATION.fetch_add(1, Ordering::Relaxed);
    funcs::DEF_EPOCH.fetch_add(1, Ordering::Relaxed);
    install_atfork();
    prefault_ring();
    Ok(())
}

/// Faults in every page of the calling thread's ring now, so that the program's first calls
/// (262,144 of them fill the default 4 MB ring once) do not each take a page fault per 4 KB
/// written (about 1 µs each; 0.6 ms in the first `fib(24)`). Done through the runtime's
/// no-syscall mode, entered and left at once: entering touches the ring's pages (and locks
/// them in memory where the process may, and asks for huge pages), as it does for a
/// real-time thread. A thread already in the mode is left as it is; without a session there
/// is no ring to touch.
fn prefault_ring() {
    if hushtrace::thread_in_no_syscall() {
        return;
    }
    hushtrace::init_thread();
    drop(hushtrace::NoSyscallGuard::new());
}

/// With `on`, function tracing records nothing before the program's main module starts
/// ([`launch`]): `python -m hushtrace run` (`launcher`: nor on its thread after it returned),
/// and interpreter start-up (`hushtrace record`, traced children). `False` when the program
/// has returned.
#[pyfunction]
#[pyo3(signature = (on, launcher = true))]
fn _await_main(on: bool, launcher: bool) {
    let state = match (on, launcher) {
        (false, _) => launch::OFF,
        (true, true) => launch::AWAITING_MAIN,
        (true, false) => launch::AWAITING_MAIN_ONLY,
    };
    launch::STATE.store(state, Ordering::Relaxed);
}

/// Stops recording C calls (before the hooks are removed: the call that removes them would
/// otherwise begin a slice whose end is never seen).
#[pyfunction]
fn _stop_c_calls() {
    hook::C_CALLS.store(false, Ordering::Relaxed);
}

/// Puts the SIGTERM safety net ([`term`]) under the Python SIGTERM handler just installed;
/// also in a fork child. Returns whether it is in place.
#[pyfunction]
fn _sigterm_net() -> PyResult<bool> {
    term::install().map(|()| true).map_err(|e| {
        pyo3::exceptions::PyOSError::new_err(format!("hushtrace: SIGTERM watcher: {e}"))
    })
}

/// The Python SIGTERM handler started ([`term::handler_started`]).
#[pyfunction]
fn _sigterm_handler_started() {
    term::handler_started();
}

/// Ends this thread's recorded frames still open (see [`hook::close_open_frames`]).
#[pyfunction]
fn _close_open_frames(_py: Python<'_>) {
    if funcs_ready().is_some() {
        // SAFETY: GIL held (the `Python` token).
        unsafe { hook::close_open_frames() };
    }
}

/// Whether the hooks find a code object's function by reading its `co_extra` field directly
/// (the offset probed when function tracing was first prepared), not through the API call.
#[pyfunction]
fn _code_extra_direct() -> bool {
    funcs::extra_read_directly()
}

fn funcs_ready() -> Option<&'static funcs::Callsites> {
    funcs::callsites().ok()
}

/// Adds a `METH_FASTCALL` builtin function named `name` calling `f` (the profile hook's
/// helpers below 3.12).
#[cfg(not(Py_3_12))]
fn add_fastcall(
    m: &Bound<'_, PyModule>,
    name: &'static std::ffi::CStr,
    f: unsafe extern "C" fn(
        *mut ffi::PyObject,
        *mut *mut ffi::PyObject,
        ffi::Py_ssize_t,
    ) -> *mut ffi::PyObject,
) -> PyResult<()> {
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunctionFast: f },
        ml_flags: ffi::METH_FASTCALL,
        ml_doc: std::ptr::null(),
    }));
    // SAFETY: GIL held (module init); `def` is leaked ('static) as CPython requires.
    let obj = unsafe {
        let p = ffi::PyCFunction_NewEx(def, std::ptr::null_mut(), std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(m.py(), p)?
    };
    m.add(name.to_str().expect("ASCII name"), obj)
}

/// Adds a `sys.monitoring` callback object named `name` calling `f` ([`hook::callback`]).
#[cfg(Py_3_12)]
fn add_callback(
    m: &Bound<'_, PyModule>,
    name: &'static std::ffi::CStr,
    f: ffi::vectorcallfunc,
) -> PyResult<()> {
    // SAFETY: GIL held (module init); a new reference or NULL with an exception.
    let obj = unsafe { Bound::from_owned_ptr_or_err(m.py(), hook::callback(f))? };
    m.add(name.to_str().expect("ASCII name"), obj)
}

#[cfg(Py_3_12)]
#[pyfunction]
fn _set_disable(obj: &Bound<'_, PyAny>) {
    // SAFETY: GIL held (a `Bound`), live object.
    unsafe { hook::set_disable(obj.as_ptr()) };
}

/// Installs (`on`: returns how many other profilers it chained) or removes (returns on how
/// many threads another profiler had taken the slot over) the profile hook on every thread.
#[cfg(not(Py_3_12))]
#[pyfunction]
fn _profile_all_threads(_py: Python<'_>, on: bool) -> PyResult<usize> {
    // SAFETY: GIL held (the `Python` token).
    unsafe { hook::set_all_threads(on) }
        .map_err(|e| PyRuntimeError::new_err(e.to_string_lossy().into_owned()))
}

/// Adds function tracing's switches and hooks to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_prepare_functions, m)?)?;
    m.add_function(wrap_pyfunction!(_await_main, m)?)?;
    m.add_function(wrap_pyfunction!(_close_open_frames, m)?)?;
    m.add_function(wrap_pyfunction!(_code_extra_direct, m)?)?;
    m.add_function(wrap_pyfunction!(_stop_c_calls, m)?)?;
    m.add_function(wrap_pyfunction!(_sigterm_net, m)?)?;
    m.add_function(wrap_pyfunction!(_sigterm_handler_started, m)?)?;
    #[cfg(Py_3_12)]
    {
        m.add("MONITORING", true)?;
        m.add_function(wrap_pyfunction!(_set_disable, m)?)?;
        add_callback(m, c"_mon_py_start", hook::py_start)?;
        add_callback(m, c"_mon_py_resume", hook::py_resume)?;
        add_callback(m, c"_mon_py_throw", hook::py_throw)?;
        add_callback(m, c"_mon_py_return", hook::py_return)?;
        add_callback(m, c"_mon_py_yield", hook::py_yield)?;
        add_callback(m, c"_mon_py_unwind", hook::py_unwind)?;
        add_callback(m, c"_mon_call", hook::call)?;
        add_callback(m, c"_mon_c_return", hook::c_return)?;
        add_callback(m, c"_mon_c_raise", hook::c_raise)?;
    }
    #[cfg(not(Py_3_12))]
    {
        m.add("MONITORING", false)?;
        m.add_function(wrap_pyfunction!(_profile_all_threads, m)?)?;
        add_fastcall(m, c"_profile_thread_bootstrap", hook::thread_bootstrap)?;
        add_fastcall(m, c"_setprofile", hook::setprofile)?;
        add_fastcall(m, c"_getprofile", hook::getprofile)?;
    }
    Ok(())
}
