//! The crate's module graph has no import circles: no two modules under `src/`
//! depend on each other, directly or around a longer loop. And it has walls:
//! only the entry (`main.rs`, `app`, the HTTP adapter) imports `config`, and
//! the domain (notes, repo, index, vault, patch, ops, proposals, embed, sync)
//! imports no adapter (http, mcp, sandbox, agent), nor `app` or `bootstrap`;
//! and the adapters reach the notes only through ops: they import ops, the
//! error vocabulary, each other and the edge modules, never the rest of the domain.
//!
//! Every file under `src/` is parsed (syn); each path it names that starts at
//! `crate::`, `super::`, `self::` or one of its own submodules becomes an edge to
//! the deepest module that path reaches (`use super::matching::Anchor` is an edge
//! to `patch::matching`). Paths inside macro calls (`format!`, `assert_eq!`) count
//! too. A module's inline submodules (`mod tests`) belong to its file.
//!
//! One kind of edge is not a dependency: a parent re-exporting its own
//! submodule (`pub use apply::apply` in `patch/mod.rs`). A module is made of its
//! submodules, and re-exporting them is how it shows their items; submodules
//! using their parent's types (`use super::Patch`) is the ordinary direction. A
//! parent that calls into its submodule while that submodule uses the parent is
//! a circle like any other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

type Module = Vec<String>;

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// Every module of the crate (lib.rs and what it reaches; main.rs is the binary), by file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut found = BTreeMap::new();
    for entry in walkdir::WalkDir::new(src) {
        let entry = entry.expect("src/ can be walked");
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        match parts.as_slice() {
            [only] if only == "main" => continue,
            [only] if only == "lib" => parts.clear(),
            [.., last] if last == "mod" => {
                parts.pop();
            }
            _ => {}
        }
        found.insert(parts, path.to_path_buf());
    }
    found
}

/// The edges out of one file.
struct Edges<'a> {
    modules: &'a BTreeMap<Module, PathBuf>,
    /// The file's module.
    file: Module,
    /// Where paths are resolved from: the file's module, or an inline module in it.
    here: Module,
    out: BTreeSet<Module>,
}

impl Edges<'_> {
    /// Resolves a path's segments from `here`: `None` when it names no module of
    /// this crate (std, a dependency, a local item).
    fn resolve(&self, segments: &[String]) -> Option<Module> {
        let (mut base, rest) = match segments.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &segments[1..]),
            Some("self") => (self.here.clone(), &segments[1..]),
            Some("super") => (self.here.clone(), segments),
            Some(first) => {
                let mut child = self.here.clone();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) || segments.len() < 2 {
                    return None;
                }
                (self.here.clone(), segments)
            }
            None => return None,
        };
        let mut rest = rest.iter().peekable();
        while rest.peek().is_some_and(|s| *s == "super") {
            rest.next();
            base.pop()?;
        }
        let mut deepest = base.clone();
        for segment in rest {
            base.push(segment.clone());
            if self.modules.contains_key(&base) {
                deepest = base.clone();
            }
        }
        Some(deepest)
    }

    fn add(&mut self, segments: &[String], reexport: bool) {
        let Some(target) = self.resolve(segments) else {
            return;
        };
        let inside = target.len() > self.file.len() && target.starts_with(&self.file);
        if target != self.file && !(reexport && inside) {
            self.out.insert(target);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, reexport: bool) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree, reexport);
                prefix.pop();
            }
            syn::UseTree::Name(leaf) => self.use_leaf(prefix, &leaf.ident, reexport),
            syn::UseTree::Rename(leaf) => self.use_leaf(prefix, &leaf.ident, reexport),
            syn::UseTree::Glob(_) => {
                // `use child::*` in a file: the prefix alone names the module.
                if prefix.len() == 1 && !matches!(prefix[0].as_str(), "crate" | "super" | "self") {
                    prefix.push("*".to_string());
                    self.add(prefix, reexport);
                    prefix.pop();
                } else {
                    self.add(prefix, reexport);
                }
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree, reexport);
                }
            }
        }
    }

    fn use_leaf(&mut self, prefix: &mut Vec<String>, ident: &syn::Ident, reexport: bool) {
        if ident == "self" {
            self.add(prefix, reexport);
        } else {
            prefix.push(ident.to_string());
            self.add(prefix, reexport);
            prefix.pop();
        }
    }

    /// Paths written inside a macro call's tokens (`crate::error::ErrorCode::Conflict`).
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            if let TokenTree::Group(group) = &trees[i] {
                self.tokens(group.stream());
                i += 1;
                continue;
            }
            let mut segments = Vec::new();
            while let Some(TokenTree::Ident(ident)) = trees.get(i) {
                segments.push(ident.to_string());
                let colons = matches!(
                    (trees.get(i + 1), trees.get(i + 2)),
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                        if a.as_char() == ':' && b.as_char() == ':'
                );
                if !colons {
                    break;
                }
                i += 3;
            }
            if segments.len() > 1 {
                self.add(&segments, false);
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Edges<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let reexport = !matches!(item.vis, syn::Visibility::Inherited);
        self.use_tree(&mut Vec::new(), &item.tree, reexport);
    }

    /// `pub(super)` names who may see an item, not what it depends on.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.here.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.here.pop();
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segments, false);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

