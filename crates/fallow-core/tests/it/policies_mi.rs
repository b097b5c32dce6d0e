//! The findings of Mi et al. (*Efficient Management of Idleness in Storage
//! Systems*, §4–§5) and the clairvoyant bounds of Practical Scrubbing
//! (§V-B, Fig. 14), on synthetic workloads built as in Mi et al. §4.1.
//!
//! Setup (§4.1): a FCFS single server, exponential FG service with mean
//! 1 ms, BG work always available with exponential service, "short" BG
//! requests as long as FG ones (1 ms) and "long" ones 7× longer (7 ms); FG
//! inter-arrival times Erlang (CV 1/3, §3.2 footnote 3) for low-variability
//! idle intervals, lognormal (CV 3) for high-variability ones; FG-only
//! utilisation 10, 30 and 70 %. Slowdown is relative (mean FG response time
//! with BG / without − 1) and the target is the paper's 7 % line.
//!
//! Expectations come from the paper and from facts derived here (CV gate,
//! sums over intervals), never from earlier output of the code under test.
//! Each workload is a fixed seed, so a run is deterministic; the margins
//! quoted in comments are what the runs showed when the tests were
//! written, to judge how far each assertion is from failing.

use fallow_core::policy::{self, BurstyCdfEstimates, BurstyCdfEstimatesConfig, CdfBased, Policy};
use fallow_core::sim::{simulate, BgService, Prepared, SimConfig, SimResult};
use fallow_core::stats::{LagPairs, Summary};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;

const FG_MEAN_NS: u64 = 1_000_000;
const SHORT_BG_NS: u64 = FG_MEAN_NS;
const LONG_BG_NS: u64 = 7 * FG_MEAN_NS;
/// The paper's slowdown target (§4.1: "a slowdown threshold of 7 %").
const TARGET: f64 = 0.07;

fn prep(arrivals: ArrivalProcess, requests: usize, seed: u64) -> Prepared {
    let t = SyntheticWorkload {
        arrivals,
        requests,
        service: ServiceModel::Exponential {
            mean_ns: FG_MEAN_NS,
        },
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.5,
        seed,
    }
    .generate()
    .unwrap();
    Prepared::new(&t, None, 0).unwrap()
}

/// FG arrivals at `utilization` (ρ = λ·E[S]).
fn erlang(utilization: f64) -> ArrivalProcess {
    ArrivalProcess::Erlang {
        rate_per_s: utilization / (FG_MEAN_NS as f64 / 1e9),
        k: 9,
    }
}

fn lognormal(utilization: f64) -> ArrivalProcess {
    ArrivalProcess::Lognormal {
        rate_per_s: utilization / (FG_MEAN_NS as f64 / 1e9),
        cv: 3.0,
    }
}

fn cfg(bg_mean_ns: u64) -> SimConfig {
    SimConfig {
        bg_service: BgService::Exponential {
            mean_ns: bg_mean_ns,
        },
        seed: 3,
        ..SimConfig::default()
    }
}

fn run_policy(p: &Prepared, pol: &mut dyn Policy, bg_mean_ns: u64) -> SimResult {
    simulate(p, pol, &cfg(bg_mean_ns)).unwrap()
}

fn run(p: &Prepared, spec: &str, bg_mean_ns: u64) -> SimResult {
    let mut pol = policy::build(spec).unwrap();
    run_policy(p, pol.as_mut(), bg_mean_ns)
}

fn idle_cv(p: &Prepared) -> f64 {
    let x: Vec<f64> = p
        .periods()
        .idle_len_ns
        .iter()
        .map(|&v| v as f64 / 1e9)
        .collect();
    Summary::of(&x).cv
}

