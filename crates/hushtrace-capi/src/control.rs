//! Process and thread control from C: thread set-up and no-syscall mode, thread names,
//! tracepoints switched on and off by glob (`ht_enable`, `ht_disable`), and the seccomp proof
//! of `ht_verify_*`.

use crate::error::{arg, failed, guard, set_error, ERR_INVALID, ERR_PANIC};
use std::ffi::{c_char, c_int};

/// The longest glob `ht_enable`/`ht_disable` accept.
const MAX_GLOB: usize = 1024;

/// `void ht_init_thread(void)`.
#[no_mangle]
pub extern "C" fn ht_init_thread() {
    guard((), hushtrace::init_thread)
}

/// `int ht_set_thread_no_syscall(void)`.
#[no_mangle]
pub extern "C" fn ht_set_thread_no_syscall() -> c_int {
    guard(ERR_PANIC, || match hushtrace::try_set_thread_no_syscall() {
        Ok(()) => 0,
        Err(e) => failed(e),
    })
}

/// `void ht_clear_thread_no_syscall(void)`.
#[no_mangle]
pub extern "C" fn ht_clear_thread_no_syscall() {
    guard((), hushtrace::clear_thread_no_syscall)
}

/// `void ht_set_thread_name(const char *name)`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ht_set_thread_name(name: *const c_char) {
    guard((), || {
        // SAFETY: forwarded contract.
        if let Ok(n) = unsafe { arg(name, "the thread name") } {
            hushtrace::set_thread_name(&String::from_utf8_lossy(n));
        }
    })
}

/// Checks a glob argument: NULL, empty, too long, not UTF-8, or holding characters no
/// callsite name can contain.
///
/// # Safety
/// `glob` is NULL or a NUL-terminated string.
unsafe fn glob_arg<'a>(glob: *const c_char) -> Result<&'a str, c_int> {
    // SAFETY: forwarded contract.
    let g = unsafe { arg(glob, "the glob") }?;
    let bad = |why: &str| {
        set_error(format!(
            "invalid glob {:?}: {why}",
            String::from_utf8_lossy(&g[..g.len().min(64)])
        ));
        ERR_INVALID
    };
    if g.is_empty() {
        return Err(bad("empty"));
    }
    if g.len() > MAX_GLOB {
        return Err(bad("longer than 1024 bytes"));
    }
    let Ok(s) = std::str::from_utf8(g) else {
        return Err(bad("not UTF-8"));
    };
    if s.chars().any(|c| c.is_control() || c == '"' || c == '\\') {
        return Err(bad(
            "control characters, quotes and backslashes match no callsite",
        ));
    }
    if s.matches(':').count() > 1 {
        return Err(bad("more than one ':' (the form is category:name)"));
    }
    Ok(s)
}

/// What `ht_enable` and `ht_disable` share: checks `glob`, hands it to `apply` (the runtime's
/// [`hushtrace::enable`] or [`hushtrace::disable`]) and returns how many callsites matched, or
/// the error code of a bad glob.
///
/// # Safety
/// `glob` is NULL or a NUL-terminated string.
unsafe fn switch(glob: *const c_char, apply: fn(&str) -> usize) -> c_int {
    guard(ERR_PANIC, || {
        // SAFETY: forwarded contract.
        match unsafe { glob_arg(glob) } {
            Ok(g) => c_int::try_from(apply(g)).unwrap_or(c_int::MAX),
            Err(e) => e,
        }
    })
}

/// `int ht_enable(const char *glob)`.
///
/// # Safety
/// `glob` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ht_enable(glob: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { switch(glob, hushtrace::enable) }
}

/// `int ht_disable(const char *glob)`.
///
/// # Safety
/// `glob` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ht_disable(glob: *const c_char) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { switch(glob, hushtrace::disable) }
}

/// `int ht_verify_trap_syscalls_on_this_thread(void)`.
#[no_mangle]
pub extern "C" fn ht_verify_trap_syscalls_on_this_thread() -> c_int {
    guard(
        ERR_PANIC,
        || match hushtrace::verify::trap_syscalls_on_this_thread() {
            Ok(()) => 0,
            Err(e) => failed(format_args!("seccomp filter: {e}")),
        },
    )
}

/// `uint64_t ht_verify_trapped_syscalls(void)`.
#[no_mangle]
pub extern "C" fn ht_verify_trapped_syscalls() -> u64 {
    guard(u64::MAX, hushtrace::verify::trapped_syscalls)
}

/// `void ht_verify_exit_thread(void)`.
#[no_mangle]
pub extern "C" fn ht_verify_exit_thread() -> ! {
    // SAFETY: called from C, which has no destructors: the C caller's contract (header) is
    // that nothing on this thread's stack is still in use by another thread.
    unsafe { hushtrace::verify::exit_thread() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    /// The calling thread's last error.
    fn last_error() -> String {
        // SAFETY: `ht_last_error` returns a NUL-terminated string.
        unsafe { CStr::from_ptr(crate::error::ht_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn enable_and_disable_refuse_bad_globs_with_a_message() {
        let long = format!("{}\0", "a".repeat(MAX_GLOB + 1));
        let cases: [(*const c_char, &str); 6] = [
            (std::ptr::null(), "the glob is NULL"),
            (c"".as_ptr(), "empty"),
            (long.as_ptr() as *const c_char, "longer than 1024 bytes"),
            (c"\xff".as_ptr(), "not UTF-8"),
            (c"a\"b".as_ptr(), "quotes"),
            (c"a:b:c".as_ptr(), "more than one ':'"),
        ];
        for (glob, why) in cases {
            for f in [ht_enable, ht_disable] {
                // SAFETY: NULL or NUL-terminated strings.
                assert_eq!(unsafe { f(glob) }, ERR_INVALID, "{why}");
                assert!(last_error().contains(why), "{why}: {}", last_error());
            }
        }
    }

    #[test]
    fn enable_and_disable_switch_the_matching_callsites_and_count_them() {
        let reg = |name| {
            hushtrace::register_callsite("capi-test", name, hushtrace::Kind::Instant, &[]).unwrap()
        };
        let (a, b) = (reg("a"), reg("b"));
        let call = |f: unsafe extern "C" fn(*const c_char) -> c_int, glob: &CStr| {
            // SAFETY: a NUL-terminated string.
            unsafe { f(glob.as_ptr()) }
        };
        assert_eq!(call(ht_disable, c"capi-test:*"), 2);
        assert!(!a.is_enabled() && !b.is_enabled());
        assert_eq!(call(ht_enable, c"capi-test:a"), 1);
        assert!(a.is_enabled() && !b.is_enabled());
        assert_eq!(call(ht_disable, c"capi-test:a"), 1);
        assert!(!a.is_enabled());
        assert_eq!(call(ht_enable, c"capi-test-nothing:*"), 0);
    }
}
