//! The kernel events hushtrace records: LTTng's names and fields (lttng-modules
//! `instrumentation/events/sched.h`, `irq.h`), each taken from one ftrace event.

/// A field's type in the CTF trace: the process traces' field types (`int32_t`, `int64_t`,
/// `uint32_t`, `string` here), so one writer and one reader serve both.
pub use hushtrace_ctf::FieldType as Ty;

/// Which `--kernel` category enables an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Category {
    /// Scheduler: switches, wakeups, migrations, fork/exit.
    Sched,
    /// Hard and soft interrupts.
    Irq,
    /// The traced program's system calls, by name (`syscall_entry_futex`).
    Syscalls,
}

impl Category {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Sched => "sched",
            Category::Irq => "irq",
            Category::Syscalls => "syscalls",
        }
    }

    /// Parses a name used on the command line.
    pub fn parse(s: &str) -> Option<Category> {
        match s {
            "sched" => Some(Category::Sched),
            "irq" => Some(Category::Irq),
            "syscalls" | "syscall" => Some(Category::Syscalls),
            _ => None,
        }
    }
}

/// One event class of the kernel trace.
#[derive(Debug)]
pub struct Class {
    /// Name in the CTF trace (LTTng's).
    pub name: &'static str,
    /// ftrace subsystem.
    pub sys: &'static str,
    /// ftrace event name.
    pub ftrace: &'static str,
    /// Category that enables it.
    pub category: Category,
    /// `(CTF field name, ftrace field name, type)`; every ftrace field must be in the running
    /// kernel's `format` file of the event (checked when the recording starts).
    pub fields: &'static [(&'static str, &'static str, Ty)],
}

const WAKE: &[(&str, &str, Ty)] = &[
    ("comm", "comm", Ty::Str),
    ("tid", "pid", Ty::I32),
    ("prio", "prio", Ty::I32),
    ("target_cpu", "target_cpu", Ty::I32),
];

const VECTOR: &[(&str, &str, Ty)] = &[("vector", "vector", Ty::I32)];

/// Every class; the CTF event id is the index.
pub const CLASSES: &[Class] = &[
    Class {
        name: "sched_switch",
        sys: "sched",
        ftrace: "sched_switch",
        category: Category::Sched,
        fields: &[
            ("prev_comm", "prev_comm", Ty::Str),
            ("prev_tid", "prev_pid", Ty::I32),
            ("prev_prio", "prev_prio", Ty::I32),
            ("prev_state", "prev_state", Ty::I64),
            ("next_comm", "next_comm", Ty::Str),
            ("next_tid", "next_pid", Ty::I32),
            ("next_prio", "next_prio", Ty::I32),
        ],
    },
    Class {
        name: "sched_waking",
        sys: "sched",
        ftrace: "sched_waking",
        category: Category::Sched,
        fields: WAKE,
    },
    Class {
        name: "sched_wakeup",
        sys: "sched",
        ftrace: "sched_wakeup",
        category: Category::Sched,
        fields: WAKE,
    },
    Class {
        name: "sched_wakeup_new",
        sys: "sched",
        ftrace: "sched_wakeup_new",
        category: Category::Sched,
        fields: WAKE,
    },
    Class {
        name: "sched_migrate_task",
        sys: "sched",
        ftrace: "sched_migrate_task",
        category: Category::Sched,
        fields: &[
            ("comm", "comm", Ty::Str),
            ("tid", "pid", Ty::I32),
            ("prio", "prio", Ty::I32),
            ("orig_cpu", "orig_cpu", Ty::I32),
            ("dest_cpu", "dest_cpu", Ty::I32),
        ],
    },
    Class {
        name: "sched_process_fork",
        sys: "sched",
        ftrace: "sched_process_fork",
        category: Category::Sched,
        fields: &[
            ("parent_comm", "parent_comm", Ty::Str),
            ("parent_tid", "parent_pid", Ty::I32),
            ("child_comm", "child_comm", Ty::Str),
            ("child_tid", "child_pid", Ty::I32),
        ],
    },
    Class {
        name: "sched_process_exit",
        sys: "sched",
        ftrace: "sched_process_exit",
        category: Category::Sched,
        fields: &[
            ("comm", "comm", Ty::Str),
            ("tid", "pid", Ty::I32),
            ("prio", "prio", Ty::I32),
        ],
    },
    Class {
        name: "irq_handler_entry",
        sys: "irq",
        ftrace: "irq_handler_entry",
        category: Category::Irq,
        fields: &[("irq", "irq", Ty::I32), ("name", "name", Ty::Str)],
    },
    Class {
        name: "irq_handler_exit",
        sys: "irq",
        ftrace: "irq_handler_exit",
        category: Category::Irq,
        fields: &[("irq", "irq", Ty::I32), ("ret", "ret", Ty::I32)],
    },
    Class {
        name: "irq_softirq_entry",
        sys: "irq",
        ftrace: "softirq_entry",
        category: Category::Irq,
        fields: &[("vec", "vec", Ty::U32)],
    },
    Class {
        name: "irq_softirq_exit",
        sys: "irq",
        ftrace: "softirq_exit",
        category: Category::Irq,
        fields: &[("vec", "vec", Ty::U32)],
    },
    Class {
        name: "x86_irq_vectors_local_timer_entry",
        sys: "irq_vectors",
        ftrace: "local_timer_entry",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_local_timer_exit",
        sys: "irq_vectors",
        ftrace: "local_timer_exit",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_reschedule_entry",
        sys: "irq_vectors",
        ftrace: "reschedule_entry",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_reschedule_exit",
        sys: "irq_vectors",
        ftrace: "reschedule_exit",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_call_function_entry",
        sys: "irq_vectors",
        ftrace: "call_function_entry",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_call_function_exit",
        sys: "irq_vectors",
        ftrace: "call_function_exit",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_call_function_single_entry",
        sys: "irq_vectors",
        ftrace: "call_function_single_entry",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_call_function_single_exit",
        sys: "irq_vectors",
        ftrace: "call_function_single_exit",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_irq_work_entry",
        sys: "irq_vectors",
        ftrace: "irq_work_entry",
        category: Category::Irq,
        fields: VECTOR,
    },
    Class {
        name: "x86_irq_vectors_irq_work_exit",
        sys: "irq_vectors",
        ftrace: "irq_work_exit",
        category: Category::Irq,
        fields: VECTOR,
    },
];

