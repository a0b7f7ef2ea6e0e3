//! Kernel events as typed values: one struct per event of [`crate::schema::CLASSES`], every
//! field present (the recorder refuses to start when the running kernel's `format` file of an
//! event lacks one of its fields, so no value stands for "absent").

use crate::schema::{SYSCALL_ENTRY, SYSCALL_EXIT};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// A field value while writing (see [`crate::ctf::StreamWriter::event`]).
#[derive(Clone, Copy, Debug)]
pub enum Out<'a> {
    /// An integer (written with the class's type).
    Int(i64),
    /// Text (invalid UTF-8 replaced, cut at 255 bytes).
    Text(&'a [u8]),
}

/// A task's name (`comm`): at most 15 bytes in the kernel (`TASK_COMM_LEN` 16 with its NUL),
/// stored inline so that decoding an event allocates nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Comm {
    bytes: [u8; 16],
    len: u8,
}

impl Comm {
    /// The name in `b`, cut at 16 bytes (and to whole UTF-8 characters).
    pub fn new(b: &[u8]) -> Comm {
        let mut n = b.len().min(16);
        while std::str::from_utf8(&b[..n]).is_err() {
            n -= 1;
        }
        let mut bytes = [0u8; 16];
        bytes[..n].copy_from_slice(&b[..n]);
        Comm {
            bytes,
            len: n as u8,
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl fmt::Display for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// `sched_switch`: `prev` leaves the CPU, `next` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedSwitch {
    /// Name of the task leaving.
    pub prev_comm: Comm,
    /// Its thread id (0: the idle task).
    pub prev_tid: i32,
    /// Its priority.
    pub prev_prio: i32,
    /// Its state (`TASK_*` bits; 0: still runnable, preempted).
    pub prev_state: i64,
    /// Name of the task coming in.
    pub next_comm: Comm,
    /// Its thread id.
    pub next_tid: i32,
    /// Its priority.
    pub next_prio: i32,
}

/// `prev_state` bits below `TASK_REPORT_MAX`: zero means the task was still runnable when it
/// was switched out (preempted); anything else is a sleep (S, D, ...).
const STATE_MASK: i64 = 0xff;

impl SchedSwitch {
    /// Whether the task leaving was still runnable (preempted) rather than going to sleep.
    pub fn preempted(&self) -> bool {
        self.prev_state & STATE_MASK == 0
    }
}

/// `sched_waking`, `sched_wakeup`, `sched_wakeup_new`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wake {
    /// Name of the task woken.
    pub comm: Comm,
    /// Its thread id.
    pub tid: i32,
    /// Its priority.
    pub prio: i32,
    /// The CPU it will run on.
    pub target_cpu: i32,
}

/// `sched_migrate_task`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigrateTask {
    /// Name of the task.
    pub comm: Comm,
    /// Its thread id.
    pub tid: i32,
    /// Its priority.
    pub prio: i32,
    /// The CPU it leaves.
    pub orig_cpu: i32,
    /// The CPU it goes to.
    pub dest_cpu: i32,
}

/// `sched_process_fork`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessFork {
    /// Name of the parent.
    pub parent_comm: Comm,
    /// Its thread id.
    pub parent_tid: i32,
    /// Name of the child.
    pub child_comm: Comm,
    /// Its thread id.
    pub child_tid: i32,
}

/// `sched_process_exit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessExit {
    /// Name of the task.
    pub comm: Comm,
    /// Its thread id.
    pub tid: i32,
    /// Its priority.
    pub prio: i32,
}

/// An x86 interrupt vector with an event of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vector {
    /// The local APIC timer.
    LocalTimer,
    /// The reschedule IPI.
    Reschedule,
    /// The function call IPI.
    CallFunction,
    /// The single-CPU function call IPI.
    CallFunctionSingle,
    /// The `irq_work` interrupt.
    IrqWork,
}

impl Vector {
    /// Every vector, in the order of [`crate::schema::CLASSES`].
    pub const ALL: [Vector; 5] = [
        Vector::LocalTimer,
        Vector::Reschedule,
        Vector::CallFunction,
        Vector::CallFunctionSingle,
        Vector::IrqWork,
    ];

