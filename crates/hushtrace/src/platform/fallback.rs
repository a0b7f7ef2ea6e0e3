//! The std-only platform: every target other than Linux, and Miri on any target (which cannot
//! run `mmap`, `madvise`, `mlock`, `membarrier` or inline assembly).
//!
//! Nothing here makes a system call of its own or uses `libc`; std may allocate and lock, so
//! nothing here is async-signal-safe. Memory comes from the global allocator (zeroed,
//! page-aligned), memory locking and huge pages are unavailable, there is no `fork`, signal
//! masks are not touched, and `verify` reports `ErrorKind::Unsupported`. On non-Linux targets
//! `SUPPORTED` is false and the runtime refuses to start sessions; under Miri on Linux the
//! runtime runs on these fallbacks. Everything here works under Miri's default isolation (no
//! host wall clock, environment or file system needed).

use super::ThreadSched;
use std::alloc::Layout;
use std::cell::Cell;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The process id from std.
pub fn getpid() -> u32 {
    std::process::id()
}

static NEXT_TID: AtomicU32 = AtomicU32::new(1);

thread_local! {
    /// A small per-process thread number, assigned on first use (0: not yet assigned).
    static TID: Cell<u32> = const { Cell::new(0) };
    /// The name given by `set_thread_name`, which std cannot give the running thread.
    static NAME: Cell<Option<[u8; 16]>> = const { Cell::new(None) };
}

/// A thread number unique in this process (1 for the first thread that asks), not a kernel id.
pub fn gettid() -> u32 {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_TID.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// A per-thread address (of a thread-local), unique among live threads.
pub fn pthread_self() -> u64 {
    TID.with(|t| t as *const Cell<u32> as usize as u64)
}

fn name16(name: &str) -> [u8; 16] {
    let mut buf = [0u8; 16];
    let bytes = name.as_bytes();
    let mut n = bytes.len().min(15);
    if let Some(z) = bytes[..n].iter().position(|&b| b == 0) {
        n = z;
    }
    buf[..n].copy_from_slice(&bytes[..n]);
    buf
}

/// The name given by [`set_thread_name`], else std's name of the thread (cut to 15 bytes).
pub fn thread_name() -> [u8; 16] {
    NAME.with(|n| n.get())
        .unwrap_or_else(|| name16(std::thread::current().name().unwrap_or("")))
}

/// Remembers `name` (cut to 15 bytes) as this thread's name for [`thread_name`]; the OS name
/// is unchanged. Returns the 16-byte NUL-padded name.
pub fn set_thread_name(name: &str) -> [u8; 16] {
    let buf = name16(name);
    NAME.with(|n| n.set(Some(buf)));
    buf
}

/// The host name from the environment (`HOSTNAME`, `COMPUTERNAME`), or `""`.
pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .or_else(|_| std::env::var("COMPUTERNAME"))
        .unwrap_or_default()
}

/// The executable's file name, or `""`.
pub fn process_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// No boot id is known here.
pub fn boot_id() -> Option<String> {
    None
}

/// Nanoseconds since a process-wide origin (std's monotonic `Instant`); 0 is never returned.
pub fn monotonic_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    origin.elapsed().as_nanos() as u64 + 1
}

/// Under Miri (whose isolation hides the wall clock): a fixed epoch time, 2024-01-01T00:00Z,
/// plus [`monotonic_ns`], so runs are deterministic.
#[cfg(miri)]
pub fn realtime_ns() -> u64 {
    1_704_067_200_000_000_000 + monotonic_ns()
}

/// Nanoseconds since the Unix epoch (std's `SystemTime`; 0 before the epoch).
#[cfg(not(miri))]
pub fn realtime_ns() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Memory locking is not available: always `ErrorKind::Unsupported`.
pub fn mlock(_ptr: *const u8, _len: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "mlock is not available on this platform",
    ))
}

/// Nothing to unlock.
pub fn munlock(_ptr: *const u8, _len: usize) {}

/// No process-wide barrier: always false (the caller falls back to a sleep).
pub fn membarrier() -> bool {
    false
}

/// A thread started with [`spawn_raw`] (a std thread here).
#[derive(Debug)]
pub struct RawThread(std::thread::JoinHandle<()>);

/// Starts `f` on a new std thread.
pub fn spawn_raw(f: Box<dyn FnOnce() + Send>) -> io::Result<RawThread> {
    std::thread::Builder::new().spawn(f).map(RawThread)
}

impl RawThread {
    /// Lets the thread run on its own (dropping a std handle detaches it).
    pub fn detach(self) {
        drop(self.0);
    }

    /// Waits for the thread to end.
    pub fn join(self) {
        let _ = self.0.join();
    }
}

/// Sleeps a little (at most `timeout`, at most 1 ms): no futex here, so wake-ups are polled.
pub fn futex_wait(
    word: &std::sync::atomic::AtomicU32,
    expected: u32,
    timeout: std::time::Duration,
) {
    if word.load(std::sync::atomic::Ordering::Acquire) == expected {
        std::thread::sleep(timeout.min(std::time::Duration::from_millis(1)));
    }
}

/// Nothing to do: [`futex_wait`] polls.
pub fn futex_wake(_word: &std::sync::atomic::AtomicU32) {}

/// No shared file mappings here: rings stay in process memory (`None`).
pub fn map_shared(_fd: std::os::fd::BorrowedFd<'_>, _len: usize) -> Option<*mut u8> {
    None
}

