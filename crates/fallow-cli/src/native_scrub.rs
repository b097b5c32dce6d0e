//! `fallow scrub btrfs:MOUNT`, `fallow scrub fstrim:MOUNT` (and `fallow
//! trim MOUNT`): a native job driven through its own control
//! (`fallow_live::native`). Settings come from the same flags, config and
//! tune result as `fallow scrub DEVICE` ([`crate::scrub`]); this file only
//! converts them and prints the session's outcome.

use crate::human::{bytes, count, secs};
use crate::live_config::MetricsAddr;
use crate::scrub::{live_err, ScrubArgs};
use crate::BadInput;
use anyhow::{Context, Result};
use fallow_core::sim::BgService;
use fallow_live::native::{
    self, NativeConfig, NativeOutcome, NativeSession, NativeTarget, SessionConfig, SystemControl,
    Watch,
};
use fallow_live::run::GuardianCommand;
use fallow_live::scrub::{Resume, Windows};
use fallow_live::DriverConfig;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Request size of a native job when neither flag, config nor tune result
/// gives one: a btrfs slice of ~0.6 s at the assumed 100 MB/s before the
/// rate is measured; one FITRIM range of 1 GiB.
pub const DEFAULT_NATIVE_SIZE: u64 = 64 << 20;

/// The settings of `fallow scrub` a native target uses.
#[derive(Debug)]
pub struct Shared {
    pub policy: String,
    pub policy_from: &'static str,
    pub size: Option<u64>,
    pub tuned_size: Option<u64>,
    pub bg_service: Option<BgService>,
    pub max_rate: Option<f64>,
    pub windows: Windows,
    pub max_bytes: Option<u64>,
    pub checkpoint: Option<PathBuf>,
    pub monitor: String,
    pub interval_ns: u64,
    pub seed: u64,
    pub metrics: Option<MetricsAddr>,
}

/// Flags of the block scrubber that mean nothing for a native job.
fn refuse_block_flags(a: &ScrubArgs, t: &NativeTarget) -> Result<()> {
    let given = [
        ("--order", a.order.is_some()),
        ("--regions", a.regions.is_some()),
        ("--verify-cmd", a.verify_cmd.is_some()),
        ("--buffered", a.buffered),
        ("--log", a.log.is_some()),
        ("--retries", a.retries.is_some()),
        ("--checkpoint-interval", a.checkpoint_interval.is_some()),
        (
            "--slice",
            a.slice.is_some() && !["btrfs", "zfs"].contains(&t.prefix.as_str()),
        ),
        ("--minlen", a.minlen.is_some() && t.prefix != "fstrim"),
        ("--action", a.action.is_some() && t.prefix != "md"),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
        return Err(BadInput(format!("{flag} does not apply to {}: targets", t.prefix)).into());
    }
    Ok(())
}

/// The JSON report: the block scrubber's keys where they apply, plus the
/// native tool's.
#[derive(Debug, Serialize)]
struct Doc<'a> {
    #[serde(flatten)]
    report: &'a native::NativeReport,
    devices: &'a [String],
    policy: &'a str,
    policy_from: &'a str,
    outcome: fallow_live::Outcome,
    monitor: &'a fallow_live::MonitorStats,
    monitor_cpu_fraction: f64,
    driver: &'a fallow_live::DriveReport,
    warnings: &'a [String],
}

