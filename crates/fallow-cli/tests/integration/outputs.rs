//! Output cases, end to end: no output path of any command may
//! destroy what the user owns (the scrub target, an input, a device node,
//! a file fallow did not write), and a scrub never trusts an edited
//! checkpoint. Each test first builds the situation that once went wrong.

use crate::common;

use common::{bad_input, fallow, fixture, path_str, stderr};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// A temp dir with a 4 MiB target of known bytes.
fn target() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("data.img");
    let bytes: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&t, &bytes).unwrap();
    (dir, t, bytes)
}

fn is_char_device(p: &str) -> bool {
    std::fs::metadata(p).unwrap().file_type().is_char_device()
}

#[test]
fn the_scrub_target_is_never_the_checkpoint_or_the_log() {
    let (dir, t, bytes) = target();
    let ts = path_str(&t);
    let ck = dir.path().join("ck.json");
    let cks = path_str(&ck);
    for (args, why) in [
        (
            vec!["scrub", ts, "--checkpoint", ts, "--restart"],
            "input of this command",
        ),
        (
            vec!["scrub", ts, "--checkpoint", ts, "--restart", "--overwrite"],
            "input of this command",
        ),
        // --resume reads it first, and it is no checkpoint
        (
            vec!["scrub", ts, "--checkpoint", ts, "--resume"],
            "not a fallow scrub checkpoint",
        ),
        (
            vec!["scrub", ts, "--checkpoint", cks, "--log", ts],
            "input of this command",
        ),
    ] {
        let mut args = args;
        args.extend(["--monitor", "none", "--policy", "aggressive"]);
        bad_input(&args, &[why, ts]);
        assert!(
            std::fs::read(&t).unwrap() == bytes,
            "{args:?} changed the target"
        );
    }
    // through a symlink and from a config file's [scrub] log
    let link = dir.path().join("link.img");
    std::os::unix::fs::symlink(&t, &link).unwrap();
    bad_input(
        &[
            "scrub",
            ts,
            "--checkpoint",
            path_str(&link),
            "--monitor",
            "none",
        ],
        &["--checkpoint", "input of this command"],
    );
    let cfg = dir.path().join("f.toml");
    std::fs::write(&cfg, "[scrub]\nlog = \"data.img\"\n").unwrap();
    bad_input(
        &[
            "scrub",
            ts,
            "--config",
            path_str(&cfg),
            "--checkpoint",
            cks,
            "--monitor",
            "none",
        ],
        // named by the config key it came from
        &["f.toml: [scrub] log:", "input of this command"],
    );
    assert!(std::fs::read(&t).unwrap() == bytes);
    // nothing was created next to the target either (no lock, no temporary)
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["data.img", "f.toml", "link.img"]);
    // and the same scrub with a proper checkpoint and log runs
    let log = dir.path().join("log.jsonl");
    let o = fallow(&[
        "scrub",
        ts,
        "--checkpoint",
        cks,
        "--log",
        path_str(&log),
        "--monitor",
        "none",
        "--policy",
        "aggressive",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // a second run appends to its own log and replaces its own checkpoint
    let o = fallow(&[
        "scrub",
        ts,
        "--checkpoint",
        cks,
        "--log",
        path_str(&log),
        "--monitor",
        "none",
        "--policy",
        "aggressive",
        "--resume",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn restart_does_not_replace_a_file_that_is_not_a_checkpoint() {
    let (dir, t, _) = target();
    let notes = dir.path().join("notes.json");
    std::fs::write(&notes, "{\"my\": \"notes\"}\n").unwrap();
    let base = [
        "scrub",
        path_str(&t),
        "--checkpoint",
        path_str(&notes),
        "--monitor",
        "none",
    ];
    // without --restart fallow says what it is…
    bad_input(&base, &["not a fallow checkpoint"]);
    // …and --restart must not then overwrite it
    let mut restart = base.to_vec();
    restart.push("--restart");
    bad_input(
        &restart,
        &["--checkpoint", "not a fallow checkpoint", "--overwrite"],
    );
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "{\"my\": \"notes\"}\n"
    );
    // unless forced
    restart.push("--overwrite");
    let o = fallow(&restart);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&notes)
        .unwrap()
        .contains("fallow-scrub-checkpoint"));
}

#[test]
fn device_nodes_are_never_replaced() {
    let (dir, t, _) = target();
    let tiny = fixture("tiny.csv");
    for dev in ["/dev/full", "/dev/null"] {
        for args in [
            vec!["analyze", path_str(&tiny), "--html", dev],
            // refused before the command is started
            vec!["run", "--report", dev, "--", "true"],
            vec!["convert", path_str(&tiny), "-o", dev, "--overwrite"],
            vec![
                "compare",
                path_str(&tiny),
                "--policy",
                "aggressive",
                "--html",
                dev,
            ],
            vec![
                "scrub",
                path_str(&t),
                "--checkpoint",
                dev,
                "--monitor",
                "none",
            ],
            vec![
                "scrub",
                path_str(&t),
                "--log",
                dev,
                "--monitor",
                "none",
                "--checkpoint",
                path_str(&dir.path().join("ck.json")),
            ],
        ] {
            bad_input(&args, &[dev, "character device"]);
            assert!(is_char_device(dev), "{args:?} replaced {dev}");
        }
    }
    // a directory is refused too
    bad_input(
        &["analyze", path_str(&tiny), "--html", path_str(dir.path())],
        &["is a directory"],
    );
}

#[test]
fn reports_replace_only_what_fallow_wrote_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = fixture("tiny.csv");
    let html = dir.path().join("report.html");
    std::fs::write(&html, "<html>my own page</html>\n").unwrap();
    let args = ["analyze", path_str(&tiny), "--html", path_str(&html)];
    bad_input(
        &args,
        &["--html", "not an HTML report fallow wrote", "--overwrite"],
    );
    assert_eq!(
        std::fs::read_to_string(&html).unwrap(),
        "<html>my own page</html>\n"
    );
    let mut forced = args.to_vec();
    forced.push("--overwrite");
    assert!(fallow(&forced).status.success());
    // now it is fallow's, and a second run replaces it without the flag
    assert!(fallow(&args).status.success());
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("generator"));
    // the input itself is refused even when forced
    let copy = dir.path().join("t.csv");
    std::fs::copy(&tiny, &copy).unwrap();
    bad_input(
        &[
            "analyze",
            path_str(&copy),
            "--html",
            path_str(&copy),
            "--overwrite",
        ],
        &["input of this command"],
    );
    // convert: a foreign file needs --overwrite, its own .fbt does not
    let fbt = dir.path().join("t.fbt");
    std::fs::write(&fbt, "not a trace cache").unwrap();
    let conv = ["convert", path_str(&tiny), "-o", path_str(&fbt)];
    bad_input(&conv, &["-o", "fallow's binary format"]);
    std::fs::remove_file(&fbt).unwrap();
    assert!(fallow(&conv).status.success());
    assert!(fallow(&conv).status.success());
    // demo: its own earlier outputs are replaced, somebody else's are not
    let out = dir.path().join("demo");
    let demo = ["demo", "--out", path_str(&out), "--requests", "1000"];
    assert!(fallow(&demo).status.success());
    assert!(
        fallow(&demo).status.success(),
        "a second demo must replace the first"
    );
    std::fs::write(out.join("report.json"), "[1, 2, 3]\n").unwrap();
    bad_input(&demo, &["report.json", "not a JSON report fallow wrote"]);
}

