//! The C and C++ interface of hushtrace, declared by `crates/hushtrace-c/include/hushtrace.h`.
//! This crate is its code, compiled once: `crates/hushtrace-c` links it into `libhushtrace.so`
//! and `libhushtrace.a`, and the Python extension links it into `_hushtrace.so`; a cdylib or
//! staticlib exports the `#[no_mangle]` functions of every crate it links, so both export the
//! same `ht_*` symbols.
//!
//! * Functions (`ht_session_start`, `ht_enable`, ...) wrap the Rust API (`session.rs`,
//!   `control.rs`). Each catches panics, turns NULL and malformed arguments into an error code,
//!   and leaves the message in a thread-local slot that `ht_last_error` returns (`error.rs`).
//! * Tracepoints (`HT_EVENT`, ...) are static C descriptors ([`Descriptor`]) that embed the
//!   runtime's `CallsiteState`, so the C hot path tests its own interest word. They are
//!   registered when their module loads (`ht__register_module` from the header's constructor,
//!   `ht__register_callsite` from C++ static initialization, `register.rs`) with
//!   [`hushtrace::Registered::with_state`]: the one run-time callsite mechanism, shared with
//!   the `tracing` bridge.
//! * The enabled path of a tracepoint with up to two fields (most of them) is one indirect
//!   call from the C macro to the descriptor's `record`: a recorder chosen at registration
//!   for the descriptor's field types, which reads its values from registers (`value.rs`) and
//!   writes them with the runtime's typed write path, the code `event!` inlines (no value
//!   array, no dispatch on types, no second lookup). Wider tracepoints pass an array to
//!   `ht__record`, which records through [`hushtrace::Registered::record`] (`record.rs`).
//! * A module whose descriptors are registered is pinned (`RTLD_NODELETE`): the registry keeps
//!   its descriptors for the life of the process, so `dlclose` must not unmap them.
//!
//! * A span's begin keeps its timestamp on a per-thread stack (`starts.rs`) so that its end
//!   checks the span's deadline (issue 31), as the Rust span guard does.
//!
//! Modules, each importing only those before it: `error`, `value`, `descriptor`, `starts`,
//! `record`, `register`; `session` and `control` import only `error`.
#![deny(unsafe_op_in_unsafe_fn)]

mod control;
mod descriptor;
mod error;
mod record;
mod register;
mod session;
mod starts;
mod value;

pub use control::{
    ht_clear_thread_no_syscall, ht_disable, ht_enable, ht_init_thread, ht_set_thread_name,
    ht_set_thread_no_syscall, ht_verify_exit_thread, ht_verify_trap_syscalls_on_this_thread,
    ht_verify_trapped_syscalls,
};
pub use descriptor::Descriptor;
pub use error::ht_last_error;
pub use record::{ht__record, ht__scope_end, ht__span_deadline};
pub use register::{ht__register_callsite, ht__register_module};
pub use session::{
    ht_session_append, ht_session_start, ht_session_stop, ht_start_from_env, HtSession, HtStats,
};
pub use value::HtValue;
