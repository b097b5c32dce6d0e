//! The managed command's own I/O on the monitored disk, so the monitor
//! does not take it for foreground work (it would pause the command for
//! its own reads): the best of
//!
//! - cgroup v2 `io.stat` of the command's cgroup, when the `io`
//!   controller is enabled there ([`crate::monitor::CgroupIo`]);
//! - cgroup v1 `blkio.throttle.io_service_bytes` / `io_serviced` of a blkio
//!   cgroup made for the command ([`BlkioIo`]). The kernel keeps these only
//!   for cgroups with a throttling rule on the device, so fallow sets a
//!   read limit no disk reaches ([`UNREACHABLE_BPS`]);
//! - the sum of `/proc/<pid>/io` over the command's processes
//!   ([`ProcGroupIo`]), without cgroups.
//!
//! All three count a request when it is submitted, before the disk's
//! counters do, as [`crate::monitor::own`] requires. None sees the
//! write-back of the command's buffered writes under cgroup v1 (the
//! kernel's flusher does it, charged to the root cgroup): that I/O looks
//! like foreground work and pauses the command until it is written.

use crate::error::{Error, Result};
use crate::monitor::stat::STAT_SECTOR_BYTES;
use crate::monitor::{OwnIo, OwnIoSource};
use serde::Serialize;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A read limit no disk reaches, bytes per second (1 PB/s): it turns on
/// the v1 throttle statistics without throttling anything.
pub const UNREACHABLE_BPS: u64 = 1 << 50;

/// How the command's I/O is told apart from foreground I/O.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoAccounting {
    /// cgroup v2 `io.stat` of the command's cgroup.
    CgroupV2(PathBuf),
    /// A cgroup v1 blkio cgroup made for the command.
    BlkioV1(PathBuf),
    /// `/proc/<pid>/io` summed over the command's processes.
    Proc,
    /// Not at all (the monitored counters are not a disk's).
    None,
}

impl IoAccounting {
    /// One word for reports.
    pub fn name(&self) -> &'static str {
        match self {
            IoAccounting::CgroupV2(_) => "cgroup2 io.stat",
            IoAccounting::BlkioV1(_) => "cgroup1 blkio",
            IoAccounting::Proc => "/proc/<pid>/io",
            IoAccounting::None => "none",
        }
    }
}

/// Make a v1 blkio cgroup at `dir` whose statistics count I/O on `dev`.
pub fn make_blkio_cgroup(dir: &Path, dev: (u32, u32)) -> Result<()> {
    super::freezer::make_cgroup(dir, "blkio")?;
    let rule = dir.join("blkio.throttle.read_bps_device");
    if let Err(e) = std::fs::write(&rule, format!("{}:{} {UNREACHABLE_BPS}\n", dev.0, dev.1)) {
        let _ = std::fs::remove_dir(dir);
        return Err(Error::io(
            &rule,
            format!("cannot turn on I/O statistics for {}:{}", dev.0, dev.1),
            e,
        ));
    }
    Ok(())
}

/// The I/O of a cgroup v1 blkio cgroup on one disk.
///
/// The two files stay open and are read at offset 0, which makes the
/// kernel generate them afresh: 5 µs a read here instead of 45 µs for
/// open, read and close, and the monitor reads them twice a sample.
#[derive(Debug)]
pub struct BlkioIo {
    bytes_path: PathBuf,
    ios_path: PathBuf,
    dev: (u32, u32),
    state: Mutex<BlkioState>,
}

#[derive(Debug, Default)]
struct BlkioState {
    files: Option<(File, File)>,
    buf: Vec<u8>,
    last: (u64, u64, u64),
}

impl BlkioIo {
    /// The cgroup at `dir` (made by [`make_blkio_cgroup`]) on disk `dev`.
    pub fn new(dir: &Path, dev: (u32, u32)) -> BlkioIo {
        BlkioIo {
            bytes_path: dir.join("blkio.throttle.io_service_bytes"),
            ios_path: dir.join("blkio.throttle.io_serviced"),
            dev,
            state: Mutex::new(BlkioState::default()),
        }
    }

