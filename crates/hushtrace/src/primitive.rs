//! Atomics of the cross-thread hand-over, swapped for `loom`'s under `--cfg hushtrace_loom` so the
//! protocol can be model-checked (`ci/loom.sh`, `tests/loom.rs`).

#[cfg(hushtrace_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(hushtrace_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
