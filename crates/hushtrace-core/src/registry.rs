//! Callsites registered at run time: one mechanism for every caller that does not know its
//! tracepoints at link time (the C interface, the `tracing` bridge, future bindings).
//!
//! A registered callsite is an ordinary [`Callsite`] (leaked: registered once, never freed),
//! with its field types known at registration, so it is enabled, listed in the metadata and
//! recorded exactly like a link-time one. Its event id follows the link-time ids.
//!
//! * Registration may lock and allocate (a short spin lock serialises registrations); it
//!   bumps [`crate::types_generation`], so a tracer rewrites its metadata before it writes the
//!   first packet that can hold the new event.
//! * Reading the registry ([`all_callsites`]) takes no lock: an append-only array of
//!   pointers published with Release stores.
//! * Registering the same category, name, kind and fields again returns the same callsite.

use crate::callsite::{Callsite, CallsiteState, Kind, CALLSITES};
use crate::field::{FieldType, MAX_FIELDS};
use crate::glob::glob_match;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};

/// The most callsites that can be registered at run time in one process (the `tracing` bridge
/// uses two per callsite). Event ids are 16 bits: link-time and registered callsites together
/// stay below 65,536.
pub const MAX_REGISTERED: usize = 1 << 15;

static SLOTS: [AtomicPtr<Callsite>; MAX_REGISTERED] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_REGISTERED];
static LEN: AtomicUsize = AtomicUsize::new(0);
static LOCK: AtomicBool = AtomicBool::new(false);
/// The enable/disable globs applied so far (under `LOCK`), replayed on callsites registered
/// later, so `disable("noisy:*")` also covers a `noisy:` callsite registered afterwards.
static RULES: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());
/// Registered callsites by description and by caller-owned state (under `LOCK`), so a
/// registration finds an earlier one in constant time: with a scan of every registered
/// callsite, registering the 4,097th to 8,192nd `tracing` callsites took 11.5 s.
static INDEX: std::sync::Mutex<Option<Index>> = std::sync::Mutex::new(None);

#[derive(Default)]
struct Index {
    /// Hash of (category, name, kind, field names and types) → positions in `SLOTS`.
    by_desc: std::collections::HashMap<u64, Vec<u32>>,
    /// Address of a caller-owned [`CallsiteState`] → position in `SLOTS`.
    by_state: std::collections::HashMap<usize, u32>,
}

fn desc_hash(category: &str, name: &str, kind: Kind, fields: &[(&str, FieldType)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (category, name, kind, fields).hash(&mut h);
    h.finish()
}

/// Kept rules; older ones beyond this are forgotten (a later rule for the same pattern
/// replaces an earlier one first).
const MAX_RULES: usize = 1024;

/// Why a registration was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegisterError {
    /// The registry is full (see [`MAX_REGISTERED`]), or event ids would exceed 16 bits.
    Full,
    /// A name is empty or contains a NUL byte, a quote or a backslash (the metadata could not
    /// name it), or a field name is not an identifier.
    BadName(String),
    /// More fields than a record may carry.
    TooManyFields(usize),
}

impl core::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RegisterError::Full => write!(
                f,
                "too many callsites registered at run time (at most {MAX_REGISTERED})"
            ),
            RegisterError::BadName(n) => write!(f, "invalid callsite or field name {n:?}"),
            RegisterError::TooManyFields(n) => {
                write!(f, "{n} fields: a callsite has at most {MAX_FIELDS}")
            }
        }
    }
}

impl std::error::Error for RegisterError {}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && !s.contains(['\0', '"', '\\', '\n'])
}

fn valid_field(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && c.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

struct Guard;

impl Guard {
    fn lock() -> Guard {
        while LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        Guard
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        LOCK.store(false, Ordering::Release);
    }
}

/// Takes the registration lock and keeps it (a `pthread_atfork` prepare handler), so no
/// registration is half done in a fork child.
pub fn lock_for_fork() {
    core::mem::forget(Guard::lock());
}

/// Releases the lock taken by [`lock_for_fork`].
///
/// # Safety
/// The calling thread took it with [`lock_for_fork`] (the fork parent or child handler).
pub unsafe fn unlock_after_fork() {
    LOCK.store(false, Ordering::Release);
}

/// The callsites registered at run time so far, in id order.
pub fn registered() -> impl Iterator<Item = &'static Callsite> {
    let n = LEN.load(Ordering::Acquire);
    SLOTS[..n].iter().map(|p| {
        // SAFETY: slots below LEN hold leaked, never-freed callsites published with Release
        // (their initialization happens-before our Acquire load of LEN).
        unsafe { &*p.load(Ordering::Acquire) }
    })
}

/// Every callsite of the program: the link-time ones, then the ones registered at run time.
/// A callsite's position is its event id.
///
/// ```
/// let all: Vec<_> = hushtrace_core::all_callsites().collect();
/// assert!(all.len() >= hushtrace_core::callsites().len());
/// ```
pub fn all_callsites() -> impl Iterator<Item = &'static Callsite> {
    CALLSITES.iter().chain(registered())
}

