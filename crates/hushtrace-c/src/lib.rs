//! The C and C++ interface of hushtrace: `libhushtrace.so` and `libhushtrace.a`, declared by
//! `include/hushtrace.h`.
//!
//! * Functions (`ht_session_start`, `ht_enable`, ...) wrap the Rust API. Each catches panics,
//!   turns NULL and malformed arguments into an error code, and leaves the message in a
//!   thread-local slot that `ht_last_error` returns.
//! * Tracepoints (`HT_EVENT`, ...) are static C descriptors ([`Descriptor`]) that embed the
//!   runtime's [`CallsiteState`], so the C hot path tests its own interest word. They are
//!   registered when their module loads (`ht__register_module` from the header's constructor,
//!   `ht__register_callsite` from C++ static initialization) with
//!   [`hushtrace_rt::Registered::with_state`]: the one run-time callsite mechanism, shared with
//!   the `tracing` bridge.
//! * The enabled path of a tracepoint with up to two fields (most of them) is one indirect
//!   call from the C macro to the descriptor's `record`: a [`RecordFn`] chosen at registration
//!   for the descriptor's field types, which reads its values from registers and writes them
//!   with the runtime's typed write path, the code `event!` inlines (no value array, no
//!   dispatch on types, no second lookup). Wider tracepoints pass an array to `ht__record`,
//!   which records through [`hushtrace_rt::Registered::record`].
//! * A module whose descriptors are registered is pinned (`RTLD_NODELETE`): the registry keeps
//!   its descriptors for the life of the process, so `dlclose` must not unmap them.
#![deny(unsafe_op_in_unsafe_fn)]

use hushtrace_core::{Callsite, CallsiteState, Field, FieldType, Interest, Kind, STR_CAP};
use hushtrace_rt::__private::{emit, Payload};
use hushtrace_rt::{Registered, Value};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// `HT_ERR_INVALID`: a NULL or malformed argument.
const ERR_INVALID: c_int = -1;
/// `HT_ERR_FAILED`: the runtime refused.
const ERR_FAILED: c_int = -2;
/// `HT_ERR_PANIC`: an internal error.
const ERR_PANIC: c_int = -3;

/// The descriptor ABI version the header writes (`HT__ABI`).
const ABI: u32 = 2;
/// The most fields of a C tracepoint (`HT__MAX_FIELDS`).
const MAX_FIELDS: usize = 8;
/// The longest glob `ht_enable`/`ht_disable` accept.
const MAX_GLOB: usize = 1024;

/// `ht_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HtStats {
    /// Events written.
    pub events_written: u64,
    /// Events discarded (full buffers, ...).
    pub events_discarded: u64,
}

/// `ht_session`: a session handle. Handles are never freed (a few bytes per session started)
/// and every one is listed in [`HANDLES`]: a second `ht_session_stop` of the same handle finds
/// it stopped and returns an error, and a pointer that is not a handle is refused before it
/// is read, instead of a double free.
#[derive(Debug)]
pub struct HtSession {
    /// The session until it is stopped.
    session: std::sync::Mutex<Option<hushtrace_rt::Session>>,
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
fn new_handle(session: hushtrace_rt::Session) -> *mut HtSession {
    let h: &'static HtSession = Box::leak(Box::new(HtSession {
        session: std::sync::Mutex::new(Some(session)),
    }));
    HANDLES.lock().unwrap_or_else(|e| e.into_inner()).push(h);
    h as *const HtSession as *mut HtSession
}

