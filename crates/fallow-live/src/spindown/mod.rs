//! `fallow spindown`: a live spin-down daemon. Each disk is spun down by
//! the same [`SpinDown`](fallow_core::energy::SpinDown) policy objects
//! `fallow energy` simulates (the registry in
//! `fallow_core::energy::spindown`, so a `--policy` spec means the same in
//! both), kept within a spin-up [`Budget`] by lengthening the timeout, and
//! every spin-up is logged with whom the [`ActivitySource`] can name.
//!
//! ```text
//! ActivitySource (stat polling; the tracepoint monitor) ─► Governor (policy + budget) ─► Actuator
//!                                                              │                      (SG_IO ATA, emulated disk)
//!                                                              └─► Jobs that ride spin-ups
//! ```
//!
//! The pieces, one file each: [`governor`] (the decisions, pure),
//! [`budget`], [`activity`], [`actuator`] with [`ata`] and [`emu`],
//! [`jobs`], [`target`] (which source and actuator a `DEV` argument
//! means). [`Daemon`] runs them; it never spins down a disk with requests
//! in flight (checked again right before the command) and never queries a
//! sleeping disk in a way that wakes it (stat counters and CHECK POWER
//! MODE only).
//!
//! The loop sleeps in one `poll(2)` on every event-driven source's
//! descriptors and a stop socket ([`Daemon::stop_handle`]) until the
//! earliest deadline: a policy's timeout running out
//! ([`Governor::deadline_ns`]), a job due ([`Jobs::next_due_ns`]), a polled
//! source's next read, a busy disk's next look, the status heartbeat
//! ([`STATUS_EVERY_NS`]) or `--duration`. An idle or spun-down disk on the
//! block-tracepoint source thus costs a wake-up a minute (goal: ≤ 0.1 %
//! of a core; docs/spindown.md#cost has the figures).

pub mod activity;
pub mod actuator;
pub mod ata;
pub mod budget;
pub mod emu;
pub mod governor;
pub mod jobs;
pub mod scsi;
pub mod settings;
pub mod target;
pub mod traced;

pub use activity::{ActivitySource, Issuer, Observation, StatPoll};
pub use actuator::{Actuator, DiskPower};
pub use budget::{Budget, SpinupLimit};
pub use governor::{GovState, Governor, Tick, Wake};
pub use jobs::{JobRun, JobSpec, Jobs, Trigger};

use crate::clock::monotonic_ns;
use crate::error::{Error, Result};
use fallow_core::energy::PowerModel;
use rustix::event::{PollFd, PollFlags};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Default policy: a fixed 10-minute timeout (WD asks for at least 10
/// minutes; hd-idle's default).
pub const DEFAULT_POLICY: &str = "timeout:t=10min";

/// Default poll interval of the stat counters, ns: 50 ms, so that where
/// they must be polled (an emulated disk; no events) a spin-down or a wake
/// is seen at most 50 ms late. At 1 s live spin-ups differed from
/// `fallow energy`'s by −18 % and +40 % on an emulated disk with 2 s
/// timeouts. An event-driven source does not poll an idle disk.
pub const DEFAULT_POLL_NS: u64 = 50_000_000;

/// One disk's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskSpec {
    /// What to watch: `/dev/sdb`, `sdb`, an emulated disk's mount point or
    /// `MOUNTPOINT/disk`, or a loop device over one.
    pub target: String,
    /// Spin-down policy spec (`timeout:t=10min`, `adaptive`, `predictive`).
    pub policy: String,
    /// Spin-up budget: at most N in any window (`None`: unlimited).
    pub max_spinups: Option<SpinupLimit>,
    /// Maintenance jobs that ride this disk's spin-ups.
    pub jobs: Vec<JobSpec>,
}

/// The daemon's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SpindownConfig {
    /// The disks.
    pub disks: Vec<DiskSpec>,
    /// How often a polled source's counters are read, ns; also the look
    /// interval while a disk is busy or a job runs (an event-driven source
    /// otherwise wakes the daemon only on I/O and at deadlines).
    pub poll_ns: u64,
    /// Only log what would be done.
    pub dry_run: bool,
    /// Power model for the energy estimates (and the adaptive policy's break-even).
    pub power: PowerModel,
    /// Where to write the status (atomically), for `fallow spindown status`.
    pub state_file: Option<PathBuf>,
    /// Stop after this long, ns (`None`: until stopped).
    pub duration_ns: Option<u64>,
}

impl SpindownConfig {
    /// Check every setting; the errors name the disk and parameter.
    pub fn validate(&self) -> Result<()> {
        if self.disks.is_empty() {
            return Err(Error::invalid("DEV", "no disk given"));
        }
        if !(1_000_000..=3_600_000_000_000).contains(&self.poll_ns) {
            return Err(Error::invalid("poll", "must be 1 ms to 1 h"));
        }
        self.power.validate()?;
        for d in &self.disks {
            fallow_core::energy::spindown::build(&d.policy)
                .map_err(|e| Error::invalid(format!("policy for {}", d.target), e.to_string()))?;
            if let Some(l) = d.max_spinups {
                Budget::new(l)?;
            }
            Jobs::new(&d.jobs, 0)?;
        }
        Ok(())
    }
}

