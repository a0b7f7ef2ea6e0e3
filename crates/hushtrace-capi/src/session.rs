//! Sessions from C: `ht_session_start`, `ht_session_append`, `ht_session_stop` over leaked,
//! listed handles ([`HtSession`]), and `ht_start_from_env`.

use crate::error::{arg, failed, guard, set_error, ERR_INVALID, ERR_PANIC};
use std::ffi::{c_char, c_int};
use std::ptr;

/// `ht_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HtStats {
    /// Events written.
    pub events_written: u64,
    /// Events discarded (full buffers, ...).
    pub events_discarded: u64,
}

const _: () = assert!(std::mem::size_of::<HtStats>() == 16);

/// `ht_session`: a session handle. Handles are never freed (a few bytes per session started)
/// and every one is listed in `HANDLES`: a second `ht_session_stop` of the same handle finds
/// it stopped and returns an error, and a pointer that is not a handle is refused before it
/// is read, instead of a double free.
#[derive(Debug)]
pub struct HtSession {
    /// The session until it is stopped.
    session: std::sync::Mutex<Option<hushtrace::Session>>,
}

/// Every handle `ht_session_start`/`ht_session_append` returned.
static HANDLES: std::sync::Mutex<Vec<&'static HtSession>> = std::sync::Mutex::new(Vec::new());

/// The handle `s` points to, if it is one.
fn handle(s: *const HtSession) -> Option<&'static HtSession> {
    HANDLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .find(|h| ptr::eq(*h, s))
}

/// A new handle for `session`.
fn new_handle(session: hushtrace::Session) -> *mut HtSession {
    let h: &'static HtSession = Box::leak(Box::new(HtSession {
        session: std::sync::Mutex::new(Some(session)),
    }));
    HANDLES.lock().unwrap_or_else(|e| e.into_inner()).push(h);
    h as *const HtSession as *mut HtSession
}

/// `ht_session *ht_session_start(const char *dir)`.
///
/// # Safety
/// `dir` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ht_session_start(dir: *const c_char) -> *mut HtSession {
    // SAFETY: forwarded contract.
    unsafe { start(dir, false) }
}

/// `ht_session *ht_session_append(const char *dir)`.
///
/// # Safety
/// `dir` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ht_session_append(dir: *const c_char) -> *mut HtSession {
    // SAFETY: forwarded contract.
    unsafe { start(dir, true) }
}

/// What `ht_session_start` (`append` false) and `ht_session_append` share.
///
/// # Safety
/// `dir` is NULL or a NUL-terminated string.
unsafe fn start(dir: *const c_char, append: bool) -> *mut HtSession {
    guard(ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        let Ok(dir) = (unsafe { arg(dir, "the output directory") }) else {
            return ptr::null_mut();
        };
        if dir.is_empty() {
            set_error("the output directory is empty");
            return ptr::null_mut();
        }
        use std::os::unix::ffi::OsStrExt;
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(dir));
        match hushtrace::Session::builder()
            .output_dir(path)
            .append(append)
            .start()
        {
            Ok(s) => new_handle(s),
            Err(e) => {
                set_error(e.to_string());
                ptr::null_mut()
            }
        }
    })
}

/// `int ht_session_stop(ht_session *s, ht_stats *out)`.
///
/// # Safety
/// `out` is NULL or writable. `s` may be anything: a pointer that is not a handle from
/// `ht_session_start`/`ht_session_append`, or a handle stopped already, is an error
/// (`HT_ERR_INVALID`), never read or freed.
#[no_mangle]
pub unsafe extern "C" fn ht_session_stop(s: *mut HtSession, out: *mut HtStats) -> c_int {
    guard(ERR_PANIC, || {
        if s.is_null() {
            set_error("the session is NULL");
            return ERR_INVALID;
        }
        let Some(h) = handle(s) else {
            set_error("not a session handle from ht_session_start or ht_session_append");
            return ERR_INVALID;
        };
        let Some(session) = h.session.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            set_error("this session was stopped already");
            return ERR_INVALID;
        };
        let put = |st: &hushtrace::Stats| {
            if !out.is_null() {
                // SAFETY: the caller promises `out` is writable when not NULL.
                unsafe {
                    out.write(HtStats {
                        events_written: st.events_written,
                        events_discarded: st.events_discarded,
                    })
                };
            }
        };
        match session.stop() {
            Ok(st) => {
                put(&st);
                0
            }
            Err(e) => {
                if let hushtrace::Error::Stop { stats, .. } = &e {
                    put(stats);
                }
                failed(e)
            }
        }
    })
}

/// `int ht_start_from_env(void)`: 0 started, 1 when nothing is to start (no variable of the
/// runtime's table set), `HT_ERR_FAILED` for a bad value or a variable set without
/// `HUSHTRACE_OUTPUT`.
#[no_mangle]
pub extern "C" fn ht_start_from_env() -> c_int {
    guard(ERR_PANIC, || match hushtrace::start_from_env() {
        Ok(None) => 1,
        Ok(Some(s)) => {
            // Runs until exit(): the runtime's exit handler stops the running session.
            std::mem::forget(s);
            0
        }
        Err(e) => failed(e),
    })
}
