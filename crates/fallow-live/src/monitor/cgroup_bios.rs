//! A managed command's own I/O as the event-driven monitor sees it: each
//! bio queued on the watched disk (`block:block_bio_queue`) is the
//! command's when the task that queued it is in the command's cgroup (v2)
//! or below it (`fallow run` on the event
//! monitor; docs/run.md, "How it works").
//!
//! Why this way: the event monitor already samples `block_bio_queue` on
//! every CPU to wake up; asking the kernel to add the submitter's cgroup
//! id to those samples (`PERF_SAMPLE_CGROUP`, Linux 5.7+) costs no extra
//! event, ring or probe, where `PERF_FLAG_PID_CGROUP` would open a second
//! set of events per CPU (and count, not size, the bios). The tracepoint
//! fires in the submitter's context before the request reaches the driver,
//! so the command's read sectors are counted before the disk's counters
//! count them at completion, as [`super::own`] requires, and a bio of
//! anyone else is known to be FG at once, even while the command's own
//! reads are in flight (the poller cannot tell whose a read in flight is).
//!
//! Writes: the write-back of the command's buffered writes is queued by
//! the kernel's flusher (a `kworker`), in the root cgroup, so the
//! tracepoint cannot say whose it is. Write bios from a kernel thread are
//! therefore left to the counters: the command's write sectors come from
//! the accounting source `fallow run` would poll (cgroup v2 `io.stat`,
//! which charges write-back to the dirtying cgroup when the io and memory
//! controllers are on; v1 blkio or `/proc/<pid>/io` otherwise), and a
//! flusher's bio is FG only if those counters do not take it. Writes the
//! command queues itself (`O_DIRECT`, `fsync`'s own write-out) are
//! attributed like its reads.
//!
//! A btrfs scrub (docs/native.md, "The brake") runs in the kernel, in the ioctl of the
//! `btrfs scrub start` process, which queues the scrub's reads itself
//! (seen with `block_bio_queue`: every bio of a scrub had that process's
//! pid and comm `btrfs`). Such a job is told apart by process instead
//! ([`BioAttribution::of_processes`], [`BioAttribution::set_pids`]): its
//! cgroup would be fallow's own, shared with fallow's other I/O. A child
//! of fallow's is counted as the job's before its pid is named: the
//! scrub's first bios (its superblock reads, 4 KiB each) are queued a few
//! ms after `exec`, and on a loaded machine fallow's thread could name the
//! pid only after the monitor had taken one of them for an FG read
//! (seen once in a test run: one 4 KiB FG read, one busy period, during
//! an unthrottled scrub with no FG).
//!
//! [`CommandIo`] is the source `fallow run` hands the monitor: the
//! attributed counts while the event monitor runs
//! ([`BioAttribution::attach`]), its accounting source otherwise (the
//! poller, when the kernel refuses the events).

use super::own::{OwnIo, OwnIoSource};
use crate::clock::monotonic_ns;
use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

/// How long after the command's last attributed bio its I/O may still be
/// in flight, ns: the tracepoint sees a bio queued, not completed, so as
/// [`crate::run::Linger`] does for the polled sources, the command's I/O
/// counts as "maybe in flight" for this long (longer than a request's
/// service time on a loaded machine).
pub const BIO_GRACE_NS: u64 = 50_000_000;

/// How long after the command's last bio the device must be seen with
/// nothing in flight before its I/O is known done, ns: a bio is queued
/// before the scheduler dispatches it, and until then the device's
/// in-flight count does not show it (plugging, BFQ's idle slice of 8 ms).
pub const SETTLE_NS: u64 = 20_000_000;

/// How often an unknown cgroup id makes the command's cgroup tree be
/// walked again, ns (a sub-cgroup the command made).
const RESCAN_NS: u64 = 100_000_000;

/// Most cgroup ids remembered as not the command's (cleared when full).
const MAX_THEIRS: usize = 4096;

/// Most directories of the command's cgroup tree indexed.
const MAX_OURS: usize = 4096;

