//! A mirror of published field types in memory that outlives the process.
//!
//! A link-time callsite's field types become known on its first hit, and the trace metadata
//! lists them only once the consumer has rewritten it; a process that dies in between leaves
//! events its metadata cannot describe. So a tracer may install a *types mirror* (a shared
//! mapping of a file): every publication also writes the callsite's field count, types and
//! names into the mirror's record for its event id, with plain stores (no lock, no allocation,
//! no system call: still fine on a tracepoint). Crash recovery reads the records to complete
//! the metadata.
//!
//! Record `id` is [`RECORD_LEN`] bytes at `id * RECORD_LEN`: `u8` field count (0: unknown),
//! [`MAX_FIELDS`](crate::MAX_FIELDS) type bytes, then the field names NUL-separated.

use crate::callsite::Callsite;
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};

/// Bytes per callsite record.
pub const RECORD_LEN: usize = 256;
const NAMES_OFF: usize = 1 + crate::registry::MAX_FIELDS;

static MIRROR: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static RECORDS: AtomicUsize = AtomicUsize::new(0);

/// Installs (or, with null, removes) the types mirror: `records` records of [`RECORD_LEN`]
/// bytes at `ptr`, and fills it with every callsite whose types are already known.
///
/// # Safety
/// `ptr` must stay valid for writes of `records * RECORD_LEN` bytes for the rest of the
/// process's life (it is never unmapped), or be null.
pub unsafe fn set_types_mirror(ptr: *mut u8, records: usize) {
    RECORDS.store(0, Ordering::Relaxed);
    MIRROR.store(ptr, Ordering::Release);
    RECORDS.store(records, Ordering::Release);
    if !ptr.is_null() {
        for cs in crate::all_callsites() {
            if let Some(types) = cs.types() {
                let t: Vec<u8> = types.iter().map(|t| *t as u8).collect();
                record(cs, cs.id(), &t);
            }
        }
    }
}

/// Forgets the mirror without touching it (the child of a `fork()`, which did not inherit
/// the mapping). Async-signal-safe.
pub fn forget_types_mirror() {
    RECORDS.store(0, Ordering::Relaxed);
    MIRROR.store(core::ptr::null_mut(), Ordering::Relaxed);
}

/// Writes callsite `id`'s record: `types` (as `FieldType as u8`) and the field names.
pub(crate) fn record(cs: &Callsite, id: u16, types: &[u8]) {
    let n = RECORDS.load(Ordering::Acquire);
    let base = MIRROR.load(Ordering::Acquire);
    if base.is_null() || id as usize >= n || types.len() > crate::registry::MAX_FIELDS {
        return;
    }
    let put = |off: usize, b: u8| {
        // SAFETY: `off < RECORD_LEN` inside record `id < n`, within the mapping the installer
        // guaranteed; bytes are written atomically (relaxed), as other threads may publish
        // other records of the same page.
        unsafe { AtomicU8::from_ptr(base.add(id as usize * RECORD_LEN + off)) }
            .store(b, Ordering::Relaxed);
    };
    for (i, t) in types.iter().enumerate() {
        put(1 + i, *t);
    }
    let mut off = NAMES_OFF;
    for name in cs.field_names {
        for &b in name.as_bytes() {
            if off >= RECORD_LEN - 1 {
                return; // names too long for the record: leave it unknown
            }
            put(off, b);
            off += 1;
        }
        put(off, 0);
        off += 1;
    }
    // The count last: a reader that sees it sees a complete record (for a crashed process,
    // whatever was stored before the death is in the shared mapping).
    put(0, types.len() as u8 | 0x80);
}

/// Decodes record `id` from a mirror's bytes: the field names and types, if known.
pub fn read_record(bytes: &[u8], id: u16) -> Option<Vec<(String, crate::FieldType)>> {
    let r = bytes.get(id as usize * RECORD_LEN..(id as usize + 1) * RECORD_LEN)?;
    if r[0] & 0x80 == 0 {
        return None;
    }
    let count = (r[0] & 0x7f) as usize;
    let names: Vec<&[u8]> = r[NAMES_OFF..].split(|&b| b == 0).take(count).collect();
    if names.len() != count {
        return None;
    }
    (0..count)
        .map(|i| {
            Some((
                String::from_utf8(names[i].to_vec()).ok()?,
                crate::FieldType::from_u8(r[1 + i])?,
            ))
        })
        .collect()
}
