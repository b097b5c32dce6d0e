//! Long idle intervals in constant time: the preemption-interval family
//! under exponential BG service asks for whole bursts, which the engine
//! draws in closed form ([`BgService::burst`]) and whose completed count it
//! tells the policy ([`Policy::on_burst_cut`]). Checked here against the
//! one-request protocol (the live driver's, one engine call per BG request)
//! in distribution, and on a 584-year interval against the Poisson count.

use fallow_core::policy::{self, IntervalEvent as Ev, IntervalState as St, Policy};
use fallow_core::policy::{
    AdaptivePreemptionInterval, AdaptivePreemptionIntervalConfig, CreditSkip, CreditSkipConfig,
    FixedRate, FixedRateConfig, IntervalCounters, IntervalStart, IntervalVariant,
    PreemptionInterval, PreemptionIntervalConfig,
};
use fallow_core::sim::{simulate, BgService, Prepared, SimConfig, SimResult};

const MS: u64 = 1_000_000;

/// A policy not told that it runs simulated: one BG request at a time.
struct OneAtATime<'a>(&'a mut dyn Policy);

impl Policy for OneAtATime<'_> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn on_idle(&mut self, ctx: &mut policy::Ctx<'_>) -> policy::Decision {
        self.0.on_idle(ctx)
    }
    fn on_bg_done(&mut self, ctx: &mut policy::Ctx<'_>, done: u64) -> policy::Decision {
        self.0.on_bg_done(ctx, done)
    }
    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        self.0.on_idle_end(idle_ns, collided)
    }
    fn on_busy_end(&mut self, busy_ns: u64, requests: u32) {
        self.0.on_busy_end(busy_ns, requests)
    }
}

/// Idle intervals around the 10 ms preemption interval (±1 ns, exact
/// multiples of the 2 ms mean service and of the interval) and up to 80
/// mean services long, between busy periods of 1-3 requests.
fn trace() -> Prepared {
    let mut idle = Vec::new();
    for k in 0..40u64 {
        idle.extend([
            10 * MS - 1,
            10 * MS,
            10 * MS + 1,
            12 * MS,
            20 * MS,
            30 * MS + 7,
            (11 + k) * MS,
            (40 + 3 * k) * MS,
            160 * MS,
            3 * MS,
        ]);
    }
    let busy_len: Vec<u64> = (0..=idle.len() as u64).map(|j| (1 + j % 3) * MS).collect();
    let busy_req: Vec<u32> = (0..=idle.len() as u32).map(|j| 1 + j % 3).collect();
    Prepared::from_periods(&busy_len, &busy_req, &idle).unwrap()
}

/// What a run reports, per seed: BG completed, collisions, BG busy time
/// (ms) and, for the machine's policies, the counters B[f], P[f], I[f].
fn figures(r: &SimResult, c: Option<&IntervalCounters>) -> Vec<f64> {
    let mut v = vec![
        r.bg.completed as f64,
        r.fg.collisions as f64,
        r.bg.busy_s * 1e3,
    ];
    if let Some(c) = c {
        for s in [St::Bg, St::Preempt, St::Idle] {
            v.push(c.get(s, Ev::Fg) as f64);
        }
        // what batches (batch=N) add: B[i] at each batch end, P[b] when the
        // next batch arrives in an interval
        v.push(c.get(St::Bg, Ev::Empty) as f64);
        v.push(c.get(St::Preempt, Ev::Bg) as f64);
    }
    v
}

fn mean_se(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, (v / n).sqrt())
}

/// One of the machine's policies, built fresh, with its counters.
enum Machine {
    Plain(PreemptionInterval),
    Credit(CreditSkip),
    Adaptive(AdaptivePreemptionInterval),
}

impl Machine {
    fn policy(&mut self) -> &mut dyn Policy {
        match self {
            Machine::Plain(p) => p,
            Machine::Credit(p) => p,
            Machine::Adaptive(p) => p,
        }
    }
    fn counters(&self) -> IntervalCounters {
        *match self {
            Machine::Plain(p) => p.counters(),
            Machine::Credit(p) => p.counters(),
            Machine::Adaptive(p) => p.counters(),
        }
    }
}

