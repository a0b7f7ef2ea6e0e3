//! One call of each method `crates/hushtrace/clippy.toml` disallows, in a module that denies
//! the lint as the runtime's hot-path modules do. `ci/lint-probe.sh` runs clippy with that
//! configuration and fails unless every entry is reported here (an entry whose path does not
//! resolve, or that clippy does not match, would silently check nothing).
#![deny(clippy::disallowed_methods)]
#![allow(unused_must_use, unused)]

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};

pub fn alloc() {
    let mut v: Vec<u8> = Vec::with_capacity(1);
    v.push(1);
    v.reserve(1);
    v.extend_from_slice(&[1]);
    v.insert(0, 1);
    v.resize(4, 0);
    v.append(&mut Vec::new());
    let _ = Box::new(1);
    let _ = Arc::new(1);
    let mut s = String::with_capacity(1);
    s.push_str("a");
    s.push('a');
    let _ = ToString::to_string(&1);
    let layout = std::alloc::Layout::new::<u64>();
    unsafe {
        std::alloc::alloc(layout);
        std::alloc::alloc_zeroed(layout);
    }
    let _ = std::fmt::format(format_args!("{}", 1));
    let mut d: VecDeque<u8> = VecDeque::new();
    d.push_back(1);
    d.push_front(1);
    HashMap::<u8, u8>::new().insert(1, 1);
    BTreeMap::<u8, u8>::new().insert(1, 1);
    HashSet::<u8>::new().insert(1);
    static ONCE: OnceLock<u8> = OnceLock::new();
    ONCE.get_or_init(|| 1);
    let _ = std::thread::current();
}

pub fn locks(m: &Mutex<u8>, r: &RwLock<u8>, c: &Condvar) {
    drop(m.lock());
    drop(m.try_lock());
    drop(r.read());
    drop(r.write());
    drop(r.try_read());
    drop(r.try_write());
    let g = m.lock().unwrap();
    drop(c.wait(g));
}

pub fn waits() {
    std::thread::sleep(std::time::Duration::ZERO);
    std::thread::yield_now();
    std::thread::park();
    let t = std::time::Instant::now();
    let _ = std::time::SystemTime::now();
    let _ = t.elapsed();
}

pub unsafe fn libc_calls() {
    let mut ts: libc::timespec = std::mem::zeroed();
    libc::syscall(0);
    libc::write(1, std::ptr::null(), 0);
    libc::read(0, std::ptr::null_mut(), 0);
    libc::open(std::ptr::null(), 0);
    libc::close(-1);
    libc::mmap(std::ptr::null_mut(), 0, 0, 0, -1, 0);
    libc::munmap(std::ptr::null_mut(), 0);
    libc::madvise(std::ptr::null_mut(), 0, 0);
    libc::mlock(std::ptr::null(), 0);
    libc::clock_gettime(0, &mut ts);
    libc::gettid();
    libc::getpid();
    libc::sched_yield();
    libc::nanosleep(&ts, std::ptr::null_mut());
    libc::pthread_sigmask(0, std::ptr::null(), std::ptr::null_mut());
    libc::sigprocmask(0, std::ptr::null(), std::ptr::null_mut());
    libc::kill(0, 0);
    libc::raise(0);
    libc::prctl(0);
}

pub fn rustix_calls(fd: std::os::fd::BorrowedFd<'_>) {
    use rustix::fs::{Mode, OFlags};
    let _ = rustix::fs::openat(fd, "x", OFlags::empty(), Mode::empty());
    let _ = rustix::fs::fstat(fd);
    let _ = rustix::fs::ftruncate(fd, 0);
    let _ = rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::empty(), 0, 0);
    let _ = rustix::fs::statvfs("/");
    let _ = rustix::fs::fcntl_getfl(fd);
    let _ = rustix::fs::fcntl_setfl(fd, OFlags::empty());
    let _ = rustix::fs::mkdirat(fd, "x", Mode::empty());
    let _ = rustix::fs::renameat(fd, "x", fd, "y");
    let _ = rustix::fs::unlinkat(fd, "x", rustix::fs::AtFlags::empty());
    let _ = rustix::io::pwrite(fd, &[], 0);
    let _ = rustix::io::pwritev(fd, &[], 0);
    let _ = rustix::io::read(fd, &mut [0u8; 1]);
    let _ = rustix::io::write(fd, &[]);
    let _ = rustix::process::geteuid();
    let _ = rustix::process::test_kill_process(rustix::process::getpid());
    let _ = rustix::net::sockopt::socket_peercred(fd);
    let word = std::sync::atomic::AtomicU32::new(0);
    let _ = rustix::thread::futex::wait(&word, rustix::thread::futex::Flags::PRIVATE, 0, None);
    let _ = rustix::thread::futex::wake(&word, rustix::thread::futex::Flags::PRIVATE, 1);
}
