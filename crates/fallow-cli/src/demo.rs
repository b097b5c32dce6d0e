//! `fallow demo`: the main job on built-in data. Generates a bursty
//! synthetic workload (two-state MMPP arrivals on the simple disk model,
//! about 20 % utilisation), characterises it, prints the summary and writes
//! the HTML report and the JSON next to it.

use crate::analyze::present;
use crate::atomic::OverwriteArg;
use crate::findings::findings;
use crate::human::{count, num, pct, secs};
use crate::output::Source;
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::outpath::OutputKind;
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::{characterize, CharacterizeOptions, ServiceModel};
use std::path::PathBuf;
use std::time::Instant;

/// Size of every demo request.
const REQUEST_BYTES: u32 = 4096;
/// Arrival rate in the burst state over the quiet state.
const BURST_RATIO: f64 = 40.0;
/// Mean stay in the burst and the quiet state, seconds.
const BURST_S: f64 = 20.0;
const QUIET_S: f64 = 60.0;

/// Arguments of `fallow demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory for `report.html` and `report.json` (created if missing).
    #[arg(long, value_name = "DIR", default_value = "fallow-demo")]
    pub out: PathBuf,

    /// Number of requests to generate.
    #[arg(long, value_name = "N", default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(100..=50_000_000))]
    pub requests: u64,

    /// Target device utilisation, as a fraction (0.2 = 20 %).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.2, value_parser = parse_utilization)]
    pub utilization: f64,

    /// Seed of the workload's random streams: the same seed gives the same report.
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,

    #[command(flatten)]
    pub overwrite: OverwriteArg,
}

fn parse_utilization(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v > 0.0 && v < 0.95 {
        Ok(v)
    } else {
        Err("must be between 0 and 0.95 (a fraction, not a percentage)".into())
    }
}

/// The demo's arrival process: bursts at `BURST_RATIO` times the quiet
/// rate, scaled so the disk is busy `utilization` of the time on average.
fn arrivals(service: &ServiceModel, utilization: f64) -> ArrivalProcess {
    let switch_per_s = [1.0 / BURST_S, 1.0 / QUIET_S];
    // stationary share of time in the burst state
    let p_burst = switch_per_s[1] / (switch_per_s[0] + switch_per_s[1]);
    let mean_rate = utilization / (service.mean_ns(REQUEST_BYTES as u64) / 1e9);
    let quiet = mean_rate / (p_burst * BURST_RATIO + (1.0 - p_burst));
    ArrivalProcess::Mmpp2 {
        rate_per_s: [quiet * BURST_RATIO, quiet],
        switch_per_s,
    }
}

/// Run `fallow demo`.
pub fn run(args: DemoArgs) -> Result<()> {
    let started = Instant::now();
    let html = args.out.join("report.html");
    let json = args.out.join("report.json");
    let guard = args.overwrite.guard([]);
    crate::atomic::check(&guard, &html, OutputKind::HtmlReport, "--out")?;
    crate::atomic::check(&guard, &json, OutputKind::JsonReport, "--out")?;
    let service = ServiceModel::Disk(Default::default());
    let process = arrivals(&service, args.utilization);
    let ArrivalProcess::Mmpp2 { rate_per_s, .. } = process else {
        unreachable!("the demo uses MMPP arrivals")
    };
    let workload = SyntheticWorkload {
        arrivals: process,
        requests: args.requests as usize,
        service: service.clone(),
        request_size_bytes: REQUEST_BYTES,
        capacity_bytes: 1_000_000_000_000,
        write_fraction: 0.3,
        seed: args.seed,
    };
    let trace = workload.generate()?;
    let devices = trace.devices();
    let c = characterize(&trace, devices, Some(0), &CharacterizeOptions::default())?;
    let source = Source {
        title: "fallow demo: a bursty synthetic disk workload".into(),
        detail: format!(
        "{} synthetic 4 KiB requests, two-state MMPP arrivals ({} req/s in bursts of ~{}, {} req/s between them for ~{}) on a 7200 rpm disk model, seed {}",
        count(args.requests),
        num(rate_per_s[0]),
        secs(BURST_S),
        num(rate_per_s[1]),
        secs(QUIET_S),
        args.seed
    ),
    };
    let f = findings(&c);

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    crate::atomic::write_atomically(&json, |w| {
        // marked as fallow's (fallow_core::outpath), so the next demo may replace it
        #[derive(serde::Serialize)]
        struct Marked<'a> {
            generator: String,
            #[serde(flatten)]
            c: &'a fallow_core::Characterization,
        }
        let doc = Marked {
            generator: format!("fallow {}", env!("CARGO_PKG_VERSION")),
            c: &c,
        };
        serde_json::to_writer_pretty(&mut *w, &doc)?;
        w.write_all(b"\n")?;
        Ok(())
    })?;
    present(&c, &f, false, Some(&html), Some(&source))?;
    crate::output::print(&format!(
        "JSON:        {}\n\nUtilisation {} (target {}); generated, analysed and written in {}.\n",
        json.display(),
        pct(c.utilization),
        pct(args.utilization),
        secs(started.elapsed().as_secs_f64())
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_rate_gives_the_target_utilisation() {
        let service = ServiceModel::Disk(Default::default());
        let p = arrivals(&service, 0.2);
        let busy_per_s = p.mean_rate_per_s() * service.mean_ns(4096) / 1e9;
        assert!((busy_per_s - 0.2).abs() < 1e-9);
        let ArrivalProcess::Mmpp2 { rate_per_s, .. } = p else {
            panic!()
        };
        assert!((rate_per_s[0] / rate_per_s[1] - BURST_RATIO).abs() < 1e-9);
    }
}
