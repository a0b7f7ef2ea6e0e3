//! Spans that may end on another thread: [`async_span!`](crate::async_span) and
//! [`InSpanExt::in_span`].
//!
//! A [`SpanGuard`](crate::SpanGuard) is not `Send`: its begin and end nest on one thread's
//! track. A future on a multi-thread executor (tokio's) is polled on one worker, awaits, and
//! resumes on another, so a span held across an `.await` cannot be a thread span. An
//! [`AsyncSpan`] is one: its begin (`Kind::AsyncBegin`, fields `id`, `parent`, then the given
//! fields) is recorded on the thread that creates it, its end (`Kind::AsyncEnd`, field `id`) on
//! the thread that drops it. Readers match the two by process, name and `id` (unique in the
//! process), never by thread nesting, so per-thread begin/end nesting stays valid and the span
//! is one async slice (`hushtrace convert --to chrome` writes Chrome `b`/`e` events nested under
//! their root; the report counts it once with its real duration).
//!
//! **Parents.** `parent` is the `id` of the span this one belongs to, 0 for a root. By default
//! it is the *current* async span: the one whose future [`InSpanExt::in_span`] is polling on
//! this thread right now (so a span created inside an instrumented future is its child, on
//! whichever worker the future runs). `async_span!(parent: &span, ...)` names it explicitly
//! (an [`AsyncSpan`], an `id`, or `None` for a root). The converters and `hushtrace flamegraph`
//! nest children under their parents.
//!
//! The cost is that of a `span!` plus a thread-local id counter (a shared counter is touched
//! once per 4096 spans per thread) and a thread-local read of the current span; nothing
//! allocates.
//!
//! ```
//! fn needs_send<T: Send>(_: T) {}
//! let span = hushtrace::async_span!("app", "request", user = 7u32);
//! needs_send(std::thread::spawn(move || drop(span))); // ends on another thread
//! ```

use crate::late;
use crate::write;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use hushtrace_core::{Callsite, Interest};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids handed to threads in blocks of this many, so a span touches no shared cache line.
const ID_BLOCK: u64 = 4096;
/// The next block of ids. Native async span ids have the top bit set, so they never equal the
/// ids of the `tracing` bridge (tracing's span ids, small integers) in the same process.
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1 << 63);

std::thread_local! {
    /// (next id, end of this thread's block). Const-initialized, no destructor.
    static IDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// The id of the async span whose future [`InSpan`] is polling on this thread (0: none).
    /// Const-initialized, no destructor.
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// What `async_span!(parent: p, ...)` takes as a parent: an [`AsyncSpan`] (its id; 0 when it
/// is not recording, which makes a root), an `Option<&AsyncSpan>` (`None` for an explicit root)
/// or a span id (`u64`, as [`AsyncSpan::id`] returns it).
pub trait AsParent {
    /// The parent's id, 0 for none.
    fn parent_id(&self) -> u64;
}

impl AsParent for AsyncSpan {
    #[inline]
    fn parent_id(&self) -> u64 {
        self.id
    }
}

impl<T: AsParent + ?Sized> AsParent for &T {
    #[inline]
    fn parent_id(&self) -> u64 {
        (**self).parent_id()
    }
}

impl AsParent for Option<&AsyncSpan> {
    #[inline]
    fn parent_id(&self) -> u64 {
        self.map_or(0, |s| s.id)
    }
}

impl AsParent for u64 {
    #[inline]
    fn parent_id(&self) -> u64 {
        *self
    }
}

/// An async span: begun when created, ended when dropped, on any thread (see the module docs).
/// `Send` and `Sync`; hold it across `.await`s, or let [`InSpanExt::in_span`] hold it.
///
/// ```
/// let span = hushtrace::async_span!("net", "fetch", bytes = 512u64);
/// assert_eq!(span.is_recording(), span.id() != 0);
/// let child = hushtrace::async_span!(parent: &span, "net", "parse");
/// assert_eq!(child.parent(), span.id());
/// drop(span); // records the end
/// ```
#[must_use = "an async span ends when dropped; bind it with `let _span = async_span!(...)`"]
#[derive(Debug)]
pub struct AsyncSpan {
    /// The end callsite, when the begin was recorded (enabled).
    end: Option<&'static Callsite>,
    /// The span's id: non-zero when recording.
    id: u64,
    /// The parent's id (0: a root); 0 when not recording.
    parent: u64,
    /// The begin's timestamp, when the span has a deadline.
    start: u64,
    /// The span's deadline in clock ticks (0: none; see `span!`'s `deadline =`).
    deadline: u64,
}

impl AsyncSpan {
    #[doc(hidden)]
    #[inline]
    pub fn __new(end: Option<&'static Callsite>, id: u64, parent: u64) -> AsyncSpan {
        AsyncSpan {
            end,
            id,
            parent,
            start: 0,
            deadline: 0,
        }
    }

    /// Records the begin of an enabled async span (`async_span!`): with a deadline (code or
    /// rules), its timestamp is kept for the end's check.
    #[doc(hidden)]
    #[inline(always)]
    pub fn __begin<P: write::Payload>(
        begin: &'static Callsite,
        end: &'static Callsite,
        interest: Interest,
        id: u64,
        parent: u64,
        payload: P,
    ) -> AsyncSpan {
        let deadline = late::deadline_ticks(end);
        let start = if deadline == 0 {
            write::emit(begin, interest, payload);
            0
        } else {
            write::emit_timed(begin, interest, payload)
        };
        AsyncSpan {
            end: Some(end),
            id,
            parent,
            start,
            deadline,
        }
    }

    /// The id of the current async span on this thread (the one whose future
    /// [`InSpanExt::in_span`] is polling), 0 when there is none: the default parent of a new
    /// span. A thread-local read.
    #[inline]
    pub fn current_id() -> u64 {
        CURRENT.try_with(Cell::get).unwrap_or(0)
    }

    #[doc(hidden)]
    #[inline]
    pub fn __parent_of<P: AsParent>(p: P) -> u64 {
        p.parent_id()
    }

    /// A process-unique id for a new span (top bit set). No lock, no system call; a shared
    /// counter is touched once per [`ID_BLOCK`] ids per thread.
    #[doc(hidden)]
    #[inline]
    pub fn __next_id() -> u64 {
        IDS.try_with(|c| {
            let (mut next, mut end) = c.get();
            if next == end {
                next = NEXT_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed);
                end = next + ID_BLOCK;
            }
            c.set((next + 1, end));
            next
        })
        // A thread whose TLS is being torn down: take one id from the shared counter.
        .unwrap_or_else(|_| NEXT_BLOCK.fetch_add(1, Ordering::Relaxed))
    }

    /// The span's id (the `id` field of its begin and end), or 0 when its callsite was
    /// disabled at creation (nothing is recorded).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the begin was recorded (the callsite was enabled when the span was created).
    pub fn is_recording(&self) -> bool {
        self.end.is_some()
    }

    /// The id of the parent recorded with the begin (0: a root, or not recording).
    pub fn parent(&self) -> u64 {
        self.parent
    }
}

