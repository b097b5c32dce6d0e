//! Energy-study speed: one `energy::study` of the timeout policy over the
//! six local fractions of the SARD paper's rows (`SEED_LOCAL_FRACTIONS`),
//! on an interactive workload of sessions, in requests per second.
//!
//! A plain program (`harness = false`) that prints its figures; the speed
//! target that the functional test `one_pass_over_a_million_requests_gives_every_setting`
//! (tests/it/energy.rs) once asserted lives here:
//!
//! ```text
//! cargo bench -p fallow-core --bench energy                   # 1 M requests
//! cargo bench -p fallow-core --bench energy -- --requests 200000 --max-s 30
//! ```
//!
//! `--max-s S` makes it exit with status 1 when the study takes longer than
//! S seconds (the old test's bound was 30 s for 1 M requests in a debug
//! build on a shared 2-core machine). The workload: sessions of 50 requests
//! 0.05 s apart on average, separated by think times with a mean of 60 s,
//! each request served in 5 ms (seeded, so every run times the same work).

use fallow_core::energy::{study, Availability, EnergyConfig, EnergyInput, SEED_LOCAL_FRACTIONS};
use fallow_core::trace::{Op, Trace};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;
use std::time::Instant;

/// The value after `--flag` on the command line.
fn arg(flag: &str) -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == flag {
            return args.next();
        }
    }
    None
}

fn sessions(requests: usize) -> Trace {
    const S: f64 = 1e9;
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    let mut t = 0.0f64;
    let mut a = Vec::with_capacity(requests);
    while a.len() < requests {
        t += -60.0 * (1.0 - rng.random::<f64>()).ln();
        for _ in 0..50 {
            t += -0.05 * (1.0 - rng.random::<f64>()).ln();
            a.push((t * S) as u64);
        }
    }
    a.truncate(requests);
    let n = a.len();
    let c: Vec<u64> = a.iter().map(|x| x + 5_000_000).collect();
    Trace::from_columns(
        a,
        Some(c),
        vec![0; n],
        vec![4096; n],
        vec![Op::Read; n],
        vec![0; n],
    )
    .expect("valid columns")
}

fn main() {
    let requests: usize = arg("--requests")
        .map(|v| {
            v.replace('_', "")
                .parse()
                .expect("--requests takes a whole number")
        })
        .unwrap_or(1_000_000);
    let max_s: Option<f64> = arg("--max-s").map(|v| v.parse().expect("--max-s takes seconds"));
    let trace = sessions(requests);
    let input = EnergyInput::from_trace(&trace, None, 1).expect("input");
    let fractions: Vec<Availability> = SEED_LOCAL_FRACTIONS
        .iter()
        .map(|&fraction| Availability::LocalFraction { fraction })
        .collect();
    let policies = ["timeout:t=10s".to_string()];
    let t = Instant::now();
    let runs =
        black_box(study(&input, &policies, &fractions, &EnergyConfig::default()).expect("study"));
    let took_s = t.elapsed().as_secs_f64();
    println!(
        "energy study, {} settings over {requests} requests: {took_s:.2} s ({:.2} M requests/s per setting)",
        runs.len(),
        requests as f64 * runs.len() as f64 / took_s / 1e6
    );
    if let Some(max) = max_s {
        if took_s > max {
            println!("slower than the target: {took_s:.2} s > {max} s");
            std::process::exit(1);
        }
        println!("within the target of {max} s");
    }
}
