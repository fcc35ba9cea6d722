//! The README and the guide in `docs/` (issue 27, item 6): every relative link and anchor resolves,
//! and the README stays a front door — at most 250 lines, "Two commands" its first section.
//!
//! Links are markdown's `[text](target)` and `![alt](target)` outside fenced code blocks and code
//! spans; `http:`, `https:` and `mailto:` targets are not followed. A file target is resolved
//! against the linking file's folder and must exist; an anchor (`#frag`, alone or after a `.md`
//! file) must be the slug of a heading of that file under GitHub's rules. Plain std, no
//! dependencies.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// The markdown files checked: the README and every `.md` under `docs/`, sorted.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut files);
    files.sort();
    files
}

/// Whether a line opens or closes a fenced code block: up to three spaces (more inside list items
/// in practice, so any indentation is accepted), then three or more backticks or tildes. Returns
/// the fence's character and length.
fn fence(line: &str) -> Option<(char, usize)> {
    let trimmed = line.trim_start();
    let c = trimmed.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = trimmed.chars().take_while(|&x| x == c).count();
    (n >= 3).then_some((c, n))
}

/// The text with fenced code blocks blanked (each of their lines emptied, so line numbers stay).
fn without_fences(text: &str) -> Vec<String> {
    let mut open: Option<(char, usize)> = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        match (open, fence(line)) {
            (None, Some(f)) => {
                open = Some(f);
                lines.push(String::new());
            }
            (Some((c, n)), Some((c2, n2)))
                if c == c2 && n2 >= n && line.trim().chars().all(|x| x == c) =>
            {
                open = None;
                lines.push(String::new());
            }
            (Some(_), _) => lines.push(String::new()),
            (None, None) => lines.push(line.to_string()),
        }
    }
    lines
}

/// The text with code spans blanked: a run of N backticks up to the next run of exactly N
/// (possibly on a later line) becomes spaces, newlines kept. An unmatched run stays as it is.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|&&c| c == '`').count();
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|&&c| c == '`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                for c in &mut out[i..j + n] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = j + n;
            }
            None => i += n,
        }
    }
    out.into_iter().collect()
}

/// GitHub's anchor for a heading's text: markdown links reduced to their text, lowercased, every
/// character but letters, digits, `_`, `-` and spaces removed, spaces turned into hyphens.
fn slug(heading: &str) -> String {
    // `[text](target)` → `text` (GitHub slugs the rendered text).
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        match after.find("](").and_then(|close| {
            after[close + 2..]
                .find(')')
                .map(|end| (close, close + 2 + end))
        }) {
            Some((close, end)) => {
                text.push_str(&rest[..open]);
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            None => {
                text.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_' || *c == '-' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's ATX headings (`#` to `######`, outside fenced code), with
/// GitHub's numbering of duplicates: the second `x` is `x-1`, the third `x-2`.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for line in without_fences(text) {
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || line.len() - trimmed.len() > 3 {
            continue;
        }
        let rest = &trimmed[hashes..];
        if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
            continue;
        }
        // A closing sequence of #s is not part of the heading.
        let content = rest.trim().trim_end_matches('#').trim_end();
        let base = slug(content);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// A link found in a markdown file: its 1-based line and its target as written.
#[derive(Debug, PartialEq)]
struct Link {
    line: usize,
    target: String,
}

/// Every `[text](target)` and `![alt](target)` outside fenced code and code spans. The link text
/// may hold nested brackets and span lines (not a blank one); the target ends at the matching
/// `)`, and a title after a space (`(path "title")`) or angle brackets (`(<path>)`) are dropped.
fn links(text: &str) -> Vec<Link> {
    let prose = without_code_spans(&without_fences(text).join("\n"));
    let chars: Vec<char> = prose.chars().collect();
    let line_of = |at: usize| 1 + chars[..at].iter().filter(|&&c| c == '\n').count();
    let mut out = Vec::new();
    for start in 0..chars.len() {
        if chars[start] != '[' || (start > 0 && chars[start - 1] == '\\') {
            continue;
        }
        // The matching `]`, within the paragraph.
        let mut depth = 0usize;
        let mut close = None;
        let mut i = start;
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 1,
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                '\n' if chars.get(i + 1) == Some(&'\n') => break,
                _ => {}
            }
            i += 1;
        }
        let Some(close) = close else { continue };
        if chars.get(close + 1) != Some(&'(') {
            continue;
        }
        let mut depth = 0usize;
        let mut end = None;
        for (j, &c) in chars.iter().enumerate().skip(close + 1) {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(j);
                        break;
                    }
                }
                '\n' => break,
                _ => {}
            }
        }
        let Some(end) = end else { continue };
        let raw: String = chars[close + 2..end].iter().collect();
        let raw = raw.trim();
        let target = if let Some(inner) = raw.strip_prefix('<') {
            inner.split('>').next().unwrap_or("").to_string()
        } else {
            raw.split_whitespace().next().unwrap_or("").to_string()
        };
        out.push(Link {
            line: line_of(start),
            target,
        });
    }
    out
}

