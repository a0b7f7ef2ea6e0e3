//! Linux system calls used by the tracer (see the contract in `platform/mod.rs`). None of these
//! is called from a tracepoint of a thread in no-syscall mode.

mod seccomp;
pub use seccomp::{exit_thread, join_raw, trap_syscalls_on_this_thread};

use super::ThreadSched;
use std::io;
use std::marker::PhantomData;

/// `getpid()`: the process id in the caller's pid namespace.
pub fn getpid() -> u32 {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() as u32 }
}

/// `gettid()`: the calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// `pthread_self()`: no system call (reads the thread pointer).
pub fn pthread_self() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

/// The calling thread's kernel name (`comm`, at most 15 bytes), via `prctl(PR_GET_NAME)`.
pub fn thread_name() -> [u8; 16] {
    let mut buf = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes (NUL included) into the buffer we pass.
    unsafe {
        libc::prctl(
            libc::PR_GET_NAME,
            buf.as_mut_ptr() as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    buf[15] = 0;
    buf
}

/// Sets the calling thread's kernel name via `prctl(PR_SET_NAME)`; `name` is cut to 15 bytes.
/// Returns the 16-byte NUL-padded name the kernel now has.
pub fn set_thread_name(name: &str) -> [u8; 16] {
    let mut buf = [0u8; 16];
    let bytes = name.as_bytes();
    let mut n = bytes.len().min(15);
    if let Some(z) = bytes[..n].iter().position(|&b| b == 0) {
        n = z;
    }
    buf[..n].copy_from_slice(&bytes[..n]);
    // SAFETY: `buf` is NUL-terminated (buf[15] == 0 at least) and lives across the call.
    unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0) };
    buf
}

/// Sets the calling thread's scheduling (`sched_setscheduler` or `setpriority` on its own
/// thread id: both are per thread on Linux, and threads it starts inherit them).
pub fn set_thread_sched(sched: ThreadSched) -> io::Result<()> {
    let (policy, prio) = match sched {
        ThreadSched::Fifo(p) => (libc::SCHED_FIFO, p),
        ThreadSched::RoundRobin(p) => (libc::SCHED_RR, p),
        // SCHED_OTHER first: the thread may have inherited a real-time policy (leaving one is
        // always allowed).
        ThreadSched::Nice(_) => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid sched_param that lives across the call; pid 0 is the calling
    // thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if let ThreadSched::Nice(n) = sched {
        // SAFETY: setpriority takes plain integers; errno is read right after.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, gettid(), n) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The calling thread's scheduling (`None` for a policy other than `SCHED_OTHER`, `SCHED_FIFO`
/// and `SCHED_RR`, or when it cannot be read) and its CPUs (`None` if unreadable).
pub fn thread_sched() -> (Option<ThreadSched>, Option<Vec<usize>>) {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread.
    let policy = unsafe { libc::sched_getscheduler(0) };
    // SAFETY: pid 0 is the calling thread; `param` is a valid out-parameter.
    let got = unsafe { libc::sched_getparam(0, &mut param) } == 0;
    let sched = match policy {
        libc::SCHED_FIFO if got => Some(ThreadSched::Fifo(param.sched_priority)),
        libc::SCHED_RR if got => Some(ThreadSched::RoundRobin(param.sched_priority)),
        libc::SCHED_OTHER => {
            // -1 is a valid nice value too, so errno (cleared first) tells an error.
            // SAFETY: __errno_location points at this thread's errno.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: getpriority takes plain integers.
            let n = unsafe { libc::getpriority(libc::PRIO_PROCESS, gettid()) };
            // SAFETY: as above, this thread's errno.
            (unsafe { *libc::__errno_location() } == 0).then_some(ThreadSched::Nice(n))
        }
        _ => None,
    };
    // SAFETY: cpu_set_t is a plain bit array; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes; pid 0 is the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, size, &mut set) };
    let cpus = (r == 0).then(|| {
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: every index is below CPU_SETSIZE, so inside `set`.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    });
    (sched, cpus)
}

/// Restricts the calling thread to `cpus` (`sched_setaffinity` on its own thread id; threads
/// it starts inherit the mask). Numbers at or above `CPU_SETSIZE` are an error.
pub fn set_thread_cpus(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `c` < CPU_SETSIZE (checked above), so CPU_SET writes a bit inside `set`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The process name (`/proc/self/comm`, the main thread's `comm`), or `""`.
pub fn process_name() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim_end_matches('\n').to_string())
        .unwrap_or_default()
}

/// The kernel's boot id (`/proc/sys/kernel/random/boot_id`, a UUID in text form), shared by
/// every process of this boot; `None` if it cannot be read.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

/// The host name, for the trace environment.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: we pass the buffer and its length; gethostname NUL-terminates within it or
    // truncates, and we force a final NUL.
    unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len() - 1) };
    let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC / CLOCK_REALTIME always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `clock_gettime(CLOCK_REALTIME)` in nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Locks `len` bytes at `ptr` into RAM; errors (typically EPERM / ENOMEM under RLIMIT_MEMLOCK)
