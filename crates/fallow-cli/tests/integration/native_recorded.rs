//! `fallow scrub md:…` and `fallow scrub zfs:…` from the command line.
//! Neither md nor ZFS is in this machine's kernel: the ZFS run uses the
//! fake `zpool` of `crates/fallow-live/tests/data/zfs` (first in `PATH`),
//! which prints OpenZFS's status formats; md can only be refused here.

use crate::common;

use common::{bad_input, fallow_cmd, json_of, stderr};
use std::path::Path;

/// A fake `zpool` for pool `tank` of `total` bytes scrubbed at `rate`
/// bytes/s, in a fresh directory.
fn fake_zpool(total: u64, rate: u64) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fallow-live/tests/data/zfs/."
    );
    let st = std::process::Command::new("cp")
        .args(["-a", src])
        .arg(d.path())
        .status()
        .unwrap();
    assert!(st.success());
    for (k, v) in [
        ("pool", "tank".to_string()),
        ("total", total.to_string()),
        ("rate", rate.to_string()),
        ("state", "none".into()),
        ("issued", "0".into()),
        ("json", "yes".into()),
    ] {
        std::fs::write(d.path().join(k), format!("{v}\n")).unwrap();
    }
    d
}

fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn a_zfs_scrub_runs_to_the_end_through_the_cli() {
    let z = fake_zpool(1 << 30, 1 << 30);
    let o = fallow_cmd(&[
        "scrub",
        "zfs:tank",
        "--policy",
        "fixed-rate:r=600ms",
        "--slice",
        "100ms",
        "--monitor",
        "none",
        "--json",
    ])
    .env("PATH", path_with(z.path()))
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["kind"], "zfs");
    assert_eq!(v["complete"], true);
    assert_eq!(v["target_bytes"], 1u64 << 30);
    assert_eq!(v["scrubbed_bytes"], 1u64 << 30);
    // the recorded finished status says `with 2 errors`, 1.50M repaired
    assert_eq!(v["errors_uncorrectable"], 2);
    assert_eq!(v["native"]["repaired_bytes"], 1572864);
    let log = std::fs::read_to_string(z.path().join("log")).unwrap();
    // 1 GiB at 1 GiB/s = 1 s of running: several 100 ms slices, with a
    // pause between (at 2 GiB/s, a loaded machine that ran a slice 400 ms
    // late let the fake scrub finish in one)
    assert!(
        log.lines().filter(|l| *l == "scrub -p tank").count() >= 1,
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(z.path().join("state"))
            .unwrap()
            .trim(),
        "finished"
    );
}

#[test]
fn native_md_and_zfs_mistakes_are_bad_input() {
    // no md in this kernel (or no such array): a clear refusal
    bad_input(
        &["scrub", "md:/dev/md0", "--monitor", "none"],
        &["/sys/block/md0/md/sync_action does not exist"],
    );
    bad_input(
        &["scrub", "zfs:tank", "--action", "repair"],
        &["--action does not apply to zfs"],
    );
    bad_input(&["scrub", "zfs:no/pool"], &["not a pool name"]);
    let z = fake_zpool(1 << 30, 1 << 30);
    let o = fallow_cmd(&["scrub", "zfs:other", "--monitor", "none"])
        .env("PATH", path_with(z.path()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no such pool"), "{}", stderr(&o));
}