/// Whose a queued bio is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BioOwner {
    /// Queued by a task in the command's cgroup.
    Command,
    /// Queued by anyone else: FG.
    Foreground,
    /// A write, flush or discard queued by a kernel thread (write-back of
    /// someone's dirty pages, maybe the command's): left to the counters.
    KernelWrite,
}

/// What [`BioAttribution`] has seen, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BioCounts {
    /// Bios of the command.
    pub command_bios: u64,
    /// Bios of others (FG).
    pub foreground_bios: u64,
    /// Write bios of kernel threads, left to the counters.
    pub kernel_write_bios: u64,
    /// Samples the kernel dropped (full ring): their bios are unknown.
    pub lost: u64,
}

#[derive(Debug, Default)]
struct Ids {
    ours: HashSet<u64>,
    theirs: HashSet<u64>,
    scanned_ns: Option<u64>,
    /// Processes found not to be fallow's children (by-process mode;
    /// cleared when the pids are named again).
    not_children: HashSet<u32>,
}

/// The command's bios on the watched disk, counted by the event monitor's
/// sampling thread and read by its own-I/O snapshot.
#[derive(Debug)]
pub struct BioAttribution {
    /// The command's cgroup; empty: told apart by process only.
    cgroup_dir: PathBuf,
    /// Processes (thread group ids) whose bios are the command's.
    pids: Mutex<Vec<u32>>,
    ids: Mutex<Ids>,
    attached: AtomicBool,
    read_sectors: AtomicU64,
    bios: AtomicU64,
    last_read_ns: AtomicU64,
    last_write_ns: AtomicU64,
    /// A read (write) of the command was queued and the device has not
    /// been seen with nothing in flight [`SETTLE_NS`] after it.
    pending_read: AtomicBool,
    pending_write: AtomicBool,
    foreground_bios: AtomicU64,
    kernel_write_bios: AtomicU64,
    lost: AtomicU64,
}

impl BioAttribution {
    /// The command in the v2 cgroup at `cgroup_dir` (and below it).
    pub fn new(cgroup_dir: &Path) -> BioAttribution {
        BioAttribution {
            cgroup_dir: cgroup_dir.to_path_buf(),
            pids: Mutex::new(Vec::new()),
            ids: Mutex::new(Ids::default()),
            attached: AtomicBool::new(false),
            read_sectors: AtomicU64::new(0),
            bios: AtomicU64::new(0),
            last_read_ns: AtomicU64::new(0),
            last_write_ns: AtomicU64::new(0),
            pending_read: AtomicBool::new(false),
            pending_write: AtomicBool::new(false),
            foreground_bios: AtomicU64::new(0),
            kernel_write_bios: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        }
    }

    /// The command's cgroup directory.
    pub fn cgroup_dir(&self) -> &Path {
        &self.cgroup_dir
    }

    /// The event monitor counts the bios from now on; until then (or
    /// under the poller) [`CommandIo`] reads its accounting source.
    pub fn attach(&self) {
        self.attached.store(true, SeqCst);
    }

    /// Whether the event monitor counts the bios.
    pub fn attached(&self) -> bool {
        self.attached.load(SeqCst)
    }

    /// A job told apart by the processes that queue its bios (a kernel
    /// job run in a tool's ioctl), named later by [`BioAttribution::set_pids`].
    pub fn of_processes() -> BioAttribution {
        BioAttribution::new(Path::new(""))
    }

    /// The processes (thread group ids) whose bios are the job's from now
    /// on, replacing those named before (a new `btrfs scrub start`).
    pub fn set_pids(&self, pids: &[u32]) {
        *self.pids.lock().unwrap_or_else(|p| p.into_inner()) = pids.to_vec();
        // a pid found not a child may since be a new job's
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .not_children
            .clear();
    }

    /// By process: whether `pid` is one of the job's, named or a child of
    /// this process not yet named (then it is named from now on; see the
    /// module's docs).
    fn is_jobs_process(&self, pid: u32) -> bool {
        let mut pids = self.pids.lock().unwrap_or_else(|p| p.into_inner());
        if pids.contains(&pid) {
            return true;
        }
        if !self.cgroup_dir.as_os_str().is_empty() || pid == 0 {
            return false;
        }
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if ids.not_children.contains(&pid) {
            return false;
        }
        if parent_pid(pid) == Some(std::process::id()) {
            pids.push(pid);
            return true;
        }
        if ids.not_children.len() >= MAX_THEIRS {
            ids.not_children.clear();
        }
        ids.not_children.insert(pid);
        false
    }

