//! The `--include`/`--exclude` glob matcher (`src/funcs/glob.rs`, hushtrace-core's) on module
//! and qualified names. Here because the extension's own library tests are not built
//! (`[lib] test = false`: a test binary of the extension module would need the Python library
//! to link).

#[path = "../src/funcs/glob.rs"]
mod glob;
use glob::glob;

#[test]
fn globs_on_module_and_qualified_names() {
    assert!(glob("json*", "json.decoder"));
    assert!(glob("*.fib", "__main__.fib"));
    assert!(!glob("json", "json.decoder"));
    assert!(glob("a?c", "abc"));
    assert!(!glob("a?c", "ac"));
    assert!(glob("*", ""));
    assert!(glob("a*b*c", "a.x.b.y.c"));
    assert!(!glob("a*b*c", "a.x.b.y"));
    assert!(glob("pkg.mod.Class.*", "pkg.mod.Class.method"));
    assert!(!glob("pkg.mod.Class.*", "pkg.mod.Other.method"));
}