/// Never called (no shared rings here).
///
/// # Safety
/// As on Linux.
pub unsafe fn remap_private(_ptr: *mut u8, _len: usize) -> bool {
    false
}

/// Unknown here.
pub fn physical_memory() -> Option<u64> {
    None
}

/// No memory locking here, hence no limit to report.
pub fn memlock_limit() -> Option<u64> {
    None
}

/// No `fork()` here: the handlers are never needed.
pub fn atfork(_prepare: extern "C" fn(), _parent: extern "C" fn(), _child: extern "C" fn()) {}

/// Not registered: the runtime's exit flush does not run (a stopped session has flushed).
pub fn atexit(_f: extern "C" fn()) {}

fn layout(len: usize) -> Option<Layout> {
    Layout::from_size_align(len, page_size()).ok()
}

/// `len` zeroed bytes aligned to [`page_size`] from the global allocator, or `None` (also for
/// `len == 0`, as `mmap` refuses it).
pub fn map_anon(len: usize) -> Option<*mut u8> {
    let l = layout(len).filter(|l| l.size() > 0)?;
    // SAFETY: `l` has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(l) };
    (!p.is_null()).then_some(p)
}

/// No huge pages here.
pub fn advise_hugepages(_ptr: *mut u8, _len: usize) {}

/// Frees memory from [`map_anon`].
///
/// # Safety
/// `ptr`/`len` must be exactly a live allocation returned by `map_anon`, no longer used.
pub unsafe fn unmap(ptr: *mut u8, len: usize) {
    let l = layout(len).expect("unmap: length of a map_anon allocation");
    // SAFETY: by the caller's contract `ptr` was allocated by `map_anon(len)` with this layout.
    unsafe { std::alloc::dealloc(ptr, l) };
}

/// 4096 (the allocation alignment of [`map_anon`]).
pub fn page_size() -> usize {
    4096
}

/// 16 random bytes for UUIDs, from std's randomly seeded hasher mixed with time, pid and a
/// counter.
pub fn random_uuid() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    static N: AtomicU64 = AtomicU64::new(0);
    let mut u = [0u8; 16];
    for (i, chunk) in u.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(N.fetch_add(1, Ordering::Relaxed));
        h.write_u64(realtime_ns() ^ monotonic_ns().rotate_left(17));
        h.write_u32(getpid());
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    u[6] = (u[6] & 0x0f) | 0x40; // version 4
    u[8] = (u[8] & 0x3f) | 0x80; // RFC 4122 variant
    u
}

/// Aborts the process (the `abort` no-syscall policy).
pub fn abort() -> ! {
    std::process::abort()
}

/// Does nothing here (no signal masks), with the same type contract as on Linux: `!Send`.
#[derive(Debug)]
pub struct SignalBlock {
    _not_send: PhantomData<*const ()>,
}

impl SignalBlock {
    /// A no-op block.
    #[allow(clippy::new_without_default)] // as on Linux
    pub fn new() -> SignalBlock {
        SignalBlock {
            _not_send: PhantomData,
        }
    }
}

/// No signal masks here.
pub fn block_signals_forever() {}

fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "seccomp verification is available on Linux (x86_64, aarch64) only",
    )
}

/// Always `ErrorKind::Unsupported`: no seccomp here.
pub fn trap_syscalls_on_this_thread(_on_trap: fn(i64)) -> io::Result<()> {
    Err(unsupported())
}

/// Marker payload of the unwinding that [`exit_thread`] uses.
struct ExitThread;

/// Ends the calling thread by unwinding it with a private payload (`resume_unwind`: no panic
/// message); destructors run, unlike the raw `exit` on Linux. Aborts under `panic = "abort"`.
pub fn exit_thread() -> ! {
    std::panic::resume_unwind(Box::new(ExitThread))
}

/// Joins a thread that ended with [`exit_thread`] (its unwinding is not an error).
pub fn join_raw(handle: std::thread::JoinHandle<()>) {
    if let Err(payload) = handle.join() {
        if !payload.is::<ExitThread>() {
            std::panic::resume_unwind(payload);
        }
    }
}

/// The effective user id (std has no portable call: 0 here; sessions do not run here).
pub fn geteuid() -> u32 {
    0
}

/// Not available here: control sockets need `SO_PEERCRED`.
pub fn peer_uid(_sock: std::os::fd::BorrowedFd<'_>) -> io::Result<u32> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "peer credentials are not available on this platform",
    ))
}

/// No ring files here (rings stay in process memory): never called.
pub fn reserve_file(_fd: std::os::fd::BorrowedFd<'_>, _len: u64) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "ring files are not used on this platform",
    ))
}

/// Unknown here: every process counts as existing (nothing is ever cleaned up for it).
pub fn process_gone(_pid: u32) -> bool {
    false
}

/// Unknown here.
pub fn fs_size(_path: &std::path::Path) -> Option<u64> {
    None
}

/// Not available here: an error saying so.
pub fn set_thread_sched(_sched: ThreadSched) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "thread scheduling is set on Linux only",
    ))
}

/// Not available here: an error saying so.
pub fn set_thread_cpus(_cpus: &[usize]) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "CPU affinity is set on Linux only",
    ))
}

/// Not available here: nothing known.
pub fn thread_sched() -> (Option<ThreadSched>, Option<Vec<usize>>) {
    (None, None)
}
