//! `fallow analyze`: characterise one device's idleness — idle intervals,
//! busy periods, burstiness, hazard rates, periodicity — as a terminal
//! summary, a JSON document (`--json`) or an HTML report (`--html`).

use crate::atomic::OverwriteArg;
use crate::findings::{findings, Finding};
use crate::input::{self, ReadArgs};
use crate::output::{self, Source};
use anyhow::Result;
use clap::Args;
use fallow_core::outpath::OutputKind;
use fallow_core::trace::DeviceSel;
use fallow_core::{characterize, Characterization, CharacterizeOptions, ServiceModel};
use std::path::{Path, PathBuf};

/// Arguments of `fallow analyze`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow analyze trace.csv
      idle intervals, busy periods and utilisation of the busiest device, and what they mean
  fallow analyze hm_0.csv.gz --device hm:0 --html hm.html
      one disk of an MSR file, with the HTML report
  fallow analyze cut.trace --format plain --time-unit ms --json
      a text trace with its units given, as JSON

The JSON document (--json) has stable top-level keys: trace, idle, busy, utilization, idle_cdf,
remaining, concentration, lag_pairs, acf, ar, periodicity, rate. Times are in seconds (keys end in
_s), probabilities and fractions in [0, 1].")]
pub struct AnalyzeArgs {
    /// The trace file; gzip-compressed files are read transparently.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Device to analyse, by its id in the trace (MSR DiskNumber, HP SRT
    /// physical disk, …), as MAJOR,MINOR in a blkparse trace (`8,16`) or,
    /// in an MSR file of several hosts, as HOST:DISK (`hm:0`).
    /// [default: the device with the most requests]
    #[arg(long, short = 'd', value_name = "ID")]
    pub device: Option<DeviceSel>,

    /// Print the full characterisation as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Also write a self-contained HTML report with plots to this file.
    #[arg(long, value_name = "OUT.html", help_heading = crate::atomic::OUTPUT_FILES)]
    pub html: Option<PathBuf>,

    /// Service-time model that turns arrivals into completions through a FCFS
    /// queue, for traces without completion times (replaces recorded ones if
    /// given): `const:5ms` (fixed), `exp:5ms` (exponential with that mean) or
    /// `disk[:rpm=7200,seek=0.6ms..16ms,rate=150MB,capacity=1TB]` (seek by
    /// distance + rotation + transfer; the values shown are the defaults).
    /// Durations take ns, us, ms, s; sizes B, KiB, MiB, KB, MB, GB, TB.
    #[arg(long, value_name = "MODEL")]
    pub service: Option<ServiceModel>,

    /// Seed of the service model's random stream (used with --service only).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,

    #[command(flatten)]
    pub read: ReadArgs,

    #[command(flatten)]
    pub out: OverwriteArg,
}

/// Run `fallow analyze`.
pub fn run(args: AnalyzeArgs) -> Result<()> {
    // a report that would overwrite the trace or a device fails before the work
    if let Some(p) = &args.html {
        let guard = args.out.guard([args.trace.as_path()]);
        crate::atomic::check(&guard, p, OutputKind::HtmlReport, "--html")?;
    }
    let trace = input::read(&args.trace, &args.read)?;
    let selected = input::select_device(trace, args.device.clone())?;
    let opts = CharacterizeOptions {
        service: args.service.clone(),
        seed: args.seed,
        ..CharacterizeOptions::default()
    };
    let spinner = input::spinner("characterising", selected.trace.len());
    let result = characterize(
        &selected.trace,
        selected.devices,
        Some(selected.device),
        &opts,
    );
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let c = result?;
    let f = findings(&c);
    present(&c, &f, args.json, args.html.as_deref(), None, None)
}

/// Print the summary or the JSON, and write the HTML report if asked
/// (with the demo's `decision` first when there is one).
pub fn present(
    c: &Characterization,
    f: &[Finding],
    json: bool,
    html: Option<&Path>,
    source: Option<&Source>,
    decision: Option<&crate::report::Decision>,
) -> Result<()> {
    if let Some(path) = html {
        crate::report::write(path, c, f, source, decision)?;
    }
    if json {
        output::print(&output::json_text(c)?)?;
        if let Some(path) = html {
            eprintln!("fallow: wrote the HTML report to {}", path.display());
        }
    } else {
        let mut text = output::summary(c, f, source);
        if let Some(path) = html {
            text.push_str(&format!("\nHTML report: {}\n", path.display()));
        }
        output::print(&text)?;
    }
    Ok(())
}