impl Drop for AsyncSpan {
    #[inline]
    fn drop(&mut self) {
        if let Some(cs) = self.end {
            // As for `SpanGuard`: the begin was recorded, so record the end even if the
            // callsite was disabled since, keeping begin/end balanced.
            let i = cs.state.interest();
            let i = if i.is_enabled() {
                i
            } else {
                Interest::NEEDS_TYPES
            };
            if self.deadline == 0 {
                write::emit(cs, i, (self.id,));
            } else {
                // Ended on any thread: the late span is noted in the ending thread's ring (the
                // cycle counter is invariant across CPUs).
                write::end_timed(cs, i, (self.id,), self.start, self.deadline);
            }
        }
    }
}

/// Runs a future inside an [`AsyncSpan`]: the span ends when the future completes (or is
/// dropped unfinished), on whichever thread that happens. While the future is polled, the span
/// is the thread's current async span: the default parent of the spans created in it.
/// Implemented for every future.
///
/// ```
/// use hushtrace::InSpanExt;
/// use std::future::Future;
/// use std::task::{Context, Poll, Waker};
///
/// let fut = async { 40 + 2 }.in_span(hushtrace::async_span!("app", "answer"));
/// let mut fut = std::pin::pin!(fut);
/// let mut cx = Context::from_waker(Waker::noop());
/// assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(42));
/// ```
pub trait InSpanExt: Future + Sized {
    /// Wraps `self` so that `span` ends when it completes.
    fn in_span(self, span: AsyncSpan) -> InSpan<Self> {
        InSpan {
            fut: self,
            span: Some(span),
        }
    }
}

impl<F: Future> InSpanExt for F {}

/// A future running inside an [`AsyncSpan`] (see [`InSpanExt::in_span`]). `Send` when the
/// future is.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct InSpan<F> {
    /// Structurally pinned: never moved out of an `InSpan` that was pinned (`InSpan` has no
    /// `Drop` impl and no method that moves it); `InSpan<F>` is `Unpin` only when `F` is.
    fut: F,
    /// Not pinned; taken (ended) when `fut` completes.
    span: Option<AsyncSpan>,
}

impl<F> InSpan<F> {
    /// The span (`None` once the future completed).
    pub fn span(&self) -> Option<&AsyncSpan> {
        self.span.as_ref()
    }
}

impl<F: Future> Future for InSpan<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `fut` is pinned structurally (see the field): we never move it, and we only
        // move `span`, which is not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above; `this.fut` stays where it is for as long as `self` is pinned.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        let id = this.span.as_ref().map_or(0, |s| s.id);
        let out = if id == 0 {
            fut.poll(cx)
        } else {
            let _current = Current::enter(id);
            fut.poll(cx)
        };
        if out.is_ready() {
            this.span = None;
        }
        out
    }
}

/// Makes `id` the thread's current async span until dropped (then restores the previous one,
/// also when the poll panics).
struct Current {
    prev: u64,
}

