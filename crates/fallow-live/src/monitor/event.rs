//! The event-driven monitor: every block request on a set of devices, as
//! the kernel's block tracepoints report it, read through
//! `perf_event_open` ([`super::perf`]) with no BPF, and attributed to the
//! process and cgroup that issued it (docs/monitor.md).
//!
//! [`EventMonitor::wait`] sleeps in `poll` until the kernel has a block
//! event for one of the devices, so an idle disk costs no CPU, and
//! returns the events with their `CLOCK_MONOTONIC` times (comparable with
//! [`crate::clock::monotonic_ns`]).
//!
//! Tracepoints, and why each:
//! - `block/block_bio_queue` ([`IoPhase::Queue`]): a bio submitted, in the
//!   submitter's context, so its pid, comm and cgroup are the issuer's.
//!   This is the earliest sight of a request and the one to attribute.
//! - `block/block_rq_issue` ([`IoPhase::Issue`]): the request goes to the
//!   driver (the device's arrival time; in the context of whoever runs the
//!   queue, often a kworker, so it carries the submitter found by its
//!   sector from the queue event).
//! - `block/block_rq_complete` ([`IoPhase::Complete`]): the device finished
//!   it (in-flight tracking: never spin down with I/O in flight).
//! - `writeback/writeback_single_inode_start` / `writeback_single_inode`:
//!   a flusher thread starts and ends writing one inode back; bios the
//!   same thread queues in between are that inode's writeback.
//! - `writeback/writeback_dirty_inode_enqueue` (or, before 5.x kernels
//!   had it, `writeback_mark_inode_dirty` with `I_DIRTY_PAGES`): who made
//!   a clean inode dirty, in that process's context (the writeback is then
//!   also credited to it). Not `writeback_dirty_inode`: that one fires for
//!   inode metadata only.
//!
//! The record layouts come from each tracepoint's `format` file
//! ([`super::tracepoint`]). A path for a written-back inode is found only
//! when the process that dirtied it still has it open (its
//! `/proc/PID/fd`); the kernel names inodes, not paths, so otherwise the
//! event says "inode N on MAJ:MIN" and [`WritebackInode::path`] is `None`.
//!
//! Set `FALLOW_MONITOR=poll` to make [`EventMonitor::available`] say no
//! (the sysfs poller is then used, as on a kernel that forbids perf).

use super::perf::{Kick, PerfRings, TpOpen, Woke};
use super::tracepoint::{tracefs_root, Field, Tracepoint};
use crate::clock::{monotonic_ns, thread_cpu_ns};
use crate::error::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A block device by its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DevId {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl std::fmt::Display for DevId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl DevId {
    /// From the kernel's internal `dev_t` (major << 20 | minor), as block
    /// tracepoints record it.
    pub fn from_kernel(dev: u64) -> DevId {
        DevId {
            major: (dev >> 20) as u32,
            minor: (dev & 0xf_ffff) as u32,
        }
    }

    /// The kernel's internal `dev_t`, for a tracepoint filter.
    pub fn to_kernel(self) -> u64 {
        (u64::from(self.major) << 20) | u64::from(self.minor)
    }

    /// From a `MAJ:MIN` text (sysfs `dev`, a bdi name).
    pub fn parse(text: &str) -> Option<DevId> {
        let (a, b) = text.trim().split_once(':')?;
        Some(DevId {
            major: a.parse().ok()?,
            minor: b.parse().ok()?,
        })
    }

    /// A block device by its kernel name (`sda`, `loop3`, `sda1`), from
    /// `/sys/class/block/NAME/dev`.
    pub fn of_name(name: &str) -> Result<DevId> {
        let name = name.trim().trim_start_matches("/dev/");
        let p = Path::new("/sys/class/block").join(name).join("dev");
        let text = std::fs::read_to_string(&p)
            .map_err(|e| Error::io(&p, "no such block device (lsblk lists them)", e))?;
        DevId::parse(&text).ok_or_else(|| Error::Parse {
            path: p,
            message: format!("`{}` is not MAJ:MIN", text.trim()),
        })
    }

    /// The devices whose events describe I/O counted in a sysfs `stat`
    /// directory: the device itself and, for a partition, its disk (the
    /// kernel issues a partition's requests on the whole disk).
    pub fn of_sysfs_dir(dir: &Path) -> Option<Vec<DevId>> {
        let own = DevId::parse(&std::fs::read_to_string(dir.join("dev")).ok()?)?;
        let mut v = vec![own];
        if dir.join("partition").is_file() {
            let real = std::fs::canonicalize(dir).ok()?;
            if let Some(d) = real
                .parent()
                .and_then(|p| std::fs::read_to_string(p.join("dev")).ok())
                .and_then(|t| DevId::parse(&t))
            {
                v.push(d);
            }
        }
        Some(v)
    }
}

/// Which point of a request's life an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoPhase {
    /// A bio was submitted (`block_bio_queue`), by the issuer.
    Queue,
    /// A request went to the driver (`block_rq_issue`).
    Issue,
    /// The device completed a request (`block_rq_complete`).
    Complete,
}

