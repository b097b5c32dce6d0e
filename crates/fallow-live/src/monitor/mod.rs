//! The monitor: one thread that samples a device's counters at a fixed
//! interval (1 ms by default), subtracts fallow's own I/O and sends FG
//! [`Event`]s (busy, idle) to whoever drives the policy.
//!
//! - [`stat`]: the counter files and where they are ([`StatSource`],
//!   [`resolve_device`]).
//! - [`own`]: fallow's own I/O ([`OwnCounters`], [`CgroupIo`], [`ProcIo`]).
//! - [`cgroup_bios`]: a managed command's bios told apart by the cgroup
//!   that queued them, for the event-driven monitor ([`CommandIo`]).
//! - [`detect`]: the pure state machine from samples to events ([`Detector`]).
//!
//! Between two of its own requests a BG worker asks for a *look*
//! ([`Monitor::look`]): a sample taken with nothing of fallow's in flight.
//! While an own read is in flight the kernel's counters cannot say whose
//! a read in flight is, and an FG read that completes while the next own
//! read is already issued is offset by that read's sectors (counted at
//! issue); a worker issuing back to back would otherwise never let the
//! monitor see an FG request that queued behind its own.
//!
//! Two ways to know when to sample ([`MonitorKind`]): the *poller*
//! samples every interval, busy or idle; the *event-driven* monitor
//! ([`event`], the kernel's block tracepoints through `perf_event_open`)
//! samples at the interval only while the device is busy and otherwise
//! sleeps until the kernel reports a block request on it, so an idle
//! disk costs nothing and an arrival is seen within the wakeup latency
//! rather than up to an interval late. Both feed the same [`Detector`]
//! with the same counters, so the events are the same.
//!
//! The thread measures its own CPU time (`CLOCK_THREAD_CPUTIME_ID`, the
//! `getrusage(RUSAGE_THREAD)` account at ns resolution) so its cost is
//! reported, not guessed ([`MonitorStats::cpu_fraction`]).

pub mod cgroup_bios;
pub mod detect;
pub mod event;
pub mod own;
pub mod perf;
pub mod stat;
pub mod tracepoint;

pub use cgroup_bios::{BioAttribution, BioCounts, BioOwner, CommandIo};
pub use detect::{Detector, DetectorTotals, Event};
pub use event::{
    DevId, EventMonitor, EventMonitorConfig, EventStats, IoEvent, IoOp, IoPhase, Origin, Task,
    WritebackInode, MONITOR_ENV,
};
pub use own::{CgroupIo, OwnCounters, OwnIo, OwnIoSource, ProcIo};
pub use stat::{resolve_device, DiskStat, Inflight, ResolvedDevice, Sample, StatSource};

use crate::clock::{monotonic_ns, thread_cpu_ns};
use crate::error::{Error, Result};
use serde::Serialize;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// The monitor's statistics, readable from another thread
/// ([`Monitor::shared_stats`]).
#[derive(Debug, Clone)]
pub struct SharedStats(Arc<Mutex<MonitorStats>>);

impl SharedStats {
    /// The latest published statistics.
    pub fn get(&self) -> MonitorStats {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Settings of a monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MonitorConfig {
    /// Time between samples, ns.
    pub interval_ns: u64,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            interval_ns: 1_000_000,
        }
    }
}

/// Which monitor watches a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MonitorKind {
    /// The event-driven monitor where the kernel allows it, else the
    /// poller (the reason is in [`MonitorStats::kind_reason`]).
    #[default]
    Auto,
    /// The event-driven monitor, or an error saying why it cannot run.
    Events,
    /// The sysfs poller.
    Poll,
}

impl MonitorKind {
    /// `auto`, `events` or `poll`.
    pub fn parse(s: &str) -> Result<MonitorKind> {
        match s.trim() {
            "auto" | "" => Ok(MonitorKind::Auto),
            "events" => Ok(MonitorKind::Events),
            "poll" => Ok(MonitorKind::Poll),
            o => Err(Error::invalid(
                MONITOR_ENV,
                format!("`{o}`: use auto, events or poll"),
            )),
        }
    }

    /// From the environment variable `FALLOW_MONITOR` (unset: auto).
    pub fn from_env() -> Result<MonitorKind> {
        std::env::var(MONITOR_ENV).map_or(Ok(MonitorKind::Auto), |v| MonitorKind::parse(&v))
    }
}

/// What wakes the event-driven sampling thread: the block tracepoints
/// of the watched device.
struct Waker {
    rings: perf::PerfRings,
    /// A managed command's bios, told apart by cgroup in each sample.
    attributor: Option<Attributor>,
}

/// Reads each `block_bio_queue` sample for [`BioAttribution`].
struct Attributor {
    bios: Arc<BioAttribution>,
    devs: Vec<DevId>,
    dev: tracepoint::Field,
    nr_sector: tracepoint::Field,
    rwbs: tracepoint::Field,
    /// Whether a pid is a kernel thread (`PF_KTHREAD`), read once per pid.
    kthreads: std::collections::HashMap<u32, bool>,
    lost_seen: u64,
}

/// `PF_KTHREAD` in the flags of `/proc/PID/stat` (include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

