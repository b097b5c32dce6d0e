//! Online re-tuning through a workload change (Busy Bee §5.3's
//! concatenated traces): two M/M/1 halves, a quiet one (λ = 2/s) and a
//! busy one (λ = 50/s), played one after the other.
//!
//! The offline optimum of each half comes from theory, not from `tune`:
//! idle intervals of an M/M/1 queue are Exp(λ), so under fixed-wait(t)
//! with endless exponential BG work of mean m the FG arrival that ends an
//! idle interval longer than t (probability p = e^{−λt}) waits an Exp(m)
//! residual, and the mean delay added per FG request is (tests/it/sim.rs)
//!
//!   d(t) = p·m·(1 + λm) / (1 + λpm),
//!
//! so the budget b is met with equality at p* = b / (m·(1 + λm − λb)),
//! t* = −ln(p*)/λ: 1.16 s for the quiet half, 53.5 ms for the busy one
//! (m = 10 ms, b = 1 ms). Each half's tuned wait is useless on the other:
//! the quiet half's wait never fires on the busy half (no BG work at
//! all), and the busy half's wait costs the quiet half d ≈ 8.9 ms.

use fallow_core::policy;
use fallow_core::sim::{simulate, simulate_split, BgService, Prepared, SimConfig, Split};
use fallow_core::trace::Trace;
use fallow_core::tune::online::{OnlineConfig, OnlineTuner, Refit};
use fallow_core::tune::Budget;
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;

const M_S: f64 = 0.010; // BG service mean
const BUDGET_S: f64 = 0.001;
const QUIET: f64 = 2.0; // arrivals per second
const BUSY: f64 = 50.0;
const WINDOW: usize = 1000; // idle intervals
const EVERY: usize = 250;

fn mm1(rate_per_s: f64, requests: usize, seed: u64) -> Trace {
    SyntheticWorkload {
        arrivals: ArrivalProcess::Poisson { rate_per_s },
        requests,
        service: ServiceModel::Exponential { mean_ns: 5_000_000 },
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.5,
        seed,
    }
    .generate()
    .unwrap()
}

/// The wait that meets the budget exactly on an M/M/1 half (module docs).
fn theory_wait_s(lambda: f64) -> f64 {
    let p = BUDGET_S / (M_S * (1.0 + lambda * M_S - lambda * BUDGET_S));
    -p.ln() / lambda
}

fn added_delay_s(lambda: f64, t_s: f64) -> f64 {
    let p = (-lambda * t_s).exp();
    p * M_S * (1.0 + lambda * M_S) / (1.0 + lambda * p * M_S)
}

fn sim() -> SimConfig {
    SimConfig {
        bg_service: BgService::Exponential {
            mean_ns: (M_S * 1e9) as u64,
        },
        ..SimConfig::default()
    }
}

struct Run {
    split: Split,
    history: Vec<Refit>,
    /// When the second half starts, s.
    switch_s: f64,
}

/// `first` then `second` (1 s apart) under `spec`, or under the online
/// tuner of fixed-wait when `spec` is `None`.
fn run(first: &Trace, second: &Trace, spec: Option<&str>) -> Run {
    let both = Trace::concat(first, second, 1_000_000_000).unwrap();
    let prep = Prepared::new(&both, None, 1).unwrap();
    let switch_s = (first.span_ns() + 1_000_000_000) as f64 / 1e9;
    let cfg = OnlineConfig {
        window: WINDOW,
        every: EVERY,
        ..OnlineConfig::new(Budget::AddedDelay {
            ns: (BUDGET_S * 1e9) as u64,
        })
    };
    match spec {
        Some(spec) => {
            let (mut p, mut q) = (policy::build(spec).unwrap(), policy::build(spec).unwrap());
            let split = simulate_split(&prep, first.len(), p.as_mut(), q.as_mut(), &sim()).unwrap();
            Run {
                split,
                history: Vec::new(),
                switch_s,
            }
        }
        None => {
            let mut p = OnlineTuner::new("fixed-wait", cfg.clone()).unwrap();
            let mut q = OnlineTuner::new("fixed-wait", cfg).unwrap();
            let split = simulate_split(&prep, first.len(), &mut p, &mut q, &sim()).unwrap();
            Run {
                split,
                history: p.history().to_vec(),
                switch_s,
            }
        }
    }
}

/// How far apart two waits are, in decades.
fn decades(a_s: f64, b_s: f64) -> f64 {
    (a_s / b_s).log10().abs()
}

fn report(name: &str, r: &Run) {
    for (k, p) in r.split.parts.iter().enumerate() {
        println!(
            "{name} half {}: {:.3} MB/s, added delay {:.3} ms (budget {} ms), {} requests",
            k + 1,
            p.bg_throughput_bytes_per_s / 1e6,
            p.mean_added_delay_s * 1e3,
            BUDGET_S * 1e3,
            p.requests
        );
    }
}

