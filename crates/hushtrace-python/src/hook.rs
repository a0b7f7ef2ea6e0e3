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

pub use crate::funcs::GENERATION;
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
        if n == 0
            && crate::launch::STATE.load(Ordering::Relaxed) != 0
            && !crate::launch::admit(f, generation)
        {
            return; // not the program's frame (before its main module): not counted
        }
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
mod monitoring;

/// Refuses an interpreter the hooks are not made for: a free-threaded build
/// (`Py_GIL_DISABLED`, with or without `PYTHON_GIL=0`). The function table, the per-thread
/// depth counters' reset and the profile-slot bookkeeping rely on the GIL serialising every
/// call into the extension.
pub fn check_interpreter() -> Result<(), String> {
    if cfg!(Py_GIL_DISABLED) {
        return Err(
            "hushtrace does not support free-threaded CPython builds (Py_GIL_DISABLED, \
                    e.g. python3.13t): its function hooks rely on the GIL; use a standard build"
                .into(),
        );
    }
    Ok(())
}

#[cfg(not(Py_3_12))]
pub use profile::*;

#[cfg(not(Py_3_12))]
mod profile;
