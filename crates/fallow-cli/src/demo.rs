//! `fallow demo`: the main job on built-in data. Generates a bursty
//! synthetic workload (two-state MMPP arrivals on the simple disk model,
//! about 20 % utilisation), keeps it as an MSR-format `trace.csv` (so every
//! other command can be tried on it), characterises it, and makes the
//! decision fallow exists for: every deployable policy tuned for an FG
//! budget and ranked (`fallow recommend`), against the kernel's idle I/O
//! class as the baseline (Practical Scrubbing Table III). It prints the
//! summary and writes the HTML report, with "what to do" first, and the
//! JSON next to it.

use crate::args::parse_budget;
use crate::atomic::OverwriteArg;
use crate::human::{bytes, count, num, pct, secs};
use crate::output::present;
use crate::output::Source;
use crate::progress::TuningBar;
use crate::reproduce::shell_quote;
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::analyze::{analyze, AnalyzeRequest};
use fallow_core::outpath::OutputKind;
use fallow_core::sim::{BgService, BgWork, Prepared, SimConfig};
use fallow_core::trace::{write_msr, MSR_HEADER};
use fallow_core::tune::{self, Budget, SearchMode};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::{ServiceModel, Trace};
use fallow_report::decision::Decision;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Size of every demo request.
const REQUEST_BYTES: u32 = 4096;
/// Arrival rate in the burst state over the quiet state.
const BURST_RATIO: f64 = 40.0;
/// Mean stay in the burst and the quiet state, seconds.
const BURST_S: f64 = 20.0;
const QUIET_S: f64 = 60.0;

/// The demo's BG work: scrubbing, Practical Scrubbing's size-based service
/// time (Fig. 4: 8 ms up to 64 KiB, then 100 MB/s), endless.
const BG_SERVICE: &str = "size:base=8ms,knee=64KiB,rate=100MB";

/// Arguments of `fallow demo`.
#[derive(Debug, Args)]
#[command(after_help = "\
Writes DIR/trace.csv (the generated trace, MSR Cambridge CSV: try `fallow analyze
fallow-demo/trace.csv` and the README's other examples on it), DIR/report.html (what to do
first, then the characterisation) and DIR/report.json. About 10 s in a release build.

Examples:
  fallow demo
      200,000 requests at 20 % utilisation into ./fallow-demo
  fallow demo --requests 20000 --utilization 0.4 --out /tmp/busy-demo
      a smaller, busier disk")]
pub struct DemoArgs {
    /// Directory for `trace.csv`, `report.html` and `report.json` (created if missing).
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

    /// The FG budget the recommended setting must keep: a mean slowdown
    /// (`5%`) or a mean added delay per FG request (`1ms`).
    #[arg(long, value_name = "SPEC", default_value = "5%", value_parser = parse_budget)]
    pub budget: Budget,

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
    let csv = args.out.join("trace.csv");
    let guard = args.overwrite.guard([]);
    crate::atomic::check(&guard, &html, OutputKind::HtmlReport, "--out")?;
    crate::atomic::check(&guard, &json, OutputKind::JsonReport, "--out")?;
    // a trace.csv the demo wrote (its host is `fallow-demo`) is replaced
    // like its reports; any other text trace needs --overwrite
    let csv_guard = if is_demo_trace(&csv) {
        crate::atomic::OverwriteArg { overwrite: true }.guard([])
    } else {
        args.overwrite.guard([])
    };
    crate::atomic::check(&csv_guard, &csv, OutputKind::TextTrace, "--out")?;
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
    step(&format!(
        "generating {} requests at {} utilisation",
        count(args.requests),
        pct(args.utilization)
    ))?;
    let generated = workload.generate()?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    crate::atomic::write_atomically(&csv, |w| Ok(write_msr(&generated, DEMO_HOST, w)?))?;
    step(&format!("analysing {}", csv.display()))?;
    // analysed as read back, so `fallow analyze fallow-demo/trace.csv` agrees
    let trace = fallow_core::read_trace(&csv, &Default::default())?;
    let a = analyze(&trace, &AnalyzeRequest::default())?;
    let c = &a.characterization;
    let source = Source {
        title: "fallow demo: a bursty synthetic disk workload".into(),
        detail: format!(
        "{} synthetic 4 KiB requests, two-state MMPP arrivals ({} req/s in bursts of ~{}, {} req/s between them for ~{}) on a 7200 rpm disk model, seed {}; kept as {}",
        count(args.requests),
        num(rate_per_s[0]),
        secs(BURST_S),
        num(rate_per_s[1]),
        secs(QUIET_S),
        args.seed,
        csv.display()
    ),
    };
    let analysed_s = started.elapsed().as_secs_f64();
    let decision = decide(&trace, &csv, args.budget)?;

    crate::atomic::write_atomically(&json, |w| {
        // marked as fallow's (fallow_core::outpath), so the next demo may replace it
        #[derive(serde::Serialize)]
        struct Marked<'a> {
            schema_version: u32,
            generator: String,
            #[serde(flatten)]
            c: &'a fallow_core::Characterization,
            decision: &'a Decision,
        }
        let doc = Marked {
            schema_version: fallow_core::JSON_SCHEMA_VERSION,
            generator: format!("fallow {}", env!("CARGO_PKG_VERSION")),
            c,
            decision: &decision,
        };
        serde_json::to_writer_pretty(&mut *w, &doc)?;
        w.write_all(b"\n")?;
        Ok(())
    })?;
    present(&a, false, Some(&html), Some(&source), Some(&decision))?;
    crate::output::print(&format!(
        "{}\nTrace:       {}\nJSON:        {}\n\nUtilisation {} (target {}); generated and analysed in {}, policies tuned in {}.\n",
        decision.text(),
        csv.display(),
        json.display(),
        pct(c.utilization),
        pct(args.utilization),
        secs(analysed_s),
        secs(started.elapsed().as_secs_f64() - analysed_s)
    ))?;
    Ok(())
}

