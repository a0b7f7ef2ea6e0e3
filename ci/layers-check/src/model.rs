//! A crate's module tree as the compiler sees it: modules from `mod` declarations (files,
//! `#[path]`, inline blocks), the names each module defines, its `use` bindings and glob
//! imports, and every path written in its code.

use quote::ToTokens;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// One module of a crate.
#[derive(Debug, Default)]
pub struct Module {
    /// Its path from the crate root (empty for the root).
    pub path: Vec<String>,
    /// Its parent (`None` for the root).
    pub parent: Option<usize>,
    /// Child modules by name.
    pub children: BTreeMap<String, usize>,
    /// Names of the items it defines (types, functions, constants, statics, traits).
    pub items: BTreeMap<String, ()>,
    /// `use` bindings: the name brought into scope and the path it stands for.
    pub uses: Vec<(String, Vec<String>)>,
    /// Bases of its glob imports (`use base::*`).
    pub globs: Vec<Vec<String>>,
    /// Every path written in it: `use` targets and paths in items and macro calls.
    pub refs: Vec<PathRef>,
    /// The file it was read from (the declaring file for an inline module).
    pub file: PathBuf,
    /// Declared in a root file as an inline block (`mod m { ... }` inside lib.rs).
    pub inline_in_root: bool,
}

/// A path as written, where it was written.
#[derive(Debug, Clone)]
pub struct PathRef {
    /// Its segments, `crate`/`self`/`super` included.
    pub segs: Vec<String>,
    /// The file and line.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// Inside `#[cfg(test)]` code.
    pub in_test: bool,
}

/// A crate's modules; index 0 is the root.
#[derive(Debug, Default)]
pub struct Crate {
    /// All modules, the root first.
    pub modules: Vec<Module>,
    /// Resolutions of a name in a module already made (`None` while in progress or not
    /// found), with the modules whose bindings they went through.
    pub(crate) memo: RefCell<Memo>,
}

/// `{(module, name): (meaning, modules whose bindings it went through)}`.
pub(crate) type Memo = HashMap<(usize, String), Option<(crate::resolve::Res, Vec<usize>)>>;