/// are returned so the caller can carry on without the lock.
pub fn mlock(ptr: *const u8, len: usize) -> io::Result<()> {
    // SAFETY: mlock only reads the address range; an invalid range yields an error, not UB.
    if unsafe { libc::mlock(ptr as *const libc::c_void, len) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Unlocks a range locked by [`mlock`].
pub fn munlock(ptr: *const u8, len: usize) {
    // SAFETY: as for mlock; errors are irrelevant when unlocking.
    unsafe { libc::munlock(ptr as *const libc::c_void, len) };
}

/// Physical memory of the machine in bytes (`sysconf(_SC_PHYS_PAGES) * page size`), or `None`
/// if unknown.
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    (pages > 0).then(|| pages as u64 * page_size() as u64)
}

/// The soft `RLIMIT_MEMLOCK` of the process in bytes, or `None` when it is unlimited or cannot
/// be read. (A process with `CAP_IPC_LOCK` may lock more than this.)
pub fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer for getrlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is 32 bits on some 32-bit targets
    (r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur as u64)
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// Issues a full memory barrier on every running thread of **this process** (`membarrier(2)`,
/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED`, registering the process first when needed): IPIs to the
/// CPUs running our threads, bounded in time, unlike `MEMBARRIER_CMD_GLOBAL`, which waits for
/// every CPU of the system to schedule and took up to 21 s under fork and thread-churn load.
/// Returns false when the kernel refuses (the caller then falls back to a sleep).
pub fn membarrier() -> bool {
    let call = |cmd: libc::c_int| {
        // SAFETY: membarrier with a valid command and flags 0 has no memory-safety
        // preconditions.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) == 0 }
    };
    // Not registered yet (or a fork child whose registration did not carry over): register,
    // then retry once.
    call(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
        || (call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
            && call(MEMBARRIER_CMD_PRIVATE_EXPEDITED))
}

/// Registers fork handlers with `pthread_atfork`.
pub fn atfork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) {
    // SAFETY: the handlers are plain `extern "C" fn()` with 'static lifetime.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// Registers a process-exit handler with `atexit`.
pub fn atexit(f: extern "C" fn()) {
    // SAFETY: `f` is a plain `extern "C" fn()` with 'static lifetime.
    unsafe { libc::atexit(f) };
}

/// Anonymous private zero-filled memory of `len` bytes (`mmap`), or `None`.
pub fn map_anon(len: usize) -> Option<*mut u8> {
    // SAFETY: an anonymous private mapping with no address hint has no preconditions; the
    // result is checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `p`/`len` is the mapping just created. A fork() child gets zero-filled pages
    // instead of a copy-on-write view of the parent's events (it never reads them).
    unsafe { libc::madvise(p, len, libc::MADV_WIPEONFORK) };
    Some(p as *mut u8)
}

/// A shared mapping of the first `len` bytes of the file `fd` (a ring that outlives the
/// process), or `None`. The mapping is `MADV_DONTFORK`: a fork child does not inherit it (it
/// must never write into its parent's ring); see [`remap_private`].
pub fn map_shared(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> Option<*mut u8> {
    use std::os::fd::AsRawFd;
    // SAFETY: a shared mapping of a file we own, no address hint; checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `p`/`len` is the mapping just created; the advice only affects fork().
    unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) };
    Some(p as *mut u8)
}

/// Fork child: puts private, zero-filled anonymous memory at `ptr..ptr+len` (a ring the child
/// did not inherit because it is `MADV_DONTFORK`), so the forking thread keeps a ring at the
/// same address, its own. One `mmap(MAP_FIXED)`: async-signal-safe. Returns false on failure.
///
/// # Safety
/// `ptr..ptr+len` must be a range this process reserved for a ring (nothing else may live
/// there: it is replaced).
pub unsafe fn remap_private(ptr: *mut u8, len: usize) -> bool {
    // SAFETY: guaranteed by the caller; MAP_FIXED replaces whatever is (not) mapped there.
    let p = unsafe {
        libc::mmap(
            ptr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    p == ptr as *mut libc::c_void
}

/// Asks for transparent huge pages on a ring that is about to be fully touched anyway (the
/// buffer of a no-syscall thread): fewer TLB misses on its write path. Rings below 2 MiB, or a
/// kernel with THP disabled, are left alone.
pub fn advise_hugepages(ptr: *mut u8, len: usize) {
    if len >= 2 << 20 {
        // SAFETY: madvise only changes the kernel's paging policy for our own mapping.
        unsafe { libc::madvise(ptr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    }
}

/// Releases a mapping made by [`map_anon`].
///
/// # Safety
/// `ptr`/`len` must be exactly a live mapping returned by `map_anon`, no longer used.
pub unsafe fn unmap(ptr: *mut u8, len: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe { libc::munmap(ptr as *mut libc::c_void, len) };
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// 16 random bytes for UUIDs, from `getrandom(2)`, mixed with time and pid if that fails.
pub fn random_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    // SAFETY: getrandom writes at most `u.len()` bytes into `u`.
    let n = unsafe { libc::getrandom(u.as_mut_ptr() as *mut libc::c_void, u.len(), 0) };
    if n != 16 {
        let seed = realtime_ns() ^ ((getpid() as u64) << 32) ^ monotonic_ns().rotate_left(17);
        u[..8].copy_from_slice(&seed.to_le_bytes());
        u[8..].copy_from_slice(&seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    }
    u[6] = (u[6] & 0x0f) | 0x40; // version 4
    u[8] = (u[8] & 0x3f) | 0x80; // RFC 4122 variant
    u
}

/// Aborts the process (the `abort` no-syscall policy).
pub fn abort() -> ! {
    std::process::abort()
}

/// Blocks every asynchronous signal on the calling thread until dropped (then restores the
/// previous mask). Tracer control paths that hold a lock run under it, so a signal handler that
/// traces cannot interrupt them and wait for the lock its own thread holds. Synchronous fault
/// signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL) stay deliverable.
///
/// Not `Send` (nor `Sync`): the saved mask belongs to the thread that blocked, and dropping the
/// block on another thread would install it there. `verify::__contract` proves it with a
/// `compile_fail` doc test.
#[derive(Debug)]
pub struct SignalBlock {
    old: libc::sigset_t,
    /// Makes the type `!Send + !Sync`.
    _not_send: PhantomData<*const ()>,
}

impl SignalBlock {
    /// Blocks signals (two system calls: control paths only).
    #[allow(clippy::new_without_default)] // a `Default` that blocks signals would surprise
    pub fn new() -> SignalBlock {
        // SAFETY: sigset_t is plain data; sigfillset/sigdelset/pthread_sigmask only write the
        // sets we pass and the calling thread's mask.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            for s in [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL] {
                libc::sigdelset(&mut all, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            SignalBlock {
                old,
                _not_send: PhantomData,
            }
        }
    }
}

impl Drop for SignalBlock {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new` on the same thread: the type is
        // `!Send` (`_not_send`), so it is dropped on the thread that created it.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Blocks all asynchronous signals on the calling thread for good (the consumer thread, which
/// must never run an application's signal handler).
pub fn block_signals_forever() {
    std::mem::forget(SignalBlock::new());
}

/// A thread started with [`spawn_raw`].
#[derive(Debug)]
pub struct RawThread(libc::pthread_t);

/// Starts `f` on a new thread with `pthread_create` directly: no lock of the standard
/// library's thread machinery is involved, so this works in the child of a `fork()` even when
/// another thread of the parent was starting or exiting at the moment of the fork (glibc resets
/// its own thread-creation locks in the child). `f` must not use `std::thread::current()`,
/// `park` or other std thread APIs; a panic in it is caught and ends the thread.
pub fn spawn_raw(f: Box<dyn FnOnce() + Send>) -> io::Result<RawThread> {
    extern "C" fn trampoline(arg: *mut libc::c_void) -> *mut libc::c_void {
        // SAFETY: `arg` is the box leaked by `spawn_raw` for this thread, taken back once.
        let f = unsafe { Box::from_raw(arg as *mut Box<dyn FnOnce() + Send>) };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        std::ptr::null_mut()
    }
    let arg = Box::into_raw(Box::new(f)) as *mut libc::c_void;
    let mut t: libc::pthread_t = 0;
    // SAFETY: `t` is a valid out-pointer, default attributes (null), and `trampoline` takes
    // ownership of `arg` only if the thread starts.
    let r = unsafe { libc::pthread_create(&mut t, std::ptr::null(), trampoline, arg) };
    if r != 0 {
        // SAFETY: the thread did not start, so `arg` is still ours.
        drop(unsafe { Box::from_raw(arg as *mut Box<dyn FnOnce() + Send>) });
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(RawThread(t))
}

impl RawThread {
    /// Lets the thread run on its own: its resources go when it ends, nobody joins it.
    pub fn detach(self) {
        // SAFETY: a joinable thread we started, neither joined nor detached (consumes the
        // handle).
        unsafe { libc::pthread_detach(self.0) };
    }

    /// Waits for the thread to end.
    pub fn join(self) {
        // SAFETY: a joinable thread we started and have not joined (join consumes the handle).
        unsafe { libc::pthread_join(self.0, std::ptr::null_mut()) };
    }
}

/// Sleeps until `word` is woken by [`futex_wake`] or no longer holds `expected`, or `timeout`
/// passes (`futex(FUTEX_WAIT_PRIVATE)`; spurious returns are possible).
pub fn futex_wait(
    word: &std::sync::atomic::AtomicU32,
    expected: u32,
    timeout: std::time::Duration,
) {
    let ts = rustix::thread::futex::Timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    let _ = rustix::thread::futex::wait(
        word,
        rustix::thread::futex::Flags::PRIVATE,
        expected,
        Some(&ts),
    );
}

/// Wakes one thread sleeping in [`futex_wait`] on `word` (a system call).
pub fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    let _ = rustix::thread::futex::wake(word, rustix::thread::futex::Flags::PRIVATE, 1);
}

/// The effective user id of this process.
pub fn geteuid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The user id of the peer of a connected Unix socket (`SO_PEERCRED`).
pub fn peer_uid(sock: std::os::fd::BorrowedFd<'_>) -> io::Result<u32> {
    Ok(rustix::net::sockopt::socket_peercred(sock)?.uid.as_raw())
}

/// Gives the file `fd` a length of `len` bytes, every one of them allocated now
/// (`fallocate`), so a shared mapping of it never faults for want of space: a sparse file on a
/// full tmpfs raises SIGBUS at the first touch of a page the file system cannot supply. On a
/// file system without `fallocate` (`EOPNOTSUPP`), writes zeros instead (as `posix_fallocate`
/// does). `Err` (`ENOSPC`, `EFBIG`, ...) when the space cannot be had; the file may then be
/// partly allocated, and the caller removes it.
pub fn reserve_file(fd: std::os::fd::BorrowedFd<'_>, len: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    loop {
        match rustix::fs::fallocate(fd, FallocateFlags::empty(), 0, len) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::OPNOTSUPP) => break,
            Err(e) => return Err(e.into()),
        }
    }
    // Static: rings are made on threads with small stacks too.
    static ZEROS: [u8; 16 * 1024] = [0; 16 * 1024];
    let zeros = &ZEROS;
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(zeros.len() as u64) as usize;
        match rustix::io::pwrite(fd, &zeros[..n], off) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(w) => off += w as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Whether process `pid` is known not to exist any more (`kill(pid, 0)` fails with `ESRCH`).
/// A process of another user (`EPERM`) or any other answer counts as existing: the caller
/// never removes what might belong to a live process.
pub fn process_gone(pid: u32) -> bool {
    let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    rustix::process::test_kill_process(p) == Err(rustix::io::Errno::SRCH)
}

/// The size in bytes of the file system holding `path` (`statvfs`), or `None`.
pub fn fs_size(path: &std::path::Path) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some(st.f_blocks.saturating_mul(st.f_frsize))
}
