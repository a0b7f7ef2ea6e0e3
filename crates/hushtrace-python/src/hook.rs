//! The per-call hooks: `sys.monitoring` callbacks (3.12+) and the C profile hook (below).
//!
//! Both come down to [`enter`] and [`exit`]: a `co_extra` load to find the interned function,
//! a per-thread depth counter, and one `py:call` begin or end through the runtime's record
//! path for fixed events (no lock, no allocation, no system call), the counter and the
//! thread's ring found with one thread-local lookup. A generator or coroutine is exited
//! at each `yield`/`await` and entered again when resumed, so a suspended one is not one long
//! slice. An exception unwinding through a frame exits it (`PY_UNWIND`, or the profile hook's
//! return). Ends whose begin this thread never recorded (frames that were running when tracing
//! started, or that began in the parent before `fork()`) are not written, so every thread's
//! begins and ends balance.

use crate::funcs::{self, Func};
use hushtrace::__private as fast;
use pyo3::ffi;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

pub use crate::funcs::GENERATION;
/// `--max-stack-depth` (u32::MAX: none).
pub static MAX_DEPTH: AtomicU32 = AtomicU32::new(u32::MAX);
/// Record C function calls (`--c-calls`).
pub static C_CALLS: AtomicBool = AtomicBool::new(false);

/// The per-thread depth counter is kept in the runtime's thread context as the binding's word
/// (`hushtrace::__private::FastThread`), so a callback finds it and the thread's ring with one
/// thread-local lookup: the generation in the high half, the depth of recorded-or-skipped-by-
/// depth frames in the low half. `word - base(generation)` is the depth when the word is of
/// this generation, and at least 2^32 when it is of another one.
#[inline(always)]
fn base(generation: u32) -> u64 {
    u64::from(generation) << 32
}

/// A function starts or resumes on this thread.
#[inline(always)]
pub fn enter(f: &Func) {
    let generation = GENERATION.load(Ordering::Relaxed);
    if fast::with_thread(
        #[inline(always)]
        |t| enter_on(t, f, generation),
    )
    .is_none()
    {
        enter_registering(f, generation);
    }
}

/// [`enter`] on a thread the runtime does not know yet (its first event): registers it.
#[cold]
#[inline(never)]
fn enter_registering(f: &Func, generation: u32) {
    if fast::register_thread() {
        let _ = fast::with_thread(|t| enter_on(t, f, generation));
    }
}

#[inline(always)]
fn enter_on(t: &fast::FastThread<'_>, f: &Func, generation: u32) {
    let base = base(generation);
    let rel = t.word().wrapping_sub(base);
    let n = if rel >> 32 == 0 { rel as u32 } else { 0 };
    if n == 0
        && crate::launch::STATE.load(Ordering::Relaxed) != 0
        && !crate::launch::admit(f, generation)
    {
        return; // not the program's frame (before its main module): not counted
    }
    t.set_word(base + u64::from(n) + 1);
    if n < MAX_DEPTH.load(Ordering::Relaxed) {
        funcs::ensure_defined(f);
        t.record_u32(&funcs::cs().begin, f.id);
    }
}

/// A function returns, yields or unwinds on this thread.
#[inline(always)]
pub fn exit(f: &Func) {
    let generation = GENERATION.load(Ordering::Relaxed);
    // A thread the runtime does not know recorded no begin: nothing to end.
    let _ = fast::with_thread(
        #[inline(always)]
        |t| exit_on(t, f, generation),
    );
}

#[inline(always)]
fn exit_on(t: &fast::FastThread<'_>, f: &Func, generation: u32) {
    let w = t.word();
    // The depth less one, if the word is of this generation and the depth not 0.
    let below = w.wrapping_sub(base(generation)).wrapping_sub(1);
    if below >> 32 != 0 {
        return; // its begin was not recorded in this trace
    }
    t.set_word(w - 1);
    if (below as u32) < MAX_DEPTH.load(Ordering::Relaxed) {
        t.record_u32(&funcs::cs().end, f.id);
    }
}

/// A function is unwound by the exception `exc` (NULL: not known) on this thread: [`exit`],
/// with a `py:exception` event recorded just before its end when `--exceptions` is on and the
/// end is recorded ([`crate::exceptions`]).
///
/// # Safety
/// The GIL is held; `exc` is a live exception object or NULL.
#[inline(always)]
pub unsafe fn unwind(f: &Func, exc: *mut ffi::PyObject) {
    if crate::exceptions::ENABLED.load(Ordering::Relaxed) {
        let generation = GENERATION.load(Ordering::Relaxed);
        let ends = fast::with_thread(|t| {
            let below = t.word().wrapping_sub(base(generation)).wrapping_sub(1);
            below >> 32 == 0 && (below as u32) < MAX_DEPTH.load(Ordering::Relaxed)
        });
        if ends == Some(true) {
            // SAFETY: forwarded contract.
            unsafe { crate::exceptions::record(f.id, exc) };
        }
    }
    exit(f);
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
