//! `tune` on a small bursty synthetic workload: the tuned point meets its
//! budget when re-simulated (to the bit), throughput grows with the budget,
//! no untuned setting inside the budget beats the tuned one, and sizes above
//! the maximum delay are left out.

use fallow_core::policy::{self, IntervalRule};
use fallow_core::sim::{simulate, BgService, Prepared, SimConfig};
use fallow_core::tune::{self, Budget, Guarantee, SearchMode, TuneConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;
use rand::SeedableRng;

/// Hyperexponential arrivals (idle times from milliseconds to seconds), 20 % busy.
fn bursty() -> Prepared {
    let service = ServiceModel::Exponential { mean_ns: 5_000_000 };
    let t = SyntheticWorkload {
        arrivals: ArrivalProcess::from_spec("hyperexp:cv=4", None, Some(0.2), &service, 4096)
            .unwrap(),
        requests: 2000,
        service,
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.5,
        seed: 7,
    }
    .generate()
    .unwrap();
    Prepared::new(&t, None, 7).unwrap()
}

fn sim() -> SimConfig {
    SimConfig {
        bg_service: "size:base=8ms,knee=64KiB,rate=100MB"
            .parse::<BgService>()
            .unwrap(),
        switch_penalty_ns: 1_000_000,
        ..SimConfig::default()
    }
}

fn cfg(budgets: &str, sizes: &str) -> TuneConfig {
    TuneConfig {
        budgets: Budget::parse_list(budgets).unwrap(),
        sizes: tune::parse_sizes(sizes).unwrap(),
        max_delay_ns: None,
        threads: 2,
        fast: true,
        search: SearchMode::Auto,
        auto_limit_visits: tune::AUTO_EXACT_LIMIT_VISITS,
        cancel: None,
    }
}

#[test]
fn tuned_point_meets_its_budget_when_resimulated_exactly() {
    let prep = bursty();
    let sim = sim();
    let t = tune::tune(
        &prep,
        "waiting",
        &sim,
        &cfg("1ms,2%", "64KiB,4MiB"),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(t.policy, "fixed-wait");
    for tuned in &t.budgets {
        let best = tuned.best.as_ref().expect("a feasible point");
        assert!(best.spec.starts_with("fixed-wait:t="), "{}", best.spec);
        let mut pol = policy::build(&best.spec).unwrap();
        let cfg = SimConfig {
            bg_size_bytes: best.bg_size_bytes,
            ..sim.clone()
        };
        let r = simulate(&prep, pol.as_mut(), &cfg).unwrap();
        assert!(tuned.budget.meets(&r));
        assert_eq!(r.bg.throughput_bytes_per_s, best.bg_throughput_bytes_per_s);
        assert_eq!(r.fg.mean_added_delay_s, best.fg_mean_added_delay_s);
        assert_eq!(r.fg.slowdown, best.fg_slowdown);
        assert!(best.bg_throughput_bytes_per_s > 0.0);
    }
}

#[test]
fn throughput_grows_with_the_budget_and_beats_every_untuned_setting() {
    let prep = bursty();
    let sim = sim();
    let budgets = "0.5ms,1ms,2ms,4ms";
    let t = tune::tune(
        &prep,
        "fixed-wait",
        &sim,
        &cfg(budgets, "256KiB,4MiB"),
        &|_, _| {},
    )
    .unwrap();
    let tp: Vec<f64> = t
        .budgets
        .iter()
        .map(|b| b.best.as_ref().map_or(0.0, |c| c.bg_throughput_bytes_per_s))
        .collect();
    assert!(tp.windows(2).all(|w| w[0] <= w[1]), "{tp:?}");
    assert!(tp[3] > tp[0], "{tp:?}");
    // untuned settings on the search's coarse 1-2-5 grid, at every candidate
    // size: none inside a budget beats the tuned point
    for size in tune::parse_sizes("256KiB,4MiB").unwrap() {
        for wait in ["2ms", "20ms", "100ms", "200ms", "500ms", "1s", "5s"] {
            let mut pol = policy::build(&format!("fixed-wait:t={wait}")).unwrap();
            let cfg = SimConfig {
                bg_size_bytes: size,
                ..sim.clone()
            };
            let r = simulate(&prep, pol.as_mut(), &cfg).unwrap();
            for (b, &best) in t.budgets.iter().zip(&tp) {
                if b.budget.meets(&r) {
                    assert!(
                        r.bg.throughput_bytes_per_s <= best,
                        "{wait} at {size} B within {}: {} > tuned {best}",
                        b.budget_text,
                        r.bg.throughput_bytes_per_s
                    );
                }
            }
        }
    }
}

#[test]
fn sizes_above_the_max_delay_are_excluded() {
    let prep = bursty();
    let sim = sim();
    // 8 ms + (size − 64 KiB)/100 MB/s + 1 ms ≤ 20 ms: up to ~1.16 MB
    let c = TuneConfig {
        max_delay_ns: Some(20_000_000),
        ..cfg("4ms", "64KiB,1MiB,2MiB,4MiB")
    };
    let t = tune::tune(&prep, "fixed-wait", &sim, &c, &|_, _| {}).unwrap();
    let rows = &t.budgets[0].sizes;
    let status: Vec<&str> = rows.iter().map(|r| r.status).collect();
    assert_eq!(status[2..], ["excluded", "excluded"]);
    assert!(rows[2].best.is_none() && rows[2].steps == 0);
    assert!(rows[..2].iter().all(|r| r.single_request_delay_s <= 0.02));
    let best = t.budgets[0].best.as_ref().unwrap();
    assert!(best.request_size_bytes <= 1 << 20);
}

#[test]
fn every_knob_is_accepted_by_its_policy_and_moves_it() {
    // both ends of every ladder build and run; the aggressive end does at
    // least as much BG work (a full tune of every policy is too slow for a
    // debug test: one policy with its size as a parameter is tuned below)
    let prep = bursty();
    let cfg = SimConfig {
        bg_size_bytes: 1 << 20,
        ..sim()
    };
    for e in policy::registry() {
        let Some(k) = e.knob else { continue };
        let l = tune::ladder(&k);
        let run = |text: &str| {
            let mut p = policy::build(&format!("{}:{}={text}", e.name, k.name)).unwrap();
            simulate(&prep, p.as_mut(), &cfg).unwrap().bg.bytes
        };
        let (calm, eager) = (run(&l[0].text), run(&l[l.len() - 1].text));
        assert!(calm <= eager, "{}: {calm} > {eager}", e.name);
    }
}

#[test]
fn policies_with_a_size_parameter_or_no_knob_are_tuned() {
    let prep = bursty();
    let c = cfg("5%", "1MiB");
    let sized = policy::registry()
        .iter()
        .find(|e| e.size_param.is_some())
        .expect("adaptive-size takes its size as a parameter");
    let t = tune::tune(&prep, sized.name, &sim(), &c, &|_, _| {}).unwrap();
    let best = t.budgets[0].best.as_ref().unwrap();
    let p = sized.size_param.unwrap();
    assert_eq!(best.params[p], best.request_size_bytes.to_string());
    assert_eq!(best.bg_size_bytes, sim().bg_size_bytes);
    let plain = policy::registry()
        .iter()
        .find(|e| e.knob.is_none())
        .unwrap();
    let t = tune::tune(&prep, plain.name, &sim(), &c, &|_, _| {}).unwrap();
    assert!(t.knob.is_none());
    assert_eq!(t.simulations, 1);
    assert_eq!(t.budgets[0].sizes[0].steps, 1);
}

#[test]
fn the_tuned_parameter_cannot_also_be_fixed() {
    let prep = bursty();
    let e = tune::tune(
        &prep,
        "fixed-wait:t=1s",
        &sim(),
        &cfg("1ms", "64KiB"),
        &|_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`t` is the parameter tune searches"), "{e}");
    let e = tune::tune(
        &prep,
        "fixed-wait:size=1MiB",
        &sim(),
        &cfg("1ms", "64KiB"),
        &|_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("request size"), "{e}");
    assert!(tune::tune(&prep, "nope", &sim(), &cfg("1ms", "64KiB"), &|_, _| {}).is_err());
}

#[test]
fn progress_reaches_its_total() {
    let prep = bursty();
    let last = std::sync::Mutex::new((0, 0));
    tune::tune(
        &prep,
        "fixed-wait",
        &sim(),
        &cfg("1ms,2ms", "1MiB"),
        &|d, t| {
            *last.lock().unwrap() = (d, t);
        },
    )
    .unwrap();
    let (d, t) = *last.lock().unwrap();
    assert!(t > 0);
    assert_eq!(d, t);
}

#[test]
fn the_baseline_runs_at_64k_and_its_defaults() {
    let prep = bursty();
    let b = tune::baseline(&prep, &sim()).unwrap();
    assert_eq!(b.request_size_bytes, 65536);
    assert_eq!(b.spec, policy::BASELINE);
}

/// The exact search's estimated work, computed here from its definition:
/// idle intervals × ladder steps × sizes.
fn work_of(prep: &Prepared, policy_name: &str, sizes: usize) -> u64 {
    let knob = policy::entry(policy_name).unwrap().knob.unwrap();
    let steps = tune::ladder(&knob).len() as u64;
    prep.periods().idle_len_ns.len() as u64 * steps * sizes as u64
}

#[test]
fn auto_searches_exactly_up_to_its_limit_and_measures_above_it() {
    let prep = bursty();
    let sim = sim();
    let work = work_of(&prep, "fixed-wait", 2);
    assert!(work > 0);
    let run = |search: SearchMode, limit: u64| {
        let c = TuneConfig {
            search,
            auto_limit_visits: limit,
            ..cfg("1ms,4ms", "64KiB,1MiB")
        };
        tune::tune(&prep, "fixed-wait", &sim, &c, &|_, _| {}).unwrap()
    };
    let answers = |t: &tune::Tuning| serde_json::to_string(&t.budgets).unwrap();
    let exact = run(SearchMode::Exact, 0);
    assert_eq!(exact.guarantee, Guarantee::Exact);
    // the bound at the limit: exact without a pilot
    let at = run(SearchMode::Auto, work);
    assert_eq!(at.guarantee, Guarantee::Exact);
    assert_eq!(at.exact_work_visits, Some(work));
    assert_eq!(at.exact_estimate_basis, Some("bound"));
    let secs = work as f64 / tune::EXACT_VISITS_PER_S;
    assert!((at.exact_estimate_s.unwrap() - secs).abs() < 1e-12);
    assert!(!at.auto_fell_back() && at.search_note().is_none());
    assert_eq!(answers(&at), answers(&exact));
    // the bound one visit over: the search runs on one size (the pilot)
    // and decides on the intervals it walked: exact (keeping the pilot's
    // size, with the exact search's answers) iff its estimate is within
    // the limit (the 150k-request test below takes the exact branch)
    let over = run(SearchMode::Auto, work - 1);
    assert_eq!(over.exact_estimate_basis, Some("pilot"));
    let pilot_s = over.exact_estimate_s.unwrap();
    let limit_s = (work - 1) as f64 / tune::EXACT_VISITS_PER_S;
    if pilot_s <= limit_s {
        assert_eq!(over.guarantee, Guarantee::Exact);
        assert_eq!(answers(&over), answers(&exact));
    } else {
        assert!(over.auto_fell_back(), "{pilot_s} s over {limit_s} s");
    }
    // a limit of nothing: the pilot stops at once, coarse, and the output
    // says so with the flag and the estimate
    let none = run(SearchMode::Auto, 0);
    assert_eq!(none.guarantee, Guarantee::CoarseGrid);
    assert!(none.auto_fell_back());
    assert!(none.exact_estimate_s.unwrap() > 0.0);
    let note = none.search_note().unwrap();
    assert!(
        note.contains("--search exact") && note.contains("measured on one size"),
        "{note}"
    );
    assert!(
        !note.contains('\n') && !note.contains("  "),
        "one plain line: {note}"
    );
    // ... and carries a proven bound on what coarse may miss: no setting
    // exceeds it, so neither does any budget's exact optimum. Computed
    // here on its own: at the ladder's shortest wait t the c intervals
    // longer than t are used from t on, with at most (L − t + s − 1)/s
    // requests of service s each, summed before dividing (so at least
    // Σ ⌈(L − t)/s⌉, the count at that wait without shifts)
    let bound = none
        .exact_bound_bytes_per_s
        .expect("coarse where the sweep applies");
    let knob = policy::entry("fixed-wait").unwrap().knob.unwrap();
    let t_min = tune::ladder(&knob)
        .iter()
        .map(|s| s.value as u64)
        .min()
        .unwrap();
    let span_s = prep.span_ns() as f64 / 1e9;
    let gaps = &prep.periods().idle_len_ns;
    let used: Vec<u128> = gaps
        .iter()
        .filter(|&&l| l > t_min)
        .map(|&l| u128::from(l - t_min))
        .collect();
    let (by_hand, per_interval) = [64u64 << 10, 1 << 20]
        .iter()
        .map(|&size| {
            let s = u128::from(sim.bg_service.mean_ns(size).round() as u64);
            let room: u128 = used.iter().sum::<u128>() + used.len() as u128 * (s - 1);
            let ceil: u128 = used.iter().map(|&x| x.div_ceil(s)).sum();
            let per_s = |n: u128| n as f64 * size as f64 / span_s;
            (per_s(room / s), per_s(ceil))
        })
        .fold((0.0f64, 0.0f64), |(a, b), (x, y)| (a.max(x), b.max(y)));
    assert!(
        (bound - by_hand).abs() <= 1e-9 * by_hand && bound >= per_interval,
        "{bound} vs {by_hand} (per interval {per_interval})"
    );
    for (e, c) in exact.budgets.iter().zip(&none.budgets) {
        let got = |t: &tune::Tuned| t.best.as_ref().map_or(0.0, |b| b.bg_throughput_bytes_per_s);
        assert!(got(e) <= bound && got(c) <= got(e) + 1e-9, "{bound}");
    }
    assert!(note.contains("no setting can exceed"), "{note}");
    assert!(exact.exact_bound_bytes_per_s.is_none());
    // forced modes ignore the limit
    let coarse = run(SearchMode::Coarse, u64::MAX);
    assert_eq!(coarse.guarantee, Guarantee::CoarseGrid);
    assert!(
        coarse.search_note().is_none(),
        "asked for coarse: nothing to explain"
    );
    // the exact answer is the best of the ladder: never below the coarse one
    for (e, c) in exact.budgets.iter().zip(&coarse.budgets) {
        let thr = |t: &tune::Tuned| t.best.as_ref().map_or(0.0, |b| b.bg_throughput_bytes_per_s);
        assert!(
            thr(e) >= thr(c),
            "{}: {} < {}",
            e.budget_text,
            thr(e),
            thr(c)
        );
    }
}

/// The pilot (docs/tuning.md): a 150,000-request trace of the shape where auto used to
/// estimate the exact search at 12.9 s and answer the coarse search's
/// point, 44.8 % below the optimum (a bursty MMPP, 30 % busy, 30 sizes):
/// the pilot measures the exact search far under the limit, so `tune`
/// answers the exact optimum by default, as `--search exact` does.
#[test]
fn auto_answers_the_exact_optimum_on_150k_requests() {
    let service = ServiceModel::Exponential {
        mean_ns: 10_000_000,
    };
    let t = SyntheticWorkload {
        arrivals: "mmpp:cv=9,burst=1000"
            .parse::<ArrivalProcess>()
            .unwrap()
            .with_mean_rate(30.0)
            .unwrap(),
        requests: 150_000,
        service,
        request_size_bytes: 4096,
        capacity_bytes: 1 << 40,
        write_fraction: 0.3,
        seed: 21,
    }
    .generate()
    .unwrap();
    let prep = Prepared::new(&t, None, 21).unwrap();
    let sim = sim();
    let run = |search: SearchMode| {
        let c = TuneConfig {
            search,
            max_delay_ns: Some(50_400_000),
            ..cfg("1ms", "64KiB..4MiB")
        };
        tune::tune(&prep, "fixed-wait", &sim, &c, &|_, _| {}).unwrap()
    };
    let auto = run(SearchMode::Auto);
    // the bound alone would have sent it to the coarse search
    assert!(auto.exact_work_visits.unwrap() > tune::AUTO_EXACT_LIMIT_VISITS);
    assert_eq!(auto.exact_estimate_basis, Some("pilot"));
    assert_eq!(auto.guarantee, Guarantee::Exact, "{:?}", auto.search_note());
    let exact = run(SearchMode::Exact);
    let answers = |t: &tune::Tuning| serde_json::to_string(&t.budgets).unwrap();
    assert_eq!(answers(&auto), answers(&exact));
}

#[test]
fn policies_without_an_exact_search_are_coarse_whatever_the_mode() {
    let prep = bursty();
    let c = TuneConfig {
        search: SearchMode::Exact,
        ..cfg("4ms", "1MiB")
    };
    let t = tune::tune(&prep, "cdf-estimates", &sim(), &c, &|_, _| {}).unwrap();
    assert_eq!(t.guarantee, Guarantee::CoarseGrid);
    assert_eq!(t.exact_work_visits, None);
    assert!(t.search_note().is_none());
}

#[test]
fn search_mode_decision_and_names() {
    assert!(SearchMode::Auto.picks_exact(10, 10));
    assert!(!SearchMode::Auto.picks_exact(11, 10));
    assert!(SearchMode::Exact.picks_exact(u64::MAX, 0));
    assert!(!SearchMode::Coarse.picks_exact(0, u64::MAX));
    assert_eq!(SearchMode::default(), SearchMode::Auto);
    for m in [SearchMode::Exact, SearchMode::Coarse, SearchMode::Auto] {
        assert_eq!(SearchMode::parse(m.as_str()).unwrap(), m);
    }
    let e = SearchMode::parse("fast").unwrap_err().to_string();
    assert!(
        e.contains("search") && e.contains("auto, exact or coarse"),
        "{e}"
    );
    assert_eq!(tune::exact_work_visits(3, 4, 5), 60);
    assert_eq!(tune::exact_work_visits(usize::MAX, usize::MAX, 2), u64::MAX);
}

/// The coarse-grid guarantee, checked for policies with state (no bracket
/// is proved for them: docs/tuning.md): every point of the knob's 1-2-5
/// grid, simulated here at every candidate size, that meets a budget has
/// no more BG throughput than `tune`'s answer for that budget.
#[test]
fn coarse_answers_are_at_least_every_feasible_grid_point_for_policies_with_state() {
    let prep = bursty();
    let sim = sim();
    let sizes = "256KiB,1MiB";
    for name in ["busy-bee", "cdf-estimates", "kernel-idle-class"] {
        let t = tune::tune(&prep, name, &sim, &cfg("2ms,8ms", sizes), &|_, _| {}).unwrap();
        assert_eq!(t.guarantee, Guarantee::CoarseGrid, "{name}");
        let best: Vec<f64> = t
            .budgets
            .iter()
            .map(|b| b.best.as_ref().map_or(0.0, |c| c.bg_throughput_bytes_per_s))
            .collect();
        let entry = policy::entry(name).unwrap();
        let knob = entry.knob.expect("these policies have a knob");
        let grid: Vec<tune::Step> = tune::ladder(&knob)
            .into_iter()
            .filter(|s| s.coarse)
            .collect();
        assert!(grid.len() >= 5, "{name}: {} grid points", grid.len());
        let mut feasible = 0;
        for size in tune::parse_sizes(sizes).unwrap() {
            for step in &grid {
                let mut cfg = sim.clone();
                let spec = match entry.size_param {
                    Some(p) => format!("{name}:{}={},{p}={size}", knob.name, step.text),
                    None => {
                        cfg.bg_size_bytes = size;
                        format!("{name}:{}={}", knob.name, step.text)
                    }
                };
                let mut pol = policy::build(&spec).unwrap();
                let r = simulate(&prep, pol.as_mut(), &cfg).unwrap();
                for (b, &tp) in t.budgets.iter().zip(&best) {
                    if b.budget.meets(&r) {
                        feasible += 1;
                        assert!(
                            r.bg.throughput_bytes_per_s <= tp,
                            "{spec} at {size} B within {}: {} > tuned {tp}",
                            b.budget_text,
                            r.bg.throughput_bytes_per_s
                        );
                    }
                }
            }
        }
        // the check has teeth: some grid points are inside a budget
        assert!(feasible > 0, "{name}: no grid point within any budget");
    }
}

/// Busy periods and idle intervals from a seeded generator of one of
/// three shapes: light-tailed idle lengths (most intervals used at every
/// wait that matters), heavy-tailed ones (1 µs to 10 s, most short), and
/// idle lengths close to multiples of a BG service (residuals near 0 and
/// near a whole service, where `⌈·⌉` rounding matters most).
fn generated_prep(n: usize, seed: u64) -> Prepared {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 11
    };
    let shape = seed % 3;
    let idle: Vec<u64> = (0..n)
        .map(|_| {
            let r = next();
            match shape {
                0 => 1 + r % 60_000_000,
                1 => 1_000 + ((r % 10_000_000_000) >> (r % 14)),
                _ => (1 + r % 40) * 8_000_000 + (r >> 20) % 5_000 - 2_500,
            }
        })
        .collect();
    let busy: Vec<u64> = (0..=n).map(|_| 1_000_000 + next() % 20_000_000).collect();
    let reqs: Vec<u32> = (0..=n).map(|_| 1 + (next() % 5) as u32).collect();
    Prepared::from_periods(&busy, &reqs, &idle).unwrap()
}

/// The exact search ordered and bounded out by the
/// no-shift start count (`FastSweep::started_no_shift`) answers exactly
/// what the search before it (`tune::tune_exact_reference`, bounded by
/// `started_upper_bound`) answers — every budget's best point and every
/// size's, to the bit (the settings each evaluates differ: the order
/// differs, so the best points are found at other times) — on generated
/// traces of three shapes × the four policies the sweep evaluates × two
/// sets of three budgets × four sizes (one with a constant BG service,
/// which tune allows only alone), with and without a switch penalty; and
/// it walks fewer intervals in all (summed over the cases). The bound
/// itself is checked at every seventh ladder step of two sizes, by hand
/// (`Σ ⌈(L − off)/s⌉`), against the started count the walk gives and the
/// old bound.
#[test]
fn the_faster_exact_search_answers_what_the_reference_does() {
    let services = [
        ("size:base=8ms,knee=64KiB,rate=100MB", 0u64),
        ("size:base=8ms,knee=64KiB,rate=100MB", 1_500_000),
        ("const:8ms", 0),
        ("const:3ms", 700_000),
    ];
    let policies = [
        "fixed-wait",
        "lossless-waiting",
        "oracle",
        "preemption-interval",
    ];
    let (mut cases, mut walked_new, mut walked_old) = (0, 0u64, 0u64);
    for seed in 0..6u64 {
        let prep = generated_prep(700, seed);
        let (svc, penalty) = services[seed as usize % services.len()];
        let sim = SimConfig {
            bg_service: svc.parse::<BgService>().unwrap(),
            switch_penalty_ns: penalty,
            ..SimConfig::default()
        };
        // the bound: ≥ what the walk starts, ≤ the old bound, at every ladder step
        let sweep = tune::FastSweep::new(&prep, &sim).unwrap();
        for name in &policies[..3] {
            let entry = policy::entry(name).unwrap();
            let rule = entry.interval_rule.unwrap();
            let ladder = tune::ladder(entry.knob.as_ref().unwrap());
            let values: Vec<f64> = ladder.iter().map(|s| s.value).collect();
            for size in [64u64 << 10, 1 << 20] {
                let fast = sweep.started_no_shift(rule, &values, size, &sim);
                for (k, &v) in values.iter().enumerate().step_by(7) {
                    let walked = sweep.totals(rule, v, size, &sim, None).unwrap();
                    let old = sweep.started_upper_bound(rule, v, size, &sim);
                    assert!(
                        walked.bg_completed <= fast[k] && fast[k] <= old,
                        "{name} seed {seed} {size} B at {v}: started {} no-shift {} old {old}",
                        walked.bg_completed,
                        fast[k]
                    );
                    // by hand: Σ ⌈(L − off)/s⌉ over the used intervals (no shift)
                    // deterministic service: the stream draws nothing
                    let s = sim
                        .bg_service
                        .sample_ns(size, &mut rand_pcg::Pcg64Mcg::seed_from_u64(0));
                    let gaps = &prep.periods().idle_len_ns;
                    let by_hand: u64 = match rule {
                        IntervalRule::WaitThenRun => gaps
                            .iter()
                            .filter(|&&l| l > v as u64)
                            .map(|&l| (l - v as u64).div_ceil(s))
                            .sum(),
                        IntervalRule::WholeIfLonger => gaps
                            .iter()
                            .filter(|&&l| l > v as u64)
                            .map(|&l| l.div_ceil(s))
                            .sum(),
                        IntervalRule::WholeIfAmongLongestPercent => {
                            let mut d = gaps.clone();
                            d.sort_unstable_by(|a, b| b.cmp(a));
                            let kk = (v / 100.0 * d.len() as f64).round() as usize;
                            if kk == 0 {
                                0
                            } else {
                                let th = d[kk.min(d.len()) - 1];
                                d.iter().filter(|&&l| l >= th).map(|&l| l.div_ceil(s)).sum()
                            }
                        }
                    };
                    assert_eq!(fast[k], by_hand, "{name} seed {seed} {size} B at {v}");
                }
            }
        }
        for name in &policies {
            for budgets in ["1ms,2ms,4ms", "300us,5%,10ms"] {
                let c = TuneConfig {
                    search: SearchMode::Exact,
                    threads: 2,
                    // a constant service charges nothing for size: one size (tune refuses more)
                    ..cfg(
                        budgets,
                        if svc.starts_with("const") {
                            "256KiB"
                        } else {
                            "64KiB,256KiB,1MiB,4MiB"
                        },
                    )
                };
                let new = tune::tune(&prep, name, &sim, &c, &|_, _| {}).unwrap();
                let old = tune::tune_exact_reference(&prep, name, &sim, &c, &|_, _| {}).unwrap();
                assert_eq!(new.guarantee, Guarantee::Exact, "{name}");
                assert_eq!(old.guarantee, Guarantee::Exact, "{name}");
                // every answer, not the settings each evaluated
                let answers = |t: &tune::Tuning| {
                    let v: Vec<_> = t
                        .budgets
                        .iter()
                        .map(|b| {
                            let rows: Vec<_> =
                                b.sizes.iter().map(|r| (r.status, r.best.clone())).collect();
                            (b.best.clone(), rows)
                        })
                        .collect();
                    serde_json::to_string(&v).unwrap()
                };
                assert_eq!(
                    answers(&new),
                    answers(&old),
                    "{name} seed {seed} {svc} +{penalty} ns, budgets {budgets}"
                );
                walked_new += new.walked_visits.unwrap();
                walked_old += old.walked_visits.unwrap();
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 6 * 4 * 2);
    assert!(
        walked_new < walked_old,
        "{walked_new} intervals walked against {walked_old}"
    );
}
