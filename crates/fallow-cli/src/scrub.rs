//! `fallow scrub TARGET`: verify a block device or file read-only in the
//! idle time a policy picks, with a checkpoint that `--resume` continues
//! after a crash, `kill -9` or reboot (see docs/live.md).
//!
//! Settings come from flags, then a TOML config (`--config`: `[live]`,
//! `[scrub]` and `[metrics]` tables), then a `fallow tune --json` result
//! (`--tuned`: its best policy and request size), then the defaults, by
//! [`Settings::resolve`] (fallow-live); the session is fallow-live's
//! [`ScrubSession`]. With `--resume`, order, regions and request size
//! default to the checkpoint's. This file parses flags and prints.

use crate::error::live_err;
use crate::human::{bytes, count, num, secs};
use crate::scrub_out::{self, ProgressLines, Signals};
use anyhow::Result;
use fallow_live::scrub::{Resume, ScrubEvent, ScrubPlan, ScrubSession, VerifyMode};
use fallow_live::settings::{Command, Flags, OrderChoice, Settings};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

pub use crate::args::scrub::{OrderArg, ScrubArgs, VerifyCmd};

/// The flags as fallow-live's [`Flags`]; [`Settings::resolve`] does the rest.
fn settings(a: &ScrubArgs) -> Result<Settings> {
    let flags = Flags {
        config: a.config.clone(),
        policy: a.policy.clone(),
        tuned: a.tuned.clone(),
        budget: a.budget.clone(),
        interval_ns: a.interval,
        seed: a.seed,
        metrics: a.metrics.clone(),
        monitor: a.monitor.clone(),
        size: a.size,
        order: a.order.map(|o| match o {
            OrderArg::Sequential => OrderChoice::Sequential,
            OrderArg::Staggered => OrderChoice::Staggered,
        }),
        regions: a.regions,
        max_rate: a.max_rate.clone(),
        windows: a.windows.clone(),
        max_bytes: a.max_bytes,
        checkpoint: a.checkpoint.clone(),
        checkpoint_interval_ns: a.checkpoint_interval,
        log: a.log.clone(),
        retries: a.retries,
        verify: a.verify_cmd.map(|v| match v {
            VerifyCmd::Off => VerifyMode::Off,
            VerifyCmd::Auto => VerifyMode::Auto,
            VerifyCmd::Required => VerifyMode::Required,
        }),
        buffered: a.buffered,
        ..Flags::default()
    };
    Settings::resolve(Command::Scrub, &flags).map_err(live_err)
}

/// Run `fallow scrub`.
pub fn run(args: ScrubArgs) -> Result<()> {
    let s = settings(&args)?;
    // btrfs:MOUNT, fstrim:MOUNT: the tool's own control (crate::native_scrub)
    if let Some(t) = fallow_live::native::NativeTarget::parse(&args.target.to_string_lossy())
        .map_err(live_err)?
    {
        return crate::native_scrub::run(&args, t, s);
    }
    let resume = if args.resume {
        Resume::Yes
    } else if args.restart {
        Resume::Restart
    } else {
        Resume::No
    };
    // the target is added by the scrubber; the tune result and a monitor
    // stat file by the plan
    let plan = ScrubPlan::from_settings(
        &s,
        args.target.clone(),
        resume,
        args.out.guard(args.config.as_deref()),
    );
    let mut session = ScrubSession::open(&plan).map_err(|e| live_err(s.provenance.rename(e)))?;
    let warnings = session.warnings().to_vec();
    if !args.json {
        for w in &warnings {
            eprintln!("fallow: {w}");
        }
    }
    let signals = Signals::install()?;

    let (path, size_bytes) = (session.target_path().to_path_buf(), session.target_bytes());
    let checkpoint_path = session.checkpoint_path();
    let resumed = session.resumed_from_bytes();
    if !args.json && resumed > 0 {
        eprintln!(
            "fallow: resuming {} at {} of {} ({})",
            path.display(),
            bytes(resumed),
            bytes(size_bytes),
            checkpoint_path.display()
        );
    }
    let bar = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(size_bytes);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{wide_bar}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message(format!("scrubbing {}", path.display()));
        bar.set_position(resumed);
        bar.reset_eta();
        bar
    });
    let bar2 = bar.clone();
    let quiet = args.json;
    session.on_event(move |e| match e {
        ScrubEvent::Progress { scrubbed_bytes, .. } => {
            if let Some(b) = &bar2 {
                b.set_position(*scrubbed_bytes);
            }
        }
        ScrubEvent::Bad(r) => {
            let line = format!(
                "fallow: unreadable: bytes {}–{} ({})",
                r.first_byte, r.last_byte, r.error
            );
            match &bar2 {
                Some(b) => b.println(line),
                None if !quiet => eprintln!("{line}"),
                None => {}
            }
        }
        ScrubEvent::WindowClosed { opens_in_s } => {
            let line = format!(
                "fallow: outside the time window; reading resumes in {}",
                secs(f64::from(*opens_in_s))
            );
            match &bar2 {
                Some(b) => b.set_message(line),
                None if !quiet => eprintln!("{line}"),
                None => {}
            }
        }
    });

    if let (Some(b), false) = (session.driver_mut().budget_report(), args.json) {
        eprintln!(
            "{}",
            scrub_out::budget_start_line(&b, s.budget_from().as_deref())
        );
    }
    let stats = session.shared_stats();
    let progress = session.progress();
    let _exporter = scrub_out::metrics(
        &s.metrics(),
        session.driver_mut(),
        stats,
        progress.clone(),
        args.json,
    )?;
    let lines = ProgressLines::start(progress, args.json)?;
    let out = session.run(&signals.stop);
    lines.finish();
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let out = out.map_err(live_err)?;
    let (report, mon, drive) = (&out.report, &out.monitor, &out.drive);

    if args.json {
        scrub_out::print_doc(&out.doc(&s.policy, s.policy_from(), &warnings))?;
    } else {
        crate::output::print(&summary(report, &s, mon, drive, args.verbose))?;
    }
    signals.end(
        drive.outcome,
        &format!(
            "at {} of {}",
            bytes(report.scrubbed_bytes),
            bytes(report.target_bytes)
        ),
        &format!(
            "the checkpoint {} is saved: run again with --resume to continue",
            checkpoint_path.display()
        ),
    )
}