/// What a request does, from the kernel's `rwbs` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoOp {
    /// `R`.
    Read,
    /// `W` (a preflush `F` before it does not change that).
    Write,
    /// `D` or `DE`: discard, secure erase.
    Discard,
    /// `F` alone: a cache flush without data.
    Flush,
    /// Anything else (`N`: no data, e.g. a zone command).
    Other,
}

impl IoOp {
    /// From `rwbs` (`R`, `WS`, `FWFS`, `D`, `F`, `N`).
    pub fn from_rwbs(rwbs: &str) -> IoOp {
        let op = rwbs.trim_start_matches('F');
        match op.chars().next() {
            Some('R') => IoOp::Read,
            Some('W') => IoOp::Write,
            Some('D') | Some('E') => IoOp::Discard,
            Some('N') => IoOp::Other,
            // only F's, or F's then flags (S, M, A…): a flush
            _ if rwbs.starts_with('F') => IoOp::Flush,
            _ => IoOp::Other,
        }
    }
}

/// A process, as seen when it did something.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Task {
    /// Process (thread group) id.
    pub pid: u32,
    /// Its command name (16 bytes at most, as the kernel keeps it).
    pub comm: String,
    /// Its cgroup (v2) path, e.g. `/system.slice/backup.service`, when known.
    pub cgroup: Option<String>,
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.comm, self.pid)?;
        if let Some(c) = &self.cgroup {
            write!(f, " in {c}")?;
        }
        Ok(())
    }
}

/// An inode a flusher wrote back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WritebackInode {
    /// The backing device's bdi name (`7:0`, `btrfs-1`).
    pub bdi: String,
    /// The inode number.
    pub ino: u64,
    /// The device the inode's file system is on, when the bdi is named
    /// by device numbers.
    pub dev: Option<DevId>,
    /// The last process seen dirtying its pages, if any was seen.
    pub dirtied_by: Option<Task>,
    /// Its path, when the dirtying process still has it open; `None`
    /// when it could not be found (the kernel names inodes, not paths).
    pub path: Option<PathBuf>,
}

/// Who is behind a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Origin {
    /// A process submitted it: the event's pid, comm and cgroup are its.
    Process,
    /// A flusher thread wrote dirty pages back; `inode` is the inode it
    /// was writing when known (`None`: a flusher, inode not seen).
    Writeback {
        /// The inode.
        inode: Option<WritebackInode>,
    },
    /// Not known: a kernel thread doing something else than writeback, or
    /// an issue or completion whose submission was not seen (the pid and
    /// comm are then of the task on the CPU at that moment).
    Unknown,
}

/// One block event on a watched device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IoEvent {
    /// When the kernel recorded it, `CLOCK_MONOTONIC` ns.
    pub time_ns: u64,
    /// Queue, issue or completion.
    pub phase: IoPhase,
    /// The device.
    pub dev: DevId,
    /// First 512-byte sector.
    pub sector: u64,
    /// Bytes of data (0 for a flush).
    pub bytes: u64,
    /// What the request does.
    pub op: IoOp,
    /// The issuer's process id (see [`Origin`] for whose it is).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The issuer's command name.
    pub comm: String,
    /// The issuer's cgroup (v2) id, when the kernel gives it (5.7+).
    pub cgroup_id: Option<u64>,
    /// The issuer's cgroup path, when known (from the id, else
    /// `/proc/PID/cgroup` read once per pid).
    pub cgroup: Option<String>,
    /// Completion status (0, or a negative errno); 0 for queue and issue.
    pub error: i32,
    /// Who is behind it.
    pub origin: Origin,
}