/// What happened, one JSON line each in the log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum EventKind {
    /// The daemon took the disk on.
    Start {
        /// How it reads I/O.
        source: String,
        /// How it spins the disk down (`none` in a dry run without one).
        actuator: String,
        /// The policy spec.
        policy: String,
        /// The power state found.
        power_state: String,
        /// The budget, `N/UNIT`.
        max_spinups: Option<String>,
        /// Why the block-tracepoint events are not used (the counters are
        /// polled every `poll_s` and wakes name no process), when not.
        #[serde(skip_serializing_if = "Option::is_none")]
        events_unavailable: Option<String>,
        /// tracefs was not mounted: the daemon mounted it (it stays).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        mounted_tracefs: bool,
        /// The poll interval of a polled source, s.
        poll_s: f64,
    },
    /// The disk was spun down (or, in a dry run, would have been).
    SpinDown {
        /// Idle before it, s.
        idle_s: f64,
        /// The timeout in force, s.
        timeout_s: f64,
        /// Only logged.
        dry_run: bool,
    },
    /// The timeout expired but requests were in flight: not spun down.
    SpinDownSkipped {
        /// Requests in flight.
        in_flight: u64,
    },
    /// The budget lengthened the timeout.
    BudgetHeld {
        /// The policy's timeout, s.
        policy_timeout_s: f64,
        /// The lengthened one, s.
        timeout_s: f64,
        /// Spin-downs in the budget's window.
        used_in_window: usize,
        /// The budget, `N/UNIT`.
        max_spinups: String,
    },
    /// I/O reached the spun-down disk: a spin-up.
    Wake {
        /// The whole idle interval, s.
        idle_s: f64,
        /// Since the spin-down, s.
        down_s: f64,
        /// Who issued the I/O, when the source knows.
        issuers: Vec<Issuer>,
        /// Why the issuers are not known, when they are not.
        #[serde(skip_serializing_if = "Option::is_none")]
        unattributed: Option<String>,
        /// In a dry run the disk never slept: this is the wake it would have had.
        dry_run: bool,
    },
    /// A maintenance job started.
    JobStart {
        /// The command.
        command: String,
        /// Why now.
        trigger: Trigger,
    },
    /// A maintenance job ended.
    JobEnd {
        /// The command.
        command: String,
        /// Its exit code.
        exit_code: Option<i32>,
        /// How long it ran, s.
        duration_s: f64,
        /// The daemon stopped it as it stopped itself.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        stopped: bool,
    },
    /// The configuration was read again (SIGHUP).
    Reloaded {
        /// What changed, or why nothing did (the old settings stay).
        message: String,
        /// Whether the new settings are in force.
        applied: bool,
    },
    /// An actuator failed; the daemon goes on.
    Error {
        /// What went wrong.
        message: String,
    },
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Wall-clock time, RFC 3339 UTC.
    pub time: String,
    /// Since the daemon started, s.
    pub t_s: f64,
    /// The disk.
    pub disk: String,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Time by state as the daemon saw it, s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StateTimes {
    /// Serving requests: the counters' io_ticks less the spin-up waits.
    pub busy: f64,
    /// Spinning with nothing to do.
    pub idle: f64,
    /// From each spin-down to the request that woke the disk (spinning
    /// down and standby).
    pub down: f64,
    /// The part of `down` spent spinning down (the model's shutdown time
    /// after each spin-down, at most).
    #[serde(default)]
    pub spinning_down: f64,
    /// The part of `down` in standby.
    #[serde(default)]
    pub standby: f64,
    /// Waiting for spin-ups: the model's spin-up time after each wake,
    /// taken out of the counters' busy time (where the waiting requests
    /// count), so that it is not priced again as busy.
    #[serde(default)]
    pub spinning_up: f64,
}

/// Energy estimated from the power model, J.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EnergyEstimate {
    /// Busy at read/write power.
    pub busy: f64,
    /// Spinning idle.
    pub idle: f64,
    /// Standby power while down.
    pub standby: f64,
    /// Spin-ups and spin-downs.
    pub power_cycle: f64,
    /// The sum.
    pub total: f64,
    /// The same busy time on a disk that never spins down.
    pub always_on: f64,
}

/// Wakes by one issuer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waker {
    /// `comm` of the process, or `unknown`.
    pub process: String,
    /// Its cgroup, when known.
    pub cgroup: Option<String>,
    /// Spin-ups it caused.
    pub wakes: u64,
}

/// One disk's status, as `fallow spindown status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskStatus {
    /// The disk.
    pub disk: String,
    /// How it is spun down.
    pub actuator: String,
    /// Where its I/O is read.
    #[serde(default)]
    pub source: String,
    /// Why the block-tracepoint events are not used, when they are not.
    #[serde(default)]
    pub events_unavailable: Option<String>,
    /// The policy.
    pub policy: String,
    /// `busy`, `idle` or `down` as the daemon sees it.
    pub state: String,
    /// The timeout of the current idle interval, s (`None`: stays on, or not idle).
    pub timeout_s: Option<f64>,
    /// Spin-ups seen.
    pub spinups: u64,
    /// Spin-downs commanded (or, in a dry run, that would have been).
    pub spindowns: u64,
    /// The budget, `N/UNIT`: at most N in any window of that length.
    pub max_spinups: Option<String>,
    /// The same budget as a rate a day (for the metrics).
    #[serde(default)]
    pub max_spinups_per_day: Option<f64>,
    /// Spin-downs in the budget's window before now.
    #[serde(default)]
    pub spindowns_in_window: usize,
    /// Spin-downs in the last 24 h.
    pub spindowns_24h: usize,
    /// Times the budget ran out (each spell of exhaustion counted once).
    pub budget_held: u64,
    /// Time by state, s.
    pub time_s: StateTimes,
    /// Energy, J.
    pub energy_j: EnergyEstimate,
    /// Top wakers since the start, most wakes first.
    pub wakers: Vec<Waker>,
    /// Top wakers of the last 24 h, most wakes first.
    #[serde(default)]
    pub wakers_24h: Vec<Waker>,
    /// Maintenance runs.
    pub jobs: Vec<JobRunStatus>,
    /// Spin-ups saved by jobs that rode someone else's.
    pub spinups_saved: usize,
}