/// Most pids remembered as kernel threads or not (cleared when full).
const MAX_KTHREAD_PIDS: usize = 4096;

/// Whether `pid` is a kernel thread: the flags (field 9) of
/// `/proc/PID/stat`; pid 0 (an interrupt on an idle CPU) is the kernel's.
fn is_kernel_thread(pid: u32) -> bool {
    if pid == 0 {
        return true;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        // gone already: a user process that exited is no kworker, and a
        // kworker does not exit after one bio; either way FG is the safe side
        return false;
    };
    kthread_flag(&stat).unwrap_or(false)
}

/// Field `n` (0: the state) after the command name of a `/proc/PID/stat`
/// line; the name is in parentheses and may itself hold spaces and `)`,
/// so the fields are counted from the last `)`.
pub(crate) fn stat_field(stat: &str, n: usize) -> Option<&str> {
    stat[stat.rfind(')')? + 1..].split_ascii_whitespace().nth(n)
}

/// `PF_KTHREAD` of a `/proc/PID/stat` line (flags: field 6 after the name).
fn kthread_flag(stat: &str) -> Option<bool> {
    let flags: u64 = stat_field(stat, 6)?.parse().ok()?;
    Some(flags & PF_KTHREAD != 0)
}

/// Why the sampled cgroup ids are not the command's v2 cgroup: the
/// perf_event controller mounted on a v1 hierarchy (then samples carry
/// its cgroup), from the text of `/proc/self/cgroup`.
fn perf_event_on_v1(proc_cgroup: &str) -> bool {
    proc_cgroup.lines().any(|l| {
        l.split(':')
            .nth(1)
            .is_some_and(|c| c.split(',').any(|c| c == "perf_event"))
    })
}

impl Waker {
    /// The wakeups for `source`, or why there can be none; with
    /// `attribution`, each bio is also told apart by the cgroup that
    /// queued it.
    fn open(
        source: &StatSource,
        attribution: Option<Arc<BioAttribution>>,
    ) -> std::result::Result<Waker, String> {
        if !source.sysfs {
            return Err(format!(
                "{} is a file, not a kernel block device: no tracepoints to wait on",
                source.label
            ));
        }
        let dir = source
            .stat_path
            .parent()
            .ok_or_else(|| format!("{}: no device directory", source.label))?;
        let devs = DevId::of_sysfs_dir(dir)
            .ok_or_else(|| format!("{}: cannot read its device numbers", dir.display()))?;
        // not EventMonitor::available(): its probe event would register
        // and unregister a tracepoint probe, tens of ms at every start;
        // opening the rings below says as much
        if std::env::var(MONITOR_ENV).is_ok_and(|v| v.trim() == "poll") {
            return Err(format!("{MONITOR_ENV}=poll"));
        }
        let (root, _) = tracepoint::tracefs_root_mounted()?;
        let filter = devs
            .iter()
            .map(|d| format!("dev == {}", d.to_kernel()))
            .collect::<Vec<_>>()
            .join(" || ");
        // Wake at each bio queued on the device (`block_bio_queue`, in the
        // submitter's context: the earliest sign of a request) and report
        // it as an arrival at once ([`Detector::announce`]): a blk-mq
        // device counts a request only when it is dispatched to the driver
        // (`block_rq_issue`), which under plugging or an I/O scheduler comes
        // from a kworker a millisecond or more later on a loaded machine.
        // Waking at the issue as well only woke the thread twice per read
        // (docs/monitor.md has the figures). No
        // completions: after a wake the thread samples at the interval
        // until the device is idle, and each tracepoint costs a probe
        // registration at start.
        let tp = tracepoint::Tracepoint::load(&root, "block", "block_bio_queue")
            .map_err(|e| e.to_string())?;
        let tps = [perf::TpOpen {
            id: tp.id,
            wake: true,
            filter: Some(filter),
        }];
        let Some(bios) = attribution else {
            let rings = perf::PerfRings::open(&tps, 8, false).map_err(|e| e.to_string())?;
            return Ok(Waker {
                rings,
                attributor: None,
            });
        };
        // the command's bios: the submitter's cgroup id in each sample
        // (cgroup_bios.rs says why this and not a cgroup-mode event)
        if std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|t| perf_event_on_v1(&t)) {
            return Err("the perf_event controller is on a cgroup v1 hierarchy: samples would carry its cgroup, not the command's".into());
        }
        let field = |n: &str| tp.need(n).map_err(|e| e.to_string());
        let (dev, nr_sector, rwbs) = (field("dev")?, field("nr_sector")?, field("rwbs")?);
        // every bio is read now, not only the wakeups: 32 pages a CPU
        // hold ~1,000 samples, a second of 4 KiB reads between two samples
        let rings = perf::PerfRings::open(&tps, 32, true).map_err(|e| e.to_string())?;
        if !rings.with_cgroup {
            return Err("the kernel gives no cgroup id with its samples (PERF_SAMPLE_CGROUP, Linux 5.7+), so the command's bios cannot be told apart".into());
        }
        Ok(Waker {
            rings,
            attributor: Some(Attributor {
                bios,
                devs,
                dev,
                nr_sector,
                rwbs,
                kthreads: std::collections::HashMap::new(),
                lost_seen: 0,
            }),
        })
    }

    /// Read the waiting samples: without attribution any bio is an
    /// arrival to announce; with it, the command's bios are counted as its
    /// own I/O and only the others are announced (as FG even while the
    /// command's I/O moves). Returns the number of samples.
    fn drain(&mut self, det: &mut Detector) -> u64 {
        let Some(a) = &mut self.attributor else {
            let n = self.rings.drain(|_| {});
            if n > 0 {
                det.announce(monotonic_ns());
            }
            return n;
        };
        let mut fg: Option<u64> = None;
        let n = self.rings.drain(|s| {
            let (Some(dev), Some(nr), Some(rwbs)) = (
                a.dev.uint(s.raw),
                a.nr_sector.uint(s.raw),
                a.rwbs.text(s.raw),
            ) else {
                return;
            };
            // the kernel filter may have been refused
            if !a.devs.contains(&DevId::from_kernel(dev)) {
                return;
            }
            let write = IoOp::from_rwbs(&rwbs) != IoOp::Read;
            let kthread = write && {
                if a.kthreads.len() >= MAX_KTHREAD_PIDS {
                    a.kthreads.clear();
                }
                *a.kthreads
                    .entry(s.pid)
                    .or_insert_with(|| is_kernel_thread(s.pid))
            };
            let cgroup = s.cgroup_id.unwrap_or(0);
            if a.bios.count(cgroup, s.pid, write, kthread, nr, s.time_ns) == BioOwner::Foreground {
                fg = Some(fg.map_or(s.time_ns, |t| t.min(s.time_ns)));
            }
        });
        let lost = self.rings.lost;
        if lost > a.lost_seen {
            a.bios.lost(lost - a.lost_seen, monotonic_ns());
            a.lost_seen = lost;
        }
        if let Some(t) = fg {
            det.announce_foreground(t);
        }
        n
    }
}

