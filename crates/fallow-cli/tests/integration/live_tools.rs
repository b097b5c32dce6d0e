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
    let o = fallow(&[
        "emulate-disk",
        img.to_str().unwrap(),
        d,
        "--draws",
        "random",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--draws") && stderr(&o).contains("in-order or per-request"),
        "{}",
        stderr(&o)
    );
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
        "--draws",
        "per-request",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ready: Value = serde_json::from_slice(&o.stdout).expect("one JSON line");
    // the detached server was started with the flag, and says so
    assert_eq!(ready["draws"], "per-request");
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

/// `--budget` beside a tune result is refused, by clap for the two flags
/// and by the settings for `FALLOW_BUDGET` (and a config's `budget`); a
/// bad budget names where it came from.
#[test]
fn a_budget_and_a_tune_result_are_refused_together() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.img");
    File::create(&f).unwrap().set_len(1 << 20).unwrap();
    let (tune, tune_path) = common::tune_result(dir.path(), "64KiB");
    drop(tune);
    let f = f.to_str().unwrap();
    let t = tune_path.to_str().unwrap();
    let o = fallow(&["scrub", f, "--budget", "5%", "--tuned", t]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--tuned"), "{}", stderr(&o));
    let o = common::fallow_cmd(&["scrub", f, "--tuned", t, "--monitor", "none"])
        .env("FALLOW_BUDGET", "5%")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("FALLOW_BUDGET 5% and the tune result")
            && stderr(&o).contains("give one of them"),
        "{}",
        stderr(&o)
    );
    let o = fallow(&["scrub", f, "--budget", "fast", "--monitor", "none"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--budget") && stderr(&o).contains("`fast`"),
        "{}",
        stderr(&o)
    );
}

/// With no history a budgeted scrub starts at the least aggressive wait
/// (100 s: nothing read in a second) and says so, in the text and in
/// `--json`; without a block device it says the FG is not measured.
#[test]
fn a_budget_with_no_history_starts_least_aggressive_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.img");
    File::create(&f).unwrap().set_len(1 << 20).unwrap();
    let ck = dir.path().join("ck.json");
    let child = common::fallow_cmd(&[
        "scrub",
        f.to_str().unwrap(),
        "--budget",
        "5%",
        "--monitor",
        "none",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--json",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    terminate(child.id());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let b = &v["driver"]["budget"];
    assert_eq!(b["budget"], "5%", "{v}");
    assert_eq!(b["setting"], "fixed-wait:t=100s", "{v}");
    assert!(b["start"]
        .as_str()
        .unwrap()
        .starts_with("least aggressive (t=100s, no history)"));
    assert!(b["measure"].as_str().unwrap().starts_with("not measured"));
    assert_eq!(v["driver"]["bg_requests"], 0, "{v}");
    assert_eq!(v["policy"], "fixed-wait", "{v}");
}

/// A window kept by an earlier run (beside the checkpoint) is where the
/// next budgeted run starts; a bad one is an error naming the file and
/// the field.
#[test]
fn a_budgeted_scrub_starts_from_the_window_kept_beside_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.img");
    File::create(&f).unwrap().set_len(1 << 20).unwrap();
    let ck = dir.path().join("ck.json");
    let w = dir.path().join("ck.budget.json");
    // 2 idle intervals of 5 ms and 1 s between 10 ms busy periods
    std::fs::write(
        &w,
        r#"{"format":"fallow-budget-window","version":1,"budget":"5%","busy_ns":[10000000,10000000,10000000],"busy_requests":[1,1,1],"idle_ns":[5000000,1000000000],"collided":[false,false]}"#,
    )
    .unwrap();
    let args = |extra: &str| {
        vec![
            "scrub".to_string(),
            f.to_str().unwrap().to_string(),
            "--budget".into(),
            "5%".into(),
            "--monitor".into(),
            "none".into(),
            "--checkpoint".into(),
            ck.to_str().unwrap().to_string(),
            extra.into(),
        ]
    };
    let child = common::fallow_cmd(&[])
        .args(args("--json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    terminate(child.id());
    let o = child.wait_with_output().unwrap();
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    let b = &v["driver"]["budget"];
    assert!(
        b["start"]
            .as_str()
            .unwrap()
            .starts_with("saved window (2 idle intervals from"),
        "{b}"
    );
    // the first decision refitted on it
    assert_eq!(b["refits"], 1, "{b}");
    // no --size: the refit chose the request size too, one of the powers
    // of two from 64 KiB to 4 MiB, and the setting names it
    let size = b["request_size_bytes"].as_u64().expect("a refitted size");
    assert!(
        (16..=22).any(|k| size == 1 << k),
        "{size}: not 64 KiB..4 MiB"
    );
    assert!(b["setting"].as_str().unwrap().contains(",size="), "{b}");
    // the window was kept again, with the controller's share (no FG
    // measured with --monitor none: still the start's 1/2)
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&w).unwrap()).unwrap();
    assert_eq!(saved["version"], 2, "{saved}");
    assert_eq!(saved["model_scale"], 0.5, "{saved}");
    // a bad window: the run is refused, naming the file and the field
    std::fs::write(
        &w,
        r#"{"format":"fallow-budget-window","version":1,"budget":"5%","busy_ns":[1,2],"busy_requests":[1,0],"idle_ns":[3],"collided":[true]}"#,
    )
    .unwrap();
    let o = common::fallow_cmd(&[])
        .args(args("--restart"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("ck.budget.json") && stderr(&o).contains("busy_requests[1]: 0"),
        "{}",
        stderr(&o)
    );
}

/// Random 4 KiB O_DIRECT reads of `dev` at Poisson arrivals (10/s) until
/// `stop`; each read's (start, latency) in s since `t0`.
fn poisson_reader(
    dev: String,
    t0: Instant,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<(f64, f64)>> {
    std::thread::spawn(move || {
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&dev)
            .unwrap();
        let blocks = (1u64 << 30) / 4096;
        let mut raw = vec![0u8; 8192];
        let at = raw.as_ptr().align_offset(4096);
        let buf = &mut raw[at..at + 4096];
        // a 64-bit LCG (Knuth's MMIX constants): uniform in [0, 1)
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut u = || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut out = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let think = -0.1 * (1.0 - u()).ln();
            std::thread::sleep(Duration::from_secs_f64(think));
            let off = (u() * blocks as f64) as u64 * 4096;
            let s = Instant::now();
            f.read_exact_at(buf, off).unwrap();
            out.push((
                s.duration_since(t0).as_secs_f64(),
                s.elapsed().as_secs_f64(),
            ));
        }
        out
    })
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// `fallow scrub DEV --budget 5%` (docs/live.md) with no tune file on a loop
/// device over the emulated 7200 rpm HDD, against random FG reads at 10/s:
/// it starts at the least aggressive wait, refits as the window fills,
/// measures the FG's latency on the block tracepoints in agreement with
/// this test's own measurement, and keeps its window for the next run.
/// 8 s of FG alone, then 30 s with the scrub.
#[test]
#[ignore = "needs root"]
fn a_budgeted_scrub_on_the_emulated_hdd_refits_and_measures_the_fg() {
    let name = "a_budgeted_scrub_on_the_emulated_hdd_refits_and_measures_the_fg";
    can_emulate(name);
    if run_tool("losetup", &["--version"]).is_err() {
        println!("skip: {name}: no losetup");
        return;
    }
    let (dir, img, mnt, mut cleanup) = emu_scaffold(1 << 30);
    let o = fallow(&[
        "emulate-disk",
        img.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--model",
        "hdd",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ready: Value = serde_json::from_slice(&o.stdout).expect("one JSON line");
    cleanup.pids.push(ready["pid"].as_u64().unwrap() as u32);
    let disk = ready["disk"].as_str().unwrap().to_string();
    let loop_dev = match run_tool("losetup", &["-f", "--show", "--direct-io=on", &disk]) {
        Ok(l) => l,
        Err(e) => {
            println!("skip: {name}: {e}");
            return;
        }
    };
    cleanup.loop_dev = Some(loop_dev.clone());
    std::thread::sleep(Duration::from_millis(300)); // any udev probing settles

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let t0 = Instant::now();
    let reader = poisson_reader(loop_dev.clone(), t0, stop.clone());
    std::thread::sleep(Duration::from_secs(8));
    let scrub_from = t0.elapsed().as_secs_f64();
    let ck = dir.path().join("ck.json");
    let child = common::fallow_cmd(&[
        "scrub",
        &loop_dev,
        "--budget",
        "5%",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--json",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_secs(30));
    terminate(child.id());
    let o = child.wait_with_output().unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let fg = reader.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let b = &v["driver"]["budget"];
    println!("{}", serde_json::to_string_pretty(b).unwrap());
    if b["measure"] != "events" {
        println!("skip: {name} (measured part): {}", b["measure"]);
        return;
    }
    // the controller's steps: what the refit predicted against what was
    // measured at each setting
    for c in b["control"].as_array().unwrap() {
        println!(
            "step t={:.1}s {}: predicted {} measured {:+.1} % ± {:.1} % ({} reads, {} overlapped) → ×{:.2}, model budget {}{}",
            c["time_s"].as_f64().unwrap(),
            c["setting"].as_str().unwrap(),
            c["predicted"].as_f64().map_or("-".into(), |p| format!("{:+.1} %", p * 100.0)),
            c["measured"].as_f64().unwrap() * 100.0,
            c["measured_ci95"].as_f64().unwrap() * 100.0,
            c["fg_reads"],
            c["overlapped"],
            c["factor"].as_f64().unwrap(),
            c["model_budget"].as_str().unwrap(),
            if c["backed_off"] == true { ", backed off" } else { "" }
        );
    }
    // started least aggressive, then refitted on the window
    assert_eq!(b["history"][0]["knob"], "100s", "{b}");
    assert!(b["start"].as_str().unwrap().starts_with("least aggressive"));
    let refits = b["refits"].as_u64().unwrap();
    assert!(refits >= 2, "{refits} refits in 30 s: {b}");
    // the driver measured the FG: ~10 reads/s for 30 s (the newest kept)
    let m = &b["measured_recent"];
    let reads = m["fg_reads"].as_u64().unwrap();
    assert!(reads >= 150, "{m}");
    let slowdown = m["slowdown"].as_f64().unwrap();
    let ci = m["slowdown_ci95"].as_f64().unwrap();
    // the test's own view: FG alone (its first 8 s) against FG while the
    // scrub ran. 5 % budget; generous margins for a loaded 2-core machine
    let alone: Vec<f64> = fg
        .iter()
        .filter(|r| r.0 < scrub_from)
        .map(|r| r.1)
        .collect();
    let with: Vec<f64> = fg
        .iter()
        .filter(|r| r.0 >= scrub_from + 1.0)
        .map(|r| r.1)
        .collect();
    let ratio = mean(&with) / mean(&alone);
    println!(
        "FG alone {:.2} ms ({} reads), with the scrub {:.2} ms ({} reads): {:+.1} %; driver measured {:+.1} % ± {:.1} %, {} refits, {} BG requests",
        mean(&alone) * 1e3,
        alone.len(),
        mean(&with) * 1e3,
        with.len(),
        (ratio - 1.0) * 100.0,
        slowdown * 100.0,
        ci * 100.0,
        refits,
        v["driver"]["bg_requests"]
    );
    assert!(
        alone.len() >= 40 && with.len() >= 150,
        "{} {}",
        alone.len(),
        with.len()
    );
    // The driver's own measurement (clean reads of the same minutes as the
    // baseline) held the budget within its interval in 3 of 3 runs with the
    // controller (+2.1 ± 1.1 %, +2.4 ± 1.3 %, +4.3 ± 2.1 %; docs/live.md)
    assert!(
        slowdown <= 0.05 + ci,
        "driver measured {slowdown} ± {ci} against a 5 % budget"
    );
    // This test's own view (its first 8 s as the baseline) is not held to
    // 5 %: it moved +2 % to +16 % in those runs with 15 to 25 BG requests
    // in 30 s, too few to cost the FG that much (the emulator and the
    // tracing share 2 loaded cores with the FG). A bound that catches a
    // driver gone aggressive (a 1 MiB read back to back with every FG read
    // would double it), and agreement with the driver within 20 points
    assert!(ratio < 1.8, "FG slowed {ratio}× by a 5 % budget");
    assert!(
        (slowdown - (ratio - 1.0)).abs() < 0.20 + ci,
        "driver measured {slowdown} ± {ci}, this test {}",
        ratio - 1.0
    );
    // the window was kept beside the checkpoint for the next run
    let w = dir.path().join("ck.budget.json");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&w).unwrap()).unwrap();
    assert_eq!(saved["format"], "fallow-budget-window");
    assert!(saved["idle_ns"].as_array().unwrap().len() >= 100, "{saved}");
    drop(cleanup);
}
