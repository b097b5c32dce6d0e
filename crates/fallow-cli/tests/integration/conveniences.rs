//! The command-line conveniences, run as the built
//! binary: `fallow completions SHELL`, `fallow man`, `--color`, `--csv`
//! (checked against the same run's `--json`) and blkparse devices shown and
//! chosen as `major,minor`.

use crate::common;

use common::{bad_input, fallow, fallow_cmd, json, stderr, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};

const SUBCOMMANDS: &[&str] = &[
    "analyze",
    "compare",
    "completions",
    "convert",
    "demo",
    "man",
    "policies",
    "recommend",
    "scrub",
    "simulate",
    "tune",
];

#[test]
fn completions_know_every_subcommand_and_flag() {
    let bash = stdout(&fallow(&["completions", "bash"]));
    assert!(bash.contains("complete -F _fallow"), "{bash}");
    for sub in SUBCOMMANDS {
        assert!(bash.contains(sub), "bash: no {sub}");
    }
    // flags of a subcommand, and the global --color
    for flag in ["--resume", "--checkpoint", "--csv", "--color"] {
        assert!(bash.contains(flag), "bash: no {flag}");
    }
    let zsh = stdout(&fallow(&["completions", "zsh"]));
    assert!(
        zsh.starts_with("#compdef fallow"),
        "{}",
        &zsh[..80.min(zsh.len())]
    );
    let fish = stdout(&fallow(&["completions", "fish"]));
    assert!(fish.contains("complete -c fallow"), "{fish}");
    for shell in ["elvish", "powershell"] {
        let o = fallow(&["completions", shell]);
        assert!(o.status.success() && !o.stdout.is_empty(), "{shell}");
    }
    bad_input(&["completions", "tcsh"], &["tcsh", "bash"]);
}

/// Completion offers the registries' names after `--format` and
/// `--policy` (spin-down policies for `energy`), and no internal command.
/// The lists to find are read from `fallow policies --json` and `fallow
/// analyze --help`, not from the completion code.
#[test]
fn completion_offers_policies_and_formats_and_hides_internal_commands() {
    let bash = stdout(&fallow(&["completions", "bash"]));
    assert!(
        !bash.contains("__guardian"),
        "an internal command is offered"
    );
    let fish = stdout(&fallow(&["completions", "fish"]));
    assert!(!fish.contains("__guardian"));
    // the value list right after a flag's case label
    let after = |flag: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut lines = bash.lines();
        while let Some(l) = lines.next() {
            if l.trim() == format!("{flag})") {
                let next = lines.next().unwrap_or("");
                if let Some(w) = next.split("compgen -W \"").nth(1) {
                    out.push(w.split('"').next().unwrap_or("").to_string());
                }
            }
        }
        out
    };
    let policies: Vec<String> = json(&["policies"])
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| p["name"].as_str().expect("a name").to_string())
        .collect();
    assert!(policies.len() >= 10, "{policies:?}");
    let lists = after("--policy");
    let bg = lists
        .iter()
        .find(|l| l.contains("fixed-wait"))
        .expect("BG policies after --policy");
    for p in &policies {
        assert!(bg.split(' ').any(|w| w == p), "{p} not offered: {bg}");
    }
    assert!(
        lists.iter().any(|l| l.split(' ').any(|w| w == "timeout")),
        "no spin-down policies after energy's --policy: {lists:?}"
    );
    // the help wraps its lines: one space for any run of white space
    let help = stdout(&fallow(&["analyze", "--help"]))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let formats = after("--format");
    let f = formats.first().expect("formats after --format");
    for name in f.split(' ') {
        assert!(
            help.contains(&format!("{name} (")),
            "{name} is not a format of analyze --help"
        );
    }
    for name in ["msr", "hp-srt", "blkparse", "biosnoop"] {
        assert!(f.split(' ').any(|w| w == name), "{name} not offered: {f}");
    }
}

