//! Interned functions: one [`Func`] per Python code object (or C function), created the first
//! time the hooks see it and found again in O(1) on every later call.
//!
//! A code object's `Func` hangs off its `co_extra` slot (the per-code scratch space CPython
//! keeps for tools like this one: `PyUnstable_Code_GetExtra`, `_PyCode_GetExtra` before 3.12;
//! the hooks read the field directly, at an offset found once, see [`code`]), so a call costs
//! a few loads and no hash or allocation; a C function's is kept in a map
//! keyed by its `PyMethodDef` (static for the life of the process). `Func`s are leaked (a few
//! dozen bytes per distinct function, bounded by the program's code).
//!
//! Each `Func` has a small id (`u32`) that the call and return events carry; its description
//! (module, qualified name, file, line) is recorded once per process trace as a `py:function`
//! event before the first call event that uses the id ([`ensure_defined`]). After `fork()` the
//! child writes a trace of its own, so the child handler starts a new definition epoch and each
//! function is described again, lazily, in the child.
//!
//! In overwrite mode (flight recorder) the ring overwrites its oldest packets, and with them
//! the definitions recorded long ago while later calls that use their ids remain. So before
//! the API takes a snapshot or stops an overwrite session, [`redefine_all`] records every
//! function seen so far again (a state dump, as LTTng's statedump does), and the snapshot
//! or final trace describes every id it may hold.

mod cfunc;
mod code;
mod glob;

pub use cfunc::of_c_callable;
pub(crate) use code::keeping_error;
pub use code::{extra_read_directly, init_code_extra, known, of_code, of_code_in, str_of};
use glob::glob;

use crate::gil::GilCell;
use hushtrace::{FieldType, Kind, Registered};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Bumped whenever the per-thread depth counters must restart from 0 (each start of function
/// tracing, and in a fork child: the frames open at the fork began in the parent's trace).
/// Read by the hooks, the launcher filter and the task follower.
pub static GENERATION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// A function's part in following tasks ([`Func::task`]; used by `crate::tasks`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// None: the hooks do nothing more.
    None = 0,
    /// `BaseEventLoop.create_task`: its return value is a new task.
    CreateTask = 1,
    /// The function of a task's coroutine: its final return or unwind may end a task.
    Coroutine = 2,
    /// `asyncio.create_task`, `TaskGroup.create_task`: they call `BaseEventLoop.create_task`
    /// and (before 3.13) name the task it returned afterwards; their return value is the new
    /// task, named.
    NamingCreateTask = 3,
}

/// The role of a function when it is interned.
pub fn role_of(module: &str, qualname: &str) -> Role {
    // Before 3.11 code objects have no qualified name: `create_task` is unique in the module.
    match (module, qualname) {
        ("asyncio.base_events", "BaseEventLoop.create_task" | "create_task") => Role::CreateTask,
        ("asyncio.tasks", "create_task") | ("asyncio.taskgroups", "TaskGroup.create_task") => {
            Role::NamingCreateTask
        }
        _ => Role::None,
    }
}

/// One interned function.
#[derive(Debug)]
pub struct Func {
    /// The id the call and return events carry.
    pub id: u32,
    /// Not traced (`--include`/`--exclude`, or the tracer's own code).
    pub excluded: bool,
    /// Its part in following asyncio tasks: a [`Role`] (set when interned, and
    /// when a task's coroutine of this function is first seen).
    pub task: Cell<u8>,
    /// The definition epoch in which its `py:function` event was last written.
    emitted: Cell<u32>,
    module: String,
    qualname: String,
    file: String,
    line: u32,
}

// SAFETY: `emitted`, the one field with interior mutability, is read and written only with
// the GIL held (every hook and API function of this module holds it), which serializes the
// threads that share a `Func`.
unsafe impl Sync for Func {}

