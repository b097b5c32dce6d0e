//! `fallow scrub` end to end: the built binary on plain files (no root
//! needed) and, where we are root and `losetup` works, on loop devices —
//! including the reliability test: `kill -9` at 100 random moments across
//! a full scrub, resuming each time, then checking from the request log
//! that coverage is exactly `[0, size)` with at most one request repeated
//! per resume, and that the device's content is unchanged.

use crate::common;

use common::{json_of, need_root, path_str, stderr, tune_result, LoopDev, TestCommand};
use serde_json::Value;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The known content: byte i of the target.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i / 4096) as u32 * 31 + (i % 4096) as u32 % 251) as u8)
        .collect()
}

/// A temp dir with a target file of `len` pattern bytes.
fn setup(len: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("target.img");
    std::fs::write(&t, pattern(len)).unwrap();
    // flush it: an O_DIRECT read of dirty pages makes the kernel write them first
    std::fs::File::open(&t).unwrap().sync_all().unwrap();
    (dir, t)
}

/// `(first_byte, last_byte)` of every request logged, in log order.
fn logged(log: &Path) -> Vec<(u64, u64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("log line `{l}`: {e}"));
            (
                v["first_byte"].as_u64().unwrap(),
                v["last_byte"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Check that `ranges` cover `[0, size)` with no gap; return the bytes covered twice or more.
fn coverage_excess(ranges: &[(u64, u64)], size: u64) -> u64 {
    let mut r = ranges.to_vec();
    r.sort();
    let mut covered_to = 0u64; // next byte not yet covered
    let mut total = 0u64;
    for &(a, b) in &r {
        assert!(
            a <= covered_to,
            "gap: bytes {covered_to}..{a} never scrubbed"
        );
        covered_to = covered_to.max(b + 1);
        total += b + 1 - a;
    }
    assert_eq!(
        covered_to, size,
        "coverage ends at {covered_to}, not {size}"
    );
    total - size
}

/// `fallow scrub TARGET --monitor none --checkpoint CK`: a scrub of a
/// plain file with no disk watched, the command most tests here add to.
fn scrub_file(target: &Path, ck: &Path) -> TestCommand {
    let mut c = TestCommand::new(&["scrub"]);
    c.arg(target)
        .flag("--monitor", "none")
        .path_flag("--checkpoint", ck);
    c
}

/// `fallow scrub TARGET`.
fn scrub(target: impl AsRef<std::ffi::OsStr>) -> TestCommand {
    let mut c = TestCommand::new(&["scrub"]);
    c.arg(target);
    c
}

/// [`scrub_file`] as fast as it goes: `--policy aggressive`.
fn scrub_flat_out(target: &Path, ck: &Path) -> TestCommand {
    let mut c = scrub_file(target, ck);
    c.flag("--policy", "aggressive");
    c
}

#[test]
fn plain_file_json_report_has_the_keys_and_the_file_is_untouched() {
    let len = 5 * 1048576 + 1000;
    let (dir, t) = setup(len);
    let ck = dir.path().join("ck.json");
    let log = dir.path().join("log.jsonl");
    let v = scrub_flat_out(&t, &ck)
        .flag("--size", "1MiB")
        .path_flag("--log", &log)
        .json();
    assert_eq!(v["target_bytes"], len as u64);
    assert_eq!(v["scrubbed_bytes"], len as u64);
    // six requests of 1 MiB, the last one short
    assert_eq!(v["requests"], 6);
    assert_eq!(v["bad_ranges"], serde_json::json!([]));
    assert!(v["elapsed_s"].as_f64().unwrap() >= 0.0);
    assert_eq!(v["complete"], true);
    assert_eq!(v["outcome"], "finished");
    assert_eq!(v["policy"], "aggressive");
    assert_eq!(v["monitor"]["source"], "none");
    assert_eq!(coverage_excess(&logged(&log), len as u64), 0);
    assert_eq!(
        std::fs::read(&t).unwrap(),
        pattern(len),
        "the target changed"
    );
    let c: Value = serde_json::from_slice(&std::fs::read(&ck).unwrap()).unwrap();
    assert_eq!(
        (c["complete"].clone(), c["next_visit"].clone()),
        (Value::Bool(true), 6.into())
    );
}

#[test]
fn the_default_monitor_watches_the_files_disk_and_reports_its_cost() {
    let (dir, t) = setup(4 << 20);
    let ck = dir.path().join("ck.json");
    // the default monitor: no `--monitor none` here
    let v = TestCommand::new(&["scrub", path_str(&t), "--policy", "aggressive"])
        .path_flag("--checkpoint", &ck)
        .json();
    assert_eq!(v["scrubbed_bytes"], 4u64 << 20);
    let m = &v["monitor"];
    // a block device, or none when the temp dir is on tmpfs/overlayfs
    if m["source"] != "none" {
        assert!(m["samples"].as_u64().unwrap() > 0, "{m}");
        assert!(m["cpu_s"].as_f64().unwrap() > 0.0, "{m}");
        assert!(v["monitor_cpu_fraction"].as_f64().unwrap() < 1.0, "{v}");
    } else {
        eprintln!("note: the temp dir is on no block device sysfs knows; monitor is none");
    }
}

#[test]
fn staggered_order_visits_each_segment_once_regions_first() {
    let (dir, t) = setup(1 << 20);
    let log = dir.path().join("log.jsonl");
    let v = scrub_flat_out(&t, &dir.path().join("ck.json"))
        .args(["--size", "64KiB", "--order", "staggered", "--regions", "3"])
        .path_flag("--log", &log)
        .json();
    assert_eq!(
        (v["order"].clone(), v["regions"].clone()),
        ("staggered".into(), 3.into())
    );
    let l = logged(&log);
    // 16 segments in regions of 6, 5, 5: [0..6) [6..11) [11..16)
    let segs: Vec<u64> = l.iter().map(|r| r.0 / 65536).collect();
    assert_eq!(&segs[..7], &[0, 6, 11, 1, 7, 12, 2]);
    assert_eq!(coverage_excess(&l, 1 << 20), 0);
}

#[test]
fn resume_continues_where_the_last_run_stopped_with_nothing_repeated() {
    let len = 8 << 20;
    let (dir, t) = setup(len);
    let ck = dir.path().join("ck.json");
    let log = dir.path().join("log.jsonl");
    let scrub = || {
        let mut c = scrub_flat_out(&t, &ck);
        c.flag("--size", "512KiB").path_flag("--log", &log);
        c
    };
    let v = scrub().flag("--max-bytes", "3MiB").json();
    assert_eq!(
        (v["scrubbed_bytes"].clone(), v["complete"].clone()),
        ((3u64 << 20).into(), false.into())
    );
    // not resuming would lose the progress: refused
    scrub().bad_input(&["--resume", "--restart", "% done"]);
    let v = scrub().arg("--resume").json();
    assert_eq!(v["resumed_from_bytes"], 3u64 << 20);
    assert_eq!(v["run_bytes"], 5u64 << 20);
    assert_eq!(v["complete"], true);
    assert_eq!(coverage_excess(&logged(&log), len as u64), 0);
    // resuming a complete pass starts the next one
    let v = scrub().arg("--resume").json();
    assert_eq!(
        (v["pass"].clone(), v["resumed_from_bytes"].clone()),
        (2.into(), 0.into())
    );
}

#[test]
fn resume_without_a_checkpoint_starts_fresh_and_resume_takes_the_checkpoints_settings() {
    let (dir, t) = setup(1 << 20);
    let ck = dir.path().join("ck.json");
    let v = scrub_flat_out(&t, &ck)
        .args(["--resume", "--order", "staggered", "--regions", "4"])
        .args(["--size", "128KiB", "--max-bytes", "256KiB"])
        .json();
    assert_eq!(v["resumed_from_bytes"], 0);
    assert_eq!(v["scrubbed_bytes"], 256 * 1024);
    // no order or size given: the checkpoint's are used
    let v = scrub_flat_out(&t, &ck).arg("--resume").json();
    assert_eq!(v["order"], "staggered");
    assert_eq!(v["request_size_bytes"], 128 * 1024);
    assert_eq!(v["complete"], true);
}

#[test]
fn a_checkpoint_of_another_scrub_is_refused() {
    let (dir, t) = setup(1 << 20);
    let other = dir.path().join("other.img");
    std::fs::write(&other, pattern(1 << 20)).unwrap();
    let ck = dir.path().join("ck.json");
    scrub_flat_out(&t, &ck).flag("--max-bytes", "256KiB").json();
    let resume = |target: &Path, extra: &[&str], needles: &[&str]| {
        scrub_file(target, &ck)
            .arg("--resume")
            .args(extra)
            .bad_input(needles);
    };
    resume(
        &other,
        &[],
        &["ck.json", "this checkpoint is for", "other.img"],
    );
    resume(
        &t,
        &["--size", "64KiB"],
        &["request size is 1048576 bytes, not 65536"],
    );
    resume(
        &t,
        &["--order", "staggered"],
        &["order is sequential, not staggered"],
    );
    // the same path, but grown
    let mut f = std::fs::OpenOptions::new().append(true).open(&t).unwrap();
    f.write_all(&[0u8; 4096]).unwrap();
    drop(f);
    resume(&t, &[], &["bytes when the checkpoint was made"]);
}

#[test]
fn missing_targets_and_bad_settings_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck.json");
    let ckp = path_str(&ck);
    scrub("/no/such/disk")
        .flag("--checkpoint", ckp)
        .bad_input(&["/no/such/disk", "no such file or block device"]);
    scrub(dir.path())
        .flag("--checkpoint", ckp)
        .bad_input(&["is a directory"]);
    let (_d, t) = setup(65536);
    let tp = path_str(&t);
    // `fallow scrub T --checkpoint CK` and a flag of each case
    let scrub = || TestCommand::new(&["scrub", tp, "--checkpoint", ckp]);
    for (flag, value, needles) in [
        ("--policy", "nope", &["unknown policy `nope`"][..]),
        ("--policy", "oracle", &["clairvoyant"]),
        ("--policy", "fixed-wait:t=banana", &["fixed-wait:t"]),
        ("--max-rate", "fast", &["--max-rate", "fast"]),
        ("--window", "25:00-01:00", &["--window", "25:00-01:00"]),
        ("--size", "1000", &["multiple of"]),
        ("--monitor", "sdzz9", &["no block device `sdzz9`"]),
        ("--tuned", "/no/tune.json", &["/no/tune.json"]),
    ] {
        scrub().flag(flag, value).bad_input(needles);
    }
    scrub()
        .args(["--order", "sequential", "--regions", "4"])
        .bad_input(&["--regions"]);
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[scrub]\nmax_rate = \"64MiB/s\"\nregoins = 4\n").unwrap();
    scrub()
        .path_flag("--config", &cfg)
        .bad_input(&["bad.toml", "regoins"]);
    std::fs::write(&cfg, "[scrub]\nsize = \"big\"\n").unwrap();
    scrub()
        .path_flag("--config", &cfg)
        .bad_input(&["bad.toml", "size"]);
    std::fs::write(&ck, "{ not json").unwrap();
    scrub()
        .arg("--resume")
        .bad_input(&["ck.json", "not a fallow scrub checkpoint"]);
    let nodir = dir.path().join("no/such/dir/ck.json");
    let o = scrub_file(&t, &nodir).output();
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("no/such/dir"), "{}", stderr(&o));
}

