//! The platform boundary: every system call, every `libc` call, every `asm!` and every
//! `cfg(target_os)` / `cfg(target_arch)` of the runtime lives below this module (after
//! parking_lot's `imp` modules). The rest of the crate calls the functions re-exported here and
//! is portable Rust.
//!
//! Two implementations are selected with `cfg`, each behind the same contract:
//!
//! * **Operating system** — `linux.rs` (seccomp in `linux/seccomp.rs`) on Linux;
//!   `fallback.rs` (std only, no system call of its own) on every other target and under Miri.
//! * **Architecture** — `x86_64.rs` (`rdtsc`, `cpuid`, non-locked `cmpxchg`/`add`),
//!   `aarch64.rs` (`cntvct_el0`), `generic.rs` (no cycle counter) on every other architecture
//!   and under Miri; `local_atomic.rs` (the local primitives as relaxed atomics: LSE or
//!   exclusive-monitor atomics on aarch64) everywhere but on x86_64 outside Miri.
//!
//! [`SUPPORTED`] tells the runtime whether sessions can run on this target at all.
//!
//! # Contract
//!
//! "Syscall" says whether the function enters the kernel (never allowed on a tracepoint of a
//! thread in no-syscall mode). "AS-safe" says whether it may run in a signal handler or in the
//! child of a `fork()` of a multi-threaded process (POSIX async-signal-safety, or, marked
//! *raw*, a thin wrapper around one system call with no lock and no allocation). The fallback
//! (non-Linux, Miri) makes no system call of its own but uses std, which may allocate and lock:
//! none of its functions is AS-safe, except the ones marked *any*.
//!
//! | function | syscall | AS-safe | on failure |
//! |---|---|---|---|
//! | [`cycles`] | no (`rdtsc`, `mrs cntvct_el0`; generic: [`monotonic_ns`]; Miri: an atomic counter) | yes, any | cannot fail |
//! | [`counter_invariant`] | no (`cpuid`) | yes, any | `false` (use the fallback clock) |
//! | [`COUNTER_SOURCE`] | — | — | `"none"` when there is no counter |
//! | [`local_cas`], [`local_add`] | no (one non-locked instruction on x86_64, an atomic elsewhere) | yes, any | cannot fail |
//! | [`getpid`], [`gettid`] | yes | yes (POSIX / raw) | cannot fail |
//! | [`pthread_self`] | no (thread pointer) | yes in glibc/musl | cannot fail |
//! | [`thread_name`] | yes (`prctl`) | raw | all zeros |
//! | [`set_thread_name`] | yes (`prctl`) | raw | the name is returned but the kernel's may stay unchanged |
//! | [`hostname`] | yes (`gethostname`) | no (allocates) | `""` |
//! | [`process_name`] | yes (reads `/proc/self/comm`) | no | `""` |
//! | [`boot_id`] | yes (reads `/proc/sys/kernel/random/boot_id`) | no | `None` |
//! | [`monotonic_ns`], [`realtime_ns`] | yes or vDSO (`clock_gettime`) | yes (POSIX) | cannot fail (0 if the clock is missing) |
//! | [`mlock`] | yes | raw | `Err(errno)` (EPERM/ENOMEM under `RLIMIT_MEMLOCK`); fallback `Err(Unsupported)` |
//! | [`munlock`] | yes | raw | ignored |
//! | [`membarrier`] | yes (`MEMBARRIER_CMD_PRIVATE_EXPEDITED`, registering first) | raw | `false` (caller sleeps instead); fallback always `false` |
//! | [`spawn_raw`], [`RawThread::join`], [`RawThread::detach`] | yes (`pthread_create`/`pthread_join`/`pthread_detach`; fallback: a std thread) | no, but takes no std lock (usable in a fork child) | `Err(errno)` |
//! | [`geteuid`] | yes | raw | cannot fail (fallback: 0) |
//! | [`peer_uid`] | yes (`getsockopt(SO_PEERCRED)`) | raw | `Err(errno)`; fallback `Err(Unsupported)` |
//! | [`futex_wait`], [`futex_wake`] | yes (`futex`; fallback: 1 ms polling) | raw | spurious wake-ups |
//! | [`physical_memory`] | no (`sysconf`) | yes in glibc/musl | `None`; fallback `None` |
//! | [`memlock_limit`] | yes (`getrlimit`) | raw | `None` (also when unlimited); fallback `None` |
//! | [`atfork`] | no (libc bookkeeping) | no | ignored; fallback: no-op (no `fork`) |
//! | [`atexit`] | no | no | ignored; fallback: no-op |
//! | [`map_anon`] | yes (`mmap`, `madvise(MADV_WIPEONFORK)`) | raw | `None`; fallback: zeroed page-aligned heap memory |
//! | [`map_shared`] | yes (`mmap(MAP_SHARED)`, `madvise(MADV_DONTFORK)`) | raw | `None`; fallback always `None` (rings stay in process memory) |
//! | [`reserve_file`] | yes (`fallocate`; `pwrite` of zeros where it is unsupported) | raw | `Err(errno)` (`ENOSPC`...); fallback `Err(Unsupported)` |
//! | [`process_gone`] | yes (`kill(pid, 0)`) | raw | `false` (counts as alive); fallback always `false` |
//! | [`fs_size`] | yes (`statvfs`) | raw | `None`; fallback always `None` |
//! | [`remap_private`] | yes (`mmap(MAP_FIXED)`) | raw | `false`; fallback always `false` |
//! | [`advise_hugepages`] | yes (`madvise`) | raw | ignored; fallback: no-op |
//! | [`unmap`] | yes (`munmap`) | raw | ignored |
//! | [`page_size`] | no (`sysconf` reads the aux vector) | yes in glibc/musl | 4096 |
//! | [`random_uuid`] | yes (`getrandom`) | raw | mixes time and pid instead (never fails) |
//! | [`set_thread_sched`] | yes (`sched_setscheduler`, `setpriority`) | raw | `Err(errno)` (EPERM without `CAP_SYS_NICE`); fallback `Err(Unsupported)` |
//! | [`set_thread_cpus`] | yes (`sched_setaffinity`) | raw | `Err(errno)` (EINVAL for an offline CPU); fallback `Err(Unsupported)` |
//! | [`thread_sched`] | yes (`sched_getscheduler`, `sched_getparam`, `getpriority`, `sched_getaffinity`) | raw | `None` for what cannot be read; fallback `(None, None)` |
//! | [`abort`] | yes | yes (POSIX) | does not return |
//! | [`SignalBlock::new`] / drop | yes (`pthread_sigmask`) | yes (POSIX) | ignored; fallback: no-op |
//! | [`block_signals_forever`] | yes | yes (POSIX) | ignored; fallback: no-op |
//! | [`trap_syscalls_on_this_thread`] | yes (`sigaction`, `prctl` ×2) | no | `Err(errno)`; `Err(Unsupported)` off x86_64/aarch64 Linux |
//! | [`exit_thread`] | yes (raw `exit`) | raw | does not return; fallback: unwinds the thread |
//! | [`join_raw`] | yes (`pthread_join`) | no | ignored |
//!
//! Functions that may run in a no-syscall thread's tracepoint: only [`cycles`], [`local_cas`],
//! [`local_add`] and [`pthread_self`]. Functions the `fork()` child handler may call:
//! [`getpid`], [`gettid`], [`pthread_self`], [`random_uuid`].