impl IoEvent {
    /// One line naming who is behind the request, e.g.
    /// `dd[4242] in /user.slice`, `writeback of inode 12 on 7:0 (dirtied
    /// by cp[17]); path not found`, `unknown (kworker/1:1H[90])`.
    pub fn who(&self) -> String {
        let task = Task {
            pid: self.pid,
            comm: self.comm.clone(),
            cgroup: self.cgroup.clone(),
        };
        match &self.origin {
            Origin::Process => task.to_string(),
            Origin::Writeback { inode: None } => {
                format!("writeback by {task}, inode not seen")
            }
            Origin::Writeback { inode: Some(i) } => {
                let on = i.dev.map_or(format!("bdi {}", i.bdi), |d| d.to_string());
                let by = i
                    .dirtied_by
                    .as_ref()
                    .map_or(String::new(), |t| format!(" (dirtied by {t})"));
                match &i.path {
                    Some(p) => {
                        format!("writeback of {} (inode {} on {on}){by}", p.display(), i.ino)
                    }
                    None => format!("writeback of inode {} on {on}{by}; path not found", i.ino),
                }
            }
            Origin::Unknown => format!("unknown ({}[{}])", self.comm, self.pid),
        }
    }
}

/// Settings of an [`EventMonitor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventMonitorConfig {
    /// Ring buffer pages per CPU (a power of two); 64 (256 KiB with 4 KiB
    /// pages) holds ~2,500 events between two reads.
    pub ring_pages: usize,
    /// Also read the writeback tracepoints to attribute flusher I/O.
    pub attribution: bool,
    /// Wake the reader at each block event (the driver's monitor: an FG
    /// arrival must be seen at once), or only when a ring is half full,
    /// for a reader that reads on a timer ([`crate::budget::LatencyWatch`]):
    /// each wake-up is a thread scheduled on the two cores the FG's own
    /// read path needs (docs/live.md, "What fallow's presence costs").
    pub prompt: bool,
}

impl Default for EventMonitorConfig {
    fn default() -> Self {
        EventMonitorConfig {
            ring_pages: 64,
            attribution: true,
            prompt: true,
        }
    }
}

/// What an [`EventMonitor`] has seen and spent.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EventStats {
    /// Events returned (on the watched devices).
    pub events: u64,
    /// Samples read from the rings (writeback ones and other devices'
    /// included).
    pub samples: u64,
    /// Samples lost to full ring buffers.
    pub lost: u64,
    /// Records too short for their layout, skipped.
    pub malformed: u64,
    /// Times `wait` returned with something to read.
    pub wakeups: u64,
    /// Whether the kernel accepted the device filter (else every
    /// device's block events wake the monitor and are dropped here).
    pub kernel_filter: bool,
    /// Whether samples carry the cgroup id.
    pub sample_cgroup: bool,
    /// CPU time spent in `wait` and reading, s (on the calling thread).
    pub cpu_s: f64,
}

struct BlockTp {
    id: u64,
    phase: IoPhase,
    dev: Field,
    sector: Field,
    nr_sector: Field,
    bytes: Option<Field>,
    rwbs: Field,
    comm: Option<Field>,
    error: Option<Field>,
}

enum WbKind {
    Start,
    End,
    Dirty,
}

struct WbTp {
    id: u64,
    kind: WbKind,
    /// The bdi name (`7:0`), in the start/end events.
    name: Option<Field>,
    /// The file system's device, in the enqueue event.
    dev: Option<Field>,
    ino: Field,
    /// `writeback_mark_inode_dirty`'s flags (the fallback for kernels
    /// without the enqueue event).
    flags: Option<Field>,
}

/// An inode's `I_DIRTY_PAGES` bit in `writeback_dirty_inode`'s `flags`
/// (include/linux/fs.h).
const I_DIRTY_PAGES: u64 = 1 << 2;
/// Entries kept in each attribution map before it is cleared (bounds
/// memory whatever the workload).
const MAX_MAP: usize = 65_536;

