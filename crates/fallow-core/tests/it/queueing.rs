//! Period extraction and statistics on synthetic queues against results we
//! derive from queueing theory.
//!
//! M/M/1 with arrival rate λ and service rate μ, ρ = λ/μ:
//! - an idle interval is the wait from the server emptying to the next
//!   arrival; Poisson arrivals are memoryless, so it is Exp(λ): mean 1/λ, CV 1;
//! - the server is busy a fraction ρ of the time;
//! - the mean busy period is E[S]/(1−ρ) = 1/(μ−λ) (M/G/1 in general), with
//!   Var(B) = (1+ρ) / (μ²(1−ρ)³) for exponential service;
//! - a busy period serves on average 1/(1−ρ) requests, Var(N) = ρ(1+ρ)/(1−ρ)³.
//!
//! Tolerances are 5 standard errors of the estimate over the observed number
//! of periods, so a correct implementation fails with negligible probability
//! and a wrong formula fails loudly.

use fallow_core::stats::{LagPairs, Summary};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::{period, ServiceModel};

fn mm1(rate_per_s: f64, mean_service_s: f64, requests: usize, seed: u64) -> fallow_core::Trace {
    SyntheticWorkload {
        arrivals: ArrivalProcess::Poisson { rate_per_s },
        requests,
        service: ServiceModel::Exponential {
            mean_ns: (mean_service_s * 1e9) as u64,
        },
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.5,
        seed,
    }
    .generate()
    .unwrap()
}

fn within(name: &str, got: f64, want: f64, se: f64) {
    assert!(
        (got - want).abs() <= 5.0 * se,
        "{name}: got {got}, theory {want}, 5·SE = {}",
        5.0 * se
    );
}

#[test]
fn mm1_idle_busy_and_utilisation_match_theory() {
    let mean_service_s = 0.010;
    let mu = 1.0 / mean_service_s;
    for (rho, seed) in [(0.3, 1), (0.6, 2), (0.8, 3)] {
        let lambda = rho * mu;
        let t = mm1(lambda, mean_service_s, 400_000, seed);
        let p = period::extract(t.arrival_ns(), t.completion_ns().unwrap());
        let idle: Vec<f64> = p.idle_len_ns.iter().map(|&x| x as f64 / 1e9).collect();
        let busy: Vec<f64> = p.busy_len_ns.iter().map(|&x| x as f64 / 1e9).collect();
        let reqs: Vec<f64> = p.busy_requests.iter().map(|&x| x as f64).collect();
        let m = idle.len() as f64;

        let s = Summary::of(&idle);
        within(
            &format!("ρ={rho} idle mean"),
            s.mean_s,
            1.0 / lambda,
            (1.0 / lambda) / m.sqrt(),
        );
        // CV of an exponential sample: SE ≈ 1/√m (delta method on the 4th moment)
        within(&format!("ρ={rho} idle cv"), s.cv, 1.0, 2.0 / m.sqrt());

        let b = Summary::of(&busy);
        let eb = mean_service_s / (1.0 - rho);
        let var_b = (1.0 + rho) / (mu * mu * (1.0 - rho).powi(3));
        within(
            &format!("ρ={rho} busy mean"),
            b.mean_s,
            eb,
            (var_b / m).sqrt(),
        );

        let n = Summary::of(&reqs);
        let var_n = rho * (1.0 + rho) / (1.0 - rho).powi(3);
        within(
            &format!("ρ={rho} busy requests"),
            n.mean_s,
            1.0 / (1.0 - rho),
            (var_n / m).sqrt(),
        );

        // utilisation = E[B] / (E[B] + E[I]); its error is dominated by E[B]
        let u = p.utilization();
        let se_u = (1.0 - rho) * rho * ((var_b / m).sqrt() / eb);
        within(&format!("ρ={rho} utilisation"), u, rho, se_u.max(1e-4));

        // every request falls in exactly one busy period
        assert_eq!(
            p.busy_requests.iter().map(|&x| x as usize).sum::<usize>(),
            t.len()
        );
        assert_eq!(p.busy_len_ns.len(), p.idle_len_ns.len() + 1);
    }
}

#[test]
fn md1_busy_period_is_service_over_one_minus_rho() {
    // M/D/1: idle still Exp(λ); E[B] = D/(1−ρ) (M/G/1).
    let d = 0.004;
    let rho = 0.5;
    let lambda = rho / d;
    let t = SyntheticWorkload {
        arrivals: ArrivalProcess::Poisson { rate_per_s: lambda },
        requests: 300_000,
        service: ServiceModel::Constant {
            ns: (d * 1e9) as u64,
        },
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.0,
        seed: 9,
    }
    .generate()
    .unwrap();
    let p = period::extract(t.arrival_ns(), t.completion_ns().unwrap());
    let m = p.busy_len_ns.len() as f64;
    let mean_b = p.busy_len_ns.iter().sum::<u64>() as f64 / 1e9 / m;
    // loose bound: Var(B) of M/D/1 is below that of M/M/1 at equal ρ
    let var_b = (1.0 + rho) * d * d / (1.0 - rho).powi(3);
    within(
        "M/D/1 busy mean",
        mean_b,
        d / (1.0 - rho),
        (var_b / m).sqrt(),
    );
    // A busy period of constant-time requests lasts exactly N·D.
    for (len, n) in p.busy_len_ns.iter().zip(&p.busy_requests) {
        assert_eq!(*len, *n as u64 * (d * 1e9) as u64);
    }
}

#[test]
fn lag_pairs_independent_vs_bursty() {
    // Mi et al. §3.2, Fig. 2: for independent idle times the class of the next
    // interval does not depend on the current one; for MMPP arrivals large
    // intervals follow large ones far more often than small ones.
    let svc = 0.001;
    let indep = mm1(100.0, svc, 200_000, 4);
    let pi = period::extract(indep.arrival_ns(), indep.completion_ns().unwrap());
    let idle_i: Vec<f64> = pi.idle_len_ns.iter().map(|&x| x as f64).collect();
    let li = LagPairs::of(&idle_i, 9);
    let m_large = (1.0 - li.small_fraction) * idle_i.len() as f64;
    for row in &li.lags {
        let (ll, sl) = (row.large_large.unwrap(), row.small_large.unwrap());
        // two proportions estimating the same p = large fraction
        let p = 1.0 - li.small_fraction;
        within(
            "independent P(L|L) - P(L|S)",
            ll - sl,
            0.0,
            (p * (1.0 - p) / m_large).sqrt() * 1.5,
        );
    }

    let bursty = SyntheticWorkload {
        arrivals: ArrivalProcess::Mmpp2 {
            rate_per_s: [200.0, 2.0],
            switch_per_s: [0.5, 0.5],
        },
        requests: 200_000,
        service: ServiceModel::Exponential { mean_ns: 1_000_000 },
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.5,
        seed: 5,
    }
    .generate()
    .unwrap();
    let pb = period::extract(bursty.arrival_ns(), bursty.completion_ns().unwrap());
    let idle_b: Vec<f64> = pb.idle_len_ns.iter().map(|&x| x as f64).collect();
    let lb = LagPairs::of(&idle_b, 9);
    let lag1 = lb.lags[0];
    assert!(
        lag1.large_large.unwrap() > 3.0 * lag1.small_large.unwrap(),
        "bursty: P(L|L) {:?} should dwarf P(L|S) {:?}",
        lag1.large_large,
        lag1.small_large
    );
}
