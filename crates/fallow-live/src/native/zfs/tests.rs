//! The ZFS executor against a fake `zpool` (tests/data/zfs) that prints
//! `zpool status` as OpenZFS's format strings do and moves the scrub on
//! only while it is not paused. ZFS is not in this machine's kernel:
//! nothing here is a live result.

use super::*;
use crate::driver::DriverConfig;
use crate::native::control::SystemControl;
use crate::native::session::{NativeSession, SessionConfig, Watch};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// A root with the fake `zpool` in `bin/` (its state beside it) and the
/// md fixture's `/sys` (disks sdb, sdc with partition sdc1).
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new(json: bool, total: u64, rate: u64) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
        let bin = dir.path().join("bin");
        let st = std::process::Command::new("cp")
            .args(["-a", &format!("{data}/zfs")])
            .arg(&bin)
            .status()
            .unwrap();
        assert!(st.success());
        let st = std::process::Command::new("cp")
            .args(["-a", &format!("{data}/md/sys")])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success());
        let f = Fake { dir };
        for (k, v) in [
            ("pool", "tank".to_string()),
            ("total", total.to_string()),
            ("rate", rate.to_string()),
            ("state", "none".into()),
            ("issued", "0".into()),
            ("json", if json { "yes" } else { "no" }.into()),
        ] {
            f.set(k, &v);
        }
        f
    }

    fn set(&self, k: &str, v: &str) {
        std::fs::write(self.dir.path().join("bin").join(k), format!("{v}\n")).unwrap();
    }

    fn get(&self, k: &str) -> String {
        std::fs::read_to_string(self.dir.path().join("bin").join(k))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    fn zpool(&self) -> PathBuf {
        self.dir.path().join("bin/zpool")
    }

    fn log(&self) -> Vec<String> {
        self.get("log").lines().map(String::from).collect()
    }

    fn control(&self) -> Arc<dyn Control> {
        Arc::new(SystemControl::with_root(self.dir.path()))
    }

    fn cfg(&self, resume: Resume, max_bytes: Option<u64>) -> NativeConfig {
        let mut c = NativeConfig {
            resume,
            max_bytes,
            slice_ns: Some(100_000_000),
            ..NativeConfig::default()
        };
        c.options
            .insert("zpool".into(), self.zpool().display().to_string());
        c
    }
}

fn target() -> NativeTarget {
    NativeTarget::parse("zfs:tank").unwrap().unwrap()
}

/// One 100 ms slice every 500 ms (a slice and its status call take well
/// under that even on a loaded machine): paused between every two.
fn session_cfg() -> SessionConfig {
    SessionConfig {
        policy: "fixed-rate:r=500ms".into(),
        driver: DriverConfig {
            bg_size_bytes: 64 * MIB,
            ..DriverConfig::default()
        },
        watch: Watch::Auto,
        interval_ns: 1_000_000,
        guardian: None,
    }
}

fn count(log: &[String], line: &str) -> usize {
    log.iter().filter(|l| l.as_str() == line).count()
}

fn whole_scrub(json: bool) {
    // 1 GiB at 1 GiB/s: 1 s of running, in 100 ms slices
    let f = Fake::new(json, GIB, GIB);
    let s = NativeSession::open(
        &target(),
        &f.cfg(Resume::No, None),
        &session_cfg(),
        f.control(),
    )
    .unwrap();
    assert_eq!(s.devices(), vec!["sdb".to_string(), "sdc".to_string()]);
    let out = s.run(&AtomicBool::new(false)).unwrap();
    let r = &out.report;
    let log = f.log();
    assert!(r.complete, "{r:?}\n{log:#?}");
    assert_eq!(r.target_bytes, Some(GIB));
    assert_eq!(r.errors_uncorrectable, Some(2), "{r:?}");
    assert_eq!(r.native["repaired_bytes"], 1572864, "1.50M");
    assert_eq!(r.tool.contains("status -j"), json, "{}", r.tool);
    // it only moves while running: 1 s of slices at the least
    assert!(r.run_active_s >= 0.95, "{r:?}");
    // started once, then paused and resumed between slices: about 9
    // pauses on an idle machine; on a loaded one each slice ends at a
    // `status` poll (a shell script here) that may come 400 ms late, and
    // the fake's second of running fits in two slices
    let (starts, pauses) = (count(&log, "scrub tank"), count(&log, "scrub -p tank"));
    assert!(pauses >= 1, "{log:#?}");
    assert!(starts == pauses || starts == pauses + 1, "{log:#?}");
    // never two resumes without a pause between
    let ctl: Vec<&String> = log.iter().filter(|l| l.starts_with("scrub")).collect();
    assert!(ctl.windows(2).all(|w| w[0] != w[1]), "{ctl:#?}");
    assert_eq!(f.get("state"), "finished");
}

