//! The md executor against the recorded sysfs tree (`tests/data/md`) and a
//! fake kernel thread that does what md.rst says the kernel does with
//! those files. md is not in this machine's kernel: nothing here is a
//! live result.

use super::*;
use crate::driver::DriverConfig;
use crate::native::control::RecordedControl;
use crate::native::session::{NativeSession, SessionConfig, Watch};
use crate::scrub::Resume;
use fallow_core::outpath::OutputGuard;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

const MIB: u64 = 1 << 20;
/// The fixture: 32768 KiB per member = 65536 sectors; 512 KiB chunks.
const TOTAL: u64 = 65536;
const CHUNK: u64 = 1024;
/// Sectors whose page the fake kernel finds inconsistent (each in its own
/// 4 KiB page: md counts a page, 8 sectors, per md.rst "mismatch_count").
const BAD: [u64; 3] = [100, 30000, 60000];
/// md.c `md_do_sync`'s `window`: 32 pages of 4 KiB, in sectors.
const THROTTLE_WINDOW: u64 = 256;

/// A speed file's value as the kernel uses it, after showing a written
/// value as `*_show` would (`system` = the sysctl's `default`).
fn speed(p: &Path, default: u64) -> u64 {
    let t = std::fs::read_to_string(p).unwrap_or_default();
    let t = t.trim();
    if t == "system" {
        put(p, &format!("{default} (system)\n"));
        return default;
    }
    if let Ok(n) = t.parse::<u64>() {
        put(p, &format!("{n} (local)\n"));
        return n;
    }
    t.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// A copy of the fixture tree, and its md directory.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/md/sys");
    let st = std::process::Command::new("cp")
        .args(["-a", src])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let md = dir.path().join("sys/block/md0/md");
    (dir, md)
}

#[derive(Debug, Default)]
struct Seen {
    /// `[from, to)` sector ranges a check covered.
    covered: Vec<[u64; 2]>,
    /// Writes the real kernel would refuse.
    violations: Vec<String>,
    /// Checks started.
    starts: u64,
}

/// The kernel's side, from md.rst and md.c: `check` written to an idle
/// array starts at `sync_min` (reset `mismatch_cnt`), moves
/// `sync_completed` up to `sync_max` and waits there; `idle` stops it and
/// sets `sync_min` to where it got (md_do_sync, for requested checks); at
/// the array's end it goes idle and resets `sync_min`/`sync_max`.
///
/// Its speed limits as `md_do_sync` applies them: once every
/// [`THROTTLE_WINDOW`] sectors submitted it computes `currspeed` (KiB/s
/// since the oldest of 10 marks stepped every 3 s, plus 1) and, while that
/// is above `speed_min` and above `speed_max`, sleeps 500 ms and looks
/// again, submitting nothing. `sync_speed_min`/`_max` read `N (local)` or
/// `N (system)` (`sync_min_show`); a bare number or `system` written to
/// one is shown that way, as the kernel's `*_store` + `*_show` would.
struct FakeKernel {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn put(p: &Path, text: &str) {
    let tmp = p.with_extension("fake-tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, p).unwrap();
}

impl FakeKernel {
    fn start(md: &Path, step: u64) -> FakeKernel {
        FakeKernel::start_with_total(md, step, TOTAL)
    }