/// The online wait is near the first half's optimum late in the first
/// half and moves to near the second half's within two windows of the
/// switch (within `every` intervals when the old wait breaks the budget:
/// the collision check calls a refit early); each half stays near the
/// budget with at least half the throughput of its own optimum, where the
/// first half's optimum breaks the budget or gets nothing done on the
/// second half.
fn tracks(first_rate: f64, second_rate: f64, requests: [usize; 2]) {
    let a = mm1(first_rate, requests[0], 11);
    let b = mm1(second_rate, requests[1], 12);
    let (ta, tb) = (theory_wait_s(first_rate), theory_wait_s(second_rate));
    // the premise: each optimum is useless on the other half
    assert!(decades(ta, tb) > 1.0, "{ta} vs {tb}");

    let online = run(&a, &b, None);
    let fixed = run(
        &a,
        &b,
        Some(&format!("fixed-wait:t={}us", (ta * 1e6).round())),
    );
    report("online", &online);
    report("first half's optimum", &fixed);
    let h = &online.history;
    for r in h {
        let early = r.fit.as_ref().is_some_and(|f| f.early);
        println!(
            "  {:>10.1} s  {:>8} {}",
            r.time_s,
            r.knob,
            if early { "early" } else { "" }
        );
    }

    // the first half's optimum on the second half: far over the budget
    // (busy → quiet) or next to no BG work (quiet → busy)
    let fb = &fixed.split.parts[1];
    let ob = &online.split.parts[1];
    let breaks = second_rate < first_rate;
    if breaks {
        assert!(fb.mean_added_delay_s > 3.0 * BUDGET_S, "{fb:?}");
    } else {
        assert!(
            fb.bg_throughput_bytes_per_s < 0.05 * ob.bg_throughput_bytes_per_s,
            "{fb:?} vs {ob:?}"
        );
    }

    // the knob: late in the first half, and once settled in the second
    let fitted: Vec<&Refit> = h.iter().filter(|r| r.fit.is_some()).collect();
    let before: Vec<&Refit> = fitted
        .iter()
        .copied()
        .filter(|r| r.time_s < online.switch_s)
        .collect();
    let late_a = &before[before.len() / 2..];
    assert!(late_a.len() >= 4, "{} refits late in A", late_a.len());
    for r in late_a {
        let w = r.value / 1e9;
        assert!(decades(w, ta) < 0.3, "{} in A: {w} s vs {ta} s", r.knob);
    }
    // idle intervals before the second half: the first half's and the gap
    let switch_intervals = Prepared::new(&a, None, 1)
        .unwrap()
        .periods()
        .idle_len_ns
        .len()
        + 1;
    let settle = if breaks { EVERY } else { 2 * WINDOW };
    let settled: Vec<&Refit> = fitted
        .iter()
        .copied()
        .filter(|r| {
            r.time_s >= online.switch_s && r.intervals as usize >= switch_intervals + settle
        })
        .collect();
    assert!(settled.len() >= 8, "{} refits settled in B", settled.len());
    for r in settled {
        let w = r.value / 1e9;
        assert!(decades(w, tb) < 0.3, "{} in B: {w} s vs {tb} s", r.knob);
    }
    // no refit called early where nothing changed
    assert!(
        fitted
            .iter()
            .filter(|r| r.fit.as_ref().unwrap().early)
            .all(|r| r.time_s >= online.switch_s
                && (r.intervals as usize) < switch_intervals + 2 * EVERY),
        "an early refit away from the switch"
    );

    // each half: within 25 % of the budget, not below half of it, and at
    // least half the BG throughput of the half's own optimum on the half alone
    for (k, (part, (half, t))) in online
        .split
        .parts
        .iter()
        .zip([(&a, ta), (&b, tb)])
        .enumerate()
    {
        let prep = Prepared::new(half, None, 1).unwrap();
        let mut p = policy::build(&format!("fixed-wait:t={}us", (t * 1e6).round())).unwrap();
        let best = simulate(&prep, p.as_mut(), &sim()).unwrap();
        println!(
            "half {}: its optimum {t:.4} s alone: {:.3} MB/s, {:.3} ms",
            k + 1,
            best.bg.throughput_bytes_per_s / 1e6,
            best.fg.mean_added_delay_s * 1e3
        );
        let d = part.mean_added_delay_s;
        assert!(
            (0.5 * BUDGET_S..1.25 * BUDGET_S).contains(&d),
            "half {}: {part:?}",
            k + 1
        );
        assert!(
            part.bg_throughput_bytes_per_s > 0.5 * best.bg.throughput_bytes_per_s,
            "half {}: {part:?} vs {best:?}",
            k + 1
        );
    }
}

#[test]
fn theory_optima_meet_the_budget() {
    for rate in [QUIET, BUSY] {
        let t = theory_wait_s(rate);
        assert!((added_delay_s(rate, t) - BUDGET_S).abs() < 1e-12);
    }
    assert!((theory_wait_s(QUIET) - 1.16).abs() < 0.01);
    assert!((theory_wait_s(BUSY) - 0.0535).abs() < 0.001);
}

/// About 8000 idle intervals per half (ρ = 0.01 and 0.25), 8 windows.
#[test]
fn online_wait_tracks_a_quiet_to_busy_switch() {
    tracks(QUIET, BUSY, [8_000, 10_700]);
}

#[test]
fn online_wait_tracks_a_busy_to_quiet_switch() {
    tracks(BUSY, QUIET, [10_700, 8_000]);
}
