//! How every C function fails: an error code (`HT_ERR_*`), the message of the calling thread's
//! last failed call (`ht_last_error`), panics caught at the boundary ([`guard`]), and C string
//! arguments checked for NULL ([`arg`]).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `HT_ERR_INVALID`: a NULL or malformed argument.
pub(crate) const ERR_INVALID: c_int = -1;
/// `HT_ERR_FAILED`: the runtime refused.
pub(crate) const ERR_FAILED: c_int = -2;
/// `HT_ERR_PANIC`: an internal error.
pub(crate) const ERR_PANIC: c_int = -3;

thread_local! {
    /// The message of this thread's last failed call, what `ht_last_error` returns.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Makes `msg` (NUL bytes removed) this thread's last error.
pub(crate) fn set_error(msg: impl Into<String>) {
    let mut m = msg.into().into_bytes();
    m.retain(|&b| b != 0);
    let c = CString::new(m).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = Some(c));
}

/// Makes `e` this thread's last error and returns `HT_ERR_FAILED`: a call the runtime refused.
pub(crate) fn failed(e: impl std::fmt::Display) -> c_int {
    set_error(e.to_string());
    ERR_FAILED
}

/// Runs `f`, turning a panic into `on_panic` and a last-error message.
///
/// `#[inline]`: the recorders (`record.rs`) call it on every enabled C tracepoint. Without the
/// attribute a release build (16 codegen units) may place it in another unit than its caller,
/// where it is not inlined: each recorder then calls it with a closure, the call the recorders
/// exist to avoid (docs/BENCHMARKS.md §4).
#[inline]
pub(crate) fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            set_error(format!("internal error (panic): {what}"));
            on_panic
        }
    }
}

/// A C string argument as bytes; NULL is an error naming the argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn arg<'a>(p: *const c_char, what: &str) -> Result<&'a [u8], c_int> {
    if p.is_null() {
        set_error(format!("{what} is NULL"));
        return Err(ERR_INVALID);
    }
    // SAFETY: not NULL, and the caller promises a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// `const char *ht_last_error(void)`.
#[no_mangle]
pub extern "C" fn ht_last_error() -> *const c_char {
    guard(c"".as_ptr(), || {
        LAST_ERROR
            .try_with(|e| e.borrow().as_ref().map_or(c"".as_ptr(), |c| c.as_ptr()))
            .unwrap_or(c"".as_ptr())
    })
}