fn summary(
    r: &fallow_live::ScrubReport,
    s: &Settings,
    mon: &fallow_live::MonitorStats,
    d: &fallow_live::DriveReport,
    verbose: bool,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let how = match (r.method.as_str(), r.direct_io) {
        ("scsi-verify", _) => "SCSI VERIFY",
        (_, true) => "O_DIRECT reads",
        _ => "buffered reads",
    };
    let order = match r.regions {
        Some(n) => format!("staggered over {n} regions"),
        None => "sequential".into(),
    };
    let _ = writeln!(
        out,
        "{} · {} · {} · {how}, {} requests, {order}",
        r.target,
        if r.target_kind == "block" {
            "block device"
        } else {
            "file"
        },
        bytes(r.target_bytes),
        bytes(r.request_size_bytes)
    );
    let _ = writeln!(
        out,
        "  policy {} ({}) · monitor {}",
        s.policy,
        s.policy_from(),
        mon.source
    );
    let rate = if r.run_elapsed_s > 0.0 {
        format!(
            " ({} MB/s)",
            num(r.run_bytes as f64 / r.run_elapsed_s / 1e6)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  scrubbed {} of {} · this run {} in {}{rate} · {} requests{}",
        bytes(r.scrubbed_bytes),
        bytes(r.target_bytes),
        bytes(r.run_bytes),
        secs(r.run_elapsed_s),
        count(r.run_requests),
        if r.complete {
            format!(" · pass {} complete", r.pass)
        } else {
            " · not complete".into()
        }
    );
    if r.bad_ranges.is_empty() {
        let _ = writeln!(out, "  no unreadable sectors");
    } else {
        let n: u64 = r.bad_ranges.iter().map(|b| b[1] - b[0] + 1).sum();
        let _ = writeln!(
            out,
            "  UNREADABLE: {} in {} ranges:",
            bytes(n),
            r.bad_ranges.len()
        );
        for b in r.bad_ranges.iter().take(20) {
            let _ = writeln!(out, "    bytes {}–{}", b[0], b[1]);
        }
        if r.bad_ranges.len() > 20 {
            let _ = writeln!(out, "    … (--json lists all)");
        }
    }
    let _ = writeln!(out, "  checkpoint {}", r.checkpoint);
    out.push_str(&scrub_out::budget_lines(d));
    if verbose {
        let _ = writeln!(
            out,
            "  monitor ({}): {} samples at {}, CPU {} ({:.2} % of a core, {} per sample), {} late",
            mon.kind_label(),
            count(mon.samples),
            secs(mon.interval_s),
            secs(mon.cpu_s),
            mon.cpu_fraction() * 100.0,
            secs(mon.cpu_per_sample_s()),
            count(mon.late_samples)
        );
        let _ = writeln!(
            out,
            "  foreground: {} busy periods, {} requests, {} read, {} written",
            count(mon.busy_periods),
            count(mon.fg_requests),
            bytes(mon.fg_read_bytes),
            bytes(mon.fg_write_bytes)
        );
        out.push_str(&scrub_out::driver_line(d));
    }
    out
}

/// A year, s: a scrub that cannot finish within it is a setting mistake.
#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped example must stay readable as it documents the keys.
    #[test]
    fn the_example_config_reads() {
        let ex = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/examples/fallow.toml"
        );
        let cfg = fallow_live::settings::read_scrub_config(std::path::Path::new(ex)).unwrap();
        assert_eq!(cfg.own.order, Some(OrderChoice::Staggered));
        assert_eq!(cfg.metrics.addr.as_deref(), Some("127.0.0.1:9464"));
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            scrub: ScrubArgs,
        }
        let cli = <Cli as clap::Parser>::parse_from(["scrub", "/dev/null", "--config", ex]);
        let s = settings(&cli.scrub).unwrap();
        assert_eq!(
            (s.policy.as_str(), s.policy_from()),
            ("fixed-wait:t=100ms", "config")
        );
        assert_eq!(s.windows.0.len(), 1);
    }
}
