//! `libhushtrace.so` and `libhushtrace.a` define exactly the functions `hushtrace.h` declares,
//! each once. Their code is the `hushtrace-capi` rlib this package links (issue 30): a link
//! that dropped its `#[no_mangle]` functions, a second copy of them, or a function missing
//! from the header or the library fails here.

#[path = "../../hushtrace/tests/common/mod.rs"]
mod common;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Every function `include/hushtrace.h` declares (`ht_*` and the macros' `ht__*`), by name.
fn declared() -> BTreeMap<String, usize> {
    let header = std::fs::read_to_string(support::include_dir().join("hushtrace.h")).unwrap();
    let mut names = BTreeMap::new();
    for line in header.lines() {
        // A declaration: at the start of a line, not a definition, comment or macro.
        let decl = line.trim_end().ends_with(';')
            && !line.starts_with(|c: char| c.is_whitespace() || c == '#' || c == '/')
            && !line.starts_with("static");
        let Some(head) = line.split('(').next().filter(|_| decl) else {
            continue;
        };
        let name = head.rsplit([' ', '*']).next().unwrap_or("");
        if name.starts_with("ht_") && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            *names.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    names
}

/// The global `ht*` functions `nm` finds defined in `lib` (with `args` before the path), with
/// how many times each is defined.
fn defined(lib: &Path, args: &[&str]) -> BTreeMap<String, usize> {
    let o = Command::new("nm")
        .args(args)
        .arg("--defined-only")
        .arg(lib)
        .output()
        .unwrap_or_else(|e| panic!("run nm (binutils) on {}: {e}", lib.display()));
    assert!(
        o.status.success(),
        "nm {}: {}",
        lib.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut names = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [_, "T", name] = f[..] {
            if name.starts_with("ht") {
                *names.entry(name.to_string()).or_insert(0) += 1;
            }
        }
    }
    names
}

#[test]
fn the_libraries_define_every_declared_function_once_and_no_other() {
    let declared = declared();
    // The parse found the declarations (not an empty set compared to another).
    for f in ["ht_session_start", "ht_enable", "ht_disable", "ht__record"] {
        assert_eq!(declared.get(f), Some(&1), "{f} in {declared:?}");
    }
    assert!(declared.len() >= 18, "{declared:?}");
    let dir = support::lib_dir();
    let shared = defined(&dir.join("libhushtrace.so"), &["-D"]);
    assert_eq!(shared, declared, "libhushtrace.so's dynamic symbols");
    let archive = defined(&dir.join("libhushtrace.a"), &[]);
    assert_eq!(archive, declared, "libhushtrace.a's symbols");
}
