//! Who may import whom, for every crate of the workspace and every module
//! in it, checked against the rules in [`RULES`] and [`CRATES`].
//!
//! - Crates: each crate's `[dependencies]` name only the fallow crates
//!   [`CRATES`] allows it (the core imports none).
//! - Top-level modules: each crate's modules sit in the layers of its
//!   [`Rules`]; a module imports only modules of lower layers (never one of
//!   its own layer), so the CLI's subcommands, all in its top layer, never
//!   import each other. The CLI's top layer must be exactly the modules its
//!   `Command` enum dispatches to.
//! - Submodules: inside every module, the graph of its child modules (files
//!   and inline `mod x { … }`) has no cycle.
//!
//! docs/extending.md's layer table is [`layer_table`]'s text; the test
//! fails when they differ (`FALLOW_BLESS=1 cargo test -p fallow-core --test
//! layers` rewrites the docs from the rules).
//!
//! The test reads every file under a crate's `src/` (not `src/bin/`) and
//! resolves every path that starts with `crate::`, `$crate::` or `super::`
//! to the module it reaches, going through `use` re-exports and aliases
//! (`pub use service as device;`). An import from module `a::b::c` of
//! `a::x::y` is the edge `b → x` inside `a`; importing an ancestor or a
//! descendant is no edge.
//!
//! Comments, string and char literals and `#[cfg(test)]` items are left
//! out: a doc link or a test that drives a higher layer is no dependency.
//! Items defined in a module's own file are that module, not a node below it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's layers, bottom-up: each the modules in it and a few words
/// on what they are (the docs print both).
struct Rules {
    krate: &'static str,
    layers: &'static [(&'static [&'static str], &'static str)],
}

