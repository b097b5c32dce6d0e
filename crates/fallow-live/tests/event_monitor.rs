//! The event-driven monitor against a real loop device: I/O of a child
//! process is seen with its pid, comm and cgroup; dirty-page writeback is
//! attributed to the inode; the sysfs poller takes over when perf is not
//! allowed. Needs root, tracefs, losetup, mkfs.ext4 and perf events;
//! `#[ignore = "needs root"]`, run by `--include-ignored` (scripts/test.sh
//! as root), failing where one of them is missing.

use fallow_live::clock::monotonic_ns;
use fallow_live::monitor::{
    DevId, Event, EventMonitor, IoEvent, IoOp, IoPhase, MonitorKind, Origin, StatSource,
};
use fallow_live::{Monitor, MonitorConfig};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A loop device over a sparse image, detached (and unmounted) on drop.
struct Loop {
    dev: String,
    mnt: Option<PathBuf>,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn new(mib: u64) -> Result<Loop, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let img = dir.path().join("img");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(mib << 20))
            .map_err(|e| e.to_string())?;
        let dev = run("losetup", &["-f", "--show", img.to_str().unwrap()])?;
        Ok(Loop {
            dev,
            mnt: None,
            _dir: dir,
        })
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    fn mount_ext4(&mut self) -> Result<PathBuf, String> {
        run("mkfs.ext4", &["-q", "-F", &self.dev])?;
        let mnt = self._dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
        run("mount", &[&self.dev, mnt.to_str().unwrap()])?;
        self.mnt = Some(mnt.clone());
        Ok(mnt)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        if let Some(m) = &self.mnt {
            let _ = run("umount", &[m.to_str().unwrap()]);
        }
        let _ = run("losetup", &["-d", &self.dev]);
    }
}

/// A loop device of `mib` MiB for an `#[ignore = "needs root"]` test;
/// panics saying what is missing (run without `--include-ignored`, such a
/// test is counted as ignored instead).
fn setup(mib: u64) -> Loop {
    assert!(
        rustix::process::geteuid().as_raw() == 0,
        "needs root (loop devices, perf events)"
    );
    if let Err(why) = EventMonitor::available() {
        panic!("the event monitor cannot run here: {why}");
    }
    Loop::new(mib).unwrap_or_else(|e| panic!("no loop device: {e}"))
}

/// Wait up to `limit_ns` for an event matching `f`, keeping all seen.
fn wait_for(
    m: &mut EventMonitor,
    limit_ns: u64,
    seen: &mut Vec<IoEvent>,
    f: impl Fn(&IoEvent) -> bool,
) -> Option<IoEvent> {
    let end = monotonic_ns() + limit_ns;
    loop {
        if let Some(e) = seen.iter().find(|e| f(e)) {
            return Some(e.clone());
        }
        let now = monotonic_ns();
        if now >= end {
            return None;
        }
        seen.extend(m.wait(Some(end - now)).unwrap());
    }
}

/// A fresh cgroup v2 directory, removed on drop.
struct Cgroup(PathBuf, String);

