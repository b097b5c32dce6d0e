//! Simulator speed: FG requests simulated per second on one core, for
//! fixed-wait and cdf-estimates, next to one memory-streaming pass over the
//! columns the engine reads (the limit), in one run.
//!
//! A plain program (`harness = false`) that prints its figures:
//!
//! ```text
//! cargo bench -p fallow-core --bench sim                 # 10 M requests
//! cargo bench -p fallow-core --bench sim -- --requests 200000   # CI smoke size
//! ```
//!
//! (or `FALLOW_BENCH_REQUESTS=N`; `--only TEXT` keeps the configurations
//! whose policy spec contains TEXT, for profiling). The trace is synthetic and held in
//! memory: Poisson arrivals, exponential 10 ms service at 30 % utilisation
//! (an M/M/1 queue, with completions), prepared once; each configuration
//! is timed `REPEAT` times and the fastest run is reported.

use fallow_core::policy;
use fallow_core::sim::{simulate, BgService, Prepared, SimConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;
use std::hint::black_box;
use std::time::{Duration, Instant};

const REPEAT: usize = 3;

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

fn requests() -> usize {
    if let Some(n) = arg("--requests").and_then(|v| v.replace('_', "").parse().ok()) {
        return n;
    }
    std::env::var("FALLOW_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(10_000_000)
}

fn best<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..REPEAT {
        let t = Instant::now();
        let r = black_box(f());
        best = best.min(t.elapsed());
        out = Some(r);
    }
    (best, out.expect("REPEAT > 0"))
}

fn main() {
    let n = requests();
    let t0 = Instant::now();
    let trace = SyntheticWorkload {
        arrivals: ArrivalProcess::Poisson { rate_per_s: 30.0 },
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
    let generated = t0.elapsed();
    let t1 = Instant::now();
    let prep = Prepared::new(&trace, None, 1).expect("trace with completions");
    let prepared = t1.elapsed();
    let p = prep.periods();
    let busy = p.busy_len_ns.len();
    println!(
        "fallow simulator bench: {n} FG requests (M/M/1, λ = 30/s, 10 ms service, ρ = 0.3), \
         {busy} busy periods ({:.2} requests each); generated in {:.2} s, prepared once in {:.2} s",
        n as f64 / busy as f64,
        generated.as_secs_f64(),
        prepared.as_secs_f64()
    );

    // The limit: one pass summing every column the engine streams through
    // (busy start, length and request count, idle length, arrivals).
    let arrivals = trace.arrival_ns();
    let (pass, sum) = best(|| {
        let mut s = 0u64;
        for i in 0..busy {
            s = s
                .wrapping_add(p.busy_start_ns[i])
                .wrapping_add(p.busy_len_ns[i])
                .wrapping_add(p.busy_requests[i] as u64);
        }
        s = s.wrapping_add(p.idle_len_ns.iter().fold(0u64, |a, &b| a.wrapping_add(b)));
        s.wrapping_add(arrivals.iter().fold(0u64, |a, &b| a.wrapping_add(b)))
    });
    black_box(sum);
    let bytes = busy * (8 + 8 + 4 + 8) + n * 8;
    println!(
        "memory pass over those columns ({:.0} MB): {:.1} ms = {:.1} GB/s, {:.0} M req/s\n",
        bytes as f64 / 1e6,
        pass.as_secs_f64() * 1e3,
        bytes as f64 / pass.as_secs_f64() / 1e9,
        n as f64 / pass.as_secs_f64() / 1e6
    );

    println!(
        "{:<22} {:<10} {:>9} {:>14} {:>16} {:>10}",
        "policy", "BG", "time", "FG M req/s", "× memory pass", "delayed"
    );
    let registered = |name: &str| policy::registry().iter().any(|e| e.name == name);
    let only = arg("--only");
    for (spec, bg) in [
        ("fixed-wait:t=50ms", "const:5ms"),
        ("fixed-wait:t=50ms", "exp:5ms"),
        ("cdf-estimates", "const:5ms"),
        ("cdf-estimates", "exp:5ms"),
    ] {
        if only.as_ref().is_some_and(|o| !spec.contains(o.as_str())) {
            continue;
        }
        let name = spec.split(':').next().unwrap_or(spec);
        if !registered(name) {
            println!("{spec:<22} {bg:<10} skipped: `{name}` is not in the policy registry yet");
            continue;
        }
        let cfg = SimConfig {
            bg_service: bg.parse::<BgService>().expect("valid model"),
            ..SimConfig::default()
        };
        let (t, r) = best(|| {
            let mut pol = policy::build(spec).expect("valid spec");
            simulate(&prep, pol.as_mut(), &cfg).expect("runs")
        });
        println!(
            "{spec:<22} {bg:<10} {:>7.1} ms {:>14.1} {:>15.1}× {:>9.1} %",
            t.as_secs_f64() * 1e3,
            n as f64 / t.as_secs_f64() / 1e6,
            t.as_secs_f64() / pass.as_secs_f64(),
            r.fg.collision_rate * 100.0
        );
    }
    println!("\n(one thread; `× memory pass` is the run's time over the pass's time)");
}