/// The bash script as bash reads it: it defines `_fallow` without errors.
#[test]
fn the_bash_completion_script_loads() {
    if !common::have("bash") {
        eprintln!("skip: bash is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("fallow.bash");
    std::fs::write(&script, fallow(&["completions", "bash"]).stdout).unwrap();
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && declare -F _fallow",
            common::path_str(&script)
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "_fallow");
}

#[test]
fn man_pages_are_roff_with_the_commands_help() {
    let page = stdout(&fallow(&["man"]));
    assert!(
        page.contains(".TH fallow 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    assert!(page.contains(".SH NAME"));
    assert!(page.contains(".SH SUBCOMMANDS") || page.contains("fallow\\-analyze"));
    for sub in ["analyze", "scrub", "completions"] {
        assert!(page.contains(sub), "fallow(1) does not mention {sub}");
    }
    let scrub = stdout(&fallow(&["man", "scrub"]));
    assert!(scrub.contains(".TH fallow-scrub 1"), "{}", &scrub[..200]);
    assert!(
        scrub.contains("\\-\\-resume"),
        "no --resume in fallow-scrub(1)"
    );
    bad_input(&["man", "nope"], &["nope", "analyze"]);
    bad_input(&["man", "__guardian"], &["__guardian"]);
    // man(1) renders it, when installed
    if common::have("man") {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fallow.1");
        std::fs::write(&p, &page).unwrap();
        let o = std::process::Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(&p)
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains("fallow"), "{}", stdout(&o));
    } else {
        eprintln!("skip: man is not installed; the roff was checked as text only");
    }
}

/// `fallow man --dir DIR` (advertised in `fallow --help` and fallow(1))
/// writes fallow.1 and a page per visible subcommand, nested ones
/// included, each the same roff `fallow man SUB` prints; a foreign file
/// in the way is refused before anything is written, and a second run
/// replaces its own pages.
#[test]
fn man_dir_writes_every_page_through_the_output_guard() {
    let dir = tempfile::tempdir().unwrap();
    let d = common::path_str(dir.path());
    let o = fallow(&["man", "--dir", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let help = stdout(&fallow(&["--help"]));
    // the independent list: the subcommands `fallow --help` names
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // a name at two spaces; deeper lines continue a wrapped description
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .collect();
    assert!(listed.len() >= 15, "{listed:?}");
    for sub in &listed {
        let p = dir.path().join(format!("fallow-{sub}.1"));
        let page = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(page, stdout(&fallow(&["man", sub])), "{sub}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("fallow.1")).unwrap(),
        stdout(&fallow(&["man"]))
    );
    assert!(dir.path().join("fallow-peer-serve.1").exists());
    assert!(!dir.path().join("fallow-__guardian.1").exists());
    // its own pages are replaced without --overwrite
    assert!(fallow(&["man", "--dir", d]).status.success());
    // a foreign file is refused, and nothing else is written
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("fallow-scrub.1"), "my notes\n").unwrap();
    bad_input(
        &["man", "--dir", common::path_str(other.path())],
        &["fallow-scrub.1", "--overwrite"],
    );
    assert!(!other.path().join("fallow.1").exists());
    assert_eq!(
        std::fs::read_to_string(other.path().join("fallow-scrub.1")).unwrap(),
        "my notes\n"
    );
    bad_input(
        &["man", "--dir", "/nonexistent/fallow-man"],
        &["/nonexistent/fallow-man"],
    );
    bad_input(&["man", "scrub", "--dir", d], &["--dir"]);
}

fn has_escapes(s: &str) -> bool {
    s.contains('\x1b')
}

#[test]
fn color_always_never_and_auto() {
    // auto on a pipe: plain; always: bold even on a pipe and despite
    // NO_COLOR (a flag on the command line beats the environment)
    let auto = fallow(&["policies"]);
    assert!(!has_escapes(&stdout(&auto)));
    let always = fallow(&["--color", "always", "policies"]);
    assert!(stdout(&always).contains("\x1b[1m"), "{}", stdout(&always));
    let never = fallow(&["policies", "--color=never"]);
    assert!(!has_escapes(&stdout(&never)));
    // plain text is the same with and without colour, escapes aside
    let stripped = stdout(&always)
        .replace("\x1b[1m", "")
        .replace("\x1b[2m", "")
        .replace("\x1b[0m", "");
    assert_eq!(stripped, stdout(&never));
    // clap's help follows the flag too
    let help = fallow(&["--color", "always", "analyze", "--help"]);
    assert!(has_escapes(&stdout(&help)), "{}", stdout(&help));
    let help = fallow(&["--color", "never", "analyze", "--help"]);
    assert!(!has_escapes(&stdout(&help)));
    // and so do its errors
    let err = fallow(&["--color", "always", "analyze", "--bogus"]);
    assert_eq!(err.status.code(), Some(2));
    assert!(has_escapes(&stderr(&err)), "{}", stderr(&err));
    bad_input(
        &["--color", "sometimes", "policies"],
        &["sometimes", "never"],
    );
}

/// Parse RFC 4180 CSV (quoted fields with doubled quotes, CRLF rows), a
/// reader separate from the writer under test.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = vec![];
    let mut row = vec![];
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(field.is_empty() && row.is_empty(), "no final line end");
    rows
}

/// The rows of `fallow ARGS --csv` as maps from column to value.
fn csv_rows(args: &[&str]) -> (Vec<String>, Vec<std::collections::HashMap<String, String>>) {
    let mut all = args.to_vec();
    all.push("--csv");
    let o = fallow(&all);
    assert!(o.status.success(), "fallow {all:?}: {}", stderr(&o));
    let text = stdout(&o);
    assert!(text.ends_with("\r\n"), "{text}");
    let mut rows = parse_csv(&text);
    let head = rows.remove(0);
    for r in &rows {
        assert_eq!(r.len(), head.len(), "ragged row {r:?} under {head:?}");
    }
    let maps = rows
        .into_iter()
        .map(|r| head.iter().cloned().zip(r).collect())
        .collect();
    (head, maps)
}

const WORKLOAD: &[&str] = &[
    "--workload",
    "poisson",
    "--utilization",
    "0.3",
    "--requests",
    "1500",
    "--service",
    "exp:5ms",
    "--bg",
    "exp:5ms",
];

fn f(s: &str) -> f64 {
    s.parse()
        .unwrap_or_else(|_| panic!("`{s}` is not a number"))
}

/// The same number: serde_json's default float parser may be one ulp off
/// the shortest round-trip text both outputs write.
fn same(csv: &str, json: &Value) {
    let (a, b) = (f(csv), json.as_f64().unwrap());
    assert!((a - b).abs() <= 1e-14 * b.abs(), "csv {a} json {b}");
}

#[test]
fn compare_csv_holds_the_json_numbers_exactly() {
    let mut args = vec![
        "compare",
        "--policy",
        "aggressive",
        "--policy",
        "fixed-wait:t=20ms",
    ];
    args.extend_from_slice(WORKLOAD);
    let (head, rows) = csv_rows(&args);
    assert_eq!(
        head,
        [
            "policy",
            "fg_slowdown",
            "fg_mean_added_delay_s",
            "fg_p99_response_s",
            "fg_collision_rate",
            "bg_throughput_bytes_per_s",
            "idle_used_fraction",
            "clairvoyant"
        ]
    );
    let v = json(&args);
    let runs = v.as_array().unwrap();
    // the baseline row, then one per policy in order
    assert_eq!(rows.len(), runs.len() + 1);
    assert_eq!(rows[0]["policy"], "(no BG work)");
    assert_eq!(f(&rows[0]["bg_throughput_bytes_per_s"]), 0.0);
    for (row, run) in rows[1..].iter().zip(runs) {
        assert_eq!(row["policy"], run["spec"].as_str().unwrap());
        let r = &run["result"];
        let r = if r.is_null() { run } else { r };
        same(&row["fg_slowdown"], &r["fg"]["slowdown"]);
        same(
            &row["fg_mean_added_delay_s"],
            &r["fg"]["mean_added_delay_s"],
        );
        same(
            &row["bg_throughput_bytes_per_s"],
            &r["bg"]["throughput_bytes_per_s"],
        );
        assert_eq!(row["clairvoyant"], "false");
    }
    bad_input(
        &["compare", "--csv", "--json", "--workload", "poisson"],
        &["--csv", "--json"],
    );
}

#[test]
fn recommend_tune_and_policies_csv_match_their_json() {
    let mut args = vec!["recommend", "--budget", "2ms", "--sizes", "64KiB"];
    args.extend_from_slice(WORKLOAD);
    let (head, rows) = csv_rows(&args);
    assert_eq!(head[..3], ["rank", "policy", "spec"]);
    let v = json(&args);
    let ranking = v["ranking"].as_array().unwrap();
    assert_eq!(rows.len(), ranking.len());
    for (row, r) in rows.iter().zip(ranking) {
        assert_eq!(row["policy"], r["policy"].as_str().unwrap());
        assert_eq!(f(&row["rank"]), r["rank"].as_f64().unwrap());
        match r["best"]["bg_throughput_bytes_per_s"].as_f64() {
            Some(_) if r["rank"].as_u64() != Some(0) => {
                same(
                    &row["bg_throughput_bytes_per_s"],
                    &r["best"]["bg_throughput_bytes_per_s"],
                );
                assert_eq!(row["spec"], r["best"]["spec"].as_str().unwrap());
            }
            _ => assert_eq!(row["bg_throughput_bytes_per_s"], ""),
        }
    }

    let mut args = vec![
        "tune",
        "--policy",
        "fixed-wait",
        "--budget",
        "1ms,4ms",
        "--sizes",
        "64KiB",
    ];
    args.extend_from_slice(WORKLOAD);
    let (head, rows) = csv_rows(&args);
    assert_eq!(head[0], "budget");
    let v = json(&args);
    let budgets = v["budgets"].as_array().unwrap();
    // one row per budget, then the baseline
    assert_eq!(rows.len(), budgets.len() + 1);
    assert_eq!(rows.last().unwrap()["budget"], "baseline");
    for (row, b) in rows.iter().zip(budgets) {
        match b["best"]["fg_mean_added_delay_s"].as_f64() {
            Some(_) => {
                same(
                    &row["fg_mean_added_delay_s"],
                    &b["best"]["fg_mean_added_delay_s"],
                );
                assert_eq!(
                    f(&row["request_size_bytes"]),
                    b["best"]["request_size_bytes"].as_f64().unwrap()
                );
            }
            None => assert_eq!(row["fg_mean_added_delay_s"], ""),
        }
    }

    // pareto: one row per setting swept, the front's flagged
    let mut args = vec![
        "pareto",
        "--policy",
        "fixed-wait",
        "--policy",
        "aggressive",
        "--bg-size",
        "64KiB",
    ];
    args.extend_from_slice(WORKLOAD);
    let (_, rows) = csv_rows(&args);
    let v = json(&args);
    let fronts = v.as_array().unwrap();
    let points: usize = fronts
        .iter()
        .map(|f| f["points"].as_array().unwrap().len())
        .sum();
    let front: usize = fronts
        .iter()
        .map(|f| f["front"].as_array().unwrap().len())
        .sum();
    assert_eq!(rows.len(), points);
    assert_eq!(
        rows.iter().filter(|r| r["on_front"] == "true").count(),
        front
    );
    for (row, p) in rows.iter().zip(fronts[0]["points"].as_array().unwrap()) {
        assert_eq!(row["spec"], p["spec"].as_str().unwrap());
        same(&row["fg_mean_added_delay_s"], &p["fg_mean_added_delay_s"]);
    }

    let (_, rows) = csv_rows(&["policies"]);
    let v: Value = json(&["policies"]);
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let csv_names: Vec<&str> = rows.iter().map(|r| r["name"].as_str()).collect();
    assert_eq!(csv_names, names);
}

fn blkparse_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/traces/small.blkparse")
}

/// small.blkparse by hand: 8,0 completes three requests (2048 R, 4096 W,
/// 8192 R after its requeue; 7000 W never completes), 8,16 one (100 WS;
/// the flush moves no data).
#[test]
fn blkparse_devices_are_major_minor() {
    let trace = blkparse_fixture();
    let trace = common::path_str(&trace);
    let v = json(&["analyze", trace, "--device", "8,16"]);
    let devices = v["trace"]["devices"].as_array().unwrap();
    let listed: Vec<(&str, u64)> = devices
        .iter()
        .map(|d| (d["name"].as_str().unwrap(), d["requests"].as_u64().unwrap()))
        .collect();
    assert_eq!(listed, [("8,0", 3), ("8,16", 1)]);
    assert_eq!(v["trace"]["requests"].as_u64(), Some(1));
    // the id stays the kernel's MKDEV, 8 << 20 | 16
    assert_eq!(devices[1]["id"].as_u64(), Some((8 << 20) + 16));
    // the id still selects it, and the text names it major,minor
    let v = json(&["analyze", trace, "--device", "8388624"]);
    assert_eq!(v["trace"]["requests"].as_u64(), Some(1));
    let o = fallow(&["analyze", trace]);
    let err = stderr(&o);
    assert!(
        err.contains("8,0: 3") && err.contains("device 8,0"),
        "{err}"
    );
    assert!(stdout(&o).contains("device 8,0 of 2"), "{}", stdout(&o));
    bad_input(
        &["analyze", trace, "--device", "8,32"],
        &["8,32", "8,0 (3 requests)", "8,16 (1 request"],
    );
    bad_input(
        &["analyze", trace, "--device", "8,x"],
        &["8,x", "major,minor"],
    );
    bad_input(
        &["analyze", trace, "--device", "4096,0"],
        &["4096,0", "12-bit major"],
    );
    // a converted trace keeps the names (its source format is blkparse)
    let dir = tempfile::tempdir().unwrap();
    let fbt = dir.path().join("small.fbt");
    let o = fallow_cmd(&["convert", trace, "-o", common::path_str(&fbt)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&["analyze", common::path_str(&fbt), "--device", "8,16"]);
    assert_eq!(v["trace"]["devices"][1]["name"], "8,16");
}
