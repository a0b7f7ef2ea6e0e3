//! The spans this layer saw entered on this thread and not exited, innermost last: the parent
//! of a contextual span is the top (what the registry's `current_span()` would answer, for the
//! spans this layer is given, without its lookup). No lock, allocation or system call: a
//! const-initialized thread-local without destructor.

use std::cell::Cell;

/// Entered spans kept; deeper nesting is counted and answered by the registry.
const DEPTH: usize = 32;

struct Stack {
    ids: [Cell<u64>; DEPTH],
    /// Spans entered and not exited (may exceed `DEPTH`).
    len: Cell<usize>,
}

std::thread_local! {
    static STACK: Stack = const {
        Stack {
            ids: [const { Cell::new(0) }; DEPTH],
            len: Cell::new(0),
        }
    };
}

#[inline]
pub(crate) fn enter(id: u64) {
    let _ = STACK.try_with(|s| {
        let n = s.len.get();
        if let Some(slot) = s.ids.get(n) {
            slot.set(id);
        }
        s.len.set(n + 1);
    });
}

#[inline]
pub(crate) fn exit(id: u64) {
    let _ = STACK.try_with(|s| {
        let n = s.len.get();
        if n == 0 {
            return;
        }
        if n <= DEPTH && s.ids[n - 1].get() != id {
            // Exited out of order (tracing allows it): remove its innermost entry.
            let Some(i) = (0..n - 1).rev().find(|&i| s.ids[i].get() == id) else {
                return; // not entered on this thread
            };
            for j in i..n - 1 {
                s.ids[j].set(s.ids[j + 1].get());
            }
        }
        s.len.set(n - 1);
    });
}

/// The innermost entered span (0: none), or `None` when nested deeper than kept.
#[inline]
pub(crate) fn get() -> Option<u64> {
    STACK
        .try_with(|s| match s.len.get() {
            0 => Some(0),
            n => s.ids.get(n - 1).map(Cell::get),
        })
        .unwrap_or(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_entered_spans_also_out_of_order_and_deep() {
        assert_eq!(get(), Some(0));
        enter(1);
        enter(2);
        enter(3);
        assert_eq!(get(), Some(3));
        exit(2); // out of order
        assert_eq!(get(), Some(3));
        exit(3);
        assert_eq!(get(), Some(1));
        exit(9); // never entered: ignored
        assert_eq!(get(), Some(1));
        for i in 0..DEPTH as u64 {
            enter(100 + i);
        }
        assert_eq!(get(), None, "deeper than kept");
        exit(100 + DEPTH as u64 - 1);
        assert_eq!(get(), Some(100 + DEPTH as u64 - 2));
        for i in (0..DEPTH as u64 - 1).rev() {
            exit(100 + i);
        }
        exit(1);
        assert_eq!(get(), Some(0));
    }
}
