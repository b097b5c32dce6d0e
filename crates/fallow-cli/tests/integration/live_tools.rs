//! `fallow emulate-disk` and `fallow record` end to end: mount an emulated
//! disk (detached, as a script would), put a loop device over it, record a
//! trace of known reads through the loop device, and analyse the trace.
//! Needs root, /dev/fuse, losetup and tracefs: `#[ignore = "needs root"]`. The bad-input checks run everywhere.

use crate::common;

use common::{fallow, is_mounted, need_root, run_tool, stderr, terminate, Cleanup, BIN};
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn bad_input_exits_2_with_the_culprit_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let missing = format!("{d}/missing.img");
    for (args, needle) in [
        (
            vec!["emulate-disk", &missing, d, "--foreground"],
            "missing.img",
        ),
        (vec!["emulate-disk", &missing, d], "missing.img"),
        (
            vec![
                "emulate-disk",
                &missing,
                d,
                "--seek-ms",
                "4",
                "--foreground",
            ],
            "missing.img",
        ),
        (
            vec!["record", "no-such-disk-xyz", "-o", "x.csv"],
            "no-such-disk-xyz",
        ),
        (
            vec!["record", "/proc/version", "-o", "x.csv"],
            "not a block device",
        ),
        (
            vec!["record", "vda", "--duration", "soon", "-o", "x.csv"],
            "--duration",
        ),
    ] {
        let o = fallow(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    // a bad flag is caught before the image is looked at
    let img = dir.path().join("disk.img");
    File::create(&img).unwrap().set_len(1 << 20).unwrap();
    let o = fallow(&[
        "emulate-disk",
        img.to_str().unwrap(),
        d,
        "--fail",
        "9-1",
        "--foreground",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--fail: range `9-1`"), "{}", stderr(&o));
}

fn stat(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// Assert that an emulated disk can be mounted here (root and /dev/fuse),
/// naming the test: the callers are `#[ignore = "needs root"]`.
fn can_emulate(test: &str) {
    need_root(test);
    assert!(Path::new("/dev/fuse").exists(), "{test} needs /dev/fuse");
}

/// A temporary directory with an image of `image_bytes` and an empty
/// mountpoint, and the cleanup that unmounts it (and, once set, stops the
/// server and detaches the loop device) whatever the test does.
fn emu_scaffold(image_bytes: u64) -> (tempfile::TempDir, PathBuf, PathBuf, Cleanup) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    File::create(&img).unwrap().set_len(image_bytes).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let cleanup = Cleanup::new(&mnt.canonicalize().unwrap());
    (dir, img, mnt, cleanup)
}

#[test]
#[ignore = "needs root"]
fn emulated_disk_loop_device_record_and_analyze() {
    let name = "emulated_disk_loop_device_record_and_analyze";
    can_emulate(name);
    if run_tool("losetup", &["--version"]).is_err() {
        eprintln!("SKIP {name}: no losetup");
        return;
    }
    let (dir, img, mnt, mut cleanup) = emu_scaffold(64 << 20);
    let stat_file = dir.path().join("stat");

    // detached: returns once mounted, the ready line names the disk
    let o = fallow(&[
        "emulate-disk",
        img.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--rpm",
        "15000",
        "--seek-ms",
        "0.5..8",
        "--stat-file",
        stat_file.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ready: Value = serde_json::from_slice(&o.stdout).expect("one JSON line");
    cleanup.pids.push(ready["pid"].as_u64().unwrap() as u32);
    let disk = ready["disk"].as_str().unwrap().to_string();
    assert_eq!(Path::new(&disk), mnt.canonicalize().unwrap().join("disk"));
    assert_eq!(ready["size_bytes"], 64 << 20);
    assert!(ready["model"]
        .as_str()
        .unwrap()
        .starts_with("disk:rpm=15000"));
    assert_eq!(stat(&stat_file), vec![0; 17]);

    let loop_dev = match run_tool("losetup", &["-f", "--show", &disk]) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("SKIP {name}: {e}");
            return;
        }
    };
    cleanup.loop_dev = Some(loop_dev.clone());
    std::thread::sleep(Duration::from_millis(300)); // any udev probing settles
    let before = stat(&stat_file)[0];

    // record the loop device while reading known blocks through it
    let out_csv = dir.path().join("trace.csv");
    let recorder = Command::new(BIN)
        .args([
            "record",
            &loop_dev,
            "--duration",
            "3s",
            "-o",
            out_csv.to_str().unwrap(),
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800)); // tracing is on by now
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&loop_dev)
        .unwrap();
    let mut raw = vec![0u8; (128 << 10) + 4096];
    let at = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[at..at + (128 << 10)];
    let reads: Vec<(u64, usize)> = (0..12u64)
        .map(|i| {
            (
                (i * 5_000_003) % (60 << 20) / 4096 * 4096,
                4096usize << (i % 6),
            )
        })
        .collect();
    for &(off, len) in &reads {
        f.read_exact_at(&mut buf[..len], off).unwrap();
    }
    drop(f);
    let rec = recorder.wait_with_output().unwrap();
    if rec.status.code() == Some(1) && stderr(&rec).contains("tracefs") {
        eprintln!("SKIP {name} (record part): {}", stderr(&rec));
        return;
    }
    assert!(rec.status.success(), "{}", stderr(&rec));
    let summary: Value = serde_json::from_slice(&rec.stdout).unwrap();
    assert_eq!(summary["requests"], reads.len(), "{summary}");
    assert_eq!(summary["lost_events"], 0);

    // each read reached the emulator (the loop device has no cache in the way)
    let after = stat(&stat_file);
    assert!(
        after[0] >= before + reads.len() as u64,
        "{before} -> {after:?}"
    );

    // the trace has exactly those requests, and analyze reads it
    let text = std::fs::read_to_string(&out_csv).unwrap();
    let mut rows: Vec<(u64, usize)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f[3], "Read", "{l}");
            (f[4].parse().unwrap(), f[5].parse().unwrap())
        })
        .collect();
    rows.sort();
    let mut want = reads.clone();
    want.sort();
    assert_eq!(rows, want);
    let a = fallow(&["analyze", out_csv.to_str().unwrap(), "--json"]);
    assert!(a.status.success(), "{}", stderr(&a));
    let v: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["trace"]["requests"], reads.len());
    assert_eq!(v["trace"]["completions"]["kind"], "recorded");

    // stopping: refused while the loop device is attached, done after
    let pid = cleanup.pids[0];
    terminate(pid);
    std::thread::sleep(Duration::from_millis(500));
    assert!(is_mounted(&cleanup.mnt), "busy: still mounted");
    run_tool("losetup", &["-d", &loop_dev]).unwrap();
    cleanup.loop_dev = None;
    std::thread::sleep(Duration::from_millis(300));
    terminate(pid);
    let t = Instant::now();
    while is_mounted(&cleanup.mnt) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!is_mounted(&cleanup.mnt), "unmounted after SIGTERM");
    cleanup.pids.clear();
}