/// A job run in the status (the same fields as [`JobRun`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRunStatus {
    /// The command.
    pub command: String,
    /// Started, s since the daemon started.
    pub started_s: f64,
    /// Ended, s since the daemon started.
    pub ended_s: Option<f64>,
    /// `spinning`, `rode-spin-up` or `deadline`.
    pub trigger: String,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// Stopped by the daemon when it stopped (it did not finish).
    #[serde(default)]
    pub stopped: bool,
}

/// The whole status file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The daemon's process id.
    pub pid: u32,
    /// Its start time (field 22 of /proc/PID/stat, clock ticks since
    /// boot): with the pid, which the kernel reuses, it tells whether the
    /// daemon that wrote this file still runs.
    #[serde(default)]
    pub pid_start_ticks: Option<u64>,
    /// When it was written, RFC 3339 UTC.
    pub updated: String,
    /// Since the daemon started, s.
    pub uptime_s: f64,
    /// Only logging.
    pub dry_run: bool,
    /// CPU time the daemon's loop used, s (its own thread: the polling,
    /// the decisions, the status file).
    #[serde(default)]
    pub cpu_s: f64,
    /// Times the loop woke, by cause.
    #[serde(default)]
    pub wakeups: Wakeups,
    /// The disks.
    pub disks: Vec<DiskStatus>,
}

impl Status {
    /// Read a status file.
    pub fn read(path: &Path) -> Result<Status> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(path, "cannot read the status file", e))?;
        serde_json::from_str(&text).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            message: format!("line {}: {e}", e.line()),
        })
    }
}

/// A process's start time, clock ticks since boot (field 22 of
/// /proc/PID/stat; the fields are counted after the command's closing
/// parenthesis, since the command may hold spaces and parentheses).
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    crate::monitor::stat_field(&text, 19)?.parse().ok()
}