    /// Whose a bio is: queued by a task of cgroup `cgroup_id`, a write
    /// (or flush, discard) or not, by a kernel thread or not.
    pub fn owner(&self, cgroup_id: u64, write: bool, kernel_thread: bool) -> BioOwner {
        if self.is_ours(cgroup_id) {
            BioOwner::Command
        } else if write && kernel_thread {
            BioOwner::KernelWrite
        } else {
            BioOwner::Foreground
        }
    }

    /// Count one queued bio of `sectors` 512-byte sectors at `t_ns`,
    /// queued by process `pid` of cgroup `cgroup_id`; returns whose it was.
    #[allow(clippy::too_many_arguments)]
    pub fn count(
        &self,
        cgroup_id: u64,
        pid: u32,
        write: bool,
        kernel_thread: bool,
        sectors: u64,
        t_ns: u64,
    ) -> BioOwner {
        let o = if self.is_jobs_process(pid) {
            BioOwner::Command
        } else {
            self.owner(cgroup_id, write, kernel_thread)
        };
        match o {
            BioOwner::Command => {
                if write {
                    // its sectors come from the accounting source (which
                    // also counts them at submission); only "in flight" here
                    self.last_write_ns.fetch_max(t_ns, SeqCst);
                    self.pending_write.store(true, SeqCst);
                } else {
                    // sectors before the time: a snapshot that sees the
                    // read recent must also see its sectors
                    self.read_sectors.fetch_add(sectors, SeqCst);
                    self.last_read_ns.fetch_max(t_ns, SeqCst);
                    self.pending_read.store(true, SeqCst);
                }
                self.bios.fetch_add(1, SeqCst);
            }
            BioOwner::Foreground => {
                self.foreground_bios.fetch_add(1, SeqCst);
            }
            BioOwner::KernelWrite => {
                self.kernel_write_bios.fetch_add(1, SeqCst);
            }
        }
        o
    }

    /// The kernel dropped `n` samples at `t_ns`: any of them may have been
    /// the command's, so its I/O counts as in flight for the grace (the
    /// detector then does not lower its estimate of FG reads, which
    /// absorbs the command's reads it could not count).
    pub fn lost(&self, n: u64, t_ns: u64) {
        if n > 0 {
            self.lost.fetch_add(n, SeqCst);
            self.last_read_ns.fetch_max(t_ns, SeqCst);
            self.last_write_ns.fetch_max(t_ns, SeqCst);
        }
    }

    /// A sample that began at `t_ns` saw the device with no request in
    /// flight: the command's bios queued [`SETTLE_NS`] or more before are
    /// done. Until then its I/O counts as in flight however long a request
    /// takes (a 64 KiB read on a loop device of a loaded machine took
    /// longer than the grace of [`BIO_GRACE_NS`], and its completion then
    /// looked like an FG read).
    pub fn device_idle_at(&self, t_ns: u64) {
        let done = |last: &AtomicU64| t_ns.saturating_sub(last.load(SeqCst)) >= SETTLE_NS;
        if done(&self.last_read_ns) {
            self.pending_read.store(false, SeqCst);
        }
        if done(&self.last_write_ns) {
            self.pending_write.store(false, SeqCst);
        }
    }

    /// What was counted so far.
    pub fn counts(&self) -> BioCounts {
        BioCounts {
            command_bios: self.bios.load(SeqCst),
            foreground_bios: self.foreground_bios.load(SeqCst),
            kernel_write_bios: self.kernel_write_bios.load(SeqCst),
            lost: self.lost.load(SeqCst),
        }
    }

