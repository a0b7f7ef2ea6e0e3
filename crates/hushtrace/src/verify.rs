//! Verifying no-syscall mode with the kernel: a seccomp-bpf filter on one thread that traps
//! every system call.
//!
//! Use it the way hushtrace's own tests and `examples/rt_loop.rs` do: enter no-syscall mode,
//! call [`trap_syscalls_on_this_thread`], run the real-time loop, read [`trapped_syscalls`],
//! then leave with [`exit_thread`] (the filter cannot be removed, and only `exit`,
//! `exit_group` and `rt_sigreturn` remain allowed). A trapped call is not executed: it returns
//! `-ENOSYS` to its caller, and the SIGSYS handler counts it.
//!
//! ```no_run
//! std::thread::spawn(|| {
//!     let _rt = hushtrace::NoSyscallGuard::new();
//!     hushtrace::verify::trap_syscalls_on_this_thread().expect("seccomp");
//!     for i in 0..1000u64 {
//!         hushtrace::event!("rt", "tick", i = i);
//!     }
//!     assert_eq!(hushtrace::verify::trapped_syscalls(), 0);
//!     hushtrace::verify::exit_thread();
//! });
//! ```

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

extern "C" fn on_sigsys(_sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    TRAPPED.fetch_add(1, Ordering::SeqCst);
    // SAFETY: for SIGSYS the kernel fills `_sigsys` in the siginfo union: `void *call_addr`
    // at offset 16 then `int syscall` at offset 24 (same on x86_64 and aarch64).
    let nr = unsafe { *((info as *const u8).add(24) as *const libc::c_int) };
    let _ = FIRST_NR.compare_exchange(-1, nr as i64, Ordering::SeqCst, Ordering::SeqCst);
    // Make the trapped call return -ENOSYS.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `ctx` is the ucontext_t of the interrupted thread, valid during the handler.
    unsafe {
        let uc = ctx as *mut libc::ucontext_t;
        (*uc).uc_mcontext.gregs[libc::REG_RAX as usize] = -(libc::ENOSYS as i64);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ctx;
}

#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7;

/// Installs, on the calling thread only (no `SECCOMP_FILTER_FLAG_TSYNC`), a seccomp-bpf filter
/// that makes every system call except `exit`, `exit_group` and `rt_sigreturn` raise SIGSYS,
/// and a process-wide SIGSYS handler that counts them. Irreversible for this thread: finish
/// with [`exit_thread`].
pub fn trap_syscalls_on_this_thread() -> io::Result<()> {
    // SAFETY: a zeroed sigaction with a valid handler and SA_SIGINFO is a valid argument.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigsys as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let stmt = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let allow = libc::SECCOMP_RET_ALLOW;
    let trap = libc::SECCOMP_RET_TRAP;
    let prog = [
        stmt(LD_W_ABS, 4, 0, 0), // seccomp_data.arch
        stmt(JEQ_K, ARCH, 1, 0),
        stmt(RET_K, trap, 0, 0),
        stmt(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        stmt(JEQ_K, libc::SYS_rt_sigreturn as u32, 3, 0),
        stmt(JEQ_K, libc::SYS_exit as u32, 2, 0),
        stmt(JEQ_K, libc::SYS_exit_group as u32, 1, 0),
        stmt(RET_K, trap, 0, 0),
        stmt(RET_K, allow, 0, 0),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fprog` points to `prog`, both alive across the call; the kernel copies them.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &fprog as *const libc::sock_fprog,
            0,
            0,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Ends the calling thread with a raw `exit` system call (allowed by the filter), without
/// unwinding or running thread-local destructors. Join such a thread with `pthread_join`
/// (`JoinHandleExt::into_pthread_t`), not `JoinHandle::join`.
pub fn exit_thread() -> ! {
    // SAFETY: SYS_exit ends only the calling thread; nothing runs after it.
    unsafe { libc::syscall(libc::SYS_exit, 0) };
    unreachable!("SYS_exit returned")
}

/// Joins a thread that ended with [`exit_thread`].
pub fn join_raw(handle: std::thread::JoinHandle<()>) {
    use std::os::unix::thread::JoinHandleExt;
    let t = handle.into_pthread_t();
    // SAFETY: `t` is a joinable thread that has not been joined or detached (we consumed the
    // handle).
    unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
}