impl Cgroup {
    fn new() -> Option<Cgroup> {
        let mi = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let root = mi.lines().find_map(|l| {
            let (a, b) = l.split_once(" - ")?;
            (b.split_whitespace().next()? == "cgroup2")
                .then(|| PathBuf::from(a.split_whitespace().nth(4).unwrap()))
        })?;
        let name = format!("fallow-evtest-{}", std::process::id());
        let dir = root.join(&name);
        std::fs::create_dir(&dir).ok()?;
        Some(Cgroup(dir, format!("/{name}")))
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
#[ignore = "needs root"]
fn a_child_processs_reads_carry_its_pid_comm_and_cgroup() {
    let lp = setup(16);
    let dev = DevId::of_name(lp.name()).unwrap();
    let mut m = EventMonitor::open(&[dev]).unwrap();
    let cg = Cgroup::new();
    let procs = cg
        .as_ref()
        .map_or("/dev/null".into(), |c| c.0.join("cgroup.procs"));
    // the shell moves itself into the cgroup, then becomes dd (same pid)
    let script = format!(
        "echo $$ > {} && exec dd if={} of=/dev/null bs=4096 count=8 iflag=direct status=none",
        procs.display(),
        lp.dev
    );
    let t0 = monotonic_ns();
    let mut child = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let mut seen = Vec::new();
    let q = wait_for(&mut m, 5_000_000_000, &mut seen, |e| {
        e.phase == IoPhase::Queue && e.comm == "dd"
    })
    .unwrap_or_else(|| panic!("no queue event of dd within 5 s: {seen:#?}"));
    assert_eq!(q.pid, pid, "{q:?}");
    assert_eq!(q.dev, dev);
    assert_eq!(q.op, IoOp::Read);
    assert_eq!(q.bytes, 4096);
    assert_eq!(q.origin, Origin::Process);
    assert!(q.time_ns >= t0 && q.time_ns <= monotonic_ns(), "{q:?}");
    match &cg {
        Some(c) => assert_eq!(q.cgroup.as_deref(), Some(c.1.as_str()), "{q:?}"),
        None => eprintln!("skip (cgroup part): cannot create a cgroup v2 directory"),
    }
    // all 8 reads: queued at sectors 0, 8, …, 56; issued and completed,
    // the latter two carrying dd as their submitter
    let _ = wait_for(&mut m, 2_000_000_000, &mut seen, |_| false);
    let dd: Vec<_> = seen.iter().filter(|e| e.pid == pid).collect();
    for phase in [IoPhase::Queue, IoPhase::Issue, IoPhase::Complete] {
        let mut sectors: Vec<u64> = dd
            .iter()
            .filter(|e| e.phase == phase)
            .map(|e| e.sector)
            .collect();
        sectors.sort_unstable();
        sectors.dedup();
        assert_eq!(
            sectors,
            (0..8).map(|i| i * 8).collect::<Vec<_>>(),
            "{phase:?}: {dd:#?}"
        );
    }
    let st = m.stats();
    assert!(st.wakeups >= 1 && st.events >= 24, "{st:?}");
}

#[test]
#[ignore = "needs root"]
fn dirty_page_writeback_is_attributed_to_the_inode_and_its_dirtier() {
    let mut lp = setup(64);
    let mnt = match lp.mount_ext4() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("skip: cannot make and mount ext4: {e}");
            return;
        }
    };
    let dev = DevId::of_name(lp.name()).unwrap();
    // settle the mount's own writes first
    run("sync", &[]).unwrap();
    let mut m = EventMonitor::open(&[dev]).unwrap();
    let path = mnt.join("dirty");
    // dirty pages through the page cache, kept open so its path can be found
    let f = std::fs::File::create(&path).unwrap();
    std::io::Write::write_all(&mut &f, &vec![7u8; 256 * 1024]).unwrap();
    let ino = f.metadata().unwrap().ino();
    // sync(1) hands the writeback to the flusher threads
    run("sync", &[]).unwrap();
    let mut seen = Vec::new();
    let wb = wait_for(&mut m, 10_000_000_000, &mut seen, |e| {
        // (ext4 may also read bitmaps for the inode's blocks: also its writeback)
        e.phase == IoPhase::Queue
            && e.op == IoOp::Write
            && matches!(&e.origin, Origin::Writeback { inode: Some(i) } if i.ino == ino)
    })
    .unwrap_or_else(|| {
        panic!(
            "no writeback of inode {ino} within 10 s; seen: {:#?}",
            seen.iter()
                .map(|e| (e.phase, e.op, e.who()))
                .collect::<Vec<_>>()
        )
    });
    eprintln!("writeback event: {}", wb.who());
    assert_eq!(wb.op, IoOp::Write);
    let Origin::Writeback { inode: Some(i) } = &wb.origin else {
        unreachable!()
    };
    assert_eq!(i.dev, Some(dev));
    let by = i.dirtied_by.as_ref().expect("the dirtier");
    assert_eq!(by.pid, std::process::id());
    assert_eq!(i.path.as_deref(), Some(path.as_path()));
    // a flusher, not this process, queued it
    assert_ne!(wb.pid, std::process::id());
    drop(f);
}

fn fg_reads(dev: &str, n: u32) {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_direct())
        .open(dev)
        .unwrap();
    let mut buf = AlignedBuf::new();
    for i in 0..n {
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(u64::from(i) * 4096)).unwrap();
        std::io::Read::read_exact(&mut f, buf.as_mut()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
}

use std::os::unix::fs::OpenOptionsExt;

fn libc_o_direct() -> i32 {
    rustix::fs::OFlags::DIRECT.bits() as i32
}

/// 4 KiB aligned to 4 KiB inside a larger buffer (O_DIRECT).
struct AlignedBuf(Vec<u8>);

impl AlignedBuf {
    fn new() -> Self {
        AlignedBuf(vec![0u8; 8192])
    }
    fn as_mut(&mut self) -> &mut [u8] {
        let off = self.0.as_ptr().align_offset(4096);
        &mut self.0[off..off + 4096]
    }
}

