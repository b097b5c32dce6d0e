//! `fallow simulate --retune BUDGET` and `--then TRACE2`: a policy whose
//! knob is re-fitted online over a sliding window of the history it has
//! seen ([`OnlineTuner`]), and a second trace played after the first, with
//! figures for each part (Busy Bee §5.3's concatenated traces).

use crate::args::{parse_budget, BgArgs, InputArgs};
use crate::human::{bytes, count, num, pct, secs};
use crate::input;
use crate::output::{self, Style};
use crate::prepare::{describe_device, file_name, prepare_trace, Input};
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::sim::SourcedPart;
use fallow_core::trace::DeviceSel;
use fallow_core::trace::Trace;
use fallow_core::tune::online::{OnlineConfig, Refit, Report, Runner, DEFAULT_WINDOW};
use fallow_core::tune::Budget;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The online re-tuning and trace-concatenation flags of `simulate`.
#[derive(Debug, Args)]
pub struct RetuneArgs {
    /// Re-tune the policy's knob online for this FG budget (a mean added
    /// delay such as `1ms`, or a slowdown such as `5%`): the knob (wait,
    /// T, …; leave it out of --policy) is re-fitted every --every idle
    /// intervals on the last --window ones, from the history the policy is
    /// shown; it starts at its most conservative value.
    #[arg(long, value_name = "BUDGET", value_parser = parse_budget)]
    pub retune: Option<Budget>,

    /// Idle intervals in the re-tuning window.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_WINDOW, requires = "retune")]
    pub window: usize,

    /// Idle intervals between refits. [default: a quarter of --window]
    #[arg(long, value_name = "N", requires = "retune")]
    pub every: Option<usize>,

    /// A second trace played after TRACE (the same --format, --service and
    /// read flags; its busiest device unless --then-device), starting --gap
    /// after TRACE ends; figures are reported for each part.
    #[arg(
        long,
        value_name = "TRACE2",
        requires = "trace",
        conflicts_with = "workload"
    )]
    pub then: Option<PathBuf>,

    /// Device of the --then trace, by its id there.
    #[arg(long, value_name = "ID", requires = "then")]
    pub then_device: Option<DeviceSel>,

    /// Idle time between the end of TRACE and the first request of the
    /// --then trace: ns, us, ms, s; a bare number is seconds. [default: 1s]
    #[arg(long, value_name = "DURATION", value_parser = parse_gap, requires = "then")]
    pub gap: Option<u64>,
}

fn parse_gap(s: &str) -> Result<u64, String> {
    match fallow_core::units::parse_duration_ns(s) {
        Ok(0) => Err("must be positive, so the two traces stay apart".into()),
        Ok(ns) => Ok(ns),
        Err(e) => Err(e.to_string()),
    }
}

/// The policy a run uses: `spec`, wrapped in the online tuner with
/// `--retune` (errors name the flags).
pub fn runner(spec: &str, args: &RetuneArgs, bg: &BgArgs, seed: u64) -> Result<Runner> {
    let retune = args.retune.map(|budget| {
        OnlineConfig::for_run(budget, Some(args.window), args.every, &bg.config(seed))
    });
    let flags = match retune {
        Some(_) => format!("--policy {spec} --retune"),
        None => format!("--policy {spec}"),
    };
    Runner::new(spec, retune).with_context(|| flags)
}

/// TRACE then TRACE2 as one input, and the number of FG requests of TRACE.
pub fn prepare_then(
    a: &InputArgs,
    then: &Path,
    then_device: Option<DeviceSel>,
    gap_ns: u64,
) -> Result<(Input, usize)> {
    let first_path = a.trace.as_ref().expect("clap: --then requires TRACE");
    let first = input::select_device(input::read(first_path, &a.read)?, a.device.clone())?;
    let second = input::select_device(input::read(then, &a.read)?, then_device)?;
    let both = Trace::then(&first.trace, &second.trace, gap_ns)?;
    let input = prepare_trace(
        a,
        &both,
        format!("{} + {}", file_name(first_path), file_name(then)),
        format!(
            "{} then {} {} later",
            describe_device(&first.devices, first.device),
            describe_device(&second.devices, second.device),
            secs(gap_ns as f64 / 1e9)
        ),
        format!("{} + {}", first_path.display(), then.display()),
    )?;
    Ok((input, first.trace.len()))
}

