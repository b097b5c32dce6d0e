//! Why does a budgeted live scrub change its request size at about half
//! its refits (docs/live.md, "The size model fitted per size")? This
//! experiment runs the same online tuner the live driver runs
//! (`fixed-wait` with its wait and size refitted among 64 KiB … 4 MiB, a
//! 5 % budget, a refit every 50 intervals) in the simulator, on a
//! **stationary** foreground like the live benchmark's random one: Poisson
//! arrivals at 10.6/s, lognormal service of mean 13.4 ms, and the emulated
//! HDD's measured BG model (5.23 ms up to 64 KiB, then 70.9 MB/s). The
//! simulator has none of the live run's moving parts (no service fit, no
//! controller scaling the budget, a fixed switch penalty), so whatever
//! churn it shows comes from the windows alone.
//!
//! For each window length it prints, over `--seeds` runs: the refits, the
//! share that changed the size, the sizes chosen, and the run's BG
//! throughput and slowdown; then the same runs with the size held at the
//! size chosen most often (the knob still refitted), to show what the
//! changes cost or gain.
//!
//! ```text
//! cargo run -p fallow-core --example size_churn -- --requests 20000 --seeds 3
//! ```
//!
//! (the dev profile builds fallow-core at opt-level 2: 9 s on 2 cores;
//! docs/live.md has the figures and what they show).

