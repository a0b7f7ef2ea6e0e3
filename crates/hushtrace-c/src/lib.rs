//! `libhushtrace.so` and `libhushtrace.a`, the C and C++ interface of hushtrace declared by
//! `include/hushtrace.h`. The code is the `hushtrace-capi` crate, linked in here: a cdylib and
//! a staticlib export the `#[no_mangle]` functions of every crate they link, so these libraries
//! export exactly its `ht_*` symbols. The Python extension links the same crate, so a C library
//! loaded into a traced Python process binds to the extension's runtime instead.

pub use hushtrace_capi::*;
