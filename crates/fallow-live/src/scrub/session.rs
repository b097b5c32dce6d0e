//! A block scrub from start to report, shaped like
//! [`crate::native::NativeSession`]: the plan (target, checkpoint, request
//! size and order, the read path), the scrubber, the monitor, the driver
//! loop, the last checkpoint and the report. A front end turns its
//! settings into a [`ScrubPlan`] and prints
//! the [`ScrubOutcome`]; it says nothing itself between the two but what
//! [`ScrubSession::on_event`] and [`ScrubSession::warnings`] give it.

use super::{checkpoint, Checkpoint, Order, Resume, ScrubEvent, Target, TargetKind};
use super::{ScrubConfig, ScrubReport, Scrubber, SgVerifier, Verifier, VerifyMode};
use crate::driver::{DriveReport, Driver, DriverConfig};
use crate::error::{Error, Result};
use crate::monitor::{Monitor, MonitorConfig, MonitorStats, OwnCounters, SharedStats, StatSource};
use crate::progress::{Progress, ProgressProbe, Publishing};
use crate::settings::Settings;
use fallow_core::outpath::OutputGuard;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Request size when none is given: large enough that a checkpoint per
/// request costs little, small enough that an FG request that finds one
/// in service waits only ~10 ms on a disk (Practical Scrubbing Fig. 4).
pub const DEFAULT_SIZE: u64 = 1 << 20;

/// Smallest request size a budget refits to (and the segment of a fresh
/// pass under a budget with no `--size`): the low end of the sizes the
/// live benchmark's offline tuning sweeps (`--sizes 64KiB..4MiB`).
pub const REFIT_MIN_SIZE: u64 = 64 << 10;
/// Largest request size a budget refits to: that sweep's high end.
pub const REFIT_MAX_SIZE: u64 = 4 << 20;

/// Everything a block scrub needs, settled (flags, config, tune result
/// and defaults already applied; what is left open comes from the
/// checkpoint with [`Resume::Yes`], then from the tune result, then from
/// the defaults).
#[derive(Debug, Clone)]
pub struct ScrubPlan {
    /// The device or file.
    pub target: PathBuf,
    /// The settings, resolved (the block scrub's keys; `fallow run`'s keep
    /// their defaults).
    pub settings: Settings,
    /// Continue, restart, or neither.
    pub resume: Resume,
    /// Files no output may be (the target is added by the scrubber).
    pub outputs: OutputGuard,
}

/// What a block scrub did.
#[derive(Debug, Clone)]
pub struct ScrubOutcome {
    /// The scrub's progress, bad ranges and checkpoint.
    pub report: ScrubReport,
    /// The driver's counts.
    pub drive: DriveReport,
    /// The monitor's counts and cost.
    pub monitor: MonitorStats,
}

impl ScrubPlan {
    /// The block scrub settings `s` describe, of `target`: every front
    /// end (the CLI's `fallow scrub`, Python's `fallow.live.scrub`) builds
    /// its session from this one plan. `outputs` holds the front end's own
    /// inputs (a config file); the tune result and a monitor stat file are
    /// added here.
    pub fn from_settings(
        s: &Settings,
        target: PathBuf,
        resume: Resume,
        mut outputs: OutputGuard,
    ) -> ScrubPlan {
        for input in [
            s.tuned_path.as_deref(),
            Some(std::path::Path::new(&s.monitor)),
        ]
        .into_iter()
        .flatten()
        {
            outputs.add_input(input);
        }
        ScrubPlan {
            target,
            settings: s.clone(),
            resume,
            outputs,
        }
    }
}

