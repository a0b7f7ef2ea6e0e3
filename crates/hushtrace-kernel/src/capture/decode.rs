//! How one ftrace record becomes one CTF event: each class's fields found in the running kernel's
//! format files, system calls named from its table.

use super::*;

/// How to turn one ftrace record into one CTF event.
#[derive(Debug)]
pub(super) struct Decoder {
    /// ftrace id → (class id, the source field of each CTF field, as the running kernel's
    /// `format` file places it).
    pub(super) by_id: HashMap<u16, (u16, Vec<Field>)>,
    /// The trace's classes.
    pub(super) classes: Arc<ClassTable>,
    /// `common_type`.
    pub(super) common_type: Field,
    /// Records of this task are dropped (the recorder's own system calls).
    pub(super) skip_pid: Option<(Field, i64)>,
}

impl Decoder {
    pub(super) fn decode(&self, rec: &[u8], ts: u64, w: &mut StreamWriter) -> io::Result<()> {
        let Some(id) = self.common_type.int(rec) else {
            return Ok(());
        };
        let Some((class, fields)) = self.by_id.get(&(id as u16)) else {
            return Ok(());
        };
        if let Some((f, pid)) = &self.skip_pid {
            if f.int(rec) == Some(*pid) {
                return Ok(());
            }
        }
        let Some(spec) = self.classes.fields(*class) else {
            return Ok(());
        };
        let name = || self.classes.name(*class).unwrap_or_default();
        // No allocation per event: classes have at most MAX_FIELDS fields.
        let mut vals = [Out::Int(0); MAX_FIELDS];
        for (((_, _, ty), f), v) in spec.iter().zip(fields).zip(vals.iter_mut()) {
            // Types were checked against the format at the start; a record too short for
            // its own format is not an event.
            *v = match ty {
                Ty::Str => match f.text(rec) {
                    Some(t) => Out::Text(t),
                    None => return Err(short_record(&name(), f)),
                },
                _ => match f.int(rec) {
                    Some(n) => Out::Int(n),
                    None => return Err(short_record(&name(), f)),
                },
            };
        }
        w.event(*class, ts, &vals[..spec.len().min(MAX_FIELDS)])
    }
}

fn short_record(class: &str, f: &Field) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "a {class} record too short for its field {} (offset {}, size {})",
            f.name, f.offset, f.size
        ),
    )
}

/// The field `src` of `format` (event `sys:ftrace`) for the CTF field `class.name` of type
/// `ty`: an error naming the field and the event when the running kernel's format lacks it or
/// gives it another kind (text for an integer, or the reverse).
pub(super) fn source_field(
    format: &EventFormat,
    (sys, ftrace, class): (&str, &str, &str),
    (name, src, ty): (&str, &str, Ty),
) -> Result<Field, Error> {
    let f = format.field(src).ok_or_else(|| {
        Error::Other(format!(
            "--kernel: this kernel's {}:{} event has no field `{src}` (needed for {}.{name})",
            sys, ftrace, class
        ))
    })?;
    let text = ty == Ty::Str;
    let fits = if text {
        f.is_text()
    } else {
        !f.is_text() && matches!(f.size, 1 | 2 | 4 | 8)
    };
    if !fits {
        return Err(Error::Other(format!(
            "--kernel: this kernel's {}:{} field `{src}` is `{}` of {} bytes, not {} \
             (needed for {}.{name})",
            sys,
            ftrace,
            f.ctype,
            f.size,
            if text { "text" } else { "an integer" },
            class
        )));
    }
    Ok(f.clone())
}

/// The system calls the running kernel has trace events for (`events/syscalls/sys_enter_<name>`
/// with its `sys_exit_<name>`), sorted by name.
pub(super) fn syscall_names(root: &Path) -> Result<Vec<String>, Error> {
    let dir = root.join("events/syscalls");
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        Error::Other(format!(
            "--kernel syscalls: {}: {e} (a kernel built without CONFIG_FTRACE_SYSCALLS has no \
             system-call events)",
            dir.display()
        ))
    })?;
    let mut names = Vec::new();
    for e in entries {
        let e = e.map_err(|e| Error::Other(format!("{}: {e}", dir.display())))?;
        let n = e.file_name().to_string_lossy().into_owned();
        if let Some(call) = n.strip_prefix("sys_enter_") {
            if dir.join(format!("sys_exit_{call}")).is_dir() {
                names.push(call.to_string());
            }
        }
    }
    names.sort();
    Ok(names)
}