/// Who queued a bio: the task, its cgroup id, the thread and why.
type Submitter = (Task, Option<u64>, u32, Origin);

struct Owned {
    pid: u32,
    tid: u32,
    time_ns: u64,
    cgroup_id: Option<u64>,
    raw: Vec<u8>,
}

/// The block events of a set of devices, with their issuers.
pub struct EventMonitor {
    rings: PerfRings,
    devs: Vec<DevId>,
    block: Vec<BlockTp>,
    wb: Vec<WbTp>,
    cgroups: CgroupNames,
    /// (dev, sector) of queued bios → who queued them and why.
    submitters: HashMap<(DevId, u64), Submitter>,
    /// Flusher tid → the inode it is writing back.
    writing: HashMap<u32, (String, u64)>,
    /// (file system device, ino) → who last made it dirty.
    dirtiers: HashMap<(DevId, u64), Task>,
    /// (dev, ino) → its path, once looked for.
    paths: HashMap<(DevId, u64), Option<PathBuf>>,
    stats: EventStats,
    batch: Vec<Owned>,
}

impl std::fmt::Debug for EventMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventMonitor")
            .field("devs", &self.devs)
            .field("stats", &self.stats)
            .finish()
    }
}

/// The environment variable that forces the poller (`poll`) or the
/// event monitor (`events`); `auto` or unset: events when available.
pub const MONITOR_ENV: &str = "FALLOW_MONITOR";

impl EventMonitor {
    /// `Ok(())` if the event monitor can run here, else why not (no
    /// tracefs, no block tracepoints, `perf_event_open` not permitted,
    /// or `FALLOW_MONITOR=poll`). Opens and closes one event to be sure.
    pub fn available() -> std::result::Result<(), String> {
        if std::env::var(MONITOR_ENV).is_ok_and(|v| v.trim() == "poll") {
            return Err(format!("{MONITOR_ENV}=poll"));
        }
        let (root, _) = super::tracepoint::tracefs_root_mounted()?;
        let tp = Tracepoint::load(&root, "block", "block_rq_issue").map_err(|e| e.to_string())?;
        PerfRings::open(
            &[TpOpen {
                id: tp.id,
                wake: true,
                filter: None,
            }],
            1,
            false,
        )
        .map(|_| ())
        .map_err(|e| {
            format!(
                "{e} (perf_event_paranoid is {}; needs CAP_PERFMON or root)",
                paranoid()
            )
        })
    }

    /// Watch `devs` with the default settings.
    pub fn open(devs: &[DevId]) -> Result<EventMonitor> {
        Self::open_with(devs, EventMonitorConfig::default())
    }