/// The runtime callsites of function tracing.
#[derive(Debug)]
pub struct Callsites {
    /// `py:call` begin, field `f` (the function id).
    pub begin: Registered,
    /// `py:call` end, field `f` (so readers can check and name both ends).
    pub end: Registered,
    /// `py:function`: id → module, qualname, file, line.
    pub def: Registered,
    /// `py:task` async begin: `id` (the task), `f` (its coroutine's function), `name` (the
    /// task's name, `Task.get_name()`, when it was created).
    pub task_begin: Registered,
    /// `py:task` async end: `id`, `f` (readers match async ends by name and id).
    pub task_end: Registered,
}

static CALLSITES: OnceLock<Callsites> = OnceLock::new();

/// The callsites (registered on first use).
pub fn callsites() -> Result<&'static Callsites, hushtrace::Error> {
    if let Some(c) = CALLSITES.get() {
        return Ok(c);
    }
    let f = ("f", FieldType::U32);
    let c = Callsites {
        begin: hushtrace::register_callsite("py", "call", Kind::SpanBegin, &[f])?,
        end: hushtrace::register_callsite("py", "call", Kind::SpanEnd, &[f])?,
        def: hushtrace::register_callsite(
            "py",
            "function",
            Kind::Instant,
            &[
                f,
                ("module", FieldType::Str),
                ("qualname", FieldType::Str),
                ("file", FieldType::Str),
                ("line", FieldType::U32),
            ],
        )?,
        task_begin: hushtrace::register_callsite(
            "py",
            "task",
            Kind::AsyncBegin,
            &[("id", FieldType::U64), f, ("name", FieldType::Str)],
        )?,
        task_end: hushtrace::register_callsite(
            "py",
            "task",
            Kind::AsyncEnd,
            &[("id", FieldType::U64), f],
        )?,
    };
    Ok(CALLSITES.get_or_init(|| c))
}

/// The callsites, once [`callsites`] succeeded (the hooks are installed only after it did).
#[inline]
pub fn cs() -> &'static Callsites {
    // The hooks are installed only after `callsites()` succeeded.
    CALLSITES
        .get()
        .expect("callsites registered before the hooks")
}

/// The definition epoch: bumped by every start of function tracing and in a fork child.
pub static DEF_EPOCH: AtomicU32 = AtomicU32::new(1);

/// Records `f`'s `py:function` event if it was not recorded in this epoch.
#[inline]
pub fn ensure_defined(f: &Func) {
    let epoch = DEF_EPOCH.load(Ordering::Relaxed);
    if f.emitted.get() != epoch {
        define(f, epoch);
    }
}

/// Starts a new definition epoch and records the `py:function` event of every traced
/// function seen so far in this process, on the calling thread (a state dump: see the module
/// documentation). A function whose event could not be written (the callsite disabled) is
/// described again lazily at its next call, as usual. Returns how many were written.
///
/// # Safety
/// The GIL is held.
pub unsafe fn redefine_all() -> usize {
    if CALLSITES.get().is_none() {
        return 0; // function tracing never prepared: no function was interned
    }
    let epoch = DEF_EPOCH.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    // SAFETY: GIL held (caller); `define` records an event and does not call into Python, so
    // the borrow is the only one alive.
    let t = unsafe { table() };
    let mut written = 0;
    for f in &t.funcs {
        define(f, epoch);
        written += usize::from(f.emitted.get() == epoch);
    }
    written
}

#[cold]
#[inline(never)]
fn define(f: &Func, epoch: u32) {
    let written = cs().def.record_typed((
        f.id,
        f.module.as_str(),
        f.qualname.as_str(),
        f.file.as_str(),
        f.line,
    ));
    if written {
        f.emitted.set(epoch);
    }
}

/// Include and exclude globs, applied when a function is first seen (once per code object or
/// C function, never per call).
#[derive(Debug, Default)]
pub struct Filter {
    /// Trace only functions whose module or `module.qualname` matches one (none: all).
    pub include: Vec<String>,
    /// Never trace functions whose module or `module.qualname` matches one.
    pub exclude: Vec<String>,
    /// Trace only Python functions whose file (`co_filename`) matches one (none: all).
    pub include_files: Vec<String>,
    /// Never trace Python functions whose file matches one.
    pub exclude_files: Vec<String>,
    /// Never trace Python functions of frozen modules (file `<frozen ...>`: the import
    /// machinery, and the standard modules CPython 3.11+ freezes).
    pub ignore_frozen: bool,
}

