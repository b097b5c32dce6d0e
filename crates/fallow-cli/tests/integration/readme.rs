//! Every `fallow` command the README shows runs as written:
//! the commands on the demo's trace after a (small) `fallow demo`, the
//! ones on the shared real traces when they are there, and the ones that
//! need root and a real device or name a placeholder input are listed as
//! skipped, each with its reason.
//!
//! The `--json` output of each command on the demo's trace is compared
//! with its golden file in `tests/golden/` (fields that vary from run to
//! run masked by name, see [`MASKED`]), so that a refactor that changes
//! what the CLI prints, or a figure the docs quote, is caught. After an
//! intended change, regenerate them:
//!
//! ```text
//! FALLOW_BLESS=1 cargo test -p fallow-cli --test integration readme::
//! ```

use crate::common;

use common::BIN;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// JSON fields whose values vary from run to run (a wall or CPU time, the
/// machine's thread count), masked before comparing with a golden file.
/// None of these commands prints one today (two runs compared equal field
/// for field); a command that starts to must name its field here.
const MASKED: [&str; 0] = [];

/// `tests/golden/` beside this file.
fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The command as it prints JSON to stdout: its comment, `--html FILE`
/// and `> FILE` removed, `--json` added when it is not there; `None` for
/// a command with no JSON output of its own (`convert` writes a file).
fn json_command(c: &str) -> Option<String> {
    let c = c.split(" #").next().unwrap_or(c);
    let c = c.split(" > ").next().unwrap_or(c);
    let words: Vec<&str> = c.split_whitespace().collect();
    if words.get(1) == Some(&"convert") {
        return None;
    }
    let mut out: Vec<&str> = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if *w == "--html" {
            it.next();
            continue;
        }
        out.push(w);
    }
    if !out.contains(&"--json") {
        out.push("--json");
    }
    Some(out.join(" "))
}

/// `v` with every field named in [`MASKED`] replaced by `"<masked>"` and
/// the run's temporary directory in strings by `<dir>`.
fn masked(v: Value, dir: &str) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let v = if MASKED.contains(&k.as_str()) {
                        Value::String("<masked>".into())
                    } else {
                        masked(v, dir)
                    };
                    (k, v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| masked(v, dir)).collect()),
        Value::String(s) => Value::String(s.replace(dir, "<dir>")),
        v => v,
    }
}

/// The JSON paths where `a` and `b` differ (at most `limit` of them).
fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>, limit: usize) {
    if out.len() >= limit {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let (p, q) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                differences(p, q, &format!("{at}.{k}"), out, limit);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, &format!("{at}[{i}]"), out, limit);
            }
        }
        _ if a != b => out.push(format!("{at}: golden {a}, now {b}")),
        _ => {}
    }
}

/// Compare `got` with `tests/golden/NAME.json`, or write it there with
/// `FALLOW_BLESS=1`; the mismatches found, as text. Floats compare bit
/// for bit: serde_json reads them back exactly (`float_roundtrip`, the
/// workspace's Cargo.toml), where its default parser left 1,283 of 13,909
/// golden floats 1 ulp off the binary's output and hid a change that
/// small.
fn check_golden(name: &str, got: &Value) -> Option<String> {
    let path = golden_dir().join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(got).expect("JSON") + "\n";
    if std::env::var_os("FALLOW_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("tests/golden");
        std::fs::write(&path, text).expect("a golden file");
        return None;
    }
    let Ok(want) = std::fs::read_to_string(&path) else {
        return Some(format!(
            "{}: no golden file (FALLOW_BLESS=1 writes it)",
            path.display()
        ));
    };
    let want: Value = serde_json::from_str(&want).expect("a golden file is JSON");
    let mut diffs = Vec::new();
    differences(&want, got, "", &mut diffs, 10);
    (!diffs.is_empty()).then(|| format!("{}:\n  {}", path.display(), diffs.join("\n  ")))
}