    fn is_ours(&self, id: u64) -> bool {
        if self.cgroup_dir.as_os_str().is_empty() {
            return false;
        }
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if ids.ours.contains(&id) {
            return true;
        }
        if ids.theirs.contains(&id) {
            return false;
        }
        let now = monotonic_ns();
        if ids
            .scanned_ns
            .is_none_or(|t| now.saturating_sub(t) >= RESCAN_NS)
        {
            ids.scanned_ns = Some(now);
            ids.ours = cgroup_tree_ids(&self.cgroup_dir);
            ids.theirs.clear();
            if ids.ours.contains(&id) {
                return true;
            }
        }
        if ids.theirs.len() >= MAX_THEIRS {
            ids.theirs.clear();
        }
        ids.theirs.insert(id);
        false
    }

    fn snapshot_at(&self, now_ns: u64) -> (OwnIo, bool) {
        let read_sectors = self.read_sectors.load(SeqCst);
        let recent = |t: u64| t != 0 && now_ns.saturating_sub(t) < BIO_GRACE_NS;
        let io = OwnIo {
            read_sectors,
            write_sectors: 0,
            ios: self.bios.load(SeqCst),
            reads_in_flight: recent(self.last_read_ns.load(SeqCst))
                || self.pending_read.load(SeqCst),
            writes_in_flight: false,
            shield_events: 0,
        };
        let writing = recent(self.last_write_ns.load(SeqCst)) || self.pending_write.load(SeqCst);
        (io, writing)
    }
}

/// The ids (directory inode numbers, which cgroup v2 uses as ids on
/// 64-bit kernels) of a cgroup and its descendants.
fn cgroup_tree_ids(dir: &Path) -> HashSet<u64> {
    let mut out = HashSet::new();
    walk_cgroup_tree(dir, 16, |id, _| {
        out.insert(id);
        out.len() < MAX_OURS
    });
    out
}

/// Each directory of the cgroup (v2) tree at `root`, depth first and at
/// most `max_depth` levels below it, with its cgroup id (the directory's
/// inode number, what `PERF_SAMPLE_CGROUP` and the tracepoints report),
/// until `visit` returns false. A directory that is gone by the time it is
/// read (a cgroup removed meanwhile) is passed over with what was below it.
pub(crate) fn walk_cgroup_tree(
    root: &Path,
    max_depth: usize,
    mut visit: impl FnMut(u64, &Path) -> bool,
) {
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(m) = std::fs::metadata(&d) else {
            continue;
        };
        if !visit(m.ino(), &d) {
            break;
        }
        if depth >= max_depth {
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
    }
}

/// A managed command's own I/O: its bios as the event monitor attributes
/// them when it runs, else its accounting source (see the module
/// documentation).
pub struct CommandIo {
    bios: Arc<BioAttribution>,
    counters: Box<dyn OwnIoSource>,
}

impl std::fmt::Debug for CommandIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandIo")
            .field("bios", &self.bios)
            .finish_non_exhaustive()
    }
}

impl CommandIo {
    /// The command in the v2 cgroup `cgroup_dir`, with `counters` its
    /// polled accounting (writes, and everything under the poller).
    pub fn new(cgroup_dir: &Path, counters: Box<dyn OwnIoSource>) -> CommandIo {
        CommandIo::with_attribution(Arc::new(BioAttribution::new(cgroup_dir)), counters)
    }

    /// A job whose bios `bios` tells apart (by process: a native job),
    /// with `counters` what the poller uses instead.
    pub fn with_attribution(
        bios: Arc<BioAttribution>,
        counters: Box<dyn OwnIoSource>,
    ) -> CommandIo {
        CommandIo { bios, counters }
    }

    /// The attribution the event monitor fills.
    pub fn attribution(&self) -> Arc<BioAttribution> {
        self.bios.clone()
    }
}

impl OwnIoSource for CommandIo {
    fn snapshot(&self) -> OwnIo {
        // read every time, attached or not: a Linger source keeps its
        // "moved" state from one snapshot to the next
        let polled = self.counters.snapshot();
        if !self.bios.attached() {
            return polled;
        }
        let (mut io, writing) = self.bios.snapshot_at(monotonic_ns());
        io.write_sectors = polled.write_sectors;
        io.writes_in_flight = writing || polled.writes_in_flight;
        io.shield_events = polled.shield_events;
        io
    }

