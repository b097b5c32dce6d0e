//! `fallow scrub-plan`: the mean latent error time (MLET) of sequential
//! and staggered scrub orders under bursts of latent sector errors, and
//! the scrub time each costs, over region counts and segment sizes
//! (`fallow_core::scrubplan`; Practical Scrubbing §I, §II, §IV-A). How to
//! choose `fallow scrub --order` and `--regions`.

use crate::human::{bytes, secs};
use crate::output;
use crate::progress::Progress;
use crate::BadInput;
use anyhow::Result;
use clap::Args;
use fallow_core::scrubplan::{Disk, Order, PlanReport, PlanRequest};
use fallow_core::units::{parse_bytes, parse_duration_ns};
use serde::Serialize;
use std::fmt::Write as _;

/// Arguments of `fallow scrub-plan`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow scrub-plan
      Practical Scrubbing's 300 GB 15K rpm disk, 4 MiB bursts, 64 KiB and 1 MiB segments
  fallow scrub-plan --regions 1,32,128,512 --segment 64KiB --burst-span 16MiB --json
  fallow scrub-plan --capacity 4TB --rpm 7200 --full-stroke 15ms --duty 0.05
      a 4 TB 7,200 rpm disk scrubbed 5 % of the time
  fallow scrub-plan --capacity 10GB --regions 16,128,2048 --check 100000
      each figure also by a Monte Carlo of the same model (mean ± standard error)

Model (docs/scrub-plan.md): requests read one segment; a request that starts where the last
ended costs a full revolution (the missed revolution of sequential VERIFYs, Practical Scrubbing
§IV-A), any other a seek a + b·√(distance/capacity) and half a revolution, with a + b the full
stroke and a set so that 128 staggered regions cost what sequential does (Fig. 5b). A burst of
latent errors spans --burst-span bytes at a uniform place and time and is found when the
scrubber first reads a segment it overlaps. The seed gives no burst sizes: the span is yours.

--json prints disk (capacity_bytes, revolution_ns, rate_bytes_per_s, full_stroke_ns, duty),
burst_span_bytes and rows: plan (order, regions, segment_bytes), segments_per_region, pass_s,
throughput_bytes_per_s, mlet_s, mlet_vs_sequential (ratio to sequential at the same segment
size), and with --check, monte_carlo (mlet_s, std_error_s, pass_s). Times are in seconds.")]
pub struct ScrubPlanArgs {
    /// Capacity scrubbed, e.g. 300GB, 4TB.
    #[arg(long, value_name = "SIZE", default_value = "300GB")]
    pub capacity: String,

    /// Region counts of the staggered order, comma-separated.
    #[arg(long, value_name = "N,N,…", default_value = "16,128,1024,8192")]
    pub regions: String,

    /// Segment (request) sizes, comma-separated.
    #[arg(long, value_name = "SIZE,…", default_value = "64KiB,1MiB")]
    pub segment: String,

    /// Span of disk one burst of latent errors covers (512 = an isolated error).
    #[arg(long, value_name = "SIZE", default_value = "4MiB")]
    pub burst_span: String,

    /// Spindle speed, revolutions per minute.
    #[arg(long, value_name = "RPM", default_value_t = 15_000.0)]
    pub rpm: f64,

    /// Media transfer rate, bytes per second (e.g. 100MB).
    #[arg(long, value_name = "SIZE", default_value = "100MB")]
    pub rate: String,

    /// Full-stroke seek time.
    #[arg(long, value_name = "DURATION", default_value = "8ms")]
    pub full_stroke: String,

    /// Fraction of the time spent scrubbing (a rate limit, idle-time only).
    #[arg(long, value_name = "FRACTION", default_value_t = 1.0, value_parser = crate::args::parse_fraction)]
    pub duty: f64,

    /// Also estimate each figure by a Monte Carlo of N bursts (seeded).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=100_000_000))]
    pub check: Option<u64>,

    /// Seed of the Monte Carlo.
    #[arg(long, default_value_t = fallow_core::sim::DEFAULT_SEED)]
    pub seed: u64,

    /// Print the result as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `--json`: the report after the schema version.
#[derive(Debug, Serialize)]
struct Doc<'a> {
    schema_version: u32,
    #[serde(flatten)]
    report: &'a PlanReport,
}

fn size(flag: &str, v: &str) -> Result<u64> {
    parse_bytes(v).map_err(|e| BadInput(format!("--{flag} {v}: {e}")).into())
}

/// A comma-separated list (the count is the library's to check).
fn list<T>(v: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse)
        .collect()
}