/// The fallow crates each crate's `[dependencies]` may name.
const CRATES: &[(&str, &[&str])] = &[
    ("fallow-core", &[]),
    ("fallow-record", &["fallow-core"]),
    ("fallow-emu", &["fallow-core"]),
    ("fallow-metrics", &["fallow-core"]),
    ("fallow-live", &["fallow-core"]),
    ("fallow-peer", &["fallow-core"]),
    ("fallow-report", &["fallow-core"]),
    (
        "fallow-cli",
        &[
            "fallow-core",
            "fallow-record",
            "fallow-emu",
            "fallow-metrics",
            "fallow-live",
            "fallow-peer",
            "fallow-report",
        ],
    ),
    (
        "fallow-py",
        &["fallow-core", "fallow-live", "fallow-report", "fallow-cli"],
    ),
];
/// Each crate's layers. Modules of one layer never import each other; the
/// CLI's top layer is its subcommands (one per `Command` variant).
const RULES: &[Rules] = &[
    Rules {
        krate: "fallow-core",
        layers: &[
            (
                &["error", "human", "stats"],
                "errors; numbers for people; statistics of plain numbers",
            ),
            (
                &["dist", "polled", "registry", "settings", "units"],
                "the config file and the one precedence of settings",
            ),
            (
                &["quantity", "scrubplan", "service", "trace"],
                "a size or duration as given; scrub plans; FG and BG service models; traces and their readers",
            ),
            (
                &["outpath", "period", "workload"],
                "idle periods; synthetic workloads",
            ),
            (
                &["characterize", "fleet", "policy"],
                "BG policies and their registry; every device of a file in one pass",
            ),
            (
                &["analyze", "sim"],
                "`fallow analyze` as a request and a report; the simulator",
            ),
            (
                &["energy", "tune"],
                "spin-down policies and their simulation; searches over policies",
            ),
        ],
    },
    Rules {
        krate: "fallow-record",
        layers: &[
            (&["error", "msr", "parse"], ""),
            (&["device", "tracefs"], ""),
        ],
    },
    Rules {
        krate: "fallow-emu",
        layers: &[
            (&["error", "issuers", "power"], ""),
            (&["fail"], ""),
            (&["stat"], ""),
            (&["server"], ""),
            (&["fs"], "the FUSE file system"),
        ],
    },
    Rules {
        krate: "fallow-metrics",
        layers: &[(&["exposition", "spindown"], "")],
    },
    Rules {
        krate: "fallow-live",
        layers: &[
            (
                &["clock", "error", "scrub_order", "scrub_verify", "service_fit"],
                "",
            ),
            (
                &["monitor", "run_kinds", "scrub_pace"],
                "the I/O monitor; values the settings hold",
            ),
            (
                &["budget"],
                "the FG budget held live: measured slowdown and its controller",
            ),
            (
                &["combine", "driver", "net", "settings"],
                "the policy driver; settings",
            ),
            (&["job_doc", "progress", "run"], ""),
            (&["scrub"], ""),
            (
                &["native", "spindown"],
                "sessions over the scrub and run machinery",
            ),
        ],
    },
    Rules {
        krate: "fallow-peer",
        layers: &[
            (&["error", "metrics", "sys"], ""),
            (&["cache", "disk", "manifest"], ""),
            (&["index", "proto", "seal"], ""),
            (&["keys", "peers"], ""),
            (&["membership", "transport"], ""),
            (&["client", "server"], ""),
            (&["bench", "node"], ""),
            (&["overlay", "settings"], ""),
            (&["fuse"], ""),
        ],
    },
    Rules {
        krate: "fallow-report",
        layers: &[
            (
                &["describe", "energy_text", "svg"],
                "an input and an energy run in words; the SVG plotting module",
            ),
            (
                &["decision", "page", "plots"],
                "what every page shares; the characterisation's plots",
            ),
            (
                &["analysis", "compare", "energy", "fleet", "pareto"],
                "the pages: one file each, never importing each other",
            ),
        ],
    },
    Rules {
        krate: "fallow-cli",
        layers: &[
            (
                &["atomic", "error", "human", "invocation", "metrics_export"],
                "",
            ),
            (&["args", "progress"], "the shared flag groups"),
            (&["input", "output", "reproduce"], ""),
            (
                &["prepare", "scrub_out", "table"],
                "the prepared input; text, JSON and table output",
            ),
            (
                &["analyze_fleet", "energy_table", "native_scrub", "retune"],
                "",
            ),
            (
                &[
                    "analyze",
                    "compare",
                    "completions",
                    "convert",
                    "demo",
                    "emulate_disk",
                    "energy",
                    "man",
                    "pareto",
                    "peer",
                    "policies",
                    "recommend",
                    "record",
                    "run",
                    "scrub",
                    "scrub_plan",
                    "simulate",
                    "spindown",
                    "tune",
                ],
                "subcommands: one file each, importing shared modules, never each other",
            ),
        ],
    },
    Rules {
        krate: "fallow-py",
        layers: &[
            (&["cli", "errors"], ""),
            (&["conversion", "json", "page"], "argument conversion; `html=`"),
            (&["trace"], ""),
            (&["energy", "scrubplan", "sim", "stats", "workload"], ""),
            (&["live", "tune"], ""),
        ],
    },
];

/// Import cycles present when this test was written, as the one edge of
/// each set aside (crate, parent module, from, to). The test fails when
/// one is gone, so its line goes; a new cycle fails it too.
const KNOWN_CYCLES: &[(&str, &str, &str, &str)] = &[
    ("fallow-core", "trace", "columnar", "arrow_ipc"),
    ("fallow-core", "trace", "columnar", "parquet"),
    ("fallow-live", "monitor", "own", "cgroup_bios"),
    ("fallow-peer", "", "server", "node"),
    ("fallow-report", "svg", "layers", "coincide"),
];

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

/// Blank every `#[cfg(test)]` and `#[cfg(doctest)]` item of stripped code; returns the code and
/// the names of the test-only file modules it declares (`mod testing;`).
fn drop_test_items(stripped: &str) -> (String, Vec<String>) {
    let (code, mut test_mods) = drop_items(stripped, "#[cfg(test)]");
    let (code, doc_mods) = drop_items(&code, "#[cfg(doctest)]");
    test_mods.extend(doc_mods);
    (code, test_mods)
}