    /// Its part of the event names (`x86_irq_vectors_<it>_entry`).
    pub fn as_str(self) -> &'static str {
        match self {
            Vector::LocalTimer => "local_timer",
            Vector::Reschedule => "reschedule",
            Vector::CallFunction => "call_function",
            Vector::CallFunctionSingle => "call_function_single",
            Vector::IrqWork => "irq_work",
        }
    }

    /// Its name for people.
    pub fn describe(self) -> &'static str {
        match self {
            Vector::LocalTimer => "timer interrupt",
            Vector::Reschedule => "reschedule IPI",
            Vector::CallFunction => "function call IPI",
            Vector::CallFunctionSingle => "function call IPI (single)",
            Vector::IrqWork => "irq_work interrupt",
        }
    }
}

/// One kernel event's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `sched_switch`.
    SchedSwitch(SchedSwitch),
    /// `sched_waking`: a wakeup begins (on the waker's CPU).
    SchedWaking(Wake),
    /// `sched_wakeup`: the task is runnable.
    SchedWakeup(Wake),
    /// `sched_wakeup_new`: a new task is runnable.
    SchedWakeupNew(Wake),
    /// `sched_migrate_task`.
    SchedMigrateTask(MigrateTask),
    /// `sched_process_fork`.
    SchedProcessFork(ProcessFork),
    /// `sched_process_exit`.
    SchedProcessExit(ProcessExit),
    /// `irq_handler_entry`: hard interrupt `irq`, its handler's `name`.
    IrqHandlerEntry {
        /// Interrupt number.
        irq: i32,
        /// Handler name.
        name: String,
    },
    /// `irq_handler_exit`.
    IrqHandlerExit {
        /// Interrupt number.
        irq: i32,
        /// Handler result.
        ret: i32,
    },
    /// `irq_softirq_entry`: softirq vector `vec` (see [`crate::schema::softirq_name`]).
    SoftirqEntry {
        /// Vector.
        vec: u32,
    },
    /// `irq_softirq_exit`.
    SoftirqExit {
        /// Vector.
        vec: u32,
    },
    /// `x86_irq_vectors_<vector>_entry`.
    VectorEntry {
        /// Which.
        which: Vector,
        /// The vector number.
        vector: i32,
    },
    /// `x86_irq_vectors_<vector>_exit`.
    VectorExit {
        /// Which.
        which: Vector,
        /// The vector number.
        vector: i32,
    },
    /// `syscall_entry_<call>`: thread `tid` enters system call `call` (number `id`).
    SyscallEntry {
        /// The call's name (`futex`), shared by every event of the call.
        call: Arc<str>,
        /// Thread id.
        tid: i32,
        /// System call number.
        id: i64,
    },
    /// `syscall_exit_<call>`: thread `tid` returns `ret` from system call `call`.
    SyscallExit {
        /// The call's name.
        call: Arc<str>,
        /// Thread id.
        tid: i32,
        /// System call number.
        id: i64,
        /// Return value.
        ret: i64,
    },
}

/// A kernel event: when, on which CPU, what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KEvent {
    /// Timestamp in cycles of the trace's clock.
    pub ts: u64,
    /// The CPU it happened on.
    pub cpu: u32,
    /// What happened.
    pub event: Event,
}

/// A field value while decoding: what the reader gives for the class's field types.
#[derive(Clone, Copy, Debug)]
pub(crate) enum In<'a> {
    Int(i64),
    Text(&'a str),
}

