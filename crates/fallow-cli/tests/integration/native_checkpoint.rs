//! The checkpoints of `fallow scrub fstrim:…` and `fallow scrub md:…` pass
//! the same output guard as the block scrub's: never a device
//! node, a directory, an input of the command, or a file fallow does not
//! recognise as its own unless `--overwrite`. The guard runs before the
//! native job is touched, so none of this needs root, md or a discard-capable
//! file system; no FITRIM is issued here (the md array does not exist, and
//! every fstrim case is refused before its first range).

use crate::common;

use common::{bad_input, fallow};
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Both kinds of native target that keep a checkpoint, for a scratch dir.
fn targets(dir: &Path) -> [String; 2] {
    [format!("fstrim:{}", dir.display()), "md:/dev/md0".into()]
}

#[test]
fn device_nodes_and_directories_are_refused_even_with_overwrite() {
    let d = tempfile::tempdir().unwrap();
    for t in targets(d.path()) {
        for extra in [&[][..], &["--overwrite"]] {
            let mut args = vec![
                "scrub",
                &t,
                "--monitor",
                "none",
                "--checkpoint",
                "/dev/null",
            ];
            args.extend_from_slice(extra);
            bad_input(&args, &["--checkpoint", "/dev/null", "character device"]);
            let mut args = vec![
                "scrub",
                &t,
                "--monitor",
                "none",
                "--checkpoint",
                s(d.path()),
            ];
            args.extend_from_slice(extra);
            bad_input(&args, &["--checkpoint", "is a directory"]);
        }
    }
    use std::os::unix::fs::FileTypeExt;
    let m = std::fs::metadata("/dev/null").unwrap();
    assert!(m.file_type().is_char_device());
}

#[test]
fn an_input_of_the_command_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("fallow.toml");
    let text = "[live]\npolicy = \"aggressive\"\n";
    std::fs::write(&cfg, text).unwrap();
    let link = d.path().join("ck.json");
    std::os::unix::fs::symlink(&cfg, &link).unwrap();
    for t in targets(d.path()) {
        for ck in [&cfg, &link] {
            bad_input(
                &[
                    "scrub",
                    &t,
                    "--monitor",
                    "none",
                    "--config",
                    s(&cfg),
                    "--checkpoint",
                    s(ck),
                    "--overwrite",
                ],
                &["--checkpoint", "input of this command"],
            );
        }
    }
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text);
}

#[test]
fn a_file_fallow_does_not_recognise_needs_overwrite_and_is_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let notes = d.path().join("notes.json");
    std::fs::write(&notes, "{\"my\": \"notes\"}\n").unwrap();
    for t in targets(d.path()) {
        for resume in ["--restart", "--resume"] {
            bad_input(
                &[
                    "scrub",
                    &t,
                    "--monitor",
                    "none",
                    "--checkpoint",
                    s(&notes),
                    resume,
                ],
                &["--checkpoint", "not a fallow checkpoint", "--overwrite"],
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "{\"my\": \"notes\"}\n"
    );
    // nothing beside it either (the lock is taken only after the check)
    let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "{names:?}");
    // with --overwrite the guard lets it through: md then fails on the
    // array (there is none here), not on the checkpoint
    let o = fallow(&[
        "scrub",
        "md:/dev/md0",
        "--monitor",
        "none",
        "--checkpoint",
        s(&notes),
        "--restart",
        "--overwrite",
    ]);
    let e = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("md0/md/sync_action does not exist"), "{e}");
}

#[test]
fn fallows_own_checkpoints_pass_the_guard() {
    // A checkpoint written before the checksummed format (as fstrim wrote
    // it): fallow's own, so --restart may replace it without --overwrite,
    // and the guard passes; md then fails on the missing array.
    let d = tempfile::tempdir().unwrap();
    let old = d.path().join("old.json");
    std::fs::write(
        &old,
        r#"{"target": "md:/dev/md0", "action": "check", "total_sectors": 65536,
            "next_sector": 1024, "mismatch_sectors": 0, "windows": 1,
            "complete": false, "pass": 1, "updated_unix_s": 1}"#,
    )
    .unwrap();
    bad_input(
        &[
            "scrub",
            "md:/dev/md0",
            "--monitor",
            "none",
            "--checkpoint",
            s(&old),
            "--restart",
        ],
        &["md0/md/sync_action does not exist"],
    );
}

#[test]
fn a_config_checkpoint_is_named_by_file_table_and_key() {
    let d = tempfile::tempdir().unwrap();
    let notes = d.path().join("notes.txt");
    std::fs::write(&notes, "mine\n").unwrap();
    let cfg = d.path().join("fallow.toml");
    std::fs::write(&cfg, "[scrub]\ncheckpoint = \"notes.txt\"\n").unwrap();
    let key = format!("{}: [scrub] checkpoint", cfg.display());
    for t in targets(d.path()) {
        bad_input(
            &["scrub", &t, "--monitor", "none", "--config", s(&cfg)],
            &[&key, "notes.txt", "--overwrite"],
        );
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "mine\n");
}
