//! `fallow spindown` end to end against `fallow emulate-disk` with power
//! states: spin-downs and spin-ups as the policy says, the spin-up budget,
//! maintenance jobs riding spin-ups, the ATA path's refusal of a loop
//! device, and the agreement of a replayed real trace window with
//! `fallow energy`. Needs root and /dev/fuse (the trace test also the
//! shared HP trace): `#[ignore = "needs root"]`, counted as ignored
//! without `--include-ignored`. The bad-input
//! checks run everywhere.

use crate::common;

use common::{
    fallow, fallow_cmd, need_root, run_tool, shared_trace, stderr, stdout, terminate, Cleanup,
    LoopDev,
};
use serde_json::Value;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

#[test]
fn bad_input_exits_2_with_the_culprit_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let f = file.to_str().unwrap();
    let cfg = dir.path().join("s.toml");
    std::fs::write(&cfg, "policy = \"timeout\"\npolcy = 3\n").unwrap();
    let c = cfg.to_str().unwrap();
    let missing_state = format!("{d}/none.json");
    for (args, needle) in [
        (vec!["spindown"], "no disk given"),
        (vec!["spindown", f, "--policy", "sleepy"], "sleepy"),
        (vec!["spindown", f, "--max-spinups", "0/day"], "max-spinups"),
        (vec!["spindown", f, "--poll", "soon"], "--poll"),
        (vec!["spindown", f], "a file, not a disk"),
        (vec!["spindown", "--config", c], "line 2"),
        (
            vec!["spindown", "status", "--state", &missing_state],
            "none.json",
        ),
    ] {
        let o = fallow(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// Root and FUSE (asserted: the callers are `#[ignore = "needs root"]`),
/// and this file's emulated-disk tests one at a time: each runs a daemon
/// against timing on its own disk, and run side by side (as cargo does) on
/// a loaded 2-core machine one daemon's start was missed.
fn can_emulate(test: &str) -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    need_root(test);
    assert!(Path::new("/dev/fuse").exists(), "{test} needs /dev/fuse");
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Mount an emulated disk of `image_bytes` with `model` and the power
/// model `power_toml`; returns the temp dir, the mount point and the cleanup.
fn emulated(
    image_bytes: u64,
    model: &str,
    power_toml: &str,
) -> (tempfile::TempDir, PathBuf, Cleanup) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    File::create(&img).unwrap().set_len(image_bytes).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let power = dir.path().join("power.toml");
    std::fs::write(&power, power_toml).unwrap();
    let mut cleanup = Cleanup::new(&mnt);
    let o = fallow(&[
        "emulate-disk",
        img.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--model",
        model,
        "--power",
        power.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ready: Value = serde_json::from_slice(&o.stdout).unwrap();
    cleanup.pids.push(ready["pid"].as_u64().unwrap() as u32);
    assert_eq!(
        ready["power_file"].as_str().unwrap(),
        mnt.join("power").to_str().unwrap()
    );
    (dir, mnt, cleanup)
}

/// The emulator's power counters.
fn power(mnt: &Path) -> std::collections::HashMap<String, String> {
    std::fs::read_to_string(mnt.join("power"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn num(m: &std::collections::HashMap<String, String>, k: &str) -> f64 {
    m[k].parse().unwrap()
}

/// Read one 4 KiB block of the emulated disk; the time it took.
fn read_block(mnt: &Path, offset: u64) -> Duration {
    let f = File::open(mnt.join("disk")).unwrap();
    let mut buf = vec![0u8; 4096];
    let t = Instant::now();
    f.read_exact_at(&mut buf, offset).unwrap();
    t.elapsed()
}

fn start_daemon(args: &[&str]) -> Child {
    fallow_cmd(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: Child) -> (Value, String) {
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    (
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&o), stderr(&o))),
        stderr(&o),
    )
}

fn log_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A fast disk for tests: spin-up 0.3 s, spin-down 0.1 s, WD2500JD powers.
const FAST: &str = "spinup_s = 0.3\nshutdown_s = 0.1\n";

#[test]
#[ignore = "needs root"]
fn the_daemon_spins_the_emulated_disk_down_and_every_wake_is_logged() {
    let _serial = can_emulate("the_daemon_spins_the_emulated_disk_down_and_every_wake_is_logged");
    let (dir, mnt, _cleanup) = emulated(16 << 20, "const:2ms", FAST);
    let log = dir.path().join("events.jsonl");
    let state = dir.path().join("state.json");
    let t0 = Instant::now();
    let child = start_daemon(&[
        "spindown",
        mnt.to_str().unwrap(),
        "--policy",
        "timeout:t=0.5s",
        "--poll",
        "10ms",
        "--duration",
        "3.2s",
        "--log",
        log.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--json",
    ]);
    let at = |s: f64| {
        let d = Duration::from_secs_f64(s).saturating_sub(t0.elapsed());
        std::thread::sleep(d);
    };
    // spun down at about 0.5 s; watching it does not wake it
    at(1.2);
    let p = power(&mnt);
    assert_eq!(p["state"], "standby", "{p:?}");
    assert_eq!(num(&p, "spinups"), 0.0);
    assert_eq!(num(&p, "spindowns"), 1.0);
    // the control file takes `standby` and nothing else
    let e = std::fs::write(mnt.join("power"), "sleep please\n").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(22), "{e}");
    // the status file is there for `fallow spindown status`
    let o = fallow(&["spindown", "status", "--state", state.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("down"), "{}", stdout(&o));
    // every JSON fallow writes carries the schema version
    let version = Value::from(fallow_core::JSON_SCHEMA_VERSION);
    let o = fallow(&[
        "spindown",
        "status",
        "--state",
        state.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], version, "{v}");
    // a read pays the 0.3 s spin-up (plus 2 ms service)
    at(1.5);
    let waited = read_block(&mnt, 0);
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(900),
        "{waited:?}"
    );
    // spun down again at about 1.8 + 0.5 s; the next read wakes it again
    at(2.8);
    let waited = read_block(&mnt, 1 << 20);
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    let (status, err) = finish(child);
    assert_eq!(status["schema_version"], version, "{status}");
    let d = &status["disks"][0];
    // the next spin-down would be at about 3.6 s, after the end
    assert_eq!(d["spinups"], 2, "{err}");
    assert_eq!(d["spindowns"], 2, "{err}");
    let p = power(&mnt);
    assert_eq!((num(&p, "spinups"), num(&p, "spindowns")), (2.0, 2.0));
    // standby by hand: (1.5 − 0.6) + (2.8 − 2.4) = 1.3 s, give or take
    // the polling (10 ms) and the emulator's bookkeeping
    let standby_s = num(&p, "standby_ns") / 1e9;
    assert!((standby_s - 1.3).abs() < 0.2, "{standby_s}");
    // each spin-up's exposed delay is the 0.3 s spin-up
    let delay_s = num(&p, "exposed_delay_ns") / 1e9;
    assert!((delay_s - 0.6).abs() < 0.05, "{delay_s}");
    // energy by the WD2500JD's Table III: two spin-ups (148.5 J) and two
    // spin-downs (6.4 J); standby at 1.8 W, idle at 10 W, serving at 10.6 W.
    // (Sleeping 0.6 s at a time costs far more than it saves: the
    // break-even is 18 s.)
    let close = |got: f64, want: f64| assert!((got - want).abs() < 1e-3, "{got} vs {want}");
    close(num(&p, "cycle_j"), 2.0 * 148.5 + 2.0 * 6.4);
    close(num(&p, "standby_j"), num(&p, "standby_ns") / 1e9 * 1.8);
    close(num(&p, "idle_j"), num(&p, "idle_ns") / 1e9 * 10.0);
    close(
        num(&p, "always_on_j"),
        num(&p, "active_ns") / 1e9 * 10.6
            + (num(&p, "elapsed_ns") - num(&p, "active_ns")) / 1e9 * 10.0,
    );
    assert!(num(&p, "total_j") > num(&p, "always_on_j"), "{p:?}");
    // every wake is logged as a JSON line, naming this test's thread
    // (FUSE gives the emulator the requesting thread's id)
    let tid: u32 = std::fs::read_link("/proc/thread-self")
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let ev = log_events(&log);
    assert!(ev.iter().all(|e| e["schema_version"] == version), "{ev:?}");
    let wakes: Vec<&Value> = ev.iter().filter(|e| e["event"] == "wake").collect();
    assert_eq!(wakes.len(), 2, "{ev:?}");
    for w in wakes {
        assert_eq!(w["disk"], mnt.to_str().unwrap());
        assert!(w.get("unattributed").is_none(), "{w}");
        assert_eq!(w["issuers"][0]["pid"], tid, "{w}");
        // down 0.5..1.5 s and about 2.3..2.8 s
        assert!(w["down_s"].as_f64().unwrap() > 0.4, "{w}");
    }
    assert_eq!(
        ev.iter().filter(|e| e["event"] == "spin-down").count(),
        2,
        "{ev:?}"
    );
    assert!(err.contains("spun down"), "{err}");
}

#[test]
#[ignore = "needs root"]
fn a_spin_up_budget_lengthens_the_timeout_and_says_so() {
    // `--max-spinups N/h` is N in any hour (it was a bucket of a
    // day's rate), and `budget-held` is logged once per spell of
    // exhaustion, not once per idle interval it holds back. 2/h: the
    // spin-downs at ~0.3 s and ~1.4 s (0.8 s wake + 0.3 s spin-up + 0.3 s)
    // fill the hour; the idle intervals after the wakes at ~2.2 s and
    // ~3.2 s are both held, one line logged.
    let _serial = can_emulate("a_spin_up_budget_lengthens_the_timeout_and_says_so");
    let (dir, mnt, _cleanup) = emulated(16 << 20, "const:2ms", FAST);
    let log = dir.path().join("events.jsonl");
    let t0 = Instant::now();
    let child = start_daemon(&[
        "spindown",
        mnt.to_str().unwrap(),
        "--policy",
        "timeout:t=0.3s",
        "--max-spinups",
        "2/h",
        "--poll",
        "10ms",
        "--duration",
        "4.5s",
        "--log",
        log.to_str().unwrap(),
        "--state",
        dir.path().join("s.json").to_str().unwrap(),
        "--json",
    ]);
    for at_ms in [800, 2200, 3200] {
        std::thread::sleep(Duration::from_millis(at_ms).saturating_sub(t0.elapsed()));
        read_block(&mnt, at_ms * 4096);
    }
    let (status, err) = finish(child);
    let d = &status["disks"][0];
    assert_eq!(d["spindowns"], 2, "{err}");
    assert_eq!(d["spinups"], 2, "{err}");
    assert_eq!(d["budget_held"], 1, "{err}");
    assert_eq!(d["spindowns_in_window"], 2);
    assert_eq!(d["spindowns_24h"], 2);
    assert_eq!(d["max_spinups"], "2/h");
    let ev = log_events(&log);
    let held: Vec<&Value> = ev.iter().filter(|e| e["event"] == "budget-held").collect();
    assert_eq!(held.len(), 1, "{ev:?}");
    // two an hour: the next is allowed an hour after the first spin-down
    // (~0.3 s), counted from the held interval's start (~2.2 s)
    let first = ev.iter().find(|e| e["event"] == "spin-down").unwrap()["t_s"]
        .as_f64()
        .unwrap();
    let lengthened = held[0]["timeout_s"].as_f64().unwrap();
    let started = held[0]["t_s"].as_f64().unwrap() - 0.3;
    assert!(
        (lengthened - (3600.0 + first - started)).abs() < 0.5,
        "{lengthened} {first} {started}"
    );
    assert_eq!(held[0]["policy_timeout_s"], 0.3);
    assert_eq!(held[0]["used_in_window"], 2);
    assert!(err.contains("budget"), "{err}");
    assert_eq!(num(&power(&mnt), "spindowns"), 2.0);
}

#[test]
#[ignore = "needs root"]
fn the_daemons_energy_equals_the_emulated_disks_own_counters() {
    // the daemon once counted each spin-up's wait as busy at 10.6 W
    // and again as spin-up energy (15–41 % too high). The same run seen by
    // both: the daemon's status against the emulator's counters (the
    // difference of two snapshots around it), within 1 %. Spin-up 1 s and
    // shutdown 0.5 s, so the waits are long next to the service; timeout
    // 0.5 s: down at ~0.5, woken at 2.5 (up 3.5), reads at 3.7–3.9, down
    // at ~4.4, woken at 6.0 (up 7.0), the end at 7.3, idle. The end falls
    // in idle time on purpose: the emulator goes on counting the state the
    // disk is in after the daemon's exit, until the snapshot below, and
    // that slack is taken out of its idle figures. With the end at 8.5 s,
    // in standby, the slack went to standby instead (daemon 3.06 s, disk
    // 3.16 s, on a loaded machine).
    let _serial = can_emulate("the_daemons_energy_equals_the_emulated_disks_own_counters");
    let (dir, mnt, _cleanup) =
        emulated(16 << 20, "const:5ms", "spinup_s = 1.0\nshutdown_s = 0.5\n");
    let before = power(&mnt);
    let t0 = Instant::now();
    let child = start_daemon(&[
        "spindown",
        mnt.to_str().unwrap(),
        "--policy",
        "timeout:t=0.5s",
        // the emulator's model (emulated() wrote it there)
        "--power",
        dir.path().join("power.toml").to_str().unwrap(),
        "--poll",
        "10ms",
        "--duration",
        "7.3s",
        "--state",
        dir.path().join("s.json").to_str().unwrap(),
        "--json",
    ]);
    for (k, at_ms) in [2500u64, 3700, 3800, 3900, 6000].into_iter().enumerate() {
        std::thread::sleep(Duration::from_millis(at_ms).saturating_sub(t0.elapsed()));
        read_block(&mnt, (k as u64) << 20);
    }
    let (status, err) = finish(child);
    let after = power(&mnt);
    let diff = |k: &str| num(&after, k) - num(&before, k);
    let d = &status["disks"][0];
    assert_eq!(d["spinups"].as_f64().unwrap(), diff("spinups"), "{err}");
    assert_eq!(d["spindowns"].as_f64().unwrap(), diff("spindowns"), "{err}");
    assert_eq!((diff("spinups"), diff("spindowns")), (2.0, 2.0), "{err}");
    // the emulator also counted the daemon's start and exit (idle, at
    // 10 W, both: the schedule above ends in idle): take that slack out
    // of its idle figures
    let slack_s = diff("elapsed_ns") / 1e9 - status["uptime_s"].as_f64().unwrap();
    assert!((0.0..1.0).contains(&slack_s), "{slack_s}");
    let e = &d["energy_j"];
    let t = &d["time_s"];
    let f = |v: &Value| v.as_f64().unwrap();
    let within = |what: &str, live: f64, disk: f64, abs: f64| {
        assert!(
            (live - disk).abs() <= (0.01 * disk.abs()).max(abs),
            "{what}: daemon {live} vs disk {disk}\n{d}\n{after:?}"
        )
    };
    // times (s): the 10 ms poll is the daemon's resolution
    within("busy s", f(&t["busy"]), diff("active_ns") / 1e9, 0.03);
    within(
        "spin-up s",
        f(&t["spinning_up"]),
        diff("spinup_ns") / 1e9,
        0.03,
    );
    within(
        "spin-down s",
        f(&t["spinning_down"]),
        diff("spindown_ns") / 1e9,
        0.03,
    );
    within(
        "standby s",
        f(&t["standby"]),
        diff("standby_ns") / 1e9,
        0.03,
    );
    within(
        "idle s",
        f(&t["idle"]),
        diff("idle_ns") / 1e9 - slack_s,
        0.05,
    );
    // energy (J): each state, and the whole within 1 %
    within("busy J", f(&e["busy"]), diff("active_j"), 0.3);
    within(
        "idle J",
        f(&e["idle"]),
        diff("idle_j") - slack_s * 10.0,
        0.5,
    );
    within("standby J", f(&e["standby"]), diff("standby_j"), 0.1);
    within("cycle J", f(&e["power_cycle"]), diff("cycle_j"), 1e-6);
    within(
        "total J",
        f(&e["total"]),
        diff("total_j") - slack_s * 10.0,
        0.0,
    );
    within(
        "always-on J",
        f(&e["always_on"]),
        diff("always_on_j") - slack_s * 10.0,
        0.0,
    );
}

/// Processes whose command line is exactly `words` (NUL-separated).
fn processes_running(words: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = words
        .iter()
        .flat_map(|w| [w.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

#[test]
#[ignore = "needs root"]
fn sighup_reloads_sigterm_stops_the_jobs_and_status_knows_the_daemon_is_gone() {
    // SIGHUP once exited 0 (a logrotate HUP stopped the daemon for
    // good under Restart=on-failure); SIGTERM orphaned a running job and
    // the status still called it running; `status` reported an exited
    // daemon as running.
    let _serial =
        can_emulate("sighup_reloads_sigterm_stops_the_jobs_and_status_knows_the_daemon_is_gone");
    let (dir, mnt, _cleanup) = emulated(16 << 20, "const:2ms", FAST);
    let cfg = dir.path().join("spindown.toml");
    std::fs::write(&cfg, "policy = \"timeout:t=100s\"\n").unwrap();
    let log = dir.path().join("events.jsonl");
    let state = dir.path().join("s.json");
    let job = ["sh", "-c", "sleep 61.25"];
    let child = start_daemon(&[
        "spindown",
        mnt.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
        "--poll",
        "10ms",
        "--log",
        log.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--job",
        "sleep 61.25",
        "--job-every",
        "3s",
        "--job-deadline",
        "1s",
        "--json",
    ]);
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        num(&power(&mnt), "spindowns"),
        0.0,
        "the 100 s timeout runs"
    );
    // a new policy, and HUP: the daemon goes on under it (spun down
    // about 0.3 s after the reload), and reopens its log
    std::fs::write(&cfg, "policy = \"timeout:t=0.3s\"\n").unwrap();
    std::fs::rename(&log, dir.path().join("events.jsonl.1")).unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        num(&power(&mnt), "spindowns"),
        1.0,
        "spun down under the reloaded policy"
    );
    let ev = log_events(&log);
    let reloaded = ev
        .iter()
        .find(|e| e["event"] == "reloaded")
        .expect("a reloaded event in the reopened log");
    assert_eq!(reloaded["applied"], true, "{reloaded}");
    assert!(
        reloaded["message"]
            .as_str()
            .unwrap()
            .contains("timeout:t=0.3s"),
        "{reloaded}"
    );
    // the status checks the daemon runs
    let o = fallow(&["spindown", "status", "--state", state.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // the job is due at 3 s; the disk sleeps, so its deadline (1 s later)
    // spends a spin-up and it runs
    let t0 = Instant::now();
    while processes_running(&job).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the job never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    terminate(pid);
    let (status, err) = finish(child);
    let jobs = status["disks"][0]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{err}");
    assert_eq!(jobs[0]["stopped"], true, "{err}");
    assert!(jobs[0]["ended_s"].is_number(), "{err}");
    assert!(
        processes_running(&job).is_empty(),
        "the job was left running"
    );
    assert!(err.contains("stopped (the daemon is stopping)"), "{err}");
    let o = fallow(&["spindown", "status", "--state", state.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(&format!("not running: pid {pid}")),
        "{}",
        stderr(&o)
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(file["disks"][0]["jobs"][0]["stopped"], true);
}

/// A reload changes the disk list (a disk removed is
/// closed, one added is opened and logged as at a start, one kept keeps
/// its state) and the log's path (the `reloaded` event is the new log's
/// first line); a new status path is refused, said in that event; a
/// reload that cannot open a new disk changes nothing, the log included.
#[test]
#[ignore = "needs root"]
fn sighup_changes_the_disks_and_the_log_path() {
    let _serial = can_emulate("sighup_changes_the_disks_and_the_log_path");
    let (dir, a, _ca) = emulated(16 << 20, "const:2ms", FAST);
    let (dir_b, b, _cb) = emulated(16 << 20, "const:2ms", FAST);
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let cfg = dir.path().join("spindown.toml");
    let (log1, log2, log3) = (
        dir.path().join("one.jsonl"),
        dir.path().join("two.jsonl"),
        dir.path().join("three.jsonl"),
    );
    let (state1, state2) = (dir.path().join("s1.json"), dir_b.path().join("s2.json"));
    let write_cfg = |log: &Path, state: &Path, disks: &[(&str, &str)]| {
        let mut t = format!(
            "log = \"{}\"\nstate = \"{}\"\n",
            log.display(),
            state.display()
        );
        for (dev, policy) in disks {
            t.push_str(&format!(
                "[[disk]]\ndev = \"{dev}\"\npolicy = \"{policy}\"\n"
            ));
        }
        std::fs::write(&cfg, t).unwrap();
    };
    write_cfg(&log1, &state1, &[(a_s, "timeout:t=0.3s")]);
    let child = start_daemon(&[
        "spindown",
        "--config",
        cfg.to_str().unwrap(),
        "--poll",
        "10ms",
        "--json",
    ]);
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        num(&power(&a), "spindowns"),
        1.0,
        "a spun down under its 0.3 s"
    );
    // A out, B in (0.3 s), a new log and a new status path
    write_cfg(&log2, &state2, &[(b_s, "timeout:t=0.3s")]);
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        num(&power(&b), "spindowns"),
        1.0,
        "b is watched after the reload"
    );
    // a read wakes A, which nobody watches now: no wake is logged for it
    read_block(&a, 8192);
    std::thread::sleep(Duration::from_millis(300));
    let ev2 = log_events(&log2);
    assert_eq!(ev2[0]["event"], "reloaded", "{ev2:?}");
    assert_eq!(ev2[0]["applied"], true, "{ev2:?}");
    let message = ev2[0]["message"].as_str().unwrap();
    for want in [
        format!("{a_s}: removed"),
        format!("{b_s}: added"),
        format!("log {} (was {})", log2.display(), log1.display()),
        format!("state NOT changed: still {}", state1.display()),
    ] {
        assert!(message.contains(&want), "{want} not in: {message}");
    }
    assert!(
        ev2.iter()
            .any(|e| e["event"] == "start" && e["disk"] == b_s),
        "{ev2:?}"
    );
    assert!(
        ev2.iter()
            .all(|e| e["disk"] != a_s || e["event"] == "reloaded"),
        "A is still watched: {ev2:?}"
    );
    let ev1 = log_events(&log1);
    assert!(ev1.iter().all(|e| e["event"] != "reloaded"), "{ev1:?}");
    assert!(ev1
        .iter()
        .any(|e| e["event"] == "start" && e["disk"] == a_s));
    assert!(!state2.exists(), "the refused status path was written");
    // a disk that cannot be opened: nothing changes, the log included
    let missing = dir.path().join("no-such-disk");
    write_cfg(
        &log3,
        &state1,
        &[
            (b_s, "timeout:t=0.3s"),
            (missing.to_str().unwrap(), "timeout"),
        ],
    );
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let ev2 = log_events(&log2);
    let refused = ev2.iter().rev().find(|e| e["event"] == "reloaded").unwrap();
    assert_eq!(refused["applied"], false, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("no-such-disk"),
        "{refused}"
    );
    assert!(std::fs::read_to_string(&log3)
        .unwrap_or_default()
        .is_empty());
    terminate(child.id());
    let (status, err) = finish(child);
    let disks: Vec<&str> = status["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["disk"].as_str().unwrap())
        .collect();
    assert_eq!(disks, [b_s], "{err}");
    assert!(state1.exists() && !state2.exists());
}

#[test]
#[ignore = "needs root"]
fn a_job_rides_a_spin_up_and_the_deadline_spends_one() {
    let _serial = can_emulate("a_job_rides_a_spin_up_and_the_deadline_spends_one");
    let (dir, mnt, _cleanup) = emulated(16 << 20, "const:2ms", FAST);
    let marker = dir.path().join("runs");
    // the job reads the disk (a scrub would) and notes that it ran
    let job = format!(
        "head -c 4096 {} > /dev/null && echo ran >> {}",
        mnt.join("disk").display(),
        marker.display()
    );
    let t0 = Instant::now();
    let child = start_daemon(&[
        "spindown",
        mnt.to_str().unwrap(),
        "--policy",
        "timeout:t=0.3s",
        "--poll",
        "10ms",
        "--job",
        &job,
        "--job-every",
        "1.5s",
        "--job-deadline",
        "1.5s",
        "--duration",
        "5.6s",
        "--state",
        dir.path().join("s.json").to_str().unwrap(),
        "--json",
    ]);
    // due at 1.5 s with the disk asleep (since 0.3 s): it waits; we wake
    // the disk at 2.0 s and the job rides that spin-up
    std::thread::sleep(Duration::from_millis(2000).saturating_sub(t0.elapsed()));
    read_block(&mnt, 8192);
    let (status, err) = finish(child);
    let d = &status["disks"][0];
    let jobs = d["jobs"].as_array().unwrap();
    let triggers: Vec<&str> = jobs
        .iter()
        .map(|j| j["trigger"].as_str().unwrap())
        .collect();
    // next due at ~2.0 + 1.5 s, asleep again by then; at the 1.5 s
    // deadline (~5.0 s) one spin-up is spent on it
    assert_eq!(triggers, ["rode-spin-up", "deadline"], "{err}");
    assert_eq!(d["spinups_saved"], 1);
    let started: Vec<f64> = jobs
        .iter()
        .map(|j| j["started_s"].as_f64().unwrap())
        .collect();
    assert!((started[0] - 2.0).abs() < 0.2, "{started:?}");
    assert!((started[1] - 5.0).abs() < 0.6, "{started:?}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\nran\n");
    // our read and the deadline run: two spin-ups
    assert_eq!(num(&power(&mnt), "spinups"), 2.0, "{err}");
}

#[test]
#[ignore = "needs root"]
fn the_ata_actuator_refuses_a_loop_device_in_words() {
    need_root("the_ata_actuator_refuses_a_loop_device_in_words");
    let dir = tempfile::tempdir().unwrap();
    let lo = match LoopDev::sparse(&dir.path().join("l.img"), 4 << 20) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("skip: the_ata_actuator_refuses_a_loop_device_in_words needs losetup: {e}");
            return;
        }
    };
    let dev = lo.dev.clone();
    let state = dir.path().join("s.json");
    // polled (FALLOW_MONITOR=poll), so that the daemon does not mount
    // tracefs on the test machine: this test is about the actuator
    let poll = |args: &[&str]| {
        fallow_cmd(args)
            .env("FALLOW_MONITOR", "poll")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = poll(&["spindown", &dev, "--state", state.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("does not take SG_IO") && stderr(&o).contains(&dev),
        "{}",
        stderr(&o)
    );
    // a dry run watches it anyway and says it has no actuator
    let o = poll(&[
        "spindown",
        &dev,
        "--dry-run",
        "--poll",
        "10ms",
        "--policy",
        "timeout:t=0.1s",
        "--duration",
        "0.5s",
        "--state",
        state.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["disks"][0]["spindowns"], 1, "{}", stderr(&o));
    assert_eq!(v["dry_run"], true);
    assert!(stderr(&o).contains("would spin down"), "{}", stderr(&o));
}

/// One request of the replayed window: arrival (s from the window's
/// start), byte offset, size.
type Req = (f64, u64, u32);

/// Completions of `reqs` through one FCFS server of constant `service_s`
/// (the emulator's `const:` model and `fallow energy --service const:`):
/// an independent short routine for choosing the window.
fn fcfs_completions(reqs: &[Req], service_s: f64) -> Vec<f64> {
    let mut free = 0.0f64;
    reqs.iter()
        .map(|&(a, _, _)| {
            free = free.max(a) + service_s;
            free
        })
        .collect()
}

/// The first window of `len_s` of `trace` (arrivals from 0) with at least
/// `min_cycles` idle gaps long enough for a clean spin-down cycle and no
/// gap within `margin_s` of the decision boundaries (the timeout, and the
/// timeout plus the spin-down), where polling latency could flip a
/// decision.
fn pick_window(
    arrivals_s: &[f64],
    offsets: &[u64],
    sizes: &[u32],
    len_s: f64,
    timeout_s: f64,
    shutdown_s: f64,
    service_s: f64,
) -> Option<Vec<Req>> {
    let n = arrivals_s.len();
    let mut i = 0;
    while i < n {
        let start = arrivals_s[i];
        let reqs: Vec<Req> = (i..n)
            .take_while(|&k| arrivals_s[k] < start + len_s)
            .map(|k| (arrivals_s[k] - start, offsets[k], sizes[k]))
            .collect();
        if (5..=300).contains(&reqs.len()) {
            let done = fcfs_completions(&reqs, service_s);
            let gaps: Vec<f64> = (1..reqs.len())
                .map(|k| reqs[k].0 - done[k - 1])
                .filter(|g| *g > 0.0)
                .collect();
            let near = |g: f64, b: f64| (g - b).abs() < 0.25;
            let clean = gaps
                .iter()
                .all(|&g| !near(g, timeout_s) && !near(g, timeout_s + shutdown_s));
            let cycles = gaps
                .iter()
                .filter(|&&g| g > timeout_s + shutdown_s + 0.5)
                .count();
            // the window ends at its last completion: no idle tail to compare
            if clean && cycles >= 3 {
                return Some(reqs);
            }
        }
        // next window starts after this one's first long gap
        i += reqs.len().max(1);
    }
    None
}

#[test]
#[ignore = "needs root and ../shared/traces"]
fn simulation_and_live_agree_on_a_real_trace_window() {
    simulation_and_live_agree(
        "simulation_and_live_agree_on_a_real_trace_window",
        "timeout:t=2s",
        Some("10ms"),
    );
}

#[test]
#[ignore = "needs root and ../shared/traces"]
fn simulation_and_live_agree_under_the_adaptive_policy() {
    // the same window under a policy that learns: its timeout after each
    // interval depends on how the interval ended, live as in simulation;
    // and at the default poll (50 ms), which must keep the decisions
    // (at the old 1 s default spin-ups differed by -18 %/+40 %)
    simulation_and_live_agree(
        "simulation_and_live_agree_under_the_adaptive_policy",
        "adaptive:t=2s,min=1s,max=8s",
        None,
    );
}

fn simulation_and_live_agree(test: &str, policy: &str, poll: Option<&str>) {
    let trace_path = shared_trace("hp-hplajw-1992/ajw.1week.srt");
    let _serial = can_emulate(test);
    // a fast-spinning disk so a 30 s window holds several cycles: spin-up
    // 1 s, spin-down 0.5 s, the WD2500JD's powers; timeout 2 s; 5 ms a request
    let (timeout_s, shutdown_s, service_s, len_s) = (2.0, 0.5, 0.005, 30.0);
    let power_toml = "spinup_s = 1.0\nshutdown_s = 0.5\n";
    let trace = fallow_core::trace::read_trace(&trace_path, &Default::default())
        .unwrap()
        .select_device(0)
        .unwrap();
    let arrivals: Vec<f64> = trace.arrival_ns().iter().map(|&a| a as f64 / 1e9).collect();
    let reqs = pick_window(
        &arrivals,
        trace.offset_bytes(),
        trace.size_bytes(),
        len_s,
        timeout_s,
        shutdown_s,
        service_s,
    )
    .expect("a window with three clean spin-down cycles in the HP trace");
    let (dir, mnt, _cleanup) = emulated(256 << 20, "const:5ms", power_toml);
    // the window as a plain trace for `fallow energy` (ms, like the trace)
    let window = dir.path().join("window.trace");
    let image_bytes: u64 = 256 << 20;
    // FUSE splits reads above 128 KiB, each part paying the constant
    // service time: cap sizes at 64 KiB, and fold offsets into the image
    let reqs: Vec<Req> = reqs
        .iter()
        .map(|&(a, o, s)| {
            let s = s.clamp(512, 64 << 10);
            (a, (o % (image_bytes - (64 << 10))) / 4096 * 4096, s)
        })
        .collect();
    let mut text = String::new();
    for &(a, o, s) in &reqs {
        text.push_str(&format!("{:.6} 0 {o} {s} r\n", a * 1e3));
    }
    std::fs::write(&window, text).unwrap();
    let pfile = dir.path().join("power.toml");
    let o = fallow(&[
        "energy",
        window.to_str().unwrap(),
        "--format",
        "plain",
        "--service",
        "const:5ms",
        "--power",
        pfile.to_str().unwrap(),
        "--policy",
        policy,
        "--local-fraction",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sim: Value = serde_json::from_slice(&o.stdout).unwrap();
    let run = sim["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == policy)
        .unwrap()
        .clone();
    let sim_spinups = run["spinups"].as_f64().unwrap();
    let sim_standby = run["time_s"]["standby"].as_f64().unwrap();
    let sim_delay = run["exposed_delay_s"].as_f64().unwrap();
    // 3 under the timeout, 2 under adaptive (it lengthens its timeout)
    assert!(sim_spinups >= 2.0, "{run}");

    // live: the daemon with the same policy, the window replayed open-loop
    // (the emulated disk's counters are polled: at `poll`, or the default
    // 50 ms when None)
    let state = dir.path().join("s.json");
    let mut args = vec![
        "spindown",
        mnt.to_str().unwrap(),
        "--policy",
        policy,
        "--power",
        pfile.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--json",
    ];
    if let Some(p) = poll {
        args.extend(["--poll", p]);
    }
    let child = start_daemon(&args);
    let daemon_pid = child.id();
    // let the daemon take the disk on before the first request
    std::thread::sleep(Duration::from_millis(300));
    let before = power(&mnt);
    replay(&mnt.join("disk"), &reqs);
    let after = power(&mnt);
    terminate(daemon_pid);
    let (status, err) = finish(child);
    let live_spinups = num(&after, "spinups") - num(&before, "spinups");
    let live_standby = (num(&after, "standby_ns") - num(&before, "standby_ns")) / 1e9;
    let live_delay = (num(&after, "exposed_delay_ns") - num(&before, "exposed_delay_ns")) / 1e9;
    eprintln!(
        "{} requests over {:.1} s: spin-ups sim {sim_spinups} live {live_spinups}; standby s sim {sim_standby:.3} live {live_standby:.3}; exposed delay s sim {sim_delay:.3} live {live_delay:.3}",
        reqs.len(),
        reqs.last().unwrap().0
    );
    assert_eq!(live_spinups, sim_spinups, "{err}");
    assert_eq!(status["disks"][0]["spinups"].as_f64().unwrap(), sim_spinups);
    let within = |live: f64, sim: f64| (live - sim).abs() <= 0.05 * sim;
    assert!(
        within(live_standby, sim_standby),
        "standby {live_standby} vs {sim_standby}"
    );
    assert!(
        within(live_delay, sim_delay),
        "delay {live_delay} vs {sim_delay}"
    );
    // energy: the daemon's figure and the simulation's within
    // 1 %, over the same window. The daemon ran before the first request
    // (idle, spinning) and a moment after the last: its extra time is
    // priced at idle power (10 W) and taken off.
    let sim_energy = run["energy_j"]["total"].as_f64().unwrap();
    let sim_window_s = run["time_s"]["total"].as_f64().unwrap();
    let d = &status["disks"][0];
    let extra_s = status["uptime_s"].as_f64().unwrap() - sim_window_s;
    let live_energy = d["energy_j"]["total"].as_f64().unwrap() - extra_s * 10.0;
    eprintln!("energy J: sim {sim_energy:.1} live {live_energy:.1} (daemon {:.1}, {extra_s:.2} s outside the window)", d["energy_j"]["total"]);
    assert!(
        (live_energy - sim_energy).abs() <= 0.01 * sim_energy,
        "energy: live {live_energy} vs sim {sim_energy}"
    );
}

/// The `len_s` window of `arrivals_s` with the most gaps longer than
/// `long_s` and at most `max_rate` requests a second on average, as
/// requests from 0 (two pointers over the trace).
fn busiest_idle_window(
    arrivals_s: &[f64],
    offsets: &[u64],
    sizes: &[u32],
    len_s: f64,
    long_s: f64,
    max_rate: f64,
) -> Option<Vec<Req>> {
    let n = arrivals_s.len();
    // long[k]: the gap before request k is long; prefix sums count them
    let mut prefix = vec![0usize; n + 1];
    for k in 0..n {
        let long = k > 0 && arrivals_s[k] - arrivals_s[k - 1] > long_s;
        prefix[k + 1] = prefix[k] + usize::from(long);
    }
    let (mut best, mut best_count) = (None, 0);
    let mut j = 0;
    for i in 0..n {
        j = j.max(i);
        while j < n && arrivals_s[j] < arrivals_s[i] + len_s {
            j += 1;
        }
        let count = prefix[j] - prefix[i + 1];
        if (j - i) as f64 <= max_rate * len_s && count > best_count {
            (best, best_count) = (Some((i, j)), count);
        }
    }
    let (i, j) = best?;
    Some(
        (i..j)
            .map(|k| (arrivals_s[k] - arrivals_s[i], offsets[k], sizes[k]))
            .collect(),
    )
}

/// The 50 ms poll fallback over a long window of the HP
/// trace (the emulated disk's counters are polled; the agreement tests
/// above use a 23 s window with 2–3 spin-ups). Every idle interval's
/// decision under `timeout:t=2s` is compared: the simulation's from an
/// independent routine (FCFS completions at 5 ms a request; a spin-down
/// where the gap exceeds the timeout; `fallow energy`'s total checked
/// against it) and the daemon's from its log (each `spin-down` matched to
/// the simulated one within 0.3 s). The window lasts `FALLOW_SPINDOWN_LONG_S`
/// seconds of real time (600 for the figures in docs/spindown.md); unset,
/// the test prints a `skip:` line, as it takes that long.
#[test]
#[ignore = "needs root and ../shared/traces"]
fn the_poll_fallback_keeps_the_decisions_over_a_long_window() {
    let test = "the_poll_fallback_keeps_the_decisions_over_a_long_window";
    let Some(len_s) = std::env::var("FALLOW_SPINDOWN_LONG_S")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
    else {
        eprintln!("skip: {test} replays FALLOW_SPINDOWN_LONG_S seconds of the HP trace in real time (600 for docs/spindown.md); set it to run");
        return;
    };
    let trace_path = shared_trace("hp-hplajw-1992/ajw.1week.srt");
    let _serial = can_emulate(test);
    let (timeout_s, shutdown_s, service_s) = (2.0, 0.5, 0.005);
    let policy = "timeout:t=2s";
    let power_toml = "spinup_s = 1.0\nshutdown_s = 0.5\n";
    let trace = fallow_core::trace::read_trace(&trace_path, &Default::default())
        .unwrap()
        .select_device(0)
        .unwrap();
    let arrivals: Vec<f64> = trace.arrival_ns().iter().map(|&a| a as f64 / 1e9).collect();
    let image_bytes: u64 = 256 << 20;
    let reqs: Vec<Req> = busiest_idle_window(
        &arrivals,
        trace.offset_bytes(),
        trace.size_bytes(),
        len_s,
        timeout_s + shutdown_s + 1.0,
        20.0,
    )
    .expect("a window of the HP trace")
    .iter()
    .map(|&(a, o, s)| {
        let s = s.clamp(512, 64 << 10);
        (a, (o % (image_bytes - (64 << 10))) / 4096 * 4096, s)
    })
    .collect();
    // the simulated decisions, by an independent routine: after each
    // completion the disk idles until the next arrival; a spin-down at
    // completion + timeout when the gap is longer (the request then waits
    // for the spin-up: the next completions shift, as in the emulator)
    let mut sim_downs: Vec<f64> = Vec::new();
    let mut free = 0.0f64;
    for &(a, _, _) in &reqs {
        let mut start = free.max(a);
        if free > 0.0 && a - free > timeout_s {
            sim_downs.push(free + timeout_s);
            // the rest of the shutdown, then the 1 s spin-up
            let down_at = free + timeout_s;
            start = a.max(down_at + shutdown_s) + 1.0;
        }
        free = start + service_s;
    }
    let (dir, mnt, _cleanup) = emulated(image_bytes, "const:5ms", power_toml);
    let window = dir.path().join("window.trace");
    let mut text = String::new();
    for &(a, o, s) in &reqs {
        text.push_str(&format!("{:.6} 0 {o} {s} r\n", a * 1e3));
    }
    std::fs::write(&window, text).unwrap();
    let pfile = dir.path().join("power.toml");
    let o = fallow(&[
        "energy",
        window.to_str().unwrap(),
        "--format",
        "plain",
        "--service",
        "const:5ms",
        "--power",
        pfile.to_str().unwrap(),
        "--policy",
        policy,
        "--local-fraction",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sim: Value = serde_json::from_slice(&o.stdout).unwrap();
    let run = sim["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == policy)
        .unwrap()
        .clone();
    let sim_spinups = run["spinups"].as_f64().unwrap();
    assert_eq!(
        sim_spinups,
        sim_downs.len() as f64,
        "the independent routine and `fallow energy` disagree: {run}"
    );
    let state = dir.path().join("s.json");
    let log = dir.path().join("events.jsonl");
    let child = start_daemon(&[
        "spindown",
        mnt.to_str().unwrap(),
        "--policy",
        policy,
        "--power",
        pfile.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
        "--json",
    ]);
    let daemon_pid = child.id();
    let t_daemon = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let before = power(&mnt);
    let t_replay_s = t_daemon.elapsed().as_secs_f64();
    replay(&mnt.join("disk"), &reqs);
    let after = power(&mnt);
    terminate(daemon_pid);
    let (status, err) = finish(child);
    let live_spinups = num(&after, "spinups") - num(&before, "spinups");
    // each live spin-down (daemon time, less the replay's start) matched
    // to an unmatched simulated one within 0.3 s
    let live_downs: Vec<f64> = log_events(&log)
        .iter()
        .filter(|e| e["event"] == "spin-down")
        .map(|e| e["t_s"].as_f64().unwrap() - t_replay_s)
        .filter(|&t| t > 0.0)
        .collect();
    let mut unmatched_sim = sim_downs.clone();
    let mut unmatched_live = Vec::new();
    for &t in &live_downs {
        match unmatched_sim.iter().position(|&s| (s - t).abs() < 0.3) {
            Some(k) => {
                unmatched_sim.remove(k);
            }
            None => unmatched_live.push(t),
        }
    }
    // the last simulated spin-down (after the last request) may not have
    // happened live yet when the replay ended: not a decision
    let last_arrival = reqs.last().unwrap().0;
    unmatched_sim.retain(|&s| s < last_arrival);
    let decision_errors = unmatched_sim.len() + unmatched_live.len();
    let sim_energy = run["energy_j"]["total"].as_f64().unwrap();
    let sim_window_s = run["time_s"]["total"].as_f64().unwrap();
    let d = &status["disks"][0];
    let extra_s = status["uptime_s"].as_f64().unwrap() - sim_window_s;
    let live_energy = d["energy_j"]["total"].as_f64().unwrap() - extra_s * 10.0;
    let lateness: Vec<f64> = live_downs
        .iter()
        .filter_map(|&t| {
            sim_downs
                .iter()
                .find(|&&s| (s - t).abs() < 0.3)
                .map(|&s| t - s)
        })
        .collect();
    let mean_late_ms = lateness.iter().sum::<f64>() / lateness.len().max(1) as f64 * 1e3;
    let max_late_ms = lateness.iter().cloned().fold(f64::MIN, f64::max) * 1e3;
    eprintln!(
        "{} requests over {:.1} s: spin-ups sim {sim_spinups} live {live_spinups} (daemon {}); decisions differing {decision_errors} (sim only {:?}, live only {:?}); spin-down lateness mean {mean_late_ms:.1} ms max {max_late_ms:.1} ms; energy J sim {sim_energy:.1} live {live_energy:.1} ({:+.3} %); daemon cpu_s {}",
        reqs.len(),
        last_arrival,
        d["spinups"],
        unmatched_sim,
        unmatched_live,
        (live_energy - sim_energy) / sim_energy * 100.0,
        status["cpu_s"],
    );
    assert!(
        decision_errors as f64 <= 0.01 * sim_spinups,
        "{decision_errors} decisions differ of {sim_spinups}: {err}"
    );
    assert!(
        (live_energy - sim_energy).abs() <= 0.01 * sim_energy,
        "energy: live {live_energy} vs sim {sim_energy}"
    );
}

/// Replay `reqs` open-loop on `disk`: each read issued at its arrival from
/// a pool of 8 threads (the emulator's queue orders them); returns after
/// the last completes.
fn replay(disk: &Path, reqs: &[Req]) {
    let (tx, rx) = std::sync::mpsc::channel::<(u64, u32)>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let rx = rx.clone();
            let f = File::open(disk).unwrap();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let next = rx.lock().unwrap().recv();
                    let Ok((off, size)) = next else { break };
                    f.read_exact_at(&mut buf[..size as usize], off).unwrap();
                }
            })
        })
        .collect();
    let t0 = Instant::now();
    for &(a, off, size) in reqs {
        std::thread::sleep(Duration::from_secs_f64(a).saturating_sub(t0.elapsed()));
        tx.send((off, size)).unwrap();
    }
    drop(tx);
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
#[ignore = "needs root"]
fn each_wake_names_the_process_that_caused_it() {
    let test = "each_wake_names_the_process_that_caused_it";
    let _serial = can_emulate(test);
    if let Err(why) = fallow_live::monitor::EventMonitor::available() {
        eprintln!("skip: {test} needs the block-tracepoint monitor: {why}");
        return;
    }
    let (dir, mnt, mut cleanup) = emulated(16 << 20, "const:2ms", FAST);
    // a loop device over the emulated disk: a block device with tracepoints
    let dev = match run_tool(
        "losetup",
        &["-f", "--show", mnt.join("disk").to_str().unwrap()],
    ) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skip: {test} needs losetup: {e}");
            return;
        }
    };
    cleanup.loop_dev = Some(dev.clone());
    let log = dir.path().join("events.jsonl");
    let t0 = Instant::now();
    let child = start_daemon(&[
        "spindown",
        &dev,
        "--policy",
        "timeout:t=0.3s",
        "--poll",
        "100ms",
        "--duration",
        "2.5s",
        "--log",
        log.to_str().unwrap(),
        "--state",
        dir.path().join("s.json").to_str().unwrap(),
        "--json",
    ]);
    // asleep from about 0.3 s; dd wakes it at 1.0 s
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(t0.elapsed()));
    let dd = std::process::Command::new("dd")
        .args([
            &format!("if={dev}"),
            "of=/dev/null",
            "bs=4096",
            "count=1",
            "skip=77",
            "iflag=direct",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dd_pid = dd.id();
    let out = dd.wait_with_output().unwrap();
    assert!(out.status.success());
    let (status, err) = finish(child);
    let d = &status["disks"][0];
    assert_eq!(d["spinups"], 1, "{err}");
    assert_eq!(d["wakers"][0]["process"], "dd", "{err}");
    assert_eq!(d["wakers"][0]["wakes"], 1);
    let ev = log_events(&log);
    let start = ev.iter().find(|e| e["event"] == "start").unwrap();
    assert!(
        start["source"].as_str().unwrap().contains("tracepoints"),
        "{start}"
    );
    let wake = ev.iter().find(|e| e["event"] == "wake").unwrap();
    assert_eq!(wake["issuers"][0]["pid"], dd_pid, "{wake}");
    assert_eq!(wake["issuers"][0]["comm"], "dd", "{wake}");
    assert!(wake.get("unattributed").is_none(), "{wake}");
    assert!(err.contains(&format!("by dd[{dd_pid}]")), "{err}");
}

/// Start `dd` reading one block of `disk`; its pid and exit.
fn dd_read(disk: &Path, skip: u32) -> (u32, std::process::Output) {
    let dd = std::process::Command::new("dd")
        .args([
            &format!("if={}", disk.display()),
            "of=/dev/null",
            "bs=4096",
            "count=1",
            &format!("skip={skip}"),
            "iflag=direct",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = dd.id();
    (pid, dd.wait_with_output().unwrap())
}

/// The emulated disk's own mount point has no tracepoints (the block
/// layer sees the FUSE server), but FUSE hands the emulator each
/// request's pid: its `issuers` file names the requester, and the daemon
/// names the process that woke the disk. Before, every wake of an
/// emulated disk was "unknown".
#[test]
#[ignore = "needs root"]
fn a_wake_on_the_emulated_disks_mount_point_names_the_process() {
    let test = "a_wake_on_the_emulated_disks_mount_point_names_the_process";
    let _serial = can_emulate(test);
    let (dir, mnt, _cleanup) = emulated(16 << 20, "const:2ms", FAST);
    let log = dir.path().join("events.jsonl");
    let t0 = Instant::now();
    let child = start_daemon(&[
        "spindown",
        mnt.to_str().unwrap(),
        "--policy",
        "timeout:t=0.3s",
        "--duration",
        "3.2s",
        "--log",
        log.to_str().unwrap(),
        "--state",
        dir.path().join("s.json").to_str().unwrap(),
        "--json",
    ]);
    // asleep from about 0.3 s; one dd wakes it at 1.0 s, another at 2.3 s
    // (after the 0.3 s spin-up and the next 0.3 s timeout)
    let disk = mnt.join("disk");
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(t0.elapsed()));
    let (pid1, o1) = dd_read(&disk, 77);
    assert!(o1.status.success());
    std::thread::sleep(Duration::from_millis(2300).saturating_sub(t0.elapsed()));
    let (pid2, o2) = dd_read(&disk, 99);
    assert!(o2.status.success());
    assert_ne!(pid1, pid2);
    let (status, err) = finish(child);
    let d = &status["disks"][0];
    assert_eq!(d["spinups"], 2, "{err}");
    assert_eq!(d["wakers"][0]["process"], "dd", "{err}");
    assert_eq!(d["wakers"][0]["wakes"], 2, "{err}");
    // the cgroup is this test's (dd inherits it), read independently
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let cgroup = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string);
    let ev = log_events(&log);
    let start = ev.iter().find(|e| e["event"] == "start").unwrap();
    assert!(
        start["source"].as_str().unwrap().contains("issuers"),
        "{start}"
    );
    let wakes: Vec<&Value> = ev.iter().filter(|e| e["event"] == "wake").collect();
    assert_eq!(wakes.len(), 2, "{ev:?}");
    for (w, pid) in wakes.iter().zip([pid1, pid2]) {
        assert_eq!(w["issuers"].as_array().unwrap().len(), 1, "{w}");
        assert_eq!(w["issuers"][0]["pid"], pid, "{w}");
        assert_eq!(w["issuers"][0]["comm"], "dd", "{w}");
        if let Some(c) = &cgroup {
            assert_eq!(w["issuers"][0]["cgroup"], c.as_str(), "{w}");
        }
        assert!(w.get("unattributed").is_none(), "{w}");
        assert!(err.contains(&format!("by dd[{pid}]")), "{err}");
    }
    assert!(!err.contains("by unknown"), "{err}");
}

#[test]
#[ignore = "needs root"]
fn with_tracefs_unmounted_at_start_attribution_still_names_the_process() {
    // without tracefs the daemon once polled once a second and named
    // every waker "unknown". It now mounts tracefs as perf and bpftrace
    // do. The daemon runs in a private mount namespace (unshare -m) with
    // tracefs unmounted there, so the host's mount table, and the other
    // tests on this machine, are untouched.
    let test = "with_tracefs_unmounted_at_start_attribution_still_names_the_process";
    let _serial = can_emulate(test);
    if !common::have("unshare") {
        println!("skip: {test} needs unshare (util-linux)");
        return;
    }
    let host_tracefs = tracefs_mounts();
    let (dir, mnt, mut cleanup) = emulated(16 << 20, "const:2ms", FAST);
    let dev = match run_tool(
        "losetup",
        &["-f", "--show", mnt.join("disk").to_str().unwrap()],
    ) {
        Ok(d) => d,
        Err(e) => {
            println!("skip: {test} needs losetup: {e}");
            return;
        }
    };
    cleanup.loop_dev = Some(dev.clone());
    let log = dir.path().join("events.jsonl");
    let script = format!(
        "umount /sys/kernel/debug/tracing 2>/dev/null; umount /sys/kernel/tracing 2>/dev/null; \
         if [ -d /sys/kernel/tracing/events ]; then echo 'tracefs still mounted' >&2; exit 9; fi; \
         exec {} spindown {dev} --policy timeout:t=0.3s --duration 2.5s --log {} --state {} --json",
        common::BIN,
        log.display(),
        dir.path().join("s.json").display()
    );
    let t0 = Instant::now();
    let child = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(t0.elapsed()));
    let dd = std::process::Command::new("dd")
        .args([
            &format!("if={dev}"),
            "of=/dev/null",
            "bs=4096",
            "count=1",
            "skip=77",
            "iflag=direct",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dd_pid = dd.id();
    assert!(dd.wait_with_output().unwrap().status.success());
    let (status, err) = finish(child);
    let ev = log_events(&log);
    let start = ev.iter().find(|e| e["event"] == "start").unwrap();
    assert!(start.get("events_unavailable").is_none(), "{start}");
    assert!(
        start["source"].as_str().unwrap().contains("tracepoints"),
        "{start}"
    );
    let d = &status["disks"][0];
    assert_eq!(d["spinups"], 1, "{err}");
    assert_eq!(d["wakers"][0]["process"], "dd", "{err}");
    let wake = ev.iter().find(|e| e["event"] == "wake").unwrap();
    assert_eq!(wake["issuers"][0]["pid"], dd_pid, "{wake}");
    // the host's mount table is as it was
    assert_eq!(
        tracefs_mounts(),
        host_tracefs,
        "the host's tracefs mounts changed"
    );
}

/// The tracefs lines of this (the host's) mount table.
fn tracefs_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(" - tracefs "))
        .map(|l| l.split(' ').nth(4).unwrap_or("").to_string())
        .collect()
}

#[test]
#[ignore = "needs root"]
fn prometheus_metrics_show_spin_downs_time_and_energy_per_disk() {
    let test = "prometheus_metrics_show_spin_downs_time_and_energy_per_disk";
    let _serial = can_emulate(test);
    use std::io::{BufRead, BufReader, Read, Write};
    let (dir, mnt, _cleanup) = emulated(16 << 20, "const:2ms", FAST);
    let mut child = start_daemon(&[
        "spindown",
        mnt.to_str().unwrap(),
        "--policy",
        "timeout:t=0.3s",
        "--poll",
        "10ms",
        "--duration",
        "1.5s",
        "--metrics",
        "127.0.0.1:0",
        "--state",
        dir.path().join("s.json").to_str().unwrap(),
    ]);
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut addr = None;
    let mut line = String::new();
    let mut said = String::new();
    while err.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line.split("metrics at http://").nth(1) {
            addr = Some(rest.trim().trim_end_matches("/metrics").to_string());
            break;
        }
        said.push_str(&line);
        line.clear();
    }
    let Some(addr) = addr else {
        let _ = child.kill();
        panic!(
            "the daemon did not say where its metrics are; it said:\n{said}\nexit: {:?}",
            child.wait()
        );
    };
    // spun down at about 0.3 s
    std::thread::sleep(Duration::from_millis(1000));
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let disk = mnt.to_str().unwrap();
    for needle in [
        format!("fallow_spindown_spindowns{{disk=\"{disk}\"}} 1"),
        format!("fallow_spindown_spinups{{disk=\"{disk}\"}} 0"),
        format!("fallow_spindown_state_seconds{{disk=\"{disk}\",state=\"down\"}}"),
        format!("fallow_spindown_energy_joules{{disk=\"{disk}\",state=\"power_cycle\"}} 6.4"),
        format!("fallow_spindown_always_on_energy_joules{{disk=\"{disk}\"}}"),
        // the emulated disk's counters are polled: no events, said here too
        format!("fallow_spindown_events{{disk=\"{disk}\"}} 0"),
        format!("fallow_spindown_budget_per_day{{disk=\"{disk}\"}} 0"),
    ] {
        assert!(body.contains(&needle), "{needle} not in\n{body}");
    }
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    assert!(child.wait().unwrap().success(), "{rest}");
}

#[test]
#[ignore = "needs root"]
fn an_idle_disk_wakes_the_daemon_only_at_its_deadlines_and_a_signal_ends_its_sleep() {
    let test = "an_idle_disk_wakes_the_daemon_only_at_its_deadlines_and_a_signal_ends_its_sleep";
    need_root(test);
    if let Err(why) = fallow_live::monitor::EventMonitor::available() {
        eprintln!("skip: {test} needs the block-tracepoint monitor: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = match LoopDev::sparse(&dir.path().join("img"), 16 << 20) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skip: {test} needs losetup: {e}");
            return;
        }
    };
    // a loop device has no ATA actuator: a dry run watches it anyway
    let args = |duration: &'static str| {
        vec![
            "spindown".to_string(),
            dev.dev.clone(),
            "--dry-run".into(),
            "--policy".into(),
            "timeout:t=0.5s".into(),
            "--poll".into(),
            "10ms".into(),
            "--duration".into(),
            duration.into(),
            "--state".into(),
            dir.path().join("s.json").to_str().unwrap().into(),
            "--json".into(),
        ]
    };
    let run = |monitor: &str| {
        let a = args("3s");
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let child = fallow_cmd(&a)
            .env("FALLOW_MONITOR", monitor)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        finish(child)
    };
    // the block-tracepoint source: no I/O, so the loop wakes for the
    // timeout at 0.5 s and the end at 3 s (plus a few 10 ms looks while
    // udev may still be probing the new device)
    let (events, err) = run("auto");
    let d = &events["disks"][0];
    assert_eq!(d["spindowns"], 1, "{err}");
    let timer = events["wakeups"]["timer"].as_u64().unwrap();
    assert!(timer <= 20, "{} timer wake-ups: {events}", timer);
    // the poller on the same disk reads the counters every 10 ms: about 300
    let (polled, err) = run("poll");
    assert_eq!(polled["disks"][0]["spindowns"], 1, "{err}");
    let polled_timer = polled["wakeups"]["timer"].as_u64().unwrap();
    assert!(
        polled_timer >= 100,
        "{polled_timer} timer wake-ups: {polled}"
    );
    // a daemon asleep until a deadline a minute away ends on SIGTERM at once
    let a = args("60s");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let child = start_daemon(&a);
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let (status, err) = finish(child);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "took {took:?} to stop: {err}"
    );
    assert_eq!(status["disks"][0]["spindowns"], 1, "{err}");
}