impl ScrubOutcome {
    /// The JSON document of this scrub (what `fallow scrub --json` prints
    /// and `fallow.live.scrub` returns): `policy` and `policy_from` as
    /// settled, `warnings` as the front end gave them.
    pub fn doc<'a>(
        &'a self,
        policy: &'a str,
        policy_from: &'a str,
        warnings: &'a [String],
    ) -> crate::job_doc::JobDoc<'a, ScrubReport> {
        crate::job_doc::JobDoc {
            report: &self.report,
            devices: None,
            policy,
            policy_from,
            outcome: self.drive.outcome,
            monitor: &self.monitor,
            monitor_cpu_fraction: self.monitor.cpu_fraction(),
            driver: &self.drive,
            warnings,
        }
    }
}

/// Where a budgeted scrub keeps its learned window: beside its
/// checkpoint, `NAME.budget.json` for `NAME.json`.
pub fn budget_window_path(checkpoint: &std::path::Path) -> PathBuf {
    checkpoint.with_extension("budget.json")
}

/// The checkpoint file: `--checkpoint`, else the default path for the
/// target, its directory made.
fn checkpoint_path(plan: &ScrubPlan) -> Result<PathBuf> {
    match &plan.settings.checkpoint {
        Some(p) => Ok(p.clone()),
        None => checkpoint::default_path_made(&plan.target, "the checkpoint"),
    }
}

/// The read path and its name: SCSI VERIFY if asked and possible, else
/// reads (a warning says why when VERIFY was asked and is not possible;
/// `--verify-cmd=required` makes that an error).
fn read_path(
    plan: &ScrubPlan,
    target: &Target,
    own: Arc<OwnCounters>,
    warnings: &mut Vec<String>,
) -> Result<(Box<dyn Verifier + Send>, &'static str)> {
    let reads: Box<dyn Verifier + Send> = Box::new(target.reader(own)?);
    if plan.settings.verify == VerifyMode::Off {
        return Ok((reads, "read"));
    }
    let start = match (&target.device, target.kind) {
        (Some(d), TargetKind::Block) => d.start_bytes,
        _ => 0,
    };
    match SgVerifier::probe(target.file(), start, target.granule_bytes) {
        Ok(v) => Ok((Box::new(v), "scsi-verify")),
        Err(why) if plan.settings.verify == VerifyMode::Required => Err(Error::Setting(format!(
            "--verify-cmd=required: {}: {why}",
            target.path.display()
        ))),
        Err(why) => {
            warnings.push(format!(
                "--verify-cmd: {}: {why}; verifying with {} reads instead",
                target.path.display(),
                if target.direct {
                    "O_DIRECT"
                } else {
                    "buffered"
                }
            ));
            Ok((reads, "read"))
        }
    }
}

/// The FG monitor `--monitor` names: `auto` watches the device under the
/// target (a warning when there is none), `none` nothing, else the one given.
fn start_monitor(
    plan: &ScrubPlan,
    target: &Target,
    own: Arc<OwnCounters>,
    warnings: &mut Vec<String>,
) -> Result<Monitor> {
    let mcfg = MonitorConfig {
        interval_ns: plan.settings.interval_ns,
    };
    let start = |src: &StatSource| Monitor::start(src, vec![own.clone()], mcfg);
    Ok(match plan.settings.monitor.as_str() {
        "none" => Monitor::without_device(),
        "auto" => match &target.device {
            Some(d) => start(&d.stat_source()?)?,
            None => {
                warnings.push(format!(
                    "{}: no block device under it that sysfs knows (tmpfs, overlayfs?); scrubbing without watching for foreground I/O (--monitor DEV to name one)",
                    target.path.display()
                ));
                Monitor::without_device()
            }
        },
        spec => start(&StatSource::parse(spec)?)?,
    })
}

/// An open block scrub, ready to run.
pub struct ScrubSession {
    scrubber: Scrubber,
    monitor: Monitor,
    driver: Driver,
    warnings: Vec<String>,
    progress: ProgressProbe,
    target_path: PathBuf,
    target_bytes: u64,
}

impl std::fmt::Debug for ScrubSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScrubSession")
            .field("target", &self.target_path)
            .finish_non_exhaustive()
    }
}

