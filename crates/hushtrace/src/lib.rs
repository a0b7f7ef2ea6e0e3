//! # hushtrace
//!
//! A userspace tracer that is safe to call from hard real-time threads and correct across
//! `fork()`.
//!
//! * A tracepoint costs a cycle-counter read and a few stores into a buffer owned by the calling
//!   thread: no lock, no allocation, no formatting, no shared cache line written. A disabled
//!   tracepoint costs one relaxed load and a branch.
//! * A thread in *no-syscall mode* ([`set_thread_no_syscall`]) never enters the kernel because
//!   of tracing — not for its identity, its timestamps, a packet hand-over, a callsite enabled
//!   later, or a session that starts or stops meanwhile.
//! * After `fork()` the child reports its own pid/tid, never duplicates the parent's buffered
//!   events, cannot deadlock on tracer locks, and the reset costs O(threads).
//! * Output is CTF 1.8, read by `babeltrace2` and Trace Compass; the `hushtrace` command
//!   converts it to Chrome/Perfetto JSON.
//!
//! ```no_run
//! let session = hushtrace::Session::builder().output_dir("/tmp/trace").start()?;
//! hushtrace::event!("app", "started", version = 3u32, name = "demo");
//! {
//!     let _span = hushtrace::span!("app", "work", items = 10u64);
//!     hushtrace::counter!("app", "queue_depth", 7u32);
//! }
//! let stats = session.stop()?;
//! assert_eq!(stats.events_discarded, 0);
//! # Ok::<(), hushtrace::Error>(())
//! ```
//!
//! Cargo feature `enable` (on by default): without it (`default-features = false`) every
//! `event!`, `span!` and `counter!` compiles to nothing, for builds that must carry no tracing
//! at all (`tests/statically-disabled` proves it).
//!
//! Field types: all integer types, `f32`/`f64`, `bool`, `&str`/`String` (copied, at most
//! [`STR_CAP`] bytes). A callsite's field names are known at link time; its field types are
//! published (a few atomic stores, no system call) by its first hit, because Rust cannot name
//! the type of an arbitrary expression in a static. A callsite inside a generic function must
//! record the same field types in every instantiation; other instantiations are dropped.
#![deny(unsafe_op_in_unsafe_fn)]
// Without the `relay` or `control` feature, the items only they use are dead: dead code is
// checked in the default build, which has every part.
#![cfg_attr(not(all(feature = "relay", feature = "control")), allow(dead_code))]

// Layers, lowest first; a module imports only modules above it in this list (checked by
// `ci/layers.py`, drawn in ARCHITECTURE.md).
mod async_span;
mod callsites;
mod clock;
mod config;
mod consumer;
#[cfg(feature = "control")]
#[cfg_attr(docsrs, doc(cfg(feature = "control")))]
pub mod control;
mod ctx;
mod deadline;
pub mod env;
mod fixed;
mod fork;
#[cfg(hushtrace_loom)]
#[doc(hidden)]
pub mod handover;
#[cfg(not(hushtrace_loom))]
mod handover;
mod late;
mod local;
mod lock;
mod nosyscall;
mod platform;
mod primitive;
mod relaxed;
#[cfg(hushtrace_loom)]
#[doc(hidden)]
pub mod ring;
#[cfg(not(hushtrace_loom))]
mod ring;
mod ringdir;
mod session;
mod snapshot;
mod state;
mod thread;
mod tracedir;
pub mod verify;
mod write;

pub use async_span::{AsParent, AsyncSpan, InSpan, InSpanExt};
pub use callsites::{discard_unregistered, register_callsite, Registered};
pub use config::{
    cpu_list_text, parse_cpu_list, ConsumerSched, Error, Policy, Stats, DEFAULT_LATE_INTERVAL,
    DEFAULT_LATE_MAX, DEFAULT_LATE_WINDOW, DEFAULT_NUM_SUBBUFS, DEFAULT_READ_TIMER,
    DEFAULT_SUBBUF_SIZE,
};
pub use consumer::sink::relay_default_names;
pub use hushtrace_core::{FieldType, Kind, STR_CAP};
pub use nosyscall::{
    clear_thread_no_syscall, init_thread, load_policy as load_no_syscall_policy, set_thread_name,
    set_thread_no_syscall, set_thread_trace_name, thread_in_no_syscall, try_set_thread_no_syscall,
    NoSyscallGuard,
};
/// A version 4 UUID from `getrandom(2)` (for traces that are not the runtime's own, such as
/// `record --kernel`'s), mixed with the time and pid if that fails.
pub use platform::random_uuid;
pub use ring::Mode;
pub use session::{start_from_env, Session, SessionBuilder};
pub use snapshot::{snapshot, Snapshot};
pub use state::set_process_name;
pub use write::Value;