use fallow_core::sim::{simulate, BgService, BgWork, Prepared, SimConfig};
use fallow_core::tune::online::{OnlineConfig, OnlineTuner};
use fallow_core::tune::{tune, Budget, SearchMode, TuneConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;
use std::collections::BTreeMap;

/// The value after `--flag`, parsed, or `default`.
fn arg<T: std::str::FromStr>(flag: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// The live benchmark's random FG on the emulated HDD (docs/live.md).
const ARRIVALS_PER_S: f64 = 10.6;
const FG_MEAN_NS: u64 = 13_400_000;
/// The emulated HDD's BG model, measured (`service_fit`'s tests use it).
const BG: BgService = BgService::SizeBased {
    base_ns: 5_230_000,
    knee_bytes: 64 << 10,
    rate_bytes_per_s: 70.9e6,
};
/// The live driver's penalty of a collision: the clean reads' mean.
const SWITCH_PENALTY_NS: u64 = FG_MEAN_NS;
/// The live driver's refit cadence (`fallow_live::budget::LIVE_EVERY`).
const EVERY: usize = 50;

struct Run {
    refits: usize,
    changes: usize,
    sizes: BTreeMap<u64, usize>,
    throughput_bytes_per_s: f64,
    slowdown: f64,
}

fn run(prep: &Prepared, window: usize, sizes: &[u64], seed: u64) -> Run {
    run_at(prep, window, sizes, seed, "5%")
}

/// [`run`] at another budget.
fn run_at(prep: &Prepared, window: usize, sizes: &[u64], seed: u64, budget: &str) -> Run {
    let cfg = OnlineConfig {
        budget: budget.parse::<Budget>().expect("a budget"),
        window,
        every: EVERY,
        switch_penalty_ns: SWITCH_PENALTY_NS,
        seed,
    };
    let mut tuner = OnlineTuner::new("fixed-wait", cfg).expect("fixed-wait is tunable");
    tuner.set_sizes(sizes).expect("sizes");
    let sim = sim_at(sizes[0], seed);
    let r = simulate(prep, &mut tuner, &sim).expect("the simulation runs");
    let chosen: Vec<u64> = tuner
        .history()
        .iter()
        .filter(|p| p.fit.is_some())
        .filter_map(|p| p.size_bytes)
        .collect();
    let mut hist = BTreeMap::new();
    for &s in &chosen {
        *hist.entry(s).or_insert(0) += 1;
    }
    Run {
        refits: chosen.len(),
        changes: chosen.windows(2).filter(|w| w[0] != w[1]).count(),
        sizes: hist,
        throughput_bytes_per_s: r.bg.throughput_bytes_per_s,
        slowdown: r.fg.slowdown,
    }
}

/// The stationary FG of `requests` requests drawn with `seed`, prepared.
fn fg(requests: usize, seed: u64) -> Prepared {
    let trace = SyntheticWorkload {
        arrivals: ArrivalProcess::Poisson {
            rate_per_s: ARRIVALS_PER_S,
        },
        requests,
        service: ServiceModel::Lognormal {
            mean_ns: FG_MEAN_NS,
            cv: 0.4,
        },
        request_size_bytes: 4096,
        capacity_bytes: 1 << 40,
        write_fraction: 0.0,
        seed,
    }
    .generate()
    .expect("a valid workload");
    Prepared::new(&trace, None, 1).expect("a trace with completions")
}

/// A run on the emulated HDD's BG model at `size`, with the live driver's
/// switch penalty.
fn sim_at(size: u64, seed: u64) -> SimConfig {
    SimConfig {
        bg_service: BG,
        bg_work: BgWork::Endless,
        bg_size_bytes: size,
        switch_penalty_ns: SWITCH_PENALTY_NS,
        seed,
    }
}

/// The offline answer: `fixed-wait` tuned exactly on `prep` at the 5 %
/// budget over `sizes` (`fallow tune --policy fixed-wait --budget 5%
/// --search exact`), as the live bench's (a) and (b) are: its spec and size.
fn offline(prep: &Prepared, sizes: &[u64], seed: u64) -> (String, u64) {
    let mut cfg = TuneConfig::new(vec!["5%".parse().expect("a budget")]);
    cfg.sizes = sizes.to_vec();
    cfg.search = SearchMode::Exact;
    let sim = sim_at(sizes[0], seed);
    let t = tune(prep, "fixed-wait", &sim, &cfg, &|_, _| {}).expect("the tune runs");
    let best = t.budgets[0]
        .best
        .as_ref()
        .expect("a setting meets 5 % on this FG");
    (best.spec.clone(), best.request_size_bytes)
}

/// BG MB/s and slowdown of `spec` at `size` on `prep`.
fn fixed(prep: &Prepared, spec: &str, size: u64, seed: u64) -> (f64, f64) {
    let mut policy = fallow_core::policy::build(spec).expect("a tuned spec builds");
    let sim = sim_at(size, seed);
    let r = simulate(prep, policy.as_mut(), &sim).expect("the simulation runs");
    (r.bg.throughput_bytes_per_s / 1e6, r.fg.slowdown)
}

fn kib(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{}MiB", b >> 20)
    } else {
        format!("{}KiB", b >> 10)
    }
}

fn main() {
    let requests: usize = arg("--requests", 20_000);
    let seeds: u64 = arg("--seeds", 5);
    // fallow_live::budget::size_ladder(64 KiB, 4 MiB): the sizes the live
    // driver refits among (this crate cannot import fallow-live)
    let ladder: Vec<u64> = (0..7).map(|k| (64u64 << 10) << k).collect();
    println!(
        "stationary FG: Poisson {ARRIVALS_PER_S}/s, lognormal {} ms (cv 0.4), {requests} requests; \
         BG 5.23 ms up to 64 KiB then 70.9 MB/s; budget 5 %, a refit every {EVERY} intervals; \
         {seeds} seeds",
        FG_MEAN_NS as f64 / 1e6
    );
    println!(
        "{:>6} | {:>6} | {:>14} | {:<44} | {:>16} | {:>9} | {:>22} | {:>9}",
        "window",
        "refits",
        "size changed",
        "sizes chosen (all seeds)",
        "BG MB/s, refit",
        "slowdown",
        "BG MB/s, held at mode",
        "slowdown"
    );
    // the live driver's window (fallow_live::budget::LIVE_WINDOW), and four times it
    for window in [400usize, 1600] {
        let mut refits = 0;
        let mut changes = 0;
        let mut sizes: BTreeMap<u64, usize> = BTreeMap::new();
        let (mut tp, mut sd) = (Vec::new(), Vec::new());
        let (mut tp_held, mut sd_held) = (Vec::new(), Vec::new());
        for seed in 1..=seeds {
            let prep = fg(requests, seed);
            let r = run(&prep, window, &ladder, seed);
            refits += r.refits;
            changes += r.changes;
            for (s, n) in &r.sizes {
                *sizes.entry(*s).or_insert(0) += n;
            }
            let mode = *r
                .sizes
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(s, _)| s)
                .expect("at least one refit");
            tp.push(r.throughput_bytes_per_s / 1e6);
            sd.push(r.slowdown);
            let held = run(&prep, window, &[mode], seed);
            tp_held.push(held.throughput_bytes_per_s / 1e6);
            sd_held.push(held.slowdown);
        }
        let sizes_text = sizes
            .iter()
            .map(|(s, n)| format!("{} {n}", kib(*s)))
            .collect::<Vec<_>>()
            .join(", ");
        let list = |v: &[f64], f: &dyn Fn(f64) -> String| {
            v.iter().map(|&x| f(x)).collect::<Vec<_>>().join(" ")
        };
        println!(
            "{window:>6} | {refits:>6} | {:>5} ({:>4.1} %) | {sizes_text:<44} | {:>16} | {:>9} | {:>22} | {:>9}",
            changes,
            100.0 * changes as f64 / (refits.saturating_sub(seeds as usize)).max(1) as f64,
            list(&tp, &|x| format!("{x:.2}")),
            list(&sd, &|x| format!("{:+.1}%", x * 100.0)),
            list(&tp_held, &|x| format!("{x:.2}")),
            list(&sd_held, &|x| format!("{:+.1}%", x * 100.0)),
        );
    }
    // the online tuner against the offline answer it stands in for: tuned
    // on the same trace (in sample, the best a fixed setting can do there)
    // and on another draw of the same FG (out of sample, as a recording
    // tuned before the run); and the online tuner held to a lower budget
    // (a live run whose controller holds it under its budget)
    println!();
    println!(
        "{:>4} | {:>24} | {:>12} | {:>24} | {:>12} | {:>12} | {:>12} | {:>12}",
        "seed",
        "offline, in sample",
        "MB/s, sd",
        "offline, out of sample",
        "MB/s, sd",
        "online 5 %",
        "online 4 %",
        "online 3 %"
    );
    for seed in 1..=seeds {
        let prep = fg(requests, seed);
        let other = fg(requests, seed + 1000);
        let (spec_in, size_in) = offline(&prep, &ladder, seed);
        let (tp_in, sd_in) = fixed(&prep, &spec_in, size_in, seed);
        let (spec_out, size_out) = offline(&other, &ladder, seed);
        let (tp_out, sd_out) = fixed(&prep, &spec_out, size_out, seed);
        let online = |budget: &str| {
            let r = run_at(&prep, 400, &ladder, seed, budget);
            let tp = r.throughput_bytes_per_s / 1e6;
            format!("{:.2} {:+.1}%", tp / tp_in, r.slowdown * 100.0)
        };
        println!(
            "{seed:>4} | {:>24} | {:>12} | {:>24} | {:>12} | {:>12} | {:>12} | {:>12}",
            format!("{spec_in} {}", kib(size_in)),
            format!("{tp_in:.2} {:+.1}%", sd_in * 100.0),
            format!("{spec_out} {}", kib(size_out)),
            format!("{:.2} {:+.1}%", tp_out / tp_in, sd_out * 100.0),
            online("5%"),
            online("4%"),
            online("3%"),
        );
    }
    println!(
        "(MB/s: the offline in-sample setting's; every other column is its BG throughput \
         over that, then its FG slowdown)"
    );
}