/// `ht__callsite`: the static descriptor the header's macros define for each tracepoint.
///
/// Invariants (kept by the macros): the strings are NUL-terminated literals, `field_names` and
/// `field_types` have `nfields` entries (or are NULL when it is 0), and the descriptor lives as
/// long as its module, which registration pins for the life of the process.
#[repr(C)]
#[derive(Debug)]
pub struct Descriptor {
    /// The runtime's state, first: `state.interest` is the word the C tracepoint loads. All
    /// zero (disabled) until registered.
    state: CallsiteState,
    abi: u32,
    kind: u8,
    nfields: u8,
    category: *const c_char,
    name: *const c_char,
    field_names: *const *const c_char,
    field_types: *const u8,
    file: *const c_char,
    line: u32,
    /// A leaked `Registered` once registered, else null.
    runtime: AtomicPtr<Registered>,
    /// The runtime's callsite (whose state is `state`) once registered, else null. Stored
    /// before `record`.
    callsite: AtomicPtr<Callsite>,
    /// For 0 to 2 fields, the [`RecordFn`] of this descriptor's field types once registered,
    /// else null: what the header's macros call, with the values in registers. Stored last,
    /// with `Release`; the macros load it with `Acquire`, so a recorder sees `callsite`.
    record: AtomicPtr<c_void>,
}

/// `ht__record_fn`: records one event of a descriptor with up to two fields (unused values are
/// ignored), if it is enabled. One instance per field-type combination, chosen at
/// registration: no dispatch on types at run time.
type RecordFn = unsafe extern "C" fn(cs: *const Descriptor, a: HtValue, b: HtValue);

/// `ht__value`: one field value; which member is meant is the descriptor's field type.
#[repr(C)]
#[derive(Clone, Copy)]
pub union HtValue {
    i: i64,
    u: u64,
    f: f64,
    s: *const c_char,
}

impl HtValue {
    /// The value's 8 bytes as an integer (every member is 8 plain bytes: `HT_I32`/`HT_U32`
    /// widen into `i`/`u`, `HT_BOOL` writes 0 or 1, `HT_F64` a double's bits).
    #[inline(always)]
    fn bits(self) -> u64 {
        // SAFETY: the header always writes all 8 bytes (one 8-byte member), and any 8 bytes
        // are a valid u64.
        unsafe { self.u }
    }

    /// The value as a string pointer (meaningful for string fields).
    #[inline(always)]
    fn ptr(self) -> *const c_char {
        // SAFETY: as `bits`; a pointer read is only dereferenced for string fields.
        unsafe { self.s }
    }
}

impl std::fmt::Debug for HtValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: every member is 8 plain bytes; reading them as u64 is always defined.
        write!(f, "HtValue({:#x})", unsafe { self.u })
    }
}

const _: () = {
    assert!(std::mem::size_of::<CallsiteState>() == 24);
    assert!(std::mem::align_of::<CallsiteState>() == 8);
    assert!(std::mem::size_of::<Descriptor>() == 104);
    assert!(std::mem::size_of::<HtValue>() == 8);
    assert!(std::mem::size_of::<HtStats>() == 16);
};

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_error(msg: impl Into<String>) {
    let mut m = msg.into().into_bytes();
    m.retain(|&b| b != 0);
    let c = CString::new(m).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = Some(c));
}

/// Runs `f`, turning a panic into `on_panic` and a last-error message.
fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
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
unsafe fn arg<'a>(p: *const c_char, what: &str) -> Result<&'a [u8], c_int> {
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
        match hushtrace_rt::Session::builder()
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
        let put = |st: &hushtrace_rt::Stats| {
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
                if let hushtrace_rt::Error::Stop { stats, .. } = &e {
                    put(stats);
                }
                set_error(e.to_string());
                ERR_FAILED
            }
        }
    })
}

/// `int ht_start_from_env(void)`.
#[no_mangle]
pub extern "C" fn ht_start_from_env() -> c_int {
    guard(ERR_PANIC, || match hushtrace_rt::start_from_env() {
        Ok(None) => 1,
        Ok(Some(s)) => {
            // Runs until exit(): the runtime's exit handler stops the running session.
            std::mem::forget(s);
            0
        }
        Err(e) => {
            set_error(e.to_string());
            ERR_FAILED
        }
    })
}