use std::marker::PhantomData;

/// Enables every callsite whose `"category:name"` matches the glob `pattern` (`*` and `?`);
/// returns how many matched. Takes effect immediately on every thread.
///
/// ```
/// hushtrace::disable("noisy:*");
/// hushtrace::enable("noisy:important");
/// ```
pub fn enable(pattern: &str) -> usize {
    hushtrace_core::set_enabled(pattern, true)
}

/// Disables every callsite whose `"category:name"` matches the glob `pattern`; returns how many
/// matched. A disabled callsite costs one relaxed load and a branch.
///
/// ```
/// hushtrace::disable("*");
/// hushtrace::enable("*");
/// ```
pub fn disable(pattern: &str) -> usize {
    hushtrace_core::set_enabled(pattern, false)
}

/// Starts `f` on a new detached thread, the way the runtime starts its own consumer thread
/// (`pthread_create` directly, no lock of the standard library's thread machinery): usable in
/// the child of a `fork()`, where `std::thread::spawn` can block forever on a lock a vanished
/// parent thread held. `f` must not use `std::thread::current()`, `park` or other std thread
/// APIs; a panic in it ends the thread.
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// hushtrace::spawn_fork_safe(Box::new(move || tx.send(7).unwrap())).unwrap();
/// assert_eq!(rx.recv().unwrap(), 7);
/// ```
pub fn spawn_fork_safe(f: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
    platform::spawn_raw(f).map(platform::RawThread::detach)
}

/// The clock this process stamps its events with, as the runtime decided it: the cycle counter
/// when it is invariant and `HUSHTRACE_CLOCK` ([`env::CLOCK`]) is not `monotonic`, else
/// `clock_gettime(CLOCK_MONOTONIC)`. Calibrates once per process (about 20 ms the first time).
/// `hushtrace record --kernel` stamps the kernel trace with the same decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockChoice {
    /// Frequency, epoch offset and source (`"tsc"`, `"cntvct"`, `"clock_gettime"`).
    pub desc: hushtrace_ctf::metadata::ClockDesc,
    /// Whether timestamps are cycle-counter values (else `CLOCK_MONOTONIC` nanoseconds).
    pub counter: bool,
    /// The clock UUID every process trace of this boot writes (the kernel boot id).
    pub uuid: [u8; 16],
}

/// The clock decision of this process (see [`ClockChoice`]).
///
/// ```
/// let c = hushtrace::clock_choice();
/// assert!(c.desc.freq >= 1_000_000);
/// assert_eq!(c.counter, c.desc.source != "clock_gettime");
/// ```
pub fn clock_choice() -> ClockChoice {
    let desc = clock::calibrate().clone();
    ClockChoice {
        desc,
        counter: clock::counter_usable(),
        uuid: state::boot_clock_uuid(),
    }
}

/// Ends a span when dropped (see [`span!`]). Not `Send`: the end is recorded on the thread that
/// began the span.
///
/// ```compile_fail
/// fn needs_send<T: Send>(_: T) {}
/// needs_send(hushtrace::span!("app", "work")); // error: the guard is not Send
/// ```
#[must_use = "a span ends when its guard drops; bind it with `let _guard = span!(...)`"]
#[derive(Debug)]
pub struct SpanGuard {
    end: Option<&'static hushtrace_core::Callsite>,
    /// The begin's timestamp, when the span has a deadline.
    start: u64,
    /// The span's deadline in clock ticks (0: none).
    deadline: u64,
    _not_send: PhantomData<*const ()>,
}

