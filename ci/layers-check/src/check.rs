//! The checks: the import graph among a crate's top-level modules (cycles, layers), the
//! runtime's layer table in ARCHITECTURE.md, and the ring's contracts (who mints its keys, where
//! its atomics come from).

use crate::model::Crate;
use crate::resolve::Res;
use std::collections::{BTreeMap, BTreeSet};

/// `{top-level module: modules it imports}` of a crate. A top-level module is one declared in
/// the root file whose code lives in a file of its own; the root file and modules written
/// inline in it (`pub mod __private { ... }`) are the crate's surface, not a layer.
pub fn module_deps(c: &Crate) -> BTreeMap<String, BTreeSet<String>> {
    let layered = |m: usize| -> Option<&str> {
        let module = &c.modules[m];
        let top = *module.path.first().as_ref()?;
        let root_child = c.modules[0].children[top.as_str()];
        (!c.modules[root_child].inline_in_root).then_some(top.as_str())
    };
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (i, m) in c.modules.iter().enumerate() {
        let Some(top) = layered(i) else { continue };
        let entry = deps.entry(top.to_string()).or_default();
        for r in &m.refs {
            // The module that defines what the path names, and every module whose bindings
            // it goes through (`crate::ring::Mode` re-exported by `ring` depends on `ring`).
            let (res, trail) = c.resolve_trail(i, &r.segs);
            let through = Crate::module_of(&res).into_iter().chain(trail);
            for t in through.filter_map(layered) {
                if t != top {
                    entry.insert(t.to_string());
                }
            }
        }
    }
    deps
}

/// Import cycles, each as a path that ends where it starts.
pub fn cycles_of(deps: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Color {
        White,
        Grey,
        Black,
    }
    fn visit(
        m: &str,
        deps: &BTreeMap<String, BTreeSet<String>>,
        color: &mut BTreeMap<String, Color>,
        stack: &mut Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) {
        color.insert(m.to_string(), Color::Grey);
        stack.push(m.to_string());
        for d in deps.get(m).into_iter().flatten() {
            match color.get(d.as_str()).copied().unwrap_or(Color::White) {
                Color::Grey => {
                    let at = stack.iter().position(|s| s == d).unwrap_or(0);
                    let mut cyc = stack[at..].to_vec();
                    cyc.push(d.clone());
                    out.push(cyc);
                }
                Color::White => visit(d, deps, color, stack, out),
                Color::Black => {}
            }
        }
        stack.pop();
        color.insert(m.to_string(), Color::Black);
    }
    let mut color: BTreeMap<String, Color> =
        deps.keys().map(|k| (k.clone(), Color::White)).collect();
    let mut out = Vec::new();
    for m in deps.keys() {
        if color[m.as_str()] == Color::White {
            visit(m, deps, &mut color, &mut Vec::new(), &mut out);
        }
    }
    out
}

/// `{module: layer}`: 0 for a module importing none, else 1 + its highest import's (the graph
/// has no cycle).
pub fn layers_of(deps: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, usize> {
    fn depth(
        m: &str,
        deps: &BTreeMap<String, BTreeSet<String>>,
        level: &mut BTreeMap<String, usize>,
    ) -> usize {
        if let Some(&l) = level.get(m) {
            return l;
        }
        let l = deps
            .get(m)
            .into_iter()
            .flatten()
            .map(|d| depth(d, deps, level) + 1)
            .max()
            .unwrap_or(0);
        level.insert(m.to_string(), l);
        l
    }
    let mut level = BTreeMap::new();
    for m in deps.keys() {
        depth(m, deps, &mut level);
    }
    level
}

/// The runtime's layer table and key minters, as ARCHITECTURE.md states them.
#[derive(Debug, Default)]
pub struct Doc {
    /// `{module: layer}` of "## Layers of the runtime".
    pub layers: BTreeMap<String, usize>,
    /// `{key type: modules that may mint it}` of "### Who mints the ring's keys".
    pub minters: BTreeMap<String, BTreeSet<String>>,
}

/// The rows `| a | b |` of the first table after `heading`, as cell texts.
fn table_rows(text: &str, heading: &str) -> Option<Vec<Vec<String>>> {
    let start = text.find(heading)?;
    let body = &text[start + heading.len()..];
    let end = body.find("\n#").unwrap_or(body.len());
    let rows = body[..end]
        .lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|cells| {
            !cells
                .iter()
                .all(|c| c.chars().all(|ch| ch == '-' || ch == ':' || ch == ' '))
        })
        .collect();
    Some(rows)
}

fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

impl Doc {
    /// Reads both tables; a missing one is an error naming it.
    pub fn parse(text: &str) -> Result<Doc, String> {
        let mut doc = Doc::default();
        let layers = table_rows(text, "## Layers of the runtime")
            .ok_or("ARCHITECTURE.md: no '## Layers of the runtime' section")?;
        for row in layers {
            if let (Some(l), Some(m)) = (row.first(), row.get(1)) {
                if let (Ok(l), Some(m)) = (l.parse::<usize>(), ticked(m).first()) {
                    doc.layers.insert(m.clone(), l);
                }
            }
        }
        let mint = table_rows(text, "### Who mints the ring's keys")
            .ok_or("ARCHITECTURE.md: no \"### Who mints the ring's keys\" section")?;
        for row in mint {
            if let (Some(k), Some(ms)) = (row.first(), row.get(1)) {
                if let Some(k) = ticked(k).first() {
                    doc.minters
                        .insert(k.clone(), ticked(ms).into_iter().collect());
                }
            }
        }
        if doc.minters.is_empty() {
            return Err("ARCHITECTURE.md: \"### Who mints the ring's keys\" has no rows".into());
        }
        Ok(doc)
    }
}

/// Differences between the code's layers and the documented table.
pub fn check_doc(
    deps: &BTreeMap<String, BTreeSet<String>>,
    level: &BTreeMap<String, usize>,
    doc: &Doc,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (m, l) in level {
        if !doc.layers.contains_key(m) {
            problems.push(format!(
                "module `{m}` (layer {l}) is missing from the table"
            ));
        }
    }
    for m in doc.layers.keys() {
        if !level.contains_key(m) {
            problems.push(format!(
                "the table names `{m}`, which is not a module of the runtime"
            ));
        }
    }
    for (m, &l) in level {
        if let Some(&t) = doc.layers.get(m) {
            if t != l {
                let up = deps[m].iter().max_by_key(|d| level[d.as_str()]);
                let why = match up {
                    Some(u) => format!(" (it imports `{u}`, layer {})", level[u.as_str()]),
                    None => " (it imports nothing)".to_string(),
                };
                problems.push(format!(
                    "`{m}` is at layer {t} in the table, {l} in the code{why}"
                ));
            }
        }
    }
    problems
}

/// The ring's contracts, on resolved paths: a key's `new` is reached only from the modules the
/// documentation names (and the ring's own unit tests), and the ring's modules take no atomic
/// from `std`/`core` directly (they use `crate::primitive`, which loom swaps).
pub fn check_contracts(c: &Crate, doc: &Doc, ring: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let ring_idx = c.modules[0].children.get(ring).copied();
    for (i, m) in c.modules.iter().enumerate() {
        let top = m.path.first().map(String::as_str).unwrap_or("");
        for r in &m.refs {
            let (res, trail) = c.resolve_trail(i, &r.segs);
            let at = format!("{}:{}", r.file.display(), r.line);
            if let Res::Item { module, name, rest } = &res {
                let mint =
                    Some(*module) == ring_idx && rest.first().map(String::as_str) == Some("new");
                if let (true, Some(allowed)) = (mint, doc.minters.get(name)) {
                    let ok = allowed.contains(top) || (top == ring && r.in_test);
                    if !ok {
                        let list: Vec<&str> = allowed.iter().map(String::as_str).collect();
                        problems.push(format!(
                            "{at}: mints `{name}` through `{}` in `{}` (allowed in: {}; the ring \
                             itself only in its unit tests)",
                            r.segs.join("::"),
                            m.path.join("::"),
                            list.join(", ")
                        ));
                    }
                }
            }
            if top == ring {
                // Reached through a binding outside the ring (`crate::primitive`'s re-export)?
                let via_other = trail
                    .iter()
                    .any(|&t| c.modules[t].path.first().map(String::as_str) != Some(ring));
                if let (Res::Extern(p), false) = (&res, via_other) {
                    let raw = p.len() >= 3
                        && (p[0] == "std" || p[0] == "core")
                        && p[1] == "sync"
                        && p[2] == "atomic";
                    if raw {
                        problems.push(format!(
                            "{at}: `{}` is {}: the ring takes its atomics from crate::primitive",
                            r.segs.join("::"),
                            p.join("::")
                        ));
                    }
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}
