//! A managed command from start to end, shaped like
//! [`crate::native::NativeSession`]: what to watch (disk, network or
//! both), the command started frozen with its guardian, the monitors, the
//! driver loop, and the end — the command's exit, Ctrl-C passed on, or
//! fallow ended by SIGTERM or SIGHUP with the command left running,
//! thawed. A front end turns its flags into [`Settings`], prints the
//! [`RunNote`]s as they come and the [`RunOutcome`] at the end.

use super::{
    exit_code, native_alternative, CommandSpec, FreezerKind, GuardianCommand, IoAccounting,
    Managed, OnFrozenIo, RunConfig, RunStats, WatchedDisk,
};
use crate::combine;
use crate::driver::{DriveReport, Driver, DriverConfig};
use crate::error::{Error, Result};
use crate::monitor::{BioCounts, Monitor, MonitorConfig, MonitorStats, SharedStats};
use crate::net::{self, NamespaceTraffic, NetMonitorConfig, NetSource};
use crate::settings::{Disk, Settings};
use fallow_core::sim::BgService;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Something the user should hear while the session runs.
#[derive(Debug, Clone, PartialEq)]
pub enum RunNote {
    /// Said as it is.
    Text(String),
    /// The monitor failed at the end (the run is over; the command is
    /// still seen to).
    MonitorFailed(String),
    /// fallow was ended by signal `signal`: the command runs on, unpaused.
    LeftRunning {
        /// The signal.
        signal: i32,
        /// The command's pid.
        pid: u32,
        /// How long it had been let run, s.
        running_s: f64,
    },
    /// Ctrl-C: passed on to the command, which then runs unpaused to its end.
    Interrupting,
    /// A child of the command still runs; the guardian sees to it.
    LeftToGuardian(String),
}

/// Which signals fallow received (each raises its flag and the stop flag).
#[derive(Debug, Clone, Default)]
pub struct RunSignals {
    /// Raised by any of them: the driver stops.
    pub stop: Arc<AtomicBool>,
    /// SIGINT.
    pub int: Arc<AtomicBool>,
    /// SIGTERM.
    pub term: Arc<AtomicBool>,
    /// SIGHUP.
    pub hup: Arc<AtomicBool>,
}

/// How the run ended and what it did.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// `exited`, `interrupted` (Ctrl-C passed on) or `left-running`
    /// (fallow ended by SIGTERM or SIGHUP).
    pub end: &'static str,
    /// The command's exit status (none when left running).
    pub exit_code: Option<i32>,
    /// fallow's exit status: the command's, or 128 + the signal that
    /// ended fallow while the command runs on.
    pub code: i32,
    /// The command's pid.
    pub pid: u32,
    /// How it was frozen.
    pub freezer: FreezerKind,
    /// Its cgroup, if it had one.
    pub cgroup: Option<PathBuf>,
    /// How its own I/O was told apart.
    pub io_accounting: String,
    /// Why freezing cannot pause it and what can, for a command whose work
    /// runs in the kernel.
    pub native_alternative: Option<String>,
    /// Time running, frozen, frozen but reading; thaws.
    pub stats: RunStats,
    /// The driver's counts.
    pub drive: DriveReport,
    /// The monitor's counts and cost.
    pub monitor: MonitorStats,
    /// The bios on the watched disk told apart by cgroup, when the event
    /// monitor did that (`None` under the poller).
    pub bios: Option<BioCounts>,
}

/// A started command, frozen, with its monitors: ready to run.
pub struct RunSession {
    managed: Managed,
    monitor: Monitor,
    driver: Driver,
    native: Option<String>,
    slice_ns: u64,
    policy: String,
    policy_from: &'static str,
}

impl std::fmt::Debug for RunSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSession")
            .field("managed", &self.managed)
            .finish_non_exhaustive()
    }
}