// The loom models (`--cfg hushtrace_loom`) also run on the fallback: heap ring memory.
#[cfg(all(target_os = "linux", not(any(miri, hushtrace_loom))))]
mod linux;
#[cfg(all(target_os = "linux", not(any(miri, hushtrace_loom))))]
pub use linux::*;

#[cfg(any(miri, hushtrace_loom, not(target_os = "linux")))]
mod fallback;
#[cfg(any(miri, hushtrace_loom, not(target_os = "linux")))]
pub use fallback::*;

#[cfg(all(target_arch = "x86_64", not(miri)))]
// Under loom, `LocalU64` is a loom atomic and does not use `local_cas`/`local_add`.
#[cfg_attr(hushtrace_loom, allow(dead_code))]
mod x86_64;
#[cfg(all(target_arch = "x86_64", not(miri)))]
pub use x86_64::*;

#[cfg(all(target_arch = "aarch64", not(miri)))]
#[cfg_attr(hushtrace_loom, allow(dead_code))]
mod aarch64;
#[cfg(all(target_arch = "aarch64", not(miri)))]
pub use aarch64::*;

#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
#[cfg_attr(hushtrace_loom, allow(dead_code))]
mod generic;
#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub use generic::*;

// The local primitives as relaxed atomics: aarch64, every other architecture, and Miri.
#[cfg(any(miri, not(target_arch = "x86_64")))]
#[cfg_attr(hushtrace_loom, allow(dead_code))]
mod local_atomic;
#[cfg(any(miri, not(target_arch = "x86_64")))]
pub use local_atomic::{local_add, local_cas};