/// `void ht_init_thread(void)`.
#[no_mangle]
pub extern "C" fn ht_init_thread() {
    guard((), hushtrace_rt::init_thread)
}

/// `int ht_set_thread_no_syscall(void)`.
#[no_mangle]
pub extern "C" fn ht_set_thread_no_syscall() -> c_int {
    guard(
        ERR_PANIC,
        || match hushtrace_rt::try_set_thread_no_syscall() {
            Ok(()) => 0,
            Err(e) => {
                set_error(e.to_string());
                ERR_FAILED
            }
        },
    )
}

/// `void ht_clear_thread_no_syscall(void)`.
#[no_mangle]
pub extern "C" fn ht_clear_thread_no_syscall() {
    guard((), hushtrace_rt::clear_thread_no_syscall)
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
            hushtrace_rt::set_thread_name(&String::from_utf8_lossy(n));
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

fn count(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

/// `int ht_enable(const char *glob)`.
///
/// # Safety
/// `glob` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ht_enable(glob: *const c_char) -> c_int {
    guard(ERR_PANIC, || {
        // SAFETY: forwarded contract.
        match unsafe { glob_arg(glob) } {
            Ok(g) => count(hushtrace_rt::enable(g)),
            Err(e) => e,
        }
    })
}

/// `int ht_disable(const char *glob)`.
///
/// # Safety
/// `glob` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ht_disable(glob: *const c_char) -> c_int {
    guard(ERR_PANIC, || {
        // SAFETY: forwarded contract.
        match unsafe { glob_arg(glob) } {
            Ok(g) => count(hushtrace_rt::disable(g)),
            Err(e) => e,
        }
    })
}

/// `int ht_verify_trap_syscalls_on_this_thread(void)`.
#[no_mangle]
pub extern "C" fn ht_verify_trap_syscalls_on_this_thread() -> c_int {
    guard(
        ERR_PANIC,
        || match hushtrace_rt::verify::trap_syscalls_on_this_thread() {
            Ok(()) => 0,
            Err(e) => {
                set_error(format!("seccomp filter: {e}"));
                ERR_FAILED
            }
        },
    )
}

/// `uint64_t ht_verify_trapped_syscalls(void)`.
#[no_mangle]
pub extern "C" fn ht_verify_trapped_syscalls() -> u64 {
    guard(u64::MAX, hushtrace_rt::verify::trapped_syscalls)
}

/// `void ht_verify_exit_thread(void)`.
#[no_mangle]
pub extern "C" fn ht_verify_exit_thread() -> ! {
    // SAFETY: called from C, which has no destructors: the C caller's contract (header) is
    // that nothing on this thread's stack is still in use by another thread.
    unsafe { hushtrace_rt::verify::exit_thread() }
}

// ---------------------------------------------------------------------------------------------
// Tracepoints
// ---------------------------------------------------------------------------------------------