impl SpanGuard {
    #[doc(hidden)]
    #[inline(always)]
    pub fn __new(end: Option<&'static hushtrace_core::Callsite>) -> SpanGuard {
        SpanGuard {
            end,
            start: 0,
            deadline: 0,
            _not_send: PhantomData,
        }
    }

    /// A guard that checks the span's duration against `deadline` ticks at its end.
    #[inline(always)]
    pub(crate) fn __timed(
        end: &'static hushtrace_core::Callsite,
        start: u64,
        deadline: u64,
    ) -> SpanGuard {
        SpanGuard {
            end: Some(end),
            start,
            deadline,
            _not_send: PhantomData,
        }
    }
}

impl Drop for SpanGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(cs) = self.end {
            // The begin callsite was enabled: record the end even if it was disabled since, so
            // begin/end stay balanced. (If the begin was dropped on a full buffer, the end is
            // still attempted: every tracepoint call is accounted as written or discarded, and
            // readers ignore an end without its begin.)
            let i = cs.state.interest();
            let i = if i.is_enabled() {
                i
            } else {
                hushtrace_core::Interest::NEEDS_TYPES
            };
            if self.deadline == 0 {
                write::emit(cs, i, ());
            } else {
                write::end_timed(cs, i, (), self.start, self.deadline);
            }
        }
    }
}

#[doc(hidden)]
pub mod __private {
    pub use crate::deadline::{
        begin_span, begin_timed, declare_span_deadline, end_span, span_has_deadline,
    };
    pub use crate::fixed::{register_thread, with_thread, FastThread};
    pub use crate::late::declare_deadline;
    pub use crate::write::{emit, emit_values_timed, Payload};
    pub use core::sync::atomic::AtomicBool;
    pub use core::sync::atomic::AtomicU8;
    pub use hushtrace_core::{Callsite, CallsiteState, Kind, CALLSITES};
    pub use linkme;
}

#[doc(hidden)]
#[macro_export]
macro_rules! __callsite {
    ($cs:ident, $kind:ident, $cat:expr, $name:expr, [$($field:expr),*]) => {
        #[$crate::__private::linkme::distributed_slice($crate::__private::CALLSITES)]
        #[linkme(crate = $crate::__private::linkme)]
        static $cs: $crate::__private::Callsite = {
            const N: usize = {
                let names: &[&str] = &[$($field),*];
                names.len()
            };
            static STATE: $crate::__private::CallsiteState =
                $crate::__private::CallsiteState::new();
            static TYPES: [$crate::__private::AtomicU8; N] =
                [const { $crate::__private::AtomicU8::new(0) }; N];
            $crate::__private::Callsite {
                category: $cat,
                name: $name,
                kind: $crate::__private::Kind::$kind,
                field_names: &[$($field),*],
                field_types: &TYPES,
                state: &STATE,
                file: file!(),
                line: line!(),
            }
        };
    };
}

/// Records an instant event: `event!("category", "name", field = expr, ...)`.
///
/// Field expressions are evaluated only when the callsite is enabled.
///
/// ```
/// let user = String::from("ada");
/// hushtrace::event!("app", "login", user = user.as_str(), attempt = 2u8, ok = true);
/// ```
#[cfg(feature = "enable")]
#[macro_export]
macro_rules! event {
    ($cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        $crate::__callsite!(__HT_CS, Instant, $cat, $name, [$(stringify!($k)),*]);
        let interest = __HT_CS.state.interest();
        if interest.is_enabled() {
            $crate::__private::emit(&__HT_CS, interest, ($($v,)*));
        }
    }};
}