/// Blank every item under the attribute `pat` (see [`drop_test_items`]).
fn drop_items(stripped: &str, pat: &str) -> (String, Vec<String>) {
    let mut s: Vec<char> = stripped.chars().collect();
    let mut test_mods = Vec::new();
    let pat: Vec<char> = pat.chars().collect();
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

fn skip_ws(s: &[char], mut i: usize) -> usize {
    while i < s.len() && s[i].is_whitespace() {
        i += 1;
    }
    i
}

fn ident_at(s: &[char], i: usize) -> String {
    s[i.min(s.len())..]
        .iter()
        .take_while(|c| is_ident(**c))
        .collect()
}

/// A path as written (`crate`, `super`, `self` kept) and the name it binds
/// in a `use` (its last segment or its alias).
type Leaf = (Vec<String>, Option<String>);

/// Parse the path tree that starts at `s[i]` (`a::b::{c, d::e as f, self}`)
/// into its leaves, each prefixed by `prefix`; returns the index after it.
fn parse_tree(s: &[char], i: usize, prefix: Vec<String>, out: &mut Vec<Leaf>) -> usize {
    let mut segs = prefix;
    let mut i = skip_ws(s, i);
    loop {
        if s.get(i) == Some(&'{') {
            i += 1;
            loop {
                i = skip_ws(s, i);
                if i >= s.len() {
                    return i;
                }
                if s[i] == '}' {
                    return i + 1;
                }
                let before = i;
                i = skip_ws(s, parse_tree(s, i, segs.clone(), out));
                match s.get(i) {
                    Some(',') => i += 1,
                    Some('}') => return i + 1,
                    _ if i == before => return i,
                    _ => return i,
                }
            }
        }
        if s.get(i) == Some(&'*') {
            let mut glob = segs;
            glob.push("*".to_string());
            out.push((glob, None));
            return i + 1;
        }
        // `$crate` in a macro body is the crate
        let dollar = usize::from(s.get(i) == Some(&'$'));
        let w = ident_at(s, i + dollar);
        if w.is_empty() {
            return i;
        }
        i += dollar + w.len();
        segs.push(if dollar == 1 { format!("${w}") } else { w });
        let j = skip_ws(s, i);
        if s.get(j) == Some(&':') && s.get(j + 1) == Some(&':') && s.get(j + 2) != Some(&'<') {
            i = skip_ws(s, j + 2);
            continue;
        }
        let mut binds = segs.last().cloned();
        if binds.as_deref() == Some("self") {
            segs.pop();
            binds = segs.last().cloned();
        }
        if ident_at(s, j) == "as" && s.get(j + 2).is_some_and(|c| c.is_whitespace()) {
            let k = skip_ws(s, j + 2);
            let alias = ident_at(s, k);
            i = k + alias.len();
            binds = Some(alias);
        }
        out.push((segs, binds));
        return i;
    }
}

/// One source file: its path under `src/` and its text.
type Source = (PathBuf, String);

/// A module's path below the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// An edge `from → to` between sibling modules and where it was first
/// seen (`file:line`).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// One prepared file: its path, module, code and inline modules.
struct File {
    path: PathBuf,
    module: ModPath,
    code: Vec<char>,
    /// Inline `mod name { … }`: start, end and name.
    inline: Vec<(usize, usize, String)>,
}

impl File {
    /// The module that code at `k` is in (the file's, or an inline one).
    fn scope_at(&self, k: usize) -> ModPath {
        let mut m = self.module.clone();
        for (a, b, name) in &self.inline {
            if *a <= k && k < *b {
                m.push(name.clone());
            }
        }
        m
    }

    fn line_of(&self, k: usize) -> usize {
        self.code[..k].iter().filter(|c| **c == '\n').count() + 1
    }
}

/// Word `w` at `s[k]`, not inside a longer identifier or path.
fn word_at(s: &[char], k: usize, w: &str) -> bool {
    let starts = k == 0 || !(is_ident(s[k - 1]) || s[k - 1] == ':' || s[k - 1] == '$');
    starts
        && s[k..].iter().take(w.len()).copied().eq(w.chars())
        && !s.get(k + w.len()).is_some_and(|c| is_ident(*c))
}

/// Every module of a crate and the names `use` brings into each.
struct Tree {
    modules: BTreeSet<ModPath>,
    /// Per module: name → (module the `use` is in, its path as written).
    aliases: BTreeMap<ModPath, BTreeMap<String, (ModPath, Vec<String>)>>,
}

impl Tree {
    /// The module a written path reaches, and whether the whole path is
    /// modules (so a longer path may go on from it). `None`: outside the
    /// crate (or a name this reading does not know).
    ///
    /// `via` gets each module a path goes through to a re-export
    /// (`crate::sim::BgService` imports `sim` as well as `service`).
    fn resolve(
        &self,
        scope: &[String],
        segs: &[String],
        depth: u32,
        via: &mut Vec<ModPath>,
    ) -> Option<(ModPath, bool)> {
        if depth > 16 {
            return None;
        }
        let (mut cur, mut rest): (ModPath, &[String]) = match segs.first()?.as_str() {
            "crate" | "$crate" => (Vec::new(), &segs[1..]),
            "self" => (scope.to_vec(), &segs[1..]),
            "super" => {
                let mut cur = scope.to_vec();
                let mut rest = segs;
                while rest.first().is_some_and(|s| s == "super") {
                    cur.pop()?;
                    rest = &rest[1..];
                }
                (cur, rest)
            }
            _ => (scope.to_vec(), segs),
        };
        let relative = rest.len() == segs.len();
        let mut first = true;
        while let Some(seg) = rest.first() {
            let mut child = cur.clone();
            child.push(seg.clone());
            if self.modules.contains(&child) {
                cur = child;
            } else if let Some((ascope, asegs)) = self.aliases.get(&cur).and_then(|m| m.get(seg)) {
                if asegs.as_slice() == [seg.clone()] && ascope == &cur {
                    return None; // `use seg;` of an outside crate
                }
                via.push(cur.clone());
                let (t, whole) = self.resolve(ascope, asegs, depth + 1, via)?;
                if !whole {
                    return Some((t, false));
                }
                cur = t;
            } else if first && relative {
                return None; // an outside crate, a prelude or local name
            } else {
                return Some((cur, false));
            }
            first = false;
            rest = &rest[1..];
        }
        Some((cur, true))
    }
}

/// The graphs of sibling modules of one crate, by parent module.
fn module_graphs(sources: &[Source]) -> BTreeMap<ModPath, Graph> {
    let mut files = Vec::new();
    let mut test_only: BTreeSet<ModPath> = BTreeSet::new();
    for (path, text) in sources {
        let (code, test_mods) = drop_test_items(&strip(text));
        let module = module_path(path);
        for m in test_mods {
            let mut p = module.clone();
            p.push(m);
            test_only.insert(p);
        }
        let code: Vec<char> = code.chars().collect();
        let mut inline = Vec::new();
        for k in 0..code.len() {
            if word_at(&code, k, "mod") {
                let n = skip_ws(&code, k + 3);
                let name = ident_at(&code, n);
                let b = skip_ws(&code, n + name.len());
                if !name.is_empty() && code.get(b) == Some(&'{') {
                    inline.push((b, item_end(&code, b), name));
                }
            }
        }
        files.push(File {
            path: path.clone(),
            module,
            code,
            inline,
        });
    }
    files.retain(|f| !test_only.iter().any(|t| f.module.starts_with(t)));
    let mut tree = Tree {
        modules: BTreeSet::new(),
        aliases: BTreeMap::new(),
    };
    for f in &files {
        for n in 0..=f.module.len() {
            tree.modules.insert(f.module[..n].to_vec());
        }
        for (a, _, _) in &f.inline {
            tree.modules.insert(f.scope_at(*a + 1));
        }
    }
    for f in &files {
        let s = &f.code;
        for k in 0..s.len() {
            if !word_at(s, k, "use") {
                continue;
            }
            let mut leaves = Vec::new();
            parse_tree(s, k + 3, Vec::new(), &mut leaves);
            let scope = f.scope_at(k);
            for (segs, binds) in leaves {
                if let Some(name) = binds.filter(|n| n != "_") {
                    tree.aliases
                        .entry(scope.clone())
                        .or_default()
                        .entry(name)
                        .or_insert((scope.clone(), segs));
                }
            }
        }
    }
    let mut graphs: BTreeMap<ModPath, Graph> = BTreeMap::new();
    for m in &tree.modules {
        if let Some((name, parent)) = m.split_last() {
            graphs
                .entry(parent.to_vec())
                .or_default()
                .entry(name.clone())
                .or_default();
        }
    }
    for f in &files {
        let s = &f.code;
        for k in 0..s.len() {
            let at_dollar = s[k] == '$'
                && s[k + 1..].iter().take(5).copied().eq("crate".chars())
                && !s.get(k + 6).is_some_and(|c| is_ident(*c));
            if !(at_dollar || word_at(s, k, "crate") || word_at(s, k, "super")) {
                continue;
            }
            let w = if at_dollar { 6 } else { ident_at(s, k).len() };
            let j = skip_ws(s, k + w);
            if !(s.get(j) == Some(&':') && s.get(j + 1) == Some(&':')) {
                continue;
            }
            let mut leaves = Vec::new();
            parse_tree(s, k, Vec::new(), &mut leaves);
            let from = f.scope_at(k);
            for (segs, _) in leaves {
                let mut reached = Vec::new();
                let Some((to, _)) = tree.resolve(&from, &segs, 0, &mut reached) else {
                    continue;
                };
                reached.push(to);
                for to in reached {
                    if to.starts_with(&from) || from.starts_with(&to) {
                        continue;
                    }
                    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                    graphs
                        .entry(from[..common].to_vec())
                        .or_default()
                        .entry(from[common].clone())
                        .or_default()
                        .entry(to[common].clone())
                        .or_insert_with(|| format!("{}:{}", f.path.display(), f.line_of(k)));
                }
            }
        }
    }
    graphs
}
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

/// Every source file of a crate's `src/` (not `src/bin/`).
fn crate_sources(name: &str) -> Vec<Source> {
    let src = workspace().join("crates").join(name).join("src");
    let mut sources = Vec::new();
    read_sources(&src, Path::new(""), &mut sources);
    sources
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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

/// What breaks the rules in one crate's graphs, one line each.
fn violations(rules: &Rules, graphs: &BTreeMap<ModPath, Graph>) -> Vec<String> {
    let mut bad = Vec::new();
    let name = rules.krate;
    let mut graphs = graphs.clone();
    for (c, parent, a, b) in KNOWN_CYCLES.iter().filter(|k| k.0 == name) {
        let parent: ModPath = parent
            .split("::")
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        let gone = graphs
            .get_mut(&parent)
            .and_then(|g| g.get_mut(*a))
            .and_then(|e| e.remove(*b))
            .is_none();
        if gone {
            bad.push(format!(
                "{c}: `{a} → {b}` is no longer imported: remove it from KNOWN_CYCLES"
            ));
        }
    }
    let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (mods, _)) in rules.layers.iter().enumerate() {
        for m in *mods {
            if layer_of.insert(m, i).is_some() {
                bad.push(format!("{name}: `{m}` is in two layers"));
            }
        }
    }
    let empty = Graph::new();
    let top = graphs.get(&Vec::new()).unwrap_or(&empty);
    for m in top.keys() {
        if !layer_of.contains_key(m.as_str()) {
            bad.push(format!(
                "{name}: module `{m}` has no layer: put it in `RULES` (the lowest layer above everything it imports)"
            ));
        }
    }
    for m in layer_of.keys() {
        if !top.contains_key(*m) {
            bad.push(format!("{name}: no module `{m}`: remove it from `RULES`"));
        }
    }
    for (a, deps) in top {
        let Some(&la) = layer_of.get(a.as_str()) else {
            continue;
        };
        for (b, at) in deps {
            let Some(&lb) = layer_of.get(b.as_str()) else {
                continue;
            };
            if lb >= la {
                bad.push(format!(
                    "{name}: `{a}` (layer {la}) imports `{b}` (layer {lb}) at {at}: a module imports only modules of lower layers"
                ));
            }
        }
    }
    for (parent, g) in &graphs {
        if parent.is_empty() {
            continue;
        }
        if let Err(cycle) = layer_order(g) {
            bad.push(format!(
                "{name}: the submodules of `{}` form a cycle:\n{cycle}",
                parent.join("::")
            ));
        }
    }
    bad
}

/// The fallow crates a crate's `Cargo.toml` names under `[dependencies]`.
fn fallow_dependencies(krate: &str) -> BTreeSet<String> {
    let path = workspace().join("crates").join(krate).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut inside = false;
    let mut deps = BTreeSet::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = t == "[dependencies]";
        } else if inside && t.starts_with("fallow-") {
            let key: String = t
                .chars()
                .take_while(|c| is_ident(*c) || *c == '-')
                .collect();
            deps.insert(key);
        }
    }
    deps
}

