//! The tables' columns, in file order (documented in docs/sql.md and [`super`]).

use super::table::{opt, req, Col, Ty};

/// `slices`: one row per span, thread spans and async spans.
pub const SLICES: &[Col] = &[
    req("pid", Ty::I64),
    req("tid", Ty::I64),
    req("thread_name", Ty::Str),
    req("process_name", Ty::Str),
    req("kind", Ty::Str),
    req("category", Ty::Str),
    req("name", Ty::Str),
    req("start_ns", Ty::I64).distinct(),
    opt("dur_ns", Ty::I64).distinct(),
    req("depth", Ty::I32),
    req("slice_id", Ty::I64).distinct(),
    opt("parent_id", Ty::I64).distinct(),
    opt("self_ns", Ty::I64).distinct(),
    opt("args", Ty::Json).distinct(),
    opt("py_module", Ty::Str),
    opt("py_qualname", Ty::Str),
    opt("py_file", Ty::Str),
    opt("py_line", Ty::I64),
];

/// `instants`: one row per instant event (Python function definitions excluded).
pub const INSTANTS: &[Col] = &[
    req("pid", Ty::I64),
    req("tid", Ty::I64),
    req("thread_name", Ty::Str),
    req("process_name", Ty::Str),
    req("category", Ty::Str),
    req("name", Ty::Str),
    req("ts_ns", Ty::I64).distinct(),
    opt("args", Ty::Json).distinct(),
];

/// `counters`: one row per counter sample.
pub const COUNTERS: &[Col] = &[
    req("pid", Ty::I64),
    req("tid", Ty::I64),
    req("thread_name", Ty::Str),
    req("process_name", Ty::Str),
    req("category", Ty::Str),
    req("name", Ty::Str),
    req("ts_ns", Ty::I64).distinct(),
    opt("value", Ty::F64).distinct(),
    opt("value_int", Ty::I64).distinct(),
];

/// `threads`: one row per thread with events.
pub const THREADS: &[Col] = &[
    req("pid", Ty::I64),
    req("tid", Ty::I64),
    req("name", Ty::Str),
    req("process_name", Ty::Str),
    req("first_ns", Ty::I64),
    req("last_ns", Ty::I64),
    req("events", Ty::I64),
    req("discarded_events", Ty::I64),
    req("lost_packets", Ty::I64),
];

/// `processes`: one row per process trace (and per pid with events).
pub const PROCESSES: &[Col] = &[
    req("pid", Ty::I64),
    req("name", Ty::Str),
    opt("trace_dir", Ty::Str),
    req("origin", Ty::Str),
    req("complete", Ty::Bool),
    opt("first_ns", Ty::I64),
    opt("last_ns", Ty::I64),
    req("events", Ty::I64),
    req("threads", Ty::I64),
    req("discarded_events", Ty::I64),
    req("lost_packets", Ty::I64),
    opt("stats_written", Ty::I64),
    opt("stats_discarded", Ty::I64),
];

/// `losses`: one row per gap in a stream (events discarded, packets lost or overwritten).
pub const LOSSES: &[Col] = &[
    req("pid", Ty::I64),
    req("tid", Ty::I64),
    req("thread_name", Ty::Str),
    req("stream", Ty::Str),
    opt("after_ns", Ty::I64).distinct(),
    opt("before_ns", Ty::I64).distinct(),
    req("discarded_events", Ty::I64),
    req("lost_packets", Ty::I64),
];

/// `sched`: one row per scheduling event of the kernel trace (every CPU, every task).
pub const SCHED: &[Col] = &[
    req("ts_ns", Ty::I64).distinct(),
    req("cpu", Ty::I32),
    req("event", Ty::Str),
    req("tid", Ty::I64),
    req("comm", Ty::Str),
    opt("prio", Ty::I32),
    opt("prev_state", Ty::I64),
    opt("next_tid", Ty::I64),
    opt("next_comm", Ty::Str),
    opt("next_prio", Ty::I32),
    opt("target_cpu", Ty::I32),
    opt("orig_cpu", Ty::I32),
];

/// `thread_state`: the traced threads' running, runnable and blocked intervals.
pub const THREAD_STATE: &[Col] = &[
    req("pid", Ty::I64),
    req("tid", Ty::I64),
    req("state", Ty::Str),
    req("start_ns", Ty::I64).distinct(),
    opt("end_ns", Ty::I64).distinct(),
    opt("dur_ns", Ty::I64).distinct(),
    req("cpu", Ty::I32),
    opt("by_tid", Ty::I64),
    opt("by_name", Ty::Str),
    opt("by", Ty::Json).distinct(),
    opt("syscall", Ty::Str),
];