impl Current {
    #[inline]
    fn enter(id: u64) -> Current {
        Current {
            prev: CURRENT.try_with(|c| c.replace(id)).unwrap_or(0),
        }
    }
}

impl Drop for Current {
    #[inline]
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.prev));
    }
}

/// Begins an [`AsyncSpan`], a span that may end on another thread:
/// `let span = async_span!("category", "name", field = expr, ...)` (at most 10 fields), or
/// `async_span!(parent: p, "category", "name", ...)` with an explicit parent `p` (see
/// [`AsParent`]: `&span`, an id, or `None` for a root).
///
/// Its begin records `id`, `parent` (the explicit one, else the current async span, else 0)
/// and the fields; dropping it records the end with `id`. Field and parent expressions are
/// evaluated only when the callsite is enabled.
///
/// **Deadline.** `async_span!(deadline = DURATION, ...)` (before `parent:` if both are given)
/// gives the span a deadline, as `span!`'s does; the session's rules (`HUSHTRACE_ON_LATE`)
/// apply to async spans too. A late async span is noted on the thread that ends it.
///
/// ```
/// use std::time::Duration;
/// let span = hushtrace::async_span!(deadline = Duration::from_millis(2), "srv", "request");
/// std::thread::spawn(move || drop(span)).join().unwrap(); // checked where it ends
/// ```
///
/// ```
/// use hushtrace::InSpanExt;
/// async fn handle(req: u64) -> u64 {
///     req * 2 // ... awaits ...
/// }
/// let fut = handle(21).in_span(hushtrace::async_span!("srv", "handle", req = 21u64));
/// fn needs_send<T: Send>(_: &T) {}
/// needs_send(&fut); // spawnable on a multi-thread executor
/// ```
#[cfg(feature = "enable")]
#[macro_export]
macro_rules! async_span {
    (deadline = $d:expr, parent: $parent:expr, $cat:expr, $name:expr
     $(, $k:ident = $v:expr)* $(,)?) => {
        $crate::__async_span!(
            ($crate::AsyncSpan::__parent_of($parent)), ($d), $cat, $name $(, $k = $v)*
        )
    };
    (deadline = $d:expr, $cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {
        $crate::__async_span!(
            ($crate::AsyncSpan::current_id()), ($d), $cat, $name $(, $k = $v)*
        )
    };
    (parent: $parent:expr, $cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {
        $crate::__async_span!(
            ($crate::AsyncSpan::__parent_of($parent)), (), $cat, $name $(, $k = $v)*
        )
    };
    ($cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {
        $crate::__async_span!(($crate::AsyncSpan::current_id()), (), $cat, $name $(, $k = $v)*)
    };
}

#[cfg(feature = "enable")]
#[doc(hidden)]
#[macro_export]
macro_rules! __async_span {
    (($parent:expr), ($($d:expr)?), $cat:expr, $name:expr $(, $k:ident = $v:expr)*) => {{
        $crate::__callsite!(
            __HT_BEGIN, AsyncBegin, $cat, $name, ["id", "parent" $(, stringify!($k))*]
        );
        $crate::__callsite!(__HT_END, AsyncEnd, $cat, $name, ["id"]);
        let interest = __HT_BEGIN.state.interest();
        if interest.is_enabled() {
            $(
                static __HT_DECLARED: $crate::__private::AtomicBool =
                    $crate::__private::AtomicBool::new(false);
                if !__HT_DECLARED.load(::core::sync::atomic::Ordering::Relaxed) {
                    let d: ::std::time::Duration = $d;
                    $crate::__private::declare_deadline(&__HT_END, &__HT_DECLARED, d);
                }
            )?
            let id = $crate::AsyncSpan::__next_id();
            let parent: u64 = $parent;
            $crate::AsyncSpan::__begin(
                &__HT_BEGIN, &__HT_END, interest, id, parent, (id, parent, $($v,)*)
            )
        } else {
            $crate::AsyncSpan::__new(None, 0, 0)
        }
    }};
}

/// Disabled build (`default-features = false`): an inert span.
#[cfg(not(feature = "enable"))]
#[macro_export]
macro_rules! async_span {
    (deadline = $d:expr, parent: $parent:expr, $cat:expr, $name:expr
     $(, $k:ident = $v:expr)* $(,)?) => {{
        if false {
            let _: ::std::time::Duration = $d;
            let _ = ($crate::AsyncSpan::__parent_of($parent), $cat, $name, $($v,)*);
        }
        $crate::AsyncSpan::__new(None, 0, 0)
    }};
    (deadline = $d:expr, $cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        if false {
            let _: ::std::time::Duration = $d;
            let _ = ($cat, $name, $($v,)*);
        }
        $crate::AsyncSpan::__new(None, 0, 0)
    }};
    (parent: $parent:expr, $cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        if false {
            let _ = ($crate::AsyncSpan::__parent_of($parent), $cat, $name, $($v,)*);
        }
        $crate::AsyncSpan::__new(None, 0, 0)
    }};
    ($cat:expr, $name:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        if false {
            let _ = ($cat, $name, $($v,)*);
        }
        $crate::AsyncSpan::__new(None, 0, 0)
    }};
}