/// `void ht__record(ht__callsite *cs, const ht__value *values)`: the enabled path of a C
/// tracepoint with 3 to 8 fields (the values in an array), and of any tracepoint for a caller
/// that has its values in an array. No lock, no allocation, no system call on a no-syscall
/// thread (the runtime's guarantees for `Registered::record`); async-signal-safe.
///
/// Tracepoints with up to two fields (most of them) do not come here: the header's macros call
/// the descriptor's [`RecordFn`] directly (see [`recorder`]).
///
/// # Safety
/// `cs` is a descriptor defined by the header's macros; `values` points to its `nfields`
/// values, typed as its field types say.
#[no_mangle]
pub unsafe extern "C" fn ht__record(cs: *const Descriptor, values: *const HtValue) {
    guard((), || {
        if cs.is_null() {
            return;
        }
        // SAFETY: the caller passes the macro's static descriptor.
        let d = unsafe { &*cs };
        let n = d.nfields as usize;
        if n != 0 && values.is_null() {
            return;
        }
        let v = |i: usize| {
            // SAFETY: the macros give `nfields` values.
            unsafe { *values.add(i) }
        };
        if n <= 2 {
            let f = d.record.load(Ordering::Acquire);
            if f.is_null() {
                return; // not registered (refused at load time): stays silent
            }
            // SAFETY: only `register` stores into `record`, a `RecordFn` from `recorder`.
            let f: RecordFn = unsafe { std::mem::transmute::<*mut c_void, RecordFn>(f) };
            let none = HtValue { u: 0 };
            let (a, b) = match n {
                0 => (none, none),
                1 => (v(0), none),
                _ => (v(0), v(1)),
            };
            // SAFETY: the recorder of this descriptor's types, with its values.
            unsafe { f(cs, a, b) };
            return;
        }
        let reg = d.runtime.load(Ordering::Acquire);
        if reg.is_null() {
            return;
        }
        // SAFETY: a leaked, never freed `Registered` (see `register`).
        let reg = unsafe { &*reg };
        let t = |i: usize| {
            // SAFETY: the macros give `nfields` field types.
            unsafe { *d.field_types.add(i) }
        };
        // A fixed-length array per count (the run-time value list: this path is for the
        // uncommon wide tracepoints).
        macro_rules! values {
            ($($i:literal)*) => {
                // SAFETY: each value holds the member its type code says (see `value`).
                reg.record(&[$(unsafe { value(t($i), v($i)) }),*])
            };
        }
        match n {
            3 => values!(0 1 2),
            4 => values!(0 1 2 3),
            5 => values!(0 1 2 3 4),
            6 => values!(0 1 2 3 4 5),
            7 => values!(0 1 2 3 4 5 6),
            8 => values!(0 1 2 3 4 5 6 7),
            _ => false, // refused at registration
        };
    })
}

/// `void ht__scope_end(ht__callsite *end)`: the end of an `HT_SCOPE` whose begin was
/// recorded. Like the Rust span guard, it records even if the span was disabled since the
/// begin, so begins and ends stay balanced. Same guarantees as [`ht__record`].
///
/// # Safety
/// `end` is a descriptor defined by the header's macros.
#[no_mangle]
pub unsafe extern "C" fn ht__scope_end(end: *const Descriptor) {
    guard((), || {
        if end.is_null() {
            return;
        }
        // SAFETY: the caller passes the macro's static descriptor.
        let d = unsafe { &*end };
        let cs = d.callsite.load(Ordering::Acquire);
        if cs.is_null() {
            return; // not registered (refused at load time)
        }
        // SAFETY: a registered callsite lives for the life of the process.
        let cs = unsafe { &*cs };
        let i = d.state.interest();
        let i = if i.is_enabled() {
            i
        } else {
            Interest::NEEDS_TYPES
        };
        emit(cs, i, ());
    })
}

/// A C field type: how a recorder reads the 8 bytes of an [`HtValue`] into the value the
/// typed write path encodes (the same [`Field`] `event!` encodes for a Rust value of that
/// type).
trait CType {
    /// The Rust value.
    type Out<'a>: Field;
    /// # Safety
    /// `v` holds what the header writes for this type (see [`value`]).
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a>;
}

/// `HT_U32` (3).
enum U32 {}
/// `HT_U64` and unsigned counters (4).
enum U64 {}
/// `HT_I32` (7).
enum I32 {}
/// `HT_I64` and signed counters (8).
enum I64 {}
/// `HT_F64` and floating counters (9).
enum F64 {}
/// `HT_BOOL` (10).
enum Bool {}
/// `HT_STR` (11).
enum Str {}

