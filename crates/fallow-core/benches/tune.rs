//! Tuning speed: `tune` as `fallow tune` runs it (`--search auto`, the
//! default) for 3 budgets × 30 request sizes, against re-simulating the
//! same settings (the naive way), in one run, with wall and CPU seconds.
//!
//! A plain program (`harness = false`) that prints its figures:
//!
//! ```text
//! cargo bench -p fallow-core --bench tune                  # 1 M requests
//! cargo bench -p fallow-core --bench tune -- --requests 50000 --workload mmpp  # CI smoke run
//! cargo bench -p fallow-core --bench tune -- --search exact # force the exact search
//! cargo bench -p fallow-core --bench tune -- --workload mmpp --compare-exact  # exact: before vs today
//! ```
//!
//! `auto` runs the exact search (every step of the knob ladder at every
//! size, by the one-pass sweep, bounded out where it cannot win) when its
//! estimated work is under `tune::AUTO_EXACT_LIMIT_VISITS`, else the coarse
//! 1-2-5 grid plus bisection. On 1 M requests it picks coarse, and the
//! naive way is the same coarse search with every setting simulated
//! (`TuneConfig::fast = false`), timed in full and compared answer for
//! answer. When exact runs (the smoke size, or `--search exact`), the
//! settings it evaluates are too many to simulate: a spread sample is
//! simulated (checked against the sweep to the bit) and the time per
//! setting scaled to the settings the search evaluated.
//!
//! The traces are synthetic and held in memory, exponential 10 ms service
//! at 30 % utilisation, with completions: Poisson arrivals (M/M/1: idle
//! times are light-tailed, so at every wait that matters most intervals
//! are used and the sweep visits most of them: its worst case), and a
//! bursty two-state MMPP (CV 9, bursts of 1000: heavy-tailed idle times
//! like the real traces', where long waits leave few intervals to visit).
//! `--workload poisson|mmpp` runs one of them; `--compare-exact` times
//! the earlier exact search (`tune::tune_exact_reference`)
//! against today's on all cores, in one run, and checks their answers
//! are the same; `--per-threshold` times
//! single sweeps at several waits instead, and four sizes at one wait
//! walked one at a time and in one multi-lane pass.
//! BG service is size-based (8 ms up to 64 KiB, then 100 MB/s: Practical
//! Scrubbing Fig. 4), budgets 1 ms, 2 ms and 4 ms of mean added delay,
//! 30 sizes from 64 KiB to 4 MiB, at most 50.4 ms per request: the
//! Table III experiment. CPU seconds (user + system, of the whole process,
//! from `/proc/self/stat`) are printed beside the wall time: on a loaded
//! machine the wall time says little.

use fallow_core::sim::{BgService, BgWork, Prepared, SimConfig};
use fallow_core::tune::{self, Budget, Guarantee, SearchMode, TuneConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;
use std::time::Instant;

/// The value after `--flag`, if given.
fn arg(flag: &str) -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == flag {
            return args.next();
        }
    }
    None
}

fn requests() -> usize {
    arg("--requests")
        .map(|v| match v.replace('_', "").parse() {
            Ok(n) if n > 0 => n,
            _ => panic!("--requests `{v}`: give a positive request count"),
        })
        .unwrap_or(1_000_000)
}

