//! Name resolution over a [`Crate`]: what a path written in a module stands for, following
//! `use` bindings (aliases, groups, `self`), glob imports and re-exports at any depth.

use crate::model::Crate;

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Res {
    /// A module of the crate.
    Module(usize),
    /// An item defined in a module of the crate, then the rest of the path (associated items,
    /// variants, fields).
    Item {
        module: usize,
        name: String,
        rest: Vec<String>,
    },
    /// A path outside the crate (`std`, `core`, another crate, the prelude).
    Extern(Vec<String>),
    /// Nothing found (a local variable, a generic, `Self`, a macro-generated name).
    Unknown,
}

/// Bound on how many `use` bindings one resolution follows (re-export chains, or a cycle of
/// `use`s, which the compiler would reject).
const MAX_HOPS: u32 = 32;

impl Crate {
    /// Resolves `segs`, written in module `from`.
    pub fn resolve(&self, from: usize, segs: &[String]) -> Res {
        self.resolve_hops(from, segs, 0, &mut Vec::new())
    }

    /// As [`Crate::resolve`], with the modules whose `use` bindings the resolution went
    /// through (a re-export in `primitive` shows as `primitive`).
    pub fn resolve_trail(&self, from: usize, segs: &[String]) -> (Res, Vec<usize>) {
        let mut trail = Vec::new();
        let r = self.resolve_hops(from, segs, 0, &mut trail);
        (r, trail)
    }

    fn resolve_hops(&self, from: usize, segs: &[String], hops: u32, trail: &mut Vec<usize>) -> Res {
        if segs.is_empty() || hops > MAX_HOPS {
            return Res::Unknown;
        }
        let (mut cur, mut i) = match segs[0].as_str() {
            "crate" => (0, 1),
            "self" => (from, 1),
            "super" => {
                let mut m = from;
                let mut i = 0;
                while segs.get(i).map(String::as_str) == Some("super") {
                    match self.modules[m].parent {
                        Some(p) => m = p,
                        None => return Res::Unknown,
                    }
                    i += 1;
                }
                (m, i)
            }
            "Self" => return Res::Unknown,
            _ => (from, 0),
        };
        let relative = i == 0;
        loop {
            if i == segs.len() {
                return Res::Module(cur);
            }
            match self.lookup(cur, &segs[i], hops, trail) {
                Some(Res::Module(m)) => {
                    cur = m;
                    i += 1;
                }
                Some(Res::Item {
                    module,
                    name,
                    mut rest,
                }) => {
                    rest.extend_from_slice(&segs[i + 1..]);
                    return Res::Item { module, name, rest };
                }
                Some(Res::Extern(mut p)) => {
                    p.extend_from_slice(&segs[i + 1..]);
                    return Res::Extern(p);
                }
                Some(Res::Unknown) | None if relative && i == 0 => {
                    return Res::Extern(segs.to_vec());
                }
                _ => return Res::Unknown,
            }
        }
    }

    /// The meaning of `name` inside module `m`: a child module, an item, a `use` binding, or a
    /// name a glob import brings.
    fn lookup(&self, m: usize, name: &str, hops: u32, trail: &mut Vec<usize>) -> Option<Res> {
        let key = (m, name.to_string());
        if let Some(done) = self.memo.borrow().get(&key) {
            return done.as_ref().map(|(r, t)| {
                trail.extend_from_slice(t);
                r.clone()
            });
        }
        // In progress: a `use` cycle (or a glob importing its own importer) finds nothing here.
        self.memo.borrow_mut().insert(key.clone(), None);
        let mark = trail.len();
        let found = self.lookup_uncached(m, name, hops, trail);
        let entry = found.clone().map(|r| (r, trail[mark..].to_vec()));
        self.memo.borrow_mut().insert(key, entry);
        found
    }

    fn lookup_uncached(
        &self,
        m: usize,
        name: &str,
        hops: u32,
        trail: &mut Vec<usize>,
    ) -> Option<Res> {
        let module = &self.modules[m];
        if let Some(&c) = module.children.get(name) {
            return Some(Res::Module(c));
        }
        if module.items.contains_key(name) {
            return Some(Res::Item {
                module: m,
                name: name.to_string(),
                rest: Vec::new(),
            });
        }
        for (bound, target) in &module.uses {
            if bound == name {
                let mark = trail.len();
                trail.push(m);
                let r = self.resolve_hops(m, target, hops + 1, trail);
                if r != Res::Unknown {
                    return Some(r);
                }
                trail.truncate(mark);
            }
        }
        for base in &module.globs {
            let mark = trail.len();
            trail.push(m);
            if let Res::Module(g) = self.resolve_hops(m, base, hops + 1, trail) {
                if g != m {
                    if let Some(r) = self.lookup(g, name, hops + 1, trail) {
                        return Some(r);
                    }
                }
            }
            trail.truncate(mark);
        }
        None
    }

    /// The module a resolution lands in, if it is one of the crate's.
    pub fn module_of(res: &Res) -> Option<usize> {
        match res {
            Res::Module(m) => Some(*m),
            Res::Item { module, .. } => Some(*module),
            _ => None,
        }
    }
}