/// FG reads [`busy_periods`] makes, 30 ms apart: enough that a race hit
/// by one request in twenty shows (the event monitor lost 7 to 11 request
/// counts of 150 reads before the completion hold of `monitor::detect`).
const READS: u32 = 40;

fn busy_periods(kind: MonitorKind, lp: &Loop) -> (u64, fallow_live::MonitorStats) {
    let src = StatSource::sysfs(lp.name()).unwrap();
    let mut m = Monitor::start_kind(&src, vec![], MonitorConfig::default(), kind).unwrap();
    let dev = lp.dev.clone();
    // the first sample (idle) before the first read
    assert!(matches!(
        m.recv_timeout(1_000_000_000).unwrap(),
        Some(Event::Idle { first: true, .. })
    ));
    let t = std::thread::spawn(move || fg_reads(&dev, READS));
    let mut busy = 0;
    let end = monotonic_ns() + 3_000_000_000;
    while monotonic_ns() < end {
        if let Some(Event::Busy { .. }) = m.recv_timeout(10_000_000).unwrap() {
            busy += 1;
        }
    }
    t.join().unwrap();
    (busy, m.stop().unwrap())
}

#[test]
#[ignore = "needs root"]
fn the_monitor_is_event_driven_here_and_falls_back_to_polling() {
    let lp = setup(16);
    let (busy_ev, ev) = busy_periods(MonitorKind::Auto, &lp);
    let (busy_poll, poll) = busy_periods(MonitorKind::Poll, &lp);
    eprintln!("events: {busy_ev} busy, {ev:?}\npoll: {busy_poll} busy, {poll:?}");
    assert_eq!(ev.kind, "events");
    assert_eq!(poll.kind, "poll");
    // READS reads 30 ms apart: one busy period each, and each read one FG
    // request, for both monitors. The poller used to see 6 busy periods
    // for 5 reads now and then, and the event monitor 4 requests: the
    // kernel takes a request off its in-flight count before it counts
    // it (monitor::detect's module documentation), and the completion hold
    // waits for the count
    let n = u64::from(READS);
    assert_eq!(busy_ev, n, "{ev:?}");
    assert_eq!(busy_poll, n, "{poll:?}");
    assert_eq!(ev.fg_requests, n, "{ev:?}");
    assert_eq!(poll.fg_requests, n, "{poll:?}");
    assert_eq!(ev.fg_read_bytes, n * 4096, "{ev:?}");
    assert_eq!(poll.fg_read_bytes, n * 4096, "{poll:?}");
    // the poller samples every ms for 3 s; the event monitor only around
    // the reads (a few samples each) and on its start
    assert!(poll.samples > 1000, "{poll:?}");
    assert!(ev.samples < 10 * n && ev.wakeups >= n, "{ev:?}");
    // a file source has no tracepoints: auto polls and says why
    let dir = tempfile::tempdir().unwrap();
    let stat = dir.path().join("stat");
    std::fs::write(&stat, "0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
    let m = Monitor::start_kind(
        &StatSource::file(&stat).unwrap(),
        vec![],
        MonitorConfig::default(),
        MonitorKind::Auto,
    )
    .unwrap();
    let s = m.stop().unwrap();
    assert_eq!(s.kind, "poll");
    assert!(s.kind_reason.contains("not a kernel block device"), "{s:?}");
    assert!(Monitor::start_kind(
        &StatSource::file(&stat).unwrap(),
        vec![],
        MonitorConfig::default(),
        MonitorKind::Events,
    )
    .is_err());
}

#[test]
fn with_perf_forbidden_by_the_environment_auto_polls() {
    // FALLOW_MONITOR=poll, set in a child so the other tests keep perf
    if std::env::var("FALLOW_EVTEST_CHILD").is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        std::fs::write(&stat, "0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        let Ok(src) = StatSource::sysfs("loop0").or_else(|_| StatSource::file(&stat)) else {
            unreachable!()
        };
        let m = Monitor::start(&src, vec![], MonitorConfig::default()).unwrap();
        let s = m.stop().unwrap();
        assert_eq!(s.kind, "poll", "{s:?}");
        assert!(EventMonitor::available().is_err());
        return;
    }
    let st = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "with_perf_forbidden_by_the_environment_auto_polls",
            "--nocapture",
        ])
        .env("FALLOW_EVTEST_CHILD", "1")
        .env("FALLOW_MONITOR", "poll")
        .status()
        .unwrap();
    assert!(st.success());
}