    /// `(read, write)` of `dev` in the text of a v1 `io_service_bytes` or
    /// `io_serviced` file (`7:0 Read 6553600` lines; zero when the device
    /// has none: the cgroup did no I/O there).
    pub fn parse(text: &str, dev: (u32, u32)) -> std::result::Result<(u64, u64), String> {
        let key = format!("{}:{}", dev.0, dev.1);
        let (mut r, mut w) = (0, 0);
        for line in text.lines() {
            let mut words = line.split_ascii_whitespace();
            if words.next() != Some(key.as_str()) {
                continue;
            }
            let (Some(op), Some(v)) = (words.next(), words.next()) else {
                return Err(format!("`{line}` is not `M:m OP VALUE`"));
            };
            let v: u64 = v
                .parse()
                .map_err(|_| format!("{op}: `{v}` is not an unsigned integer"))?;
            match op {
                "Read" => r = v,
                "Write" | "Discard" => w += v,
                _ => {}
            }
        }
        Ok((r, w))
    }

    fn read(&self, st: &mut BlkioState) -> Option<(u64, u64, u64)> {
        if st.files.is_none() {
            st.files = Some((
                File::open(&self.bytes_path).ok()?,
                File::open(&self.ios_path).ok()?,
            ));
        }
        let (fb, fi) = st.files.as_ref()?;
        st.buf.resize(8192, 0);
        let n = fb.read_at(&mut st.buf, 0).ok()?;
        let (r, w) = Self::parse(std::str::from_utf8(&st.buf[..n]).ok()?, self.dev).ok()?;
        // every request adds bytes: no new bytes, no new requests (the
        // usual case while the command is frozen saves half the reads)
        if (r, w) == (st.last.0, st.last.1) {
            return Some(st.last);
        }
        let n = fi.read_at(&mut st.buf, 0).ok()?;
        let (ri, wi) = Self::parse(std::str::from_utf8(&st.buf[..n]).ok()?, self.dev).ok()?;
        Some((r, w, ri + wi))
    }
}

impl OwnIoSource for BlkioIo {
    fn in_flight_is_exact(&self) -> bool {
        false // inferred from movement
    }

    fn snapshot(&self) -> OwnIo {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // a cgroup that is gone did no more I/O: keep the last count
        let last = st.last;
        let now = self.read(&mut st).unwrap_or(last);
        let moved = now != last;
        st.last = now;
        OwnIo {
            read_sectors: now.0.div_ceil(STAT_SECTOR_BYTES),
            write_sectors: now.1.div_ceil(STAT_SECTOR_BYTES),
            ios: now.2,
            // whether its requests are in flight is not known: "maybe" while moving
            reads_in_flight: moved,
            writes_in_flight: moved,
            shield_events: 0,
        }
    }
}

/// Wraps a source that cannot see the command's requests in flight (it
/// counts them at submission, never at completion) and says "maybe in
/// flight" for `grace_ns` after its counts last moved.
///
/// The detector trusts an own source's "nothing in flight": it then takes
/// every read the disk shows in flight for FG, and resets its estimate of
/// FG sectors (so the completion of a request still in flight would look
/// like new FG work). The cgroup sources say "in flight" only in the
/// snapshot in which their counts moved, so one request of the command
/// that is in service across two samples made the disk look busy with FG
/// work (`a_long_own_read_is_not_fg_with_linger` below). The grace outlasts
/// a request's service time; the cost is that, for that long after the
/// command's last I/O, FG is seen by its completions only, not while its
/// first request is in flight.
#[derive(Debug)]
pub struct Linger<S> {
    inner: S,
    grace_ns: u64,
    state: Mutex<(OwnIo, Option<u64>)>,
}

impl<S: OwnIoSource> Linger<S> {
    /// How long an I/O of the command may be in flight, ns.
    pub const DEFAULT_GRACE_NS: u64 = 50_000_000;

    /// `inner`, "maybe in flight" for `grace_ns` after it moved.
    pub fn new(inner: S, grace_ns: u64) -> Linger<S> {
        Linger {
            inner,
            grace_ns,
            state: Mutex::new((OwnIo::default(), None)),
        }
    }

    fn snapshot_at(&self, now_ns: u64) -> OwnIo {
        let mut s = self.inner.snapshot();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (last, moved_ns) = &mut *st;
        let moved = s.read_sectors != last.read_sectors
            || s.write_sectors != last.write_sectors
            || s.ios != last.ios
            || s.reads_in_flight
            || s.writes_in_flight;
        if moved {
            *moved_ns = Some(now_ns);
        }
        *last = s;
        let recent = moved_ns.is_some_and(|t| now_ns.saturating_sub(t) < self.grace_ns);
        s.reads_in_flight |= recent;
        s.writes_in_flight |= recent;
        s
    }
}