    /// A kernel whose check runs over `total` sectors (`resync_max_sectors`).
    fn start_with_total(md: &Path, step: u64, total: u64) -> FakeKernel {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (s2, seen2, md) = (stop.clone(), seen.clone(), md.to_path_buf());
        let thread = std::thread::spawn(move || {
            let f = |n: &str| md.join(n);
            let get = |n: &str| std::fs::read_to_string(md.join(n)).unwrap_or_default();
            let violation = |m: String| seen2.lock().unwrap().violations.push(m);
            // (from, at, sync_min it set, last sync_max, mismatches)
            let mut running: Option<(u64, u64, u64, u64, u64)> = None;
            // md_do_sync's throttle: marks (time, sectors), the last one,
            // the sectors at the last check, a 500 ms sleep in progress
            let t0 = std::time::Instant::now();
            let mut marks = [(t0, 0u64); 10];
            let mut resync_mark = marks[0];
            let mut last_mark = 0usize;
            let mut last_check = 0u64;
            let mut asleep_until: Option<std::time::Instant> = None;
            while !s2.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(300));
                let (speed_min, speed_max) = (
                    speed(&f("sync_speed_min"), 1000),
                    speed(&f("sync_speed_max"), 200_000),
                );
                let action = get("sync_action");
                let action = action.trim();
                let Some((from, at, min_set, last_max, bad)) = running else {
                    if action == "check" || action == "repair" {
                        let Ok(min) = get("sync_min").trim().parse::<u64>() else {
                            continue;
                        };
                        if min % CHUNK != 0 {
                            violation(format!("sync_min {min} is not a multiple of the chunk"));
                        }
                        put(&f("mismatch_cnt"), "0\n");
                        seen2.lock().unwrap().starts += 1;
                        running = Some((min, min, min, min, 0));
                        let now = std::time::Instant::now();
                        marks = [(now, 0); 10];
                        resync_mark = marks[0];
                        (last_mark, last_check, asleep_until) = (0, 0, None);
                    }
                    continue;
                };
                if action == "idle" {
                    // interrupted: sync_min first, then no longer running
                    seen2.lock().unwrap().covered.push([from, at]);
                    put(&f("sync_min"), &format!("{at}\n"));
                    put(&f("sync_completed"), "none\n");
                    running = None;
                    continue;
                }
                let (Ok(min), Ok(max)) = (
                    get("sync_min").trim().parse::<u64>(),
                    parse_sync_max(&get("sync_max")),
                ) else {
                    continue; // a write in progress
                };
                if min != min_set {
                    violation(format!("sync_min written ({min}) while a check runs"));
                }
                let max = max.unwrap_or(total);
                if max < last_max {
                    violation(format!(
                        "sync_max lowered from {last_max} to {max} while running"
                    ));
                }
                if max % CHUNK != 0 && max != total {
                    violation(format!("sync_max {max} is not a multiple of the chunk"));
                }
                let mut bad = bad;
                let mut at = at;
                let now = std::time::Instant::now();
                let io = at - from;
                if asleep_until.is_some_and(|u| now < u) {
                    // msleep(500)
                    running = Some((from, at, min_set, max, bad));
                    continue;
                }
                if asleep_until.take().is_some() || io >= last_check + THROTTLE_WINDOW {
                    // `repeat:` step the marks, then the speed test
                    last_check = io;
                    if now >= marks[last_mark].0 + Duration::from_secs(3) {
                        let next = (last_mark + 1) % marks.len();
                        resync_mark = marks[next];
                        marks[next] = (now, io);
                        last_mark = next;
                    }
                    let (mark_t, mark_io) = resync_mark;
                    let currspeed = (io - mark_io) / 2 / ((now - mark_t).as_secs() + 1) + 1;
                    if currspeed > speed_min && currspeed > speed_max {
                        asleep_until = Some(now + Duration::from_millis(500));
                        running = Some((from, at, min_set, max, bad));
                        continue;
                    }
                }
                if at < max.min(total) {
                    let next = (at + step).min(max).min(total);
                    bad += 8 * BAD.iter().filter(|&&b| b >= at && b < next).count() as u64;
                    at = next;
                    put(&f("mismatch_cnt"), &format!("{bad}\n"));
                    put(&f("sync_completed"), &format!("{at} / {total}\n"));
                }
                if at >= total {
                    seen2.lock().unwrap().covered.push([from, total]);
                    put(&f("sync_min"), "0\n");
                    put(&f("sync_max"), "max\n");
                    put(&f("sync_completed"), "none\n");
                    put(&f("sync_action"), "idle\n");
                    running = None;
                    continue;
                }
                running = Some((from, at, min_set, max, bad));
            }
        });
        FakeKernel {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

fn target() -> NativeTarget {
    NativeTarget::parse("md:/dev/md0").unwrap().unwrap()
}

fn native_cfg(ck: &Path, resume: Resume, max_bytes: Option<u64>) -> NativeConfig {
    NativeConfig {
        checkpoint_path: Some(ck.to_path_buf()),
        resume,
        max_bytes,
        ..NativeConfig::default()
    }
}

fn session_cfg() -> SessionConfig {
    SessionConfig {
        policy: "aggressive".into(),
        driver: DriverConfig {
            bg_size_bytes: MIB,
            ..DriverConfig::default()
        },
        watch: Watch::Auto,
        interval_ns: 1_000_000,
        guardian: None,
    }
}

fn text(md: &Path, f: &str) -> String {
    std::fs::read_to_string(md.join(f))
        .unwrap()
        .trim()
        .to_string()
}

/// Writes to `file` in the control's log, in order.
fn writes(ctl: &RecordedControl, file: &str) -> Vec<String> {
    ctl.log()
        .iter()
        .filter_map(|l| l.strip_prefix("write "))
        .filter_map(|l| {
            let (p, t) = l.split_once(' ')?;
            p.ends_with(&format!("/{file}")).then(|| t.to_string())
        })
        .collect()
}

#[test]
fn a_whole_check_runs_window_by_window_through_the_driver() {
    let (dir, md) = tree();
    let ck = dir.path().join("md0.json");
    let kernel = FakeKernel::start(&md, 256);
    let ctl = Arc::new(RecordedControl::new(dir.path()));
    let s = NativeSession::open(
        &target(),
        &native_cfg(&ck, Resume::No, None),
        &session_cfg(),
        ctl.clone(),
    )
    .unwrap();
    // members: sdb, and sdc1 standing for its disk sdc
    assert_eq!(s.devices(), vec!["sdb".to_string(), "sdc".to_string()]);
    let out = s.run(&AtomicBool::new(false)).unwrap();
    let seen = kernel.stop();
    let r = &out.report;
    assert!(r.complete, "{r:?}");
    assert_eq!(r.scrubbed_bytes, TOTAL * 512);
    // 1 MiB windows = 2048 sectors: 65536 / 2048 = 32
    assert_eq!(r.run_requests, 32);
    assert_eq!(out.drive.bg_requests, 32);
    assert_eq!(r.native["mismatch_cnt"], 8 * BAD.len() as u64);
    // sync_max raised window by window, the last to `max`
    let mut want: Vec<String> = (1..32).map(|k| (k * 2048).to_string()).collect();
    want.push("max".into());
    // then put back as the user had it
    want.push("max".into());
    assert_eq!(writes(&ctl, "sync_max"), want);
    assert_eq!(writes(&ctl, "sync_action"), vec!["check"]);
    assert_eq!(seen.covered, vec![[0, TOTAL]]);
    assert_eq!(seen.starts, 1);
    assert!(seen.violations.is_empty(), "{:?}", seen.violations);
    assert_eq!(
        (
            text(&md, "sync_action"),
            text(&md, "sync_min"),
            text(&md, "sync_max")
        ),
        ("idle".into(), "0".into(), "max".into())
    );
    let c = MdCheckpoint::load(&ck).unwrap().unwrap();
    assert!(
        c.complete && c.next_offset_bytes == TOTAL * 512 && c.detail.mismatch_sectors == 24,
        "{c:?}"
    );
}

/// A 4-disk raid10 (`md1` in the fixture: members sdd, sde,
/// sdf, sdg of 32 MiB, near=2, so 64 MiB = 131072 sectors of array). md
/// checks a raid10 over the array's address space: raid10.c `raid10_run`
/// sets `resync_max_sectors` to `raid10_size()`, the array size, which
/// `sync_completed` prints as its total (md.c `sync_completed_show`), not
/// the member size × 2 = 65536 fallow assumed (it stopped at its first
/// window: "the array now has 131072 sectors to check, not 65536").
#[test]
fn a_raid10_check_runs_over_the_array_size_not_the_member_size() {
    let (dir, _) = tree();
    let md = dir.path().join("sys/block/md1/md");
    // the independent count: 4 members × 65536 sectors / 2 copies
    let array_sectors = 4 * TOTAL / 2;
    assert_eq!(text(&md, "level"), "raid10");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sys/block/md1/size"))
            .unwrap()
            .trim(),
        array_sectors.to_string()
    );
    let ck = dir.path().join("md1.json");
    let kernel = FakeKernel::start_with_total(&md, 512, array_sectors);
    let ctl = Arc::new(RecordedControl::new(dir.path()));
    let s = NativeSession::open(
        &NativeTarget::parse("md:/dev/md1").unwrap().unwrap(),
        &native_cfg(&ck, Resume::No, None),
        &session_cfg(),
        ctl.clone(),
    )
    .unwrap();
    assert_eq!(
        s.devices(),
        ["sdd", "sde", "sdf", "sdg"].map(String::from).to_vec()
    );
    let out = s.run(&AtomicBool::new(false)).unwrap();
    let seen = kernel.stop();
    let r = &out.report;
    assert!(r.complete, "{r:?}");
    assert_eq!(r.scrubbed_bytes, array_sectors * 512);
    // 1 MiB windows of 2048 sectors: 131072 / 2048 = 64
    assert_eq!(r.run_requests, 64);
    assert_eq!(seen.covered, vec![[0, array_sectors]]);
    assert!(seen.violations.is_empty(), "{:?}", seen.violations);
    assert_eq!(text(&md, "sync_action"), "idle");
}

#[test]
fn stopped_midway_it_leaves_the_array_idle_and_resume_skips_nothing() {
    let (dir, md) = tree();
    let ck = dir.path().join("md0.json");
    let kernel = FakeKernel::start(&md, 512);
    let ctl = Arc::new(RecordedControl::new(dir.path()));
    // this run stops after 10 MiB (10 windows)
    let s = NativeSession::open(
        &target(),
        &native_cfg(&ck, Resume::No, Some(10 * MIB)),
        &session_cfg(),
        ctl.clone(),
    )
    .unwrap();
    let out = s.run(&AtomicBool::new(false)).unwrap();
    assert!(!out.report.complete);
    assert_eq!(out.report.scrubbed_bytes, 10 * MIB);
    // the held check was stopped and the bounds put back
    assert_eq!(writes(&ctl, "sync_action"), vec!["check", "idle"]);
    assert_eq!(
        (
            text(&md, "sync_action"),
            text(&md, "sync_min"),
            text(&md, "sync_max")
        ),
        ("idle".into(), "0".into(), "max".into())
    );
    assert_eq!(text(&md, "sync_completed"), "none");
    // an unfinished checkpoint is not started over by accident
    let e = Md::open(&target(), &native_cfg(&ck, Resume::No, None), ctl.clone())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--resume continues it"), "{e}");
    // resumed: the next window starts where the last one ended
    let ctl2 = Arc::new(RecordedControl::new(dir.path()));
    let s = NativeSession::open(
        &target(),
        &native_cfg(&ck, Resume::Yes, None),
        &session_cfg(),
        ctl2.clone(),
    )
    .unwrap();
    let out = s.run(&AtomicBool::new(false)).unwrap();
    let seen = kernel.stop();
    assert!(out.report.complete);
    assert_eq!(writes(&ctl2, "sync_min")[0], (10 * 2048).to_string());
    assert_eq!(seen.covered, vec![[0, 20480], [20480, TOTAL]]);
    assert_eq!(seen.starts, 2);
    assert!(seen.violations.is_empty(), "{:?}", seen.violations);
    // mismatches of both checks (the kernel resets the count at each start)
    assert_eq!(out.report.native["mismatch_cnt"], 24);
}

/// fallow killed with a check held at sync_max: the guardian's release
/// actions (what `fallow __guardian` performs) stop it and restore the
/// bounds; the checkpoint then resumes at the last finished window.
#[test]
fn the_guardians_release_actions_undo_a_held_check() {
    let (dir, md) = tree();
    let ck = dir.path().join("md0.json");
    let kernel = FakeKernel::start(&md, 512);
    let ctl: Arc<dyn Control> = Arc::new(RecordedControl::new(dir.path()));
    let mut m = Md::open(&target(), &native_cfg(&ck, Resume::No, None), ctl.clone()).unwrap();
    for _ in 0..3 {
        assert_eq!(m.run_one(MIB).unwrap(), Step::More);
    }
    let actions = m.release_actions();
    // kill -9: no finish()
    drop(m);
    wait_for(|| text(&md, "sync_completed") == "6144 / 65536");
    for a in &actions {
        a.perform().unwrap();
    }
    wait_for(|| text(&md, "sync_completed") == "none");
    let seen = kernel.stop();
    assert_eq!(seen.covered, vec![[0, 6144]]);
    assert_eq!(
        (
            text(&md, "sync_action"),
            text(&md, "sync_min"),
            text(&md, "sync_max")
        ),
        ("idle".into(), "0".into(), "max".into())
    );
    assert_eq!(
        MdCheckpoint::load(&ck).unwrap().unwrap().next_offset_bytes,
        6144 * 512
    );
}

fn wait_for(mut cond: impl FnMut() -> bool) {
    let t0 = monotonic_ns();
    while !cond() {
        assert!(monotonic_ns() - t0 < 5_000_000_000, "timed out");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn busy_absent_and_misconfigured_arrays_are_clear_errors() {
    let (dir, md) = tree();
    let ck = dir.path().join("md0.json");
    let ctl: Arc<dyn Control> = Arc::new(RecordedControl::new(dir.path()));
    let open = |t: &str, c: &NativeConfig| {
        Md::open(&NativeTarget::parse(t).unwrap().unwrap(), c, ctl.clone())
            .unwrap_err()
            .to_string()
    };
    let e = open("md:/dev/md9", &native_cfg(&ck, Resume::No, None));
    assert!(e.contains("md9/md/sync_action does not exist"), "{e}");
    let mut c = native_cfg(&ck, Resume::No, None);
    c.options.insert("action".into(), "scrub".into());
    assert!(open("md:/dev/md0", &c).contains("use check or repair"));
    put(&md.join("sync_action"), "resync\n");
    let e = open("md:/dev/md0", &native_cfg(&ck, Resume::No, None));
    assert!(e.contains("busy (sync_action is `resync`)"), "{e}");
    put(&md.join("sync_action"), "idle\n");
    put(&md.join("component_size"), "lots\n");
    let e = open("md:/dev/md0", &native_cfg(&ck, Resume::No, None));
    assert!(e.contains("component_size") && e.contains("`lots`"), "{e}");
}

/// The checkpoint passes the output guard before anything is written, and
/// a checkpoint is checked against the array (its size, its chunk) before
/// `--resume` trusts it.
#[test]
fn checkpoints_are_guarded_and_checked_against_the_array() {
    let (dir, _md) = tree();
    let ctl: Arc<dyn Control> = Arc::new(RecordedControl::new(dir.path()));
    let open = |c: &NativeConfig| Md::open(&target(), c, ctl.clone()).map(drop);
    let err = |c: &NativeConfig| open(c).unwrap_err().to_string();
    // a device node, a directory: refused even with --overwrite
    for (p, what) in [
        (Path::new("/dev/null"), "character device"),
        (dir.path(), "directory"),
    ] {
        let mut c = native_cfg(p, Resume::Restart, None);
        c.outputs = OutputGuard::new(true);
        let e = err(&c);
        assert!(e.contains("--checkpoint") && e.contains(what), "{e}");
    }
    // an input of the command (a config file, say), through a symlink too
    let input = dir.path().join("fallow.toml");
    std::fs::write(&input, "[scrub]\n").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    let mut c = native_cfg(&link, Resume::Restart, None);
    c.outputs = OutputGuard::new(true).input(&input);
    assert!(err(&c).contains("input of this command"));
    // a file fallow does not recognise: only with --overwrite, untouched before
    let notes = dir.path().join("notes.json");
    std::fs::write(&notes, "my notes\n").unwrap();
    let e = err(&native_cfg(&notes, Resume::Restart, None));
    assert!(
        e.contains("--overwrite") && e.contains("not a fallow checkpoint"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
    assert!(!crate::scrub::checkpoint::lock_path(&notes).exists());
    let mut c = native_cfg(&notes, Resume::Restart, None);
    c.outputs = OutputGuard::new(true);
    open(&c).unwrap();
    // fallow's own (an fstrim checkpoint here) is replaced by --restart
    let ck = dir.path().join("md0.json");
    let mut other = crate::native::fstrim::TrimCheckpoint::new(
        "fstrim:/srv",
        1 << 30,
        crate::native::fstrim::TrimDetail {
            minlen_bytes: 0,
            trimmed_bytes: 0,
        },
    );
    other.save(&ck).unwrap();
    open(&native_cfg(&ck, Resume::Restart, None)).unwrap();
    // against the array: the size and the chunk it had
    let fresh = |total_sectors: u64, chunk_sectors: u64| {
        let mut c = MdCheckpoint::new(
            "md:/dev/md0",
            total_sectors * 512,
            MdDetail {
                action: "check".into(),
                chunk_sectors,
                mismatch_sectors: 0,
            },
        );
        c.next_offset_bytes = 4 * chunk_sectors * 512;
        c.requests = 4;
        c.save(&ck).unwrap();
    };
    fresh(TOTAL, CHUNK);
    open(&native_cfg(&ck, Resume::Yes, None)).unwrap();
    fresh(TOTAL * 2, CHUNK);
    let e = err(&native_cfg(&ck, Resume::Yes, None));
    assert!(
        e.contains("had 67108864 bytes") && e.contains("--restart"),
        "{e}"
    );
    fresh(TOTAL, CHUNK / 2);
    let e = err(&native_cfg(&ck, Resume::Yes, None));
    assert!(
        e.contains("chunks of 512 sectors") && e.contains("--restart"),
        "{e}"
    );
    // edited: the checksum disagrees; off a chunk boundary: refused by field
    fresh(TOTAL, CHUNK);
    let text = std::fs::read_to_string(&ck).unwrap();
    std::fs::write(&ck, text.replace("\"requests\": 4", "\"requests\": 3")).unwrap();
    let e = err(&native_cfg(&ck, Resume::Yes, None));
    assert!(e.contains("`checksum`"), "{e}");
    let mut c = MdCheckpoint::new(
        "md:/dev/md0",
        TOTAL * 512,
        MdDetail {
            action: "check".into(),
            chunk_sectors: CHUNK,
            mismatch_sectors: 0,
        },
    );
    c.next_offset_bytes = 5000 * 512;
    c.requests = 1;
    let body = serde_json::to_string_pretty(&c).unwrap();
    std::fs::write(&ck, crate::scrub::checkpoint::with_checksum(&body)).unwrap();
    let e = err(&native_cfg(&ck, Resume::Yes, None));
    assert!(
        e.contains("`next_offset_bytes`") && e.contains("chunk boundary"),
        "{e}"
    );
}

#[test]
fn sync_completed_forms() {
    assert_eq!(SyncCompleted::parse("none\n"), Ok(SyncCompleted::None));
    assert_eq!(
        SyncCompleted::parse("delayed\n"),
        Ok(SyncCompleted::Delayed)
    );
    assert_eq!(
        SyncCompleted::parse("2048 / 65536\n"),
        Ok(SyncCompleted::Progress {
            done: 2048,
            total: 65536
        })
    );
    assert!(SyncCompleted::parse("9 / 8").is_err());
    assert!(SyncCompleted::parse("x / 8")
        .unwrap_err()
        .contains("done `x`"));
    assert!(SyncCompleted::parse("").is_err());
    assert_eq!(parse_sync_max("max\n"), Ok(None));
    assert_eq!(parse_sync_max("4096\n"), Ok(Some(4096)));
}

/// Where the fake kernel's check is, sectors (`DONE` of `sync_completed`).
fn done(md: &Path) -> u64 {
    match SyncCompleted::parse(&text(md, "sync_completed")).unwrap() {
        SyncCompleted::Progress { done, .. } => done,
        other => panic!("{other:?}"),
    }
}

/// An I/O to the array itself (a 17-field `/sys/block/md0/stat` with one
/// read completed), after `delay_ms`: what an FG read of md0 shows.
fn array_read_after(dir: &Path, delay_ms: u64) -> std::thread::JoinHandle<()> {
    let stat = dir.join("sys/block/md0/stat");
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(delay_ms));
        put(&stat, "1 0 8 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n");
    })
}

/// The md brake (docs/native.md): I/O to the array mid-window puts
/// `sync_speed_min` = `sync_speed_max` = 1 KiB/s, and md's throttle
/// (`md_do_sync`, modelled by the fake kernel) holds the check within one
/// 128 KiB throttle window; the next request lifts the brake to the user's
/// own values and the same window goes on to its end, nothing stopped or
/// restarted, nothing checked twice.
#[test]
fn the_brake_holds_a_window_on_array_io_and_the_next_request_lifts_it() {
    let (dir, md) = tree();
    let ck = dir.path().join("md0.json");
    // 16 sectors a tick of ≥ 0.3 ms: a 16 MiB window takes ≥ 0.6 s
    let kernel = FakeKernel::start(&md, 16);
    let ctl = Arc::new(RecordedControl::new(dir.path()));
    let mut m = Md::open(&target(), &native_cfg(&ck, Resume::No, None), ctl.clone()).unwrap();
    let window = 16 * MIB / 512;
    let fg = array_read_after(dir.path(), 150);
    assert_eq!(m.run_one(16 * MIB).unwrap(), Step::More);
    fg.join().unwrap();
    assert!(m.braked && m.pending_end == Some(window), "{m:?}");
    assert_eq!(m.brake_yields, 1);
    // the checkpoint stays at the window's start until it is done
    assert_eq!(m.checkpoint().next_offset_bytes, 0);
    assert_eq!(writes(&ctl, "sync_speed_max"), ["1"]);
    assert_eq!(writes(&ctl, "sync_speed_min"), ["1"]);
    let at_brake = done(&md);
    // longer than md's 500 ms sleep: still held
    std::thread::sleep(Duration::from_millis(800));
    let later = done(&md);
    assert!(
        later - at_brake <= THROTTLE_WINDOW && later < window,
        "the check went on under the brake: {at_brake} -> {later}"
    );
    // the next request: lifted to the user's values, sync_max untouched
    assert_eq!(m.run_one(16 * MIB).unwrap(), Step::More);
    assert!(!m.braked && m.pending_end.is_none());
    assert_eq!(m.checkpoint().next_offset_bytes, window * 512);
    assert_eq!(writes(&ctl, "sync_speed_max"), ["1", "system"]);
    assert_eq!(writes(&ctl, "sync_speed_min"), ["1", "system"]);
    assert_eq!(writes(&ctl, "sync_max"), [window.to_string()]);
    m.finish().unwrap();
    let seen = kernel.stop();
    assert_eq!(seen.starts, 1);
    assert_eq!(seen.covered, vec![[0, window]]);
    assert!(seen.violations.is_empty(), "{:?}", seen.violations);
    // finish: the user's limits once more, the bounds back
    assert_eq!(writes(&ctl, "sync_speed_max"), ["1", "system", "system"]);
    assert_eq!(
        (text(&md, "sync_min"), text(&md, "sync_max")),
        ("0".into(), "max".into())
    );
}

/// `kill -9` while the brake holds a check: the guardian's
/// release actions stop the check and put back the user's own limits (a
/// local 50000 KiB/s here, written back as a number), not the brake's.
#[test]
fn after_kill_9_while_braked_the_guardian_stops_the_check_and_restores_the_users_limits() {
    let (dir, md) = tree();
    put(&md.join("sync_speed_max"), "50000 (local)\n");
    let ck = dir.path().join("md0.json");
    let kernel = FakeKernel::start(&md, 16);
    let ctl: Arc<dyn Control> = Arc::new(RecordedControl::new(dir.path()));
    let mut m = Md::open(&target(), &native_cfg(&ck, Resume::No, None), ctl.clone()).unwrap();
    let fg = array_read_after(dir.path(), 100);
    assert_eq!(m.run_one(16 * MIB).unwrap(), Step::More);
    fg.join().unwrap();
    assert!(m.braked);
    wait_for(|| text(&md, "sync_speed_max") == "1 (local)");
    let actions = m.release_actions();
    drop(m);
    for a in &actions {
        a.perform().unwrap();
    }
    wait_for(|| text(&md, "sync_completed") == "none");
    wait_for(|| {
        text(&md, "sync_speed_max") == "50000 (local)"
            && text(&md, "sync_speed_min") == "1000 (system)"
    });
    let seen = kernel.stop();
    assert_eq!(seen.starts, 1);
    assert_eq!(seen.covered.len(), 1);
    assert!(seen.covered[0][1] < 16 * MIB / 512, "{:?}", seen.covered);
    assert_eq!(
        (
            text(&md, "sync_action"),
            text(&md, "sync_min"),
            text(&md, "sync_max")
        ),
        ("idle".into(), "0".into(), "max".into())
    );
}

#[test]
fn speed_files_and_the_lifted_values() {
    assert_eq!(parse_speed("1000 (system)\n"), Ok((1000, "system".into())));
    assert_eq!(parse_speed("50000 (local)"), Ok((50000, "50000".into())));
    assert!(parse_speed("fast (local)").is_err());
    assert!(parse_speed("5 (other)").unwrap_err().contains("`(other)`"));
    let s = Speeds::new(Some("1000 (system)"), "200000 (system)", None).unwrap();
    assert_eq!(
        (s.lift_min.as_deref(), s.lift_max.as_str()),
        (Some("system"), "system")
    );
    // --max-rate 500 KiB/s: below md's min of 1000, so the min comes down too
    let s = Speeds::new(Some("1000 (system)"), "200000 (system)", Some(512_000.0)).unwrap();
    assert_eq!(
        (
            s.lift_min.as_deref(),
            s.lift_max.as_str(),
            s.user_min.as_deref(),
            s.user_max.as_str()
        ),
        (Some("500"), "500", Some("system"), "system")
    );
    let e = Speeds::new(Some("x"), "1 (local)", None).unwrap_err();
    assert_eq!(e.0, "sync_speed_min");
}

/// `--max-bytes` is a hard cap on md: the last window's
/// `sync_max` ends at the cap (whole chunks), so the kernel checks nothing
/// past it. 10.75 MiB with 1 MiB windows and 512 KiB chunks: ten windows
/// and a last one of half a MiB = 21 chunks = 21504 sectors, where the
/// window-by-window stop went on to 11 MiB (22528).
#[test]
fn max_bytes_is_a_hard_cap_at_the_windows_sync_max() {
    let (dir, md) = tree();
    let ck = dir.path().join("md0.json");
    let kernel = FakeKernel::start(&md, 512);
    let ctl = Arc::new(RecordedControl::new(dir.path()));
    let cap = 10 * MIB + 3 * MIB / 4;
    let s = NativeSession::open(
        &target(),
        &native_cfg(&ck, Resume::No, Some(cap)),
        &session_cfg(),
        ctl.clone(),
    )
    .unwrap();
    let out = s.run(&AtomicBool::new(false)).unwrap();
    let seen = kernel.stop();
    let want = (cap / 512 / CHUNK) * CHUNK;
    assert_eq!(want, 21504);
    assert_eq!(out.report.run_bytes, want * 512);
    assert!(out.report.run_bytes <= cap);
    assert_eq!(
        writes(&ctl, "sync_max").iter().rev().nth(1).unwrap(),
        &want.to_string()
    );
    assert_eq!(seen.covered, vec![[0, want]]);
    // less than one chunk: refused before anything is touched
    let ctl = Arc::new(RecordedControl::new(dir.path()));
    let e = Md::open(
        &target(),
        &native_cfg(&dir.path().join("other.json"), Resume::No, Some(100 << 10)),
        ctl.clone(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--max-bytes") && e.contains("one chunk"), "{e}");
    assert!(ctl.log().is_empty());
}
