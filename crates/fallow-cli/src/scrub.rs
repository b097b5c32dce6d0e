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
use crate::scrub_out::{self, Doc, ProgressLines, Signals};
use anyhow::Result;
use fallow_live::scrub::{Resume, ScrubEvent, ScrubPlan, ScrubSession, VerifyMode};
use fallow_live::settings::{Command, Flags, OrderChoice, Settings};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;

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
    let plan = ScrubPlan {
        target: args.target.clone(),
        policy: s.policy.clone(),
        policy_from: s.policy_from.to_string(),
        size: s.size,
        tuned_size: s.tuned_size,
        order: s.order,
        bg_service: s.bg_service,
        seed: s.seed,
        budget: s.budget,
        max_rate: s.max_rate,
        windows: s.windows.clone(),
        max_bytes: s.max_bytes,
        checkpoint: s.checkpoint.clone(),
        checkpoint_interval_ns: s.checkpoint_interval_ns,
        log: s.log.clone(),
        retries: s.retries,
        verify: s.verify,
        buffered: s.buffered,
        monitor: s.monitor.clone(),
        interval_ns: s.interval_ns,
        resume: if args.resume {
            Resume::Yes
        } else if args.restart {
            Resume::Restart
        } else {
            Resume::No
        },
        // the target is added by the scrubber
        outputs: args.out.guard(
            [
                args.config.as_deref(),
                s.tuned_path.as_deref(),
                Some(Path::new(&s.monitor)),
            ]
            .into_iter()
            .flatten(),
        ),
    };
    let mut session = ScrubSession::open(&plan).map_err(|e| live_err(s.sources.rename(e)))?;
    let mut warnings = session.warnings().to_vec();
    let to_read = session
        .target_bytes()
        .saturating_sub(session.resumed_from_bytes())
        .min(s.max_bytes.unwrap_or(u64::MAX));
    warnings.extend(cannot_finish_within_a_year(
        to_read, &s.policy, s.max_rate, &s.windows,
    ));
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
            scrub_out::budget_start_line(&b, s.budget_from.as_deref())
        );
    }
    let stats = session.shared_stats();
    let progress = session.progress();
    let _exporter = scrub_out::metrics(
        &s.metrics,
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
        Doc {
            report,
            devices: None,
            policy: &s.policy,
            policy_from: s.policy_from,
            outcome: drive.outcome,
            monitor: mon,
            monitor_cpu_fraction: mon.cpu_fraction(),
            driver: drive,
            warnings: &warnings,
        }
        .print()?;
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
        s.policy, s.policy_from, mon.source
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
const YEAR_S: f64 = 365.0 * 86_400.0;

/// A warning with the least time a scrub of `to_read` bytes can take when
/// that is over a year: the fixed wait of `fixed-wait:t=…` before its first
/// request, the rate ceiling, and the share of the day its windows are
/// open (`--window 23:59-00:00` is one minute a day). A lower bound: idle
/// time and the device's speed only lengthen it.
fn cannot_finish_within_a_year(
    to_read: u64,
    policy: &str,
    max_rate: Option<f64>,
    windows: &fallow_live::scrub_pace::Windows,
) -> Option<String> {
    if to_read == 0 {
        return None;
    }
    let open_min: u32 = windows
        .0
        .iter()
        .map(|w| (w.end_min + 1440 - w.start_min) % 1440)
        .sum();
    let open = if windows.0.is_empty() {
        1.0
    } else {
        (f64::from(open_min) / 1440.0).min(1.0)
    };
    let mut why = Vec::new();
    let mut least_s = 0.0f64;
    if let Some(rate) = max_rate.filter(|&r| r > 0.0) {
        let t = to_read as f64 / rate / open;
        least_s = least_s.max(t);
        why.push(format!(
            "{} at --max-rate {}/s",
            bytes(to_read),
            bytes(rate as u64)
        ));
    } else if open < 1.0 {
        why.push(format!("--window open {} a day", secs(open * 86_400.0)));
    }
    if let Ok((name, mut params)) = fallow_core::policy::Params::parse(policy) {
        let fixed = fallow_core::policy::entry(&name).is_ok_and(|e| e.name == "fixed-wait");
        if let Some(t) = params.take("t").filter(|_| fixed) {
            if let Ok(ns) = fallow_core::units::parse_duration_ns(&t) {
                let t_s = ns as f64 / 1e9;
                if t_s > least_s {
                    least_s = t_s;
                    why.push(format!("the first request waits {t} of idleness"));
                }
            }
        }
    }
    if open < 1.0 {
        why.push(format!("reading only {:.3} % of the day", open * 100.0));
    }
    (least_s > YEAR_S).then(|| {
        format!(
            "at these settings the scrub cannot finish within a year: it takes at least {:.3e} s (about {} years; {})",
            least_s,
            num(least_s / YEAR_S),
            why.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_cannot_finish_within_a_year_are_named() {
        use fallow_live::scrub_pace::Windows;
        let none = Windows::default();
        let w = |s: &str| Windows(vec![s.parse().unwrap()]);
        let tib = 1u64 << 40;
        // 1 TiB at 1 B/s: 1.1e12 s, about 34,865 years
        let e = cannot_finish_within_a_year(tib, "fixed-wait:t=100ms", Some(1.0), &none).unwrap();
        assert!(e.contains("1.100e12 s"), "{e}");
        // one minute a day at 100 KB/s: 1 TiB in 1.1e7 s of open time, 1440 times that
        let e =
            cannot_finish_within_a_year(tib, "fixed-wait:t=100ms", Some(1e5), &w("23:59-00:00"))
                .unwrap();
        assert!(
            e.contains(&format!("{:.3e} s", tib as f64 / 1e5 * 1440.0)),
            "{e}"
        );
        // a wait of 1e19 ns before the first request: 317 years
        let e = cannot_finish_within_a_year(4096, "fixed-wait:t=1e19ns", None, &none).unwrap();
        assert!(
            e.contains("1.000e10 s") && e.contains("waits 1e19ns"),
            "{e}"
        );
        // a day's scrub is no warning
        assert_eq!(
            cannot_finish_within_a_year(tib, "fixed-wait:t=100ms", Some(1e8), &w("01:00-06:00")),
            None
        );
        assert_eq!(
            cannot_finish_within_a_year(tib, "fixed-wait:t=100ms", None, &none),
            None
        );
    }

    /// The shipped example must stay readable as it documents the keys.
    #[test]
    fn the_example_config_reads() {
        let ex = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/examples/fallow.toml"
        );
        let cfg = fallow_live::settings::read_scrub_config(Path::new(ex)).unwrap();
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
            (s.policy.as_str(), s.policy_from),
            ("fixed-wait:t=100ms", "config")
        );
        assert_eq!(s.windows.0.len(), 1);
    }
}