/// Under exponential BG service, whole bursts and one request at a time
/// are the same run in distribution: over 60 seeds each, every figure's
/// mean (BG requests, collisions, BG busy time and the B[f], P[f], I[f]
/// counters) agrees to within 5 standard errors, for the four variants
/// with both interval starts, credit skipping (whose credits carry from
/// interval to interval) and the adaptive interval (whose length does);
/// each without batches and with `batch=N` (the burst's gaps repeat every
/// batch and the first batch may be partial: its count carries over),
/// where the counters include B[i] and P[b].
#[test]
fn exponential_bursts_are_one_request_at_a_time_in_distribution() {
    let prep = trace();
    let bg = BgService::Exponential { mean_ns: 2 * MS };
    let machine =
        |v: IntervalVariant, start: IntervalStart, batch: Option<u64>| PreemptionIntervalConfig {
            interval_ns: 10 * MS,
            variant: v,
            start,
            batch,
            ..PreemptionIntervalConfig::default()
        };
    let mut builders: Vec<(String, Box<dyn Fn() -> Machine>)> = Vec::new();
    for v in [
        IntervalVariant::BurstIdle,
        IntervalVariant::BurstPreempt,
        IntervalVariant::RequestIdle,
        IntervalVariant::RequestPreempt,
    ] {
        for batch in [None, Some(1), Some(3)] {
            for start in [IntervalStart::FgEnd, IntervalStart::FgStart] {
                builders.push((
                    format!("preemption-interval {v:?} {start:?} batch {batch:?}"),
                    Box::new(move || {
                        Machine::Plain(PreemptionInterval::new(machine(v, start, batch)))
                    }),
                ));
            }
            if batch == Some(1) {
                continue;
            }
            builders.push((
                format!("credit-skip {v:?} batch {batch:?}"),
                Box::new(move || {
                    Machine::Credit(CreditSkip::new(CreditSkipConfig {
                        machine: machine(v, IntervalStart::FgEnd, batch),
                        n: 3,
                        cap: 9,
                        ..CreditSkipConfig::default()
                    }))
                }),
            ));
            builders.push((
                format!("adaptive-preemption-interval {v:?} batch {batch:?}"),
                Box::new(move || {
                    Machine::Adaptive(AdaptivePreemptionInterval::new(
                        AdaptivePreemptionIntervalConfig {
                            machine: machine(v, IntervalStart::FgEnd, batch),
                            ..AdaptivePreemptionIntervalConfig::default()
                        },
                    ))
                }),
            ));
        }
    }
    for (name, build) in &builders {
        let (mut a, mut b): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (Vec::new(), Vec::new());
        for seed in 0..60 {
            let cfg = SimConfig {
                bg_service: bg,
                seed: 1000 + seed,
                ..SimConfig::default()
            };
            let mut x = build();
            let r = simulate(&prep, x.policy(), &cfg).unwrap();
            a.push(figures(&r, Some(&x.counters())));
            let mut y = build();
            let r = simulate(&prep, &mut OneAtATime(y.policy()), &cfg).unwrap();
            b.push(figures(&r, Some(&y.counters())));
        }
        for k in 0..a[0].len() {
            let col = |v: &[Vec<f64>]| v.iter().map(|f| f[k]).collect::<Vec<f64>>();
            let ((ma, sa), (mb, sb)) = (mean_se(&col(&a)), mean_se(&col(&b)));
            let se = (sa * sa + sb * sb).sqrt();
            assert!(
                (ma - mb).abs() <= 5.0 * se + 1e-9 * mb.abs(),
                "{name}, figure {k}: bursts {ma} ± {sa}, one at a time {mb} ± {sb}"
            );
        }
    }
}

/// fixed-rate under exponential BG service: the whole interval's schedule
/// drawn by the engine and one request at a time are the same run in
/// distribution: over 60 seeds each, BG requests, collisions, BG busy time
/// and the due times used (`issued`, which carries the backlog from
/// interval to interval) agree in mean to within 5 standard errors, at
/// loads (mean service / period) from 0.1 to 2.
#[test]
fn fixed_rate_schedules_are_one_request_at_a_time_in_distribution() {
    let prep = trace();
    let bg = BgService::Exponential { mean_ns: 2 * MS };
    for period_ns in [MS, 2 * MS, 3 * MS, 7 * MS, 20 * MS] {
        let build = || {
            FixedRate::new(FixedRateConfig {
                period_ns,
                size_bytes: None,
            })
        };
        let (mut a, mut b): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (Vec::new(), Vec::new());
        for seed in 0..60 {
            let cfg = SimConfig {
                bg_service: bg,
                seed: 2000 + seed,
                ..SimConfig::default()
            };
            let mut x = build();
            let r = simulate(&prep, &mut x, &cfg).unwrap();
            let mut fa = figures(&r, None);
            fa.push(x.issued() as f64);
            a.push(fa);
            let mut y = build();
            let r = simulate(&prep, &mut OneAtATime(&mut y), &cfg).unwrap();
            let mut fb = figures(&r, None);
            fb.push(y.issued() as f64);
            b.push(fb);
        }
        for k in 0..a[0].len() {
            let col = |v: &[Vec<f64>]| v.iter().map(|f| f[k]).collect::<Vec<f64>>();
            let ((ma, sa), (mb, sb)) = (mean_se(&col(&a)), mean_se(&col(&b)));
            let se = (sa * sa + sb * sb).sqrt();
            assert!(
                (ma - mb).abs() <= 5.0 * se + 1e-9 * mb.abs(),
                "fixed-rate r={period_ns}, figure {k}: schedules {ma} ± {sa}, one at a time {mb} ± {sb}"
            );
        }
    }
}