/// Edit a saved checkpoint's text and write it back without fixing the checksum.
fn edit(ck: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(ck).unwrap();
    assert!(text.contains(from), "{from} not in {text}");
    std::fs::write(ck, text.replace(from, to)).unwrap();
}

#[test]
fn an_edited_checkpoint_is_refused_on_resume_never_reported_complete() {
    // an 8 MiB target, 1 MiB requests, stopped after 3
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.img");
    std::fs::write(&t, vec![5u8; 8 << 20]).unwrap();
    let ck = dir.path().join("ck.json");
    let run = |extra: &[&str]| {
        let mut a = vec![
            "scrub",
            path_str(&t),
            "--checkpoint",
            path_str(&ck),
            "--monitor",
            "none",
            "--policy",
            "aggressive",
            "--size",
            "1MiB",
            "--json",
        ];
        a.extend_from_slice(extra);
        fallow(&a)
    };
    assert!(run(&["--max-bytes", "3MiB"]).status.success());
    let saved = std::fs::read_to_string(&ck).unwrap();
    for (from, to) in [
        ("\"segments\": 8", "\"segments\": 4"),
        ("\"next_visit\": 3", "\"next_visit\": 7"),
        (
            "\"scrubbed_bytes\": 3145728",
            "\"scrubbed_bytes\": 99999999999",
        ),
        (
            "\"bad_ranges\": []",
            "\"bad_ranges\": [[104857600, 209715200]]",
        ),
    ] {
        std::fs::write(&ck, &saved).unwrap();
        edit(&ck, from, to);
        let o = run(&["--resume"]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{from}: {e}");
        assert!(e.contains(path_str(&ck)) && e.contains("`checksum`"), "{e}");
        assert!(o.stdout.is_empty(), "{from}: a report was printed");
    }
    // and the untouched checkpoint resumes and completes the whole target
    std::fs::write(&ck, &saved).unwrap();
    let o = run(&["--resume"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["scrubbed_bytes"], 8 << 20);
    assert_eq!(v["resumed_from_bytes"], 3 << 20);
    assert_eq!(v["complete"], true);
}

#[test]
fn the_checkpoints_lock_and_temporary_file_are_never_the_target() {
    // a save writes `.ck.json.tmp` and locks `ck.json.lock` beside the checkpoint
    let (dir, _, bytes) = target();
    for name in [".ck.json.tmp", "ck.json.lock"] {
        let t = dir.path().join(name);
        std::fs::write(&t, &bytes).unwrap();
        let ck = dir.path().join("ck.json");
        bad_input(
            &[
                "scrub",
                path_str(&t),
                "--checkpoint",
                path_str(&ck),
                "--monitor",
                "none",
            ],
            &["--checkpoint", name, "input of this command"],
        );
        assert!(std::fs::read(&t).unwrap() == bytes, "{name} changed");
        std::fs::remove_file(&t).unwrap();
    }
}

/// One command line of `path` (a subcommand, `spindown units`…) that would
/// run if its output flags were fine, with `input` as one of its inputs;
/// `dir` holds anything else it needs. Every subcommand with an output
/// file flag needs one here: the test below fails naming a new one.
fn base_invocation(path: &str, input: &Path, dir: &Path) -> Option<Vec<String>> {
    let i = input.display().to_string();
    let d = |name: &str| dir.join(name).display().to_string();
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Some(match path {
        "analyze" | "energy" => v(&[path, &i]),
        "compare" => v(&["compare", &i, "--policy", "aggressive"]),
        "pareto" => v(&["pareto", &i, "--policy", "aggressive"]),
        "convert" => v(&["convert", &i]),
        // the device recorded is the input
        "record" => v(&["record", &i, "--duration", "1s"]),
        "run" => v(&["run", "--config", &i, "--device", "loop0", "--", "true"]),
        "emulate-disk" => v(&["emulate-disk", &i, &d("mnt")]),
        "scrub" => v(&[
            "scrub",
            &i,
            "--monitor",
            "none",
            "--checkpoint",
            &d("ck.json"),
        ]),
        "trim" => v(&[
            "trim",
            &d("mnt"),
            "--config",
            &i,
            "--checkpoint",
            &d("ck.json"),
        ]),
        "spindown" => v(&[
            "spindown",
            &d("mnt"),
            "--power",
            &i,
            "--dry-run",
            "--duration",
            "1s",
            "--state",
            &d("state.json"),
        ]),
        // the config it names is an input (not read, never replaced)
        "spindown units" => v(&["spindown", "units", "--config", &i]),
        _ => return None,
    })
}

/// What each command reads as its input in [`base_invocation`].
fn input_bytes(path: &str) -> Vec<u8> {
    match path {
        "run" | "trim" => b"# an empty fallow config\n".to_vec(),
        "spindown" => b"spinup_s = 1.0\nshutdown_s = 0.5\n".to_vec(),
        "emulate-disk" | "scrub" | "record" => vec![0x5a; 1 << 20],
        _ => std::fs::read(fixture("tiny.csv")).unwrap(),
    }
}

/// Every output flag of every subcommand (`Command::get_arguments` on the
/// CLI's clap command; an output is a flag under the `Output files` help
/// heading), run against an input file of the same command, a FIFO, a
/// character device node made with mknod in a temp dir and a foreign
/// file: each is refused with the flag named, and none is replaced or
/// written (before, `fallow spindown --state` replaced a FIFO, a device
/// node, `--power` and a foreign file; `--state /dev/null` made the
/// machine's /dev/null a regular file).
#[test]
fn no_output_flag_of_any_command_writes_an_input_a_fifo_a_device_or_a_foreign_file() {
    // (subcommand, flag as given, the names a refusal may use for it)
    type Found = Vec<(String, String, Vec<String>)>;
    fn walk(c: &clap::Command, path: &str, out: &mut Found) {
        for a in c.get_arguments() {
            if a.get_help_heading() == Some(fallow_cli::OUTPUT_FILES) {
                let mut names: Vec<String> =
                    a.get_long().map(|l| format!("--{l}")).into_iter().collect();
                names.extend(a.get_short().map(|s| format!("-{s}")));
                assert!(!names.is_empty(), "{path}: an output file must be a flag");
                out.push((path.to_string(), names[0].clone(), names));
            }
        }
        for s in c.get_subcommands() {
            let p = if path.is_empty() {
                s.get_name().to_string()
            } else {
                format!("{path} {}", s.get_name())
            };
            walk(s, &p, out);
        }
    }
    let mut outputs = Vec::new();
    walk(&fallow_cli::cli_command(), "", &mut outputs);
    // the ones this test was written against are all found
    for want in [
        ("analyze", "--html"),
        ("convert", "--output"),
        ("scrub", "--checkpoint"),
        ("scrub", "--log"),
        ("spindown", "--state"),
        ("spindown", "--log"),
        ("emulate-disk", "--log"),
    ] {
        assert!(
            outputs.iter().any(|(p, f, _)| p == want.0 && f == want.1),
            "{want:?} not among the output flags {outputs:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("null-node");
    // the null device's numbers (1, 3), but a node of the test's own
    let have_dev = std::process::Command::new("mknod")
        .args([path_str(&dev), "c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    if !have_dev {
        println!("skip: mknod failed (not root?): the device-node case is not run");
    }
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::fs::create_dir(dir.path().join("mnt")).unwrap();
    let foreign_text = b"my precious notes\n";
    for (cmd, flag, names) in &outputs {
        let input = dir.path().join(format!("input-{}", cmd.replace(' ', "-")));
        let input_content = input_bytes(cmd);
        std::fs::write(&input, &input_content).unwrap();
        let foreign = dir.path().join("notes.txt");
        std::fs::write(&foreign, foreign_text).unwrap();
        let base = base_invocation(cmd, &input, dir.path()).unwrap_or_else(|| {
            panic!("`fallow {cmd}` has output flag {flag}: give it a base_invocation")
        });
        let mut targets = vec![
            (input.clone(), "input"),
            (fifo.clone(), "FIFO"),
            (foreign.clone(), "foreign file"),
        ];
        if have_dev {
            targets.push((dev.clone(), "device node"));
        }
        for (target, what) in targets {
            let mut args = base.clone();
            // the same flag given in the base (scrub's --checkpoint,
            // spindown's --state) is replaced, so only the target is tested
            if let Some(k) = args.iter().position(|a| a == flag) {
                args.drain(k..k + 2);
            }
            // before a `--` (run's command)
            let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
            args.insert(at, target.display().to_string());
            args.insert(at, flag.clone());
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut child = common::fallow_cmd(&argv)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let st = common::wait_exit(&mut child, std::time::Duration::from_secs(60));
            let o = child.wait_with_output().unwrap();
            let err = stderr(&o);
            assert_eq!(st.code(), Some(2), "{argv:?} against the {what}: {err}");
            assert!(
                names.iter().any(|n| err.contains(&format!("{n}:")))
                    && err.contains(path_str(&target))
                    // (trim's --log: the flag itself is refused)
                    || names.iter().any(|n| err.contains(&format!("{n} does not apply"))),
                "{argv:?} against the {what}: the refusal must name the flag and the path: {err}"
            );
            let m = std::fs::symlink_metadata(&target).unwrap();
            match what {
                "FIFO" => assert!(m.file_type().is_fifo(), "{argv:?} replaced the FIFO"),
                "device node" => {
                    assert!(m.file_type().is_char_device(), "{argv:?} replaced the node")
                }
                "input" => assert!(
                    std::fs::read(&target).unwrap() == input_content,
                    "{argv:?} changed its input"
                ),
                _ => assert_eq!(std::fs::read(&target).unwrap(), foreign_text, "{argv:?}"),
            }
        }
    }
    // nothing but what the test made is left in the directory (no temporary)
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("input-"))
        .collect();
    names.sort();
    let mut want = vec!["fifo", "mnt", "notes.txt"];
    if have_dev {
        want.push("null-node");
    }
    assert_eq!(names, want);
}