impl<S: OwnIoSource> OwnIoSource for Linger<S> {
    fn in_flight_is_exact(&self) -> bool {
        self.inner.in_flight_is_exact()
    }

    fn snapshot(&self) -> OwnIo {
        self.snapshot_at(crate::clock::monotonic_ns())
    }
}

/// Which processes are the command's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Members {
    /// Those in a cgroup (its `cgroup.procs`).
    Cgroup(PathBuf),
    /// A process and its descendants (from `/proc/<pid>/task/<tid>/children`,
    /// or from the parent pids in `/proc/*/stat` where the kernel lacks those).
    Tree(u32),
}

/// The storage I/O of a set of processes, summed over their
/// `/proc/<pid>/io` (`read_bytes`, `write_bytes`: bytes at the block layer).
///
/// The set is looked up every [`ProcGroupIo::RESCAN_NS`]; each process's
/// counters only add to the sum (a process that exits keeps what it did,
/// and what its parent inherits when it reaps it is counted again: an
/// over-count, which the detector absorbs, rather than a drop, which would
/// later look like foreground work).
#[derive(Debug)]
pub struct ProcGroupIo {
    members: Members,
    proc_root: PathBuf,
    state: Mutex<ProcState>,
}

#[derive(Debug, Default)]
struct ProcState {
    pids: Vec<u32>,
    scanned_ns: Option<u64>,
    seen: HashMap<u32, (u64, u64)>,
    total: (u64, u64),
}

impl ProcGroupIo {
    /// How often the set of processes is looked up again, ns.
    pub const RESCAN_NS: u64 = 100_000_000;

    /// The processes of `members`.
    pub fn new(members: Members) -> ProcGroupIo {
        ProcGroupIo {
            members,
            proc_root: PathBuf::from("/proc"),
            state: Mutex::new(ProcState::default()),
        }
    }

    /// The parent pid of a `/proc/<pid>/stat` line (field 4, after the
    /// command name in parentheses, which may itself hold spaces and `)`).
    pub fn parse_ppid(stat: &str) -> Option<u32> {
        crate::monitor::stat_field(stat, 1)?.parse().ok()
    }

    /// Children of `pid` from `task/*/children`; `None` if the kernel has
    /// no such files (built without `CONFIG_PROC_CHILDREN`).
    fn children(&self, pid: u32) -> Option<Vec<u32>> {
        let tasks = std::fs::read_dir(self.proc_root.join(format!("{pid}/task"))).ok()?;
        let mut out = Vec::new();
        for t in tasks.flatten() {
            let text = std::fs::read_to_string(t.path().join("children")).ok()?;
            out.extend(
                text.split_ascii_whitespace()
                    .filter_map(|w| w.parse::<u32>().ok()),
            );
        }
        Some(out)
    }

    /// All descendants of `root` by parent pid, scanning `/proc`.
    fn tree_by_scan(&self, root: u32) -> Vec<u32> {
        let Ok(dir) = std::fs::read_dir(&self.proc_root) else {
            return vec![root];
        };
        let parent: HashMap<u32, u32> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(self.proc_root.join(format!("{pid}/stat")));
                Some((pid, Self::parse_ppid(&stat.ok()?)?))
            })
            .collect();
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() {
            let p = out[i];
            out.extend(parent.iter().filter(|(_, &pp)| pp == p).map(|(&c, _)| c));
            i += 1;
        }
        out
    }

    fn members_now(&self) -> Vec<u32> {
        match &self.members {
            Members::Cgroup(dir) => std::fs::read_to_string(dir.join("cgroup.procs"))
                .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
                .unwrap_or_default(),
            Members::Tree(root) => {
                let mut out = vec![*root];
                let mut i = 0;
                while i < out.len() {
                    match self.children(out[i]) {
                        Some(c) => out.extend(c),
                        // the root is gone, or no children files: scan instead
                        None if i == 0 && self.proc_root.join(root.to_string()).exists() => {
                            return self.tree_by_scan(*root)
                        }
                        None => {}
                    }
                    i += 1;
                }
                out
            }
        }
    }

    /// The summed `(read_bytes, write_bytes)` now.
    pub fn totals(&self) -> (u64, u64) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = crate::clock::monotonic_ns();
        if st
            .scanned_ns
            .is_none_or(|t| now.saturating_sub(t) >= Self::RESCAN_NS)
        {
            st.pids = self.members_now();
            st.scanned_ns = Some(now);
        }
        let pids = st.pids.clone();
        for pid in pids {
            let Some((r, w)) = std::fs::read_to_string(self.proc_root.join(format!("{pid}/io")))
                .ok()
                .and_then(|t| crate::monitor::ProcIo::parse(&t).ok())
            else {
                continue;
            };
            let prev = st.seen.insert(pid, (r, w)).unwrap_or((0, 0));
            st.total.0 += r.saturating_sub(prev.0);
            st.total.1 += w.saturating_sub(prev.1);
        }
        st.total
    }
}

