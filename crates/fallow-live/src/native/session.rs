//! A native job from start to report: open the executor, start the
//! guardian with its release actions, watch its devices, run the driver,
//! leave the job resumable, report. A front end converts its flags into a
//! [`NativeConfig`] and a [`SessionConfig`] and prints the [`NativeOutcome`].

use super::control::Control;
use super::{NativeConfig, NativeExecutor, NativeReport, NativeTarget};
use crate::combine;
use crate::driver::{DriveObserver, DriveReport, Driver, DriverConfig};
use crate::error::{Error, Result};
use crate::monitor::cgroup_bios::CommandIo;
use crate::monitor::{Monitor, MonitorConfig, MonitorStats, OwnIoSource, SharedStats, StatSource};
use crate::progress::{Progress, ProgressProbe, Publishing};
use crate::run::guardian::{Guardian, GuardianSpec};
use crate::run::{FreezerKind, GuardianCommand};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Which counters the monitor watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watch {
    /// Every member device of the target.
    Auto,
    /// Nothing: the device is taken as always idle.
    None,
    /// A device name (`sda`) or a stat-format file (an emulated disk's).
    Spec(String),
}

impl Watch {
    /// `auto`, `none`, or a device or file.
    pub fn parse(text: &str) -> Watch {
        match text {
            "auto" => Watch::Auto,
            "none" => Watch::None,
            s => Watch::Spec(s.to_string()),
        }
    }
}

/// Settings of a session besides the executor's.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The policy, `NAME[:k=v,…]`.
    pub policy: String,
    /// The driver's settings (request size, initial BG service, seed).
    pub driver: DriverConfig,
    /// What the monitor watches.
    pub watch: Watch,
    /// Monitor sampling interval, ns.
    pub interval_ns: u64,
    /// The guardian to start (`fallow __guardian`); `None` runs without
    /// one (a `kill -9` then leaves the job as it was: for tests).
    pub guardian: Option<GuardianCommand>,
}

/// What a session did.
#[derive(Debug, Clone)]
pub struct NativeOutcome {
    /// The job's progress and errors.
    pub report: NativeReport,
    /// The driver's counts.
    pub drive: DriveReport,
    /// The monitor's counts and cost.
    pub monitor: MonitorStats,
    /// Things the user should know (no device to watch, a fallback).
    pub warnings: Vec<String>,
}

/// An open native job, ready to run.
pub struct NativeSession {
    exec: Box<dyn NativeExecutor>,
    monitor: Monitor,
    driver: Driver,
    guardian: Option<Guardian>,
    warnings: Vec<String>,
    progress: ProgressProbe,
}

impl std::fmt::Debug for NativeSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeSession")
            .field("devices", &self.exec.devices())
            .field("guardian", &self.guardian)
            .finish_non_exhaustive()
    }
}