/// §3.1/§4.2: with low-CV idle intervals the CDF-based policy does not
/// wait, so it is the aggressive policy — the same decisions, hence the
/// same run to the byte.
#[test]
fn cdf_based_waits_zero_on_erlang_idle_times() {
    for u in [0.1, 0.3, 0.7] {
        let p = prep(erlang(u), 50_000, 1);
        let cv = idle_cv(&p);
        assert!(cv < 1.0, "u={u}: Erlang idle CV {cv} should be < 1");
        for bg in [SHORT_BG_NS, LONG_BG_NS] {
            let mut cdf = CdfBased::new(Default::default());
            let a = run(&p, "aggressive", bg);
            let c = run_policy(&p, &mut cdf, bg);
            assert_eq!(cdf.wait_ns(), 0, "u={u}: learned wait");
            let mut a = serde_json::to_value(&a).unwrap();
            let mut c = serde_json::to_value(&c).unwrap();
            a["policy"] = "-".into();
            c["policy"] = "-".into();
            assert_eq!(a, c, "u={u}, bg={bg} ns: cdf-based should equal aggressive");
        }
    }
}

/// The cdf-estimates run with T tuned (bisection on log T) to bring the
/// slowdown as close below the target as T ≤ 1 allows: into [6 %, 7 %],
/// or below 7 % at T = 1.
fn tune_t(p: &Prepared, bg: u64) -> (f64, SimResult) {
    let at = |t: f64| run(p, &format!("cdf-estimates:T={t}"), bg);
    let r = at(1.0);
    if r.fg.slowdown <= TARGET {
        return (1.0, r);
    }
    let (mut lo, mut hi) = (1e-4f64.ln(), 0.0f64);
    for _ in 0..30 {
        let mid = 0.5 * (lo + hi);
        let r = at(mid.exp());
        if r.fg.slowdown > TARGET {
            hi = mid;
        } else if r.fg.slowdown < TARGET - 0.01 {
            lo = mid;
        } else {
            return (mid.exp(), r);
        }
    }
    panic!("no T in [1e-4, 1] puts the slowdown in [6 %, 7 %]");
}

/// Slowdown "near the target", as the paper's Figures 3 and 5 draw it: at
/// or below the 7 % line, and not more than one point below it.
fn near_target(slowdown: f64) -> bool {
    (TARGET - 0.01..=TARGET).contains(&slowdown)
}

/// §4.2–§4.3 (Figs. 3 and 5): CDF/w-estimates "consistently meets the
/// performance target", "always below or right at the 7 % slowdown target",
/// thanks to T in Eq. 1, which §4 says is adjusted to the workload; the
/// mean-based policy has no such knob and misses — its slowdown is far
/// above 7 %, or (long BG jobs, Erlang idle times, 30 % and 70 %) far below
/// it because it starves BG work ("only 1000 for 30 % and none for 70 %",
/// §4.2).
///
/// What reproduces: with T tuned per configuration, cdf-estimates is near
/// the target in all 12 configurations (T from 0.0065 to 1; at T = 1 it is
/// allowed to stay below, which happens once, lognormal/short/70 %, the
/// paper's own T = 1 case) and always completes BG work; mean-based is near
/// the target in none — above it in 10 (by 0.9 points at least:
/// lognormal/short/70 %), below it with fewer BG jobs than cdf-estimates in
/// 2. With the default T = 1 instead of a tuned one, cdf-estimates'
/// slowdown is 5 %–510 %: T = 1 alone does not meet the target.
#[test]
fn cdf_estimates_meets_the_target_where_mean_based_cannot() {
    let (mut over, mut starved) = (0, 0);
    for (family, arrivals) in [
        ("erlang", erlang as fn(f64) -> ArrivalProcess),
        ("lognormal", lognormal),
    ] {
        for bg in [SHORT_BG_NS, LONG_BG_NS] {
            for u in [0.1, 0.3, 0.7] {
                let case = format!("{family}, bg {} ms, u {u}", bg / 1_000_000);
                let p = prep(arrivals(u), 100_000, 11);
                let (t, est) = tune_t(&p, bg);
                let s = est.fg.slowdown;
                assert!(
                    near_target(s) || (t == 1.0 && s <= TARGET),
                    "{case}: cdf-estimates slowdown {s} at T={t}"
                );
                assert!(est.bg.completed > 0, "{case}: cdf-estimates starved");

                let mean = run(&p, "mean-based", bg);
                println!(
                    "{case}: cdf-estimates T={t:.4} slowdown {s:.4} BG {} | mean-based slowdown {:.4} BG {}",
                    est.bg.completed, mean.fg.slowdown, mean.bg.completed
                );
                assert!(
                    !near_target(mean.fg.slowdown),
                    "{case}: mean-based is near the target: {}",
                    mean.fg.slowdown
                );
                if mean.fg.slowdown > TARGET {
                    over += 1;
                } else {
                    assert!(
                        mean.bg.completed < est.bg.completed,
                        "{case}: mean-based below the target with {} BG jobs vs {}",
                        mean.bg.completed,
                        est.bg.completed
                    );
                    starved += 1;
                }
            }
        }
    }
    assert_eq!((over, starved), (10, 2));
}