/// One line on stderr saying what the demo does now (it runs for seconds
/// to a minute), unless `FALLOW_PROGRESS=never`.
fn step(what: &str) -> Result<()> {
    if crate::progress::mode()? != crate::progress::Mode::Never {
        eprintln!("fallow demo: {what}…");
    }
    Ok(())
}

/// The host name that marks a trace as the demo's.
const DEMO_HOST: &str = "fallow-demo";

/// True if `path` starts like the trace the demo writes.
fn is_demo_trace(path: &Path) -> bool {
    use std::io::BufRead;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut lines = std::io::BufReader::new(f.take(4096)).lines();
    let header = lines.next().and_then(|l| l.ok());
    let first = lines.next().and_then(|l| l.ok());
    header.as_deref() == Some(MSR_HEADER)
        && first.is_some_and(|l| l.split(',').nth(1) == Some(DEMO_HOST))
}

/// Every deployable policy tuned for `budget` (as `fallow recommend`), and
/// the kernel's idle class at its defaults (as `fallow tune`'s baseline).
fn decide(trace: &Trace, csv: &Path, budget: Budget) -> Result<Decision> {
    let bg_service: BgService = BG_SERVICE.parse()?;
    let sim = SimConfig {
        bg_service,
        bg_work: BgWork::Endless,
        bg_size_bytes: 64 << 10,
        switch_penalty_ns: 0,
        seed: fallow_core::sim::DEFAULT_SEED,
    };
    let prep = Prepared::new(trace, None, fallow_core::sim::DEFAULT_SEED)?;
    let sizes = tune::recommend::default_sizes();
    step(&format!(
        "tuning {} policies for a {budget} FG budget",
        tune::recommend::candidates().len()
    ))?;
    // as `fallow recommend` shows it: a bar on a terminal
    let bar = TuningBar::new(String::new())?;
    let rec = tune::recommend::recommend(
        &prep,
        &sim,
        budget,
        &sizes,
        None,
        tune::default_threads(),
        SearchMode::Auto,
        &|policy, policies, done, total| bar.step(policy, policies, done, total),
        None,
    );
    bar.finish();
    let rec = rec.with_context(|| format!("tuning the demo's policies for {budget}"))?;
    let baseline = tune::baseline(&prep, &sim)?;
    // the fair comparison: the top policy held to the idle class's own FG
    // cost (the live benchmark's "fallow tuned to the idle class's slowdown")
    let top_policy = rec
        .ranking
        .first()
        .filter(|r| r.rank == 1)
        .map(|r| r.policy.clone());
    let at_baseline_cost = match top_policy {
        Some(name) if baseline.fg_slowdown > 0.0 => {
            let mut cfg = tune::TuneConfig::new(vec![Budget::Slowdown {
                fraction: baseline.fg_slowdown,
            }]);
            cfg.sizes = sizes.clone();
            cfg.threads = tune::default_threads();
            tune::tune(&prep, &name, &sim, &cfg, &|_, _| {})?
                .budgets
                .into_iter()
                .next()
                .and_then(|b| b.best)
        }
        _ => None,
    };
    let path = shell_quote(&csv.display().to_string());
    let best = rec
        .ranking
        .first()
        .filter(|r| r.rank == 1)
        .and_then(|r| r.best.clone());
    let commands = best.as_ref().map(|c| {
        let mut live = vec![
            "fallow".to_string(),
            "scrub".into(),
            "/dev/sdX".into(),
            "--policy".into(),
            shell_quote(&c.spec),
        ];
        if c.bg_size_bytes == c.request_size_bytes {
            live.push("--size".into());
            live.push(c.request_size_bytes.to_string());
        }
        let simulate = format!(
            "fallow simulate {path} --bg {} --bg-size {} --seed {} --policy {}",
            sim.bg_service,
            c.bg_size_bytes,
            sim.seed,
            shell_quote(&c.spec)
        );
        let tune = format!(
            "fallow tune {path} --policy {} --budget {} --bg {BG_SERVICE} --json > tune.json",
            c.policy,
            shell_quote(&rec.budget_text)
        );
        (live.join(" "), simulate, tune)
    });
    Ok(Decision {
        budget_text: rec.budget_text.clone(),
        bg: format!(
            "scrubbing: endless BG work, {} per request up to 64 KiB, then 100 MB/s (Practical Scrubbing Fig. 4); request sizes {} to {}",
            secs(0.008),
            bytes(sizes[0]),
            bytes(*sizes.last().expect("five sizes"))
        ),
        baseline_fg_mean_response_s: prep.baseline_mean_ns() / 1e9,
        best,
        baseline,
        at_baseline_cost,
        live_command: commands.as_ref().map(|c| c.0.clone()),
        simulate_command: commands.as_ref().map(|c| c.1.clone()),
        tune_command: commands.map(|c| c.2),
        recommendation: rec,
    })
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
