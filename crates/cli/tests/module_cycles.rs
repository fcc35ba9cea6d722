//! No import cycles between the top-level modules of any crate of the workspace: a module that
//! names `crate::other` depends on `other`, and no chain of such dependencies may come back to
//! where it started (a cycle makes two modules one in all but name: neither can be read,
//! changed or tested without the other). The crate's root (`lib.rs`, `main.rs`) composes the
//! modules and is not counted; comments and test modules are not either.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
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
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The top-level modules `code` names through `crate::`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a, b::c, d::{e, f}}`: the first segment of each top-level item.
            let (mut depth, mut item_start) = (0, true);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        named.insert(ident(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            named.insert(ident(rest));
        }
    }
    named
}

/// The crate's module graph: each top-level module and the others it names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(src).expect("under src");
        let top = relative.components().next().map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string()).unwrap_or_default();
        let name = file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if matches!(top.as_str(), "lib" | "main") || name == "tests.rs" || name.ends_with("_tests.rs") || relative.components().any(|c| c.as_os_str() == "tests") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable");
        let mut named = named_modules(&counted_code(&text));
        named.remove(&top);
        graph.entry(top).or_default().extend(named);
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    graph.values_mut().for_each(|named| named.retain(|m| modules.contains(m)));
    graph
}

/// A cycle through `start`, if there is one (depth-first, in name order).
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut path = vec![start.to_string()];
    let mut seen = BTreeSet::new();
    fn walk(graph: &BTreeMap<String, BTreeSet<String>>, start: &str, path: &mut Vec<String>, seen: &mut BTreeSet<String>) -> bool {
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
        let graph = module_graph(&src);
        if let Some(cycle) = graph.keys().find_map(|m| cycle_through(&graph, m)) {
            cycles.push(format!("{}: {}", entry.file_name().to_string_lossy(), cycle.join(" -> ")));
        }
    }
    assert!(crates_seen >= 8, "found only {crates_seen} crates");
    assert!(cycles.is_empty(), "import cycles between modules:\n{}", cycles.join("\n"));
}

#[test]
fn the_checker_sees_a_cycle_and_grouped_imports() {
    assert_eq!(named_modules("use crate::{a, b::c, d::{e, f}};\nlet x = crate::g::h();"), ["a", "b", "d", "g"].map(String::from).into());
    assert_eq!(counted_code("// crate::a\nuse crate::b;\n#[cfg(test)]\nmod tests { use crate::c; }"), "use crate::b;");
    let graph: BTreeMap<String, BTreeSet<String>> =
        [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec!["a"])].into_iter().map(|(m, n)| (m.to_string(), n.into_iter().map(String::from).collect())).collect();
    assert_eq!(cycle_through(&graph, "a"), Some(["a", "b", "c", "a"].map(String::from).to_vec()));
    assert_eq!(cycle_through(&graph, "d"), None);
}