/// Run a native target.
pub fn run(a: &ScrubArgs, t: NativeTarget, s: Shared) -> Result<()> {
    refuse_block_flags(a, &t)?;
    let size = s.size.or(s.tuned_size).unwrap_or(DEFAULT_NATIVE_SIZE);
    let checkpoint_path = match s.checkpoint.clone() {
        Some(p) => Some(p),
        // kinds whose tool keeps no position of its own
        None if t.prefix == "fstrim" || t.prefix == "md" => {
            let p = native::default_checkpoint(&t).map_err(live_err)?;
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    BadInput(format!(
                        "cannot create {} for the checkpoint ({e}); give --checkpoint FILE",
                        dir.display()
                    ))
                })?;
            }
            Some(p)
        }
        None => None,
    };
    let mut options = std::collections::BTreeMap::new();
    if let Some(m) = a.minlen {
        options.insert("minlen".to_string(), m.to_string());
    }
    if let Some(act) = &a.action {
        options.insert("action".to_string(), act.clone());
    }
    let ncfg = NativeConfig {
        slice_ns: a.slice,
        max_rate_bytes_per_s: s.max_rate,
        windows: s.windows.clone(),
        checkpoint_path,
        resume: if a.resume {
            Resume::Yes
        } else if a.restart {
            Resume::Restart
        } else {
            Resume::No
        },
        max_bytes: s.max_bytes,
        options,
    };
    let exe =
        std::env::current_exe().context("cannot find the fallow executable for the guardian")?;
    let scfg = SessionConfig {
        policy: s.policy.clone(),
        driver: DriverConfig {
            bg_size_bytes: size,
            initial_bg_service: s
                .bg_service
                .unwrap_or(DriverConfig::default().initial_bg_service),
            seed: s.seed,
        },
        watch: Watch::parse(&s.monitor),
        interval_ns: s.interval_ns,
        guardian: Some(GuardianCommand {
            program: exe,
            leading_args: vec!["__guardian".into()],
        }),
    };
    let mut session = NativeSession::open(&t, &ncfg, &scfg, Arc::new(SystemControl::new()))
        .map_err(live_err)
        .with_context(|| format!("{t} (policy {} from {})", s.policy, s.policy_from))?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // a second signal ends the process at once (the guardian then
        // resumes the job); the first stops it cleanly, resumable
        signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
            .context("installing a signal handler")?;
    }
    if !a.json {
        let before = session.report().map_err(live_err)?;
        eprintln!(
            "fallow: {t} ({}) · policy {} ({}) · watching {} · {} so far",
            before.tool,
            s.policy,
            s.policy_from,
            match session.devices() {
                d if d.is_empty() => "nothing".to_string(),
                d => d.join(", "),
            },
            bytes(before.scrubbed_bytes)
        );
    }
    let _exporter = match &s.metrics {
        Some(at) => {
            let stats = session.shared_stats();
            let e = crate::metrics_export::Exporter::start(at, session.driver_mut(), stats)?;
            if let (Some(addr), false) = (e.addr(), a.json) {
                eprintln!("fallow: metrics at http://{addr}/metrics");
            }
            Some(e)
        }
        None => None,
    };
    let devices = session.devices();
    let out = session.run(&stop).map_err(live_err)?;
    if a.json {
        let doc = Doc {
            report: &out.report,
            devices: &devices,
            policy: &s.policy,
            policy_from: s.policy_from,
            outcome: out.drive.outcome,
            monitor: &out.monitor,
            monitor_cpu_fraction: out.monitor.cpu_fraction(),
            driver: &out.drive,
            warnings: &out.warnings,
        };
        crate::output::print(&crate::output::json_text(&doc)?)?;
    } else {
        for w in &out.warnings {
            eprintln!("fallow: {w}");
        }
        crate::output::print(&summary(&out, &s, a.verbose))?;
    }
    if out.drive.outcome == fallow_live::Outcome::Stopped {
        return Err(anyhow::anyhow!(
            "interrupted after {} of progress; {t} is left resumable: run again with --resume to continue",
            bytes(out.report.scrubbed_bytes)
        ));
    }
    Ok(())
}

fn summary(o: &NativeOutcome, s: &Shared, verbose: bool) -> String {
    use std::fmt::Write as _;
    let r = &o.report;
    let mut out = String::new();
    let _ = writeln!(out, "{} · {}", r.target, r.tool);
    let _ = writeln!(out, "  policy {} ({})", s.policy, s.policy_from);
    let _ = writeln!(
        out,
        "  {} {} in total · this run {} in {} active of {} wall · {} requests · {}",
        if r.kind == "fstrim" {
            "covered"
        } else {
            "scrubbed"
        },
        bytes(r.scrubbed_bytes),
        bytes(r.run_bytes),
        secs(r.run_active_s),
        secs(r.run_elapsed_s),
        count(r.run_requests),
        if r.complete {
            "complete"
        } else {
            "not complete"
        }
    );
    if let (Some(c), Some(u)) = (r.errors_corrected, r.errors_uncorrectable) {
        if c == 0 && u == 0 {
            let _ = writeln!(out, "  no errors");
        } else {
            let _ = writeln!(out, "  ERRORS: {c} corrected, {u} uncorrectable");
        }
    }
    if let Some(t) = r.native.get("trimmed_bytes") {
        let _ = writeln!(out, "  trimmed {} (as the file system reports)", bytes(*t));
    }
    if let Some(l) = &r.rate_limit {
        let _ = writeln!(out, "  rate ceiling: {l}");
    }
    if let Some(c) = &r.checkpoint {
        let _ = writeln!(out, "  progress kept in {c}");
    }
    if verbose {
        let (m, d) = (&o.monitor, &o.drive);
        let _ = writeln!(
            out,
            "  monitor {}: {} samples, CPU {:.2} % of a core; foreground {} busy periods, {} read",
            m.source,
            count(m.samples),
            m.cpu_fraction() * 100.0,
            count(m.busy_periods),
            bytes(m.fg_read_bytes)
        );
        let _ = writeln!(
            out,
            "  driver: {} idle intervals, {} BG requests (mean {}), {} collisions, throttled {}",
            count(d.idle_intervals),
            count(d.bg_requests),
            secs(d.bg_mean_service_s),
            count(d.collisions),
            secs(d.throttled_s)
        );
    }
    out
}