/// The modules the CLI's `Command` enum dispatches to (`Name(module::Args)`).
fn cli_subcommands() -> BTreeSet<String> {
    let text = std::fs::read_to_string(workspace().join("crates/fallow-cli/src/lib.rs")).unwrap();
    let code: Vec<char> = strip(&text).chars().collect();
    let start = (0..code.len())
        .find(|&k| {
            code[k..]
                .iter()
                .take(13)
                .copied()
                .eq("enum Command ".chars())
        })
        .expect("fallow-cli's lib.rs has `enum Command`");
    let end = item_end(&code, start);
    let mut mods = BTreeSet::new();
    for k in start..end {
        if code[k] == '(' {
            let j = skip_ws(&code, k + 1);
            let m = ident_at(&code, j);
            if !m.is_empty() && code[j + m.len()..].starts_with(&[':', ':']) {
                mods.insert(m);
            }
        }
    }
    mods
}

/// The text between docs/extending.md's layer-table markers.
fn layer_table() -> String {
    let mut t = String::from("```text\nCrates, and the fallow crates each may import:\n");
    for (c, deps) in CRATES {
        let deps = if deps.is_empty() {
            "nothing".to_string()
        } else {
            deps.join(", ")
        };
        t += &format!("  {c:<16} {deps}\n");
    }
    for r in RULES {
        t += &format!("\n{} modules by layer, bottom-up:\n", r.krate);
        for (i, (mods, what)) in r.layers.iter().enumerate() {
            let mods = mods.join(", ");
            if what.is_empty() {
                t += &format!("  {i:>2}  {mods}\n");
            } else {
                t += &format!("  {i:>2}  {mods}  ({what})\n");
            }
        }
    }
    t += "\nKnown cycles, each allowed by one edge (to be removed):\n";
    for (c, parent, a, b) in KNOWN_CYCLES {
        let inside = if parent.is_empty() {
            String::new()
        } else {
            format!("{parent}::")
        };
        t += &format!("  {c}: {inside}{a} → {inside}{b}\n");
    }
    t + "```\n"
}

