//! Core types of hushtrace that change very rarely.
//!
//! * [`Callsite`]: the static descriptor of one tracepoint (category, name, kind, field names and
//!   field types), collected at link time into [`CALLSITES`] so the trace metadata can list every
//!   event before any is recorded.
//! * [`Field`] / [`FieldType`]: how a field value is encoded into a record.
//! * [`Value`] (and [`OwnedValue`], both a [`FieldValue`]): one field value given at run time,
//!   the one type the dynamic write path, the reader and synthetic traces share.
//! * [`glob_match`] and [`set_enabled`]: run-time enabling of callsites by `"category:name"` glob.
//!
//! This crate has no runtime: it never allocates on the hot path, never locks and never makes a
//! system call. The `hushtrace` facade crate builds the tracer on top of it.
//!
//! ```
//! use hushtrace_core::{glob_match, FieldType, Field};
//! assert!(glob_match("bench:*", "bench:tick"));
//! assert_eq!(<u64 as Field>::TYPE, FieldType::U64);
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

mod callsite;
mod deadline;
mod field;
mod glob;
pub mod mirror;
mod mode;
mod record;
mod registry;
mod value;

pub use callsite::{
    assign_ids, callsites, reset_interrupted_publications, types_generation, Callsite,
    CallsiteState, Interest, Kind, CALLSITES, INTEREST_DISABLED, INTEREST_ENABLED,
    INTEREST_NEEDS_TYPES,
};
pub use deadline::{
    parse_duration_ns, DeadlineError, DeadlineErrorKind, DeadlineRule, DeadlineRules,
    MAX_DEADLINE_RULES,
};
pub use field::{Field, FieldType, MAX_FIELDS, STR_CAP};
pub use glob::glob_match;
pub use mode::{Mode, ParseModeError};
pub use registry::{
    all_callsites, lock_for_fork, register_callsite, register_callsite_with_state, registered,
    set_enabled, unlock_after_fork, RegisterError, MAX_REGISTERED,
};
pub use value::{FieldValue, OwnedValue, Value};

#[doc(hidden)]
pub mod __private {
    pub use linkme;
}