impl CType for U32 {
    type Out<'a> = u32;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits() as u32
    }
}
impl CType for U64 {
    type Out<'a> = u64;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits()
    }
}
impl CType for I32 {
    type Out<'a> = i32;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits() as i64 as i32
    }
}
impl CType for I64 {
    type Out<'a> = i64;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits() as i64
    }
}
impl CType for F64 {
    type Out<'a> = f64;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        f64::from_bits(v.bits())
    }
}
impl CType for Bool {
    type Out<'a> = bool;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        v.bits() != 0
    }
}
impl CType for Str {
    type Out<'a> = &'a str;
    #[inline(always)]
    unsafe fn get<'a>(v: HtValue) -> Self::Out<'a> {
        // SAFETY: for a string field `HT_STR` stores a string pointer or NULL.
        unsafe { c_str_value(v.ptr()) }
    }
}

/// The body of every recorder: if the descriptor is enabled, writes `payload()` through the
/// runtime's typed write path, the code `event!` inlines.
///
/// # Safety
/// `d` is a registered descriptor whose `record` the caller loaded with `Acquire` (so
/// `callsite` is set), and `payload` reads values of its field types.
#[inline(always)]
unsafe fn record_with<P: Payload>(d: *const Descriptor, payload: impl FnOnce() -> P) {
    guard((), || {
        // SAFETY: the caller passes the macro's static descriptor.
        let d = unsafe { &*d };
        let interest = d.state.interest();
        if !interest.is_enabled() {
            return; // disabled since the C side looked
        }
        let cs = d.callsite.load(Ordering::Relaxed);
        if cs.is_null() {
            return;
        }
        // SAFETY: a registered callsite lives for the life of the process.
        emit(unsafe { &*cs }, interest, payload());
    })
}

/// The recorder of a descriptor without fields.
///
/// # Safety
/// As [`record_with`].
unsafe extern "C" fn record0(d: *const Descriptor, _: HtValue, _: HtValue) {
    // SAFETY: forwarded contract.
    unsafe { record_with(d, || ()) }
}

/// The recorder of a descriptor with one field of type `A`.
///
/// # Safety
/// As [`record_with`]; `a` holds an `A`.
unsafe extern "C" fn record1<A: CType>(d: *const Descriptor, a: HtValue, _: HtValue) {
    // SAFETY: forwarded contract.
    unsafe { record_with(d, || (A::get(a),)) }
}

/// The recorder of a descriptor with two fields of types `A` and `B`.
///
/// # Safety
/// As [`record_with`]; `a` holds an `A`, `b` a `B`.
unsafe extern "C" fn record2<A: CType, B: CType>(d: *const Descriptor, a: HtValue, b: HtValue) {
    // SAFETY: forwarded contract.
    unsafe { record_with(d, || (A::get(a), B::get(b))) }
}

/// The recorder for up to two fields of these type codes; `None` for more fields (they go
/// through [`ht__record`]) or an unknown code (refused at registration anyway).
fn recorder(types: &[u8]) -> Option<RecordFn> {
    macro_rules! by_type {
        ($code:expr, $t:ident => $e:expr) => {
            match $code {
                3 => {
                    type $t = U32;
                    $e
                }
                4 => {
                    type $t = U64;
                    $e
                }
                7 => {
                    type $t = I32;
                    $e
                }
                8 => {
                    type $t = I64;
                    $e
                }
                9 => {
                    type $t = F64;
                    $e
                }
                10 => {
                    type $t = Bool;
                    $e
                }
                11 => {
                    type $t = Str;
                    $e
                }
                _ => None,
            }
        };
    }
    match *types {
        [] => Some(record0 as RecordFn),
        [a] => by_type!(a, A => Some(record1::<A> as RecordFn)),
        [a, b] => by_type!(a, A => by_type!(b, B => Some(record2::<A, B> as RecordFn))),
        _ => None,
    }
}