/// The README's commands: lines of fenced code blocks that start with
/// `fallow ` (or `$ fallow `), with `\` continuations joined.
fn readme_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut lang = String::new();
    let mut pending: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("```") {
            in_block = !in_block;
            lang = rest.trim().to_string();
            pending = None;
            continue;
        }
        if !in_block || lang == "python" {
            continue;
        }
        if let Some(p) = pending.as_mut() {
            p.push(' ');
            p.push_str(t.trim_end_matches('\\').trim());
            if !t.ends_with('\\') {
                out.push(pending.take().expect("pending"));
            }
            continue;
        }
        let cmd = t.strip_prefix("$ ").unwrap_or(t);
        if cmd.starts_with("fallow ") {
            if cmd.ends_with('\\') {
                pending = Some(cmd.trim_end_matches('\\').trim().to_string());
            } else {
                out.push(cmd.to_string());
            }
        }
    }
    out
}

/// The shared traces' directory, if it is there.
fn shared_dir() -> Option<PathBuf> {
    let dir = common::shared_traces_dir();
    dir.is_dir().then_some(dir)
}

/// Short trace names the README uses, and where they are in the shared traces.
const SHORT_NAMES: [(&str, &str); 2] = [
    ("ajw.1week.srt", "hp-hplajw-1992/ajw.1week.srt"),
    (
        "pgbench-ext4-loop.csv.gz",
        "pgbench-ext4-loop/pgbench-ext4-loop.csv.gz",
    ),
];

/// Subcommands that act on a live system: they need root and a device.
const LIVE: [&str; 7] = [
    "scrub",
    "run",
    "peer",
    "trim",
    "emulate-disk",
    "record",
    "spindown",
];

/// Subcommands whose first positional word is not a file: a shell, a
/// subcommand's name.
const NOT_A_FILE: [&str; 2] = ["completions", "man"];

/// The flags of `fallow [SUB]` that take a value (`-d, --device <ID>`,
/// `--verify-cmd [<auto|required>]`), read from its `--help`: the command
/// line's own definition says which word after a flag is its value.
fn value_flags(sub: Option<&str>) -> Vec<String> {
    let mut c = Command::new(BIN);
    c.args(sub).arg("--help").env("NO_COLOR", "1");
    let o = c.output().unwrap();
    assert!(o.status.success(), "fallow {sub:?} --help");
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let t = line.trim_start();
        let Some(at) = t.find(" <").or_else(|| t.find(" [<")) else {
            continue;
        };
        let names: Vec<&str> = t[..at].split(", ").collect();
        if names.iter().all(|n| n.starts_with('-') && !n.contains(' ')) {
            out.extend(names.iter().map(|n| n.to_string()));
        }
    }
    out
}

/// The positional words of `words` (a flag's value is not one; nothing
/// after a comment `#` or a redirection `>`).
fn positionals<'a>(words: &[&'a str], value_flags: &[String]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if *w == "#" || w.starts_with('>') || *w == "--" {
            break;
        }
        if w.starts_with('-') {
            if !w.contains('=') && value_flags.iter().any(|f| f == w) {
                it.next();
            }
            continue;
        }
        out.push(*w);
    }
    out
}

/// The subcommand of a README command (`fallow --color never analyze
/// disk.csv`: `analyze`, after the global flags) and its input, the first
/// positional word after it (`disk.csv`).
fn sub_and_input<'a>(words: &[&'a str]) -> (Option<&'a str>, Option<&'a str>) {
    let top = positionals(words.get(1..).unwrap_or(&[]), &value_flags(None));
    let Some(sub) = top.first().copied() else {
        return (None, None);
    };
    let at = words
        .iter()
        .position(|w| *w == sub)
        .expect("a word of the command");
    let rest = positionals(&words[at + 1..], &value_flags(Some(sub)));
    (Some(sub), rest.first().copied())
}

