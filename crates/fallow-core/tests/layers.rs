//! The import graph of each crate's top-level modules has no cycle.
//!
//! A module that imports another sits above it; a cycle means two modules
//! can only be read (and changed) together. This test reads every file
//! under a crate's `src/` (not `src/bin/`), finds the paths that leave its
//! top-level module (`crate::x::…`, `use crate::{x, y::z}`, `super::…`
//! climbing to the root, root items re-exported by `lib.rs`), builds the
//! graph of top-level modules and asserts it is acyclic, printing the
//! order bottom-up (`cargo test -p fallow-core --test layers -- --nocapture`).
//!
//! Comments, string and char literals and `#[cfg(test)]` items are left
//! out: a doc link or a test that drives a higher layer is no dependency.
//! Items defined in the crate root itself (`lib.rs` declares every module)
//! are not a node; keep the root to declarations and re-exports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Replace comments and the contents of string and char literals by
/// spaces, keeping newlines (so offsets keep their line numbers).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            // block comments nest in Rust
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if !prev_ident && (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r'))) && {
            let mut j = i + if c[i] == 'b' { 2 } else { 1 };
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            c.get(j) == Some(&'"')
        } {
            // raw string r#"…"#: ends at a quote followed by as many hashes
            let mut j = i + if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while c[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            while j < c.len() {
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            while i < j.min(c.len()) {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '\'' {
            // a char literal ('x', '\n', '\u{7f}') or a lifetime ('a)
            let end = if c.get(i + 1) == Some(&'\\') {
                (i + 2..c.len()).find(|&j| c[j] == '\'').map(|j| j + 1)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    while i < end {
                        blank(&mut out, c[i]);
                        i += 1;
                    }
                }
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// Index just past the item that starts at `from`: its matching `}` when
/// it has a body before its first `;`, else the `;`.
fn item_end(s: &[char], from: usize) -> usize {
    let mut i = from;
    while i < s.len() && s[i] != '{' && s[i] != ';' {
        i += 1;
    }
    if i >= s.len() || s[i] == ';' {
        return (i + 1).min(s.len());
    }
    let mut depth = 0usize;
    while i < s.len() {
        match s[i] {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// Blank every `#[cfg(test)]` item of stripped code; returns the code and
/// the names of the test-only file modules it declares (`mod testing;`).
fn drop_test_items(stripped: &str) -> (String, Vec<String>) {
    let mut s: Vec<char> = stripped.chars().collect();
    let mut test_mods = Vec::new();
    let pat: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + pat.len() <= s.len() {
        if s[i..i + pat.len()] != pat[..] {
            i += 1;
            continue;
        }
        let mut j = i + pat.len();
        // skip whitespace and further attributes
        loop {
            while j < s.len() && s[j].is_whitespace() {
                j += 1;
            }
            if s.get(j) == Some(&'#') {
                j = (j..s.len())
                    .find(|&k| s[k] == ']')
                    .map_or(s.len(), |k| k + 1);
            } else {
                break;
            }
        }
        let end = item_end(&s, j);
        let item: String = s[j..end].iter().collect();
        let words: Vec<&str> = item
            .split(|ch: char| !is_ident(ch))
            .filter(|w| !w.is_empty())
            .collect();
        if item.trim_end().ends_with(';') {
            if let Some(p) = words.iter().position(|w| *w == "mod") {
                if let Some(name) = words.get(p + 1) {
                    test_mods.push((*name).to_string());
                }
            }
        }
        for ch in &mut s[i..end] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
        i = end;
    }
    (s.into_iter().collect(), test_mods)
}

/// First path segment of every element of a `{a::b, c, d::{e, f}}` group
/// starting at `s[i] == '{'`.
fn group_heads(s: &[char], i: usize) -> Vec<(String, usize)> {
    let end = item_end(s, i);
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect = true;
    let mut k = i;
    while k < end {
        match s[k] {
            '{' => {
                depth += 1;
                if depth == 1 {
                    expect = true;
                }
            }
            '}' => depth -= 1,
            ',' if depth == 1 => expect = true,
            ch if expect && depth == 1 && is_ident(ch) => {
                let w: String = s[k..].iter().take_while(|c| is_ident(**c)).collect();
                k += w.len();
                heads.push((w, k));
                expect = false;
                continue;
            }
            ch if !ch.is_whitespace() && depth == 1 => expect = false,
            _ => {}
        }
        k += 1;
    }
    heads
}

/// One source file: its path under `src/` and its text.
type Source = (PathBuf, String);

/// The top-level modules the root declares, and root re-exports by name.
struct Root {
    modules: BTreeSet<String>,
    reexports: BTreeMap<String, String>,
}

fn read_root(text: &str) -> Root {
    let (code, _) = drop_test_items(&strip(text));
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    for stmt in code.split(';') {
        let words: Vec<&str> = stmt
            .split(|ch: char| !is_ident(ch))
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(p) = words.iter().position(|w| *w == "mod") {
            if !stmt.contains('{') {
                if let Some(m) = words.get(p + 1) {
                    modules.insert((*m).to_string());
                }
            }
        }
    }
    for stmt in code.split(';') {
        let t = stmt.trim();
        let Some(rest) = t
            .strip_prefix("pub use ")
            .or_else(|| t.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let rest = rest
            .trim()
            .trim_start_matches("crate::")
            .trim_start_matches("self::");
        let head: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if !modules.contains(&head) {
            continue;
        }
        let tail = &rest[head.len()..];
        if let Some(alias) = tail.trim().strip_prefix("as ") {
            // `pub use service as device;`
            reexports.insert(alias.trim().to_string(), head.clone());
            continue;
        }
        // every name the statement brings in: the last segment (or alias) of each leaf
        let names = tail.replace(['{', '}'], ",");
        for leaf in names.split(',') {
            let leaf = leaf.trim();
            let name = match leaf.split_once(" as ") {
                Some((_, a)) => a.trim(),
                None => leaf.rsplit("::").next().unwrap_or("").trim(),
            };
            if !name.is_empty() && name != "*" && name != "self" {
                reexports.insert(name.to_string(), head.clone());
            }
        }
    }
    Root { modules, reexports }
}

/// Module path of a file under `src/` (`policy/mod.rs` → `[policy]`).
fn module_path(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

/// An edge `from → to` and where it was first seen (`file:line`).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn build_graph(root_file: &str, sources: &[Source]) -> Graph {
    let root_text = sources
        .iter()
        .find(|(p, _)| p == Path::new(root_file))
        .map(|(_, t)| t.as_str())
        .unwrap_or_else(|| panic!("no {root_file} among the sources"));
    let root = read_root(root_text);
    let resolve = |name: &str| -> Option<String> {
        if root.modules.contains(name) {
            Some(name.to_string())
        } else {
            root.reexports.get(name).cloned()
        }
    };
    let mut graph: Graph = root
        .modules
        .iter()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    let mut prepared = Vec::new();
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for (path, text) in sources {
        let (code, test_mods) = drop_test_items(&strip(text));
        let mut here = module_path(path);
        if path.as_path() == Path::new(root_file) {
            here.clear();
        }
        for m in test_mods {
            let mut p = here.clone();
            p.push(m);
            test_only.insert(p);
        }
        prepared.push((path, here, code));
    }
    for (path, here, code) in prepared {
        if here.is_empty() || test_only.iter().any(|t| here.starts_with(t)) {
            continue;
        }
        let from = &here[0];
        let s: Vec<char> = code.chars().collect();
        let line_of = |k: usize| s[..k].iter().filter(|c| **c == '\n').count() + 1;
        let mut add = |to: String, k: usize| {
            if &to != from {
                graph
                    .get_mut(from)
                    .expect("a file outside the root's modules")
                    .entry(to)
                    .or_insert_with(|| format!("{}:{}", path.display(), line_of(k)));
            }
        };
        let mut k = 0;
        while k < s.len() {
            let starts = k == 0 || !(is_ident(s[k - 1]) || s[k - 1] == ':');
            let word = |w: &str| s[k..].iter().take(w.len()).copied().eq(w.chars());
            let (depth_left, mut j) = if starts && word("crate::") {
                (Some(0), k + "crate::".len())
            } else if starts && word("super::") {
                // climb: each `super::` leaves one module
                let mut up = 0;
                let mut j = k;
                while s[j..].iter().take(7).copied().eq("super::".chars()) {
                    up += 1;
                    j += 7;
                }
                (here.len().checked_sub(up), j)
            } else {
                k += 1;
                continue;
            };
            // only a path that reaches the root leaves the top-level module
            // (one that climbs past the root is the compiler's to refuse)
            if depth_left == Some(0) {
                while j < s.len() && s[j].is_whitespace() {
                    j += 1;
                }
                if s.get(j) == Some(&'{') {
                    for (head, _) in group_heads(&s, j) {
                        if let Some(to) = resolve(&head) {
                            add(to, k);
                        }
                    }
                } else {
                    let head: String = s[j..].iter().take_while(|c| is_ident(**c)).collect();
                    if let Some(to) = resolve(&head) {
                        add(to, k);
                    }
                }
            }
            k = j.max(k + 1);
        }
    }
    graph
}

/// The modules bottom-up (each after everything it imports), or a cycle
/// as `a → b (at file:line) → … → a`.
fn layer_order(graph: &Graph) -> Result<Vec<String>, String> {
    let mut done: Vec<String> = Vec::new();
    let mut left: BTreeSet<&String> = graph.keys().collect();
    while !left.is_empty() {
        let ready: Vec<&String> = left
            .iter()
            .copied()
            .filter(|m| graph[*m].keys().all(|d| !left.contains(d)))
            .collect();
        if ready.is_empty() {
            return Err(describe_cycles(graph, &left));
        }
        for m in ready {
            left.remove(m);
            done.push(m.clone());
        }
    }
    Ok(done)
}

/// Every strongly connected group of modules among `left` (each module
/// reaches every other), with the edges inside it and where they are.
fn describe_cycles(graph: &Graph, left: &BTreeSet<&String>) -> String {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for d in graph[&m].keys() {
                if left.contains(d) && seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        left.iter().map(|m| (*m, reach(m))).collect();
    let mut msg = String::new();
    let mut placed = BTreeSet::new();
    for m in left {
        if placed.contains(*m) || !reaches[m].contains(*m) {
            continue;
        }
        let group: Vec<&String> = left
            .iter()
            .copied()
            .filter(|o| reaches[m].contains(*o) && reaches[*o].contains(*m))
            .collect();
        msg += &format!(
            "cycle among {{{}}}:\n",
            group
                .iter()
                .map(|g| g.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for a in &group {
            placed.insert((*a).clone());
            for (b, at) in &graph[*a] {
                if group.contains(&b) {
                    msg += &format!("  {a} → {b} (at {at})\n");
                }
            }
        }
    }
    msg
}

fn read_sources(dir: &Path, under: &Path, out: &mut Vec<Source>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let rel = under.join(p.file_name().unwrap());
        if p.is_dir() {
            if rel != Path::new("bin") {
                read_sources(&p, &rel, out);
            }
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

/// Check one crate: no cycle, except among the edges of `known` (cycles
/// present when this test was written, in code other work is reshaping):
/// a cycle that needs any other edge fails, and a known edge no longer in
/// a cycle is reported so its line can go.
fn check_crate(name: &str, known: &[(&str, &str)]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src");
    let mut sources = Vec::new();
    read_sources(&src, Path::new(""), &mut sources);
    let mut graph = build_graph("lib.rs", &sources);
    // set the known edges aside, order what is left, then put them back
    let mut aside = Vec::new();
    for (a, b) in known {
        let edges = graph
            .get_mut(*a)
            .unwrap_or_else(|| panic!("{name}: no module `{a}`"));
        match edges.remove(*b) {
            Some(at) => aside.push((a.to_string(), b.to_string(), at)),
            None => println!("{name}: `{a} → {b}` is gone: remove it from the known cycles"),
        }
    }
    let order = layer_order(&graph)
        .unwrap_or_else(|cycle| panic!("{name}: the module graph has a cycle:\n{cycle}"));
    for (a, b, at) in aside {
        graph.get_mut(&a).unwrap().insert(b, at);
    }
    if let Err(cycles) = layer_order(&graph) {
        println!("{name}: known cycles (to be removed):\n{cycles}");
    }
    println!("{name} layers, bottom-up:");
    for m in order {
        let deps: Vec<&str> = graph[&m].keys().map(String::as_str).collect();
        println!("  {m:<16} ← {}", deps.join(", "));
    }
}

#[test]
fn fallow_core_modules_form_layers() {
    check_crate("fallow-core", &[]);
}

/// `report/` renders plain data; the shared flags are `args/`, the prepared
/// input `prepare`, the scrub flags `args/scrub.rs` (both scrubs' modules
/// sit above them).
#[test]
fn fallow_cli_modules_form_layers() {
    check_crate("fallow-cli", &[]);
}

/// Settings and progress sit below the sessions (`native`, `scrub`, `run`):
/// the values the settings hold are `run_kinds`, `scrub_order`,
/// `scrub_pace` and `scrub_verify`, and each session converts its own
/// report into a `Progress`.
#[test]
fn fallow_live_modules_form_layers() {
    check_crate("fallow-live", &[]);
}

fn planted(files: &[(&str, &str)]) -> Graph {
    let sources: Vec<Source> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    build_graph("lib.rs", &sources)
}

#[test]
fn a_planted_cycle_is_found_with_its_lines() {
    let g = planted(&[
        (
            "lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub use c::Thing;\n",
        ),
        ("a.rs", "use crate::b::X;\n"),
        ("b/mod.rs", "mod inner;\n"),
        ("b/inner.rs", "fn f() {\n    super::super::c::g();\n}\n"),
        ("c.rs", "pub struct Thing;\nfn h() -> crate::{d, a::Y} {}\n"),
    ]);
    let err = layer_order(&g).unwrap_err();
    assert!(err.contains("a → b (at a.rs:1)"), "{err}");
    assert!(err.contains("b → c (at b/inner.rs:2)"), "{err}");
    assert!(err.contains("c → a (at c.rs:2)"), "{err}");
}

#[test]
fn comments_strings_tests_and_own_paths_are_no_edges() {
    let g = planted(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub use b::Thing;\n"),
        (
            "a.rs",
            "use crate::Thing;\npub fn x() { super::b::y() }\n",
        ),
        (
            "b.rs",
            concat!(
                "//! [`crate::a::x`]\n",
                "/* crate::a /* nested */ crate::a */\n",
                "use super::b::Local;\n",
                "const S: &str = \"crate::a::x\";\n",
                "const R: &str = r#\"crate::a \"quoted\" \"#;\n",
                "const C: char = '\"'; fn l<'a>(x: &'a str) {}\n",
                "#[cfg(test)]\nmod tests { use crate::a::x; fn t() { let _ = \"}\"; crate::a::x(); } }\n",
                "#[cfg(test)]\nmod testing;\n",
            ),
        ),
        ("b/testing.rs", "use crate::a::x;\n"),
    ]);
    assert_eq!(layer_order(&g), Ok(vec!["b".to_string(), "a".to_string()]));
    // `crate::Thing` resolves through the root's re-export
    assert_eq!(g["a"].keys().collect::<Vec<_>>(), ["b"]);
}