/// Piecewise-linear interpolation of `y` at `x` over points sorted by x.
fn interpolate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    points.windows(2).find_map(|w| {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        (x0 <= x && x <= x1 && x1 > x0).then(|| y0 + (x - x0) / (x1 - x0) * (y1 - y0))
    })
}

/// §5 (Figs. 8 and 9): exploiting burstiness completes a given amount of BG
/// work with less FG slowdown. Workload as §3.2 footnote 4 (there the
/// service process is an MMPP too; here it is exponential): MMPP arrivals
/// with mean rate 1/100 of the service rate and inter-arrival CV 9 (bursts
/// of 1000 arrivals), long BG jobs 300× the FG service time (§5).
///
/// Precisely: for T on a grid, bursty-cdf-estimates (ρ = 0.5) has a lower
/// slowdown than cdf-estimates has at the same number of completed BG jobs
/// (interpolated along cdf-estimates' own T grid). The paper's gap is
/// large (110 % vs 12 % at its "high" level); here it is 15–25 % of the
/// slowdown (e.g. 38.4 against 50.6, both × the baseline, at 8553 BG jobs),
/// because with exponential FG service the baseline response time is 1 ms
/// and every collision with a 300 ms job dominates it, whatever the policy.
#[test]
fn bursty_cdf_estimates_is_gentler_for_equal_bg_work_on_mmpp() {
    let arrivals =
        ArrivalProcess::mmpp2_fitted(1e9 / FG_MEAN_NS as f64 / 100.0, 9.0, 1000.0).unwrap();
    let p = prep(arrivals, 300_000, 21);
    let bg = 300 * FG_MEAN_NS;

    // the idle intervals are bursty as in Fig. 2(d) / Fig. 7
    let idle: Vec<f64> = p.periods().idle_len_ns.iter().map(|&v| v as f64).collect();
    let lp = LagPairs::of(&idle, 9);
    let ll1 = lp.lags[0].large_large.unwrap();
    assert!(ll1 > 0.6, "P(large→large) at lag 1 = {ll1}");
    // ... but not as the paper's Fig. 2(d): its P(large→large) falls from
    // 0.65 at lag 1 to 0.35 at lag 9 (§3.2); this MMPP fit's falls to under
    // 0.25 by lag 9, and under 1 % of its intervals are large at all: the
    // large intervals come in short runs, which limits what predicting
    // "large after large" can gain (docs/policies.md)
    let ll9 = lp.lags[8].large_large.unwrap();
    let large = 1.0 - lp.small_fraction;
    println!(
        "large intervals {:.2} %, P(large→large) lag 1 {ll1:.3}, lag 9 {ll9:.3}",
        large * 100.0
    );
    assert!(ll9 < 0.25 && large < 0.01, "lag 9 {ll9}, large {large}");

    let grid = [0.05, 0.1, 0.2, 0.5, 1.0];
    let plain: Vec<(f64, f64)> = grid
        .iter()
        .map(|t| {
            let r = run(&p, &format!("cdf-estimates:T={t}"), bg);
            (r.bg.completed as f64, r.fg.slowdown)
        })
        .collect();
    let mut compared = 0;
    for &t in &grid {
        let mut pol = BurstyCdfEstimates::new(BurstyCdfEstimatesConfig {
            t,
            ..Default::default()
        });
        let r = run_policy(&p, &mut pol, bg);
        // it learned the burstiness online (from the intervals it saw,
        // shortened by its own collisions)
        let online = pol.p_large_large().unwrap();
        assert!((online - ll1).abs() < 0.1, "online {online} vs {ll1}");
        let work = r.bg.completed as f64;
        println!(
            "T={t}: bursty slowdown {:.3} BG {work}; cdf-estimates at equal BG {:?}; P(LL) online {online:.3} offline {ll1:.3}",
            r.fg.slowdown,
            interpolate(&plain, work)
        );
        if let Some(s_plain) = interpolate(&plain, work) {
            assert!(
                r.fg.slowdown < s_plain,
                "T={t}: bursty {} vs cdf-estimates {s_plain} at {work} BG jobs",
                r.fg.slowdown
            );
            compared += 1;
        }
    }
    // bursty does more work per T, so its T = 1 point lies beyond the range
    assert!(compared >= 4, "only {compared} points comparable");
}

