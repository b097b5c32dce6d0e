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
            while !s2.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(300));
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

/// Issue 24: a 4-disk raid10 (`md1` in the fixture: members sdd, sde,
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
/// `--resume` trusts it (issue 12).
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