/// One field value as the descriptor's type code `t` says (codes refused at registration
/// never get here; an unknown one records `false`, which the type check then drops).
///
/// # Safety
/// `v` holds the member the header writes for `t` (`HT_I32`/`HT_U32` widen into `i`/`u`,
/// `HT_BOOL` writes 0 or 1 into `u`, `HT_STR` a string pointer or NULL into `s`).
#[inline(always)]
unsafe fn value<'a>(t: u8, v: HtValue) -> Value<'a> {
    // SAFETY: each arm reads the member the macro wrote for that type (see above).
    unsafe {
        match t {
            3 => Value::U32(v.u as u32),
            4 => Value::U64(v.u),
            7 => Value::I32(v.i as i32),
            8 => Value::I64(v.i),
            9 => Value::F64(v.f),
            10 => Value::Bool(v.u != 0),
            11 => Value::Str(c_str_value(v.s)),
            _ => Value::Bool(false),
        }
    }
}

/// A string field: at most [`STR_CAP`] bytes up to the NUL, cut before the first byte that is
/// not UTF-8; NULL is "". Reads no byte past the NUL or past `STR_CAP`.
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string.
#[inline]
unsafe fn c_str_value<'a>(s: *const c_char) -> &'a str {
    if s.is_null() {
        return "";
    }
    let mut n = 0;
    // SAFETY: each byte read is at or before the string's NUL.
    while n < STR_CAP && unsafe { *s.add(n) } != 0 {
        n += 1;
    }
    // SAFETY: the `n` bytes before were just read.
    let b = unsafe { std::slice::from_raw_parts(s as *const u8, n) };
    match std::str::from_utf8(b) {
        Ok(s) => s,
        // SAFETY (from_utf8 on the prefix cannot fail): `valid_up_to` bytes are valid UTF-8.
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
    }
}

/// Registers one descriptor (idempotent); complains on stderr about a descriptor the runtime
/// refuses (it stays disabled).
///
/// # Safety
/// `d` is a descriptor defined by the header's macros, in a module that stays mapped.
unsafe fn register(d: &'static Descriptor) {
    if !d.runtime.load(Ordering::Acquire).is_null() {
        return;
    }
    // SAFETY: forwarded contract (literal strings and arrays of the descriptor).
    match unsafe { describe(d) } {
        Ok((cat, name, kind, fields)) => {
            let f: Vec<(&str, FieldType)> = fields.iter().map(|(n, t)| (*n, *t)).collect();
            match Registered::with_state(cat, name, kind, &f, &d.state) {
                Ok(r) => {
                    let leaked: &'static mut Registered = Box::leak(Box::new(r));
                    let cs = r.callsite() as *const Callsite as *mut Callsite;
                    if d.runtime
                        .compare_exchange(
                            ptr::null_mut(),
                            leaked,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        d.callsite.store(cs, Ordering::Relaxed);
                        // The recorder is the one for the field types `describe` checked:
                        // what makes the macros' call through `record` sound.
                        if let Some(f) =
                            recorder(&fields.iter().map(|(_, t)| *t as u8).collect::<Vec<_>>())
                        {
                            d.record.store(f as *mut c_void, Ordering::Release);
                        }
                    }
                    // Else registered concurrently by another constructor: theirs stands
                    // (the same runtime callsite: the registry finds it by `state`).
                }
                Err(e) => complain(d, &e.to_string()),
            }
        }
        Err(why) => complain(d, &why),
    }
}

type Description<'a> = (&'a str, &'a str, Kind, Vec<(&'a str, FieldType)>);