/// A 584-year idle interval between two requests: every policy answers
/// (in constant time: one engine call per interval for the machine's
/// family, as for fixed-wait), and the preemption interval's count is the
/// Poisson count of the interval after the wait, (L − p)/mean + 1 (the
/// request the arrival cuts), to within 6 standard deviations.
#[test]
fn a_584_year_gap_is_one_burst_for_the_machine_family() {
    let l = u64::MAX - 10 * MS;
    let prep = Prepared::from_periods(&[MS, MS], &[1, 1], &[l]).unwrap();
    let mean_ns = 10 * MS;
    let cfg = SimConfig {
        bg_service: BgService::Exponential { mean_ns },
        seed: 5,
        ..SimConfig::default()
    };
    let p = 100 * MS;
    let lambda = (l - p) as f64 / mean_ns as f64;
    for spec in [
        "preemption-interval",
        "preemption-interval:variant=burst-preempt",
        "credit-skip",
        "adaptive-preemption-interval:p=100ms",
    ] {
        let mut pol = policy::build(spec).unwrap();
        let r = simulate(&prep, pol.as_mut(), &cfg).unwrap();
        let got = r.bg.completed as f64 - 1.0;
        assert!(
            (got - lambda).abs() < 6.0 * lambda.sqrt(),
            "{spec}: {got} vs {lambda}"
        );
        assert_eq!(r.fg.collisions, 1, "{spec}");
    }
    // fixed-rate, due every r = 100 ms with 10 ms service: every due time
    // before the arrival but a handful still queued is served
    let mut pol = policy::build("fixed-rate").unwrap();
    let r = simulate(&prep, pol.as_mut(), &cfg).unwrap();
    let due = (l - 1) / (100 * MS) + 1;
    assert!(
        r.bg.completed <= due + 1 && r.bg.completed + 50 >= due,
        "fixed-rate: {} of {due}",
        r.bg.completed
    );
    // spaced requests (p between them, and CFQ's slice_idle): the renewal
    // count L / (mean + spacing), to within 6 standard deviations
    // (variance L·σ²/μ³ with σ = mean, μ = mean + spacing)
    // Batches of 4 (batch=4): a cycle of 4 services and the gaps of one
    // batch, per batch (the gap after a batch's last request p for the
    // *-preempt variants, the others p inside a batch for request-*),
    // so n batches take n·(4 mean + gaps) and count 4 per cycle; the
    // variance of the count is 4²·L·(4σ²)/μ³ with μ the cycle's mean.
    // The arrival is 1 ms short of 2^64 ns and its busy period ends at
    // 2^64 − 1: the cut request's completion (arrival + residual, ~10 ms)
    // lies past 2^64, which the engine saturates (it overflowed: a panic
    // in a debug build, a wrapped time in a release one)
    let b = 4.0;
    let l = u64::MAX - 2 * MS - 1;
    let prep = Prepared::from_periods(&[MS, MS], &[1, 1], &[l]).unwrap();
    for (spec, per_batch_gaps) in [
        ("preemption-interval:batch=4", 0),
        ("preemption-interval:batch=4,variant=burst-preempt", p),
        ("preemption-interval:batch=4,variant=request-idle", 3 * p),
        ("preemption-interval:batch=4,variant=request-preempt", 4 * p),
        ("credit-skip:batch=4,variant=burst-preempt", p),
        (
            "adaptive-preemption-interval:p=100ms,batch=4,variant=request-preempt",
            4 * p,
        ),
    ] {
        let mut pol = policy::build(spec).unwrap();
        let r = simulate(&prep, pol.as_mut(), &cfg).unwrap();
        let mu = b * mean_ns as f64 + per_batch_gaps as f64;
        let span = (l - p) as f64;
        let want = b * span / mu;
        let sd = (b * b * span * b * (mean_ns as f64).powi(2) / mu.powi(3)).sqrt();
        assert!(
            (r.bg.completed as f64 - want).abs() < 6.0 * sd + b,
            "{spec}: {} vs {want} ± {sd}",
            r.bg.completed
        );
    }
    for (spec, wait, spacing) in [
        ("preemption-interval:variant=request-idle", p, p),
        ("kernel-idle-class", 100 * MS, 8 * MS),
    ] {
        let mut pol = policy::build(spec).unwrap();
        let r = simulate(&prep, pol.as_mut(), &cfg).unwrap();
        let mu = (mean_ns + spacing) as f64;
        let want = (l - wait) as f64 / mu;
        let sd = ((l - wait) as f64 * (mean_ns as f64).powi(2) / mu.powi(3)).sqrt();
        assert!(
            (r.bg.completed as f64 - want).abs() < 6.0 * sd + 1.0,
            "{spec}: {} vs {want} ± {sd}",
            r.bg.completed
        );
    }
}