#[cfg(test)]
#[test]
fn classes_fit_the_decoder() {
    assert!(CLASSES.iter().all(|c| c.fields.len() <= 8));
    assert!(CLASSES.len() < usize::from(u16::MAX));
}

/// Prefix of the system-call entry events (`syscall_entry_futex`, as LTTng names them).
pub const SYSCALL_ENTRY: &str = "syscall_entry_";
/// Prefix of the system-call exit events (`syscall_exit_futex`).
pub const SYSCALL_EXIT: &str = "syscall_exit_";

/// The fields of every `syscall_entry_<name>` event: the thread and the call's number, from
/// the ftrace event `syscalls:sys_enter_<name>`.
pub const SYSCALL_ENTRY_FIELDS: &[(&str, &str, Ty)] = &[
    ("tid", "common_pid", Ty::I32),
    ("id", "__syscall_nr", Ty::I64),
];
/// The fields of every `syscall_exit_<name>` event (`syscalls:sys_exit_<name>`).
pub const SYSCALL_EXIT_FIELDS: &[(&str, &str, Ty)] = &[
    ("tid", "common_pid", Ty::I32),
    ("id", "__syscall_nr", Ty::I64),
    ("ret", "ret", Ty::I64),
];

/// The event classes of a trace: [`CLASSES`] (ids `0..CLASSES.len()`), then for each system
/// call of `syscalls` (the running kernel's, by name) its entry and its exit event.
///
/// ```
/// use hushtrace_kernel::schema::{ClassTable, CLASSES};
/// let t = ClassTable::new(vec!["read".into(), "futex".into()]);
/// let id = t.id_of("syscall_exit_futex").unwrap();
/// assert_eq!(usize::from(id), CLASSES.len() + 3);
/// assert_eq!(t.name(id), Some("syscall_exit_futex".into()));
/// assert_eq!(t.fields(id).unwrap().len(), 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassTable {
    syscalls: Vec<String>,
}

impl ClassTable {
    /// The table with the system calls `syscalls`, in this order.
    pub fn new(syscalls: Vec<String>) -> ClassTable {
        ClassTable { syscalls }
    }

    /// The system calls.
    pub fn syscalls(&self) -> &[String] {
        &self.syscalls
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        CLASSES.len() + 2 * self.syscalls.len()
    }

    /// Whether there is none (never: [`CLASSES`] is not empty).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The CTF name of class `id`.
    pub fn name(&self, id: u16) -> Option<std::borrow::Cow<'static, str>> {
        let i = usize::from(id);
        if let Some(c) = CLASSES.get(i) {
            return Some(c.name.into());
        }
        let k = i - CLASSES.len();
        let call = self.syscalls.get(k / 2)?;
        let prefix = if k.is_multiple_of(2) {
            SYSCALL_ENTRY
        } else {
            SYSCALL_EXIT
        };
        Some(format!("{prefix}{call}").into())
    }

    /// The fields of class `id`.
    pub fn fields(&self, id: u16) -> Option<&'static [(&'static str, &'static str, Ty)]> {
        let i = usize::from(id);
        if let Some(c) = CLASSES.get(i) {
            return Some(c.fields);
        }
        let k = i - CLASSES.len();
        (k / 2 < self.syscalls.len()).then_some(if k.is_multiple_of(2) {
            SYSCALL_ENTRY_FIELDS
        } else {
            SYSCALL_EXIT_FIELDS
        })
    }

    /// The id of the class called `name`.
    pub fn id_of(&self, name: &str) -> Option<u16> {
        if let Some(id) = id_of(name) {
            return Some(id);
        }
        let (call, exit) = match name.strip_prefix(SYSCALL_ENTRY) {
            Some(c) => (c, 0),
            None => (name.strip_prefix(SYSCALL_EXIT)?, 1),
        };
        let k = self.syscalls.iter().position(|s| s == call)?;
        u16::try_from(CLASSES.len() + 2 * k + exit).ok()
    }
}

/// The id of the class called `name`.
pub fn id_of(name: &str) -> Option<u16> {
    CLASSES
        .iter()
        .position(|c| c.name == name)
        .map(|i| i as u16)
}

/// The names of the Linux softirq vectors (`include/linux/interrupt.h`), for reports.
pub fn softirq_name(vec: u32) -> &'static str {
    const NAMES: [&str; 10] = [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ];
    NAMES.get(vec as usize).copied().unwrap_or("?")
}
