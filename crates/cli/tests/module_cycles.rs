//! No import cycles between the modules of any crate of the workspace, at every level: among
//! the top-level modules (a group such as `daemon::records` counts as one) and among the children
//! of each folder module. A module that names `crate::other` (or `super::other`) depends on
//! `other`, and no chain of such dependencies may come back to where it started (a cycle makes
//! two modules one in all but name: neither can be read, changed or tested without the other).
//! A folder's own `mod.rs` (the crate's `lib.rs`, `main.rs`) composes its children and is not
//! counted among them; comments and test modules are not either.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file that counts: no test module, no comment lines.
fn counted_code(text: &str) -> String {
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module path of a source file under `src` (`daemon/round/gate.rs` is `daemon::round::gate`,
/// `daemon/mod.rs` is `daemon`, `lib.rs` is the crate itself).
fn module_path(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if matches!(
        path.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        path.pop();
    }
    path
}

/// The module paths `code`, the code of the module at `here`, names: absolute (`crate::a::b`)
/// and relative (`super::a`, `self::a`), including each item of a grouped import
/// (`use crate::{a, b::c, d::{e, f}}`), as far as their leading segments go.
fn named_paths(code: &str, here: &[String]) -> BTreeSet<Vec<String>> {
    let mut named = BTreeSet::new();
    for prefix in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(prefix) {
            // Only a path's first segment (`a::super::` is not a relative path).
            if code[..at].ends_with("::")
                || code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            {
                continue;
            }
            let mut base: Vec<String> = match prefix {
                "crate::" => Vec::new(),
                "self::" => here.to_vec(),
                _ => here[..here.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = &code[at + prefix.len()..];
            while let Some(after) = rest.strip_prefix("super::") {
                base.pop();
                rest = after;
            }
            for item in path_items(rest) {
                let mut path = base.clone();
                path.extend(item);
                named.insert(path);
            }
        }
    }
    named
}

/// The paths at the start of `rest`: one (`a::b::C`), or one per item of a group (`{a, b::c}`).
fn path_items(rest: &str) -> Vec<Vec<String>> {
    let segments = |s: &str| {
        let path = &s[..s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(s.len())];
        path.split("::")
            .take_while(|seg| !seg.is_empty())
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![segments(rest)];
    };
    let (mut depth, mut items, mut item_start) = (0, Vec::new(), true);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && !c.is_whitespace() => {
                items.push(segments(&group[i..]));
                item_start = false;
            }
            _ => {}
        }
    }
    items
}

/// Every module of the crate (its path) with the paths its code names; comments and tests are
/// not counted.
fn modules(src: &Path) -> Vec<(Vec<String>, BTreeSet<Vec<String>>)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(src).expect("under src");
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        if name == "tests.rs"
            || name.ends_with("_tests.rs")
            || relative.components().any(|c| c.as_os_str() == "tests")
        {
            continue;
        }
        let here = module_path(relative);
        let text = std::fs::read_to_string(file).expect("readable");
        let named = named_paths(&counted_code(&text), &here);
        modules.push((here, named));
    }
    modules
}

/// For each folder module (the crate's root included), the graph of its children: child `a`
/// depends on child `b` when code under `a` names a path under `b`. A folder's own `mod.rs`
/// (the crate's `lib.rs`, `main.rs`) composes its children and is not one of them.
fn folder_graphs(src: &Path) -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let modules = modules(src);
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (path, named) in &modules {
        for depth in 0..path.len() {
            let (folder, child) = (&path[..depth], &path[depth]);
            let depends = named
                .iter()
                .filter(|n| n.len() > depth && n.starts_with(folder) && &n[depth] != child)
                .map(|n| n[depth].clone());
            graphs
                .entry(folder.to_vec())
                .or_default()
                .entry(child.clone())
                .or_default()
                .extend(depends);
        }
    }
    for graph in graphs.values_mut() {
        let children: BTreeSet<String> = graph.keys().cloned().collect();
        graph
            .values_mut()
            .for_each(|named| named.retain(|m| children.contains(m)));
    }
    graphs
}

/// A cycle through `start`, if there is one (depth-first, in name order).
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut path = vec![start.to_string()];
    let mut seen = BTreeSet::new();
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        let at = path.last().cloned().unwrap_or_default();
        for next in graph.get(&at).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    walk(graph, start, &mut path, &mut seen).then_some(path)
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cycles = Vec::new();
    let mut crates_seen = 0;
    for entry in std::fs::read_dir(&crates).expect("crates/").flatten() {
        let src = entry.path().join("src");
        if !src.is_dir() {
            continue;
        }
        crates_seen += 1;
        for (folder, graph) in folder_graphs(&src) {
            if let Some(cycle) = graph.keys().find_map(|m| cycle_through(&graph, m)) {
                let at = if folder.is_empty() {
                    String::new()
                } else {
                    format!(" (in {})", folder.join("::"))
                };
                cycles.push(format!(
                    "{}{at}: {}",
                    entry.file_name().to_string_lossy(),
                    cycle.join(" -> ")
                ));
            }
        }
    }
    assert!(crates_seen >= 8, "found only {crates_seen} crates");
    assert!(
        cycles.is_empty(),
        "import cycles between modules:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_checker_sees_a_cycle_grouped_imports_and_relative_paths() {
    let here = [
        "daemon".to_string(),
        "round".to_string(),
        "gate".to_string(),
    ];
    let paths = |v: &[&[&str]]| {
        v.iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect::<BTreeSet<Vec<String>>>()
    };
    assert_eq!(
        named_paths(
            "use crate::{a, b::c, d::{e, f}};\nlet x = crate::g::h();",
            &here
        ),
        paths(&[&["a"], &["b", "c"], &["d"], &["g", "h"]])
    );
    assert_eq!(
        named_paths(
            "use super::hold::Hold; use super::super::runs; self::x::y(); b::super::z",
            &here
        ),
        paths(&[
            &["daemon", "round", "hold", "Hold"],
            &["daemon", "runs"],
            &["daemon", "round", "gate", "x", "y"]
        ])
    );
    assert_eq!(
        module_path(Path::new("daemon/round/mod.rs")),
        ["daemon", "round"]
    );
    assert_eq!(
        counted_code("// crate::a\nuse crate::b;\n#[cfg(test)]\nmod tests { use crate::c; }"),
        "use crate::b;"
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, n)| (m.to_string(), n.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        cycle_through(&graph, "a"),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
    assert_eq!(cycle_through(&graph, "d"), None);
}