/// Begins a span and returns a guard that ends it when dropped:
/// `let _g = span!("category", "name", field = expr, ...)`.
///
/// ```
/// fn step(i: u64) {
///     let _g = hushtrace::span!("rt", "cycle", i = i);
///     // ... work ...
/// }
/// step(1);
/// ```
///
/// **Deadline.** `span!(deadline = DURATION, "category", "name", ...)` gives the span a
/// deadline (a [`std::time::Duration`], evaluated once, on the callsite's first enabled hit):
/// when the span ends later than that after its begin, its thread records a `hushtrace:late`
/// event and notes the span for the consumer, which writes a capture of the moments before
/// into `<dir>/late/<n>/` (see [`SessionBuilder::on_late`]). The check at the end is one
/// compare; a late span costs a few stores, never a system call, lock or allocation. Deadlines
/// from the session's rules (`HUSHTRACE_ON_LATE`, [`SessionBuilder::on_late`]) apply to spans
/// without a code change and win over the code's.
///
/// ```
/// use std::time::Duration;
/// fn cycle(i: u64) {
///     let _g = hushtrace::span!(deadline = Duration::from_micros(600), "rt", "cycle", i = i);
///     // ... at most 600 µs of work ...
/// }
/// cycle(1);
/// ```
#[cfg(feature = "enable")]
#[macro_export]
macro_rules! span {
    (deadline = $d:expr, $cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        $crate::__callsite!(__HT_BEGIN, SpanBegin, $cat, $name, [$(stringify!($k)),*]);
        $crate::__callsite!(__HT_END, SpanEnd, $cat, $name, []);
        static __HT_DECLARED: $crate::__private::AtomicBool =
            $crate::__private::AtomicBool::new(false);
        let interest = __HT_BEGIN.state.interest();
        if interest.is_enabled() {
            if !__HT_DECLARED.load(::core::sync::atomic::Ordering::Relaxed) {
                let d: ::std::time::Duration = $d;
                $crate::__private::declare_deadline(&__HT_END, &__HT_DECLARED, d);
            }
            $crate::__private::begin_span(&__HT_BEGIN, &__HT_END, interest, ($($v,)*))
        } else {
            $crate::SpanGuard::__new(None)
        }
    }};
    ($cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        $crate::__callsite!(__HT_BEGIN, SpanBegin, $cat, $name, [$(stringify!($k)),*]);
        $crate::__callsite!(__HT_END, SpanEnd, $cat, $name, []);
        let interest = __HT_BEGIN.state.interest();
        if interest.is_enabled() {
            $crate::__private::begin_span(&__HT_BEGIN, &__HT_END, interest, ($($v,)*))
        } else {
            $crate::SpanGuard::__new(None)
        }
    }};
}

/// Records a counter sample: `counter!("category", "name", value)` (an integer or float).
///
/// ```
/// hushtrace::counter!("audio", "xruns", 3u64);
/// hushtrace::counter!("audio", "load", 0.42f64);
/// ```
#[cfg(feature = "enable")]
#[macro_export]
macro_rules! counter {
    ($cat:expr, $name:expr, $v:expr $(,)?) => {{
        $crate::__callsite!(__HT_CS, Counter, $cat, $name, ["value"]);
        let interest = __HT_CS.state.interest();
        if interest.is_enabled() {
            $crate::__private::emit(&__HT_CS, interest, ($v,));
        }
    }};
}

// With the `enable` feature off, tracepoints compile to nothing: the field expressions are
// type-checked inside a never-taken branch (so a build switches features without new warnings)
// and no callsite is registered.

/// Disabled build (`default-features = false`): compiles to nothing.
#[cfg(not(feature = "enable"))]
#[macro_export]
macro_rules! event {
    ($cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        if false {
            let _ = ($cat, $name, $($v,)*);
        }
    }};
}

/// Disabled build (`default-features = false`): compiles to an inert guard.
#[cfg(not(feature = "enable"))]
#[macro_export]
macro_rules! span {
    (deadline = $d:expr, $cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        if false {
            let _: ::std::time::Duration = $d;
            let _ = ($cat, $name, $($v,)*);
        }
        $crate::SpanGuard::__new(None)
    }};
    ($cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        if false {
            let _ = ($cat, $name, $($v,)*);
        }
        $crate::SpanGuard::__new(None)
    }};
}

/// Disabled build (`default-features = false`): compiles to nothing.
#[cfg(not(feature = "enable"))]
#[macro_export]
macro_rules! counter {
    ($cat:expr, $name:expr, $v:expr $(,)?) => {{
        if false {
            let _ = ($cat, $name, $v);
        }
    }};
}
