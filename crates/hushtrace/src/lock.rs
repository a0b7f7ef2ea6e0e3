//! A tiny spin lock for the tracer's few control-path locks.
//!
//! Hand-rolled on purpose: a `pthread_atfork` prepare handler takes it and the parent/child
//! handlers release it without a guard ([`SpinLock::force_unlock`]); a std or parking_lot mutex
//! cannot be released that way safely in the child of a fork (parking_lot's unlock may touch its
//! global parking table). Never taken on the tracepoint fast path.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A spin lock that yields the CPU while waiting.
#[derive(Debug)]
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reachable through a guard, which exists for at most one thread at a
// time (the `locked` flag, acquired with Acquire and released with Release).
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        SpinGuard { lock: self }
    }

    /// Takes the lock if it is free.
    pub(crate) fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(SpinGuard { lock: self })
    }

    /// Takes the lock and forgets the guard (fork prepare handler).
    pub(crate) fn lock_forever(&self) {
        std::mem::forget(self.lock());
    }

    /// Releases a lock taken by [`SpinLock::lock_forever`].
    ///
    /// # Safety
    /// The caller must hold the lock through `lock_forever` (fork parent/child handlers).
    pub(crate) unsafe fn force_unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// Access without locking.
    ///
    /// # Safety
    /// The caller must hold the lock (through `lock_forever`).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get_unchecked(&self) -> &mut T {
        // SAFETY: the caller holds the lock, so no other reference exists.
        unsafe { &mut *self.value.get() }
    }
}

/// Guard of a [`SpinLock`].
#[derive(Debug)]
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the lock is held by this thread.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves the lock is held by this thread.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::SpinLock;
    use std::sync::Arc;

    #[test]
    fn lock_try_lock_and_fork_style_unlock() {
        let l = SpinLock::new(1u32);
        {
            let mut g = l.lock();
            *g += 1;
            assert!(l.try_lock().is_none(), "held");
        }
        assert_eq!(*l.try_lock().expect("free"), 2);
        l.lock_forever();
        assert!(l.try_lock().is_none());
        // SAFETY: taken by `lock_forever` just above, on this thread.
        unsafe {
            *l.get_unchecked() = 7;
            l.force_unlock();
        }
        assert_eq!(*l.lock(), 7);
    }

    #[test]
    fn threads_exclude_each_other() {
        let l = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 800);
    }
}