impl Event {
    /// The CTF event name (LTTng's).
    pub fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Event::SchedSwitch(_) => "sched_switch",
            Event::SchedWaking(_) => "sched_waking",
            Event::SchedWakeup(_) => "sched_wakeup",
            Event::SchedWakeupNew(_) => "sched_wakeup_new",
            Event::SchedMigrateTask(_) => "sched_migrate_task",
            Event::SchedProcessFork(_) => "sched_process_fork",
            Event::SchedProcessExit(_) => "sched_process_exit",
            Event::IrqHandlerEntry { .. } => "irq_handler_entry",
            Event::IrqHandlerExit { .. } => "irq_handler_exit",
            Event::SoftirqEntry { .. } => "irq_softirq_entry",
            Event::SoftirqExit { .. } => "irq_softirq_exit",
            Event::VectorEntry { which, .. } => match which {
                Vector::LocalTimer => "x86_irq_vectors_local_timer_entry",
                Vector::Reschedule => "x86_irq_vectors_reschedule_entry",
                Vector::CallFunction => "x86_irq_vectors_call_function_entry",
                Vector::CallFunctionSingle => "x86_irq_vectors_call_function_single_entry",
                Vector::IrqWork => "x86_irq_vectors_irq_work_entry",
            },
            Event::VectorExit { which, .. } => match which {
                Vector::LocalTimer => "x86_irq_vectors_local_timer_exit",
                Vector::Reschedule => "x86_irq_vectors_reschedule_exit",
                Vector::CallFunction => "x86_irq_vectors_call_function_exit",
                Vector::CallFunctionSingle => "x86_irq_vectors_call_function_single_exit",
                Vector::IrqWork => "x86_irq_vectors_irq_work_exit",
            },
            Event::SyscallEntry { call, .. } => return format!("{SYSCALL_ENTRY}{call}").into(),
            Event::SyscallExit { call, .. } => return format!("{SYSCALL_EXIT}{call}").into(),
        })
    }

    /// The system-call event of `call` (its exit with `exit`) with `v`, the fields of
    /// [`crate::schema::SYSCALL_ENTRY_FIELDS`] or [`crate::schema::SYSCALL_EXIT_FIELDS`];
    /// `None` when they do not match.
    pub(crate) fn syscall(call: Arc<str>, exit: bool, v: &[In<'_>]) -> Option<Event> {
        let int = |i: usize| match v.get(i)? {
            In::Int(n) => Some(*n),
            In::Text(_) => None,
        };
        let tid = i32::try_from(int(0)?).ok()?;
        let id = int(1)?;
        Some(if exit {
            Event::SyscallExit {
                call,
                tid,
                id,
                ret: int(2)?,
            }
        } else {
            Event::SyscallEntry { call, tid, id }
        })
    }

    /// The event of class `name` with `v`, its fields in the class's order and types; `None`
    /// when they do not match the class (the caller names the problem).
    pub(crate) fn decode(name: &str, v: &[In<'_>]) -> Option<Event> {
        let int = |i: usize| match v.get(i)? {
            In::Int(n) => Some(*n),
            In::Text(_) => None,
        };
        let i32_ = |i: usize| int(i).and_then(|n| i32::try_from(n).ok());
        let comm = |i: usize| match v.get(i)? {
            In::Text(t) => Some(Comm::new(t.as_bytes())),
            In::Int(_) => None,
        };
        let wake = || {
            Some(Wake {
                comm: comm(0)?,
                tid: i32_(1)?,
                prio: i32_(2)?,
                target_cpu: i32_(3)?,
            })
        };
        let vector = |rest: &str| {
            Vector::ALL
                .into_iter()
                .find(|w| w.as_str() == rest)
                .zip(i32_(0))
        };
        Some(match name {
            "sched_switch" => Event::SchedSwitch(SchedSwitch {
                prev_comm: comm(0)?,
                prev_tid: i32_(1)?,
                prev_prio: i32_(2)?,
                prev_state: int(3)?,
                next_comm: comm(4)?,
                next_tid: i32_(5)?,
                next_prio: i32_(6)?,
            }),
            "sched_waking" => Event::SchedWaking(wake()?),
            "sched_wakeup" => Event::SchedWakeup(wake()?),
            "sched_wakeup_new" => Event::SchedWakeupNew(wake()?),
            "sched_migrate_task" => Event::SchedMigrateTask(MigrateTask {
                comm: comm(0)?,
                tid: i32_(1)?,
                prio: i32_(2)?,
                orig_cpu: i32_(3)?,
                dest_cpu: i32_(4)?,
            }),
            "sched_process_fork" => Event::SchedProcessFork(ProcessFork {
                parent_comm: comm(0)?,
                parent_tid: i32_(1)?,
                child_comm: comm(2)?,
                child_tid: i32_(3)?,
            }),
            "sched_process_exit" => Event::SchedProcessExit(ProcessExit {
                comm: comm(0)?,
                tid: i32_(1)?,
                prio: i32_(2)?,
            }),
            "irq_handler_entry" => Event::IrqHandlerEntry {
                irq: i32_(0)?,
                name: match v.get(1)? {
                    In::Text(t) => t.to_string(),
                    In::Int(_) => return None,
                },
            },
            "irq_handler_exit" => Event::IrqHandlerExit {
                irq: i32_(0)?,
                ret: i32_(1)?,
            },
            "irq_softirq_entry" => Event::SoftirqEntry {
                vec: u32::try_from(int(0)?).ok()?,
            },
            "irq_softirq_exit" => Event::SoftirqExit {
                vec: u32::try_from(int(0)?).ok()?,
            },
            n => {
                let rest = n.strip_prefix("x86_irq_vectors_")?;
                if let Some(w) = rest.strip_suffix("_entry") {
                    let (which, vector) = vector(w)?;
                    Event::VectorEntry { which, vector }
                } else {
                    let (which, vector) = vector(rest.strip_suffix("_exit")?)?;
                    Event::VectorExit { which, vector }
                }
            }
        })
    }

    /// Calls `f` with the event's fields in its class's order, as the writer takes them.
    pub fn with_values<R>(&self, f: impl FnOnce(&[Out<'_>]) -> R) -> R {
        fn c(c: &Comm) -> Out<'_> {
            Out::Text(c.as_str().as_bytes())
        }
        let i = |n: i32| Out::Int(n.into());
        match self {
            Event::SchedSwitch(s) => f(&[
                c(&s.prev_comm),
                i(s.prev_tid),
                i(s.prev_prio),
                Out::Int(s.prev_state),
                c(&s.next_comm),
                i(s.next_tid),
                i(s.next_prio),
            ]),
            Event::SchedWaking(w) | Event::SchedWakeup(w) | Event::SchedWakeupNew(w) => {
                f(&[c(&w.comm), i(w.tid), i(w.prio), i(w.target_cpu)])
            }
            Event::SchedMigrateTask(m) => f(&[
                c(&m.comm),
                i(m.tid),
                i(m.prio),
                i(m.orig_cpu),
                i(m.dest_cpu),
            ]),
            Event::SchedProcessFork(p) => f(&[
                c(&p.parent_comm),
                i(p.parent_tid),
                c(&p.child_comm),
                i(p.child_tid),
            ]),
            Event::SchedProcessExit(p) => f(&[c(&p.comm), i(p.tid), i(p.prio)]),
            Event::IrqHandlerEntry { irq, name } => f(&[i(*irq), Out::Text(name.as_bytes())]),
            Event::IrqHandlerExit { irq, ret } => f(&[i(*irq), i(*ret)]),
            Event::SoftirqEntry { vec } | Event::SoftirqExit { vec } => {
                f(&[Out::Int((*vec).into())])
            }
            Event::VectorEntry { vector, .. } | Event::VectorExit { vector, .. } => {
                f(&[i(*vector)])
            }
            Event::SyscallEntry { tid, id, .. } => f(&[i(*tid), Out::Int(*id)]),
            Event::SyscallExit { tid, id, ret, .. } => f(&[i(*tid), Out::Int(*id), Out::Int(*ret)]),
        }
    }
}

impl KEvent {
    /// The CTF event name (LTTng's).
    pub fn name(&self) -> Cow<'static, str> {
        self.event.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_calls_are_named() {
        let e = Event::syscall(
            "futex".into(),
            true,
            &[In::Int(7), In::Int(202), In::Int(-4)],
        )
        .unwrap();
        assert_eq!(e.name(), "syscall_exit_futex");
        e.with_values(|v| assert_eq!(v.len(), 3));
        assert_eq!(Event::syscall("futex".into(), true, &[In::Int(7)]), None);
        let e = Event::syscall("read".into(), false, &[In::Int(7), In::Int(0)]).unwrap();
        assert_eq!(e.name(), "syscall_entry_read");
    }

    #[test]
    fn comm_is_cut_to_whole_characters() {
        assert_eq!(Comm::new(b"worker").as_str(), "worker");
        assert_eq!(Comm::new(&[b'a'; 20]).as_str().len(), 16);
        let mut b = vec![b'a'; 15];
        b.extend_from_slice("é".as_bytes());
        assert_eq!(Comm::new(&b).as_str(), "a".repeat(15));
    }

    #[test]
    fn every_class_decodes_what_it_encodes() {
        for class in crate::schema::CLASSES {
            let vals: Vec<In<'_>> = class
                .fields
                .iter()
                .enumerate()
                .map(|(i, (_, _, ty))| match ty {
                    crate::schema::Ty::Str => In::Text("x"),
                    _ => In::Int(i as i64),
                })
                .collect();
            let e = Event::decode(class.name, &vals)
                .unwrap_or_else(|| panic!("{} does not decode", class.name));
            assert_eq!(e.name(), class.name);
            e.with_values(|out| assert_eq!(out.len(), class.fields.len(), "{}", class.name));
            // A text where an integer belongs is refused, not read as 0.
            if let Some(k) = class
                .fields
                .iter()
                .position(|(_, _, t)| *t != crate::schema::Ty::Str)
            {
                let mut bad = vals.clone();
                bad[k] = In::Text("1");
                assert_eq!(Event::decode(class.name, &bad), None, "{}", class.name);
            }
        }
    }
}