#[test]
fn a_tune_result_sets_policy_size_and_a_config_file_the_rest() {
    let (dir, t) = setup(2 << 20);
    let (tuned, tune_path) = tune_result(dir.path(), "64KiB,256KiB");
    let ck = dir.path().join("ck.json");
    let v = scrub_file(&t, &ck).path_flag("--tuned", &tune_path).json();
    assert_eq!(v["policy"], tuned["best"]["spec"]);
    assert_eq!(v["policy_from"], "tune result");
    assert_eq!(v["request_size_bytes"], tuned["best"]["request_size_bytes"]);
    // a config: [live] policy beats the tune result, [scrub] gives order and size
    let cfg = dir.path().join("fallow.toml");
    std::fs::write(
        &cfg,
        "[live]\npolicy = \"aggressive\"\ntuned = \"tune.json\"\nmonitor = \"none\"\n\n[scrub]\nsize = \"128KiB\"\norder = \"staggered\"\nregions = 2\ncheckpoint = \"cfg-ck.json\"\n\n[run]\nwhatever = true\n",
    )
    .unwrap();
    let v = scrub(&t).path_flag("--config", &cfg).json();
    assert_eq!(
        (v["policy"].clone(), v["policy_from"].clone()),
        ("aggressive".into(), "config".into())
    );
    assert_eq!(
        (v["request_size_bytes"].clone(), v["regions"].clone()),
        ((128 * 1024).into(), 2.into())
    );
    assert!(dir.path().join("cfg-ck.json").is_file());
    // and a flag beats the config
    let v = scrub(&t)
        .path_flag("--config", &cfg)
        .args(["--restart", "--size", "64KiB"])
        .json();
    assert_eq!(v["request_size_bytes"], 65536);
}

