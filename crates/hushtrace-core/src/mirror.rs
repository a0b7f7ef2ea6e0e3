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
//! Callsites registered at run time are a step further from the metadata: their whole event
//! class (name and kind) is missing from it until the rewrite. Their records also hold the
//! class ([`read_class`]), so recovery can add it.
//!
//! Record `id` is [`RECORD_LEN`] bytes at `id * RECORD_LEN`: `u8` field count (0: unknown),
//! [`MAX_FIELDS`](crate::MAX_FIELDS) type bytes, then the field names NUL-separated, then the
//! event class when the record holds one (see `record.rs`).

use crate::callsite::Kind;
use crate::field::FieldType;
pub use crate::record::RECORD_LEN;
use crate::record::{CLASS_MARK, NAMES_OFF};

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
                crate::record::write_with_class(
                    cs.id(),
                    &t,
                    cs.field_names,
                    cs.category,
                    cs.name,
                    cs.kind as u8,
                );
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

/// An event class read from a types mirror ([`read_class`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorClass {
    /// `"category:name"`.
    pub name: String,
    /// What the event records.
    pub kind: Kind,
    /// Field names and types.
    pub fields: Vec<(String, FieldType)>,
}

/// Record `id`'s event class, when it holds one (callsites registered at run time, see the
/// module docs) and its field names are identifiers, as registration requires.
pub fn read_class(bytes: &[u8], id: u16) -> Option<MirrorClass> {
    let fields = read_record(bytes, id)?;
    let r = &bytes[id as usize * RECORD_LEN..(id as usize + 1) * RECORD_LEN];
    // After the field names (each NUL-terminated).
    let mut off = NAMES_OFF;
    for _ in 0..fields.len() {
        off += r[off..].iter().position(|&b| b == 0)? + 1;
    }
    let mark = *r.get(off)?;
    if mark & !7 != CLASS_MARK {
        return None;
    }
    let kind = match mark & 7 {
        0 => Kind::Instant,
        1 => Kind::SpanBegin,
        2 => Kind::SpanEnd,
        3 => Kind::Counter,
        4 => Kind::AsyncBegin,
        5 => Kind::AsyncEnd,
        _ => return None,
    };
    let mut parts = r[off + 1..].splitn(3, |&b| b == 0);
    let (category, name) = (parts.next()?, parts.next()?);
    // Both NUL-terminated, neither empty.
    parts.next()?;
    if category.is_empty() || name.is_empty() {
        return None;
    }
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).ok();
    // What registration accepts, no more (the file may have been written by anyone).
    let identifier = |n: &str| {
        n.bytes()
            .next()
            .is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
            && n.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric())
    };
    if !fields.iter().all(|(n, _)| identifier(n)) {
        return None;
    }
    Some(MirrorClass {
        name: format!("{}:{}", text(category)?, text(name)?),
        kind,
        fields,
    })
}