/// What a monitor did and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MonitorStats {
    /// The counters watched (`vda`, a file path, or `none`).
    pub source: String,
    /// Which monitor ran: `events` (sampling only while busy, woken by
    /// the kernel's block tracepoints) or `poll` (sampling every
    /// interval); empty for a monitor without a device or fed by another
    /// thread.
    pub kind: String,
    /// Why the poller ran when `auto` was asked for (perf not permitted,
    /// a file source, a managed command without a cgroup v2 of its own to
    /// tell its bios apart by…); empty otherwise.
    pub kind_reason: String,
    /// Times the event-driven monitor was woken from its sleep by block
    /// events or a look.
    pub wakeups: u64,
    /// Sampling interval, s.
    pub interval_s: f64,
    /// Samples taken.
    pub samples: u64,
    /// Samples taken later than one interval after the one before (the
    /// thread was not scheduled in time).
    pub late_samples: u64,
    /// Samples that could not be read or parsed and were skipped (a file
    /// source being rewritten).
    pub skipped_samples: u64,
    /// Busy periods seen.
    pub busy_periods: u64,
    /// Idle intervals seen.
    pub idle_intervals: u64,
    /// FG requests completed (estimated).
    pub fg_requests: u64,
    /// FG bytes read.
    pub fg_read_bytes: u64,
    /// FG bytes written or discarded.
    pub fg_write_bytes: u64,
    /// CPU time of the monitor thread, s.
    pub cpu_s: f64,
    /// Wall time the monitor ran, s.
    pub wall_s: f64,
}

impl MonitorStats {
    /// CPU time over wall time: the share of one core the monitor used.
    pub fn cpu_fraction(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.cpu_s / self.wall_s
        } else {
            0.0
        }
    }

    /// Which monitor ran, for a report line: `events`, `poll`, or
    /// `poll (why not events)`.
    pub fn kind_label(&self) -> String {
        match (self.kind.as_str(), self.kind_reason.as_str()) {
            ("", _) => "none".into(),
            (k, "") => k.into(),
            (k, why) => format!("{k} ({why})"),
        }
    }

    /// CPU time per sample, s.
    pub fn cpu_per_sample_s(&self) -> f64 {
        self.cpu_s / self.samples.max(1) as f64
    }
}

/// The sampling thread's quiet samples, for [`Monitor::look`].
#[derive(Debug, Default)]
struct Looks {
    /// When the latest sample with nothing of fallow's own I/O in flight
    /// or issued during it began, ns (`CLOCK_MONOTONIC`).
    quiet_start_ns: Mutex<u64>,
    /// Signalled after each such sample (its event already sent).
    quiet: Condvar,
    /// A look is wanted: sample now rather than at the next tick.
    kick: AtomicBool,
}

/// A running monitor: a sampling thread and the channel of its events.
#[derive(Debug)]
pub struct Monitor {
    rx: Receiver<Event>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<()>>>,
    /// The sampling thread, to wake it for a look.
    thread: Option<Thread>,
    looks: Arc<Looks>,
    stats: Arc<Mutex<MonitorStats>>,
    /// Wakes the event-driven thread from its sleep (a look, a stop).
    kick: Option<perf::Kick>,
    /// Keeps the channel open for a monitor without a device.
    _idle_tx: Option<Sender<Event>>,
    /// The block devices watched (empty: a file source, none).
    devices: Vec<DevId>,
    /// The cgroup (v2) id of a managed command whose I/O is fallow's.
    command_cgroup_id: Option<u64>,
}