#[test]
fn the_rate_ceiling_holds() {
    // 4 MiB at 8 MiB/s in 512 KiB requests: the first is free, the other
    // 3.5 MiB take at least 3.5/8 = 0.4375 s
    let (dir, t) = setup(4 << 20);
    let start = Instant::now();
    let v = scrub_flat_out(&t, &dir.path().join("ck.json"))
        .args(["--size", "512KiB", "--max-rate", "8MiB/s"])
        .json();
    let took = start.elapsed().as_secs_f64();
    assert!(v["run_elapsed_s"].as_f64().unwrap() >= 0.43, "{v}");
    assert!(took >= 0.43, "{took}");
    // the ceiling, not slow reads, made it last: it held requests back
    // (how long depends on how fast the reads themselves were)
    let throttled = v["driver"]["throttled_s"].as_f64().unwrap();
    let service = v["driver"]["bg_service_s"].as_f64().unwrap();
    assert!(throttled > 0.0, "{v}");
    assert!(throttled + service >= 0.43, "{v}");
}

/// Run `c` (with `--json`), send `sig` after `after`, return the output.
fn run_and_signal(mut c: TestCommand, after: Duration, sig: i32) -> Output {
    let child = c.arg("--json").spawn();
    std::thread::sleep(after);
    // SAFETY-free: kill(1) by pid
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status();
    child.wait_with_output().unwrap()
}