impl NativeSession {
    /// Open `target`: the policy first (a bad one fails before anything
    /// is touched), then the executor, the guardian and the monitor.
    pub fn open(
        target: &NativeTarget,
        native: &NativeConfig,
        cfg: &SessionConfig,
        control: Arc<dyn Control>,
    ) -> Result<NativeSession> {
        let driver = Driver::from_spec(&cfg.policy, cfg.driver)?;
        let mut exec = target.open(native, control)?;
        let mut warnings = Vec::new();
        let guardian = match &cfg.guardian {
            Some(g) => {
                let spec = GuardianSpec {
                    kind: FreezerKind::Signal,
                    control: None,
                    cgroups: vec![],
                    release: exec.release_actions(),
                };
                match Guardian::spawn(&g.program, &g.leading_args, &spec) {
                    Ok(g) => Some(g),
                    Err(e) => {
                        let _ = exec.finish();
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        let monitor = match Self::monitor(target, exec.as_ref(), cfg, &mut warnings) {
            Ok(m) => m,
            Err(e) => {
                let _ = exec.finish();
                if let Some(g) = guardian {
                    let _ = g.release();
                }
                return Err(e);
            }
        };
        let progress = ProgressProbe::default();
        if let Ok(r) = exec.report() {
            progress.set(Progress::of_native(&r));
        }
        Ok(NativeSession {
            exec,
            monitor,
            driver,
            guardian,
            warnings,
            progress,
        })
    }

    fn monitor(
        target: &NativeTarget,
        exec: &dyn NativeExecutor,
        cfg: &SessionConfig,
        warnings: &mut Vec<String>,
    ) -> Result<Monitor> {
        let mcfg = MonitorConfig {
            interval_ns: cfg.interval_ns,
        };
        let gate = exec.gate();
        // one device: the job's bios may be told apart by process (one
        // attribution counts the bios of every device it is given, so it
        // is offered only where there is one)
        let bios = exec
            .bio_attribution()
            .filter(|_| gate.ios().len() == 1 && matches!(cfg.watch, Watch::Auto));
        let start = |io: Arc<super::GateIo>| {
            let src = io.source().clone();
            let own: Arc<dyn OwnIoSource> = match &bios {
                Some(b) => Arc::new(CommandIo::with_attribution(b.clone(), Box::new(io))),
                None => io,
            };
            Monitor::start(&src, vec![own], mcfg)
        };
        match &cfg.watch {
            Watch::None => Ok(Monitor::without_device()),
            Watch::Spec(s) => {
                let src = StatSource::parse(s)?;
                start(gate.watch(&src)?)
            }
            Watch::Auto => {
                let ios = gate.ios();
                if ios.is_empty() {
                    warnings.push(format!(
                        "{target}: no block device under it that sysfs knows; running without watching for foreground I/O (--monitor DEV to name one)"
                    ));
                    return Ok(Monitor::without_device());
                }
                let mut ms = ios.into_iter().map(start).collect::<Result<Vec<_>>>()?;
                if ms.len() == 1 {
                    Ok(ms.pop().expect("one monitor"))
                } else {
                    combine::either(ms)
                }
            }
        }
    }

    /// The driver, to attach an observer (metrics) before [`NativeSession::run`].
    pub fn set_observer(&mut self, observer: Box<dyn DriveObserver>) {
        self.driver.set_observer(observer);
    }

    /// The driver itself (the metrics exporter takes it).
    pub fn driver_mut(&mut self) -> &mut Driver {
        &mut self.driver
    }

    /// The monitor's statistics while it runs.
    pub fn shared_stats(&self) -> SharedStats {
        self.monitor.shared_stats()
    }

    /// The job's progress as it runs (read from other threads).
    pub fn progress(&self) -> ProgressProbe {
        self.progress.clone()
    }

    /// The devices watched, by kernel name.
    pub fn devices(&self) -> Vec<String> {
        self.exec.devices()
    }

    /// The job's progress before the run (what `--resume` continues from).
    pub fn report(&mut self) -> Result<NativeReport> {
        self.exec.report()
    }

    /// Run until the job is done or `stop` is raised; the job is then left
    /// as its tool can resume it, temporary settings undone and the
    /// guardian released (or, if that failed, left to do its release).
    pub fn run(mut self, stop: &AtomicBool) -> Result<NativeOutcome> {
        let mut publishing = Publishing {
            inner: self.exec.as_mut(),
            probe: self.progress.clone(),
            // progress is for watching: a status that cannot be read now
            // is read again after the next request
            read: |e| e.report().ok().map(|r| Progress::of_native(&r)),
            last_ns: crate::clock::monotonic_ns(),
        };
        let drive = self.driver.run(&mut self.monitor, &mut publishing, stop);
        let finished = self.exec.finish();
        let mon = self.monitor.stop();
        match (&finished, self.guardian.take()) {
            (Ok(()), Some(g)) => g.release()?,
            (Err(_), Some(g)) => g.hand_over(),
            (_, None) => {}
        }
        let drive = drive?;
        finished?;
        let report = self.exec.report()?;
        self.progress.set(Progress::of_native(&report));
        Ok(NativeOutcome {
            report,
            drive,
            monitor: mon?,
            warnings: self.warnings,
        })
    }
}

/// `Error` for a target whose text names no native kind.
pub fn not_native(text: &str) -> Error {
    Error::invalid(
        "target",
        format!(
            "`{text}` is not a native target ({})",
            super::KINDS
                .iter()
                .map(|k| format!("{}:…", k.prefix))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

/// Progress is the lower module; each session kind converts its own
/// report into it.
impl Progress {
    /// A native job's report as progress.
    pub fn of_native(r: &NativeReport) -> Progress {
        Progress {
            scrubbed_bytes: r.scrubbed_bytes,
            target_bytes: r.target_bytes,
            pass: None,
            run_bytes: r.run_bytes,
            run_elapsed_s: r.run_elapsed_s,
            errors_corrected: r.errors_corrected,
            errors_uncorrectable: r.errors_uncorrectable,
            complete: r.complete,
            ..Progress::default()
        }
        .with_eta()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Outcome;
    use crate::native::control::{Output, RecordedControl, RecordedJob};

    const UUID: &str = "009990be-e7f1-4858-aa27-8edb96551d88";

    fn status(state: &str, data: u64) -> String {
        format!(
            "UUID: {UUID}\nStatus: {state}\n\tdata_bytes_scrubbed: {data}\n\ttree_bytes_scrubbed: 0\n\tcorrected_errors: 0\n\tuncorrectable_errors: 0\n\tlast_physical: {data}\n"
        )
    }

    /// A recorded btrfs whose scrub finishes during its first slice, under
    /// a session watching a stat file named by the user (an emulated disk's).
    #[test]
    fn a_session_runs_a_recorded_scrub_to_its_end_watching_a_named_file() {
        let d = tempfile::tempdir().unwrap();
        let fs = d.path().join(format!("sys/fs/btrfs/{UUID}/devices"));
        std::fs::create_dir_all(&fs).unwrap();
        let stat = d.path().join("emu.stat");
        std::fs::write(&stat, "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        let c = Arc::new(RecordedControl::new(d.path()));
        c.on_run("btrfs --version", [Output::new(0, "btrfs-progs v6.2\n")]);
        c.on_run(
            "btrfs scrub status -R /mnt",
            [
                Output::new(0, &format!("UUID: {UUID}\n\tno stats available\n")),
                Output::new(0, &status("finished", 1 << 20)),
            ],
        );
        c.on_spawn(
            "btrfs scrub start -B /mnt",
            [RecordedJob {
                waits: 3,
                output: Output::new(0, ""),
                until: None,
            }],
        );
        let t = NativeTarget::parse("btrfs:/mnt").unwrap().unwrap();
        let cfg = SessionConfig {
            policy: "aggressive".into(),
            driver: DriverConfig::default(),
            watch: Watch::parse(path_str(&stat)),
            interval_ns: 1_000_000,
            guardian: None,
        };
        let mut s = NativeSession::open(&t, &NativeConfig::default(), &cfg, c.clone()).unwrap();
        // no member device in sysfs: only the named file is watched
        assert!(s.devices().is_empty());
        assert_eq!(s.report().unwrap().scrubbed_bytes, 0);
        let out = s.run(&AtomicBool::new(false)).unwrap();
        assert_eq!(out.drive.outcome, Outcome::Finished);
        assert!(out.report.complete);
        assert_eq!(out.report.scrubbed_bytes, 1 << 20);
        assert_eq!(out.monitor.source, stat.display().to_string());
        assert!(c
            .log()
            .contains(&"spawn btrfs scrub start -B /mnt".to_string()));
        // a bad policy fails before the tool is asked anything
        let c = Arc::new(RecordedControl::new(d.path()));
        let bad = SessionConfig {
            policy: "no-such-policy".into(),
            ..cfg
        };
        assert!(NativeSession::open(&t, &NativeConfig::default(), &bad, c.clone()).is_err());
        assert!(c.log().is_empty());
    }

    fn path_str(p: &std::path::Path) -> &str {
        p.to_str().unwrap()
    }
}