    /// Watch `devs`.
    pub fn open_with(devs: &[DevId], cfg: EventMonitorConfig) -> Result<EventMonitor> {
        if devs.is_empty() {
            return Err(Error::invalid("event monitor", "no device to watch"));
        }
        if let Err(why) = Self::available() {
            return Err(Error::Unsupported(format!(
                "the event monitor cannot run: {why}"
            )));
        }
        let root =
            tracefs_root().ok_or_else(|| Error::Unsupported("tracefs is not mounted".into()))?;
        let filter = devs
            .iter()
            .map(|d| format!("dev == {}", d.to_kernel()))
            .collect::<Vec<_>>()
            .join(" || ");
        let mut block = Vec::new();
        let mut opens = Vec::new();
        for (name, phase) in [
            ("block_bio_queue", IoPhase::Queue),
            ("block_rq_issue", IoPhase::Issue),
            ("block_rq_complete", IoPhase::Complete),
        ] {
            let tp = Tracepoint::load(&root, "block", name)?;
            opens.push(TpOpen {
                id: tp.id,
                wake: cfg.prompt,
                filter: Some(filter.clone()),
            });
            block.push(BlockTp {
                id: tp.id,
                phase,
                dev: tp.need("dev")?,
                sector: tp.need("sector")?,
                nr_sector: tp.need("nr_sector")?,
                bytes: tp.field("bytes").cloned(),
                rwbs: tp.need("rwbs")?,
                comm: tp.field("comm").cloned(),
                error: tp.field("error").cloned(),
            });
        }
        let mut wb = Vec::new();
        if cfg.attribution {
            let enqueue = Tracepoint::load(&root, "writeback", "writeback_dirty_inode_enqueue");
            let dirty = if enqueue.is_ok() {
                "writeback_dirty_inode_enqueue"
            } else {
                "writeback_mark_inode_dirty"
            };
            for (name, kind) in [
                ("writeback_single_inode_start", WbKind::Start),
                ("writeback_single_inode", WbKind::End),
                (dirty, WbKind::Dirty),
            ] {
                // attribution is best effort: a kernel without one of
                // these still gets its block events
                let Ok(tp) = Tracepoint::load(&root, "writeback", name) else {
                    continue;
                };
                let Some(ino) = tp.field("ino") else {
                    continue;
                };
                let flags = tp.field("flags").cloned();
                // Only the watched disks' writeback, filtered in the
                // kernel: these tracepoints fire for every file system, and
                // on a busy machine their records filled the ring and woke
                // an idle daemon to decode them (a /proc read per dirtier),
                // most of its idle cost (docs/spindown.md#cost). A bdi is
                // named MAJ:MIN after its disk, or otherwise (btrfs-1) by a
                // file system that spans disks: those are kept. The
                // dirtier's event names the file system's device. A filter
                // the kernel refuses is dropped and the records are
                // filtered here as before.
                let mut parts = Vec::new();
                if tp.field("name").is_some() {
                    let names = devs
                        .iter()
                        .map(|d| format!("name == \"{d}\""))
                        .collect::<Vec<_>>()
                        .join(" || ");
                    parts.push(format!("({names} || !(name ~ \"*:*\"))"));
                } else if tp.field("dev").is_some() {
                    let devs = devs
                        .iter()
                        .map(|d| format!("dev == {}", d.to_kernel()))
                        .collect::<Vec<_>>()
                        .join(" || ");
                    parts.push(format!("({devs})"));
                }
                if flags.is_some() {
                    parts.push(format!("(flags & {I_DIRTY_PAGES})"));
                }
                let filter = (!parts.is_empty()).then(|| parts.join(" && "));
                opens.push(TpOpen {
                    id: tp.id,
                    wake: false,
                    filter,
                });
                wb.push(WbTp {
                    id: tp.id,
                    kind,
                    name: tp.field("name").cloned(),
                    dev: tp.field("dev").cloned(),
                    ino: ino.clone(),
                    flags,
                });
            }
        }
        let rings = PerfRings::open(&opens, cfg.ring_pages, true)?;
        let stats = EventStats {
            kernel_filter: rings.filtered,
            sample_cgroup: rings.with_cgroup,
            ..EventStats::default()
        };
        Ok(EventMonitor {
            rings,
            devs: devs.to_vec(),
            block,
            wb,
            cgroups: CgroupNames::new(),
            submitters: HashMap::new(),
            writing: HashMap::new(),
            dirtiers: HashMap::new(),
            paths: HashMap::new(),
            stats,
            batch: Vec::new(),
        })
    }

    /// The devices watched.
    pub fn devices(&self) -> &[DevId] {
        &self.devs
    }

    /// A handle that makes a blocked [`EventMonitor::wait`] return (empty)
    /// from another thread: to stop a daemon.
    pub fn kick(&self) -> Kick {
        self.rings.kick()
    }