/// Scheduling of a thread, as [`thread_sched`] reads it and [`set_thread_sched`] sets it: a
/// real-time policy with its priority, or `SCHED_OTHER` with a nice value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadSched {
    /// `SCHED_FIFO` at this priority.
    Fifo(i32),
    /// `SCHED_RR` at this priority.
    RoundRobin(i32),
    /// `SCHED_OTHER` at this nice value.
    Nice(i32),
}

/// Whether tracing sessions can run on this target: `true` on Linux (under Miri too, on the
/// std fallbacks), `false` elsewhere. When it is `false` the crate still compiles: session start
/// reports an unsupported platform, tracepoints stay no-ops, and `verify` returns
/// `ErrorKind::Unsupported`.
pub const SUPPORTED: bool = cfg!(target_os = "linux");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_counter_advances() {
        let a = cycles();
        let mut b = cycles();
        for _ in 0..1000 {
            if b != a {
                break;
            }
            std::thread::yield_now();
            b = cycles();
        }
        assert!(b > a, "cycle counter did not advance: {a} -> {b}");
    }

    #[test]
    fn counter_source_names_the_counter() {
        if counter_invariant() {
            assert_ne!(COUNTER_SOURCE, "none");
        }
    }

    #[test]
    fn local_primitives() {
        #[repr(C, align(8))]
        struct Slot(core::cell::UnsafeCell<u64>);
        let s = Slot(core::cell::UnsafeCell::new(40));
        // SAFETY: `s` is an aligned u64 used only by this thread.
        unsafe {
            assert!(local_cas(s.0.get(), 40, 41));
            assert!(!local_cas(s.0.get(), 40, 99));
            local_add(s.0.get(), 1);
            local_add(s.0.get(), u64::MAX); // wraps: -1
        }
        assert_eq!(s.0.into_inner(), 41);
    }

    #[test]
    fn mapping_is_zeroed_page_aligned_and_writable() {
        let len = 3 * page_size();
        let p = map_anon(len).expect("map_anon");
        assert_eq!(p as usize % page_size(), 0);
        // SAFETY: `p` is a fresh mapping of `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p, len) };
        assert!(bytes.iter().all(|&b| b == 0));
        bytes[len - 1] = 7;
        advise_hugepages(p, len);
        if mlock(p, len).is_ok() {
            munlock(p, len);
        }
        // SAFETY: the mapping made above, no longer used.
        unsafe { unmap(p, len) };
        assert!(map_anon(0).is_none());
    }

    #[test]
    fn identity_and_clocks() {
        assert_ne!(getpid(), 0);
        assert_ne!(gettid(), 0);
        let main = (gettid(), pthread_self());
        let other = std::thread::spawn(|| (gettid(), pthread_self()))
            .join()
            .unwrap();
        assert_ne!(main.0, other.0);
        assert_ne!(main.1, other.1);
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
        // After 2020-01-01.
        assert!(realtime_ns() > 1_577_836_800_000_000_000);
        assert!(page_size() >= 4096 && page_size().is_power_of_two());
    }

    #[test]
    fn uuids_differ_and_are_version_4() {
        let (a, b) = (random_uuid(), random_uuid());
        assert_ne!(a, b);
        assert_eq!(a[6] >> 4, 4);
        assert_eq!(a[8] & 0xc0, 0x80);
    }

    #[test]
    fn thread_names_round_trip() {
        std::thread::spawn(|| {
            let set = set_thread_name("a-rather-long-thread-name");
            assert_eq!(&set[..15], b"a-rather-long-t");
            assert_eq!(set[15], 0);
            assert_eq!(thread_name(), set);
        })
        .join()
        .unwrap();
    }

    /// The calling thread's signal mask: (SIGUSR1 blocked, SIGUSR2 blocked, SIGSEGV blocked).
    #[cfg(all(target_os = "linux", not(miri)))]
    fn mask_bits() -> (bool, bool, bool) {
        // SAFETY: sigset_t is plain data; with a null new set pthread_sigmask only reads the
        // calling thread's mask into `cur`.
        unsafe {
            let mut cur: libc::sigset_t = std::mem::zeroed();
            assert_eq!(
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur),
                0
            );
            (
                libc::sigismember(&cur, libc::SIGUSR1) == 1,
                libc::sigismember(&cur, libc::SIGUSR2) == 1,
                libc::sigismember(&cur, libc::SIGSEGV) == 1,
            )
        }
    }

    /// Blocks (or unblocks) one signal on the calling thread.
    #[cfg(all(target_os = "linux", not(miri)))]
    fn set_blocked(sig: libc::c_int, blocked: bool) {
        // SAFETY: as in `mask_bits`; the set holds one signal.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            let how = if blocked {
                libc::SIG_BLOCK
            } else {
                libc::SIG_UNBLOCK
            };
            assert_eq!(libc::pthread_sigmask(how, &set, std::ptr::null_mut()), 0);
        }
    }

    /// A block blocks asynchronous signals but never the synchronous fault signals; an inner
    /// block's drop leaves the outer one in force, and the outer one's drop restores exactly
    /// the mask the thread had before (one signal blocked by the thread itself stays blocked,
    /// the others come back unblocked).
    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn signal_block_nests_and_restores() {
        std::thread::spawn(|| {
            set_blocked(libc::SIGUSR1, false);
            set_blocked(libc::SIGUSR2, true);
            assert_eq!(mask_bits(), (false, true, false), "the thread's own mask");
            let outer = SignalBlock::new();
            assert_eq!(mask_bits(), (true, true, false), "inside the outer block");
            {
                let _inner = SignalBlock::new();
                assert_eq!(mask_bits(), (true, true, false), "inside the inner block");
            }
            assert_eq!(
                mask_bits(),
                (true, true, false),
                "the inner drop left the outer block"
            );
            drop(outer);
            assert_eq!(
                mask_bits(),
                (false, true, false),
                "the outer drop restored the mask"
            );
        })
        .join()
        .unwrap();
    }

    /// A signal handler hammering the same word as the interrupted thread: with the local
    /// primitives no update is lost (x86_64: the non-locked instructions are atomic with
    /// respect to the own CPU, aarch64: the exclusive monitor is cleared on exception return).
    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn local_primitives_are_atomic_with_respect_to_signal_handlers() {
        use core::cell::UnsafeCell;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

        #[repr(C, align(8))]
        struct Word(UnsafeCell<u64>);
        // SAFETY: only the test thread and its own signal handler touch the word (the signal
        // is thread-directed), which is exactly the local primitives' contract.
        unsafe impl Sync for Word {}
        static WORD: Word = Word(UnsafeCell::new(0));
        static HANDLED: AtomicU64 = AtomicU64::new(0);

        fn bump_twice() {
            let p = WORD.0.get();
            // SAFETY: see `Word`; `p` is aligned (repr(align(8))).
            unsafe {
                loop {
                    let o = core::ptr::read_volatile(p);
                    if local_cas(p, o, o + 1) {
                        break;
                    }
                }
                local_add(p, 1);
            }
        }
        extern "C" fn on_signal(_: libc::c_int) {
            bump_twice();
            HANDLED.fetch_add(1, Ordering::Relaxed);
        }
        // SIGURG: ignored by default and unused by the tests (a real-time signal would queue
        // up while the handler runs and drown the thread).
        let sig = libc::SIGURG;
        // SAFETY: a zeroed sigaction with a valid handler is a valid argument.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
        }
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let d = done.clone();
        // One signal in flight at a time, sent as soon as the previous one was handled.
        let killer = std::thread::spawn(move || {
            while !d.load(Ordering::Relaxed) {
                let h = HANDLED.load(Ordering::Relaxed);
                // SAFETY: the test thread outlives this loop (it joins us before returning).
                unsafe { libc::pthread_kill(me, sig) };
                while HANDLED.load(Ordering::Relaxed) == h && !d.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            }
        });
        // Run until enough handlers interrupted the loop, or for at most 2 s.
        let start = std::time::Instant::now();
        let mut iterations = 0u64;
        while HANDLED.load(Ordering::Relaxed) < 5_000 && start.elapsed().as_secs() < 2 {
            for _ in 0..1024 {
                bump_twice();
            }
            iterations += 1024;
        }
        done.store(true, Ordering::Relaxed);
        killer.join().unwrap(); // a system call: pending signals are delivered before it returns
                                // SAFETY: a zeroed sigaction with SIG_DFL restores SIGURG's default (ignore).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        let handled = HANDLED.load(Ordering::Relaxed);
        // SAFETY: see `Word`; the handler no longer runs.
        let total = unsafe { core::ptr::read_volatile(WORD.0.get()) };
        assert!(handled > 0, "no signal arrived during the loop");
        assert_eq!(
            total,
            2 * iterations + 2 * handled,
            "{handled} handlers ran"
        );
    }
}
