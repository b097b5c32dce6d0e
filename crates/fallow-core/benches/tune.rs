//! Tuning speed: the exact `tune` (every step of the knob ladder at every
//! size, by the one-pass sweep, bounded out where it cannot win) for 3
//! budgets × 30 request sizes, against re-simulating the same settings
//! (the naive way: timed on a spread sample, checked to the bit against
//! the sweep, and scaled to the settings the search evaluated), in one run.
//!
//! A plain program (`harness = false`) that prints its figures:
//!
//! ```text
//! cargo bench -p fallow-core --bench tune                  # 1 M requests
//! cargo bench -p fallow-core --bench tune -- --requests 100000   # CI smoke size
//! ```
//!
//! The traces are synthetic and held in memory, exponential 10 ms service
//! at 30 % utilisation, with completions: Poisson arrivals (M/M/1: idle
//! times are light-tailed, so at every wait that matters most intervals
//! are used and the sweep visits most of them: its worst case), and a
//! bursty two-state MMPP (CV 9, bursts of 1000: heavy-tailed idle times
//! like the real traces', where long waits leave few intervals to visit).
//! `--workload poisson|mmpp` runs one of them; `--per-threshold` times
//! single sweeps at several waits instead, and four sizes at one wait
//! walked one at a time and in one multi-lane pass.
//! BG service is size-based (8 ms up to 64 KiB, then 100 MB/s: Practical
//! Scrubbing Fig. 4), budgets 1 ms, 2 ms and 4 ms of mean added delay,
//! 30 sizes from 64 KiB to 4 MiB, at most 50.4 ms per request: the
//! Table III experiment. Both ways run on one thread.

use fallow_core::sim::{BgService, BgWork, Prepared, SimConfig};
use fallow_core::tune::{self, Budget, SearchMode, TuneConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;
use std::time::Instant;

fn requests() -> usize {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--requests" {
            if let Some(n) = args.next().and_then(|v| v.replace('_', "").parse().ok()) {
                return n;
            }
        }
    }
    1_000_000
}

fn main() {
    let n = requests();
    let only = {
        let mut args = std::env::args().skip(1);
        let mut w = None;
        while let Some(a) = args.next() {
            if a == "--workload" {
                w = args.next();
            }
        }
        w
    };
    for (name, spec) in [("poisson", "poisson"), ("mmpp", "mmpp:cv=9,burst=1000")] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        bench(n, spec);
    }
}