/// The most idle time the oracle uses with at most `collisions`
/// collisions: bisection on x for the largest x whose run collides no more
/// (used time grows with x). Returns (x, that run).
fn oracle_at(p: &Prepared, bg: u64, collisions: u64) -> (f64, SimResult) {
    let at = |x: f64| {
        let r = run(p, &format!("oracle:x={x}"), bg);
        assert!(r.clairvoyant);
        r
    };
    let n = p.periods().idle_len_ns.len() as f64;
    // x = c/n would collide c times without shifts; shifts from earlier
    // collisions swallow some chosen intervals, so start there and go up
    let mut lo = (100.0 * collisions as f64 / n).min(100.0);
    let mut best = at(lo);
    if best.fg.collisions > collisions {
        lo = 0.0;
        best = at(0.0);
    }
    let top = at(100.0);
    if top.fg.collisions <= collisions {
        return (100.0, top);
    }
    let mut hi = 100.0f64;
    for _ in 0..12 {
        let mid = 0.5 * (lo + hi);
        let r = at(mid);
        if r.fg.collisions <= collisions {
            (lo, best) = (mid, r);
        } else {
            hi = mid;
        }
    }
    (lo, best)
}

/// Practical Scrubbing §V-B: the oracle uses the x % longest intervals
/// whole, one collision each, and no deployable policy that runs BG until
/// FG arrives uses more idle time for as many collisions. (Lossless-waiting
/// is itself a threshold oracle; see its test.) Checked against every such
/// policy, and on high-variability idle times also against the budgeted
/// estimate policies, with the oracle given at most the policy's number of
/// collisions (+0.5 %, see below).
#[test]
fn oracle_uses_at_least_as_much_idle_time_as_any_policy_at_equal_collisions() {
    let until_fg = [
        "aggressive",
        "mean-based",
        "cdf-based",
        "fixed-wait:t=1ms",
        "fixed-wait:t=2ms",
        "fixed-wait:t=5ms",
        "fixed-wait:t=20ms",
    ];
    let budgeted = [
        "cdf-estimates:T=1",
        "cdf-estimates:T=0.1",
        "bursty-cdf-estimates:T=0.3",
    ];
    for (family, arrivals, specs) in [
        ("erlang", erlang(0.3), until_fg.to_vec()),
        (
            "lognormal",
            lognormal(0.3),
            [&until_fg[..], &budgeted[..]].concat(),
        ),
    ] {
        let p = prep(arrivals, 50_000, 11);
        for bg in [SHORT_BG_NS, LONG_BG_NS] {
            for spec in &specs {
                let r = run(&p, spec, bg);
                // the oracle's collisions move in jumps (θ steps between
                // interval lengths, and its collisions shift later
                // intervals): grant it 0.5 % (at least 2) more
                let budget = r.fg.collisions + (r.fg.collisions / 200).max(2);
                let (x, o) = oracle_at(&p, bg, budget);
                println!(
                    "{family} bg {bg}: {spec}: {:.2} s / {} collisions; oracle {:.2} s / {}",
                    r.bg.busy_s, r.fg.collisions, o.bg.busy_s, o.fg.collisions
                );
                // 0.01 %: once one decision differs the two runs draw BG
                // service times in a different order, and their shifts
                // differ by chance (seen: 24 ns in 116 s, aggressive
                // against oracle(100 %), which skips a shifted interval
                // shorter than any in the trace)
                assert!(
                    o.bg.busy_s >= r.bg.busy_s * (1.0 - 1e-4),
                    "{family}, bg {bg}: {spec} used {} s with {} collisions, oracle(x={x}) {} s with {}",
                    r.bg.busy_s,
                    r.fg.collisions,
                    o.bg.busy_s,
                    o.fg.collisions
                );
            }
        }
    }
}

