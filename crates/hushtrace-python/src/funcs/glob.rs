//! The `*` and `?` glob matcher of `--include`/`--exclude`: hushtrace-core's, the one every
//! hushtrace glob uses (`HUSHTRACE_ENABLE`, `--on-late`); `tests/glob.rs` checks it on module
//! and qualified names.

pub use hushtrace_core::glob_match as glob;