impl OwnIoSource for ProcGroupIo {
    fn in_flight_is_exact(&self) -> bool {
        false // inferred from movement
    }

    fn snapshot(&self) -> OwnIo {
        let before = self.state.lock().map(|s| s.total).unwrap_or_default();
        let now = self.totals();
        let moved = now != before;
        OwnIo {
            read_sectors: now.0.div_ceil(STAT_SECTOR_BYTES),
            write_sectors: now.1.div_ceil(STAT_SECTOR_BYTES),
            ios: 0,
            reads_in_flight: moved,
            writes_in_flight: moved,
            shield_events: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v1_blkio_stat_files() {
        let bytes = "7:0 Read 6553600\n7:0 Write 655360\n7:0 Sync 7208960\n7:0 Async 0\n\
                     7:0 Discard 4096\n7:0 Total 7213056\n8:0 Read 1\nTotal 7213057\n";
        assert_eq!(
            BlkioIo::parse(bytes, (7, 0)).unwrap(),
            (6553600, 655360 + 4096)
        );
        assert_eq!(BlkioIo::parse(bytes, (8, 0)).unwrap(), (1, 0));
        assert_eq!(BlkioIo::parse("Total 0\n", (7, 0)).unwrap(), (0, 0));
        assert!(BlkioIo::parse("7:0 Read x\n", (7, 0))
            .unwrap_err()
            .contains("Read"));
        assert!(BlkioIo::parse("7:0 Read\n", (7, 0)).is_err());
    }

    #[test]
    fn blkio_source_counts_sectors_and_requests() {
        let dir = tempfile::tempdir().unwrap();
        let src = BlkioIo::new(dir.path(), (7, 0));
        // no files yet: nothing counted, not moving
        assert_eq!(src.snapshot(), OwnIo::default());
        std::fs::write(
            dir.path().join("blkio.throttle.io_service_bytes"),
            "7:0 Read 65536\n7:0 Write 1000\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("blkio.throttle.io_serviced"),
            "7:0 Read 1\n7:0 Write 1\n",
        )
        .unwrap();
        let s = src.snapshot();
        assert_eq!((s.read_sectors, s.write_sectors, s.ios), (128, 2, 2));
        assert!(s.reads_in_flight);
        assert!(!src.snapshot().reads_in_flight);
    }

    /// A source whose counts are set by hand.
    #[derive(Default)]
    struct Scripted(Mutex<OwnIo>);

    impl OwnIoSource for Scripted {
        fn snapshot(&self) -> OwnIo {
            let mut g = self.0.lock().unwrap();
            let s = *g;
            // "in flight" only in the snapshot after a move, as the cgroup sources
            g.reads_in_flight = false;
            s
        }
    }

    #[test]
    fn linger_keeps_maybe_in_flight_for_the_grace() {
        let l = Linger::new(Scripted::default(), 50);
        assert!(!l.snapshot_at(0).reads_in_flight);
        *l.inner.0.lock().unwrap() = OwnIo {
            read_sectors: 128,
            reads_in_flight: true,
            ..OwnIo::default()
        };
        assert!(l.snapshot_at(100).reads_in_flight);
        // the inner source says no more, the grace says maybe
        let s = l.snapshot_at(149);
        assert!(s.reads_in_flight && s.writes_in_flight);
        assert_eq!(s.read_sectors, 128);
        assert!(!l.snapshot_at(150).reads_in_flight);
    }

    /// One read of the command in service across two samples.
    #[test]
    fn a_long_own_read_is_not_fg_with_linger() {
        use crate::monitor::stat::{DiskStat, Inflight, Sample};
        use crate::monitor::{Detector, Event};
        let sample = |read_sectors, reads_in_flight| Sample {
            stat: DiskStat {
                read_sectors,
                in_flight: reads_in_flight,
                ..DiskStat::default()
            },
            inflight: Some(Inflight {
                reads: reads_in_flight,
                writes: 0,
            }),
        };
        let events = |grace_ns| {
            let src = Linger::new(Scripted::default(), grace_ns);
            let mut d = Detector::new();
            let mut out = vec![];
            let mut step = |t: u64, s: Sample| {
                let a = src.snapshot_at(t);
                let b = src.snapshot_at(t);
                out.extend(d.observe(t, &s, a, b));
            };
            step(0, sample(0, 0));
            step(1_000_000, sample(0, 0)); // idle
                                           // submitted: the source moves, the disk has it in flight
            *src.inner.0.lock().unwrap() = OwnIo {
                read_sectors: 128,
                reads_in_flight: true,
                ..OwnIo::default()
            };
            step(2_000_000, sample(0, 1));
            // still in service a sample later; the source no longer moves
            step(3_000_000, sample(0, 1));
            // completed
            step(4_000_000, sample(128, 0));
            out.iter()
                .filter(|e| matches!(e, Event::Busy { .. }))
                .count()
        };
        assert_eq!(
            events(0),
            1,
            "without the grace the own read is taken for FG"
        );
        assert_eq!(events(Linger::<Scripted>::DEFAULT_GRACE_NS), 0);
    }

    #[test]
    fn parent_from_stat_lines() {
        assert_eq!(
            ProcGroupIo::parse_ppid("1234 (sh) S 1 1234 1234 0 -1 4194560 ..."),
            Some(1)
        );
        // a name with spaces and a parenthesis
        assert_eq!(ProcGroupIo::parse_ppid("99 (a b) c) R 5 77 99 0"), Some(5));
        assert_eq!(ProcGroupIo::parse_ppid("garbage"), None);
    }

    /// A fake /proc: `(pid, ppid, read_bytes, write_bytes)`, with
    /// `task/<pid>/children` files when `children` is set.
    fn fake_proc(root: &Path, procs: &[(u32, u32, u64, u64)], children: bool) {
        for &(pid, ppid, r, w) in procs {
            let d = root.join(pid.to_string());
            std::fs::create_dir_all(d.join(format!("task/{pid}"))).unwrap();
            std::fs::write(d.join("stat"), format!("{pid} (x) S {ppid} 1 1 0")).unwrap();
            std::fs::write(
                d.join("io"),
                format!("rchar: 0\nread_bytes: {r}\nwrite_bytes: {w}\n"),
            )
            .unwrap();
            if children {
                let kids: Vec<String> = procs
                    .iter()
                    .filter(|p| p.1 == pid)
                    .map(|p| p.0.to_string())
                    .collect();
                std::fs::write(d.join(format!("task/{pid}/children")), kids.join(" ")).unwrap();
            }
        }
    }

    #[test]
    fn proc_sums_cover_the_tree_and_are_monotonic_over_exits() {
        for children in [true, false] {
            let root = tempfile::tempdir().unwrap();
            // 50 → 51 → 52; 60 is someone else's
            let procs = [
                (50, 1, 4096, 0),
                (51, 50, 8192, 512),
                (52, 51, 100, 0),
                (60, 1, 1 << 30, 0),
            ];
            fake_proc(root.path(), &procs, children);
            let src = ProcGroupIo {
                members: Members::Tree(50),
                proc_root: root.path().to_path_buf(),
                state: Mutex::new(ProcState::default()),
            };
            let mut m = src.members_now();
            m.sort();
            assert_eq!(m, vec![50, 51, 52], "children files: {children}");
            assert_eq!(src.totals(), (12388, 512));
            // 52 exits: what it did stays counted
            std::fs::remove_dir_all(root.path().join("52")).unwrap();
            fake_proc(root.path(), &[(50, 1, 4196, 0)], children);
            assert_eq!(src.totals(), (12488, 512));
        }
    }

    #[test]
    fn a_child_of_ours_is_found_in_the_real_proc() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let src = ProcGroupIo::new(Members::Tree(std::process::id()));
        let m = src.members_now();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(m.contains(&child.id()), "{m:?}");
    }
}
