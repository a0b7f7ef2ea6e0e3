//! The shapes one callsite's records take: a variant registered per signature of value types,
//! recorded by the typed write path when it fits.

use super::*;

/// Variants with typed fields kept per schema (more are registered but looked up under the
/// lock; in practice a callsite records one set of types).
const VARIANTS: usize = 8;

/// The hushtrace callsites of one record shape: the prefix fields then the tracing fields.
#[derive(Debug)]
pub(crate) struct Schema {
    category: String,
    name: String,
    kind: Kind,
    prefix: &'static [(&'static str, FieldType)],
    /// Every field a string (plus the prefix): registered with the tracing callsite; its
    /// enabled state is the callsite's, and no-syscall threads record it when no typed variant
    /// fits.
    pub(crate) fallback: Registered,
    variants: [AtomicPtr<Variant>; VARIANTS],
    /// Serializes the registration of typed variants.
    lock: Mutex<()>,
    fields: Vec<String>,
}

/// One registered set of types of a schema.
#[derive(Clone, Copy, Debug)]
struct Variant {
    /// `signature` of its types.
    sig: u64,
    reg: Registered,
    /// Its monomorphic recorder, for small shapes ([`typed::recorder`]).
    rec: Option<typed::Recorder>,
}

impl Variant {
    /// Records `vals` if they have this variant's types: the record's timestamp (0 when not
    /// written); `None` if not.
    #[inline(always)]
    fn try_record(&self, vals: &[Value<'_>], sig: &mut Option<u64>) -> Option<u64> {
        match self.rec {
            Some(rec) => rec(self.reg, vals),
            None => (*sig.get_or_insert_with(|| signature(vals)) == self.sig)
                .then(|| record_values(self.reg, vals)),
        }
    }
}

impl Schema {
    pub(crate) fn new(
        category: &str,
        name: &str,
        kind: Kind,
        prefix: &'static [(&'static str, FieldType)],
        fields: &[String],
    ) -> Option<Schema> {
        let mut desc: Vec<(&str, FieldType)> = prefix.to_vec();
        desc.extend(fields.iter().map(|f| (f.as_str(), FieldType::Str)));
        let fallback = hushtrace::register_callsite(category, name, kind, &desc).ok()?;
        Some(Schema {
            category: category.to_string(),
            name: name.to_string(),
            kind,
            prefix,
            fallback,
            variants: [const { AtomicPtr::new(std::ptr::null_mut()) }; VARIANTS],
            lock: Mutex::new(()),
            fields: fields.to_vec(),
        })
    }

    /// Records the captured values with the variant of their types: the variants registered
    /// so far in order (a typed recorder checks the types itself; the others compare the
    /// values' signature, computed once), else a new one (cold). Returns the record's
    /// timestamp in clock ticks (0 when it was not written or no clock could be read).
    #[inline]
    pub(crate) fn record(&self, cap: &mut Capture<'_>) -> u64 {
        let mut sig = None;
        for slot in &self.variants {
            let p = slot.load(Ordering::Acquire);
            if p.is_null() {
                break;
            }
            // SAFETY: non-null slots point to leaked `Variant`s, initialized before the Release
            // store that published them (paired with the Acquire load above).
            let v = unsafe { &*p };
            if let Some(ts) = v.try_record(cap.values(), &mut sig) {
                return ts;
            }
        }
        self.record_new(cap)
    }

    /// Records values of types no published variant has: registers their variant (once per
    /// set of types; locks and allocates), or on a no-syscall thread records every field as a
    /// string with the variant registered with the callsite.
    #[cold]
    #[inline(never)]
    fn record_new(&self, cap: &mut Capture<'_>) -> u64 {
        if hushtrace::thread_in_no_syscall() {
            cap.stringify_all();
            return record_values(self.fallback, cap.values());
        }
        let sig = signature(cap.values());
        match self.register(sig, cap) {
            Some(v) => v.try_record(cap.values(), &mut Some(sig)).unwrap_or(0),
            // No room for the typed variant (the registry is full): every field as a string.
            None => {
                cap.stringify_all();
                record_values(self.fallback, cap.values())
            }
        }
    }

    /// The variant of the types of `cap` (signature `sig`), registered now unless another
    /// thread just did.
    fn register(&self, sig: u64, cap: &Capture<'_>) -> Option<Variant> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut free = None;
        for slot in &self.variants {
            let p = slot.load(Ordering::Acquire);
            if p.is_null() {
                free = Some(slot);
                break;
            }
            // SAFETY: as in `record`.
            let v = unsafe { &*p };
            if v.sig == sig {
                return Some(*v);
            }
        }
        let names =
            (self.prefix.iter().map(|&(n, _)| n)).chain(self.fields.iter().map(String::as_str));
        let desc: Vec<(&str, FieldType)> = names.zip(cap.types()).collect();
        let reg =
            hushtrace::register_callsite(&self.category, &self.name, self.kind, &desc).ok()?;
        let types: Vec<FieldType> = cap.types().collect();
        let v = Variant {
            sig,
            reg,
            rec: typed::recorder(&types),
        };
        // Past VARIANTS sets of types, the others are registered again (found, under the
        // registry's lock) by every record: rare shapes, still correct.
        if let Some(slot) = free {
            slot.store(Box::into_raw(Box::new(v)), Ordering::Release);
        }
        Some(v)
    }
}

/// [`Registered::record`], returning the record's timestamp (0: not written, or no clock).
#[inline(always)]
fn record_values(reg: Registered, vals: &[Value<'_>]) -> u64 {
    hushtrace::__private::emit_values_timed(reg.callsite(), vals).unwrap_or(0)
}

/// A hash of the values' types (distinct lists of types practically never collide; a
/// collision would record with a variant of other types, which `Registered::record` refuses
/// and counts).
#[inline]
fn signature(vals: &[Value<'_>]) -> u64 {
    vals.iter()
        .map(Value::field_type)
        .fold(0xcbf2_9ce4_8422_2325, |h, t| {
            (h ^ t as u64).wrapping_mul(0x0000_0100_0000_01b3)
        })
}