/// The file filters' verdict on a Python function of file `file` (`co_filename`): whether it
/// is left out. A glob is matched against the file as the code object names it and, when that
/// is a relative path, against its absolute form (from the working directory at the time).
/// C functions have no file: only the module globs apply to them.
fn file_excluded(filter: &Filter, file: &str) -> bool {
    if filter.ignore_frozen && file.starts_with("<frozen ") {
        return true;
    }
    if filter.include_files.is_empty() && filter.exclude_files.is_empty() {
        return false;
    }
    let absolute = (!file.starts_with('<') && !file.starts_with('/'))
        .then(|| std::env::current_dir().ok())
        .flatten()
        .map(|d| d.join(file).to_string_lossy().into_owned());
    let hit = |g: &String| glob(g, file) || absolute.as_deref().is_some_and(|a| glob(g, a));
    (!filter.include_files.is_empty() && !filter.include_files.iter().any(hit))
        || filter.exclude_files.iter().any(hit)
}

struct Table {
    next_id: u32,
    filter: Filter,
    c_funcs: HashMap<usize, &'static Func>,
    /// Every traced (not excluded) function interned so far, for [`redefine_all`].
    funcs: Vec<&'static Func>,
}

static TABLE: GilCell<Option<Table>> = GilCell::new(None);

/// Sets the filter for functions seen from now on (and forgets the verdicts on C functions;
/// code objects seen before keep theirs).
///
/// # Safety
/// The GIL is held.
pub unsafe fn set_filter(filter: Filter) {
    // SAFETY: GIL held (caller); the borrow ends in this function.
    let t = unsafe { table() };
    t.filter = filter;
    t.c_funcs.clear();
}

/// # Safety
/// The GIL is held; the borrow is not kept across calls into Python.
unsafe fn table() -> &'static mut Table {
    // SAFETY: forwarded contract.
    let t = unsafe { TABLE.get() };
    t.get_or_insert_with(|| Table {
        next_id: 1,
        filter: Filter::default(),
        c_funcs: HashMap::new(),
        funcs: Vec::new(),
    })
}

fn excluded(filter: &Filter, module: &str, qualname: &str) -> bool {
    if module == "hushtrace" || module.starts_with("hushtrace.") {
        return true; // the tracer's own Python code
    }
    let full = format!("{module}.{qualname}");
    let hit = |g: &String| glob(g, module) || glob(g, &full);
    (!filter.include.is_empty() && !filter.include.iter().any(hit))
        || filter.exclude.iter().any(hit)
}

/// Interns a new function; `code`: a Python function (its file is `co_filename`, which the
/// file filters see), not a C function.
fn new_func(
    module: String,
    qualname: String,
    file: String,
    line: u32,
    code: bool,
) -> &'static Func {
    // SAFETY: called from the hooks or API functions, GIL held; the borrow ends here.
    let t = unsafe { table() };
    let id = t.next_id;
    t.next_id = t.next_id.wrapping_add(1);
    // The program's main module body (`__main__:<module>`) is the frame the launcher waits
    // for before recording anything (`crate::launch`): the filters never leave it out, or a
    // filter that does not let the main script through (`--include lib`, `--include-files
    // 'lib/*'`) would leave the whole trace empty. It is one slice, the root of the others.
    let main = qualname == "<module>" && module == "__main__";
    let excluded = !main
        && (excluded(&t.filter, &module, &qualname) || (code && file_excluded(&t.filter, &file)));
    let f: &'static Func = Box::leak(Box::new(Func {
        id,
        excluded,
        task: Cell::new(role_of(&module, &qualname) as u8),
        emitted: Cell::new(0),
        module,
        qualname,
        file,
        line,
    }));
    if !excluded {
        t.funcs.push(f);
    }
    f
}

impl Func {
    /// Whether this is the code of the program's main module (`<module>` run as `__main__`).
    pub fn is_main_module(&self) -> bool {
        self.qualname == "<module>" && self.module == "__main__"
    }
}
