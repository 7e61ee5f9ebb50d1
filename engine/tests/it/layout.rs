//! The engine's module layout: which top-level modules (`engine/src/<name>.rs` or
//! `engine/src/<name>/`) use which (`crate::<name>` outside tests), and the cycles among them.
//!
//! Issue 19 asks for a layout without import cycles. Until it is reached, the edges that close a
//! cycle today are listed in `CYCLIC_EDGES_TODAY`: the test fails when an edge outside that list
//! closes a cycle (the knot must not grow), and when a listed edge no longer does (shrink the
//! list, so that it stays fixed). At the end the list is empty.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `crate::` edges that are part of a cycle today, as "from -> to".
const CYCLIC_EDGES_TODAY: &[&str] = &[
    "database -> flow",
    "database -> ivm",
    "database -> session",
    "database -> source",
    "database -> system",
    "flow -> database",
    "flow -> ivm",
    "flow -> quality",
    "flow -> source",
    "flow -> sql",
    "functions -> database",
    "ivm -> database",
    "ivm -> sql",
    "quality -> sql",
    "session -> database",
    "session -> sql",
    "source -> database",
    "source -> sql",
    "sql -> database",
    "sql -> functions",
    "system -> database",
    "system -> flow",
    "system -> ivm",
    "system -> source",
];

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
fn the_import_cycles_among_engine_modules_do_not_grow() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = edges(&src);
    let cyclic: BTreeSet<String> = edges
        .iter()
        .flat_map(|(from, tos)| tos.iter().map(move |to| (from.clone(), to.clone())))
        .filter(|(from, to)| reaches(&edges, to, from))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    let known: BTreeSet<String> = CYCLIC_EDGES_TODAY.iter().map(|e| e.to_string()).collect();
    let new: Vec<&String> = cyclic.difference(&known).collect();
    let gone: Vec<&String> = known.difference(&cyclic).collect();
    assert!(new.is_empty(), "these module edges close an import cycle (issue 19): {new:?}");
    assert!(gone.is_empty(), "these edges no longer close a cycle: remove them from CYCLIC_EDGES_TODAY: {gone:?}");
}