impl Status {
    /// Whether the daemon that wrote this status still runs: its pid
    /// exists and started when the status says (`status` once
    /// reported a daemon that had exited as running). `Err` says why not.
    pub fn daemon_alive(&self) -> std::result::Result<(), String> {
        match (process_start_ticks(self.pid), self.pid_start_ticks) {
            (None, _) => Err(format!("pid {} is not running", self.pid)),
            (Some(now), Some(then)) if now != then => Err(format!(
                "pid {} is another process now (it started at tick {now}, the daemon at {then})",
                self.pid
            )),
            (Some(_), None) => Err(format!(
                "the status file has no start time to check pid {} against",
                self.pid
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod alive_tests {
    use super::*;

    #[test]
    fn a_status_knows_whether_its_daemon_still_runs() {
        let me = std::process::id();
        let mine = process_start_ticks(me).unwrap();
        let mut s = Status {
            pid: me,
            pid_start_ticks: Some(mine),
            updated: String::new(),
            uptime_s: 0.0,
            dry_run: false,
            cpu_s: 0.0,
            wakeups: Wakeups::default(),
            disks: vec![],
        };
        assert_eq!(s.daemon_alive(), Ok(()));
        // the same pid started at another time: a reused pid
        s.pid_start_ticks = Some(mine + 1);
        assert!(s.daemon_alive().unwrap_err().contains("another process"));
        // a child that has exited and been reaped
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        s.pid = pid;
        assert!(s.daemon_alive().unwrap_err().contains("not running"));
    }
}

/// One watched disk.
pub struct Disk {
    name: String,
    events_unavailable: Option<String>,
    spec: DiskSpec,
    source: Box<dyn ActivitySource>,
    actuator: Option<Box<dyn Actuator>>,
    gov: Governor,
    jobs: Jobs,
    last_ns: u64,
    times: StateTimes,
    /// Down since the last spin-down, ns (its first `shutdown_ns` is the
    /// disk spinning down, the rest standby).
    down_for_ns: u64,
    /// Of the current spin-up, the wait not yet seen in the busy time, ns.
    spinup_left_ns: u64,
    spinups: u64,
    spindowns: u64,
    budget_held: u64,
    wakers: BTreeMap<(String, Option<String>), u64>,
    /// Each wake of the last 24 h: when (ns) and by whom.
    recent_wakes: std::collections::VecDeque<(u64, String, Option<String>)>,
}

impl Disk {
    /// Split the time since the last look into busy, idle, down (spinning
    /// down, then standby) and spinning up, and tell the governor what was
    /// seen; the wake, if this look saw one.
    fn account(
        &mut self,
        obs: &Observation,
        now: u64,
        power: &PowerModel,
        dry_run: bool,
    ) -> Option<Wake> {
        let dt = now.saturating_sub(self.last_ns);
        self.last_ns = now;
        // the counters' busy time since the last look: a request that found
        // the disk down counts in it from its arrival, so on a wake the
        // time before that is down time
        let busy_ns = obs.busy_ns.min(dt);
        // the time after the disk was down (all of it when it was not)
        let (mut busy_part, mut idle_part) = (busy_ns, dt - busy_ns);
        if matches!(self.gov.state(), GovState::Down { .. }) {
            let down_ns = if obs.io || obs.in_flight > 0 {
                dt - busy_ns
            } else {
                dt
            };
            let spinning_down = down_ns.min(power.shutdown_ns.saturating_sub(self.down_for_ns));
            self.down_for_ns += down_ns;
            self.times.down += secs(down_ns);
            self.times.spinning_down += secs(spinning_down);
            self.times.standby += secs(down_ns - spinning_down);
            (busy_part, idle_part) = (dt - down_ns, 0);
        }
        let woke = self.gov.observe(now, obs.io, obs.in_flight > 0);
        if woke.is_some() && !dry_run {
            // the waking request waits for the rest of a shutdown, then a
            // whole spin-up (fallow-emu's and the simulation's rule)
            self.spinup_left_ns =
                power.spinup_ns + power.shutdown_ns.saturating_sub(self.down_for_ns);
        }
        // the spin-up's time is the model's: taken from the counters' busy
        // time (the waiting requests count there) and, where they show
        // less, from what looked idle, so that it is priced once
        let from_busy = busy_part.min(self.spinup_left_ns);
        let from_idle = idle_part.min(self.spinup_left_ns - from_busy);
        self.spinup_left_ns -= from_busy + from_idle;
        busy_part -= from_busy;
        idle_part -= from_idle;
        self.times.spinning_up += secs(from_busy + from_idle);
        self.times.busy += secs(busy_part);
        self.times.idle += secs(idle_part);
        woke
    }

    /// Count a wake and the processes (and cgroups) that caused it, the
    /// last 24 h's kept for the spin-up budget's report.
    fn record_wake(&mut self, w: Wake, obs: &Observation, now: u64, dry_run: bool) -> EventKind {
        self.spinups += 1;
        let unattributed = if obs.issuers.is_empty() {
            Some(
                self.source
                    .attribution_gap()
                    .unwrap_or("the monitor saw no issuer")
                    .to_string(),
            )
        } else {
            None
        };
        let mut who: Vec<(String, Option<String>)> = obs
            .issuers
            .iter()
            .map(|i| (i.comm.clone(), i.cgroup.clone()))
            .collect();
        if who.is_empty() {
            who.push(("unknown".into(), None));
        }
        for (process, cgroup) in who {
            *self
                .wakers
                .entry((process.clone(), cgroup.clone()))
                .or_insert(0) += 1;
            self.recent_wakes.push_back((now, process, cgroup));
        }
        while self
            .recent_wakes
            .front()
            .is_some_and(|w| w.0.saturating_add(budget::DAY_NS) <= now)
        {
            self.recent_wakes.pop_front();
        }
        EventKind::Wake {
            idle_s: secs(w.idle_ns),
            down_s: secs(w.down_ns),
            issuers: obs.issuers.clone(),
            unattributed,
            dry_run,
        }
    }

    /// What the governor says now: wait, hold the disk up for the spin-up
    /// budget, or spin it down (never with I/O in flight).
    fn act_on_tick(&mut self, now: u64, dry_run: bool) -> Result<Option<EventKind>> {
        let kind = match self.gov.tick(now, self.jobs.running()) {
            Tick::Wait => return Ok(None),
            Tick::BudgetHeld {
                policy_timeout_ns,
                timeout_ns,
                used_in_window,
            } => {
                self.budget_held += 1;
                EventKind::BudgetHeld {
                    policy_timeout_s: secs(policy_timeout_ns),
                    timeout_s: secs(timeout_ns),
                    used_in_window,
                    max_spinups: self
                        .spec
                        .max_spinups
                        .map(|l| l.to_string())
                        .unwrap_or_default(),
                }
            }
            Tick::SpinDown {
                idle_ns,
                timeout_ns,
            } => {
                // never with I/O in flight: look again right before
                let in_flight = self.source.in_flight()?;
                if in_flight > 0 {
                    self.gov.observe(now, true, true);
                    return Ok(Some(EventKind::SpinDownSkipped { in_flight }));
                }
                let result = match (&mut self.actuator, dry_run) {
                    (_, true) => Ok(()),
                    (Some(a), false) => a.standby(),
                    (None, false) => Err(Error::Unsupported("no actuator".into())),
                };
                match result {
                    Ok(()) => {
                        self.gov.spun_down(now);
                        self.spindowns += 1;
                        self.down_for_ns = 0;
                        EventKind::SpinDown {
                            idle_s: secs(idle_ns),
                            timeout_s: secs(timeout_ns),
                            dry_run,
                        }
                    }
                    Err(e) => {
                        // start a new interval rather than retry every poll
                        self.gov.observe(now, true, false);
                        EventKind::Error {
                            message: e.to_string(),
                        }
                    }
                }
            }
        };
        Ok(Some(kind))
    }

    /// The jobs that started or ended since the last look.
    fn job_events(&mut self, now: u64, start_ns: u64) -> Result<Vec<EventKind>> {
        let spinning = !matches!(self.gov.state(), GovState::Down { .. });
        let mut kinds = Vec::new();
        for je in self.jobs.poll(now, start_ns, spinning)? {
            let kind = match je {
                jobs::JobEvent::Started(k) => {
                    let r = &self.jobs.runs()[k];
                    EventKind::JobStart {
                        command: r.command.clone(),
                        trigger: r.trigger,
                    }
                }
                jobs::JobEvent::Ended(k) => {
                    let r = &self.jobs.runs()[k];
                    EventKind::JobEnd {
                        command: r.command.clone(),
                        exit_code: r.exit_code,
                        duration_s: r.ended_s.unwrap_or(r.started_s) - r.started_s,
                        stopped: false,
                    }
                }
            };
            kinds.push(kind);
        }
        Ok(kinds)
    }
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disk")
            .field("name", &self.name)
            .field("gov", &self.gov)
            .finish_non_exhaustive()
    }
}

/// Gives the settings again (SIGHUP): read the config file anew, with
/// notes on what the caller changed or refused outside the daemon's
/// settings (the log's path, a status path or metrics address that take a
/// restart), added to the `reloaded` event's message; `Err` is why the
/// settings cannot be used.
pub type ReloadFn<'a> =
    dyn FnMut() -> std::result::Result<(SpindownConfig, Vec<String>), String> + 'a;

/// Called with the status after each change (and at least every
/// [`STATUS_EVERY_NS`]).
pub type StatusHook = Box<dyn FnMut(&Status) + Send>;

/// How often the status (file and hook) is rewritten when nothing
/// changes, ns. Only the clock-driven figures (uptime, time by state and
/// its energy) move then; rewriting them every second was most of an idle
/// daemon's cost (goal: ≤ 0.1 % of a core; docs/spindown.md, "Cost").
pub const STATUS_EVERY_NS: u64 = 60_000_000_000;

/// How long a job has to end after SIGTERM when the daemon stops, before
/// SIGKILL (systemd's TimeoutStopSec defaults to 90 s).
pub const JOB_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// The daemon.
pub struct Daemon {
    cfg: SpindownConfig,
    disks: Vec<Disk>,
    start_ns: u64,
    pending: Vec<Event>,
    hook: Option<StatusHook>,
    /// CPU time of the loop's thread when `run` began, and used since, ns.
    cpu_start_ns: u64,
    cpu_ns: u64,
    /// Times the loop woke, and why (see [`Wakeups`]).
    wakeups: Wakeups,
    /// Readable when [`Daemon::stop_handle`] is written to: ends a sleep.
    stop_rx: UnixStream,
    stop_tx: UnixStream,
}

/// Why the daemon's loop woke up, counted (in the status as `wakeups`):
/// on an idle disk with the event-driven source only deadlines and the
/// status heartbeat wake it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wakeups {
    /// An event-driven source had I/O to report.
    pub io: u64,
    /// A deadline: a timeout running out, a job due, a polled source's
    /// interval, the status heartbeat or the end of `--duration`.
    pub timer: u64,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("disks", &self.disks)
            .finish_non_exhaustive()
    }
}

/// Wakers sorted by wakes, most first (then by name).
fn top(it: impl Iterator<Item = ((String, Option<String>), u64)>) -> Vec<Waker> {
    let mut v: Vec<Waker> = it
        .map(|((process, cgroup), wakes)| Waker {
            process,
            cgroup,
            wakes,
        })
        .collect();
    v.sort_by(|a, b| b.wakes.cmp(&a.wakes).then(a.process.cmp(&b.process)));
    v
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Open the disk of `spec` (its source and actuator; in a dry run a disk
/// without a usable actuator is still watched), read its power state
/// without waking it, and make its governor, as of `now_ns`: the disk and
/// its `start` event (`t_s` from `daemon_start_ns`).
fn open_disk(
    spec: &DiskSpec,
    cfg: &SpindownConfig,
    daemon_start_ns: u64,
    now_ns: u64,
) -> Result<(Disk, Event)> {
    let t = target::open(&spec.target, cfg.dry_run)?;
    let mut actuator = t.actuator;
    let power_state = match actuator.as_mut().map(|a| a.check()) {
        Some(Ok(p)) => p,
        Some(Err(e)) => return Err(e),
        None => DiskPower::Spinning,
    };
    let budget = spec.max_spinups.map(Budget::new).transpose()?;
    let policy = fallow_core::energy::spindown::build(&spec.policy)?;
    let gov = if power_state == DiskPower::Standby {
        Governor::new_down(policy, cfg.power.clone(), budget, now_ns)
    } else {
        Governor::new(policy, cfg.power.clone(), budget, now_ns)
    };
    let start = Event {
        time: now_rfc3339(),
        t_s: secs(now_ns.saturating_sub(daemon_start_ns)),
        disk: t.name.clone(),
        kind: EventKind::Start {
            source: t.source.describe(),
            actuator: match &actuator {
                Some(a) => a.describe(),
                None => format!(
                    "none ({})",
                    t.actuator_error.as_deref().unwrap_or("dry run")
                ),
            },
            policy: spec.policy.clone(),
            power_state: power_state.name().into(),
            max_spinups: spec.max_spinups.map(|l| l.to_string()),
            events_unavailable: t.events_unavailable.clone(),
            mounted_tracefs: t.mounted_tracefs,
            poll_s: secs(cfg.poll_ns),
        },
    };
    let disk = Disk {
        name: t.name,
        events_unavailable: t.events_unavailable,
        spec: spec.clone(),
        source: t.source,
        actuator,
        gov,
        jobs: Jobs::new(&spec.jobs, now_ns)?,
        last_ns: now_ns,
        times: StateTimes::default(),
        down_for_ns: 0,
        spinup_left_ns: 0,
        spinups: 0,
        spindowns: 0,
        budget_held: 0,
        wakers: BTreeMap::new(),
        recent_wakes: std::collections::VecDeque::new(),
    };
    Ok((disk, start))
}

impl Daemon {
    /// Open every disk (its source and actuator; in a dry run a disk
    /// without a usable actuator is still watched) and read each one's
    /// power state without waking it.
    pub fn new(cfg: SpindownConfig) -> Result<Daemon> {
        cfg.validate()?;
        let start_ns = monotonic_ns();
        let mut disks = Vec::new();
        let mut pending = Vec::new();
        for spec in &cfg.disks {
            let (disk, start) = open_disk(spec, &cfg, start_ns, start_ns)?;
            pending.push(start);
            disks.push(disk);
        }
        let (stop_rx, stop_tx) = UnixStream::pair()
            .and_then(|(r, w)| {
                r.set_nonblocking(true)?;
                w.set_nonblocking(true)?;
                Ok((r, w))
            })
            .map_err(|e| Error::io("socketpair", "cannot create the daemon's wake-up pair", e))?;
        Ok(Daemon {
            cfg,
            disks,
            start_ns,
            pending,
            hook: None,
            cpu_start_ns: 0,
            cpu_ns: 0,
            wakeups: Wakeups::default(),
            stop_rx,
            stop_tx,
        })
    }

    /// A socket that ends the loop's current sleep when a byte is written
    /// to it (non-blocking): register it for the signals that set the stop
    /// flag (`signal_hook::low_level::pipe::register`), or the daemon
    /// notices the flag only at its next deadline, which on an idle disk
    /// may be minutes away.
    pub fn stop_handle(&self) -> Result<UnixStream> {
        self.stop_tx
            .try_clone()
            .map_err(|e| Error::io("socketpair", "cannot clone the daemon's wake-up socket", e))
    }

    /// When the loop must next run without being woken by I/O, ns: each
    /// disk's policy deadline and due job; a polled source's next read;
    /// while a disk is busy or a job runs, one poll interval (to see the
    /// disk fall idle on the counters, to reap the job); the status
    /// heartbeat; the end of `--duration`.
    fn next_deadline_ns(&self, last_status_ns: u64) -> u64 {
        let poll_ns = self.cfg.poll_ns;
        let mut t = last_status_ns.saturating_add(STATUS_EVERY_NS);
        if let Some(d) = self.cfg.duration_ns {
            t = t.min(self.start_ns.saturating_add(d));
        }
        for d in &self.disks {
            let polled = d.source.wait_fds().is_empty();
            if polled || d.gov.state() == GovState::Busy || d.jobs.running() {
                t = t.min(d.last_ns.saturating_add(poll_ns));
            }
            if let Some(g) = d.gov.deadline_ns() {
                t = t.min(g);
            }
            if let Some(j) = d.jobs.next_due_ns() {
                t = t.min(j);
            }
        }
        t
    }

    /// Sleep until `until_ns`, I/O on an event-driven source, or the stop
    /// handle. Returns whether I/O woke it.
    fn sleep_until(&mut self, until_ns: u64) -> Result<bool> {
        let now = monotonic_ns();
        if until_ns <= now {
            return Ok(false);
        }
        let left = until_ns - now;
        let ts = rustix::time::Timespec {
            tv_sec: (left / 1_000_000_000) as _,
            tv_nsec: (left % 1_000_000_000) as _,
        };
        let mut fds: Vec<PollFd<'_>> = self
            .disks
            .iter()
            .flat_map(|d| d.source.wait_fds())
            .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
            .collect();
        let n_io = fds.len();
        fds.push(PollFd::new(&self.stop_rx, PollFlags::IN));
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(Error::io("poll", "the daemon's sleep failed", e.into())),
        }
        let io = fds[..n_io].iter().any(|f| !f.revents().is_empty());
        let stopped = !fds[n_io].revents().is_empty();
        drop(fds);
        if stopped {
            let mut buf = [0u8; 64];
            while matches!(std::io::Read::read(&mut &self.stop_rx, &mut buf), Ok(n) if n > 0) {}
        }
        Ok(io)
    }

    /// Take new settings (SIGHUP): the disk list, the policy, budget and
    /// jobs of each disk, the poll interval, the power model, dry run.
    /// A disk kept (the same `DEV` as given) keeps its source, actuator,
    /// counters and state; a disk added is opened as at the start (its
    /// `start` event is handed out by the loop); a disk removed is
    /// closed. All or nothing: a disk that cannot be opened, a job list
    /// changed while one of its jobs runs, or a disk removed while its
    /// job runs refuses the whole reload and the old settings stay.
    /// Returns what changed.
    pub fn reconfigure(&mut self, cfg: SpindownConfig) -> Result<String> {
        cfg.validate()?;
        let now = monotonic_ns();
        let kept = |t: &str| self.disks.iter().position(|d| d.spec.target == t);
        for d in &self.disks {
            let spec = cfg.disks.iter().find(|s| s.target == d.spec.target);
            let busy = d.jobs.running();
            match spec {
                None if busy => {
                    return Err(Error::invalid(
                        "config",
                        format!("{}: a job runs; the disk cannot be removed now", d.name),
                    ))
                }
                Some(s) if busy && s.jobs != d.spec.jobs => {
                    return Err(Error::invalid(
                        "config",
                        format!("{}: a job runs; its jobs cannot change now", d.name),
                    ))
                }
                _ => {}
            }
        }
        // everything that can fail first: the new disks opened, the kept
        // disks' new policies, budgets and jobs built; then nothing can
        let mut prepared = Vec::new();
        for spec in &cfg.disks {
            let Some(k) = kept(&spec.target) else {
                prepared.push((None, None));
                continue;
            };
            let d = &self.disks[k];
            let gov = if spec.policy != d.spec.policy
                || spec.max_spinups != d.spec.max_spinups
                || cfg.power != self.cfg.power
            {
                Some((
                    fallow_core::energy::spindown::build(&spec.policy)?,
                    spec.max_spinups.map(Budget::new).transpose()?,
                ))
            } else {
                None
            };
            let jobs = if spec.jobs != d.spec.jobs {
                Some(Jobs::new(&spec.jobs, now)?)
            } else {
                None
            };
            prepared.push((gov, jobs));
        }
        let mut opened = Vec::new();
        for spec in cfg.disks.iter().filter(|s| kept(&s.target).is_none()) {
            opened.push(open_disk(spec, &cfg, self.start_ns, now)?);
        }
        let mut changed = Vec::new();
        let mut old: Vec<Option<Disk>> = std::mem::take(&mut self.disks)
            .into_iter()
            .map(Some)
            .collect();
        let old_targets: Vec<String> = old
            .iter()
            .map(|d| d.as_ref().map_or(String::new(), |d| d.spec.target.clone()))
            .collect();
        let mut opened = opened.into_iter();
        let mut disks = Vec::new();
        let mut fresh = Vec::new();
        for spec in &cfg.disks {
            match old_targets.iter().position(|t| *t == spec.target) {
                Some(k) => disks.push((old[k].take().expect("each disk once"), spec)),
                None => {
                    let (d, start) = opened.next().expect("opened above");
                    changed.push(format!("{}: added", d.name));
                    self.pending.push(start);
                    fresh.push(d.spec.target.clone());
                    disks.push((d, spec));
                }
            }
        }
        for d in old.into_iter().flatten() {
            // its source (tracepoint descriptors, counters) and actuator
            // close as it drops
            changed.push(format!("{}: removed", d.name));
        }
        let mut new_disks = Vec::new();
        for ((mut d, spec), (gov, jobs)) in disks.into_iter().zip(prepared) {
            if fresh.contains(&spec.target) {
                new_disks.push(d);
                continue;
            }
            if let Some((policy, budget)) = gov {
                d.gov.reconfigure(policy, cfg.power.clone(), budget, now);
                changed.push(format!(
                    "{}: policy {}, budget {}",
                    d.name,
                    spec.policy,
                    spec.max_spinups.map_or("none".into(), |l| l.to_string())
                ));
            }
            if let Some(jobs) = jobs {
                d.jobs = jobs;
                changed.push(format!("{}: {} job(s)", d.name, spec.jobs.len()));
            }
            d.spec = spec.clone();
            new_disks.push(d);
        }
        self.disks = new_disks;
        if cfg.poll_ns != self.cfg.poll_ns {
            changed.push(format!("poll {} s", secs(cfg.poll_ns)));
        }
        if cfg.dry_run != self.cfg.dry_run {
            changed.push(format!("dry run {}", cfg.dry_run));
        }
        let duration_ns = self.cfg.duration_ns;
        let state_file = self.cfg.state_file.clone();
        self.cfg = cfg;
        // not settings a reload changes: the run's end and its status file
        self.cfg.duration_ns = duration_ns;
        self.cfg.state_file = state_file;
        Ok(if changed.is_empty() {
            "no change".into()
        } else {
            changed.join("; ")
        })
    }

    /// Call `hook` with the status after each change (metrics exporters).
    pub fn set_status_hook(&mut self, hook: StatusHook) {
        self.hook = Some(hook);
    }

    /// Run until `stop` is set (or the configured duration passes),
    /// handing every event to `on_event` and rewriting the status file.
    /// Returns the final status.
    pub fn run(&mut self, stop: &AtomicBool, on_event: &mut dyn FnMut(&Event)) -> Result<Status> {
        self.run_reloading(stop, None, on_event)
    }

    /// [`Daemon::run`], and each time `reload`'s flag is set (SIGHUP) its
    /// function gives new settings ([`Daemon::reconfigure`]; an `Err` is
    /// why they cannot be had, and the old ones stay).
    pub fn run_reloading(
        &mut self,
        stop: &AtomicBool,
        mut reload: Option<(&AtomicBool, &mut ReloadFn<'_>)>,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Status> {
        for e in std::mem::take(&mut self.pending) {
            on_event(&e);
        }
        let mut last_status_ns = monotonic_ns();
        // the status is written on the first pass: `fallow spindown
        // status` right after a start (a service just started) found no
        // file for up to a minute when no event came
        let mut status_written = false;
        self.cpu_start_ns = crate::clock::thread_cpu_ns();
        // the disks' state at the start (the first look sets the baseline)
        let mut first = true;
        loop {
            if !first {
                // sleep until something can happen: I/O on an event-driven
                // source, a deadline, or a stop (docs/spindown.md, "Cost": an idle disk
                // under the event-driven monitor wakes nothing but timers)
                if self.sleep_until(self.next_deadline_ns(last_status_ns))? {
                    self.wakeups.io += 1;
                } else {
                    self.wakeups.timer += 1;
                }
            }
            first = false;
            let now = monotonic_ns();
            let done = stop.load(Ordering::Relaxed)
                || self
                    .cfg
                    .duration_ns
                    .is_some_and(|d| now >= self.start_ns.saturating_add(d));
            if done {
                break;
            }
            let mut any = false;
            if let Some((flag, get)) = &mut reload {
                if flag.swap(false, Ordering::Relaxed) {
                    let (message, applied) = match get().and_then(|(c, notes)| {
                        let m = self.reconfigure(c).map_err(|e| e.to_string())?;
                        Ok(match (m.as_str(), notes.is_empty()) {
                            (_, true) => m,
                            ("no change", false) => notes.join("; "),
                            _ => format!("{m}; {}", notes.join("; ")),
                        })
                    }) {
                        Ok(m) => (m, true),
                        Err(e) => (e, false),
                    };
                    let name = self
                        .disks
                        .first()
                        .map(|d| d.name.clone())
                        .unwrap_or_default();
                    on_event(&self.event(&name, EventKind::Reloaded { message, applied }));
                    // the `start` of each disk the reload added
                    for e in std::mem::take(&mut self.pending) {
                        on_event(&e);
                    }
                    any = true;
                }
            }
            for i in 0..self.disks.len() {
                let events = self.step(i)?;
                any |= !events.is_empty();
                for e in &events {
                    on_event(e);
                }
            }
            let now = monotonic_ns();
            self.cpu_ns = crate::clock::thread_cpu_ns().saturating_sub(self.cpu_start_ns);
            if any || !status_written || now.saturating_sub(last_status_ns) >= STATUS_EVERY_NS {
                self.write_status()?;
                status_written = true;
                last_status_ns = now;
            }
        }
        // stop the jobs still running and say so, rather than leave them
        // orphaned and the status calling them running
        for i in 0..self.disks.len() {
            let start_ns = self.start_ns;
            let ended = self.disks[i].jobs.stop_all(start_ns, JOB_STOP_GRACE);
            let name = self.disks[i].name.clone();
            for je in ended {
                let jobs::JobEvent::Ended(k) = je else {
                    continue;
                };
                let r = self.disks[i].jobs.runs()[k].clone();
                on_event(&self.event(
                    &name,
                    EventKind::JobEnd {
                        command: r.command.clone(),
                        exit_code: r.exit_code,
                        duration_s: r.ended_s.unwrap_or(r.started_s) - r.started_s,
                        stopped: true,
                    },
                ));
            }
        }
        self.cpu_ns = crate::clock::thread_cpu_ns().saturating_sub(self.cpu_start_ns);
        self.write_status()?;
        Ok(self.status())
    }

    fn event(&self, disk: &str, kind: EventKind) -> Event {
        Event {
            time: now_rfc3339(),
            t_s: secs(monotonic_ns().saturating_sub(self.start_ns)),
            disk: disk.to_string(),
            kind,
        }
    }

    /// Look at disk `i` (without waiting: the loop slept already) and act
    /// on what it says.
    fn step(&mut self, i: usize) -> Result<Vec<Event>> {
        let dry_run = self.cfg.dry_run;
        let d = &mut self.disks[i];
        let obs = d.source.next(0)?;
        let now = monotonic_ns();
        let mut kinds = Vec::new();
        if let Some(w) = d.account(&obs, now, &self.cfg.power, dry_run) {
            kinds.push(d.record_wake(w, &obs, now, dry_run));
        }
        kinds.extend(d.act_on_tick(now, dry_run)?);
        kinds.extend(d.job_events(now, self.start_ns)?);
        let name = self.disks[i].name.clone();
        Ok(kinds.into_iter().map(|k| self.event(&name, k)).collect())
    }

    /// The status now.
    pub fn status(&self) -> Status {
        let now = monotonic_ns();
        let p = &self.cfg.power;
        let disks = self
            .disks
            .iter()
            .map(|d| {
                let t = d.times;
                // fallow energy's definition (EnergyByState::of): a
                // spin-up's wait and a shutdown draw their energy once
                let spans = fallow_core::energy::PowerSpans {
                    serve_s: t.busy,
                    seek_s: 0.0,
                    idle_s: t.idle,
                    standby_s: t.standby,
                    spinups: d.spinups,
                    shutdowns: d.spindowns,
                };
                let e = fallow_core::energy::EnergyByState::of(p, &spans);
                let elapsed_s = t.busy + t.idle + t.down + t.spinning_up;
                let wakers = top(d.wakers.iter().map(|(k, &n)| (k.clone(), n)));
                let mut day: BTreeMap<(String, Option<String>), u64> = BTreeMap::new();
                for (t, p, c) in &d.recent_wakes {
                    if t.saturating_add(budget::DAY_NS) > now {
                        *day.entry((p.clone(), c.clone())).or_insert(0) += 1;
                    }
                }
                let wakers_24h = top(day.into_iter());
                let (state, timeout_s) = match d.gov.state() {
                    GovState::Busy => ("busy", None),
                    GovState::Idle {
                        timeout_ns,
                        held_until_ns,
                        since_ns,
                    } => (
                        "idle",
                        held_until_ns.map(|u| u - since_ns).or(timeout_ns).map(secs),
                    ),
                    GovState::Down { .. } => ("down", None),
                };
                DiskStatus {
                    disk: d.name.clone(),
                    actuator: d.actuator.as_ref().map_or("none".into(), |a| a.describe()),
                    source: d.source.describe(),
                    events_unavailable: d.events_unavailable.clone(),
                    policy: d.spec.policy.clone(),
                    state: state.into(),
                    timeout_s,
                    spinups: d.spinups,
                    spindowns: d.spindowns,
                    max_spinups: d.spec.max_spinups.map(|l| l.to_string()),
                    max_spinups_per_day: d.spec.max_spinups.map(|l| l.per_day()),
                    spindowns_in_window: d.gov.budget().map_or(0, |b| b.used_in_window(now)),
                    spindowns_24h: d.gov.budget().map_or(0, |b| b.used_24h(now)),
                    budget_held: d.budget_held,
                    time_s: t,
                    energy_j: EnergyEstimate {
                        busy: e.busy,
                        idle: e.idle,
                        standby: e.standby,
                        power_cycle: e.power_cycle,
                        total: e.total,
                        always_on: fallow_core::energy::EnergyByState::always_on_j(
                            p, &spans, elapsed_s,
                        ),
                    },
                    wakers,
                    wakers_24h,
                    jobs: d
                        .jobs
                        .runs()
                        .iter()
                        .map(|r| JobRunStatus {
                            command: r.command.clone(),
                            started_s: r.started_s,
                            ended_s: r.ended_s,
                            trigger: serde_json::to_value(r.trigger)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_string))
                                .unwrap_or_default(),
                            exit_code: r.exit_code,
                            stopped: r.stopped,
                        })
                        .collect(),
                    spinups_saved: d.jobs.saved(),
                }
            })
            .collect();
        Status {
            pid: std::process::id(),
            pid_start_ticks: process_start_ticks(std::process::id()),
            updated: now_rfc3339(),
            uptime_s: secs(now.saturating_sub(self.start_ns)),
            dry_run: self.cfg.dry_run,
            cpu_s: secs(self.cpu_ns),
            wakeups: self.wakeups,
            disks,
        }
    }

    fn write_status(&mut self) -> Result<()> {
        let status = self.status();
        if let Some(h) = &mut self.hook {
            h(&status);
        }
        let Some(path) = &self.cfg.state_file else {
            return Ok(());
        };
        // the one atomic writer of every fallow output: it refuses (again,
        // right before its rename) a device node, FIFO, socket or directory
        // that took the path's place since the CLI's guard checked it
        let text = serde_json::to_string_pretty(&status).unwrap_or_default();
        fallow_core::outpath::write_atomically(path, |w| {
            w.write_all(text.as_bytes())?;
            w.write_all(b"\n")
        })
        .map_err(|e| Error::io(path, "cannot write the status file", e))
    }
}