/// The request the flags describe.
fn request(args: &ScrubPlanArgs) -> Result<PlanRequest> {
    let full_stroke_ns = parse_duration_ns(&args.full_stroke)
        .map_err(|e| BadInput(format!("--full-stroke {}: {e}", args.full_stroke)))?;
    Ok(PlanRequest {
        disk: Disk {
            capacity_bytes: size("capacity", &args.capacity)?,
            revolution_ns: Disk::revolution_ns_at(args.rpm)?,
            rate_bytes_per_s: size("rate", &args.rate)? as f64,
            full_stroke_ns: full_stroke_ns as f64,
            duty: args.duty,
        },
        span_bytes: size("burst-span", &args.burst_span)?,
        segments: list(&args.segment, |v| size("segment", v))?,
        regions: list(&args.regions, |v| {
            v.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                BadInput(format!("--regions {v}: not a positive whole number")).into()
            })
        })?,
        check: args.check,
        seed: args.seed,
    })
}

/// Run `fallow scrub-plan`.
pub fn run(args: ScrubPlanArgs) -> Result<()> {
    let request = request(&args)?;
    // the Monte Carlo of a plan can take seconds (--check 1000000: ~0.3 s a
    // plan): one step per plan, so the bar moves with each
    let bar = Progress::new(
        "plans",
        "{msg} [{wide_bar}] {pos}/{len} plans {eta}",
        request.plans(),
        args.check.is_some(),
    )?;
    let report = request.run(&mut |done| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    })?;
    if let Some(b) = bar {
        b.finish();
    }
    if args.json {
        let doc = Doc {
            schema_version: fallow_core::JSON_SCHEMA_VERSION,
            report: &report,
        };
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        return output::print(&text);
    }
    output::print(&table(&report, args.rpm, args.check.is_some()))
}

/// The terminal table of a report, and the recommendations under it.
fn table(report: &PlanReport, rpm: f64, check: bool) -> String {
    let PlanReport {
        disk,
        burst_span_bytes: span,
        rows,
        recommended,
    } = report;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Scrub plans for {} at {} rpm, {}/s, {} full stroke, scrubbing {:.0} % of the time;",
        bytes(disk.capacity_bytes),
        rpm,
        bytes(disk.rate_bytes_per_s as u64),
        secs(disk.full_stroke_ns / 1e9),
        disk.duty * 100.0
    );
    let _ = writeln!(
        s,
        "bursts of latent errors spanning {} (MLET: mean time a burst stays undetected).\n",
        bytes(*span)
    );
    let _ = writeln!(
        s,
        "{:<9} {:<11} {:>7} {:>10} {:>11} {:>11} {:>9}{}",
        "segment",
        "order",
        "regions",
        "pass",
        "throughput",
        "MLET",
        "vs seq",
        if check { "  Monte Carlo (± s.e.)" } else { "" }
    );
    for r in rows {
        let e = &r.estimate;
        let order = match e.plan.order {
            Order::Sequential => "sequential",
            Order::Staggered => "staggered",
        };
        let _ = writeln!(
            s,
            "{:<9} {:<11} {:>7} {:>10} {:>9}/s {:>11} {:>8.1}%{}",
            bytes(e.plan.segment_bytes),
            order,
            e.plan.regions,
            secs(e.pass_s),
            bytes(e.throughput_bytes_per_s as u64),
            secs(e.mlet_s),
            (r.mlet_vs_sequential - 1.0) * 100.0,
            r.monte_carlo.map_or(String::new(), |m| format!(
                "  {} ± {}",
                secs(m.mlet_s),
                secs(m.std_error_s)
            ))
        );
    }
    let _ = writeln!(s);
    for r in recommended {
        let how = if r.regions == 1 {
            "--order sequential".to_string()
        } else {
            format!("--order staggered --regions {}", r.regions)
        };
        let _ = writeln!(
            s,
            "Recommended at {}: {how} (lowest MLET of {} region counts, powers of two: {}, {:+.1} % against sequential; pass {}, {:+.1} %)",
            bytes(r.segment_bytes),
            r.candidates,
            secs(r.mlet_s),
            (r.mlet_vs_sequential - 1.0) * 100.0,
            secs(r.pass_s),
            (r.pass_vs_sequential - 1.0) * 100.0
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ScrubPlanArgs,
    }

    /// The flags' defaults are the library's (`PlanRequest::default`):
    /// help shows the clap defaults, the library is what Python gets.
    #[test]
    fn the_flags_defaults_are_the_librarys() {
        let cli = Cli::try_parse_from(["scrub-plan"]).unwrap();
        assert_eq!(request(&cli.args).unwrap(), PlanRequest::default());
    }
}