/// What to run for `cmd`, or why it is skipped.
fn prepare(cmd: &str, shared: Option<&Path>, dir: &Path) -> Result<String, String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let (sub, input) = sub_and_input(&words);
    let sub = sub.unwrap_or("");
    if LIVE.contains(&sub) {
        return Err("needs root and a real device or mount".into());
    }
    let mut c = cmd.to_string();
    let mut uses_shared = c.contains("../shared/traces/");
    for (short, rel) in SHORT_NAMES {
        if words
            .iter()
            .any(|w| *w == short || w.ends_with(&format!("={short}")))
        {
            c = c.replace(short, &format!("../shared/traces/{rel}"));
            uses_shared = true;
        }
    }
    if uses_shared {
        let Some(s) = shared else {
            return Err("needs ../shared/traces (set FALLOW_SHARED_TRACES)".into());
        };
        // tuning every policy on the HP week takes seconds in a release
        // build and many minutes in a debug one
        if cfg!(debug_assertions)
            && ["tune", "recommend"].contains(&sub)
            && std::env::var_os("FALLOW_README_SLOW").is_none()
        {
            return Err(
                "tunes on a real trace: minutes in a debug build (cargo test --release, or FALLOW_README_SLOW=1)"
                    .into(),
            );
        }
        c = c.replace("../shared/traces/", &format!("{}/", s.display()));
    }
    // a redirection into the user's own files (`> ~/.local/share/…`)
    let code = cmd.split(" #").next().unwrap_or(cmd);
    if let Some((_, to)) = code.split_once('>') {
        let to = to.trim();
        if to.starts_with('~') || to.starts_with('/') {
            return Err(format!("writes {to}, the user's own file"));
        }
    }
    // the input: the subcommand's first positional word (where it is a
    // file, not a shell or a page name); a file that does not exist is a
    // placeholder
    let synthetic = words.contains(&"--workload");
    let input = input.filter(|_| !NOT_A_FILE.contains(&sub));
    if let (Some(i), false, false) = (input, synthetic, uses_shared) {
        if !dir.join(i).exists() {
            return Err(format!("{i} is a placeholder for your own trace"));
        }
    }
    Ok(c)
}

#[test]
fn every_readme_command_runs_as_written() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README.md");
    let cmds = readme_commands(&readme);
    // the first-hour section's commands on the demo's trace are there
    let on_demo: Vec<&String> = cmds.iter().filter(|c| c.contains("fallow-demo/")).collect();
    assert!(on_demo.len() >= 6, "{cmds:#?}");

    // the demo's trace, small (the README's is 200,000 requests; a debug
    // build tunes 14 policies on 200,000 in minutes)
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .args(["demo", "--requests", "2000"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.path().join("fallow-demo/trace.csv").is_file());

    // `fallow` on PATH is the binary under test
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let shared = shared_dir();
    let (mut ran, mut skipped) = (0, 0);
    let (mut goldens, mut mismatches): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for cmd in &cmds {
        let c = match prepare(cmd, shared.as_deref(), dir.path()) {
            Ok(c) => c,
            Err(why) => {
                eprintln!("skip: README command `{cmd}`: {why}");
                skipped += 1;
                continue;
            }
        };
        let started = std::time::Instant::now();
        let o = Command::new("sh")
            .args(["-c", &c])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "README command failed: {c}\nstatus {:?}\nstderr: {}\nstdout: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&o.stdout)
        );
        eprintln!("ran in {:.1} s: {cmd}", started.elapsed().as_secs_f64());
        ran += 1;
        // on the demo's trace: its JSON against the golden file
        let on_demo = cmd.contains("fallow-demo/") || cmd.contains("demo.fbt");
        if let (true, Some(j)) = (on_demo, json_command(&c)) {
            let o = Command::new("sh")
                .args(["-c", &j])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{j}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let v: Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|e| panic!("{j}: no JSON on stdout ({e})"));
            let sub = j.split_whitespace().nth(1).unwrap_or("fallow");
            let n = goldens
                .iter()
                .filter(|g| g.rsplit_once('-').map(|x| x.0) == Some(sub))
                .count();
            let name = format!("{sub}-{}", n + 1);
            let dir_text = dir.path().to_string_lossy();
            if let Some(d) = check_golden(&name, &masked(v, &dir_text)) {
                mismatches.push(format!("`{j}` differs from {d}"));
            }
            goldens.push(name);
        }
    }
    eprintln!("{ran} README commands ran, {skipped} skipped");
    eprintln!(
        "{} JSON outputs checked against tests/golden/",
        goldens.len()
    );
    assert!(
        mismatches.is_empty(),
        "the README's commands print other JSON than their golden files (after an intended \
         change: FALLOW_BLESS=1 cargo test -p fallow-cli --test integration readme::):\n{}",
        mismatches.join("\n")
    );
    assert!(ran >= on_demo.len());
}