/// Reads a descriptor into a description the runtime registers.
///
/// # Safety
/// As [`register`].
unsafe fn describe(d: &'static Descriptor) -> Result<Description<'static>, String> {
    if d.abi != ABI {
        return Err(format!(
            "descriptor ABI {} (this library reads {ABI}): rebuild with this hushtrace.h",
            d.abi
        ));
    }
    let s = |p: *const c_char, what: &str| -> Result<&'static str, String> {
        if p.is_null() {
            return Err(format!("{what} is NULL"));
        }
        // SAFETY: string literals of the descriptor, alive as long as the pinned module.
        unsafe { CStr::from_ptr(p) }
            .to_str()
            .map_err(|_| format!("{what} is not UTF-8"))
    };
    let cat = s(d.category, "the category")?;
    let name = s(d.name, "the name")?;
    let kind = match d.kind {
        0 => Kind::Instant,
        1 => Kind::SpanBegin,
        2 => Kind::SpanEnd,
        3 => Kind::Counter,
        k => return Err(format!("unknown kind {k}")),
    };
    let n = d.nfields as usize;
    if n > MAX_FIELDS {
        return Err(format!(
            "{n} fields: a C tracepoint has at most {MAX_FIELDS}"
        ));
    }
    let mut fields = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the macros give `nfields` names and types.
        let (fname, t) = unsafe { (*d.field_names.add(i), *d.field_types.add(i)) };
        let fname = s(fname, "a field name")?;
        let t = match t {
            3 | 4 | 7 | 8 | 9 | 10 | 11 => {
                FieldType::from_u8(t).ok_or_else(|| format!("field {fname}: type {t}"))?
            }
            _ => return Err(format!("field {fname}: unknown type code {t}")),
        };
        fields.push((fname, t));
    }
    Ok((cat, name, kind, fields))
}

fn complain(d: &Descriptor, why: &str) {
    let name = |p: *const c_char| {
        if p.is_null() {
            "?".to_string()
        } else {
            // SAFETY: descriptor strings are NUL-terminated literals.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let msg = format!(
        "hushtrace: tracepoint {}:{} at {}:{} not registered (it stays disabled): {why}",
        name(d.category),
        name(d.name),
        name(d.file),
        d.line
    );
    eprintln!("{msg}");
    set_error(msg);
}

/// Keeps the module holding `addr` loaded for good (`RTLD_NODELETE`), so `dlclose` cannot
/// unmap descriptors the registry holds. Nothing to do for the main program.
fn pin_module(addr: *const c_void) {
    // SAFETY: `Dl_info` is plain data; zeroed is a valid initial value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads `addr` as an address and fills `info`.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return;
    }
    // SAFETY: `dli_fname` is the loader's NUL-terminated path of a loaded object. RTLD_NOLOAD
    // only promotes an object already loaded; the handle is kept (never dlclose'd).
    let _ = unsafe {
        libc::dlopen(
            info.dli_fname,
            libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
        )
    };
}

/// `void ht__register_module(ht__callsite *const *start, ht__callsite *const *stop)`: called
/// by the header's constructor with the module's `hushtrace_cs` section bounds.
///
/// # Safety
/// `[start, stop)` is the module's `hushtrace_cs` section (NULL, NULL when it has none).
#[no_mangle]
pub unsafe extern "C" fn ht__register_module(
    start: *const *const Descriptor,
    stop: *const *const Descriptor,
) {
    guard((), || {
        if start.is_null() || stop.is_null() || start >= stop {
            return;
        }
        pin_module(start as *const c_void);
        let mut p = start;
        while p < stop {
            // SAFETY: inside the section: an array of descriptor pointers.
            let d = unsafe { *p };
            if !d.is_null() {
                // SAFETY: a macro's descriptor in the module just pinned.
                unsafe { register(&*d) };
            }
            // SAFETY: still within or one past the section.
            p = unsafe { p.add(1) };
        }
    })
}

/// `void ht__register_callsite(ht__callsite *cs)`: C++ registration of one descriptor (from
/// the module's static initialization).
///
/// # Safety
/// `cs` is a descriptor defined by the header's macros.
#[no_mangle]
pub unsafe extern "C" fn ht__register_callsite(cs: *const Descriptor) {
    guard((), || {
        if cs.is_null() {
            return;
        }
        pin_module(cs as *const c_void);
        // SAFETY: a macro's descriptor in the module just pinned.
        unsafe { register(&*cs) };
    })
}
