//! The public no-syscall API for real-time threads, and thread preparation.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::config::{Error, Policy};
use crate::consumer;
use crate::env;
use crate::platform::{self, SignalBlock};
use crate::ring::ProducerKey;
use crate::state;
use crate::thread;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

/// Reads `HUSHTRACE_NO_SYSCALL_POLICY` (`zero` | `log` | `abort`; unset = `zero`). An unknown
/// value is an error naming the variable; session start calls this.
///
/// ```
/// std::env::set_var("HUSHTRACE_NO_SYSCALL_POLICY", "log");
/// assert_eq!(hushtrace::load_no_syscall_policy().unwrap(), hushtrace::Policy::Log);
/// std::env::set_var("HUSHTRACE_NO_SYSCALL_POLICY", "sometimes");
/// let err = hushtrace::load_no_syscall_policy().unwrap_err().to_string();
/// assert!(err.contains("HUSHTRACE_NO_SYSCALL_POLICY") && err.contains("sometimes"));
/// ```
pub fn load_policy() -> Result<Policy, Error> {
    let p = Policy::parse_env(std::env::var(env::NO_SYSCALL_POLICY).ok())?;
    state::set_policy(p);
    Ok(p)
}

/// Prepares the calling thread for tracing now: registers it, fills its context caches (vpid,
/// vtid, procname = the kernel thread name from `prctl(PR_GET_NAME)`, pthread id) and, if a
/// session is running, allocates its buffer. Without it all of this happens lazily on the
/// thread's first tracepoint. In the child of a `fork()` it also restarts the consumer thread
/// and, for a thread in no-syscall mode, faults its ring in again (call it before a forked
/// real-time thread resumes its loop).
///
/// ```
/// hushtrace::init_thread();
/// ```
pub fn init_thread() {
    let _ = thread::current();
    // In the child of a fork the consumer did not survive: start it now, while system calls
    // are allowed.
    consumer::ensure_running();
    if thread_in_no_syscall() {
        // E.g. a real-time thread in a fork child, whose ring came back as fresh zero pages
        // (MADV_WIPEONFORK, and mlock is not inherited): fault it in again now.
        set_thread_no_syscall();
    }
}

/// Renames the calling thread (`prctl(PR_SET_NAME)`, cut to 15 bytes) and updates the tracer's
/// procname cache, so the name in later packets is right without another lookup.
///
/// ```
/// std::thread::spawn(|| hushtrace::set_thread_name("worker-1")).join().unwrap();
/// ```
pub fn set_thread_name(name: &str) {
    set_ident_name(platform::set_thread_name(name));
}

/// Names the calling thread in the trace only (the packets' `procname`, which converters show
/// as the thread's name), leaving its kernel name alone: for a runtime with thread names of
/// its own (Python's `threading`), whose kernel names the program may rely on. `name` is cut
/// to 15 bytes on a character boundary, and at its first NUL.
///
/// ```
/// std::thread::spawn(|| hushtrace::set_thread_trace_name("worker-1")).join().unwrap();
/// ```
pub fn set_thread_trace_name(name: &str) {
    let name = name.split('\0').next().unwrap_or("");
    let mut n = name.len().min(15);
    while !name.is_char_boundary(n) {
        n -= 1;
    }
    let mut procname = [0u8; 16];
    procname[..n].copy_from_slice(&name.as_bytes()[..n]);
    // Registered now: a thread registering later would take its kernel name.
    let _ = thread::current();
    set_ident_name(procname);
}

/// Puts `procname` in the calling thread's identity (and its attached buffer's).
fn set_ident_name(procname: [u8; 16]) {
    let sig = SignalBlock::new();
    // Under the registry lock: a session start reads `ident` (attach) and a stop detaches the
    // buffer under it, so neither races with this update.
    let _reg = state::lock_registry(&sig);
    thread::with_current(|ctx| {
        let mut id = ctx.ident.get();
        id.procname = procname;
        ctx.ident.set(id);
        let b = ctx.buffer.load(Ordering::Acquire);
        if !b.is_null() {
            // SAFETY: the attached buffer is alive: we hold the registry lock, so it is neither
            // detached nor freed meanwhile.
            // The registry lock is held on the buffer's own thread: its producer (the key).
            unsafe { ProducerKey::new(&*b) }.set_ident(id);
        }
    });
}

/// Enters no-syscall mode: does everything [`init_thread`] does, touches (and `mlock`s where
/// permitted) every page of the thread's buffer, then promises that no tracepoint on this thread
/// makes a system call or allocates — including packet hand-overs (the consumer finds them on
/// its read timer), first hits of callsites, callsites enabled later, and sessions that start or
/// stop meanwhile (a starting session prepares this thread's buffer from the starting thread).
///
/// ```
/// hushtrace::set_thread_no_syscall();
/// hushtrace::event!("rt", "tick", n = 1u32); // no system call, no allocation
/// hushtrace::clear_thread_no_syscall();
/// ```
pub fn set_thread_no_syscall() {
    let _ = enter_no_syscall(false);
}