/// A source file that could not be read or parsed.
#[derive(Debug)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Crate {
    /// Reads the crate whose root file is `root` (lib.rs or main.rs), following `mod`s.
    pub fn load(root: &Path) -> Result<Crate, LoadError> {
        let mut c = Crate::default();
        c.modules.push(Module {
            file: root.to_path_buf(),
            ..Module::default()
        });
        let file = parse(root)?;
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        c.fill(0, &file.items, root, &dir, false)?;
        Ok(c)
    }

    /// Adds the contents of `items` (of module `m`, read from `file`) to the tree. `child_dir`
    /// is where `m`'s child module files live.
    fn fill(
        &mut self,
        m: usize,
        items: &[syn::Item],
        file: &Path,
        child_dir: &Path,
        in_test: bool,
    ) -> Result<(), LoadError> {
        for item in items {
            let test = in_test || is_cfg_test(attrs_of(item));
            match item {
                syn::Item::Mod(md) => {
                    let name = md.ident.to_string();
                    let idx = self.child(m, &name, file);
                    if let Some((_, content)) = &md.content {
                        self.modules[idx].inline_in_root = m == 0;
                        let sub = child_dir.join(&name);
                        self.fill(idx, content, file, &sub, test)?;
                    } else {
                        let (path, sub) = module_file(&md.attrs, file, child_dir, &name)?;
                        self.modules[idx].file = path.clone();
                        let parsed = parse(&path)?;
                        self.fill(idx, &parsed.items, &path, &sub, test)?;
                    }
                }
                syn::Item::Use(u) => {
                    let mut flat = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut flat);
                    for (name, target, glob) in flat {
                        let line = u.use_token.span.start().line;
                        self.modules[m].refs.push(PathRef {
                            segs: target.clone(),
                            file: file.to_path_buf(),
                            line,
                            in_test: test,
                        });
                        if glob {
                            self.modules[m].globs.push(target);
                        } else if name != "_" {
                            self.modules[m].uses.push((name, target));
                        }
                    }
                }
                other => {
                    if let Some(name) = defined_name(other) {
                        self.modules[m].items.insert(name, ());
                    }
                    if let syn::Item::ForeignMod(f) = other {
                        for fi in &f.items {
                            let name = match fi {
                                syn::ForeignItem::Fn(x) => Some(x.sig.ident.to_string()),
                                syn::ForeignItem::Static(x) => Some(x.ident.to_string()),
                                syn::ForeignItem::Type(x) => Some(x.ident.to_string()),
                                _ => None,
                            };
                            if let Some(n) = name {
                                self.modules[m].items.insert(n, ());
                            }
                        }
                    }
                    let mut v = Paths {
                        out: Vec::new(),
                        uses: Vec::new(),
                        file,
                        test_depth: usize::from(test),
                    };
                    v.visit_item(other);
                    self.modules[m].refs.extend(v.out);
                    // `use` inside function bodies: taken as the module's own bindings (a
                    // block's scope is not modelled; a clash of names would only add an edge).
                    for (name, target, glob) in v.uses {
                        if glob {
                            self.modules[m].globs.push(target);
                        } else if name != "_" {
                            self.modules[m].uses.push((name, target));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn child(&mut self, m: usize, name: &str, file: &Path) -> usize {
        if let Some(&i) = self.modules[m].children.get(name) {
            return i; // the same module declared twice under different cfgs
        }
        let mut path = self.modules[m].path.clone();
        path.push(name.to_string());
        self.modules.push(Module {
            path,
            parent: Some(m),
            file: file.to_path_buf(),
            ..Module::default()
        });
        let i = self.modules.len() - 1;
        self.modules[m].children.insert(name.to_string(), i);
        i
    }
}

fn parse(path: &Path) -> Result<syn::File, LoadError> {
    let text = fs::read_to_string(path)
        .map_err(|e| LoadError(format!("{}: cannot read: {e}", path.display())))?;
    syn::parse_file(&text).map_err(|e| {
        let at = e.span().start();
        LoadError(format!(
            "{}:{}:{}: cannot parse: {e}",
            path.display(),
            at.line,
            at.column + 1
        ))
    })
}

/// The file of an out-of-line module and the directory of its own children.
fn module_file(
    attrs: &[syn::Attribute],
    file: &Path,
    child_dir: &Path,
    name: &str,
) -> Result<(PathBuf, PathBuf), LoadError> {
    for a in attrs {
        if a.path().is_ident("path") {
            if let syn::Meta::NameValue(nv) = &a.meta {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
                    let dir = file.parent().unwrap_or(Path::new("."));
                    let p = dir.join(s.value());
                    let sub = p.with_extension("");
                    return Ok((p, sub));
                }
            }
        }
    }
    let flat = child_dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return Ok((flat, child_dir.join(name)));
    }
    let nested = child_dir.join(name).join("mod.rs");
    if nested.is_file() {
        return Ok((nested, child_dir.join(name)));
    }
    Err(LoadError(format!(
        "{}: `mod {name};` has no file ({} or {})",
        file.display(),
        flat.display(),
        nested.display()
    )))
}

fn attrs_of(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(x) => &x.attrs,
        syn::Item::Enum(x) => &x.attrs,
        syn::Item::ExternCrate(x) => &x.attrs,
        syn::Item::Fn(x) => &x.attrs,
        syn::Item::ForeignMod(x) => &x.attrs,
        syn::Item::Impl(x) => &x.attrs,
        syn::Item::Macro(x) => &x.attrs,
        syn::Item::Mod(x) => &x.attrs,
        syn::Item::Static(x) => &x.attrs,
        syn::Item::Struct(x) => &x.attrs,
        syn::Item::Trait(x) => &x.attrs,
        syn::Item::TraitAlias(x) => &x.attrs,
        syn::Item::Type(x) => &x.attrs,
        syn::Item::Union(x) => &x.attrs,
        syn::Item::Use(x) => &x.attrs,
        _ => &[],
    }
}

/// `#[cfg(test)]` (also inside `all(...)`).
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let text = a.meta.to_token_stream().to_string();
            text.contains("test") && !text.contains("not (test") && !text.contains("not(test")
        }
    })
}