#[test]
fn outside_its_window_the_scrub_waits_and_a_signal_stops_it_cleanly() {
    let (dir, t) = setup(1 << 20);
    // a window two to three hours from now, in UTC (TZ is set for the child)
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 86_400;
    let hm = |s: u64| format!("{:02}:{:02}", (s / 3600) % 24, (s / 60) % 60);
    let window = format!("{}-{}", hm(now_s + 2 * 3600), hm(now_s + 3 * 3600));
    // SIGTERM (systemctl stop) ends it cleanly with status 0; SIGINT with 1
    for (sig, code) in [(15, 0), (2, 1)] {
        let ck = dir.path().join(format!("ck{sig}.json"));
        let mut c = scrub_flat_out(&t, &ck);
        c.flag("--window", &window).env("TZ", "UTC");
        let o = run_and_signal(c, Duration::from_millis(1500), sig);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
        let v = json_of(&o);
        assert_eq!(
            (v["outcome"].clone(), v["scrubbed_bytes"].clone()),
            ("stopped".into(), 0.into())
        );
        assert!(v["driver"]["throttled_s"].as_f64().unwrap() > 1.0, "{v}");
    }
}

#[test]
fn sigint_saves_the_checkpoint_and_resume_finishes_without_repeats() {
    let len = 8 << 20;
    let (dir, t) = setup(len);
    let ck = dir.path().join("ck.json");
    let log = dir.path().join("log.jsonl");
    let cmd = || {
        let mut c = scrub_flat_out(&t, &ck);
        c.args(["--size", "256KiB", "--max-rate", "8MiB/s"])
            .path_flag("--log", &log);
        c
    };
    let o = run_and_signal(cmd(), Duration::from_millis(400), 2);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json_of(&o);
    let done = v["scrubbed_bytes"].as_u64().unwrap();
    assert!(done > 0 && done < len as u64, "{v}");
    let v = cmd().arg("--resume").json();
    assert_eq!(v["resumed_from_bytes"], done);
    assert_eq!(v["complete"], true);
    // a graceful stop repeats nothing
    assert_eq!(coverage_excess(&logged(&log), len as u64), 0);
}