/// `%XX` escapes decoded (a target or anchor may be percent-encoded).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = if bytes[i] == b'%' {
            s.get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        } else {
            None
        };
        if let Some(b) = escaped {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why a link from `file` does not resolve, or `None` when it does.
fn broken(file: &Path, target: &str, cache: &mut HashMap<PathBuf, Vec<String>>) -> Option<String> {
    let lower = target.to_ascii_lowercase();
    if lower.starts_with("http:") || lower.starts_with("https:") || lower.starts_with("mailto:") {
        return None;
    }
    if target.is_empty() {
        return Some("empty target".into());
    }
    if lower.contains("://") {
        return Some("a URL scheme other than http(s) or mailto".into());
    }
    let (path_part, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let path_part = path_part.split('?').next().unwrap_or("");
    let resolved = if path_part.is_empty() {
        file.to_path_buf()
    } else if path_part.starts_with('/') {
        return Some(
            "an absolute path (GitHub resolves it against the site, not the repository)".into(),
        );
    } else {
        file.parent()
            .expect("a file's folder")
            .join(percent_decode(path_part))
    };
    if !resolved.exists() {
        return Some(format!("no such file: {}", resolved.display()));
    }
    let fragment = fragment?;
    let is_markdown = resolved.extension().is_some_and(|e| e == "md");
    if !is_markdown {
        // Anchors into other files (`main.rs#L10`) are not checked.
        return None;
    }
    let anchors = cache
        .entry(resolved.canonicalize().unwrap_or(resolved.clone()))
        .or_insert_with(|| anchors(&std::fs::read_to_string(&resolved).unwrap_or_default()));
    let fragment = percent_decode(fragment);
    if anchors.contains(&fragment) {
        None
    } else {
        Some(format!(
            "no heading with the anchor #{fragment} in {}",
            resolved.display()
        ))
    }
}

#[test]
fn every_relative_link_and_anchor_in_the_readme_and_the_guide_resolves() {
    let root = repo_root();
    let files = markdown_files(&root);
    assert!(files.len() > 1, "docs/ holds the guide: {files:?}");
    let mut cache = HashMap::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for link in links(&text) {
            checked += 1;
            if let Some(why) = broken(file, &link.target, &mut cache) {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                failures.push(format!(
                    "{}:{} → {} ({why})",
                    shown.display(),
                    link.line,
                    link.target
                ));
            }
        }
    }
    for failure in &failures {
        eprintln!("broken link: {failure}");
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} links do not resolve:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        checked > 20,
        "only {checked} links found: is the parser still finding them?"
    );
}

#[test]
fn the_readme_is_a_front_door() {
    let text = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let lines = text.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; at most 250 (move the rest to a chapter of docs/)"
    );
    let first = without_fences(&text)
        .into_iter()
        .find(|l| l.starts_with("## "));
    assert_eq!(
        first.as_deref(),
        Some("## Two commands"),
        "the README's first section must be \"Two commands\""
    );
}

#[test]
fn slugs_follow_githubs_rules() {
    assert_eq!(slug("Two commands"), "two-commands");
    assert_eq!(
        slug("Production mode: `arbiter serve`"),
        "production-mode-arbiter-serve"
    );
    assert_eq!(
        slug("External policies (a learned scheduler outside Rust)"),
        "external-policies-a-learned-scheduler-outside-rust"
    );
    assert_eq!(
        slug("Where jobs' programs live"),
        "where-jobs-programs-live"
    );
    assert_eq!(
        slug("Gavel's programs and Figure 8 (`--suite gavel`)"),
        "gavels-programs-and-figure-8---suite-gavel"
    );
    assert_eq!(
        slug("Muri (SIGCOMM'22) reference simulator — implementation spec for `dlas-gpu`, Muri-S"),
        "muri-sigcomm22-reference-simulator--implementation-spec-for-dlas-gpu-muri-s"
    );
    assert_eq!(
        slug("1.3 Placement `yarn` (`switch.py:47-181,203-220`)"),
        "13-placement-yarn-switchpy47-181203-220"
    );
    assert_eq!(
        slug("Elastic jobs on Pollux's workloads: Tiresias, Optimus+Oracle, AFS-L"),
        "elastic-jobs-on-polluxs-workloads-tiresias-optimusoracle-afs-l"
    );
    assert_eq!(
        slug("`policy.muri_autopack` and [a link](x.md)"),
        "policymuri_autopack-and-a-link"
    );
    assert_eq!(
        anchors("# A\n## A\n```\n# not a heading\n```\n### A\n#nope\n"),
        ["a", "a-1", "a-2"]
    );
}

#[test]
fn links_are_found_outside_code_only() {
    let text = "see [one](a.md#x) and ![img](img/p.png \"title\")\n\
                `[not](code.md)` and ``[nor](this.md)``\n\
                ```\n[fenced](f.md)\n```\n\
                [two\nlines](<b c.md>) in [0, 1) and [3] (no)\n\
                [outer ![inner](i.png)](o.md)\n";
    let found = links(text);
    let found: Vec<(usize, &str)> = found.iter().map(|l| (l.line, l.target.as_str())).collect();
    assert_eq!(
        found,
        [
            (1, "a.md#x"),
            (1, "img/p.png"),
            (6, "b c.md"),
            (8, "o.md"),
            (8, "i.png")
        ]
    );
    assert_eq!(percent_decode("b%20c.md"), "b c.md");
}