impl ScrubSession {
    /// Open the scrub: the policy first (a bad one fails before the device
    /// is touched), the target, the checkpoint (its directory made), the
    /// read path, the scrubber (which checks and writes the checkpoint),
    /// the monitor and the driver. What the user should know (a fallback
    /// to buffered reads or to reads instead of SCSI VERIFY, nothing to
    /// watch) is in [`ScrubSession::warnings`].
    pub fn open(plan: &ScrubPlan) -> Result<ScrubSession> {
        let policy_err = |e: Error| Error::Policy {
            spec: plan.settings.policy.clone(),
            from: plan.settings.policy_from().to_string(),
            why: Box::new(e),
        };
        drop(
            Driver::from_spec(
                &plan.settings.policy,
                DriverConfig {
                    budget: plan.settings.budget,
                    ..DriverConfig::default()
                },
            )
            .map_err(policy_err)?,
        );
        let mut warnings = Vec::new();

        let target = Target::open(&plan.target, !plan.settings.buffered)?;
        if let Some(r) = &target.buffered_reason {
            if !plan.settings.buffered {
                warnings.push(format!(
                    "{}: {r}; reading through the page cache, dropping it around each read",
                    target.path.display()
                ));
            }
        }
        let checkpoint_path = checkpoint_path(plan)?;
        // the learned window of a budgeted run lives beside the checkpoint
        let window_path = budget_window_path(&checkpoint_path);
        // with --resume, what the settings leave open comes from the checkpoint
        let existing = if plan.resume == Resume::Yes {
            Checkpoint::load(&checkpoint_path)?
        } else {
            None
        };
        // a budget with no size given refits the size too, among the
        // powers of two from the segment (REFIT_MIN_SIZE on a fresh pass,
        // the checkpoint's on a resumed one) to REFIT_MAX_SIZE: a request
        // reads whole segments
        let refit_size = plan.settings.budget.is_some()
            && plan.settings.size.is_none()
            && plan.settings.tuned_size.is_none();
        let size = plan
            .settings
            .size
            .or(existing.as_ref().map(|c| c.request_size_bytes))
            .or(plan.settings.tuned_size)
            .unwrap_or(if refit_size {
                REFIT_MIN_SIZE
            } else {
                DEFAULT_SIZE
            });
        let budget = plan.settings.budget.map(|b| crate::budget::LiveBudget {
            sizes: (refit_size && size <= REFIT_MAX_SIZE).then_some((size, REFIT_MAX_SIZE)),
            ..b
        });
        let order = plan
            .settings
            .order
            .or(existing.as_ref().map(|c| c.order))
            .unwrap_or(Order::Sequential);

        // the read path: SCSI VERIFY if asked and possible, else reads
        let own = Arc::new(OwnCounters::new(
            target.device.as_ref().and_then(|d| d.max_request_bytes),
        ));
        let (verifier, method) = read_path(plan, &target, own.clone(), &mut warnings)?;

        let scrubber = Scrubber::new(
            &target,
            verifier,
            method,
            own.clone(),
            ScrubConfig {
                request_size_bytes: size,
                order,
                retries: plan.settings.retries,
                max_rate_bytes_per_s: plan.settings.max_rate,
                windows: plan.settings.windows.clone(),
                max_bytes: plan.settings.max_bytes,
                checkpoint_path,
                checkpoint_interval_ns: plan.settings.checkpoint_interval_ns,
                log_path: plan.settings.log.clone(),
                outputs: plan.outputs.clone(),
            },
            plan.resume,
        )?;

        let monitor = start_monitor(plan, &target, own.clone(), &mut warnings)?;
        let mut driver = Driver::from_spec(
            &plan.settings.policy,
            DriverConfig {
                bg_size_bytes: size,
                initial_bg_service: plan
                    .settings
                    .bg_service
                    .unwrap_or(DriverConfig::default().initial_bg_service),
                seed: plan.settings.seed,
                budget,
            },
        )?;
        if plan.settings.budget.is_some() {
            driver.keep_window_in(&window_path)?;
        }
        let to_read = target
            .size_bytes
            .saturating_sub(scrubber.resumed_from_bytes())
            .min(plan.settings.max_bytes.unwrap_or(u64::MAX));
        warnings.extend(crate::scrub_pace::cannot_finish_within_a_year(
            to_read,
            &plan.settings.policy,
            plan.settings.max_rate,
            &plan.settings.windows,
        ));
        let progress = ProgressProbe::default();
        progress.set(Progress::of_scrub(&scrubber.report()));
        Ok(ScrubSession {
            scrubber,
            monitor,
            driver,
            warnings,
            progress,
            target_path: target.path.clone(),
            target_bytes: target.size_bytes,
        })
    }