impl RunSession {
    /// Check the settings, start `command` frozen (with its guardian) and
    /// its monitors. The policy and what to watch fail before the command
    /// starts; if the monitors cannot start, the command is ended (it has
    /// not run). `say` hears the notes on the way; `on_frozen_io` is told,
    /// from the watch's thread, the first time the frozen command is seen
    /// to read.
    pub fn open(
        s: &Settings,
        command: &[OsString],
        guardian: Option<GuardianCommand>,
        signals: &RunSignals,
        say: &mut dyn FnMut(RunNote),
        on_frozen_io: OnFrozenIo,
    ) -> Result<RunSession> {
        let driver_cfg = DriverConfig {
            // a BG request is a slice of the command's time, whatever its size
            initial_bg_service: BgService::Constant { ns: s.slice_ns },
            seed: s.seed,
            budget: s.budget,
            ..DriverConfig::default()
        };
        let driver = Driver::from_spec(&s.policy, driver_cfg)
            .map_err(|e| e.named(s.policy_source().as_deref()))?;

        // what to watch
        let disk = match &s.disk {
            Disk::Named(spec) => Some(
                WatchedDisk::parse(spec)
                    .map_err(|e| e.named(s.provenance.from_file("device").as_deref()))?,
            ),
            Disk::Unwatched => None,
            Disk::CurrentDir => Some(WatchedDisk::parse(".").map_err(|e| {
                Error::Setting(format!(
                    "the current directory's disk cannot be watched ({e}): name it with --device"
                ))
            })?),
        };
        let net_source = match &s.net {
            Some(n) => Some(
                NetSource::parse(n)
                    .map_err(|e| e.named(s.provenance.from_file("net").as_deref()))?,
            ),
            None => None,
        };
        if s.netns.is_some() && s.net.is_none() {
            say(RunNote::Text(
                "note: --netns without --net: the namespace only isolates the command's network"
                    .into(),
            ));
        }
        if s.net.is_some() && s.netns.is_none() {
            say(RunNote::Text(
                "note: --net without --netns: the command's own traffic on the interface counts as foreground".into(),
            ));
        }

        let (program, args) = command
            .split_first()
            .ok_or_else(|| Error::invalid("command", "no command to run"))?;
        let spec = CommandSpec {
            program: program.clone(),
            args: args.to_vec(),
            netns: s.netns.clone(),
        };
        spec.check()?;
        let native = native_alternative(command);
        if let Some(n) = &native {
            say(RunNote::Text(format!(
                "note: {n}; fallow run warns if the command goes on reading while frozen"
            )));
        }

        let cfg = RunConfig {
            freezer: s.freezer,
            slice_ns: s.slice_ns,
            account_dev: disk.as_ref().and_then(|d| d.dev),
            guardian,
        };
        let mut managed = Managed::spawn(&spec, &cfg, signals.stop.clone())?;
        managed.on_frozen_io(on_frozen_io);
        let monitor = match start_monitors(s, disk.as_ref(), net_source.as_ref(), &managed) {
            Ok(m) => m,
            Err(e) => {
                // it has not run: end it rather than leave it to run unwatched
                let _ = managed.kill();
                let _ = managed.finish();
                return Err(e);
            }
        };
        Ok(RunSession {
            managed,
            monitor,
            driver,
            native,
            slice_ns: s.slice_ns,
            policy: s.policy.clone(),
            policy_from: s.policy_from(),
        })
    }

    /// The driver itself (the metrics exporter takes it).
    pub fn driver_mut(&mut self) -> &mut Driver {
        &mut self.driver
    }

    /// The monitor's statistics while it runs.
    pub fn shared_stats(&self) -> SharedStats {
        self.monitor.shared_stats()
    }

    /// The command's reads while frozen, as they are counted.
    pub fn frozen_io_probe(&self) -> Option<super::FrozenIoProbe> {
        self.managed.frozen_io_probe()
    }

    /// End the command before it has run (the front end could not set up
    /// what it needs, a metrics endpoint).
    pub fn abort(mut self) {
        let _ = self.monitor.stop();
        let _ = self.managed.kill();
        let _ = self.managed.finish();
    }

    /// What was started, in words: the pid, the freezer, how the
    /// command's I/O is told apart, the policy, the slice (in `slice`, as
    /// the front end writes durations), what is watched; then what the
    /// freezer passed over.
    pub fn started(&self, slice: &str) -> Vec<String> {
        let m = &self.managed;
        let mut v = vec![format!(
            "pid {}, frozen by {}{}, {}; policy {} ({}), {slice} slices; watching {} (monitor: {})",
            m.pid(),
            m.freezer().kind(),
            m.freezer()
                .cgroup_dir()
                .map(|d| format!(" ({})", d.display()))
                .unwrap_or_default(),
            match m.accounting() {
                IoAccounting::None =>
                    "its disk I/O not told apart (not a disk in sysfs)".to_string(),
                _ => format!("its disk I/O told apart by {}", describe_accounting(m)),
            },
            self.policy,
            self.policy_from,
            self.monitor.stats().source,
            self.monitor.stats().kind_label(),
        )];
        v.extend(
            m.freezer()
                .passed_over()
                .iter()
                .map(|why| format!("passed over {why}")),
        );
        v
    }