/// The edges out of `module`, whose file holds `text`.
fn edges_of(modules: &BTreeMap<Module, PathBuf>, module: &Module, text: &str) -> BTreeSet<Module> {
    let file =
        syn::parse_file(text).unwrap_or_else(|e| panic!("{} does not parse: {e}", name(module)));
    let mut edges = Edges {
        modules,
        file: module.clone(),
        here: module.clone(),
        out: BTreeSet::new(),
    };
    edges.visit_file(&file);
    edges.out
}

fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules(src);
    modules
        .iter()
        .map(|(module, path)| {
            let text = std::fs::read_to_string(path).unwrap();
            (module.clone(), edges_of(&modules, module, &text))
        })
        .collect()
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, (usize, usize)>,
        stack: Vec<&'g Module>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g Module) -> usize {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            let mut low = n;
            for w in self.graph.get(v).into_iter().flatten() {
                let w_low = match self.index.get(w) {
                    None => self.visit(w),
                    Some(&(w_index, _)) if self.stack.contains(&w) => w_index,
                    Some(_) => continue,
                };
                low = low.min(w_low);
            }
            self.index.insert(v, (n, low));
            if low == n {
                let at = self.stack.iter().rposition(|m| *m == v).unwrap();
                let component: Vec<&Module> = self.stack.drain(at..).collect();
                if component.len() > 1 {
                    let mut names: Vec<String> = component.iter().map(|m| name(m)).collect();
                    names.sort();
                    self.found.push(names);
                }
            }
            low
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !tarjan.index.contains_key(v) {
            tarjan.visit(v);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_two_modules_import_each_other() {
    let found = cycles(&graph(&src()));
    assert!(
        found.is_empty(),
        "modules that import each other (each list is one circle): {found:?}; break it by moving \
         what both sides use into a module of its own"
    );
}

/// Whether `module` is `area` or inside it.
fn within(module: &Module, area: &str) -> bool {
    module.first().is_some_and(|top| top == area)
}

/// The edges that break a wall: from a module of `from` to one of `to`.
fn crossings(
    graph: &BTreeMap<Module, BTreeSet<Module>>,
    from: impl Fn(&Module) -> bool,
    to: impl Fn(&Module) -> bool,
) -> Vec<String> {
    let mut found = Vec::new();
    for (module, targets) in graph.iter().filter(|(m, _)| from(m)) {
        for target in targets.iter().filter(|t| to(t)) {
            found.push(format!("{} -> {}", name(module), name(target)));
        }
    }
    found
}

/// The entry: `main.rs` (not in the graph: it is the binary), the composition
/// root, and the HTTP adapter, which reads the served `Config`.
const ENTRY: [&str; 2] = ["app", "http"];

/// The domain: what the operations are made of. None of it knows an adapter.
const DOMAIN: [&str; 9] = [
    "notes",
    "repo",
    "index",
    "vault",
    "patch",
    "ops",
    "proposals",
    "embed",
    "sync",
];

/// The adapters and the start-up above them.
const ABOVE_DOMAIN: [&str; 6] = ["http", "mcp", "sandbox", "agent", "app", "bootstrap"];

#[test]
fn only_the_entry_reads_the_configuration() {
    let graph = graph(&src());
    let found = crossings(
        &graph,
        |m| !within(m, "config") && !ENTRY.iter().any(|area| within(m, area)),
        |t| within(t, "config"),
    );
    assert!(
        found.is_empty(),
        "modules below the entry import config: {found:?}; each area's settings type lives \
         with the area (config re-exports it), and the entry passes the values down"
    );
}

#[test]
fn the_domain_imports_no_adapter_and_no_start_up() {
    let graph = graph(&src());
    let found = crossings(
        &graph,
        |m| DOMAIN.iter().any(|area| within(m, area)),
        |t| ABOVE_DOMAIN.iter().any(|area| within(t, area)) || within(t, "config"),
    );
    assert!(
        found.is_empty(),
        "the domain imports an adapter, start-up or config: {found:?}; move what it needs \
         down into the domain, or let the adapter pass it in"
    );
}

/// The adapters: they reach the notes through `ops` alone.
const ADAPTERS: [&str; 4] = ["http", "mcp", "sandbox", "agent"];

/// Whether `module` is in the domain below `ops`, which the adapters never import.
fn below_ops(module: &Module) -> bool {
    DOMAIN
        .iter()
        .any(|area| *area != "ops" && within(module, area))
}

#[test]
fn the_adapters_reach_the_notes_only_through_ops() {
    let graph = graph(&src());
    let found = crossings(
        &graph,
        |m| ADAPTERS.iter().any(|area| within(m, area)),
        below_ops,
    );
    assert!(
        found.is_empty(),
        "an adapter imports the domain below ops: {found:?}; give ops what the adapter needs \
         (a row, or a helper in ops/adapters.rs) and import that"
    );
}

#[test]
fn a_wall_names_each_edge_that_crosses_it() {
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, to) in [
        ("ops::table", "config"),
        ("http::routes", "config"),
        ("ops::context", "notes"),
        ("notes::view", "sandbox"),
    ] {
        graph.entry(module(from)).or_default().insert(module(to));
    }
    let entry = |m: &Module| ENTRY.iter().any(|area| within(m, area));
    assert_eq!(
        crossings(&graph, |m| !entry(m), |t| within(t, "config")),
        ["ops::table -> config"]
    );
    let domain = |m: &Module| DOMAIN.iter().any(|area| within(m, area));
    let above = |t: &Module| ABOVE_DOMAIN.iter().any(|area| within(t, area));
    assert_eq!(crossings(&graph, domain, above), ["notes::view -> sandbox"]);
    graph
        .entry(module("agent::prompt"))
        .or_default()
        .extend([module("vault::tokens"), module("ops")]);
    let adapter = |m: &Module| ADAPTERS.iter().any(|area| within(m, area));
    assert_eq!(
        crossings(&graph, adapter, below_ops),
        ["agent::prompt -> vault::tokens"]
    );
}

