//! The checker catches what it claims to: each edit below, made to a copy of the real runtime
//! crate and ARCHITECTURE.md, makes it fail, and the unedited copy passes. (The edits are the
//! ones a regular-expression checker let through.)

use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A copy of the runtime's sources and ARCHITECTURE.md with `edit` applied; the checker's
/// verdict and report.
fn check_with(edit: impl FnOnce(&Path)) -> (bool, String) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    copy_dir(
        &repo().join("crates/hushtrace/src"),
        &root.join("crates/hushtrace/src"),
    );
    fs::copy(repo().join("ARCHITECTURE.md"), root.join("ARCHITECTURE.md")).unwrap();
    edit(root);
    let (report, ok) = layers_check::run(root, &[]);
    (ok, report)
}

fn append(root: &Path, file: &str, text: &str) {
    let p = root.join("crates/hushtrace/src").join(file);
    let mut s = fs::read_to_string(&p).unwrap();
    s.push_str(text);
    fs::write(p, s).unwrap();
}

#[test]
fn the_real_tree_passes() {
    let (ok, report) = check_with(|_| {});
    assert!(ok, "{report}");
}

#[test]
fn an_upward_import_through_a_root_reexport_is_a_cycle() {
    let (ok, report) = check_with(|r| {
        append(
            r,
            "consumer/run.rs",
            "\n#[allow(unused_imports)]\nuse crate::Session;\n",
        )
    });
    assert!(!ok, "{report}");
    assert!(report.contains("import cycles"), "{report}");
    assert!(
        report.contains("consumer") && report.contains("session"),
        "{report}"
    );
}

#[test]
fn a_cycle_through_a_root_reexport_from_the_bottom_layer() {
    let (ok, report) = check_with(|r| {
        append(
            r,
            "lock.rs",
            "\n#[allow(unused_imports)]\nuse crate::{Session as _S};\n",
        )
    });
    assert!(!ok, "{report}");
    assert!(
        report.contains("import cycles") && report.contains("lock"),
        "{report}"
    );
}

#[test]
fn a_mint_through_an_alias_is_caught() {
    let (ok, report) = check_with(|r| {
        append(
            r,
            "consumer/run.rs",
            "\nuse crate::ring::ProducerKey as PK;\n\
             #[allow(dead_code)]\nfn _mint() { let _ = unsafe { PK::new() }; }\n",
        )
    });
    assert!(!ok, "{report}");
    assert!(
        report.contains("mints `ProducerKey` through `PK::new`"),
        "{report}"
    );
    assert!(report.contains("consumer/run.rs"), "{report}");
}

#[test]
fn a_mint_named_only_in_a_comment_or_string_is_not_one() {
    let (ok, report) = check_with(|r| {
        append(
            r,
            "consumer/run.rs",
            "\n// ProducerKey::new() is not called here\n\
             #[allow(dead_code)]\nconst _NOTE: &str = \"ProducerKey::new()\";\n",
        )
    });
    assert!(ok, "{report}");
}

#[test]
fn the_minters_come_from_architecture_md() {
    let (ok, report) = check_with(|r| {
        let p = r.join("ARCHITECTURE.md");
        let s = fs::read_to_string(&p).unwrap().replace(
            "| `ConsumerKey` | `consumer` |",
            "| `ConsumerKey` | `state` |",
        );
        fs::write(p, s).unwrap();
    });
    assert!(!ok, "{report}");
    assert!(report.contains("mints `ConsumerKey`"), "{report}");
}

#[test]
fn grouped_std_atomics_in_the_ring_are_caught() {
    let (ok, report) = check_with(|r| {
        append(
            r,
            "ring/flush.rs",
            "\n#[allow(unused_imports)]\nuse std::sync::{atomic::AtomicU32};\n",
        )
    });
    assert!(!ok, "{report}");
    assert!(report.contains("std::sync::atomic::AtomicU32"), "{report}");
    assert!(report.contains("ring/flush.rs"), "{report}");
}

#[test]
fn a_layer_table_row_that_lies_is_caught() {
    let (ok, report) = check_with(|r| {
        let p = r.join("ARCHITECTURE.md");
        let s = fs::read_to_string(&p)
            .unwrap()
            .replace("| 0 | `lock` |", "| 1 | `lock` |");
        fs::write(p, s).unwrap();
    });
    assert!(!ok, "{report}");
    assert!(
        report.contains("`lock` is at layer 1 in the table, 0 in the code"),
        "{report}"
    );
}