/// Consecutive unreadable samples of a file source before the monitor gives up.
const MAX_SKIPPED_IN_A_ROW: u32 = 1000;

impl Monitor {
    /// Start sampling `source` every `cfg.interval_ns`, with `own` the
    /// sources of fallow's own I/O on that device. The first sample is
    /// read here, so a source that cannot be read fails now.
    ///
    /// This is where the monitor is chosen: [`MonitorKind::from_env`]
    /// (`FALLOW_MONITOR`, unset = `auto`: event-driven where the kernel
    /// allows, else the poller).
    pub fn start(
        source: &StatSource,
        own: Vec<Arc<dyn OwnIoSource>>,
        cfg: MonitorConfig,
    ) -> Result<Monitor> {
        Self::start_kind(source, own, cfg, MonitorKind::from_env()?)
    }

    /// [`Monitor::start`] with the monitor chosen by the caller.
    pub fn start_kind(
        source: &StatSource,
        own: Vec<Arc<dyn OwnIoSource>>,
        cfg: MonitorConfig,
        kind: MonitorKind,
    ) -> Result<Monitor> {
        if cfg.interval_ns < 10_000 || cfg.interval_ns > 10_000_000_000 {
            return Err(Error::invalid(
                "monitor interval",
                format!(
                    "{} ns: use 10 µs to 10 s (1 ms is the design point)",
                    cfg.interval_ns
                ),
            ));
        }
        let mut reader = source.open()?;
        reader.read()?;
        // run's command: its own I/O is seen by its counters moving from
        // one sample to the next (`OwnIoSource::in_flight_is_exact`), which
        // the event monitor can replace only by its bios told apart by
        // cgroup (`cgroup_bios`)
        let attribution = own.iter().find_map(|o| o.bio_attribution());
        let inferred = own
            .iter()
            .any(|o| !o.in_flight_is_exact() && o.bio_attribution().is_none());
        let (waker, reason) = match kind {
            MonitorKind::Poll => (None, String::new()),
            MonitorKind::Auto if inferred => (
                None,
                "the command has no cgroup v2 of its own to tell its bios apart by (cgroup1 or signal freezer)".to_string(),
            ),
            MonitorKind::Auto => match Waker::open(source, attribution.clone()) {
                Ok(w) => (Some(w), String::new()),
                Err(why) => (None, why),
            },
            MonitorKind::Events if inferred => {
                return Err(Error::Unsupported(format!(
                    "the event-driven monitor cannot watch {}: the command has no cgroup v2 of its own to tell its bios apart by (cgroup1 or signal freezer)",
                    source.label
                )))
            }
            MonitorKind::Events => match Waker::open(source, attribution.clone()) {
                Ok(w) => (Some(w), String::new()),
                Err(why) => {
                    return Err(Error::Unsupported(format!(
                        "the event-driven monitor cannot watch {}: {why}",
                        source.label
                    )))
                }
            },
        };
        if let (Some(a), Some(_)) = (&attribution, &waker) {
            // the command's own I/O is counted from its bios from now on
            a.attach();
        }
        let kick = waker.as_ref().map(|w| w.rings.kick());
        let devices = if source.sysfs {
            source
                .stat_path
                .parent()
                .and_then(DevId::of_sysfs_dir)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        // a cgroup v2 id is its directory's inode number
        let command_cgroup_id = attribution.as_ref().and_then(|a| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(a.cgroup_dir()).ok().map(|m| m.ino())
        });
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(MonitorStats {
            source: source.label.clone(),
            kind: if waker.is_some() { "events" } else { "poll" }.into(),
            kind_reason: reason,
            interval_s: cfg.interval_ns as f64 / 1e9,
            ..MonitorStats::default()
        }));
        let looks = Arc::new(Looks::default());
        let shared = (stop.clone(), stats.clone(), looks.clone());
        let sampler = Sampler::new(reader, own, cfg, tx, shared, waker);
        let handle = std::thread::Builder::new()
            .name("fallow-monitor".into())
            .spawn(move || sampler.run())
            .map_err(|e| Error::Monitor(format!("cannot start the thread: {e}")))?;
        Ok(Monitor {
            rx,
            stop,
            thread: Some(handle.thread().clone()),
            handle: Some(handle),
            looks,
            stats,
            kick,
            _idle_tx: None,
            devices,
            command_cgroup_id,
        })
    }

    /// A monitor for a target whose device cannot be watched (a file on
    /// tmpfs): the device is idle from the start and never busy.
    pub fn without_device() -> Monitor {
        let (tx, rx) = mpsc::channel();
        let now = monotonic_ns();
        // the receiver is alive: this send cannot fail
        let _ = tx.send(Event::Idle {
            at_ns: now,
            idle_start_ns: now,
            busy_ns: 0,
            fg_requests: 0,
            last_arrival_ns: now,
            first: true,
        });
        Monitor {
            rx,
            stop: Arc::new(AtomicBool::new(false)),
            handle: None,
            thread: None,
            looks: Arc::new(Looks::default()),
            stats: Arc::new(Mutex::new(MonitorStats {
                source: "none".into(),
                idle_intervals: 1,
                ..MonitorStats::default()
            })),
            kick: None,
            _idle_tx: Some(tx),
            devices: Vec::new(),
            command_cgroup_id: None,
        }
    }

    /// A monitor fed by another sampling thread (the network monitor,
    /// [`crate::net`]): `handle` sends [`Event`]s to `rx`'s sender, keeps
    /// `stats` up to date and returns once `stop` is raised.
    pub fn from_parts(
        rx: Receiver<Event>,
        stop: Arc<AtomicBool>,
        handle: JoinHandle<Result<()>>,
        stats: Arc<Mutex<MonitorStats>>,
    ) -> Monitor {
        Monitor {
            rx,
            stop,
            handle: Some(handle),
            // its thread takes no looks: `look` returns at once
            thread: None,
            looks: Arc::new(Looks::default()),
            stats,
            kick: None,
            _idle_tx: None,
            devices: Vec::new(),
            command_cgroup_id: None,
        }
    }

    /// The block devices watched (the device and, for a partition, its
    /// disk); empty for a file source or none.
    pub fn devices(&self) -> &[DevId] {
        &self.devices
    }

    /// The cgroup (v2) id of a managed command whose I/O is fallow's
    /// (`fallow run` with its bios told apart by cgroup).
    pub fn command_cgroup_id(&self) -> Option<u64> {
        self.command_cgroup_id
    }

    /// The next event, waiting at most `timeout_ns`; `Ok(None)` on timeout.
    /// An error if the sampling thread failed.
    pub fn recv_timeout(&mut self, timeout_ns: u64) -> Result<Option<Event>> {
        match self.rx.recv_timeout(Duration::from_nanos(timeout_ns)) {
            Ok(e) => Ok(Some(e)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(self.thread_error()),
        }
    }

    /// Wait, at most `timeout_ns`, until the thread has sampled the device
    /// with nothing of fallow's own I/O in flight or issued, in a sample
    /// begun after this call (the thread is woken for it, so this takes
    /// one sample's time, not an interval). Its event, if any, is then
    /// waiting ([`Monitor::try_recv`]). A BG worker calls it between two
    /// of its own requests (see the module documentation); `false` if the
    /// time ran out (the thread is late, or own I/O of another source,
    /// such as a managed command's, is still moving). Without a device,
    /// or for a monitor fed by another thread ([`Monitor::from_parts`]),
    /// `true` at once.
    pub fn look(&self, timeout_ns: u64) -> bool {
        let Some(thread) = &self.thread else {
            return true;
        };
        let since = monotonic_ns();
        let deadline = since.saturating_add(timeout_ns);
        self.looks.kick.store(true, Ordering::SeqCst);
        thread.unpark();
        if let Some(k) = &self.kick {
            k.kick();
        }
        let mut quiet = self
            .looks
            .quiet_start_ns
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        while *quiet < since {
            let now = monotonic_ns();
            if now >= deadline || self.handle.as_ref().is_none_or(|h| h.is_finished()) {
                return false;
            }
            quiet = self
                .looks
                .quiet
                .wait_timeout(quiet, Duration::from_nanos(deadline - now))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Result<Option<Event>> {
        match self.rx.try_recv() {
            Ok(e) => Ok(Some(e)),
            Err(mpsc::TryRecvError::Empty) => Ok(None),
            Err(mpsc::TryRecvError::Disconnected) => Err(self.thread_error()),
        }
    }

    fn thread_error(&mut self) -> Error {
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            Some(Err(_)) => Error::Monitor("the sampling thread panicked".into()),
            _ => Error::Monitor("the sampling thread ended".into()),
        }
    }

    /// What the monitor has seen and spent so far.
    pub fn stats(&self) -> MonitorStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A handle that reads the same statistics from another thread while
    /// the monitor runs (an exporter); they are published every 64 samples.
    pub fn shared_stats(&self) -> SharedStats {
        SharedStats(self.stats.clone())
    }

    /// Stop the thread and return the final statistics.
    pub fn stop(mut self) -> Result<MonitorStats> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(k) = &self.kick {
            k.kick();
        }
        if let Some(h) = self.handle.take() {
            match h.join() {
                Ok(r) => r?,
                Err(_) => return Err(Error::Monitor("the sampling thread panicked".into())),
            }
        }
        Ok(self.stats())
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(k) = &self.kick {
            k.kick();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn own_snapshot(own: &[Arc<dyn OwnIoSource>]) -> OwnIo {
    own.iter()
        .fold(OwnIo::default(), |acc, s| acc.plus(s.snapshot()))
}

/// Nothing of fallow's own I/O was in flight at either end of a sample,
/// nor issued during it: the device's counters are all FG work's.
fn quiet(a: &OwnIo, b: &OwnIo) -> bool {
    !(a.reads_in_flight || b.reads_in_flight || a.writes_in_flight || b.writes_in_flight)
        && a.read_sectors == b.read_sectors
        && a.write_sectors == b.write_sectors
}

/// The monitor's thread: what it was given, and its state between
/// samples ([`Sampler::run`]).
struct Sampler {
    reader: stat::StatReader,
    own: Vec<Arc<dyn OwnIoSource>>,
    cfg: MonitorConfig,
    tx: Sender<Event>,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<MonitorStats>>,
    looks: Arc<Looks>,
    waker: Option<Waker>,
    det: Detector,
    /// The thread's CPU time and the wall clock when it began, ns.
    cpu0_ns: u64,
    wall0_ns: u64,
    /// When the next tick is due, ns.
    next_ns: u64,
    samples: u64,
    late: u64,
    skipped: u64,
    skipped_in_a_row: u32,
    /// Sleeps on the rings that a bio ended.
    wakeups: u64,
    /// The event-driven thread sleeps only after a sample that showed the
    /// device idle with nothing in flight, its own or anyone's: a request
    /// after that sample wakes it (the kernel keeps a wakeup pending until
    /// the next poll), and one of fallow's own still in flight would not
    /// wake it when the worker marks it done.
    may_sleep: bool,
}

impl Sampler {
    /// A sampler of `reader`'s device; [`Sampler::run`] starts it.
    fn new(
        reader: stat::StatReader,
        own: Vec<Arc<dyn OwnIoSource>>,
        cfg: MonitorConfig,
        tx: Sender<Event>,
        shared: (Arc<AtomicBool>, Arc<Mutex<MonitorStats>>, Arc<Looks>),
        waker: Option<Waker>,
    ) -> Sampler {
        let (stop, stats, looks) = shared;
        Sampler {
            reader,
            own,
            cfg,
            tx,
            stop,
            stats,
            looks,
            waker,
            det: Detector::new(),
            cpu0_ns: 0,
            wall0_ns: 0,
            next_ns: 0,
            samples: 0,
            late: 0,
            skipped: 0,
            skipped_in_a_row: 0,
            wakeups: 0,
            may_sleep: false,
        }
    }

    /// Sample at each tick (or sooner, when a look is wanted, or when the
    /// rings wake an event-driven thread) until stopped or nobody listens.
    fn run(mut self) -> Result<()> {
        if self.waker.is_some() {
            // best effort: with the default slice only the tail is longer
            let _ = perf::prefer_prompt_wakeups();
        }
        (self.cpu0_ns, self.wall0_ns) = (thread_cpu_ns(), monotonic_ns());
        self.next_ns = self.wall0_ns;
        let result = loop {
            if self.stop.load(Ordering::Relaxed) {
                break Ok(());
            }
            let t0 = monotonic_ns();
            // a sample a look asked for before the tick leaves the ticks alone
            let tick = t0 >= self.next_ns;
            if let ControlFlow::Break(r) = self.sample(t0) {
                break r;
            }
            self.samples += 1;
            // publishing takes a lock and a clock read: every 64 samples is enough
            if self.samples % 64 == 0 {
                self.publish();
            }
            if tick {
                self.next_ns += self.cfg.interval_ns;
                let now = monotonic_ns();
                if now > self.next_ns + self.cfg.interval_ns {
                    // a missed tick: count it, and do not try to catch up
                    self.late += 1;
                    self.next_ns = now;
                }
            }
            match self.sleep_on_the_rings() {
                Ok(true) => continue,
                Ok(false) => self.sleep_to_the_tick(),
                Err(e) => break Err(e),
            }
        };
        // the bios queued since the last drain are in the rings still: a
        // command that exits right after its last write would otherwise be
        // reported a bio or two short (1,022 of 1,024 direct writes, seen)
        if let Some(w) = self.waker.as_mut().filter(|w| w.attributor.is_some()) {
            w.drain(&mut self.det);
        }
        self.publish();
        result
    }

    /// One sample of the device's counters between two snapshots of
    /// fallow's own I/O, begun at `t0`: its event sent, a quiet one told
    /// to those waiting for a look.
    fn sample(&mut self, t0: u64) -> ControlFlow<Result<()>> {
        // with the command's bios attributed, count those queued so far
        // before each own snapshot: its reads the device counts by the
        // sample are then in `after`
        let attributing = self.waker.as_ref().is_some_and(|w| w.attributor.is_some());
        if let Some(w) = self.waker.as_mut().filter(|_| attributing) {
            w.drain(&mut self.det);
        }
        let before = own_snapshot(&self.own);
        let sample = self.reader.read();
        if let Some(w) = self.waker.as_mut().filter(|_| attributing) {
            w.drain(&mut self.det);
        }
        let after = own_snapshot(&self.own);
        let t = monotonic_ns();
        match sample {
            Ok(s) => {
                self.skipped_in_a_row = 0;
                if s.stat.in_flight == 0 {
                    if let Some(a) = self.waker.as_ref().and_then(|w| w.attributor.as_ref()) {
                        a.bios.device_idle_at(t0);
                    }
                }
                self.may_sleep = s.stat.in_flight == 0 && quiet(&before, &after);
                if let Some(ev) = self.det.observe(t, &s, before, after) {
                    if self.tx.send(ev).is_err() {
                        return ControlFlow::Break(Ok(())); // nobody listens any more
                    }
                }
                if quiet(&before, &after) {
                    let mut q = self
                        .looks
                        .quiet_start_ns
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    *q = t0;
                    self.looks.quiet.notify_all();
                }
            }
            // sysfs does not fail transiently; a file being rewritten may
            Err(e) if self.reader.source().sysfs => return ControlFlow::Break(Err(e)),
            Err(e) => {
                self.skipped += 1;
                self.skipped_in_a_row += 1;
                if self.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW {
                    return ControlFlow::Break(Err(e));
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// An event-driven thread, after a sample that may sleep, sleeps until
    /// a bio on the device (or a look, or stop). `true`: it slept (or was
    /// stopped), and samples again at once.
    fn sleep_on_the_rings(&mut self) -> Result<bool> {
        let Some(w) = &mut self.waker else {
            return Ok(false);
        };
        if w.attributor.is_none() {
            // the samples of the rings are not needed, only their wakeups
            w.rings.discard();
        }
        if !self.may_sleep || self.det.busy() || self.looks.kick.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.publish();
        if self.stop.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let Some(w) = &mut self.waker else {
            return Ok(false);
        };
        match w.rings.wait(None)? {
            perf::Woke::Timeout => {}
            _ => self.wakeups += 1,
        }
        // a bio on the device: an arrival the next sample reports even if
        // the counters do not show it yet (with attribution, only if it
        // was not the command's)
        w.drain(&mut self.det);
        // sample now; the ticks start again from here
        self.looks.kick.store(false, Ordering::SeqCst);
        self.next_ns = monotonic_ns();
        Ok(true)
    }

    /// Sleep to the next tick, or until a look is wanted (an unpark
    /// between the check and the park makes the park return at once).
    fn sleep_to_the_tick(&self) {
        loop {
            let now = monotonic_ns();
            if now >= self.next_ns || self.looks.kick.swap(false, Ordering::SeqCst) {
                break;
            }
            std::thread::park_timeout(Duration::from_nanos(self.next_ns - now));
        }
    }

    /// The detector's totals and the thread's own counts, into the stats
    /// [`Monitor::stats`] reads.
    fn publish(&self) {
        let t = self.det.totals();
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.samples = t.samples;
        s.late_samples = self.late;
        s.skipped_samples = self.skipped;
        s.busy_periods = t.busy_periods;
        s.idle_intervals = t.idle_intervals;
        s.fg_requests = t.fg_requests;
        s.fg_read_bytes = t.fg_read_bytes;
        s.fg_write_bytes = t.fg_write_bytes;
        s.wakeups = self.wakeups;
        s.cpu_s = (thread_cpu_ns() - self.cpu0_ns) as f64 / 1e9;
        s.wall_s = (monotonic_ns() - self.wall0_ns) as f64 / 1e9;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_stat(path: &std::path::Path, read_sectors: u64, reads_in_flight: u64) {
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            format!(
                "{} 0 {read_sectors} 0 0 0 0 0 {reads_in_flight} 0 0 0 0 0 0 0 0\n",
                read_sectors / 8
            ),
        )
        .unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    fn next_event(m: &mut Monitor) -> Event {
        m.recv_timeout(2_000_000_000)
            .unwrap()
            .expect("an event within 2 s")
    }

    #[test]
    fn a_file_source_yields_idle_busy_idle_and_subtracts_own_reads() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        write_stat(&stat, 0, 0);
        let own = Arc::new(OwnCounters::new(None));
        let mut m = Monitor::start(
            &StatSource::file(&stat).unwrap(),
            vec![own.clone()],
            MonitorConfig {
                interval_ns: 500_000,
            },
        )
        .unwrap();
        assert!(matches!(
            next_event(&mut m),
            Event::Idle { first: true, .. }
        ));
        // our own read of 64 sectors: no event. The device's counters move
        // while the read is in flight, as the kernel's do (they count a
        // read at its completion, before the read returns to fallow);
        // moving them only after `done()` raced the monitor on a loaded
        // machine: a sample after the settle window saw the device move
        // with fallow's counters still, which is FG.
        let read = own.begin_read(64 * 512);
        write_stat(&stat, 64, 0);
        read.done();
        assert_eq!(m.recv_timeout(50_000_000).unwrap(), None);
        // someone else's read
        write_stat(&stat, 72, 1);
        assert!(matches!(next_event(&mut m), Event::Busy { .. }));
        write_stat(&stat, 80, 0);
        match next_event(&mut m) {
            Event::Idle {
                first: false,
                fg_requests,
                ..
            } => assert!(fg_requests >= 1),
            e => panic!("{e:?}"),
        }
        let s = m.stop().unwrap();
        assert_eq!(s.busy_periods, 1);
        assert_eq!(s.fg_read_bytes, 16 * 512);
        assert!(s.samples > 10, "{s:?}");
        assert!(s.cpu_s > 0.0 && s.cpu_fraction() < 1.0, "{s:?}");
    }

    #[test]
    fn a_look_takes_one_sample_not_an_interval_and_waits_out_own_reads() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        write_stat(&stat, 0, 0);
        let own = Arc::new(OwnCounters::new(None));
        // one sample a second: a look must not wait for the next tick
        let m = Monitor::start(
            &StatSource::file(&stat).unwrap(),
            vec![own.clone()],
            MonitorConfig {
                interval_ns: 1_000_000_000,
            },
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(20)); // past the first tick
        for _ in 0..5 {
            let t0 = monotonic_ns();
            assert!(m.look(500_000_000));
            let took = monotonic_ns() - t0;
            assert!(took < 200_000_000, "a look took {took} ns");
        }
        // with one of our reads in flight no sample is quiet
        let read = own.begin_read(4096);
        let t0 = monotonic_ns();
        assert!(!m.look(30_000_000));
        assert!(monotonic_ns() - t0 >= 30_000_000);
        read.done();
        assert!(m.look(500_000_000));
        // the looks did not shift the ticks: about one sample per look
        let s = m.stop().unwrap();
        assert!(s.samples <= 12, "{s:?}");
    }

    #[test]
    fn a_vanished_file_source_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        write_stat(&stat, 0, 0);
        let mut m = Monitor::start(
            &StatSource::file(&stat).unwrap(),
            vec![],
            MonitorConfig {
                interval_ns: 10_000,
            },
        )
        .unwrap();
        std::fs::remove_file(&stat).unwrap();
        let err = loop {
            match m.recv_timeout(5_000_000_000) {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("no error within 5 s"),
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains("stat"), "{err}");
    }

    #[test]
    fn reports_its_cpu_cost_on_a_real_device() {
        // the disk the temp dir is on, sampled at 1 ms for one second
        let f = tempfile::NamedTempFile::new().unwrap();
        let Some(dev) = resolve_device(f.path()).unwrap() else {
            eprintln!("skip: the temp dir is on no block device sysfs knows");
            return;
        };
        // the poller: one sample a ms whatever the disk does
        let mut m = Monitor::start_kind(
            &dev.stat_source().unwrap(),
            vec![],
            MonitorConfig::default(),
            MonitorKind::Poll,
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_secs(1));
        // drain the events so the channel does not grow
        while m.try_recv().unwrap().is_some() {}
        let s = m.stop().unwrap();
        eprintln!(
            "monitor on {}: {} samples in {:.2} s, CPU {:.1} ms = {:.2} % of a core, {:.1} µs per sample",
            s.source,
            s.samples,
            s.wall_s,
            s.cpu_s * 1e3,
            s.cpu_fraction() * 100.0,
            s.cpu_per_sample_s() * 1e6
        );
        // about 1000 samples (a loaded machine misses some ticks)
        assert!(s.samples > 300 && s.samples <= 1100, "{s:?}");
        assert!(s.cpu_s > 0.0, "{s:?}");
        // far from a core even in a debug build
        assert!(s.cpu_fraction() < 0.5, "{s:?}");
    }

    #[test]
    fn kernel_threads_and_a_v1_perf_event_controller_are_recognised() {
        // flags 0x00200040 (PF_KTHREAD | PF_FORKNOEXEC), a comm with spaces and `)`
        let kworker = "42 (kworker/u8:3-flush-7:0) I 2 0 0 0 -1 2129984 0 0";
        assert_eq!(kthread_flag(kworker), Some(true));
        let user = "4242 (my (odd) dd) R 1 4242 4242 0 -1 4194560 100 0";
        assert_eq!(kthread_flag(user), Some(false));
        assert_eq!(kthread_flag("garbage"), None);
        assert!(is_kernel_thread(0));
        assert!(!is_kernel_thread(std::process::id()));
        // kthreadd is pid 2 on Linux; a flusher is a kworker
        if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
            assert!(is_kernel_thread(2));
        }
        let kworker = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.starts_with("kworker/"))
            });
        match kworker {
            Some(p) => assert!(is_kernel_thread(p), "kworker {p}"),
            None => eprintln!("skip: no kworker visible in /proc"),
        }
        assert!(perf_event_on_v1("5:cpu,perf_event:/\n0::/\n"));
        assert!(perf_event_on_v1("3:perf_event:/a\n"));
        assert!(!perf_event_on_v1("4:memory:/x\n0::/\n"));
    }

    #[test]
    fn rejects_silly_intervals() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        write_stat(&stat, 0, 0);
        let e = Monitor::start(
            &StatSource::file(&stat).unwrap(),
            vec![],
            MonitorConfig { interval_ns: 1 },
        )
        .unwrap_err();
        assert!(e.to_string().contains("interval"), "{e}");
    }

    #[test]
    fn without_a_device_it_is_idle_once_and_then_quiet() {
        let mut m = Monitor::without_device();
        assert!(matches!(
            m.recv_timeout(1_000_000).unwrap(),
            Some(Event::Idle { first: true, .. })
        ));
        assert_eq!(m.recv_timeout(1_000_000).unwrap(), None);
        assert!(m.look(0));
        assert_eq!(m.stop().unwrap().source, "none");
    }
}