    /// What the user should know, found while opening.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The target as opened.
    pub fn target_path(&self) -> &std::path::Path {
        &self.target_path
    }

    /// The target's size, bytes.
    pub fn target_bytes(&self) -> u64 {
        self.target_bytes
    }

    /// Bytes the pass had done when this run started.
    pub fn resumed_from_bytes(&self) -> u64 {
        self.scrubber.resumed_from_bytes()
    }

    /// The checkpoint file.
    pub fn checkpoint_path(&self) -> PathBuf {
        PathBuf::from(self.scrubber.report().checkpoint)
    }

    /// Call `f` on progress, bad ranges and window waits (from the
    /// driver's thread, during [`ScrubSession::run`]).
    pub fn on_event(&mut self, f: impl FnMut(&ScrubEvent) + Send + 'static) {
        self.scrubber.on_event(f);
    }

    /// The driver itself (the metrics exporter takes it).
    pub fn driver_mut(&mut self) -> &mut Driver {
        &mut self.driver
    }

    /// The monitor's statistics while it runs.
    pub fn shared_stats(&self) -> SharedStats {
        self.monitor.shared_stats()
    }

    /// The scrub's progress as it runs (read from other threads).
    pub fn progress(&self) -> ProgressProbe {
        self.progress.clone()
    }

    /// Run until the pass is done, the byte budget spent or `stop` raised;
    /// the checkpoint is then written and the monitor stopped, whatever
    /// happened, before an error is returned.
    pub fn run(mut self, stop: &AtomicBool) -> Result<ScrubOutcome> {
        let mut publishing = Publishing {
            inner: &mut self.scrubber,
            probe: self.progress.clone(),
            read: |s| Some(Progress::of_scrub(&s.report())),
            last_ns: crate::clock::monotonic_ns(),
        };
        let drive = self.driver.run(&mut self.monitor, &mut publishing, stop);
        let flushed = self.scrubber.flush();
        let mon = self.monitor.stop();
        let drive = drive?;
        flushed?;
        let monitor = mon?;
        let report = self.scrubber.report();
        self.progress.set(Progress::of_scrub(&report));
        Ok(ScrubOutcome {
            report,
            drive,
            monitor,
        })
    }
}

/// Progress is the lower module; each session kind converts its own
/// report into it.
impl Progress {
    /// The block scrubber's report as progress.
    pub fn of_scrub(r: &ScrubReport) -> Progress {
        Progress {
            scrubbed_bytes: r.scrubbed_bytes,
            target_bytes: Some(r.target_bytes),
            pass: Some(r.pass),
            run_bytes: r.run_bytes,
            run_elapsed_s: r.run_elapsed_s,
            bad_ranges: r.bad_ranges.len() as u64,
            // ranges are inclusive byte pairs
            bad_bytes: r.bad_ranges.iter().map(|b| b[1] - b[0] + 1).sum(),
            complete: r.complete,
            ..Progress::default()
        }
        .with_eta()
    }
}
