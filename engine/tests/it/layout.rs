//! The engine's module layout: which top-level modules (`engine/src/<name>.rs` or
//! `engine/src/<name>/`) use which (`crate::<name>` outside tests), and the cycles among them.
//!
//! The modules form layers (engine/src/lib.rs lists them): each uses only modules below it, so
//! there is no import cycle, and this test keeps it so. A grouped `use crate::{a, b}` would hide
//! edges from it, so it is refused too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Source text without its `#[cfg(test)]` modules and comments.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The edges between top-level modules.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut paths = Vec::new();
    files(src, &mut paths);
    let module_of = |path: &Path| {
        let relative = path.strip_prefix(src).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_string_lossy().to_string();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = paths.iter().map(|p| module_of(p)).filter(|m| m != "lib").collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &paths {
        let from = module_of(path);
        let text = code(&std::fs::read_to_string(path).unwrap());
        for (at, _) in text.match_indices("crate::") {
            let name: String =
                text[at + "crate::".len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if name != from && modules.contains(&name) {
                edges.entry(from.clone()).or_default().insert(name);
            }
        }
    }
    edges
}

/// Whether `to` reaches `from` (so that `from -> to` closes a cycle).
fn reaches(edges: &BTreeMap<String, BTreeSet<String>>, to: &str, from: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![to.to_string()];
    while let Some(module) = stack.pop() {
        if module == from {
            return true;
        }
        if seen.insert(module.clone()) {
            stack.extend(edges.get(&module).into_iter().flatten().cloned());
        }
    }
    false
}

#[test]
fn the_engine_modules_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    files(&src, &mut paths);
    let grouped: Vec<String> = paths
        .iter()
        .filter(|p| code(&std::fs::read_to_string(p).unwrap()).contains("crate::{"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(grouped.is_empty(), "name each module in its own `use crate::<module>::...`: {grouped:?}");
    let edges = edges(&src);
    assert!(edges.len() > 10, "the module edges were not found: {edges:?}");
    let cyclic: Vec<String> = edges
        .iter()
        .flat_map(|(from, tos)| tos.iter().map(move |to| (from.clone(), to.clone())))
        .filter(|(from, to)| reaches(&edges, to, from))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(cyclic.is_empty(), "these module edges close an import cycle: {cyclic:?}");
}