#[test]
fn a_whole_scrub_runs_in_paused_slices_with_json_status() {
    whole_scrub(true);
}

#[test]
fn a_whole_scrub_runs_in_paused_slices_with_text_status() {
    whole_scrub(false);
}

#[test]
fn stopped_midway_it_stays_paused_and_resume_continues_it() {
    let f = Fake::new(true, GIB, GIB);
    let s = NativeSession::open(
        &target(),
        &f.cfg(Resume::No, Some(256 * MIB)),
        &session_cfg(),
        f.control(),
    )
    .unwrap();
    let out = s
        .run(&AtomicBool::new(false))
        .unwrap_or_else(|e| panic!("{e}: {:#?}", f.log()));
    assert!(!out.report.complete);
    assert!(out.report.run_bytes >= 256 * MIB, "{:?}", out.report);
    assert_eq!(f.get("state"), "paused");
    let at: u64 = f.get("issued").parse().unwrap();
    // a paused scrub is not restarted by accident
    let e = Zfs::open(&target(), &f.cfg(Resume::No, None), f.control())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--resume continues it"), "{e}");
    let n = f.log().len();
    let s = NativeSession::open(
        &target(),
        &f.cfg(Resume::Yes, None),
        &session_cfg(),
        f.control(),
    )
    .unwrap();
    let out = s.run(&AtomicBool::new(false)).unwrap();
    assert!(out.report.complete);
    // resumed from where it was: this run issued the rest
    assert_eq!(out.report.run_bytes, GIB - at);
    assert!(!f.log()[n..].iter().any(|l| l == "scrub -s tank"));
}

/// What `fallow __guardian` does if fallow dies. A scrub fallow
/// was running (killed mid-slice) is paused, never left running; one
/// paused (by fallow between slices, or by the user), cancelled by the
/// user or finished is left as it is: the guardian never runs `zpool
/// scrub POOL`, which would resume or restart it. It says what it did.
#[test]
fn the_guardian_pauses_a_running_scrub_and_never_resumes_or_starts_one() {
    let f = Fake::new(false, GIB, 1);
    let mut z = Zfs::open(&target(), &f.cfg(Resume::No, None), f.control()).unwrap();
    let actions = z.release_actions();
    // kill -9 mid-slice: the scrub fallow started is running
    assert_eq!(z.run_one(MIB).unwrap(), Step::More);
    assert_eq!(f.get("state"), "scanning");
    drop(z);
    let said: Vec<String> = actions.iter().map(|a| a.perform().unwrap()).collect();
    assert_eq!(f.get("state"), "paused");
    assert!(said[0].contains("paused the scrub of tank"), "{said:?}");
    // paused (fallow's pause or the user's): stays paused
    let said = actions[0].perform().unwrap();
    assert_eq!(f.get("state"), "paused");
    assert!(said.contains("stays paused"), "{said}");
    // cancelled by the user, or finished: left alone, nothing said
    for st in ["canceled", "finished", "none"] {
        f.set("state", st);
        assert_eq!(actions[0].perform().unwrap(), "");
        assert_eq!(f.get("state"), st);
    }
    let log = f.log();
    // one start (fallow's run_one), one pause (the guardian's), no resume
    assert_eq!(count(&log, "scrub tank"), 1, "{log:?}");
    assert_eq!(count(&log, "scrub -p tank"), 1, "{log:?}");
}

#[test]
fn busy_pools_bad_names_and_rate_ceilings_are_clear_errors() {
    let f = Fake::new(true, GIB, GIB);
    let open = |t: &str, c: &NativeConfig| {
        Zfs::open(&NativeTarget::parse(t).unwrap().unwrap(), c, f.control())
            .unwrap_err()
            .to_string()
    };
    let c = f.cfg(Resume::No, None);
    assert!(open("zfs:ta/nk", &c).contains("not a pool name"));
    let e = open("zfs:other", &c);
    assert!(e.contains("no such pool"), "{e}");
    let mut r = c.clone();
    r.max_rate_bytes_per_s = Some(1e6);
    assert!(open("zfs:tank", &r).contains("--max-rate"));
    f.set("state", "scanning");
    f.set("since", "0");
    f.set("rate", "0");
    assert!(open("zfs:tank", &c).contains("already running outside fallow"));
}

