//! Every `fallow` command the README shows runs as written (issue 17 item
//! 7): the commands on the demo's trace after a (small) `fallow demo`, the
//! ones on the shared real traces when they are there, and the ones that
//! need root and a real device or name a placeholder input are listed as
//! skipped, each with its reason.

mod common;

use common::BIN;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
    let dir = std::env::var_os("FALLOW_SHARED_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"));
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

/// What to run for `cmd`, or why it is skipped.
fn prepare(cmd: &str, shared: Option<&Path>, dir: &Path) -> Result<String, String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let sub = words.get(1).copied().unwrap_or("");
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
    // the input: the first word after the subcommand that is not a flag
    // (or a flag's value); a file that does not exist is a placeholder
    let input = words.iter().skip(2).find(|w| !w.starts_with('-'));
    let synthetic = words.contains(&"--workload");
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
    }
    eprintln!("{ran} README commands ran, {skipped} skipped");
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
