//! `fallow analyze`: characterise one device's idleness — idle intervals,
//! busy periods, burstiness, hazard rates, periodicity — as a terminal
//! summary, a JSON document (`--json`) or an HTML report (`--html`). The
//! analysis is one core call ([`fallow_core::analyze::analyze`]); this file
//! parses the flags, calls it and prints.

use crate::atomic::OverwriteArg;
use crate::human;
use crate::input::{self, ReadArgs};
use anyhow::Result;
use clap::Args;
use fallow_core::analyze::{analyze, AnalyzeRequest};
use fallow_core::outpath::OutputKind;
use fallow_core::trace::{DeviceSel, Format, ReadReport};
use fallow_core::{Characterization, CharacterizeOptions, ServiceModel};
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
remaining, concentration, lag_pairs, acf, ar, periodicity, rate, long_gaps (idle intervals far
beyond the rest, a likely timestamp typo; also warned about on stderr with the file's line), findings (the
summary's sentences, each {topic, text}). Times are in seconds (keys end in
_s), probabilities and fractions in [0, 1]. Python's fallow.analyze returns the same document.")]
pub struct AnalyzeArgs {
    /// The trace file; gzip-compressed files are read transparently.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Device to analyse, by its id in the trace (MSR DiskNumber, HP SRT
    /// physical disk, …), as MAJOR,MINOR in a blkparse trace (`8,16`) or,
    /// in an MSR file of several hosts, as HOST:DISK (`hm:0`).
    /// `all` characterises every device in one streaming pass, one row
    /// each (requests, span, utilisation, idle count/mean/CV/p90, busy
    /// mean; docs/analyze.md), with memory bounded by the devices.
    /// [default: the device with the most requests]
    #[arg(long, short = 'd', value_name = "ID")]
    pub device: Option<DeviceSel>,

    /// With `--device all`: print the rows as CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,

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
    #[arg(long, value_name = "N", default_value_t = fallow_core::sim::DEFAULT_SEED)]
    pub seed: u64,

    #[command(flatten)]
    pub read: ReadArgs,

    #[command(flatten)]
    pub out: OverwriteArg,
}

/// Run `fallow analyze`.
pub fn run(args: AnalyzeArgs) -> Result<()> {
    if matches!(&args.device, Some(DeviceSel::Label(all)) if all == "all") {
        return run_fleet(&args);
    }
    if args.csv {
        return Err(crate::error::BadInput(
            "--csv prints the rows of --device all; give --device all, or --json".into(),
        )
        .into());
    }
    // a report that would overwrite the trace or a device fails before the work
    if let Some(p) = &args.html {
        let guard = args.out.guard([args.trace.as_path()]);
        crate::atomic::check(&guard, p, OutputKind::HtmlReport, "--html")?;
    }
    let trace = input::read(&args.trace, &args.read)?;
    if args.device.is_none() {
        input::note_busiest(&trace.devices());
    }
    let request = AnalyzeRequest {
        device: args.device.clone(),
        options: CharacterizeOptions {
            service: args.service.clone(),
            seed: args.seed,
            ..CharacterizeOptions::default()
        },
    };
    let spinner = input::spinner("characterising", trace.len());
    let result = analyze(&trace, &request);
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let a = result?;
    warn_long_gaps(&a.characterization, &args.trace, trace.report());
    crate::output::present(&a, args.json, args.html.as_deref(), None, None)
}

/// `--device all`: every device in one streaming pass.
fn run_fleet(args: &AnalyzeArgs) -> Result<()> {
    use crate::analyze_fleet::{print, FleetOut};
    // checked before the pass, as a one-device report's
    if let Some(p) = &args.html {
        let guard = args.out.guard([args.trace.as_path()]);
        crate::atomic::check(&guard, p, OutputKind::HtmlReport, "--html")?;
    }
    let fleet = fallow_core::fleet::fleet_of(
        &args.trace,
        &args.read.options(),
        args.service.as_ref(),
        args.seed,
    )?;
    if let Some(p) = &args.html {
        crate::atomic::written(p, fallow_report::fleet::write(p, &fleet))?;
        eprintln!("fallow: wrote the HTML fleet page to {}", p.display());
    }
    let how = match (args.json, args.csv) {
        (true, _) => FleetOut::Json,
        (_, true) => FleetOut::Csv,
        _ => FleetOut::Text,
    };
    print(&fleet, how)
}

/// Warn on stderr about idle intervals far beyond the rest (a likely
/// timestamp typo, [`fallow_core::long_gaps`]), naming the line of the file
/// that ends each one where a request is a line.
fn warn_long_gaps(c: &Characterization, path: &Path, report: &ReadReport) {
    for g in &c.long_gaps {
        let at = match record_line(c, path, report, g.request) {
            Some(line) => format!("{}:{line}", path.display()),
            None => format!("request {} of the analysed device", g.request),
        };
        let rest = match g.rest_max_s {
            Some(r) => format!(
                "{:.3e}× the longest of the rest ({})",
                g.idle_s / r,
                human::secs(r)
            ),
            None => "the trace's only idle interval".to_string(),
        };
        eprintln!(
            "fallow: warning: an idle interval of {} ends at {at} ({} after the first \
             arrival): {rest}; a mistyped timestamp? Figures over the trace's span \
             (throughput, utilisation) are dominated by it",
            human::secs(g.idle_s),
            human::secs(g.arrival_s)
        );
    }
}

/// Line number of the `request`-th record (from 1) of a file whose every
/// line that starts with a digit is one request (MSR, SPC, plain), uncompressed,
/// holding one device and read without skipping or reordering a record;
/// `None` otherwise.
fn record_line(
    c: &Characterization,
    path: &Path,
    report: &ReadReport,
    request: u64,
) -> Option<u64> {
    use std::io::BufRead;
    let one_line_each = matches!(report.format, Some(f) if f == Format::Msr || f == Format::Spc || f == Format::Plain);
    if !one_line_each || report.skipped > 0 || report.reordered > 0 || c.trace.devices.len() != 1 {
        return None;
    }
    let mut file = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    let head = file.fill_buf().ok()?;
    if head.starts_with(&[0x1f, 0x8b]) || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return None; // compressed
    }
    let mut seen = 0u64;
    for (i, line) in file.split(b'\n').enumerate() {
        let line = line.ok()?;
        // every record of these formats starts with a number (a time, an
        // ASU); headers, blank lines and comments do not
        let t = line
            .strip_prefix(b"\xef\xbb\xbf")
            .unwrap_or(&line)
            .trim_ascii();
        if !t.first().is_some_and(u8::is_ascii_digit) {
            continue;
        }
        seen += 1;
        if seen == request {
            return Some(i as u64 + 1);
        }
    }
    None
}
