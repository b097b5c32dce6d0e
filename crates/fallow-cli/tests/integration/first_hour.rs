//! Wording a new user meets in the first hour: a `.fbt`
//! converted with --skip-bad says what it lost in a whole sentence, and
//! counts of one are singular.

use crate::common;

use common::{fallow, fixture, path_str, stderr};

#[test]
fn a_converted_trace_says_what_it_skipped_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let fbt = dir.path().join("b.fbt");
    let o = fallow(&[
        "convert",
        path_str(&fixture("broken.csv")),
        "-o",
        path_str(&fbt),
        "--skip-bad",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // reading the source: the count, singular, and the one reason
    let err = stderr(&o);
    assert!(
        err.contains("skipped 1 malformed record (--skip-bad); it was:"),
        "{err}"
    );
    assert!(err.contains("line 4"), "{err}");
    // reading the cache: no dangling "the first:" with nothing after it
    let o = fallow(&["analyze", path_str(&fbt)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("malformed"))
        .unwrap_or_else(|| panic!("no word of the skipped record: {err}"));
    assert!(!line.trim_end().ends_with(':'), "{line}");
    assert!(
        line.contains("1 malformed record was skipped when this trace was converted"),
        "{line}"
    );
    // the summary: "1 malformed record skipped", never "1 ... records"
    let out = common::stdout(&o);
    assert!(out.contains("1 malformed record skipped"), "{out}");
    assert!(!out.contains("1 malformed records"), "{out}");
}

/// The README's fenced block after `heading` (its first ``` block).
fn block_after(readme: &str, heading: &str) -> String {
    let at = readme
        .find(heading)
        .unwrap_or_else(|| panic!("README has no `{heading}`"));
    let rest = &readme[at..];
    let open = rest.find("```").expect("a fenced block") + 3;
    let body = &rest[open..];
    let body = &body[body.find('\n').expect("a fence line") + 1..];
    body[..body.find("```").expect("a closing fence")].to_string()
}

/// The README's first-hour block runs as written in a fresh shell after
/// the README's first command. That command must install `fallow` where a
/// new shell finds it (`cargo install --path crates/fallow-cli`, whose
/// `[[bin]]` is `fallow`, into `~/.cargo/bin`), and the block then runs as
/// one `bash -e` script in an empty environment whose PATH holds only
/// `$HOME/.cargo/bin` (with the binary under test where cargo install puts
/// it) and the system's directories. The demo's trace is made small (2,000
/// requests; the README's 200,000 tune for minutes in a debug build).
#[test]
fn the_first_hour_runs_in_a_fresh_shell_after_the_first_command() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let two = block_after(&readme, "## Two commands");
    let first = two
        .lines()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .expect("a first command");
    assert!(
        first.contains("cargo install") && first.contains("--path crates/fallow-cli"),
        "the first command does not install fallow on PATH: {first}"
    );
    assert!(first.trim_end().ends_with("fallow demo"), "{first}");
    let manifest = std::fs::read_to_string(root.join("crates/fallow-cli/Cargo.toml")).unwrap();
    assert!(
        manifest.contains("[[bin]]\nname = \"fallow\""),
        "crates/fallow-cli installs no `fallow` binary"
    );

    let home = tempfile::tempdir().unwrap();
    let cargo_bin = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&cargo_bin).unwrap();
    std::os::unix::fs::symlink(common::BIN, cargo_bin.join("fallow")).unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", cargo_bin.display());
    let fresh = |script: &str| {
        std::process::Command::new("/usr/bin/env")
            .arg("-i")
            .arg(format!("HOME={}", home.path().display()))
            .arg(format!("PATH={path}"))
            .args(["bash", "-euc", script])
            .current_dir(work.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    // the README's first command's last step, smaller
    let o = fresh("fallow demo --requests 2000");
    assert!(o.status.success(), "{}", stderr(&o));
    let hour = block_after(&readme, "### The first hour");
    assert!(
        hour.lines().filter(|l| l.starts_with("fallow ")).count() >= 6,
        "{hour}"
    );
    let o = fresh(&hour);
    assert!(
        o.status.success(),
        "the first-hour block failed in a fresh shell (status {:?}):\n{}\n{}",
        o.status,
        stderr(&o),
        hour
    );
    for out in [
        "analyze.html",
        "compare.html",
        "pareto.html",
        "energy.html",
        "demo.fbt",
        "demo.json",
    ] {
        assert!(work.path().join(out).is_file(), "{out} not written");
    }
}