#[test]
fn scsi_verify_on_a_file_falls_back_with_a_message_or_refuses() {
    let (dir, t) = setup(1 << 20);
    let ck = dir.path().join("ck.json");
    let o = scrub_file(&t, &ck).arg("--verify-cmd").ok();
    assert!(
        stderr(&o).contains("does not take SCSI commands"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("O_DIRECT reads instead"),
        "{}",
        stderr(&o)
    );
    scrub_file(&t, &ck)
        .args(["--verify-cmd=required", "--restart"])
        .bad_input(&["--verify-cmd=required", "does not take SCSI commands"]);
}

#[test]
fn buffered_reads_when_asked() {
    let (dir, t) = setup(3 << 20);
    let v = scrub_flat_out(&t, &dir.path().join("ck.json"))
        .arg("--buffered")
        .json();
    assert_eq!(
        (v["direct_io"].clone(), v["scrubbed_bytes"].clone()),
        (false.into(), (3u64 << 20).into())
    );
    assert_eq!(std::fs::read(&t).unwrap(), pattern(3 << 20));
}

// ---------------------------------------------------------------- root only

/// A loop device over a temp file of pattern bytes; detached on drop.
struct Loop {
    dev: String,
    backing: PathBuf,
    len: usize,
    _attached: LoopDev,
    _dir: tempfile::TempDir,
}

impl Loop {
    /// `None` (with a printed reason) where loop devices cannot be made.
    fn new(len: usize) -> Option<Loop> {
        need_root("a loop device");
        let dir = tempfile::tempdir().unwrap();
        let backing = dir.path().join("loop.img");
        std::fs::write(&backing, pattern(len)).unwrap();
        std::fs::File::open(&backing).unwrap().sync_all().unwrap();
        let attached = match LoopDev::attach(&backing) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("skip: {e}");
                return None;
            }
        };
        Some(Loop {
            dev: attached.dev.clone(),
            backing,
            len,
            _attached: attached,
            _dir: dir,
        })
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    fn assert_unchanged(&self) {
        assert!(
            std::fs::read(&self.backing).unwrap() == pattern(self.len),
            "the backing file changed"
        );
        assert!(
            std::fs::read(&self.dev).unwrap() == pattern(self.len),
            "the device reads differently"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn a_loop_device_is_scrubbed_read_only_and_own_reads_are_not_foreground() {
    let Some(lo) = Loop::new(32 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let v = scrub(&lo.dev)
        .args(["--policy", "aggressive", "--size", "1MiB"])
        .args(["--order", "staggered", "--regions", "8"])
        .path_flag("--checkpoint", &dir.path().join("ck.json"))
        .json();
    assert_eq!(v["target_kind"], "block");
    assert_eq!(v["target_bytes"], (32u64 << 20));
    assert_eq!(v["scrubbed_bytes"], (32u64 << 20));
    assert_eq!(v["direct_io"], true);
    // the monitor watched the loop device and saw none of our 32 reads as FG
    assert_eq!(v["monitor"]["source"], lo.name());
    assert_eq!(v["monitor"]["busy_periods"], 0, "{}", v["monitor"]);
    assert_eq!(v["monitor"]["fg_read_bytes"], 0, "{}", v["monitor"]);
    assert_eq!(v["driver"]["collisions"], 0);
    lo.assert_unchanged();
}

#[test]
#[ignore = "needs root"]
fn foreground_reads_on_a_loop_device_are_seen_and_yielded_to() {
    let Some(lo) = Loop::new(64 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut child = scrub(&lo.dev)
        .args(["--policy", "fixed-wait:t=30ms", "--size", "256KiB"])
        .args(["--max-rate", "32MiB/s"])
        .path_flag("--checkpoint", &dir.path().join("ck.json"))
        .arg("--json")
        .spawn();
    // a foreground reader: a 4 KiB O_DIRECT read every ~20 ms for 1.5 s
    let start = Instant::now();
    let mut fg_reads = 0u64;
    while start.elapsed() < Duration::from_millis(1500) {
        let skip = (fg_reads * 997) % 16000;
        let ok = Command::new("dd")
            .args([
                &format!("if={}", lo.dev),
                "of=/dev/null",
                "bs=4096",
                "count=1",
                &format!("skip={skip}"),
                "iflag=direct",
                "status=none",
            ])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("skip: dd cannot read the loop device");
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        fg_reads += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json_of(&o);
    let m = &v["monitor"];
    eprintln!(
        "FG test: {fg_reads} dd reads; monitor saw {} busy periods, {} B read; driver {}",
        m["busy_periods"], m["fg_read_bytes"], v["driver"]
    );
    // each dd read is an FG arrival on an idle device (the policy waits 30 ms)
    let busy = m["busy_periods"].as_u64().unwrap();
    assert!(
        busy >= fg_reads / 2,
        "{busy} busy periods for {fg_reads} FG reads: {m}"
    );
    assert!(
        m["fg_read_bytes"].as_u64().unwrap() >= fg_reads / 2 * 4096,
        "{m}"
    );
    // and the policy was told of each idle interval
    assert!(
        v["driver"]["idle_intervals"].as_u64().unwrap() >= busy,
        "{v}"
    );
    assert_eq!(v["complete"], true);
    lo.assert_unchanged();
}

#[test]
#[ignore = "needs root"]
fn scsi_verify_on_a_loop_device_falls_back_with_a_clear_message() {
    let Some(lo) = Loop::new(4 << 20) else { return };
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck.json");
    let v = scrub(&lo.dev)
        .args(["--verify-cmd", "--policy", "aggressive"])
        .path_flag("--checkpoint", &ck)
        .json();
    assert_eq!(v["method"], "read");
    let w = v["warnings"].to_string();
    assert!(
        w.contains("does not take SCSI commands") && w.contains("loop"),
        "{w}"
    );
    scrub(&lo.dev)
        .arg("--verify-cmd=required")
        .path_flag("--checkpoint", &ck)
        .arg("--restart")
        .bad_input(&["--verify-cmd=required", &lo.dev, "SG_IO"]);
    lo.assert_unchanged();
}

#[test]
#[ignore = "needs root"]
fn non_root_gets_a_clear_message_for_a_block_device() {
    let Some(lo) = Loop::new(1 << 20) else { return };
    let dir = tempfile::tempdir().unwrap();
    // world-writable, so the checkpoint is not what fails
    let mut perm = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o777);
    std::fs::set_permissions(dir.path(), perm).unwrap();
    let ck = dir.path().join("ck.json");
    let mut c = scrub(&lo.dev);
    c.path_flag("--checkpoint", &ck).env("HOME", dir.path());
    let o = match c.command().uid(65534).gid(65534).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skip: cannot run the binary as nobody ({e})");
            return;
        }
    };
    let e = stderr(&o);
    if e.contains("Permission denied") && !e.contains(&lo.dev) {
        eprintln!("skip: nobody cannot execute the test binary here: {e}");
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains(&lo.dev) && e.contains("needs root"), "{e}");
}

#[test]
#[ignore = "needs root"]
fn kill_9_at_100_random_moments_then_resume_covers_the_device_exactly() {
    // 64 MiB in 128 KiB requests (512); each run is killed at a random
    // moment 0–50 ms after its start or its first request (below), 100
    // times, then a last run finishes.
    // So that the kills spread over the whole scrub whatever the machine's
    // speed, each run is given twice its share of the work (--max-bytes)
    // at a rate that takes ~100 ms (--max-rate; neither is part of a
    // checkpoint's identity): a kill 0-50 ms after its first request lands
    // on average a quarter of the way. A run that finishes its work first
    // exits by itself and is not counted as a kill; no run may complete
    // the pass before the last. (At ~40 ms, a loaded machine's late kills
    // let runs finish theirs: the progress per kill outran the share, the
    // shares fell to one request, which a run completes before it can be
    // killed, and the pass completed after 88 kills.)
    let Some(lo) = Loop::new(64 << 20) else {
        return;
    };
    let size = 64u64 << 20;
    let req = 128u64 << 10;
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck.json");
    let log = dir.path().join("log.jsonl");
    let cmd = |max_bytes: Option<u64>, rate: u64| -> TestCommand {
        let mut c = scrub(&lo.dev);
        c.args(["--resume", "--policy", "aggressive", "--size", "128KiB"])
            .flag("--max-rate", format!("{rate}/s"))
            .path_flag("--checkpoint", &ck)
            .path_flag("--log", &log);
        if let Some(m) = max_bytes {
            c.flag("--max-bytes", m.to_string());
        }
        c
    };
    let started = Instant::now();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (mut kills, mut runs, mut done) = (0u64, 0u64, 0u64);
    let mut progress_at_kill = Vec::new();
    while kills < 100 {
        runs += 1;
        assert!(runs < 1000, "{runs} runs for {kills} kills");
        let share = (size as f64 * 0.95 - done as f64).max(0.0) / (100 - kills) as f64;
        let cap = ((share * 2.0) as u64 / req * req)
            .clamp(req, (size - done).saturating_sub(req).max(req));
        let rate = ((cap as f64 / 0.100) as u64).max(1 << 20);
        // xorshift
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let wait = Duration::from_micros(seed % 50_000);
        let logged_before = std::fs::metadata(&log).map_or(0, |m| m.len());
        let mut child = cmd(Some(cap), rate).spawn_stdio(Stdio::null(), Stdio::piped());
        // Three runs in four are killed at a random moment after their
        // first request is logged, the fourth at a random moment after
        // it was started (often still starting up). A run's start-up
        // (exec, checkpoint, monitor) takes 20-300 ms depending on the
        // machine's load, so moments counted from the start alone left
        // every run of a loaded machine killed before it read anything.
        if runs % 4 != 0 {
            let t = Instant::now();
            while std::fs::metadata(&log).map_or(0, |m| m.len()) == logged_before
                && child.try_wait().unwrap().is_none()
                && t.elapsed() < Duration::from_secs(10)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        std::thread::sleep(wait);
        let killed = match child.try_wait().unwrap() {
            Some(status) => {
                let mut e = String::new();
                let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut e);
                assert!(status.success(), "a resumed run failed by itself: {e}");
                false
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                true
            }
        };
        let c: Value =
            serde_json::from_slice(&std::fs::read(&ck).unwrap_or_default()).unwrap_or(Value::Null);
        done = c["scrubbed_bytes"].as_u64().unwrap_or(0);
        if std::env::var_os("FALLOW_TEST_DEBUG").is_some() {
            eprintln!(
                "run {runs}: cap {cap}, rate {rate}, wait {wait:?}, killed {killed}, done {done}"
            );
        }
        if killed {
            progress_at_kill.push(done);
        }
        if c["complete"] == true {
            break;
        }
    }
    // the last run, to the end (if a killed run had not finished the pass)
    let c: Value = serde_json::from_slice(&std::fs::read(&ck).unwrap()).unwrap();
    if c["complete"] != true {
        let o = cmd(None, 64 << 20).output();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let c: Value = serde_json::from_slice(&std::fs::read(&ck).unwrap()).unwrap();
    assert_eq!(c["complete"], true, "{c}");
    assert_eq!(c["scrubbed_bytes"], size, "{c}");
    assert_eq!(c["next_visit"], size / req, "{c}");
    // every byte scrubbed; repeats at most one request per resume
    let ranges = logged(&log);
    let excess = coverage_excess(&ranges, size);
    assert!(
        excess <= kills * req,
        "{excess} bytes repeated over {kills} kills"
    );
    assert_eq!(kills, 100, "the scrub completed after {kills} kills");
    // the kills landed across the scrub, not only at its start
    let last = progress_at_kill.last().copied().unwrap_or(0);
    eprintln!(
        "kill -9 test: {kills} kills in {runs} runs over {:.1} s, progress at the last kill {:.0} %, {} requests logged, {} repeated",
        started.elapsed().as_secs_f64(),
        100.0 * last as f64 / size as f64,
        ranges.len(),
        excess / req
    );
    assert!(
        last >= size / 4,
        "the kills all landed in the first quarter: {progress_at_kill:?}"
    );
    lo.assert_unchanged();
}

#[test]
#[ignore = "needs root"]
fn a_loop_device_with_no_file_is_refused_clearly() {
    need_root("a loop device");
    let Ok(o) = Command::new("losetup").arg("-f").output() else {
        eprintln!("skip: no losetup");
        return;
    };
    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
    if !o.status.success() || !Path::new(&dev).exists() {
        eprintln!("skip: no free loop device node");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = scrub(&dev)
        .path_flag("--checkpoint", &dir.path().join("ck.json"))
        .output();
    if o.status.success() {
        eprintln!("skip: {dev} was attached meanwhile by someone else");
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("block device of 0 bytes"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn metrics_are_served_while_it_scrubs() {
    use std::io::{BufRead, BufReader, Read, Write};
    // 4 MiB at 4 MiB/s in 256 KiB requests: about a second of scrubbing
    let (dir, t) = setup(4 << 20);
    let mut child = scrub_flat_out(&t, &dir.path().join("ck.json"))
        .args(["--size", "256KiB", "--max-rate", "4MiB/s"])
        .flag("--metrics", "127.0.0.1:0")
        .spawn_stdio(Stdio::null(), Stdio::piped());
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut addr = None;
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line.trim().strip_prefix("fallow: metrics at http://") {
            addr = Some(rest.trim_end_matches("/metrics").to_string());
            break;
        }
        line.clear();
    }
    let addr = addr.expect("the metrics address on stderr");
    std::thread::sleep(Duration::from_millis(600));
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let value = |name: &str| -> f64 {
        body.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("{name} missing:\n{body}"))
            .parse()
            .unwrap()
    };
    // requests so far, each of 256 KiB
    let n = value("fallow_bg_requests_total");
    assert!(n >= 1.0, "{body}");
    assert_eq!(value("fallow_bg_bytes_total"), n * 262144.0, "{body}");
    assert_eq!(value("fallow_collisions_total"), 0.0, "{body}");
    assert!(
        body.contains("policy_state_seconds_total{state=\"bg-running\"}"),
        "{body}"
    );
    assert!(child.wait().unwrap().success());
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
}

/// `[metrics] addr` in the config serves metrics like `--metrics`; an
/// unknown key in `[metrics]` is an error.
#[test]
fn the_configs_metrics_table_serves_metrics() {
    let (dir, t) = setup(1 << 20);
    let cfg = dir.path().join("fallow.toml");
    std::fs::write(
        &cfg,
        "[live]\npolicy = \"aggressive\"\nmonitor = \"none\"\n[scrub]\ncheckpoint = \"ck.json\"\n[metrics]\naddr = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let o = scrub(&t).path_flag("--config", &cfg).ok();
    assert!(
        stderr(&o).contains("fallow: metrics at http://127.0.0.1:"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&cfg, "[metrics]\naddr = \"127.0.0.1:0\"\npath = \"/m\"\n").unwrap();
    scrub(&t).path_flag("--config", &cfg).bad_input(&[
        "fallow.toml",
        "[metrics]",
        "unknown field `path`",
    ]);
}

/// The `--json` progress lines on stderr: parsed, in order.
fn progress_lines(o: &Output) -> Vec<Value> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with(r#"{"event":"progress""#))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}`: {e}")))
        .collect()
}

/// GET `path` from `addr`; the body.
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    std::io::Read::read_to_string(&mut s, &mut resp).ok()?;
    resp.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// One gauge's value in a scrape.
fn gauge(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Progress — bytes done of the total, the pass, the rate and
/// the time left — as `--json` lines on stderr (stdout keeps the one
/// report) and as `fallow_scrub_*` gauges on the metrics endpoint.
#[test]
fn progress_is_printed_as_json_lines_and_served_as_metrics() {
    let len = 6 << 20;
    let (dir, t) = setup(len);
    let ck = dir.path().join("ck.json");
    // a free port for the endpoint (the address is not printed with --json)
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    // 6 MiB at 2 MiB/s: about 3 s, long enough for several lines and scrapes
    let child = scrub_flat_out(&t, &ck)
        .args(["--size", "256KiB", "--max-rate", "2MiB/s"])
        .flag("--metrics", &addr)
        .arg("--json")
        .spawn();
    // scrape until a scrub part-way is seen (or the run ends)
    let mut mid: Option<String> = None;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if let Some(b) = http_get(&addr, "/metrics") {
            let done = gauge(&b, "fallow_scrub_done_bytes").unwrap_or(0.0);
            if done > 0.0 && done < len as f64 {
                mid = Some(b);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["complete"], true, "{v}");

    let body = mid.expect("no scrape saw the scrub part-way");
    assert_eq!(gauge(&body, "fallow_scrub_target_bytes"), Some(len as f64));
    assert_eq!(gauge(&body, "fallow_scrub_pass"), Some(1.0));
    assert_eq!(gauge(&body, "fallow_scrub_complete"), Some(0.0));
    assert_eq!(gauge(&body, "fallow_scrub_bad_ranges"), Some(0.0));
    // the time left is what is left at the rate it reports
    let (done, rate, eta) = (
        gauge(&body, "fallow_scrub_done_bytes").unwrap(),
        gauge(&body, "fallow_scrub_rate_bytes_per_second").unwrap(),
        gauge(&body, "fallow_scrub_eta_seconds").unwrap(),
    );
    assert!(rate > 0.0, "{body}");
    assert!(
        ((len as f64 - done) / rate - eta).abs() < 1e-6 * eta.max(1.0),
        "{body}"
    );

    let lines = progress_lines(&o);
    assert!(lines.len() >= 3, "{}", stderr(&o));
    // the first line is the start, the last the end, and nothing goes back
    assert_eq!(lines[0]["scrubbed_bytes"], 0, "{:?}", lines[0]);
    assert_eq!(lines[0]["target_bytes"], len, "{:?}", lines[0]);
    let last = lines.last().unwrap();
    assert_eq!(last["scrubbed_bytes"], v["scrubbed_bytes"], "{last}");
    assert_eq!(
        (last["complete"].clone(), last["eta_s"].clone()),
        (true.into(), 0.0.into())
    );
    assert_eq!(last["pass"], 1, "{last}");
    let done: Vec<u64> = lines
        .iter()
        .map(|l| l["scrubbed_bytes"].as_u64().unwrap())
        .collect();
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "{done:?}");
    for l in &lines[1..lines.len() - 1] {
        // at 2 MiB/s a line every second is at most a few requests apart,
        // and the ETA is the bytes left over this run's rate
        let rate = l["run_bytes"].as_f64().unwrap() / l["run_elapsed_s"].as_f64().unwrap();
        let left = (len as u64 - l["scrubbed_bytes"].as_u64().unwrap()) as f64;
        let eta = l["eta_s"].as_f64().unwrap();
        assert!((left / rate - eta).abs() <= 1e-6 * eta.max(1.0), "{l}");
    }
}