#[test]
fn commands_are_extracted_with_their_continuations() {
    let text = "x\n```sh\nfallow a b \\\n    --c d\n# fallow no\nfallow e\n```\n```console\n$ fallow f\nout\n```\n```python\nfallow g\n```\nfallow h\n";
    assert_eq!(
        readme_commands(text),
        ["fallow a b --c d", "fallow e", "fallow f"]
    );
}

#[test]
fn a_commands_json_form_drops_its_comment_html_and_redirection() {
    assert_eq!(
        json_command("fallow analyze t.csv --html a.html   # 0.3 s").as_deref(),
        Some("fallow analyze t.csv --json")
    );
    assert_eq!(
        json_command("fallow analyze demo.fbt --json > demo.json   # 0.3 s").as_deref(),
        Some("fallow analyze demo.fbt --json")
    );
    assert_eq!(json_command("fallow convert t.csv -o demo.fbt"), None);
    let dir = "/tmp/x1";
    let v = serde_json::json!({"a": {"path": "/tmp/x1/t.csv", "n": 1}, "b": [2]});
    assert_eq!(
        masked(v, dir),
        serde_json::json!({"a": {"path": "<dir>/t.csv", "n": 1}, "b": [2]})
    );
}

#[test]
fn the_placeholder_is_the_subcommands_first_positional_word() {
    let words = |c: &'static str| -> Vec<&'static str> { c.split_whitespace().collect() };
    assert_eq!(
        sub_and_input(&words("fallow --color never analyze disk.csv")),
        (Some("analyze"), Some("disk.csv"))
    );
    assert_eq!(
        sub_and_input(&words(
            "fallow analyze --format plain --time-unit ms cut.trace --json"
        )),
        (Some("analyze"), Some("cut.trace"))
    );
    assert_eq!(
        sub_and_input(&words(
            "fallow simulate -d 0 ajw.1week.srt --policy=aggressive"
        )),
        (Some("simulate"), Some("ajw.1week.srt"))
    );
    assert_eq!(
        sub_and_input(&words("fallow policies # the list")),
        (Some("policies"), None)
    );
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        prepare("fallow --color never analyze disk.csv", None, dir.path()),
        Err("disk.csv is a placeholder for your own trace".to_string())
    );
    assert_eq!(
        prepare(
            "fallow completions bash > ~/.bash_completion.d/fallow   # zsh, fish",
            None,
            dir.path()
        ),
        Err("writes ~/.bash_completion.d/fallow, the user's own file".to_string())
    );
    assert_eq!(
        prepare("fallow completions zsh", None, dir.path()),
        Ok("fallow completions zsh".to_string())
    );
}

/// The README's example outputs are the binary's (the HP
/// `analyze` example once showed Threshold 3, CWS 7 and "long 5.8 %" where the
/// binary prints 2, 3 and 12 %): every line of each `$ fallow …` console
/// block on a shared trace appears, in order, in what the command prints
/// today (non-breaking spaces read as spaces; `…` stands for lines left
/// out; the trace's path as the README writes it).
#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn readme_example_outputs_are_the_binarys() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README.md");
    let shared = common::shared_traces_dir();
    assert!(shared.is_dir(), "{} not found", shared.display());
    let mut checked = 0;
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(cmd) = line.strip_prefix("$ fallow analyze ../shared/traces/") else {
            continue;
        };
        let shown: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let args: Vec<String> = cmd
            .split_whitespace()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    shared.join(w).display().to_string()
                } else {
                    w.to_string()
                }
            })
            .collect();
        let o = Command::new(BIN)
            .arg("analyze")
            .args(&args)
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout)
            .replace(['\u{a0}', '\u{202f}'], " ")
            .replace(&format!("{}/", shared.display()), "../shared/traces/");
        let printed: Vec<&str> = text.lines().map(str::trim_end).collect();
        let mut at = 0;
        for want in shown
            .iter()
            .map(|l| l.trim_end())
            .filter(|l| l.trim() != "…")
        {
            match printed[at..].iter().position(|p| *p == want) {
                Some(k) => at += k + 1,
                None => panic!(
                    "README line of `fallow analyze {cmd}` not printed (in order) by the binary:\n{want}\n--- printed:\n{text}"
                ),
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked} lines checked");
}
