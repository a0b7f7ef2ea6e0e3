//! The seccomp-bpf filter and SIGSYS handler behind `hushtrace::verify`: architecture audit
//! values, system call numbers, the BPF program, and the register write that makes a trapped
//! call return `-ENOSYS`.
//!
//! How a trapped call returns: with `SECCOMP_RET_TRAP` the kernel does not execute the call,
//! rolls the registers back to the system call entry and raises SIGSYS. The return value the
//! caller sees is whatever the return register holds when the handler's `rt_sigreturn` restores
//! the saved context, so the handler writes `-ENOSYS` there: `RAX` on x86_64 (it would
//! otherwise still hold the system call number), `x0` on aarch64 (it would otherwise still
//! hold the first argument). Other architectures: [`trap_syscalls_on_this_thread`] returns
//! `ErrorKind::Unsupported`.

use std::io;
use std::sync::atomic::{AtomicPtr, Ordering};

/// `AUDIT_ARCH_*` of the native system call ABI, as seen in `seccomp_data.arch`. A call made
/// through another ABI (x86_64's i386 `int 0x80`, aarch64's AArch32 compat) has another value
/// and is trapped unconditionally. x32 calls carry `AUDIT_ARCH_X86_64` with bit 30 set in the
/// number, so they never equal the allowed numbers and are trapped too.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_003E); // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7); // AUDIT_ARCH_AARCH64
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: Option<u32> = None;

/// Offsets in `struct seccomp_data { int nr; __u32 arch; __u64 ip; __u64 args[6]; }`.
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;

/// Offset of `int _sigsys._syscall` in `siginfo_t`: after `si_signo`, `si_errno`, `si_code`,
/// padding to 8, and `void *_call_addr` (the same on every 64-bit Linux ABI).
#[cfg(target_pointer_width = "64")]
const SIGINFO_SYSCALL_OFFSET: usize = 24;
#[cfg(target_pointer_width = "32")]
const SIGINFO_SYSCALL_OFFSET: usize = 16;

/// The callback of the installed SIGSYS handler: a `fn(i64)` stored as a data pointer (null: none).
static ON_TRAP: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Makes the interrupted system call return `-ENOSYS` by writing the return register of the
/// saved context.
///
/// # Safety
/// `ctx` must be the `ucontext_t *` the kernel passed to an `SA_SIGINFO` handler of the
/// current signal.
#[cfg(target_arch = "x86_64")]
unsafe fn set_return_enosys(ctx: *mut libc::c_void) {
    let uc = ctx as *mut libc::ucontext_t;
    // SAFETY: by the caller's contract `uc` is the live ucontext_t of this signal; RAX is the
    // system call return register on x86_64.
    unsafe { (*uc).uc_mcontext.gregs[libc::REG_RAX as usize] = -(libc::ENOSYS as i64) };
}

/// See the x86_64 version; on aarch64 the return register is `x0` (`regs[0]`).
///
/// # Safety
/// As for the x86_64 version.
#[cfg(target_arch = "aarch64")]
unsafe fn set_return_enosys(ctx: *mut libc::c_void) {
    let uc = ctx as *mut libc::ucontext_t;
    // SAFETY: by the caller's contract `uc` is the live ucontext_t of this signal; x0 is the
    // system call return register on aarch64.
    unsafe { (*uc).uc_mcontext.regs[0] = (-(libc::ENOSYS as i64)) as u64 };
}

/// Never called: the filter is not installed on other architectures.
///
/// # Safety
/// None needed; does nothing.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn set_return_enosys(_ctx: *mut libc::c_void) {}

extern "C" fn on_sigsys(_sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: for SIGSYS raised by seccomp the kernel fills `_sigsys` in the siginfo union; the
    // `int _syscall` member is at SIGINFO_SYSCALL_OFFSET (see there).
    let nr = unsafe { *((info as *const u8).add(SIGINFO_SYSCALL_OFFSET) as *const libc::c_int) };
    // SAFETY: `ctx` is this handler's ucontext_t (SA_SIGINFO).
    unsafe { set_return_enosys(ctx) };
    let f = ON_TRAP.load(Ordering::Acquire);
    if !f.is_null() {
        // SAFETY: ON_TRAP only ever holds null or a `fn(i64)` cast to a data pointer (both
        // pointer-sized); the Acquire load pairs with the Release store.
        let f: fn(i64) = unsafe { std::mem::transmute::<*mut (), fn(i64)>(f) };
        f(nr as i64);
    }
}

/// Installs, on the calling thread only (no `SECCOMP_FILTER_FLAG_TSYNC`), a seccomp-bpf filter
/// that makes every system call except `exit`, `exit_group` and `rt_sigreturn` raise SIGSYS,
/// and a process-wide SIGSYS handler that makes the trapped call return `-ENOSYS` and then
/// calls `on_trap(number)` (in signal context: it must be async-signal-safe). Irreversible for
/// this thread: finish with [`exit_thread`].
///
/// Errors: `ErrorKind::Unsupported` on architectures other than x86_64 and aarch64; the errno
/// of `sigaction` or `prctl` otherwise (e.g. `EINVAL` from a kernel without seccomp, or under
/// `qemu-user`, which refuses guest seccomp filters).
pub fn trap_syscalls_on_this_thread(on_trap: fn(i64)) -> io::Result<()> {
    let Some(arch) = AUDIT_ARCH else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "seccomp verification is implemented for x86_64 and aarch64 only",
        ));
    };
    ON_TRAP.store(on_trap as *mut (), Ordering::Release);
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
        stmt(LD_W_ABS, SECCOMP_DATA_ARCH, 0, 0),
        stmt(JEQ_K, arch, 1, 0),
        stmt(RET_K, trap, 0, 0),
        stmt(LD_W_ABS, SECCOMP_DATA_NR, 0, 0),
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
/// unwinding or running thread-local destructors.
pub fn exit_thread() -> ! {
    // SAFETY: SYS_exit ends only the calling thread; nothing runs after it.
    unsafe { libc::syscall(libc::SYS_exit, 0) };
    unreachable!("SYS_exit returned")
}

/// Joins a thread that ended with [`exit_thread`] (`pthread_join`: `JoinHandle::join` would
/// wait for a result the thread never wrote).
pub fn join_raw(handle: std::thread::JoinHandle<()>) {
    use std::os::unix::thread::JoinHandleExt;
    let t = handle.into_pthread_t();
    // SAFETY: `t` is a joinable thread that has not been joined or detached (we consumed the
    // handle).
    unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
}