/// What `--retune` and `--then` add to `simulate --json`.
#[derive(Debug, Default, Serialize)]
pub struct Extra<'a> {
    /// The re-tuning: settings and the knob's trajectory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retune: Option<Report>,
    /// Figures of each part of a `--then` run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<SourcedPart<'a>>>,
}

/// The sources of the two parts of a `--then` run.
pub fn part_sources(a: &InputArgs, then: &Path) -> [String; 2] {
    let first = a.trace.as_ref().expect("clap: --then requires TRACE");
    [first.display().to_string(), then.display().to_string()]
}

/// Terminal lines on the re-tuning and the parts.
pub fn summary(retune: Option<&Report>, parts: Option<&[SourcedPart<'_>]>) -> String {
    let st = Style::for_stdout();
    let mut s = String::new();
    if let Some(r) = retune {
        let fitted: Vec<&Refit> = r.history.iter().filter(|p| p.fit.is_some()).collect();
        let early = fitted
            .iter()
            .filter(|p| p.fit.as_ref().is_some_and(|f| f.early))
            .count();
        let _ = writeln!(
            s,
            "\n{}",
            st.bold(&format!(
                "Re-tuned `{}` online for {} (window {} idle intervals, refit every {})",
                r.knob, r.budget, r.window, r.every
            ))
        );
        let start = r.history.first().map_or("-", |p| p.knob.as_str());
        let _ = writeln!(
            s,
            "  {} refits ({} called early by a change), starting at {start}, ending at {}",
            count(fitted.len() as u64),
            count(early as u64),
            r.final_spec
        );
        // a few points of the trajectory, evenly spread
        let shown = 8.min(fitted.len());
        if shown > 0 {
            let line: Vec<String> = (0..shown)
                .map(|k| {
                    let p = fitted[k * (fitted.len() - 1) / (shown - 1).max(1)];
                    format!("{} at {}", p.knob, secs(p.time_s))
                })
                .collect();
            for l in output::wrap(&line.join(", "), 94) {
                let _ = writeln!(s, "  {}", st.dim(&l));
            }
        }
    }
    if let Some(parts) = parts {
        let _ = writeln!(
            s,
            "\n{}",
            st.bold("Parts                     requests   BG throughput   added delay    slowdown   collisions")
        );
        for p in parts {
            let name = file_name(Path::new(&p.source));
            let f = p.part;
            let _ = writeln!(
                s,
                "  {:<22}{:>10}   {:>13}   {:>11}   {:>9}   {:>10}",
                truncate(&name, 22),
                count(f.requests),
                format!("{} MB/s", num(f.bg_throughput_bytes_per_s / 1e6)),
                secs(f.mean_added_delay_s),
                pct(f.slowdown),
                count(f.collisions)
            );
        }
        let _ = writeln!(
            s,
            "  {}",
            st.dim(&format!(
                "each over its own span; the gap belongs to the second ({} of BG work in all)",
                bytes(parts.iter().map(|p| p.part.bg_bytes).sum())
            ))
        );
    }
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let head: String = s.chars().take(n - 1).collect();
        head + "…"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--gap`'s help states the library's default, which the run uses.
    #[test]
    fn the_gap_help_states_the_default() {
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            retune: RetuneArgs,
            #[arg(long)]
            trace: Option<String>,
            #[arg(long)]
            workload: Option<String>,
        }
        let cmd = Cli::command();
        let help = cmd
            .get_arguments()
            .find(|a| a.get_id() == "gap")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap();
        let stated = help
            .split("[default: ")
            .nth(1)
            .unwrap()
            .trim_end_matches(']');
        assert_eq!(parse_gap(stated), Ok(fallow_core::trace::DEFAULT_GAP_NS));
    }
}