/// CPU seconds (user + system) this process has used, its exited threads
/// included: fields 14 and 15 of `/proc/self/stat`, in clock ticks of
/// `USER_HZ`, which Linux fixes at 100 for user space (`man 5 proc`).
fn cpu_s() -> f64 {
    const USER_HZ: f64 = 100.0;
    let stat = std::fs::read_to_string("/proc/self/stat").expect("Linux /proc");
    // the command name (field 2) may hold spaces; fields after its `)`
    let rest = &stat[stat.rfind(')').expect("(comm)") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime 15
    let ticks = |i: usize| f[i - 3].parse::<f64>().expect("a tick count");
    (ticks(14) + ticks(15)) / USER_HZ
}

/// Run `f`, its wall and CPU seconds.
fn timed<T>(f: impl FnOnce() -> T) -> (f64, f64, T) {
    let (t, c) = (Instant::now(), cpu_s());
    let r = f();
    (t.elapsed().as_secs_f64(), cpu_s() - c, r)
}

fn main() {
    let n = requests();
    let only = arg("--workload");
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
        seed: fallow_core::sim::DEFAULT_SEED,
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
    // what `fallow tune` runs unless told otherwise
    cfg.search = arg("--search").map_or(SearchMode::Auto, |m| {
        SearchMode::parse(&m).unwrap_or_else(|e| panic!("--search: {e}"))
    });
    println!(
        "tune fixed-wait on {spec}, 3 budgets x {} sizes, {} FG requests, {} idle intervals, --search {}",
        cfg.sizes.len(),
        n,
        prep.periods().idle_len_ns.len(),
        cfg.search
    );
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
    let cores = tune::default_threads();
    if std::env::args().any(|a| a == "--compare-exact") {
        compare_exact(&prep, &sim, &cfg, cores);
        return;
    }
    let run = |fast: bool, threads: usize| {
        let mut c = cfg.clone();
        c.fast = fast;
        c.threads = threads;
        timed(|| tune::tune(&prep, "fixed-wait", &sim, &c, &|_, _| {}).expect("tunes"))
    };
    let (fast_s, fast_cpu_s, fast) = run(true, 1);
    assert_eq!(fast.method, "sweep");
    let exact = fast.guarantee == Guarantee::Exact;
    println!(
        "  search picked    {} (bound {:.1e} interval visits; exact estimated at ~{:.1} s of one core from the {}; auto's limit {:.1e})",
        if exact { "exact" } else { "coarse" },
        fast.exact_work_visits.unwrap_or(0) as f64,
        fast.exact_estimate_s.unwrap_or(0.0),
        fast.exact_estimate_basis.unwrap_or("-"),
        cfg.auto_limit_visits as f64
    );
    let walked = fast.walked_visits.unwrap_or(0) as f64;
    println!(
        "  sweep, 1 thread  {fast_s:8.3} s wall {fast_cpu_s:8.2} s CPU  ({} settings evaluated, {walked:.3e} intervals walked, {:.2e} walked/s of CPU: tune::PILOT_VISITS_PER_S)",
        fast.simulations,
        walked / fast_cpu_s.max(1e-9)
    );
    if std::env::args().any(|a| a == "--fast-only") {
        return; // for profiling the sweep
    }
    let (all_s, all_cpu_s, fast_all) = run(true, cores);
    println!("  sweep, {cores} threads {all_s:8.3} s wall {all_cpu_s:8.2} s CPU");
    let answers = |t: &tune::Tuning| serde_json::to_string(&t.budgets).expect("serialises");
    let mut identical = answers(&fast_all) == answers(&fast);
    if exact {
        // every setting the exact search evaluated would be one simulation;
        // simulating them all takes far longer than the search, so a spread
        // sample is simulated (and checked against the sweep, to the bit)
        // and the time per setting scaled up
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
        let (sample_s, sample_cpu_s, same) = timed(|| {
            let mut same = true;
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
                same &= f == r.mean_figures();
            }
            same
        });
        identical &= same;
        let per_sim_s = sample_s / samples.len() as f64;
        let per_sim_cpu_s = sample_cpu_s / samples.len() as f64;
        let naive_s = per_sim_s * fast.simulations as f64;
        let naive_cpu_s = per_sim_cpu_s * fast.simulations as f64;
        println!(
            "  re-simulation    {naive_s:8.1} s wall {naive_cpu_s:8.1} s CPU  (the same {} settings at {:.1} ms each, scaled from {} simulated)",
            fast.simulations,
            per_sim_s * 1e3,
            samples.len()
        );
        println!(
            "  speed-up         {:8.1} x wall {:8.1} x CPU",
            naive_s / fast_s,
            naive_cpu_s / fast_cpu_s.max(0.01)
        );
    } else {
        // the naive way in full: the same coarse search, every setting simulated
        let (naive_s, naive_cpu_s, naive) = run(false, 1);
        assert_eq!(naive.method, "simulation");
        identical &= answers(&naive) == answers(&fast) && naive.simulations == fast.simulations;
        println!(
            "  re-simulation    {naive_s:8.1} s wall {naive_cpu_s:8.1} s CPU  (the same {} settings simulated, 1 thread)",
            naive.simulations
        );
        println!(
            "  speed-up         {:8.1} x wall {:8.1} x CPU",
            naive_s / fast_s,
            naive_cpu_s / fast_cpu_s.max(0.01)
        );
    }
    println!("  identical answers (sweep and simulation; 1 and {cores} threads): {identical}");
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

/// `--compare-exact` (docs/tuning.md): the exact search as it was
/// (`tune::tune_exact_reference`) against today's (`tune::tune`), both
/// `--search exact` on `threads` threads, on the same trace in one run:
/// wall and CPU seconds, intervals walked, the ratio, and whether every
/// answer (each budget's and each size's best point) is the same.
fn compare_exact(prep: &Prepared, sim: &SimConfig, cfg: &TuneConfig, threads: usize) {
    let mut c = cfg.clone();
    c.search = SearchMode::Exact;
    c.threads = threads;
    let answers = |t: &tune::Tuning| {
        let v: Vec<_> = t
            .budgets
            .iter()
            .map(|b| {
                let rows: Vec<_> = b.sizes.iter().map(|r| (r.status, &r.best)).collect();
                (&b.best, rows)
            })
            .collect();
        serde_json::to_string(&v).expect("serialises")
    };
    let (new_s, new_cpu_s, new) =
        timed(|| tune::tune(prep, "fixed-wait", sim, &c, &|_, _| {}).expect("tunes"));
    println!(
        "  exact, today     {new_s:8.3} s wall {new_cpu_s:8.2} s CPU  ({threads} threads, {} settings evaluated, {:.3e} intervals walked)",
        new.simulations,
        new.walked_visits.unwrap_or(0) as f64
    );
    let (old_s, old_cpu_s, old) = timed(|| {
        tune::tune_exact_reference(prep, "fixed-wait", sim, &c, &|_, _| {}).expect("tunes")
    });
    println!(
        "  exact, before    {old_s:8.3} s wall {old_cpu_s:8.2} s CPU  ({threads} threads, {} settings evaluated, {:.3e} intervals walked)",
        old.simulations,
        old.walked_visits.unwrap_or(0) as f64
    );
    println!(
        "  ratio            {:8.2} x wall {:8.2} x CPU {:8.2} x intervals walked",
        old_s / new_s.max(1e-9),
        old_cpu_s / new_cpu_s.max(0.01),
        old.walked_visits.unwrap_or(0) as f64 / new.walked_visits.unwrap_or(1).max(1) as f64
    );
    let identical = answers(&new) == answers(&old);
    println!("  identical answers (every budget's and size's best point): {identical}");
    for b in &new.budgets {
        if let Some(ch) = &b.best {
            println!(
                "  {:>5}: {:.1} MB/s at t={} and {} KiB",
                b.budget_text,
                ch.bg_throughput_bytes_per_s / 1e6,
                ch.knob.as_deref().unwrap_or("-"),
                ch.request_size_bytes >> 10
            );
        }
    }
    assert!(identical, "the exact search and its reference disagree");
}
