//! The unit tests of the `--include`/`--exclude` glob matcher (`src/funcs/glob.rs`, plain Rust)
//! run here: the extension's own library tests are not built (`[lib] test = false`: a test
//! binary of the extension module would need the Python library to link).

#[path = "../src/funcs/glob.rs"]
mod glob;
