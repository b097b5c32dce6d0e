//! `fallow scrub btrfs:MOUNT`, `fallow scrub fstrim:MOUNT` (and `fallow
//! trim MOUNT`): a native job driven through its own control
//! (`fallow_live::native`). Settings are the same type, from the same
//! flags, config and tune result, as `fallow scrub DEVICE`'s
//! ([`fallow_live::settings::Settings`]); this file only converts them and
//! prints the session's outcome.

use crate::args::scrub::ScrubArgs;
use crate::error::live_err;
use crate::human::{bytes, count, secs};
use crate::scrub_out::{self, Doc, ProgressLines, Signals};
use crate::BadInput;
use anyhow::{Context, Result};
use fallow_live::native::{
    self, NativeConfig, NativeOutcome, NativeSession, NativeTarget, SessionConfig, SystemControl,
    Watch,
};
use fallow_live::scrub::Resume;
use fallow_live::settings::Settings;
use fallow_live::DriverConfig;
use std::sync::Arc;

/// Request size of a native job when neither flag, config nor tune result
/// gives one: a btrfs slice of ~0.6 s at the assumed 100 MB/s before the
/// rate is measured; one FITRIM range of 1 GiB.
pub const DEFAULT_NATIVE_SIZE: u64 = 64 << 20;

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

/// Run a native target.
pub fn run(a: &ScrubArgs, t: NativeTarget, s: Settings) -> Result<()> {
    refuse_block_flags(a, &t)?;
    let size = s.size.or(s.tuned_size).unwrap_or(DEFAULT_NATIVE_SIZE);
    // the checkpoint, and a budgeted run's learned window beside it
    let (checkpoint_path, window_path) =
        native::state_paths(&t, s.checkpoint.clone(), s.budget.is_some()).map_err(live_err)?;
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
        // the checkpoint is never an input, a device, a directory or a
        // file fallow does not recognise (unless --overwrite)
        outputs: a.out.guard(
            [
                a.config.as_deref(),
                s.tuned_path.as_deref(),
                Some(std::path::Path::new(&s.monitor)),
            ]
            .into_iter()
            .flatten(),
        ),
    };
    let scfg = SessionConfig {
        policy: s.policy.clone(),
        driver: DriverConfig {
            bg_size_bytes: size,
            initial_bg_service: s
                .bg_service
                .unwrap_or(DriverConfig::default().initial_bg_service),
            seed: s.seed,
            budget: s.budget,
        },
        watch: Watch::parse(&s.monitor),
        interval_ns: s.interval_ns,
        guardian: Some(crate::invocation::guardian()?),
    };
    let mut session = NativeSession::open(&t, &ncfg, &scfg, Arc::new(SystemControl::new()))
        .map_err(|e| live_err(s.provenance.rename(e)))
        .with_context(|| format!("{t} (policy {} from {})", s.policy, s.policy_from()))?;

    if let Some(p) = &window_path {
        session.driver_mut().keep_window_in(p).map_err(live_err)?;
    }
    let signals = Signals::install()?;
    if let (Some(b), false) = (session.driver_mut().budget_report(), a.json) {
        eprintln!(
            "{}",
            scrub_out::budget_start_line(&b, s.budget_from().as_deref())
        );
    }
    if !a.json {
        let before = session.report().map_err(live_err)?;
        eprintln!(
            "fallow: {t} ({}) · policy {} ({}) · watching {} · {} so far",
            before.tool,
            s.policy,
            s.policy_from(),
            match session.devices() {
                d if d.is_empty() => "nothing".to_string(),
                d => d.join(", "),
            },
            bytes(before.scrubbed_bytes)
        );
    }
    let stats = session.shared_stats();
    let progress = session.progress();
    let _exporter = scrub_out::metrics(
        &s.metrics(),
        session.driver_mut(),
        stats,
        progress.clone(),
        a.json,
    )?;
    let devices = session.devices();
    let lines = ProgressLines::start(progress, a.json)?;
    let out = session.run(&signals.stop);
    lines.finish();
    let out = out.map_err(live_err)?;
    if a.json {
        scrub_out::print_doc(&Doc {
            report: &out.report,
            devices: Some(&devices),
            policy: &s.policy,
            policy_from: s.policy_from(),
            outcome: out.drive.outcome,
            monitor: &out.monitor,
            monitor_cpu_fraction: out.monitor.cpu_fraction(),
            driver: &out.drive,
            warnings: &out.warnings,
        })?;
    } else {
        for w in &out.warnings {
            eprintln!("fallow: {w}");
        }
        crate::output::print(&summary(&out, &s, a.verbose))?;
    }
    signals.end(
        out.drive.outcome,
        &format!("after {} of progress", bytes(out.report.scrubbed_bytes)),
        &format!("{t} is left resumable: run again with --resume to continue"),
    )
}

fn summary(o: &NativeOutcome, s: &Settings, verbose: bool) -> String {
    use std::fmt::Write as _;
    let r = &o.report;
    let mut out = String::new();
    let _ = writeln!(out, "{} · {}", r.target, r.tool);
    let _ = writeln!(out, "  policy {} ({})", s.policy, s.policy_from());
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
    out.push_str(&scrub_out::budget_lines(&o.drive));
    if verbose {
        let (m, d) = (&o.monitor, &o.drive);
        let _ = writeln!(
            out,
            "  monitor {} ({}): {} samples, CPU {:.2} % of a core; foreground {} busy periods, {} read",
            m.source,
            m.kind_label(),
            count(m.samples),
            m.cpu_fraction() * 100.0,
            count(m.busy_periods),
            bytes(m.fg_read_bytes)
        );
        out.push_str(&scrub_out::driver_line(d));
    }
    out
}