/// Where the oracle is not a ceiling: a budgeted policy uses idle time
/// without colliding (its burst ends before the FG arrival), which an
/// oracle that uses whole intervals cannot match at the same collision
/// count. On low-CV Erlang idle times, cdf-estimates with a small T uses
/// more idle time than the oracle does with as many collisions. So "oracle
/// ≥ every policy" holds for policies that run BG until FG arrives (and,
/// on high-CV idle times, for the estimate policies too), not in general.
/// (When written: 37.9 s with 5944 collisions against the oracle's 37.1 s
/// with 5971.)
#[test]
fn a_budgeted_policy_can_beat_the_whole_interval_oracle_on_low_cv() {
    let p = prep(erlang(0.3), 100_000, 11);
    let r = run(&p, "cdf-estimates:T=0.1", SHORT_BG_NS);
    // the same 0.5 % grace as above, in the oracle's favour
    let (x, o) = oracle_at(
        &p,
        SHORT_BG_NS,
        r.fg.collisions + (r.fg.collisions / 200).max(2),
    );
    println!(
        "cdf-estimates:T=0.1 {} s / {} collisions; oracle x={x}: {} s / {}",
        r.bg.busy_s, r.fg.collisions, o.bg.busy_s, o.fg.collisions
    );
    assert!(
        r.bg.busy_s > o.bg.busy_s,
        "cdf-estimates {} s, oracle {} s with at most {} collisions",
        r.bg.busy_s,
        o.bg.busy_s,
        r.fg.collisions
    );
}

/// Practical Scrubbing §V-B: Lossless Waiting uses the intervals Waiting
/// uses, from their start. It collides in the same intervals (those longer
/// than t; only the shifts its collisions cause differ, so the counts
/// agree to within 2 %: 0.7 % at most when written) and gains the waits: used(lossless) ≈ used(fixed-wait) +
/// t · collisions. It is also exactly the oracle with threshold t + 1 ns
/// (both use, whole, the intervals longer than t), which is why Practical
/// Scrubbing finds it "very close" to the oracle.
#[test]
fn lossless_waiting_bounds_fixed_wait_with_the_same_collisions() {
    let p = prep(lognormal(0.3), 100_000, 11);
    for bg in [SHORT_BG_NS, LONG_BG_NS] {
        for t_ms in [1u64, 5, 20, 100] {
            let f = run(&p, &format!("fixed-wait:t={t_ms}ms"), bg);
            let l = run(&p, &format!("lossless-waiting:t={t_ms}ms"), bg);
            let o = run(&p, &format!("oracle:min={}ns", t_ms * 1_000_000 + 1), bg);
            let mut lj = serde_json::to_value(&l).unwrap();
            let mut oj = serde_json::to_value(&o).unwrap();
            lj["policy"] = "-".into();
            oj["policy"] = "-".into();
            assert_eq!(lj, oj, "t={t_ms}ms: lossless-waiting vs oracle(min=t+1ns)");
            assert!(l.clairvoyant && !f.clairvoyant);
            let (cf, cl) = (f.fg.collisions as f64, l.fg.collisions as f64);
            assert!(
                (cl - cf).abs() <= (0.02 * cf).max(2.0),
                "t={t_ms}ms bg={bg}: collisions {cl} vs {cf}"
            );
            assert!(l.bg.busy_s >= f.bg.busy_s, "t={t_ms}ms bg={bg}");
            let gain = l.bg.busy_s - f.bg.busy_s;
            println!(
                "t={t_ms}ms bg={bg}: fixed {:.2} s / {} coll; lossless {:.2} s / {} coll",
                f.bg.busy_s, f.fg.collisions, l.bg.busy_s, l.fg.collisions
            );
            let want = t_ms as f64 / 1e3 * cf;
            assert!(
                (gain - want).abs() <= 0.02 * want,
                "t={t_ms}ms bg={bg}: gained {gain} s, t·collisions = {want} s"
            );
        }
    }
}