/// Like [`set_thread_no_syscall`], but refuses to enter the mode when its promise cannot be
/// kept: the thread's ring could not be allocated, or cannot be locked in memory because it is
/// larger than `RLIMIT_MEMLOCK` allows (an unlocked page may be swapped out and faulted back
/// in from the tracepoint). The error names the ring's size and the limit. Without a running
/// session it only prepares the thread and enters the mode (a session started later checks
/// the limit at start).
///
/// ```
/// hushtrace::try_set_thread_no_syscall().expect("no session: nothing to lock");
/// assert!(hushtrace::thread_in_no_syscall());
/// hushtrace::clear_thread_no_syscall();
/// ```
pub fn try_set_thread_no_syscall() -> Result<(), Error> {
    enter_no_syscall(true)
}

fn enter_no_syscall(strict: bool) -> Result<(), Error> {
    if !state::policy_loaded() {
        let _ = load_policy();
    }
    let Some(ctx) = thread::current() else {
        return Err(Error::Config {
            var: None,
            value: "set_thread_no_syscall".into(),
            reason: "the thread is exiting".into(),
        });
    };
    consumer::ensure_running();
    // Under the registry lock so that a concurrent session start either sees the flag (and
    // prefaults the buffer it attaches) or attached before we look at the buffer here.
    let sig = SignalBlock::new();
    let reg = state::lock_registry(&sig);
    let b = ctx.buffer.load(Ordering::Acquire);
    let session = reg.session.clone();
    if !b.is_null() {
        // SAFETY: the attached buffer is alive while attached; we hold the registry lock, so
        // no session stop detaches and frees it meanwhile.
        let buf = unsafe { &*b };
        // SAFETY: this thread is the producer of the buffer attached to it, and holds the
        // registry lock.
        let key = unsafe { ProducerKey::new(buf) };
        if !key.prefault() && strict {
            if let Some(e) = memlock_error(buf.capacity()) {
                return Err(e);
            }
        }
    } else if strict && session.is_some() {
        return Err(Error::Config {
            var: None,
            value: "set_thread_no_syscall".into(),
            reason: "the thread's ring could not be allocated".into(),
        });
    }
    ctx.no_syscall.store(true, Ordering::Relaxed);
    Ok(())
}

/// The error for a ring of `bytes` that `mlock` refused, naming `RLIMIT_MEMLOCK`.
#[allow(clippy::disallowed_methods)] // formats an error: the API, not a tracepoint
pub(crate) fn memlock_error(bytes: usize) -> Option<Error> {
    let limit = platform::memlock_limit()?;
    Some(Error::Config {
        var: None,
        value: format!("{bytes} bytes"),
        reason: format!(
            "a no-syscall thread's ring ({bytes} bytes) must be locked in memory, but \
             RLIMIT_MEMLOCK allows {limit} bytes for this process: raise it (ulimit -l, \
             LimitMEMLOCK= in systemd), grant CAP_IPC_LOCK, or use smaller sub-buffers"
        ),
    })
}

/// Leaves no-syscall mode.
pub fn clear_thread_no_syscall() {
    thread::with_current(|ctx| ctx.no_syscall.store(false, Ordering::Relaxed));
}

/// Whether the calling thread is in no-syscall mode.
pub fn thread_in_no_syscall() -> bool {
    thread::with_current(|ctx| ctx.no_syscall.load(Ordering::Relaxed)).unwrap_or(false)
}

/// RAII form of [`set_thread_no_syscall`]: the mode ends (or returns to what it was) when the
/// guard drops. Not `Send`: it belongs to the thread that created it.
///
/// ```
/// {
///     let _rt = hushtrace::NoSyscallGuard::new();
///     assert!(hushtrace::thread_in_no_syscall());
/// }
/// assert!(!hushtrace::thread_in_no_syscall());
/// ```
///
/// ```compile_fail
/// fn needs_send<T: Send>(_: T) {}
/// needs_send(hushtrace::NoSyscallGuard::new()); // error: the guard is not Send
/// ```
#[derive(Debug)]
pub struct NoSyscallGuard {
    was: bool,
    _not_send: PhantomData<*const ()>,
}

impl NoSyscallGuard {
    /// Enters no-syscall mode on the calling thread.
    #[allow(clippy::new_without_default)]
    pub fn new() -> NoSyscallGuard {
        let was = thread_in_no_syscall();
        set_thread_no_syscall();
        NoSyscallGuard {
            was,
            _not_send: PhantomData,
        }
    }
}

impl Drop for NoSyscallGuard {
    fn drop(&mut self) {
        if !self.was {
            clear_thread_no_syscall();
        }
    }
}