/// Registers a callsite described at run time (or returns the one registered before with the
/// same category, name, kind and fields). It is enabled unless a glob disabled it since: the
/// caller applies its own enable rules (`hushtrace::enable`/`disable` reach it like any other).
///
/// ```
/// use hushtrace_core::{register_callsite, FieldType, Kind};
/// let cs = register_callsite("c", "io", Kind::Instant, &[("fd", FieldType::I32)]).unwrap();
/// let again = register_callsite("c", "io", Kind::Instant, &[("fd", FieldType::I32)]).unwrap();
/// assert!(std::ptr::eq(cs, again));
/// assert_eq!(cs.types(), Some(vec![FieldType::I32]));
/// ```
pub fn register_callsite(
    category: &str,
    name: &str,
    kind: Kind,
    fields: &[(&str, FieldType)],
) -> Result<&'static Callsite, RegisterError> {
    register(category, name, kind, fields, None)
}

/// Like [`register_callsite`], but the callsite's interest word lives in `state`, storage the
/// caller owns: the C interface's static per-callsite descriptors embed a [`CallsiteState`]
/// (`#[repr(C)]`, see its docs), so their tracepoints test their own word (one load and a
/// branch) and never look anything up. `state` must be new ([`CallsiteState::new`] or all
/// zero bytes, which is a disabled, unregistered state) and never used for another callsite;
/// registering the same `state` again returns the callsite registered with it. Two states with
/// the same description are two callsites (two tracepoints with the same name, as with the
/// link-time macros).
///
/// ```
/// use hushtrace_core::{register_callsite_with_state, CallsiteState, FieldType, Kind};
/// static STATE: CallsiteState = CallsiteState::new();
/// let cs = register_callsite_with_state("c", "own", Kind::Instant,
///                                       &[("v", FieldType::U32)], &STATE).unwrap();
/// assert!(std::ptr::eq(cs.state, &STATE));
/// assert!(STATE.interest().is_enabled());
/// let again = register_callsite_with_state("c", "own", Kind::Instant,
///                                          &[("v", FieldType::U32)], &STATE).unwrap();
/// assert!(std::ptr::eq(cs, again));
/// ```
pub fn register_callsite_with_state(
    category: &str,
    name: &str,
    kind: Kind,
    fields: &[(&str, FieldType)],
    state: &'static CallsiteState,
) -> Result<&'static Callsite, RegisterError> {
    register(category, name, kind, fields, Some(state))
}

fn register(
    category: &str,
    name: &str,
    kind: Kind,
    fields: &[(&str, FieldType)],
    own_state: Option<&'static CallsiteState>,
) -> Result<&'static Callsite, RegisterError> {
    for s in [category, name] {
        if !valid_name(s) {
            return Err(RegisterError::BadName(s.to_string()));
        }
    }
    if let Some((bad, _)) = fields.iter().find(|(n, _)| !valid_field(n)) {
        return Err(RegisterError::BadName(bad.to_string()));
    }
    if fields.len() > MAX_FIELDS {
        return Err(RegisterError::TooManyFields(fields.len()));
    }
    let types: Vec<FieldType> = fields.iter().map(|(_, t)| *t).collect();
    let same = |cs: &Callsite| {
        cs.category == category
            && cs.name == name
            && cs.kind == kind
            && cs
                .field_names
                .iter()
                .copied()
                .eq(fields.iter().map(|(n, _)| *n))
            && cs.types().as_deref() == Some(&types[..])
    };
    let hash = desc_hash(category, name, kind, fields);
    let _g = Guard::lock();
    let mut index = INDEX.lock().unwrap_or_else(|e| e.into_inner());
    let index = index.get_or_insert_with(Index::default);
    let slot = |i: u32| -> &'static Callsite {
        // SAFETY: positions in the index are below LEN: leaked, never-freed callsites,
        // published before the index was updated (under the same lock).
        unsafe { &*SLOTS[i as usize].load(Ordering::Acquire) }
    };
    let found = match own_state {
        Some(st) => index
            .by_state
            .get(&(st as *const CallsiteState as usize))
            .map(|&i| slot(i)),
        None => index
            .by_desc
            .get(&hash)
            .and_then(|v| v.iter().map(|&i| slot(i)).find(|cs| same(cs))),
    };
    if let Some(cs) = found {
        return Ok(cs);
    }
    let n = LEN.load(Ordering::Relaxed);
    let id = CALLSITES.len() + n;
    if n >= MAX_REGISTERED || id > u16::MAX as usize {
        return Err(RegisterError::Full);
    }
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let field_names: &'static [&'static str] = Box::leak(
        fields
            .iter()
            .map(|(n, _)| leak(n))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let field_types: &'static [AtomicU8] = Box::leak(
        types
            .iter()
            .map(|t| AtomicU8::new(*t as u8))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let state: &'static CallsiteState =
        own_state.unwrap_or_else(|| Box::leak(Box::new(CallsiteState::new())));
    let cs: &'static Callsite = Box::leak(Box::new(Callsite {
        category: leak(category),
        name: leak(name),
        kind,
        field_names,
        field_types,
        state,
        file: "<registered at run time>",
        line: 0,
    }));
    state.set_registered(id as u16, Callsite::signature_of(&types));
    let bytes: Vec<u8> = types.iter().map(|t| *t as u8).collect();
    crate::record::write_with_class(
        id as u16,
        &bytes,
        cs.field_names,
        cs.category,
        cs.name,
        kind as u8,
    );
    for (pattern, on) in RULES.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        if matches(pattern, cs) {
            cs.set_enabled_internal(*on);
        }
    }
    SLOTS[n].store(cs as *const Callsite as *mut Callsite, Ordering::Release);
    LEN.store(n + 1, Ordering::Release);
    if let Some(st) = own_state {
        index
            .by_state
            .insert(st as *const CallsiteState as usize, n as u32);
    }
    index.by_desc.entry(hash).or_default().push(n as u32);
    crate::callsite::bump_types_generation();
    Ok(cs)
}