    /// The descriptors that turn readable when block events arrive, for a
    /// caller that sleeps on several sources at once (the spin-down
    /// daemon): `poll(2)` them for `POLLIN`, then [`EventMonitor::read_now`].
    pub fn wait_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.rings.wait_fds()
    }

    /// Wait at most `timeout_ns` (`None`: until an event or a kick) for
    /// block events on the watched devices, and return them in time order
    /// (empty on timeout or kick). Sleeps in the kernel meanwhile.
    pub fn wait(&mut self, timeout_ns: Option<u64>) -> Result<Vec<IoEvent>> {
        let cpu0 = thread_cpu_ns();
        let deadline = timeout_ns.map(|t| monotonic_ns().saturating_add(t));
        let out = loop {
            let left = deadline.map(|d| d.saturating_sub(monotonic_ns()));
            let woke = self.rings.wait(left)?;
            if woke != Woke::Timeout {
                self.stats.wakeups += 1;
            }
            let evs = self.read_now();
            // woken by another device's events (no kernel filter) or by
            // writeback records alone: wait on, unless kicked or late
            if !evs.is_empty()
                || woke != Woke::Ring
                || deadline.is_some_and(|d| monotonic_ns() >= d)
            {
                break evs;
            }
        };
        self.stats.cpu_s += (thread_cpu_ns() - cpu0) as f64 / 1e9;
        Ok(out)
    }

    /// The events waiting now, without sleeping.
    pub fn read_now(&mut self) -> Vec<IoEvent> {
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        self.stats.samples += self.rings.drain(|s| {
            batch.push(Owned {
                pid: s.pid,
                tid: s.tid,
                time_ns: s.time_ns,
                cgroup_id: s.cgroup_id,
                raw: s.raw.to_vec(),
            })
        });
        self.stats.lost = self.rings.lost;
        // the rings are per CPU: merge them into time order, so a
        // flusher's inode window and its bios line up across CPUs
        batch.sort_by_key(|s| s.time_ns);
        let mut out = Vec::new();
        for s in &batch {
            if let Some(e) = self.decode(s) {
                out.push(e);
            }
        }
        self.stats.events += out.len() as u64;
        self.batch = batch;
        out
    }

    /// What the monitor has seen and spent.
    pub fn stats(&self) -> EventStats {
        let mut s = self.stats.clone();
        s.malformed += self.rings.malformed;
        s
    }

    fn decode(&mut self, s: &Owned) -> Option<IoEvent> {
        let ty = u64::from(u16::from_ne_bytes(s.raw.get(0..2)?.try_into().ok()?));
        if let Some(i) = self.wb.iter().position(|w| w.id == ty) {
            self.writeback_record(i, s);
            return None;
        }
        let tp = self.block.iter().find(|b| b.id == ty)?;
        let (Some(dev), Some(sector), Some(nr), Some(rwbs)) = (
            tp.dev.uint(&s.raw),
            tp.sector.uint(&s.raw),
            tp.nr_sector.uint(&s.raw),
            tp.rwbs.text(&s.raw),
        ) else {
            self.stats.malformed += 1;
            return None;
        };
        let dev = DevId::from_kernel(dev);
        if !self.devs.contains(&dev) {
            return None;
        }
        let phase = tp.phase;
        let op = IoOp::from_rwbs(&rwbs);
        let bytes = match (phase, &tp.bytes) {
            (IoPhase::Issue, Some(b)) => b.uint(&s.raw).unwrap_or(nr * 512),
            _ => nr * 512,
        };
        let error = tp.error.as_ref().and_then(|f| f.int(&s.raw)).unwrap_or(0) as i32;
        let comm_on_cpu = tp.comm.as_ref().and_then(|f| f.text(&s.raw));
        let comm_on_cpu = comm_on_cpu.unwrap_or_else(|| proc_comm(s.pid).unwrap_or_default());
        let (task, cgroup_id, tid, origin) = match phase {
            IoPhase::Queue => {
                let cgroup = self.cgroups.name(s.cgroup_id, s.pid);
                let task = Task {
                    pid: s.pid,
                    comm: comm_on_cpu,
                    cgroup,
                };
                let origin = self.origin_of(s.tid, &task);
                if self.submitters.len() >= MAX_MAP {
                    self.submitters.clear();
                }
                self.submitters.insert(
                    (dev, sector),
                    (task.clone(), s.cgroup_id, s.tid, origin.clone()),
                );
                (task, s.cgroup_id, s.tid, origin)
            }
            IoPhase::Issue | IoPhase::Complete => {
                let known = if phase == IoPhase::Complete {
                    self.submitters.remove(&(dev, sector))
                } else {
                    self.submitters.get(&(dev, sector)).cloned()
                };
                match known {
                    Some(k) => k,
                    None => (
                        Task {
                            pid: s.pid,
                            comm: comm_on_cpu,
                            cgroup: self.cgroups.name(s.cgroup_id, s.pid),
                        },
                        s.cgroup_id,
                        s.tid,
                        Origin::Unknown,
                    ),
                }
            }
        };
        Some(IoEvent {
            time_ns: s.time_ns,
            phase,
            dev,
            sector,
            bytes,
            op,
            pid: task.pid,
            tid,
            comm: task.comm,
            cgroup_id,
            cgroup: task.cgroup,
            error,
            origin,
        })
    }

    /// A queued bio's origin: a flusher inside an inode's writeback is
    /// writeback of that inode; a kernel worker is unknown; else the process.
    fn origin_of(&mut self, tid: u32, task: &Task) -> Origin {
        if let Some((bdi, ino)) = self.writing.get(&tid).cloned() {
            let dev = DevId::parse(&bdi);
            let dirtied_by = dev.and_then(|d| self.dirtiers.get(&(d, ino)).cloned());
            let path = match (dev, &dirtied_by) {
                (Some(d), Some(t)) => self
                    .paths
                    .entry((d, ino))
                    .or_insert_with(|| find_open_path(t.pid, d, ino))
                    .clone(),
                _ => None,
            };
            return Origin::Writeback {
                inode: Some(WritebackInode {
                    bdi,
                    ino,
                    dev,
                    dirtied_by,
                    path,
                }),
            };
        }
        if task.comm.starts_with("flush-") {
            return Origin::Writeback { inode: None };
        }
        if task.comm.starts_with("kworker/") {
            return Origin::Unknown;
        }
        Origin::Process
    }

    fn writeback_record(&mut self, i: usize, s: &Owned) {
        let w = &self.wb[i];
        let Some(ino) = w.ino.uint(&s.raw) else {
            self.stats.malformed += 1;
            return;
        };
        let bdi = w.name.as_ref().and_then(|f| f.text(&s.raw));
        match (&w.kind, bdi) {
            (WbKind::Start, Some(bdi)) => {
                if self.writing.len() >= MAX_MAP {
                    self.writing.clear();
                }
                self.writing.insert(s.tid, (bdi, ino));
            }
            (WbKind::End, _) => {
                self.writing.remove(&s.tid);
            }
            (WbKind::Dirty, bdi) => {
                // the filter may have been refused: check the bit here too
                let pages = w
                    .flags
                    .as_ref()
                    .and_then(|f| f.uint(&s.raw))
                    .is_none_or(|f| f & I_DIRTY_PAGES != 0);
                let dev = match (&w.dev, bdi) {
                    (Some(f), _) => f.uint(&s.raw).map(DevId::from_kernel),
                    (None, Some(b)) => DevId::parse(&b),
                    _ => None,
                };
                let Some(dev) = dev.filter(|_| pages) else {
                    return;
                };
                let comm = proc_comm(s.pid).unwrap_or_default();
                let cgroup = self.cgroups.name(s.cgroup_id, s.pid);
                if self.dirtiers.len() >= MAX_MAP {
                    self.dirtiers.clear();
                }
                self.dirtiers.insert(
                    (dev, ino),
                    Task {
                        pid: s.pid,
                        comm,
                        cgroup,
                    },
                );
            }
            (WbKind::Start, None) => self.stats.malformed += 1,
        }
    }
}

fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn proc_comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string())
}

/// Most descriptors looked at for one process when searching a path.
const MAX_FDS: usize = 4096;

/// The path of inode `ino` on `dev` if process `pid` has it open.
fn find_open_path(pid: u32, dev: DevId, ino: u64) -> Option<PathBuf> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    for e in dir.flatten().take(MAX_FDS) {
        let Ok(m) = std::fs::metadata(e.path()) else {
            continue;
        };
        let d = m.dev();
        if m.ino() == ino && rustix::fs::major(d) == dev.major && rustix::fs::minor(d) == dev.minor
        {
            return std::fs::read_link(e.path()).ok();
        }
    }
    None
}

/// Cgroup paths by cgroup id (a walk of the cgroup2 mount, redone at most
/// once a second on a miss) and by pid (`/proc/PID/cgroup`, read once per
/// pid).
struct CgroupNames {
    mount: Option<PathBuf>,
    by_id: HashMap<u64, String>,
    by_pid: HashMap<u32, Option<String>>,
    last_walk_ns: u64,
}

/// Most cgroup directories indexed in one walk.
const MAX_CGROUPS: usize = 100_000;

impl CgroupNames {
    fn new() -> CgroupNames {
        CgroupNames {
            mount: cgroup2_mount(),
            by_id: HashMap::new(),
            by_pid: HashMap::new(),
            last_walk_ns: 0,
        }
    }

