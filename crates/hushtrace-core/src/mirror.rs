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

use crate::field::FieldType;
use crate::record::NAMES_OFF;
pub use crate::record::RECORD_LEN;

/// Installs (or, with null, removes) the types mirror: `records` records of [`RECORD_LEN`]
/// bytes at `ptr`, and fills it with every callsite whose types are already known.
///
/// # Safety
/// `ptr` must stay valid for writes of `records * RECORD_LEN` bytes for the rest of the
/// process's life (it is never unmapped), or be null.
pub unsafe fn set_types_mirror(ptr: *mut u8, records: usize) {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { crate::record::install(ptr, records) };
    if !ptr.is_null() {
        for cs in crate::registry::all_callsites() {
            if let Some(types) = cs.types() {
                let t: Vec<u8> = types.iter().map(|t| *t as u8).collect();
                crate::record::write(cs.id(), &t, cs.field_names);
            }
        }
    }
}

/// Forgets the mirror without touching it (the child of a `fork()`, which did not inherit
/// the mapping). Async-signal-safe.
pub fn forget_types_mirror() {
    crate::record::forget();
}

/// Decodes record `id` from a mirror's bytes: the field names and types, if known.
pub fn read_record(bytes: &[u8], id: u16) -> Option<Vec<(String, FieldType)>> {
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
                FieldType::from_u8(r[1 + i])?,
            ))
        })
        .collect()
}