#[test]
fn text_status_forms() {
    let scanning = "  pool: tank\n state: ONLINE\n  scan: scrub in progress since Wed Nov 25 21:00:00 2026\n\
        \t1.20G / 4.00G scanned at 100M/s, 1.00G / 4.00G issued at 90.0M/s\n\
        \t0B repaired, 25.00% done, 00:00:33 to go\nconfig:\n\n\
        \tNAME        STATE     READ WRITE CKSUM\n\ttank        ONLINE       0     0     0\n\
        \t  raidz1-0  ONLINE       0     0     0\n\t    sda1    ONLINE       0     0     0\n\
        \t    sdb1    ONLINE       0     0     0\n\t    sdc1    ONLINE       0     0     0\n\
        \tlogs\t\n\t  nvme0n1p2 ONLINE       0     0     0\n\tcache\n\t  nvme0n1p3 ONLINE       0     0     0\n\n\
        errors: No known data errors\n";
    let s = ScanStatus::parse_text(scanning).unwrap();
    assert_eq!(s.state, ScanState::Scrubbing);
    assert_eq!(s.issued_bytes, GIB);
    assert_eq!(s.total_bytes, 4 * GIB);
    assert_eq!(s.examined_bytes, (1.2 * GIB as f64).round() as u64);
    assert_eq!(s.percent_done, 25.0);
    assert_eq!(s.leaves, ["sda1", "sdb1", "sdc1", "nvme0n1p2", "nvme0n1p3"]);
    // before OpenZFS 2.2: `X scanned at R/s, Y issued at R/s, T total`
    let old = "  scan: scrub in progress since Sun Jul 25 16:07:49 2021\n\
        \t8.29G scanned at 1.04G/s, 512M issued at 64M/s, 100G total\n\
        \t0B repaired, 0.50% done, 00:26:32 to go\n";
    let s = ScanStatus::parse_text(old).unwrap();
    assert_eq!(
        (s.examined_bytes, s.issued_bytes, s.total_bytes),
        ((8.29 * GIB as f64).round() as u64, 512 * MIB, 100 * GIB)
    );
    let paused = "  scan: scrub paused since Wed Nov 25 21:00:01 2026\n\
        \tscrub started on Wed Nov 25 21:00:00 2026\n\t1.20G / 4.00G scanned, 1.00G / 4.00G issued\n\
        \t0B repaired, 25.00% done\n";
    assert_eq!(
        ScanStatus::parse_text(paused).unwrap().state,
        ScanState::Paused
    );
    let done = "  scan: scrub repaired 12K in 01:02:03 with 7 errors on Wed Nov 25 21:00:02 2026\n";
    let s = ScanStatus::parse_text(done).unwrap();
    assert_eq!(
        (s.state, s.repaired_bytes, s.errors),
        (ScanState::Finished, 12288, 7)
    );
    assert_eq!(
        ScanStatus::parse_text("  scan: none requested\n")
            .unwrap()
            .state,
        ScanState::None
    );
    assert_eq!(
        ScanStatus::parse_text("  scan: resilver in progress since Wed Nov 25 21:00:00 2026\n")
            .unwrap()
            .state,
        ScanState::Resilvering
    );
    let e = ScanStatus::parse_text(
        "  scan: scrub in progress since x\n\t1.2Q / 4G scanned, 1G / 4G issued\n",
    )
    .unwrap_err();
    assert!(e.contains("`1.2Q`"), "{e}");
    assert!(ScanStatus::parse_text("pool: tank\n").is_err());
}

#[test]
fn nice_numbers_are_powers_of_1024() {
    assert_eq!(parse_nice_bytes("0B"), Some(0));
    assert_eq!(parse_nice_bytes("512B"), Some(512));
    assert_eq!(parse_nice_bytes("4G"), Some(4 * GIB));
    assert_eq!(parse_nice_bytes("1.50M"), Some(1572864));
    assert_eq!(parse_nice_bytes("123456"), Some(123456));
    assert_eq!(parse_nice_bytes("x"), None);
    assert_eq!(parse_nice_bytes("-1K"), None);
}

#[test]
fn json_status_gives_exact_bytes_and_the_leaves() {
    let t = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/zfs/status.json"
    ))
    .unwrap();
    let t = t
        .replace("@POOL@", "tank")
        .replace("@FUNC@", "SCRUB")
        .replace("@STATE@", "SCANNING")
        .replace("@TOTAL@", "4294967296")
        .replace("@ISSUED@", "1073741824")
        .replace("@PAUSE@", "1764100000")
        .replace("@PROCESSED@", "0")
        .replace("@ERRORS@", "0");
    let s = ScanStatus::parse_json(&t, "tank").unwrap();
    assert_eq!(s.state, ScanState::Paused);
    assert_eq!((s.issued_bytes, s.total_bytes), (GIB, 4 * GIB));
    assert_eq!(s.percent_done, 25.0);
    let mut l = s.leaves.clone();
    l.sort();
    assert_eq!(l, ["/dev/sdb", "/dev/sdc1"]);
    assert!(ScanStatus::parse_json(&t, "other")
        .unwrap_err()
        .contains("no pool `other`"));
    let bad = t.replace("\"issued\": \"1073741824\"", "\"issued\": \"1G\"");
    assert!(ScanStatus::parse_json(&bad, "tank")
        .unwrap_err()
        .contains("scan_stats.issued"));
}
