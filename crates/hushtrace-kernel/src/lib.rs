//! Kernel scheduling events on hushtrace's timeline.
//!
//! `hushtrace record --kernel` records, besides the program's own trace, the scheduler's
//! switches and wakeups (and optionally interrupts and the program's system calls) for the
//! whole machine, so that "why was this cycle late?" has an answer: preempted by whom, blocked
//! how long, interrupted by what.
//!
//! * [`tracefs`]: a private ftrace instance, never the global buffer, named after its
//!   recorder's pid, PID namespace and start time ([`owner`]) so that recorders in different
//!   containers never meet; removed at the end, by a guard process if the recorder dies, and
//!   stale ones of provably gone recorders by the next run or `hushtrace recover`.
//! * [`format`](mod@format), [`page`]: the kernel's event layouts (from tracefs, nothing hard-coded) and
//!   its binary ring-buffer pages, read from `per_cpu/cpuN/trace_pipe_raw` by the recorder's
//!   threads (the traced program is not touched).
//! * [`capture`]: the recording; [`clock`]: the trace clock, `x86-tsc` (hushtrace's own cycle
//!   counter) or `mono` with its offset written down.
//! * [`ctf`]: the CTF 1.8 kernel trace under `DIR/kernel/`, with LTTng's kernel event names
//!   and fields ([`schema`], typed in [`event`]), written and read through `hushtrace-ctf`'s
//!   one format layer (packet headers, metadata, reader, safe file access) so babeltrace2 merges it with the user-space streams and Trace
//!   Compass opens it as a kernel trace; and its reader.
//! * [`flight`]: in overwrite mode, the kernel's rings written beside each snapshot of the
//!   program (`<session>/snapshots/<n>/kernel/`) and each late-span capture
//!   (`<session>/late/<n>/kernel/`).
//! * [`recovery`]: a kernel trace whose recorder was killed, made readable (`hushtrace
//!   recover`), and what readers say about a missing or unreadable kernel part.
//! * [`analysis`]: thread states over time, and off-CPU intervals of a thread in a window.
//!
//! Why not libtracefs/libtraceevent or a crate: the crates on crates.io that read ftrace
//! parse the text `trace` file or only toggle tracefs settings; libtraceevent (C, LGPL) would
//! add a system library and FFI to parse a page format of a few dozen lines. The parser here
//! follows the kernel's documented layout and reads every field offset from tracefs.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod analysis;
pub mod capture;
pub mod clock;
pub mod ctf;
pub mod event;
pub mod flight;
pub mod format;
pub mod owner;
pub mod page;
pub mod recovery;
pub mod schema;
pub mod signals;
pub mod tracefs;

pub use capture::{parse_categories, Capture, Error, Options, Summary};
pub use ctf::{Events, KernelTrace, KERNEL_DIR};
pub use event::{Event, KEvent};
pub use schema::Category;
