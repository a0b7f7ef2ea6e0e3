//! The storage of the types mirror (see [`crate::mirror`]): the installed mapping and how one
//! callsite's record is written into it. Below the callsites and the registry, which write a
//! record when a callsite's field types become known; [`crate::mirror`] installs the mapping
//! and reads records back.
//!
//! Record `id` is [`RECORD_LEN`] bytes at `id * RECORD_LEN`: `u8` field count with the high bit
//! set (0: unknown), [`MAX_FIELDS`] type bytes, then the field names NUL-separated; then,
//! when the record says what the event class is (callsites registered at run time, which the
//! metadata lists only once the consumer has rewritten it), [`CLASS_MARK`] with the kind in its
//! low bits, the category and the name, each NUL-terminated.

use crate::field::MAX_FIELDS;
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};

/// Bytes per callsite record.
pub const RECORD_LEN: usize = 256;
/// Offset of the field names in a record.
pub(crate) const NAMES_OFF: usize = 1 + MAX_FIELDS;
/// The byte after the field names that starts an event class (its low 3 bits: the kind).
pub(crate) const CLASS_MARK: u8 = 0xc0;

static MIRROR: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static RECORDS: AtomicUsize = AtomicUsize::new(0);

/// Installs (or, with null, removes) the mapping: `records` records of [`RECORD_LEN`] bytes at
/// `ptr`.
///
/// # Safety
/// `ptr` must stay valid for writes of `records * RECORD_LEN` bytes for the rest of the
/// process's life (it is never unmapped), or be null.
pub(crate) unsafe fn install(ptr: *mut u8, records: usize) {
    RECORDS.store(0, Ordering::Relaxed);
    MIRROR.store(ptr, Ordering::Release);
    RECORDS.store(records, Ordering::Release);
}

/// Forgets the mapping without touching it. Async-signal-safe.
pub(crate) fn forget() {
    RECORDS.store(0, Ordering::Relaxed);
    MIRROR.store(core::ptr::null_mut(), Ordering::Relaxed);
}

/// Writes callsite `id`'s record: `types` (as `FieldType as u8`) and the field `names`, if a
/// mapping is installed. Plain relaxed stores: no lock, allocation or system call.
pub(crate) fn write(id: u16, types: &[u8], names: &[&str]) {
    write_record(id, types, names, None);
}

/// Like [`write`], and the event class (`category`, `name`, `kind`: `Kind as u8`; a plain
/// byte, so this layer below `callsite` does not import it) after the field names,
/// when it fits: crash recovery can then describe the events of a callsite the metadata does
/// not list yet.
pub(crate) fn write_with_class(
    id: u16,
    types: &[u8],
    names: &[&str],
    category: &str,
    name: &str,
    kind: u8,
) {
    write_record(id, types, names, Some((category, name, kind)));
}

fn write_record(id: u16, types: &[u8], names: &[&str], class: Option<(&str, &str, u8)>) {
    let n = RECORDS.load(Ordering::Acquire);
    let base = MIRROR.load(Ordering::Acquire);
    if base.is_null() || id as usize >= n || types.len() > MAX_FIELDS {
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
    for name in names {
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
    // The class, if it fits whole (else the record has none: a zero byte follows the names).
    if let Some((category, name, kind)) = class {
        // The mark, then each part and its NUL.
        let len = 1 + (category.len() + 1) + (name.len() + 1);
        if off + len <= RECORD_LEN {
            put(off, CLASS_MARK | kind);
            off += 1;
            for part in [category, name] {
                for &b in part.as_bytes() {
                    put(off, b);
                    off += 1;
                }
                put(off, 0);
                off += 1;
            }
        }
    }
    // The count last: a reader that sees it sees a complete record (for a crashed process,
    // whatever was stored before the death is in the shared mapping).
    put(0, types.len() as u8 | 0x80);
}