    /// The slice, ns.
    pub fn slice_ns(&self) -> u64 {
        self.slice_ns
    }

    /// Run the command in the idle time the policy picks until it exits
    /// or a signal stops the driver, then end as the signal says (see the
    /// module doc). A failure of the driver leaves the command running,
    /// unpaused and unwatched, and says so.
    pub fn run(self, signals: &RunSignals, say: &mut dyn FnMut(RunNote)) -> Result<RunOutcome> {
        let RunSession {
            mut managed,
            mut monitor,
            mut driver,
            native,
            ..
        } = self;
        let drive = match driver.run(&mut monitor, &mut managed, &signals.stop) {
            Ok(r) => r,
            Err(e) => {
                let pid = managed.pid();
                let _ = managed.detach();
                // a failure during the run (the watched device went away), not bad input
                return Err(e.failed(format!(
                    "the command (pid {pid}) continues, unpaused and unwatched"
                )));
            }
        };
        // before the cgroups go: once they are removed the command's I/O can
        // no longer be read, and its last requests would look like FG work
        let last_stats = monitor.stats();
        let mon = monitor.stop().unwrap_or_else(|e| {
            // the run is over: say so, and still see to the command
            say(RunNote::MonitorFailed(e.to_string()));
            last_stats
        });
        let pid = managed.pid();
        let freezer = managed.freezer().kind();
        let cgroup = managed.freezer().cgroup_dir().map(PathBuf::from);
        let io_accounting = describe_accounting(&managed);
        let bios = managed
            .own_io()
            .and_then(|o| o.bio_attribution())
            .filter(|a| a.attached())
            .map(|a| a.counts());
        let signalled = [(&signals.term, 15), (&signals.hup, 1)]
            .into_iter()
            .find(|(f, _)| f.load(Ordering::SeqCst))
            .map(|(_, n)| n);
        let (end, stats, exit) = match signalled {
            Some(signal) if !managed.has_exited() => {
                let stats = managed.stats();
                managed.detach()?;
                say(RunNote::LeftRunning {
                    signal,
                    pid,
                    running_s: stats.running_s,
                });
                ("left-running", stats, None)
            }
            _ => {
                let end = if !managed.has_exited() && signals.int.load(Ordering::SeqCst) {
                    say(RunNote::Interrupting);
                    managed.interrupt()?;
                    "interrupted"
                } else {
                    "exited"
                };
                let done = managed.finish()?;
                for why in &done.left_behind {
                    say(RunNote::LeftToGuardian(why.clone()));
                }
                (end, done.stats, Some(exit_code(done.status)))
            }
        };
        Ok(RunOutcome {
            end,
            exit_code: exit,
            // left running: 128 + the signal, as a shell reports a command it ended
            code: exit.unwrap_or(128 + signalled.unwrap_or(15)),
            pid,
            freezer,
            cgroup,
            io_accounting,
            native_alternative: native,
            stats,
            drive,
            monitor: mon,
            bios,
        })
    }
}

/// The disk monitor, the network monitor, or both as one.
fn start_monitors(
    s: &Settings,
    disk: Option<&WatchedDisk>,
    net_source: Option<&NetSource>,
    managed: &Managed,
) -> Result<Monitor> {
    let mut monitors = Vec::new();
    if let Some(d) = disk {
        let own = managed.own_io().into_iter().collect();
        let cfg = MonitorConfig {
            interval_ns: s.interval_ns,
        };
        monitors.push(Monitor::start(&d.source, own, cfg)?);
    }
    if let Some(n) = net_source {
        let own = s
            .netns
            .as_deref()
            .map(|ns| NamespaceTraffic::of_process_in(managed.pid(), ns))
            .transpose()?;
        let cfg = NetMonitorConfig {
            interval_ns: s.interval_ns,
        };
        monitors.push(net::start(n, own, cfg)?);
    }
    if monitors.len() == 1 {
        Ok(monitors.pop().expect("one monitor"))
    } else {
        combine::either(monitors)
    }
}

/// How the command's own I/O was told apart: its bios by cgroup when the
/// event monitor counted them (its writes still from the accounting
/// source), else the accounting source alone.
fn describe_accounting(managed: &Managed) -> String {
    let name = managed.accounting().name();
    match managed.own_io().and_then(|o| o.bio_attribution()) {
        Some(a) if a.attached() => format!("cgroup2 bios (block_bio_queue), writes by {name}"),
        _ => name.to_string(),
    }
}