/// Enables (`on = true`) or disables every callsite whose `"category:name"` matches the glob
/// `pattern`; returns how many matched. Safe to call at any time from any thread. The rule
/// also applies to callsites registered later.
///
/// ```
/// let matched = hushtrace_core::set_enabled("no-such-category:*", false);
/// assert_eq!(matched, 0);
/// ```
pub fn set_enabled(pattern: &str, on: bool) -> usize {
    let _g = Guard::lock();
    remember_rule(pattern, on);
    let mut n = 0;
    for cs in all_callsites() {
        if matches(pattern, cs) {
            cs.set_enabled_internal(on);
            n += 1;
        }
    }
    n
}

/// Whether `pattern` (`category:name` glob, or a glob over the full name) selects `cs`.
fn matches(pattern: &str, cs: &Callsite) -> bool {
    match pattern.split_once(':') {
        Some((pc, pn)) => glob_match(pc, cs.category) && glob_match(pn, cs.name),
        None => glob_match(pattern, &cs.full_name()),
    }
}

/// Records an enable/disable glob for callsites registered later (called by [`set_enabled`]
/// under the registration lock).
fn remember_rule(pattern: &str, on: bool) {
    let mut rules = RULES.lock().unwrap_or_else(|e| e.into_inner());
    rules.retain(|(p, _)| p != pattern);
    if rules.len() >= MAX_RULES {
        rules.remove(0);
    }
    rules.push((pattern.to_string(), on));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_apply_to_callsites_registered_later() {
        set_enabled("later-cat:*", false);
        let cs = register_callsite("later-cat", "x", Kind::Instant, &[]).unwrap();
        assert!(!cs.state.interest().is_enabled());
        set_enabled("later-cat:x", true);
        assert!(cs.state.interest().is_enabled());
        let other = register_callsite("other-cat", "x", Kind::Instant, &[]).unwrap();
        assert!(other.state.interest().is_enabled());
    }

    #[test]
    fn ids_follow_the_link_time_ones_and_names_are_checked() {
        let a = register_callsite("ids", "a", Kind::Counter, &[("value", FieldType::F64)]).unwrap();
        let b = register_callsite("ids", "b", Kind::Instant, &[]).unwrap();
        assert!(a.id() as usize >= CALLSITES.len());
        assert!(b.id() > a.id());
        let pos = all_callsites().position(|c| std::ptr::eq(c, b)).unwrap();
        assert_eq!(pos, b.id() as usize);
        assert!(matches!(
            register_callsite("bad\"", "x", Kind::Instant, &[]),
            Err(RegisterError::BadName(_))
        ));
        assert!(matches!(
            register_callsite("c", "x", Kind::Instant, &[("not an ident", FieldType::U8)]),
            Err(RegisterError::BadName(_))
        ));
        // Same name, other field types: another callsite.
        let c = register_callsite("ids", "b", Kind::Instant, &[("v", FieldType::U8)]).unwrap();
        assert!(!std::ptr::eq(b, c));
    }

    #[test]
    fn caller_state_is_used_in_place() {
        let st: &'static CallsiteState = Box::leak(Box::new(CallsiteState::new()));
        let a = register_callsite_with_state("own", "x", Kind::Instant, &[], st).unwrap();
        assert!(core::ptr::eq(a.state, st));
        assert!(st.interest().is_enabled());
        // Another state with the same description: another callsite (another id).
        let st2: &'static CallsiteState = Box::leak(Box::new(CallsiteState::new()));
        let b = register_callsite_with_state("own", "x", Kind::Instant, &[], st2).unwrap();
        assert!(!core::ptr::eq(a, b));
        assert_ne!(a.id(), b.id());
        set_enabled("own:x", false);
        assert!(!st.interest().is_enabled() && !st2.interest().is_enabled());
        set_enabled("own:x", true);
    }
}
