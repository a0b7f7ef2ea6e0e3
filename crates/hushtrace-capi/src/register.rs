//! Registering C tracepoints with the runtime when their module loads: `ht__register_module`
//! (the header's constructor, a module's whole `hushtrace_cs` section) and
//! `ht__register_callsite` (C++ static initialization, one descriptor). A descriptor is checked
//! ([`describe`]), registered with [`Registered::with_state`] on its own state, given the
//! recorder of its field types, and its module pinned (`RTLD_NODELETE`).

use crate::descriptor::{Descriptor, ABI, MAX_FIELDS};
use crate::error::{guard, set_error};
use crate::record::recorder;
use hushtrace::Registered;
use hushtrace_core::{Callsite, FieldType, Kind};
use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::sync::atomic::Ordering;

/// Registers one descriptor (idempotent); complains on stderr about a descriptor the runtime
/// refuses (it stays disabled).
///
/// # Safety
/// `d` is a descriptor defined by the header's macros, in a module that stays mapped.
unsafe fn register(d: &'static Descriptor) {
    if !d.runtime.load(Ordering::Acquire).is_null() {
        return;
    }
    // SAFETY: forwarded contract (literal strings and arrays of the descriptor).
    match unsafe { describe(d) } {
        Ok((cat, name, kind, fields)) => {
            let f: Vec<(&str, FieldType)> = fields.iter().map(|(n, t)| (*n, *t)).collect();
            match Registered::with_state(cat, name, kind, &f, &d.state) {
                Ok(r) => {
                    let leaked: &'static mut Registered = Box::leak(Box::new(r));
                    let cs = r.callsite() as *const Callsite as *mut Callsite;
                    if d.runtime
                        .compare_exchange(
                            ptr::null_mut(),
                            leaked,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        d.callsite.store(cs, Ordering::Relaxed);
                        // The recorder is the one for the field types `describe` checked:
                        // what makes the macros' call through `record` sound.
                        if let Some(f) =
                            recorder(&fields.iter().map(|(_, t)| *t as u8).collect::<Vec<_>>())
                        {
                            d.record.store(f as *mut c_void, Ordering::Release);
                        }
                    }
                    // Else registered concurrently by another constructor: theirs stands
                    // (the same runtime callsite: the registry finds it by `state`).
                }
                Err(e) => complain(d, &e.to_string()),
            }
        }
        Err(why) => complain(d, &why),
    }
}

type Description<'a> = (&'a str, &'a str, Kind, Vec<(&'a str, FieldType)>);

/// Reads a descriptor into a description the runtime registers.
///
/// # Safety
/// As [`register`].
unsafe fn describe(d: &'static Descriptor) -> Result<Description<'static>, String> {
    if d.abi != ABI {
        return Err(format!(
            "descriptor ABI {} (this library reads {ABI}): rebuild with this hushtrace.h",
            d.abi
        ));
    }
    let s = |p: *const c_char, what: &str| -> Result<&'static str, String> {
        if p.is_null() {
            return Err(format!("{what} is NULL"));
        }
        // SAFETY: string literals of the descriptor, alive as long as the pinned module.
        unsafe { CStr::from_ptr(p) }
            .to_str()
            .map_err(|_| format!("{what} is not UTF-8"))
    };
    let cat = s(d.category, "the category")?;
    let name = s(d.name, "the name")?;
    let kind = match d.kind {
        0 => Kind::Instant,
        1 => Kind::SpanBegin,
        2 => Kind::SpanEnd,
        3 => Kind::Counter,
        k => return Err(format!("unknown kind {k}")),
    };
    let n = d.nfields as usize;
    if n > MAX_FIELDS {
        return Err(format!(
            "{n} fields: a C tracepoint has at most {MAX_FIELDS}"
        ));
    }
    let mut fields = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the macros give `nfields` names and types.
        let (fname, t) = unsafe { (*d.field_names.add(i), *d.field_types.add(i)) };
        let fname = s(fname, "a field name")?;
        let t = match t {
            3 | 4 | 7 | 8 | 9 | 10 | 11 => {
                FieldType::from_u8(t).ok_or_else(|| format!("field {fname}: type {t}"))?
            }
            _ => return Err(format!("field {fname}: unknown type code {t}")),
        };
        fields.push((fname, t));
    }
    Ok((cat, name, kind, fields))
}

fn complain(d: &Descriptor, why: &str) {
    let name = |p: *const c_char| {
        if p.is_null() {
            "?".to_string()
        } else {
            // SAFETY: descriptor strings are NUL-terminated literals.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let msg = format!(
        "hushtrace: tracepoint {}:{} at {}:{} not registered (it stays disabled): {why}",
        name(d.category),
        name(d.name),
        name(d.file),
        d.line
    );
    eprintln!("{msg}");
    set_error(msg);
}

/// Keeps the module holding `addr` loaded for good (`RTLD_NODELETE`), so `dlclose` cannot
/// unmap descriptors the registry holds. Nothing to do for the main program.
fn pin_module(addr: *const c_void) {
    // SAFETY: `Dl_info` is plain data; zeroed is a valid initial value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads `addr` as an address and fills `info`.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return;
    }
    // SAFETY: `dli_fname` is the loader's NUL-terminated path of a loaded object. RTLD_NOLOAD
    // only promotes an object already loaded; the handle is kept (never dlclose'd).
    let _ = unsafe {
        libc::dlopen(
            info.dli_fname,
            libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
        )
    };
}

/// `void ht__register_module(ht__callsite *const *start, ht__callsite *const *stop)`: called
/// by the header's constructor with the module's `hushtrace_cs` section bounds.
///
/// # Safety
/// `[start, stop)` is the module's `hushtrace_cs` section (NULL, NULL when it has none).
#[no_mangle]
pub unsafe extern "C" fn ht__register_module(
    start: *const *const Descriptor,
    stop: *const *const Descriptor,
) {
    guard((), || {
        if start.is_null() || stop.is_null() || start >= stop {
            return;
        }
        pin_module(start as *const c_void);
        let mut p = start;
        while p < stop {
            // SAFETY: inside the section: an array of descriptor pointers.
            let d = unsafe { *p };
            if !d.is_null() {
                // SAFETY: a macro's descriptor in the module just pinned.
                unsafe { register(&*d) };
            }
            // SAFETY: still within or one past the section.
            p = unsafe { p.add(1) };
        }
    })
}

/// `void ht__register_callsite(ht__callsite *cs)`: C++ registration of one descriptor (from
/// the module's static initialization).
///
/// # Safety
/// `cs` is a descriptor defined by the header's macros.
#[no_mangle]
pub unsafe extern "C" fn ht__register_callsite(cs: *const Descriptor) {
    guard((), || {
        if cs.is_null() {
            return;
        }
        pin_module(cs as *const c_void);
        // SAFETY: a macro's descriptor in the module just pinned.
        unsafe { register(&*cs) };
    })
}