const BEGIN: &str = "<!-- layers: generated from RULES in crates/fallow-core/tests/layers.rs -->\n";
const END: &str = "<!-- end of layers -->\n";

#[test]
fn crates_import_only_the_crates_the_rules_allow() {
    let mut dirs: Vec<String> = std::fs::read_dir(workspace().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut ruled: Vec<String> = CRATES.iter().map(|(c, _)| c.to_string()).collect();
    ruled.sort();
    assert_eq!(
        dirs, ruled,
        "every crate under crates/ has one line in CRATES"
    );
    let mut laid: Vec<String> = RULES.iter().map(|r| r.krate.to_string()).collect();
    laid.sort();
    assert_eq!(laid, ruled, "every crate has its layers in RULES");
    for (c, allowed) in CRATES {
        for dep in fallow_dependencies(c) {
            assert!(
                allowed.contains(&dep.as_str()),
                "{c} depends on {dep}, which CRATES does not allow it"
            );
        }
    }
}

#[test]
fn every_crate_keeps_its_layers() {
    let mut bad = Vec::new();
    for r in RULES {
        bad.extend(violations(r, &module_graphs(&crate_sources(r.krate))));
    }
    assert!(
        bad.is_empty(),
        "the import rules are broken:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_cli_top_layer_is_its_subcommands() {
    let cli = RULES.iter().find(|r| r.krate == "fallow-cli").unwrap();
    let top: BTreeSet<String> = cli
        .layers
        .last()
        .unwrap()
        .0
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert_eq!(
        cli_subcommands(),
        top,
        "the `Command` enum's modules are the CLI's top layer"
    );
}

#[test]
fn the_docs_layer_table_is_the_rules() {
    let path = workspace().join("docs/extending.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (Some(a), Some(b)) = (text.find(BEGIN), text.find(END)) else {
        panic!("docs/extending.md lacks the markers {BEGIN:?} and {END:?}");
    };
    let now = &text[a + BEGIN.len()..b];
    let want = layer_table();
    if now != want && std::env::var_os("FALLOW_BLESS").is_some() {
        let fresh = format!("{}{BEGIN}{want}{}", &text[..a], &text[b..]);
        std::fs::write(&path, fresh).unwrap();
        return;
    }
    assert_eq!(
        now, want,
        "docs/extending.md's layer table differs from RULES (FALLOW_BLESS=1 rewrites it)"
    );
}

fn planted(files: &[(&str, &str)]) -> BTreeMap<ModPath, Graph> {
    let sources: Vec<Source> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    module_graphs(&sources)
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
    let err = layer_order(&g[&Vec::new()]).unwrap_err();
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
    let top = &g[&Vec::new()];
    assert_eq!(layer_order(top), Ok(vec!["b".to_string(), "a".to_string()]));
    // `crate::Thing` resolves through the root's re-export
    assert_eq!(top["a"].keys().collect::<Vec<_>>(), ["b"]);
}

/// Submodules: a path through a parent's re-export and an alias reaches
/// the sibling that defines the item; the cycle between siblings is found
/// inside their parent, and no edge appears at the top.
#[test]
fn submodule_imports_resolve_through_re_exports() {
    let g = planted(&[
        ("lib.rs", "pub mod p;\npub mod q;\n"),
        (
            "p/mod.rs",
            "mod x;\nmod y;\npub use y::Why;\nuse self::x as ex;\n",
        ),
        ("p/x.rs", "use super::Why;\n"),
        (
            "p/y.rs",
            "fn f() { crate::p::ex::g(); }\nmod inner { use super::super::super::q::Q; }\n",
        ),
        ("q.rs", "pub struct Q;\n"),
    ]);
    let p = &g[&vec!["p".to_string()]];
    assert_eq!(p["x"].get("y").map(String::as_str), Some("p/x.rs:1"));
    assert_eq!(p["y"].get("x").map(String::as_str), Some("p/y.rs:1"));
    assert!(layer_order(p).is_err());
    // the inline module's `super::super::super` climbs from `p::y::inner`
    assert_eq!(g[&Vec::new()]["p"].keys().collect::<Vec<_>>(), ["q"]);
}

/// A subcommand importing another one (demo → analyze) breaks the rules,
/// naming both layers and the line; so does a module no layer holds.
#[test]
fn an_import_within_a_layer_is_refused() {
    let rules = Rules {
        krate: "planted",
        layers: &[(&["output"], ""), (&["analyze", "demo"], "subcommands")],
    };
    let g = planted(&[
        (
            "lib.rs",
            "mod analyze;\nmod demo;\nmod output;\nmod extra;\n",
        ),
        ("analyze.rs", "use crate::output::print;\n"),
        (
            "demo.rs",
            "use crate::output;\n\nuse crate::analyze::findings;\n",
        ),
        ("output.rs", ""),
        ("extra.rs", ""),
    ]);
    let bad = violations(&rules, &g);
    assert_eq!(
        bad,
        [
            "planted: module `extra` has no layer: put it in `RULES` (the lowest layer above everything it imports)",
            "planted: `demo` (layer 1) imports `analyze` (layer 1) at demo.rs:3: a module imports only modules of lower layers",
        ]
    );
}

/// Each place a default seed is written, as `file:line`: a `seed` field,
/// keyword or flag given the literal `1` in library code (tests may pick
/// their seeds) instead of `sim::DEFAULT_SEED`.
fn literal_seeds(file: &str, text: &str) -> Vec<String> {
    let (code, _) = drop_test_items(&strip(text));
    let flat: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut found = Vec::new();
    let line_of = |needle: &str| -> usize {
        code.lines()
            .position(|l| l.contains(needle))
            .map_or(0, |i| i + 1)
    };
    for pat in [
        "seed: 1,",
        "seed: 1 }",
        "seed=1,",
        "seed=1)",
        "seed: u64 = 1",
    ] {
        if flat.contains(pat) {
            found.push(format!("{file}:{} `{pat}`", line_of(pat)));
        }
    }
    if flat.contains("default_value_t = 1)] pub seed") {
        found.push(format!("{file}: `--seed` with `default_value_t = 1`"));
    }
    // a seed resolved from layers with `1` as the last resort
    for (i, l) in code.lines().enumerate() {
        if l.contains("seed") && l.contains("unwrap_or(1)") {
            found.push(format!("{file}:{} `unwrap_or(1)` for a seed", i + 1));
        }
    }
    found
}

/// One seed constant: no crate's library code, benchmark or binding
/// writes the default seed as `1`; `sim::DEFAULT_SEED` is its one value.
#[test]
fn the_default_seed_is_written_once() {
    let mut found = Vec::new();
    for (c, _) in CRATES {
        for dir in ["src", "benches"] {
            let root = workspace().join("crates").join(c).join(dir);
            if !root.is_dir() {
                continue;
            }
            let mut sources = Vec::new();
            read_sources(&root, Path::new(""), &mut sources);
            for (p, text) in &sources {
                found.extend(literal_seeds(&format!("{c}/{dir}/{}", p.display()), text));
            }
        }
    }
    assert!(
        found.is_empty(),
        "use sim::DEFAULT_SEED:\n{}",
        found.join("\n")
    );
    let sim = std::fs::read_to_string(workspace().join("crates/fallow-core/src/dist.rs")).unwrap();
    assert!(
        sim.contains("pub const DEFAULT_SEED: u64 = 1;"),
        "dist::DEFAULT_SEED (re-exported as sim::DEFAULT_SEED) is the one value"
    );
}

#[test]
fn a_literal_seed_is_found() {
    let planted = "pub struct A { seed: u64 }\nfn d() -> A {\n    A {\n        seed: 1,\n    }\n}\n#[derive(Args)]\nstruct F {\n    #[arg(long, default_value_t = 1)]\n    pub seed: u64,\n}\nfn r(a: Option<u64>) -> u64 {\n    let seed = a.unwrap_or(1);\n    seed\n}\n#[cfg(test)]\nmod tests { fn t() -> A { A { seed: 1, } } }\n";
    let found = literal_seeds("x.rs", planted);
    assert_eq!(
        found,
        [
            "x.rs:4 `seed: 1,`",
            "x.rs: `--seed` with `default_value_t = 1`",
            "x.rs:13 `unwrap_or(1)` for a seed"
        ]
    );
    assert!(literal_seeds("y.rs", "fn d() -> A { A { seed: DEFAULT_SEED } }").is_empty());
}
