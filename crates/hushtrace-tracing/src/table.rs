//! The layer's per-callsite state, found by the address of the callsite's `&'static Metadata`
//! without a lock: an insert-only open-addressing table. Inserting (from `register_callsite`,
//! once per callsite) locks and allocates; looking up (every record) is a few relaxed-cost
//! loads.

use crate::Info;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;
use tracing_core::Metadata;

/// Slots of the table.
const CAP: usize = 1 << 15;
/// The most `tracing` callsites the table holds (7/8 of the slots, so that a lookup of a
/// callsite that is not there ends at a free slot after a few probes). The records of more
/// are counted as discarded (see `lookup` in the crate root). hushtrace's registry
/// ([`hushtrace_core::MAX_REGISTERED`] entries, one or two per callsite) fills first when
/// callsites record typed fields.
pub(crate) const MAX_CALLSITES: usize = CAP - CAP / 8;

/// Slot keys: the metadata address, 0 when free. Written once, under `LOCK`.
static KEYS: [AtomicUsize; CAP] = [const { AtomicUsize::new(0) }; CAP];
/// Slot values: a leaked `Info`, stored before its key (Release) so a reader that sees the key
/// (Acquire) sees the value.
static VALS: [AtomicPtr<Info>; CAP] = [const { AtomicPtr::new(std::ptr::null_mut()) }; CAP];
/// Serializes inserts; holds the number of keys.
static LOCK: Mutex<usize> = Mutex::new(0);

fn home(key: usize) -> usize {
    ((key as u64 >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CAP.trailing_zeros())) as usize
}

/// Adds `meta` with the state `make()` builds, unless it is there already.
pub(crate) fn insert(meta: &'static Metadata<'static>, make: impl FnOnce() -> Info) {
    let key = meta as *const Metadata<'static> as usize;
    let mut count = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut i = home(key);
    for _ in 0..CAP {
        match KEYS[i].load(Ordering::Relaxed) {
            k if k == key => return,
            0 => {
                if *count >= MAX_CALLSITES {
                    // Full: its records are counted as discarded.
                    static WARNED: std::sync::atomic::AtomicBool =
                        std::sync::atomic::AtomicBool::new(false);
                    if !WARNED.swap(true, Ordering::Relaxed) {
                        eprintln!(
                            "hushtrace-tracing: warning: more than {MAX_CALLSITES} tracing \
                             callsites; the events of {}:{} and later new callsites are not \
                             recorded (counted as discarded)",
                            meta.target(),
                            meta.name()
                        );
                    }
                    return;
                }
                *count += 1;
                let info: &'static Info = Box::leak(Box::new(make()));
                VALS[i].store(info as *const Info as *mut Info, Ordering::Release);
                KEYS[i].store(key, Ordering::Release);
                return;
            }
            _ => i = (i + 1) % CAP,
        }
    }
}

/// The state of `meta`, if it was registered.
#[inline]
pub(crate) fn get(meta: &Metadata<'_>) -> Option<&'static Info> {
    let key = meta as *const Metadata<'_> as usize;
    let mut i = home(key);
    for _ in 0..CAP {
        match KEYS[i].load(Ordering::Acquire) {
            k if k == key => {
                let p = VALS[i].load(Ordering::Acquire);
                // SAFETY: a slot's value is a leaked (never freed) `Info`, stored before its key
                // with Release; our Acquire load of the key makes it visible.
                return (!p.is_null()).then(|| unsafe { &*p });
            }
            0 => return None,
            _ => i = (i + 1) % CAP,
        }
    }
    None
}