/// `fallow scrub` over an emulated disk that fails chosen sectors: the
/// report names exactly the blocks holding them, narrowed from 256 KiB
/// requests down to the smallest O_DIRECT read the target takes (4 KiB for
/// a file on FUSE: a 512-byte sector cannot be read alone there), and the
/// rest of the disk is scrubbed.
#[test]
#[ignore = "needs root"]
fn scrub_reports_exactly_the_sectors_the_emulated_disk_fails() {
    let name = "scrub_reports_exactly_the_sectors_the_emulated_disk_fails";
    can_emulate(name);
    let (dir, img, mnt, mut cleanup) = emu_scaffold(8 << 20);
    // sectors 1000-1007 (one 4 KiB block), 5000 alone, and 12000-12001
    let o = fallow(&[
        "emulate-disk",
        img.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--model",
        "none",
        "--fail",
        "1000-1007,5000,12000-12001",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ready: Value = serde_json::from_slice(&o.stdout).expect("one JSON line");
    cleanup.pids.push(ready["pid"].as_u64().unwrap() as u32);
    let disk = ready["disk"].as_str().unwrap().to_string();
    let o = fallow(&[
        "scrub",
        &disk,
        "--monitor",
        "none",
        "--policy",
        "aggressive",
        "--size",
        "256KiB",
        "--retries",
        "1",
        "--checkpoint",
        dir.path().join("ck.json").to_str().unwrap(),
        "--json",
    ]);
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    let ranges: Vec<(u64, u64)> = v["bad_ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap()))
        .collect();
    // the 4 KiB blocks that hold the failing sectors
    let blocks = |first: u64, last: u64| {
        let (a, b) = (first * 512, (last + 1) * 512 - 1);
        (a / 4096 * 4096, (b / 4096 + 1) * 4096 - 1)
    };
    assert_eq!(
        ranges,
        vec![blocks(1000, 1007), blocks(5000, 5000), blocks(12000, 12001)],
        "{v}"
    );
    // each holds its sectors and no other failing block was reported
    assert_eq!(ranges[0], (512_000, 516_095));
    assert_eq!(v["target_bytes"], 8 << 20);
    assert_eq!(v["scrubbed_bytes"], 8 << 20, "{v}");
    drop(cleanup);
}