fn module(name: &str) -> Module {
    name.split("::")
        .filter(|s| *s != "crate")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_kind_of_path_is_an_edge() {
    let modules: BTreeMap<Module, PathBuf> =
        ["crate", "a", "a::b", "a::c", "a::d", "e", "f", "g", "h"]
            .into_iter()
            .map(|m| (module(m), PathBuf::new()))
            .collect();
    // The file of `a::b`.
    let text = r#"
        use std::collections::HashMap;
        use super::{c, Thing};
        use crate::e::{self, Other as Renamed};
        pub use crate::f::*;
        fn run() -> HashMap<u8, u8> {
            let x = crate::g::make();
            assert_eq!(x, crate::h::VALUE);
            e::go();
            HashMap::new()
        }
        #[cfg(test)]
        mod tests {
            use super::super::d::Helper;
        }
    "#;
    let found: BTreeSet<String> = edges_of(&modules, &module("a::b"), text)
        .iter()
        .map(|m| name(m))
        .collect();
    // a::c (a module in a group), a (the parent's item), e (`self` in a group,
    // a rename), f (a glob), g (a path in code), h (inside a macro's tokens), a::d
    // (from an inline module, through two `super`s).
    let want: BTreeSet<String> = ["a::c", "a", "e", "f", "g", "h", "a::d"]
        .into_iter()
        .map(str::to_string)
        .collect();
    assert_eq!(found, want);

    // The parent: a re-export of its own submodule is no edge, nor is a
    // visibility (`pub(super)`); a private use of a submodule is.
    let text = r#"
        mod b;
        mod c;
        mod d;
        pub use b::Thing;
        pub use c::*;
        use d::helper;
        pub(super) fn go() { crate::e::run(); }
    "#;
    let found: BTreeSet<String> = edges_of(&modules, &module("a"), text)
        .iter()
        .map(|m| name(m))
        .collect();
    assert_eq!(found, BTreeSet::from(["a::d".to_string(), "e".to_string()]));
}

#[test]
fn a_circle_is_found_however_long() {
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")] {
        graph.entry(module(from)).or_default().insert(module(to));
        graph.entry(module(to)).or_default();
    }
    assert_eq!(cycles(&graph), [["a", "b", "c"]]);
    graph.get_mut(&module("e")).unwrap().insert(module("d"));
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"], vec!["d", "e"]]);
}