fn defined_name(item: &syn::Item) -> Option<String> {
    Some(match item {
        syn::Item::Const(x) => x.ident.to_string(),
        syn::Item::Enum(x) => x.ident.to_string(),
        syn::Item::ExternCrate(x) => x
            .rename
            .as_ref()
            .map(|(_, r)| r)
            .unwrap_or(&x.ident)
            .to_string(),
        syn::Item::Fn(x) => x.sig.ident.to_string(),
        syn::Item::Static(x) => x.ident.to_string(),
        syn::Item::Struct(x) => x.ident.to_string(),
        syn::Item::Trait(x) => x.ident.to_string(),
        syn::Item::TraitAlias(x) => x.ident.to_string(),
        syn::Item::Type(x) => x.ident.to_string(),
        syn::Item::Union(x) => x.ident.to_string(),
        _ => return None,
    })
}

/// Flattens a `use` tree into (bound name, target path, is a glob).
fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(String, Vec<String>, bool)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let ident = n.ident.to_string();
            if ident == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone(), false));
                }
            } else {
                let mut t = prefix.clone();
                t.push(ident.clone());
                out.push((ident, t, false));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut t = prefix.clone();
            if r.ident != "self" {
                t.push(r.ident.to_string());
            }
            out.push((r.rename.to_string(), t, false));
        }
        syn::UseTree::Glob(_) => out.push((String::new(), prefix.clone(), true)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Collects every path of an item, and `a::b` sequences inside macro calls' tokens.
struct Paths<'a> {
    out: Vec<PathRef>,
    /// `use` declarations met inside items (function bodies).
    uses: Vec<(String, Vec<String>, bool)>,
    file: &'a Path,
    /// > 0 inside `#[cfg(test)]` code.
    test_depth: usize,
}

impl Paths<'_> {
    fn push(&mut self, segs: Vec<String>, line: usize) {
        if !segs.is_empty() {
            self.out.push(PathRef {
                segs,
                file: self.file.to_path_buf(),
                line,
                in_test: self.test_depth > 0,
            });
        }
    }

    fn scan_tokens(&mut self, ts: proc_macro2::TokenStream) {
        use proc_macro2::{Spacing, TokenTree};
        let toks: Vec<TokenTree> = ts.into_iter().collect();
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                TokenTree::Group(g) => {
                    self.scan_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(id) => {
                    let line = id.span().start().line;
                    let mut segs = vec![id.to_string()];
                    let mut j = i + 1;
                    // ident (`::` ident)*
                    while j + 2 < toks.len() + 1 {
                        let colons = matches!((&toks.get(j), &toks.get(j + 1)),
                            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':');
                        if !colons {
                            break;
                        }
                        match toks.get(j + 2) {
                            Some(TokenTree::Ident(next)) => {
                                segs.push(next.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if segs.len() > 1 {
                        self.push(segs, line);
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
    }
}

fn path_segs(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let line = p
                .segments
                .first()
                .map_or(0, |s| s.ident.span().start().line);
            self.push(path_segs(p), line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan_tokens(m.tokens.clone());
    }

    fn visit_item_mod(&mut self, _m: &'ast syn::ItemMod) {
        // Nested modules are modules of their own (handled by `Crate::fill`).
    }

    fn visit_attribute(&mut self, _a: &'ast syn::Attribute) {}

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let t = is_cfg_test(&f.attrs);
        self.test_depth += usize::from(t);
        syn::visit::visit_item_fn(self, f);
        self.test_depth -= usize::from(t);
    }

    fn visit_item_impl(&mut self, f: &'ast syn::ItemImpl) {
        let t = is_cfg_test(&f.attrs);
        self.test_depth += usize::from(t);
        syn::visit::visit_item_impl(self, f);
        self.test_depth -= usize::from(t);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let t = is_cfg_test(&f.attrs);
        self.test_depth += usize::from(t);
        syn::visit::visit_impl_item_fn(self, f);
        self.test_depth -= usize::from(t);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // A `use` inside a function body: its targets are paths of this module.
        let mut flat = Vec::new();
        flatten_use(&u.tree, &mut Vec::new(), &mut flat);
        let line = u.use_token.span.start().line;
        for (name, target, glob) in flat {
            self.push(target.clone(), line);
            self.uses.push((name, target, glob));
        }
    }
}
