//! The layering check of hushtrace's crates, on resolved paths (`ci/layers.py` runs it).
//!
//! Every crate under `crates/*/src` is read from its root file (`lib.rs`, `main.rs`) by
//! following its `mod` declarations and parsed with `syn`. A module's imports are what the
//! paths written in it resolve to — `use` trees with their groups, aliases and globs,
//! re-exports at the crate root or anywhere else, `crate::`/`self::`/`super::` paths in code
//! and in macro calls — so `use crate::Session` in the consumer counts as an import of
//! `session`. Then, per crate: no import cycle among its top-level modules, and its layers
//! (longest import chain down). For the runtime (`crates/hushtrace`), also: the layer table
//! of ARCHITECTURE.md equals the code's, a ring key's `new` is reached only from the modules
//! ARCHITECTURE.md's "Who mints the ring's keys" table names, and the ring's modules take no
//! atomic from `std`/`core` directly.

pub mod check;
pub mod model;
pub mod resolve;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The runtime crate, whose layers ARCHITECTURE.md documents.
pub const RUNTIME: &str = "crates/hushtrace/src";

/// Checks the repository at `repo` (crates, ARCHITECTURE.md); or, with `roots`, only those
/// source directories' cycles and layers. Returns the report and whether it passed.
pub fn run(repo: &Path, roots: &[PathBuf]) -> (String, bool) {
    let mut out = String::new();
    let mut ok = true;
    let whole = roots.is_empty();
    let mut dirs: Vec<PathBuf> = roots.to_vec();
    if whole {
        dirs.push(repo.join(RUNTIME));
        let mut others: Vec<PathBuf> = std::fs::read_dir(repo.join("crates"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path().join("src"))
                    .collect()
            })
            .unwrap_or_default();
        others.retain(|p| p.is_dir() && *p != repo.join(RUNTIME));
        others.sort();
        dirs.extend(others);
    }
    let doc = if whole {
        match std::fs::read_to_string(repo.join("ARCHITECTURE.md")) {
            Ok(text) => match check::Doc::parse(&text) {
                Ok(d) => Some(d),
                Err(e) => {
                    let _ = writeln!(out, "{e}");
                    ok = false;
                    None
                }
            },
            Err(e) => {
                let _ = writeln!(out, "ARCHITECTURE.md: cannot read: {e}");
                return (out, false);
            }
        }
    } else {
        None
    };
    for dir in dirs {
        let name = dir.parent().and_then(|p| p.file_name()).map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        // Crate roots: the library, the binary, and each `src/bin/*.rs` program.
        let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| dir.join(f))
            .filter(|p| p.is_file())
            .collect();
        let mut bins: Vec<PathBuf> = std::fs::read_dir(dir.join("bin"))
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        bins.retain(|p| p.extension().is_some_and(|e| e == "rs") && p.is_file());
        bins.sort();
        roots.extend(bins);
        if roots.is_empty() {
            let _ = writeln!(out, "{}: no lib.rs, main.rs or bin/*.rs", dir.display());
            ok = false;
        }
        for root in roots {
            let label = if root.ends_with("lib.rs") {
                name.clone()
            } else {
                let rel = root.strip_prefix(&dir).unwrap_or(&root);
                format!("{name} ({})", rel.display())
            };
            let krate = match model::Crate::load(&root) {
                Ok(k) => k,
                Err(e) => {
                    let _ = writeln!(out, "{label}: {e}");
                    ok = false;
                    continue;
                }
            };
            let deps = check::module_deps(&krate);
            let cycles = check::cycles_of(&deps);
            if !cycles.is_empty() {
                ok = false;
                let _ = writeln!(
                    out,
                    "{label}: import cycles (a module imports one that imports it back):"
                );
                for c in cycles {
                    let _ = writeln!(out, "  {}", c.join(" -> "));
                }
                continue;
            }
            let level = check::layers_of(&deps);
            let _ = writeln!(
                out,
                "{label}: no import cycles among {} modules",
                deps.len()
            );
            let top = level.values().copied().max();
            for lv in 0..=top.unwrap_or(0) {
                if top.is_none() {
                    break;
                }
                let names: Vec<&str> = level
                    .iter()
                    .filter(|(_, &l)| l == lv)
                    .map(|(m, _)| m.as_str())
                    .collect();
                let _ = writeln!(out, "  layer {lv}: {}", names.join(", "));
            }
            let is_runtime = dir == repo.join(RUNTIME) && root.ends_with("lib.rs");
            if let (true, Some(doc)) = (is_runtime, &doc) {
                let problems = check::check_doc(&deps, &level, doc);
                if !problems.is_empty() {
                    ok = false;
                    let _ = writeln!(out, "ARCHITECTURE.md's layer table differs from the code:");
                    for p in problems {
                        let _ = writeln!(out, "  {p}");
                    }
                }
                let problems = check::check_contracts(&krate, doc, "ring");
                if !problems.is_empty() {
                    ok = false;
                    let _ = writeln!(out, "contracts of the ring broken:");
                    for p in problems {
                        let _ = writeln!(out, "  {p}");
                    }
                }
            }
        }
    }
    (out, ok)
}