    fn name(&mut self, id: Option<u64>, pid: u32) -> Option<String> {
        if let Some(id) = id {
            if let Some(n) = self.by_id.get(&id) {
                return Some(n.clone());
            }
            let now = monotonic_ns();
            if now.saturating_sub(self.last_walk_ns) >= 1_000_000_000 || self.last_walk_ns == 0 {
                self.last_walk_ns = now;
                self.walk();
                if let Some(n) = self.by_id.get(&id) {
                    return Some(n.clone());
                }
            }
        }
        if self.by_pid.len() >= MAX_MAP {
            self.by_pid.clear();
        }
        self.by_pid
            .entry(pid)
            .or_insert_with(|| proc_cgroup(pid))
            .clone()
    }

    fn walk(&mut self) {
        let Some(root) = self.mount.clone() else {
            return;
        };
        self.by_id.clear();
        let by_id = &mut self.by_id;
        super::cgroup_bios::walk_cgroup_tree(&root, 32, |id, dir| {
            let rel = dir.strip_prefix(&root).unwrap_or(Path::new(""));
            by_id.insert(id, format!("/{}", rel.display()));
            by_id.len() < MAX_CGROUPS
        });
    }
}

/// The cgroup2 mount point, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// The v2 line (`0::PATH`) of `/proc/PID/cgroup`.
fn proc_cgroup(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_ops() {
        for (rwbs, op) in [
            ("R", IoOp::Read),
            ("RA", IoOp::Read),
            ("WS", IoOp::Write),
            ("FWFS", IoOp::Write),
            ("D", IoOp::Discard),
            ("DE", IoOp::Discard),
            ("F", IoOp::Flush),
            ("FF", IoOp::Flush),
            ("FS", IoOp::Flush),
            ("N", IoOp::Other),
            ("", IoOp::Other),
        ] {
            assert_eq!(IoOp::from_rwbs(rwbs), op, "{rwbs}");
        }
    }

    #[test]
    fn dev_numbers_round_trip_the_kernel_encoding() {
        let d = DevId {
            major: 259,
            minor: 3,
        };
        assert_eq!(d.to_kernel(), (259 << 20) | 3);
        assert_eq!(DevId::from_kernel(d.to_kernel()), d);
        assert_eq!(DevId::parse("7:0\n"), Some(DevId { major: 7, minor: 0 }));
        assert_eq!(DevId::parse("btrfs-1"), None);
        assert_eq!(d.to_string(), "259:3");
    }

    #[test]
    fn the_poll_env_var_makes_it_unavailable() {
        // the variable is read by `available`; this test sets it only in a
        // child process, so other tests keep the real answer
        if std::env::var("FALLOW_TEST_CHILD").is_ok() {
            let r = EventMonitor::available();
            assert_eq!(r, Err("FALLOW_MONITOR=poll".into()));
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let st = std::process::Command::new(exe)
            .args([
                "--exact",
                "monitor::event::tests::the_poll_env_var_makes_it_unavailable",
                "--nocapture",
            ])
            .env("FALLOW_TEST_CHILD", "1")
            .env(MONITOR_ENV, "poll")
            .status()
            .unwrap();
        assert!(st.success());
    }

    #[test]
    fn our_own_cgroup_is_found() {
        let Some(mine) = proc_cgroup(std::process::id()) else {
            eprintln!("skip: no cgroup v2 line in /proc/self/cgroup");
            return;
        };
        let mut c = CgroupNames::new();
        assert_eq!(c.name(None, std::process::id()), Some(mine.clone()));
        // by id: our cgroup directory's inode number
        if let Some(m) = &c.mount {
            let dir = m.join(mine.trim_start_matches('/'));
            let ino = std::fs::metadata(&dir).unwrap().ino();
            assert_eq!(c.name(Some(ino), 0), Some(mine));
        }
    }
}
