//! Every command fallow advertises exists: the `fallow`
//! lines of the README, of `fallow --help`'s and each subcommand's
//! examples, and of the manual page name a subcommand that `fallow SUB
//! --help` accepts, and every `--flag` they use is one that subcommand's
//! help lists. (`fallow man --dir` was advertised in all three and
//! refused.) The list of flags comes from clap's own help text, not from
//! the code under test's definitions.

use crate::common;

use common::{fallow, stdout};
use std::collections::HashMap;

/// The `fallow …` command lines in `text`: lines (after `$ ` or leading
/// spaces) that start with `fallow `, with `\` continuations joined.
fn command_lines(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut pending: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(p) = pending.as_mut() {
            p.push(' ');
            p.push_str(t.trim_end_matches('\\').trim_end());
            if !t.ends_with('\\') {
                out.push(pending.take().unwrap());
            }
            continue;
        }
        let t = t.strip_prefix("$ ").unwrap_or(t);
        // roff escapes a hyphen as `\-`
        let t = t.replace("\\-", "-");
        if t.starts_with("fallow ") {
            if t.ends_with('\\') {
                pending = Some(t.trim_end_matches('\\').trim_end().to_string());
            } else {
                out.push(t);
            }
        }
    }
    out
}

/// The subcommand path of `line` (`["peer", "serve"]`) and its long flags,
/// up to a comment, pipe, redirection or `--` (the command run by `fallow
/// run -- CMD` has flags of its own).
fn parse(line: &str, nested: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut path = Vec::new();
    let mut flags = Vec::new();
    let mut words = line.split_whitespace().skip(1);
    let mut positional = 0;
    while let Some(w) = words.next() {
        if w == "--"
            || w.starts_with('#')
            || w.starts_with('>')
            || w == "|"
            || w == "&&"
            || w == ";"
        {
            break;
        }
        if let Some(f) = w.strip_prefix("--") {
            let f = f.split('=').next().unwrap_or(f);
            if f == "color" {
                words.next(); // the global flag's value
            } else if !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                flags.push(format!("--{f}"));
            }
            continue;
        }
        let is_word = w.starts_with(|c: char| c.is_ascii_lowercase())
            && w.chars().all(|c| c.is_ascii_lowercase() || c == '-');
        positional += 1;
        match positional {
            // the first word after the global flags is the subcommand, or
            // the line is prose (`fallow - Put a storage …` in fallow(1))
            1 if is_word => path.push(w.to_string()),
            1 => return (Vec::new(), Vec::new()),
            2 if nested.contains(&path[0].as_str()) && is_word => path.push(w.to_string()),
            _ => {}
        }
    }
    (path, flags)
}

/// The lines of `text`'s fenced code blocks (prose that starts a line
/// with "fallow" is not a command).
fn fenced(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
        } else if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn every_advertised_command_and_flag_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let top_help = stdout(&fallow(&["--help"]));
    let man = stdout(&fallow(&["man"]));
    // subcommands with subcommands of their own, from the help itself
    let subs: Vec<String> = top_help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let nested: Vec<&str> = subs
        .iter()
        .map(String::as_str)
        .filter(|s| stdout(&fallow(&[s, "--help"])).contains("\nCommands:\n"))
        .collect();
    assert!(nested.contains(&"peer"), "{nested:?}");

    let mut sources: Vec<(String, String)> = vec![
        ("README.md".into(), fenced(&readme)),
        ("fallow --help".into(), top_help.clone()),
        ("fallow(1)".into(), man),
    ];
    for s in subs.iter().filter(|s| *s != "help") {
        sources.push((
            format!("fallow {s} --help"),
            stdout(&fallow(&[s, "--help"])),
        ));
    }
    let mut helps: HashMap<Vec<String>, Option<String>> = HashMap::new();
    let (mut checked, mut missing) = (0, Vec::new());
    for (source, text) in &sources {
        for line in command_lines(text) {
            let (path, flags) = parse(&line, &nested);
            if path.is_empty() {
                continue;
            }
            let help = helps.entry(path.clone()).or_insert_with(|| {
                let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
                args.push("--help");
                let o = fallow(&args);
                o.status.success().then(|| stdout(&o))
            });
            let Some(help) = help else {
                missing.push(format!(
                    "{source}: `fallow {}` does not exist: {line}",
                    path.join(" ")
                ));
                continue;
            };
            for f in flags {
                // `--flag` in the help's option list (`--flag <V>`, `--flag,`, `--flag`)
                let listed = help.lines().any(|l| {
                    l.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[')
                        .any(|w| w == f)
                });
                if !listed {
                    missing.push(format!(
                        "{source}: `fallow {}` has no {f}: {line}",
                        path.join(" ")
                    ));
                }
            }
            checked += 1;
        }
    }
    eprintln!(
        "{checked} advertised command lines checked in {} sources",
        sources.len()
    );
    assert!(checked >= 60, "only {checked} command lines found");
    assert!(
        missing.is_empty(),
        "advertised but refused:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_command_line_is_split_into_its_subcommand_and_flags() {
    let nested = ["peer", "spindown"];
    assert_eq!(
        parse(
            "fallow --color never peer serve --keys K --dir=/usr/bin # x --bogus",
            &nested
        ),
        (
            vec!["peer".into(), "serve".into()],
            vec!["--keys".into(), "--dir".into()]
        )
    );
    assert_eq!(
        parse("fallow run --device sda -- rsync --delete /a /b", &nested),
        (vec!["run".into()], vec!["--device".into()])
    );
    assert_eq!(
        parse("fallow analyze t.csv --json > out.json", &nested),
        (vec!["analyze".into()], vec!["--json".into()])
    );
    assert_eq!(
        command_lines("x\n  $ fallow a \\\n    --b c\nfallow \\-\\-x\n"),
        ["fallow a --b c", "fallow --x"]
    );
    assert_eq!(
        fenced("fallow is prose\n```sh\nfallow a\n```\nfallow b\n"),
        "fallow a\n"
    );
}

/// Every subcommand's `--help` (nested ones included) shows at
/// least one example, a `fallow …` line under an `Examples` heading.
#[test]
fn every_subcommands_help_has_an_example() {
    fn subs(args: &[&str]) -> Vec<String> {
        let mut a: Vec<&str> = args.to_vec();
        a.push("--help");
        stdout(&fallow(&a))
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter(|l| !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|w| w != "help")
            .collect()
    }
    let mut missing = Vec::new();
    let mut checked = 0;
    for top in subs(&[]) {
        let mut paths = vec![vec![top.clone()]];
        for nested in subs(&[&top]) {
            paths.push(vec![top.clone(), nested]);
        }
        for p in paths {
            let mut a: Vec<&str> = p.iter().map(String::as_str).collect();
            a.push("--help");
            let help = stdout(&fallow(&a));
            let examples = help
                .lines()
                .skip_while(|l| !l.starts_with("Example"))
                .any(|l| l.trim_start().starts_with("fallow ") || l.contains(" fallow "));
            if !examples {
                missing.push(p.join(" "));
            }
            checked += 1;
        }
    }
    assert!(checked >= 25, "{checked}");
    assert!(missing.is_empty(), "no example in the help of: {missing:?}");
}