fn bench(n: usize, spec: &str) {
    let arrivals: ArrivalProcess = spec.parse().expect("valid arrival process");
    let arrivals = arrivals.with_mean_rate(30.0).expect("positive rate");
    let trace = SyntheticWorkload {
        arrivals,
        requests: n,
        service: ServiceModel::Exponential {
            mean_ns: 10_000_000,
        },
        request_size_bytes: 4096,
        capacity_bytes: 1 << 40,
        write_fraction: 0.3,
        seed: 1,
    }
    .generate()
    .expect("valid workload");
    let prep = Prepared::new(&trace, None, 1).expect("trace with completions");
    let sim = SimConfig {
        bg_service: BgService::SizeBased {
            base_ns: 8_000_000,
            knee_bytes: 64 << 10,
            rate_bytes_per_s: 100e6,
        },
        bg_work: BgWork::Endless,
        ..SimConfig::default()
    };
    let budgets = Budget::parse_list("1ms,2ms,4ms").expect("valid budgets");
    let mut cfg = TuneConfig::new(budgets);
    cfg.sizes = tune::log_spaced(64 << 10, 4 << 20, 30);
    cfg.max_delay_ns = Some(50_400_000);
    // this bench measures the exact sweep, whatever auto would choose
    cfg.search = SearchMode::Exact;
    println!(
        "tune fixed-wait on {spec}, 3 budgets x {} sizes, {} FG requests, {} idle intervals, 1 thread",
        cfg.sizes.len(),
        n,
        prep.periods().idle_len_ns.len()
    );
    let run = |fast: bool| {
        let mut c = cfg.clone();
        c.fast = fast;
        c.threads = 1;
        let t = Instant::now();
        let r = tune::tune(&prep, "fixed-wait", &sim, &c, &|_, _| {}).expect("tunes");
        (t.elapsed().as_secs_f64(), r)
    };
    if std::env::args().any(|a| a == "--per-threshold") {
        // one sweep per threshold, for profiling
        let sweep = tune::FastSweep::new(&prep, &sim).expect("deterministic service");
        let rule = fallow_core::policy::entry("fixed-wait")
            .expect("registered")
            .interval_rule
            .expect("has a rule");
        for t_ms in [0.1, 1.0, 10.0, 30.0, 100.0, 1000.0, 1e5] {
            let t = Instant::now();
            for _ in 0..20 {
                std::hint::black_box(sweep.totals(rule, t_ms * 1e6, 1 << 20, &sim, None));
            }
            println!(
                "  t={t_ms}ms: {:.3} ms per sweep",
                t.elapsed().as_secs_f64() / 20.0 * 1e3
            );
        }
        // four sizes at one threshold: one at a time, then in one pass
        let sizes = [64u64 << 10, 256 << 10, 1 << 20, 4 << 20];
        for t_ms in [1.0, 10.0, 30.0, 100.0] {
            let settings: Vec<tune::Setting> = sizes
                .iter()
                .map(|&size_bytes| tune::Setting {
                    value: t_ms * 1e6,
                    size_bytes,
                    cap_added_ns: None,
                })
                .collect();
            let t = Instant::now();
            for _ in 0..20 {
                for s in &settings {
                    std::hint::black_box(sweep.totals(rule, s.value, s.size_bytes, &sim, None));
                }
            }
            let one_s = t.elapsed().as_secs_f64() / 20.0;
            let t = Instant::now();
            for _ in 0..20 {
                std::hint::black_box(sweep.totals_many(rule, &settings, &sim));
            }
            let many_s = t.elapsed().as_secs_f64() / 20.0;
            let t = Instant::now();
            for _ in 0..20 {
                for s in settings.chunks(1) {
                    std::hint::black_box(sweep.totals_many(rule, s, &sim));
                }
            }
            let lone_s = t.elapsed().as_secs_f64() / 20.0;
            println!(
                "  t={t_ms}ms, 4 sizes: {:.3} ms one at a time, {:.3} ms one lane at a time, {:.3} ms in one pass",
                one_s * 1e3,
                lone_s * 1e3,
                many_s * 1e3
            );
        }
        return;
    }
    let (fast_s, fast) = run(true);
    if std::env::args().any(|a| a == "--fast-only") {
        // for profiling the sweep
        println!("  one-pass sweep   {fast_s:8.3} s");
        return;
    }
    // naive re-simulation: every setting the exact search evaluates would
    // be one simulation; simulating all of them on 1 M requests takes
    // hours, so a spread sample is simulated (and checked against the
    // sweep, to the bit) and the time per setting scaled up
    let knob = fallow_core::policy::entry("fixed-wait")
        .expect("registered")
        .knob
        .expect("has a knob");
    let ladder = tune::ladder(&knob);
    let sweep = tune::FastSweep::new(&prep, &sim).expect("deterministic service");
    let rule = fallow_core::policy::IntervalRule::WaitThenRun;
    let samples: Vec<(u64, usize)> = (0..24)
        .map(|k| {
            let size = cfg.sizes[(k * 7) % cfg.sizes.len()];
            (size, (k * 977 + 300) % ladder.len())
        })
        .collect();
    let t = Instant::now();
    let mut identical = true;
    for &(size, i) in &samples {
        let mut c = sim.clone();
        c.bg_size_bytes = size;
        let mut p = fallow_core::policy::build(&format!("fixed-wait:t={}", ladder[i].text))
            .expect("valid spec");
        let r = fallow_core::sim::simulate(&prep, p.as_mut(), &c).expect("runs");
        let f = prep.figures(
            &sweep
                .totals(rule, ladder[i].value, size, &sim, None)
                .expect("no cap"),
        );
        identical &= f == r.mean_figures();
    }
    let per_sim_s = t.elapsed().as_secs_f64() / samples.len() as f64;
    let naive_s = per_sim_s * fast.simulations as f64;
    let every_s = per_sim_s * (ladder.len() * cfg.sizes.len()) as f64;
    let cores = tune::default_threads();
    let (fast_all_s, fast_all) = {
        let mut c = cfg.clone();
        c.threads = cores;
        let t = Instant::now();
        let r = tune::tune(&prep, "fixed-wait", &sim, &c, &|_, _| {}).expect("tunes");
        (t.elapsed().as_secs_f64(), r)
    };
    assert_eq!(fast.method, "sweep");
    let answers = |t: &tune::Tuning| serde_json::to_string(&t.budgets).expect("serialises");
    println!(
        "  exact sweep      {fast_s:8.3} s  ({} of {} settings evaluated, {:.1} us each; the rest bounded out)",
        fast.simulations,
        ladder.len() * cfg.sizes.len(),
        fast_s / fast.simulations as f64 * 1e6
    );
    println!(
        "  re-simulation    {naive_s:8.1} s  (the same {} settings at {:.1} ms each, from {} sampled; {every_s:.0} s for every setting)",
        fast.simulations,
        per_sim_s * 1e3,
        samples.len()
    );
    println!(
        "  speed-up         {:8.1} x (against every setting: {:.1} x)",
        naive_s / fast_s,
        every_s / fast_s
    );
    println!("  exact sweep      {fast_all_s:8.3} s  on {cores} threads");
    let identical = identical && answers(&fast_all) == answers(&fast);
    println!("  identical answers (samples to the bit, 1 and {cores} threads): {identical}");
    for b in &fast.budgets {
        if let Some(c) = &b.best {
            println!(
                "  {:>5}: {:.1} MB/s at t={} and {} KiB",
                b.budget_text,
                c.bg_throughput_bytes_per_s / 1e6,
                c.knob.as_deref().unwrap_or("-"),
                c.request_size_bytes >> 10
            );
        }
    }
    assert!(identical, "the sweep and the simulation disagree");
}