    fn in_flight_is_exact(&self) -> bool {
        self.counters.in_flight_is_exact()
    }

    fn bio_attribution(&self) -> Option<Arc<BioAttribution>> {
        Some(self.bios.clone())
    }
}

/// The parent of process `pid`, from `/proc/PID/stat` (None: gone, or
/// unreadable).
fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    super::stat_field(&stat, 1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cgroup_like_tree() -> (tempfile::TempDir, u64, u64) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("child")).unwrap();
        let top = std::fs::metadata(d.path()).unwrap().ino();
        let child = std::fs::metadata(d.path().join("child")).unwrap().ino();
        (d, top, child)
    }

    #[test]
    fn bios_of_the_cgroup_and_below_are_the_commands_kernel_writes_are_left_to_counters() {
        let (d, top, child) = cgroup_like_tree();
        let other = std::fs::metadata("/").unwrap().ino() ^ 0x5a5a_0000;
        let a = BioAttribution::new(d.path());
        assert_eq!(a.owner(top, false, false), BioOwner::Command);
        assert_eq!(a.owner(child, true, false), BioOwner::Command);
        // a kernel thread in the command's cgroup is still the command's
        assert_eq!(a.owner(top, true, true), BioOwner::Command);
        assert_eq!(a.owner(other, false, false), BioOwner::Foreground);
        assert_eq!(a.owner(other, true, false), BioOwner::Foreground);
        // a reading kworker is someone's FG; a writing one, write-back
        assert_eq!(a.owner(other, false, true), BioOwner::Foreground);
        assert_eq!(a.owner(other, true, true), BioOwner::KernelWrite);
    }

    #[test]
    fn a_sub_cgroup_made_later_is_found_on_a_rescan() {
        let (d, _, _) = cgroup_like_tree();
        let a = BioAttribution::new(d.path());
        let _ = a.owner(1, false, false); // first scan
        std::fs::create_dir(d.path().join("later")).unwrap();
        let later = std::fs::metadata(d.path().join("later")).unwrap().ino();
        std::thread::sleep(std::time::Duration::from_nanos(RESCAN_NS + 1_000_000));
        assert_eq!(a.owner(later, false, false), BioOwner::Command);
    }

    /// A btrfs scrub's bios are queued by the `btrfs scrub start` process
    /// (docs/native.md, "The brake"): by pid they are the job's, in any cgroup, and a new run
    /// replaces the pid; anyone else's read is FG.
    #[test]
    fn a_job_told_apart_by_process_counts_its_pids_bios_only() {
        let a = BioAttribution::of_processes();
        let root_cg = std::fs::metadata("/").unwrap().ino();
        assert_eq!(
            a.count(root_cg, 4242, false, false, 128, 10),
            BioOwner::Foreground
        );
        a.set_pids(&[4242]);
        assert_eq!(
            a.count(root_cg, 4242, false, false, 128, 20),
            BioOwner::Command
        );
        assert_eq!(
            a.count(root_cg, 4243, false, false, 8, 30),
            BioOwner::Foreground
        );
        a.set_pids(&[5000]);
        assert_eq!(
            a.count(root_cg, 4242, false, false, 8, 40),
            BioOwner::Foreground
        );
        assert_eq!(
            a.count(root_cg, 5000, false, false, 64, 50),
            BioOwner::Command
        );
        let c = a.counts();
        assert_eq!((c.command_bios, c.foreground_bios), (2, 3));
        // 128 + 64 sectors, and the last one is in flight
        let (io, _) = a.snapshot_at(60);
        assert_eq!(io.read_sectors, 192);
        assert!(io.reads_in_flight);
    }

    /// A child of this process queues bios before its pid is named (the
    /// race of a scrub's first superblock reads against `set_pids`): they
    /// are the job's; another process's are FG, and stay so once found.
    #[test]
    fn a_child_not_yet_named_is_the_jobs_and_others_are_not() {
        let a = BioAttribution::of_processes();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let root_cg = std::fs::metadata("/").unwrap().ino();
        let pid = child.id();
        assert_eq!(
            a.count(root_cg, pid, false, false, 8, 10),
            BioOwner::Command
        );
        // pid 1 is no child of a test (the init, or the container's)
        assert_eq!(parent_pid(1).map(|p| p == std::process::id()), Some(false));
        assert_eq!(
            a.count(root_cg, 1, false, false, 8, 20),
            BioOwner::Foreground
        );
        let c = a.counts();
        assert_eq!((c.command_bios, c.foreground_bios), (1, 1));
        // a cgroup-told command does not adopt fallow's children
        let d = tempfile::tempdir().unwrap();
        let by_cgroup = BioAttribution::new(d.path());
        assert_eq!(
            by_cgroup.count(root_cg, pid, false, false, 8, 30),
            BioOwner::Foreground
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn the_parent_is_read_past_a_comm_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 77 4242 4242 0 -1 4194560 0 0";
        assert_eq!(super::super::stat_field(stat, 1), Some("77"));
        assert_eq!(super::super::stat_field("garbage", 1), None);
        let ppid = std::os::unix::process::parent_id();
        assert_eq!(parent_pid(std::process::id()), Some(ppid));
    }

    /// A polled source that reports fixed counts and says they moved.
    struct Fixed(OwnIo);
    impl OwnIoSource for Fixed {
        fn snapshot(&self) -> OwnIo {
            self.0
        }
        fn in_flight_is_exact(&self) -> bool {
            false
        }
    }

    #[test]
    fn command_io_reads_its_counters_until_attached_then_the_bios() {
        let (d, top, _) = cgroup_like_tree();
        let polled = OwnIo {
            read_sectors: 1000,
            write_sectors: 24,
            ios: 7,
            reads_in_flight: true,
            writes_in_flight: false,
            shield_events: 0,
        };
        let io = CommandIo::new(d.path(), Box::new(Fixed(polled)));
        let a = io.bio_attribution().unwrap();
        assert_eq!(io.snapshot(), polled);
        assert!(!io.in_flight_is_exact());
        a.attach();
        // attached: reads from the bios (none yet), writes from the counters
        let s = io.snapshot();
        assert_eq!((s.read_sectors, s.write_sectors, s.ios), (0, 24, 0));
        assert!(!s.reads_in_flight && !s.writes_in_flight);
        let now = monotonic_ns();
        assert_eq!(a.count(top, 1, false, false, 128, now), BioOwner::Command);
        assert_eq!(a.count(top, 1, false, false, 8, now), BioOwner::Command);
        assert_eq!(a.count(top, 1, true, false, 16, now), BioOwner::Command);
        let s = io.snapshot();
        assert_eq!((s.read_sectors, s.write_sectors, s.ios), (136, 24, 3));
        assert!(s.reads_in_flight && s.writes_in_flight);
        // past the grace, in flight until the device is seen idle long
        // enough after the last bio
        let (late, writing) = a.snapshot_at(now + BIO_GRACE_NS);
        assert!(late.reads_in_flight && writing);
        a.device_idle_at(now + SETTLE_NS - 1);
        assert!(a.snapshot_at(now + BIO_GRACE_NS).0.reads_in_flight);
        a.device_idle_at(now + SETTLE_NS);
        let (late, writing) = a.snapshot_at(now + BIO_GRACE_NS);
        assert!(!late.reads_in_flight && !writing);
        // within the grace it is in flight whatever the device shows
        assert!(a.snapshot_at(now + BIO_GRACE_NS - 1).0.reads_in_flight);
        assert_eq!(late.read_sectors, 136);
        let c = a.counts();
        assert_eq!((c.command_bios, c.foreground_bios), (3, 0));
    }

    #[test]
    fn lost_samples_count_as_the_commands_io_in_flight() {
        let (d, _, _) = cgroup_like_tree();
        let a = BioAttribution::new(d.path());
        let now = monotonic_ns();
        a.lost(0, now);
        assert!(!a.snapshot_at(now).0.reads_in_flight);
        a.lost(3, now);
        let (s, writing) = a.snapshot_at(now + 1);
        assert!(s.reads_in_flight && writing);
        assert_eq!(a.counts().lost, 3);
    }
}
