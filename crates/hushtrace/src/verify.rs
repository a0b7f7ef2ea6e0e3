//! Verifying no-syscall mode with the kernel: a seccomp-bpf filter on one thread that traps
//! every system call.
//!
//! Use it the way hushtrace's own tests and `examples/rt_loop.rs` do: enter no-syscall mode,
//! call [`trap_syscalls_on_this_thread`], run the real-time loop, read [`trapped_syscalls`],
//! then leave with [`exit_thread`] (the filter cannot be removed, and only `exit`,
//! `exit_group` and `rt_sigreturn` remain allowed). A trapped call is not executed: it returns
//! `-ENOSYS` to its caller (on x86_64 and aarch64, the architectures the filter supports), and
//! the SIGSYS handler counts it.
//!
//! Platforms: Linux on x86_64 and aarch64. Elsewhere [`trap_syscalls_on_this_thread`] returns
//! an error of kind [`io::ErrorKind::Unsupported`]; a kernel without seccomp, or an emulator
//! that refuses guest filters (`qemu-user`), makes it return the OS error. The filter, the
//! SIGSYS handler and the raw thread exit live in the platform layer; this module keeps the
//! counts.
//!
//! ```no_run
//! std::thread::spawn(|| {
//!     let _rt = hushtrace::NoSyscallGuard::new();
//!     hushtrace::verify::trap_syscalls_on_this_thread().expect("seccomp");
//!     for i in 0..1000u64 {
//!         hushtrace::event!("rt", "tick", i = i);
//!     }
//!     assert_eq!(hushtrace::verify::trapped_syscalls(), 0);
//!     drop(_rt);
//!     // SAFETY: nothing on this thread's stack needs its destructor to run.
//!     unsafe { hushtrace::verify::exit_thread() };
//! });
//! ```

use crate::platform;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

static TRAPPED: AtomicU64 = AtomicU64::new(0);
static FIRST_NR: AtomicI64 = AtomicI64::new(-1);

/// System calls trapped so far (process-wide count of SIGSYS from the filter).
pub fn trapped_syscalls() -> u64 {
    TRAPPED.load(Ordering::SeqCst)
}

/// The number of the first trapped system call, if any (for diagnostics).
pub fn first_trapped_syscall() -> Option<i64> {
    let n = FIRST_NR.load(Ordering::SeqCst);
    (n >= 0).then_some(n)
}

/// Runs in the SIGSYS handler (after the platform made the call return `-ENOSYS`): atomics
/// only, async-signal-safe.
fn on_trap(nr: i64) {
    TRAPPED.fetch_add(1, Ordering::SeqCst);
    let _ = FIRST_NR.compare_exchange(-1, nr, Ordering::SeqCst, Ordering::SeqCst);
}

/// Installs, on the calling thread only (no `SECCOMP_FILTER_FLAG_TSYNC`), a seccomp-bpf filter
/// that makes every system call except `exit`, `exit_group` and `rt_sigreturn` raise SIGSYS,
/// and a process-wide SIGSYS handler that makes the call return `-ENOSYS` and counts it.
/// Irreversible for this thread: finish with [`exit_thread`].
///
/// # Errors
/// [`io::ErrorKind::Unsupported`] on platforms other than Linux on x86_64 or aarch64; the OS
/// error of `sigaction` or `prctl` otherwise.
pub fn trap_syscalls_on_this_thread() -> io::Result<()> {
    platform::trap_syscalls_on_this_thread(on_trap)
}

/// Ends the calling thread with a raw `exit` system call (allowed by the filter), without
/// unwinding or running thread-local destructors. Join such a thread with [`join_raw`], not
/// `JoinHandle::join`. (Where the filter is unsupported, the thread ends by unwinding instead,
/// which [`join_raw`] also accepts.)
///
/// # Safety
/// No destructor of any value on the calling thread's stack runs, and the stack's memory is
/// released. The caller must make sure that nothing relies on one of those destructors for
/// soundness: no value pinned on this thread's stack (a pinned future, an intrusive list
/// node) may be reachable from elsewhere, and no guard whose drop releases something another
/// thread waits for (a lock, a borrow) may be alive. Dropping every such value before the
/// call satisfies it.
pub unsafe fn exit_thread() -> ! {
    platform::exit_thread()
}

/// Joins a thread that ended with [`exit_thread`].
pub fn join_raw(handle: std::thread::JoinHandle<()>) {
    platform::join_raw(handle)
}

/// Compile-time checks of the platform contract, reachable from doc tests only. Not an API.
///
/// `SignalBlock` (the guard that blocks signals on a tracer control path) must not leave its
/// thread: it restores the signal mask of the thread that dropped it. It can be named here
/// (this compiles, so the `compile_fail` test below fails for the right reason):
///
/// ```
/// fn needs_nothing<T>() {}
/// needs_nothing::<hushtrace::verify::__contract::SignalBlock>();
/// ```
///
/// and it is not `Send`:
///
/// ```compile_fail,E0277
/// fn needs_send<T: Send>() {}
/// needs_send::<hushtrace::verify::__contract::SignalBlock>();
/// ```
///
/// nor `Sync`:
///
/// ```compile_fail,E0277
/// fn needs_sync<T: Sync>() {}
/// needs_sync::<hushtrace::verify::__contract::SignalBlock>();
/// ```
#[doc(hidden)]
pub mod __contract {
    pub use crate::platform::SignalBlock;
}
