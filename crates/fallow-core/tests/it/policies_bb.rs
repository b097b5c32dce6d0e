//! Findings of Busy Bee (ICPE 2012) and Practical Scrubbing (DSN 2012)
//! reproduced on the engine: the Figure 5 worked example, dynamic vs
//! conservative scheduling on clustered busy periods, Waiting vs AR on the
//! HP trace, adaptive vs fixed request sizes, and deadline-driven finite work.

use crate::readers::shared;
use fallow_core::policy::{self, IdlePredictor, PredictorConfig};
use fallow_core::sim::{simulate, BgService, BgWork, Prepared, SimConfig, SimResult};
use fallow_core::trace::{Op, Trace};
use fallow_core::{read_trace, ReadOptions};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use rand_pcg::Pcg64Mcg;

const MS: u64 = 1_000_000;

/// A trace of busy periods given as `(requests, idle after)`: each FG request
/// takes `service` ns and arrives as the one before it completes (so the
/// period is one block), writes where `write(k)` says so.
fn trace_of(periods: &[(u32, u64)], service: u64, write: impl Fn(usize) -> bool) -> Trace {
    let (mut arrival, mut completion, mut op) = (vec![], vec![], vec![]);
    let mut t = 0u64;
    for &(n, idle) in periods {
        for _ in 0..n {
            arrival.push(t);
            completion.push(t + service);
            op.push(if write(op.len()) { Op::Write } else { Op::Read });
            t += service;
        }
        t += idle;
    }
    let n = arrival.len();
    Trace::from_columns(
        arrival,
        Some(completion),
        (0..n as u64).map(|i| i * 4096).collect(),
        vec![4096; n],
        op,
        vec![0; n],
    )
    .unwrap()
}

fn run(prep: &Prepared, spec: &str, cfg: &SimConfig) -> SimResult {
    let mut p = policy::build(spec).unwrap();
    simulate(prep, p.as_mut(), cfg).unwrap()
}

/// `y` at `x` on the piecewise-linear curve through `pts` (any order);
/// `None` outside its x range.
fn interpolate(pts: &[(f64, f64)], x: f64) -> Option<f64> {
    let mut p = pts.to_vec();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    if p.is_empty() || x < p[0].0 || x > p[p.len() - 1].0 {
        return None;
    }
    for w in p.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x >= x0 && x <= x1 {
            return Some(if x1 > x0 {
                y0 + (y1 - y0) * (x - x0) / (x1 - x0)
            } else {
                y0.max(y1)
            });
        }
    }
    Some(p[0].1)
}

// ---------------------------------------------------------------------------
// Busy Bee Figure 5

#[test]
fn busy_bee_figure_5_through_the_engine() {
    // Figure 5: busy periods of 2, 2, 2, 6, 6, 6 requests (3 units each)
    // with idle intervals of 5, 8, 4, 7, 8, 3 units after them, and a last
    // long period (6 requests); Threshold 4, CWS 2; conservative wait 6
    // units (2 × user service), dynamic wait 9 (1.5 ×); 1 unit = 1 ms here.
    // BG: constant 2-unit requests, always outstanding.
    let periods = [
        (2, 5 * MS),
        (2, 8 * MS),
        (2, 4 * MS),
        (6, 7 * MS),
        (6, 8 * MS),
        (6, 3 * MS),
        (6, 0),
    ];
    let prep = Prepared::new(&trace_of(&periods, 3 * MS, |_| false), None, 0).unwrap();
    let cfg = SimConfig {
        bg_service: BgService::Constant { ns: 2 * MS },
        ..SimConfig::default()
    };
    // By hand (a collision delays every request of the next period by the
    // BG request's residual, and the shift shortens the next idle interval):
    // aggressive: gaps 5→res 1 | 8−1=7→res 1 | 4−1=3→res 1 | 7−1=6: 3 exact
    //   | 8: 4 exact | 3→res 1. BG 3+4+2+3+4+2 = 18 requests, 32 units of
    //   idle time;
    //   delays 1 on periods 2, 3, 4, 7: 2+2+6+6 = 16 units over 30 requests.
    // conservative (6): 5 none | 8: one at 6–8 | 4 none | 7: one at 6–8,
    //   res 1 | 8−1=7: one at 6–8, res 1 | 3−1=2 none. BG 3 requests,
    //   4 units; delays on periods 5, 6: 6+6 = 12.
    // dynamic (0, 0, 0, then 9 after the long 4th): as aggressive for the
    //   first three (res 1 each), then 7−1=6 < 9, 8 < 9, 3 < 9 nothing.
    //   BG 3+4+2 = 9 requests, 15 units; delays on periods 2, 3, 4: 10.
    // Idle time is what is left after the shifts: aggressive and dynamic
    // 5+7+3+6+8+3 = 32 units, conservative 5+8+4+7+7+2 = 33.
    let want = [
        ("aggressive", 18, 32, 32, 16, 4),
        ("fixed-wait:t=6ms", 3, 4, 33, 12, 2),
        ("busy-bee:idle-wait=9ms,threshold=4,cws=2", 9, 15, 32, 10, 3),
    ];
    for (spec, completed, used_units, idle_units, added_units, collisions) in want {
        let r = run(&prep, spec, &cfg);
        assert_eq!(r.bg.completed, completed, "{spec}");
        // device time on BG: every request runs to completion, 2 units each
        assert!(
            (r.bg.busy_s - completed as f64 * 2e-3).abs() < 1e-12,
            "{spec}"
        );
        assert!(
            (r.idle_total_s - idle_units as f64 * 1e-3).abs() < 1e-12,
            "{spec}"
        );
        let used = r.idle_used_fraction * r.idle_total_s;
        assert!(
            (used - used_units as f64 * 1e-3).abs() < 1e-12,
            "{spec}: {used}"
        );
        assert!(
            (r.fg.mean_added_delay_s - added_units as f64 * 1e-3 / 30.0).abs() < 1e-12,
            "{spec}: {}",
            r.fg.mean_added_delay_s
        );
        assert_eq!(r.fg.collisions, collisions, "{spec}");
    }
    // the paper's point: dynamic delays FG less than conservative here while
    // doing three times its BG work; aggressive does the most and delays most
}

// ---------------------------------------------------------------------------
// Busy Bee §5: dynamic vs conservative on clustered long busy periods

/// Busy periods that alternate between runs of short ones (1–3 requests,
/// geometric runs of mean 25) and clusters of long ones (10–30 requests,
/// geometric clusters of mean 4). Idle intervals are exponential, mean
/// 120 ms between short periods and 15 ms inside a long cluster (bursts).
fn clustered(periods: usize, seed: u64) -> Vec<(u32, u64)> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut out = Vec::with_capacity(periods);
    let mut long = false;
    while out.len() < periods {
        let run = if long {
            1 + (Exp::new(1.0 / 4.0).unwrap().sample(&mut rng) as usize)
        } else {
            1 + (Exp::new(1.0 / 25.0).unwrap().sample(&mut rng) as usize)
        };
        for k in 0..run {
            let n = if long {
                rng.random_range(10..=30)
            } else {
                rng.random_range(1..=3)
            };
            let last = k + 1 == run;
            let mean_ms = if long && !last { 15.0 } else { 120.0 };
            let idle = (Exp::new(1.0 / mean_ms).unwrap().sample(&mut rng) * 1e6) as u64 + 1;
            out.push((n, idle));
        }
        long = !long;
    }
    out.truncate(periods);
    out
}

/// Dynamic (`busy-bee` with `extra` parameters) against conservative
/// (`fixed-wait`) over idle waits `waits_ms` on the clustered trace of
/// `seed`: per wait, (wait, FG mean response s, dynamic BG mean response
/// s, conservative's BG mean response at the same FG mean response s,
/// learned Threshold, CWS).
fn dynamic_vs_conservative(
    seed: u64,
    extra: &str,
    waits_ms: &[u64],
) -> Vec<(u64, f64, f64, Option<f64>, u64, u32)> {
    let periods = clustered(30_000, seed);
    let trace = trace_of(&periods, 5 * MS, |k| k % 2 == 0);
    let prep = Prepared::new(&trace, None, 0).unwrap();
    // Busy Bee §5.1: BG work 100 % of FG work, spawned by writes; switch
    // penalty ≈ 2 × FG service.
    let cfg = SimConfig {
        bg_service: BgService::Constant { ns: 5 * MS },
        bg_work: BgWork::PerFgWrite { ratio: 1.0 },
        switch_penalty_ns: 10 * MS,
        ..SimConfig::default()
    };
    let (mut cons, mut dynamic) = (vec![], vec![]);
    for &w in waits_ms {
        let c = run(&prep, &format!("fixed-wait:t={w}ms"), &cfg);
        let (_, params) =
            policy::Params::parse(&format!("busy-bee:idle-wait={w}ms,window=5min{extra}")).unwrap();
        let mut bb = policy::BusyBee::from_params(params).unwrap();
        let d = simulate(&prep, &mut bb, &cfg).unwrap();
        let (threshold, cws) = bb.learned().unwrap();
        cons.push((c.fg.mean_response_s, c.bg.mean_response_s.unwrap()));
        dynamic.push((
            d.fg.mean_response_s,
            d.bg.mean_response_s.unwrap(),
            threshold,
            cws,
        ));
    }
    waits_ms
        .iter()
        .zip(&dynamic)
        .map(|(&w, &(fg, bg, t, cws))| (w, fg, bg, interpolate(&cons, fg), t, cws))
        .collect()
}

#[test]
fn busy_bee_dynamic_beats_conservative_on_clustered_busy_periods() {
    // Found (three seeds), with the engine reporting the device's busy
    // periods (merged after a collision) and Threshold the 90th percentile:
    // dynamic's BG response time is below conservative's at the same FG
    // response time for every idle wait from 2 to 80 ms (by 0.8–13.7 %);
    // at 100 ms in two seeds of three (−9.2 %, +2.2 %, −1.0 %); at 150 ms
    // in none. The top-decile Threshold on the same engine does no better
    // at any wait from 30 to 100 ms. Figures and the before/after in
    // docs/policies.md.
    let waits_ms = [0u64, 2, 5, 10, 15, 20, 30, 40, 60, 80, 100, 150];
    for seed in [11, 12, 13] {
        let mut gain = vec![];
        for (rule, extra) in [("p90", ""), ("top-decile", ",rule=top-decile")] {
            let rows = dynamic_vs_conservative(seed, extra, &waits_ms);
            let mut g = vec![];
            for (w, fg, bg, bg_c, t, cws) in rows {
                println!(
                    "seed {seed}, {rule:>10}, idle wait {w:>3} ms: Threshold {t:>2}, CWS {cws:>2}, FG {:.3} ms, BG dynamic {:.1} ms vs conservative {} at the same FG ({})",
                    fg * 1e3,
                    bg * 1e3,
                    bg_c.map_or("-".into(), |b| format!("{:.1} ms", b * 1e3)),
                    bg_c.map_or("-".into(), |b| format!("{:+.1} %", (bg / b - 1.0) * 100.0)),
                );
                g.push((w, bg_c.map(|b| 1.0 - bg / b)));
            }
            gain.push(g);
        }
        let (p90, top) = (&gain[0], &gain[1]);
        for &(w, g) in p90 {
            if (2..=80).contains(&w) {
                let g = g.expect("conservative spans dynamic's FG range");
                assert!(g > 0.0, "seed {seed}, wait {w} ms: dynamic loses ({g})");
            }
        }
        let best = p90.iter().filter_map(|x| x.1).fold(0.0, f64::max);
        assert!(best >= 0.10, "seed {seed}: best gain {best}");
        for (&(w, a), &(_, b)) in p90.iter().zip(top) {
            if (30..=100).contains(&w) {
                assert!(
                    a.unwrap() >= b.unwrap(),
                    "seed {seed}, wait {w} ms: p90 {a:?} < top decile {b:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Practical Scrubbing §V-B, Fig. 14: Waiting vs AR on the HP trace

fn hp_disk0() -> Prepared {
    let path = shared("hp-hplajw-1992/ajw.1week.srt");
    let trace = read_trace(&path, &ReadOptions::default()).unwrap();
    let disk0 = trace.select_device(0).unwrap();
    Prepared::new(&disk0, None, 0).unwrap()
}

/// 64 KiB scrub requests on the default size-based model (8 ms flat to
/// 64 KiB), endless supply (scrubbing).
fn scrub_cfg() -> SimConfig {
    SimConfig {
        bg_service: "size".parse().unwrap(),
        bg_work: BgWork::Endless,
        bg_size_bytes: 64 << 10,
        ..SimConfig::default()
    }
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn waiting_uses_more_idle_time_than_ar_at_equal_collision_rate_on_hp() {
    let prep = hp_disk0();
    let cfg = scrub_cfg();
    // Waiting: t from 1 ms to 100 s
    let mut waiting = vec![];
    for k in 0..=25 {
        let t_ns = (1e6 * 10f64.powf(k as f64 * 5.0 / 25.0)) as u64;
        let r = run(&prep, &format!("fixed-wait:t={t_ns}ns"), &cfg);
        waiting.push((r.fg.collision_rate, r.idle_used_fraction));
    }
    // AR: c at percentiles of the predictions the AR model makes over the
    // baseline idle sequence (the paper picks c the same way for AR+Waiting)
    let mut pr = IdlePredictor::new(PredictorConfig::default());
    let mut preds = vec![];
    for &i in &prep.periods().idle_len_ns {
        if let Some(x) = pr.predict_ns() {
            preds.push(x);
        }
        pr.observe(i);
    }
    preds.sort_by(f64::total_cmp);
    let mut ar = vec![];
    for q in [
        0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99,
    ] {
        let c = preds[((preds.len() - 1) as f64 * q) as usize] as u64;
        let r = run(
            &prep,
            &format!("autoregressive:c={}ns", c.saturating_sub(1)),
            &cfg,
        );
        println!(
            "AR c = {:.3} s (p{:.0}): collisions {:.4}, idle used {:.4}",
            c as f64 / 1e9,
            q * 100.0,
            r.fg.collision_rate,
            r.idle_used_fraction
        );
        ar.push((r.fg.collision_rate, r.idle_used_fraction));
    }
    // Practical Scrubbing's finding holds: at every collision rate both
    // reach, Waiting uses more of the idle time than AR.
    let mut compared = 0;
    for &(coll, used) in &ar {
        if let Some(w) = interpolate(&waiting, coll) {
            println!("collision rate {coll:.4}: Waiting uses {w:.4} of idle time, AR {used:.4}");
            assert!(w > used, "collision rate {coll}: Waiting {w} ≤ AR {used}");
            compared += 1;
        }
    }
    assert!(compared >= 5, "{compared}");
}

// ---------------------------------------------------------------------------
// Practical Scrubbing §V-C, Fig. 15: adaptive vs fixed request sizes

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn adaptive_sizes_vs_fixed_size_at_equal_slowdown_on_hp() {
    let prep = hp_disk0();
    let cfg = scrub_cfg();
    // Waits from 1 s to 1000 s: slowdowns from ≈ 5 ms down to ≈ 0.2 ms per
    // FG request (the paper's goals are 0.5–4 ms). The fixed curves get six
    // waits per decade, since the comparison interpolates between them; the
    // adaptive ones three.
    let waits = |per_decade: u32| -> Vec<u64> {
        (0..=3 * per_decade)
            .map(|k| (1e9 * 10f64.powf(k as f64 / per_decade as f64)) as u64)
            .collect()
    };
    let curve = |spec: &str, waits: &[u64]| -> Vec<(f64, f64)> {
        waits
            .iter()
            .map(|&t| {
                let r = run(&prep, &format!("{spec},t={t}ns"), &cfg);
                (r.fg.mean_added_delay_s, r.bg.throughput_bytes_per_s)
            })
            .collect()
    };
    // 64 and 256 KiB are never the best size at the slowdowns the adaptive
    // modes reach (≥ 0.2 ms: they give ≤ 26 MB/s there, 1 MiB ≥ 48 MB/s)
    let fixed: Vec<Vec<(f64, f64)>> = ["1MiB", "4MiB"]
        .iter()
        .map(|size| curve(&format!("fixed-wait:size={size}"), &waits(6)))
        .collect();
    // best fixed size at a slowdown: the upper envelope of the fixed curves
    let best_fixed = |added: f64| {
        fixed
            .iter()
            .filter_map(|c| interpolate(c, added))
            .fold(f64::NAN, f64::max)
    };
    // Found, as the paper (§V-C, Fig. 15): no adaptive mode beats the best
    // fixed size. Where the best fixed size is the largest (4 MiB, slowdowns
    // above ≈ 0.45 ms on this trace) the adaptive curves coincide with it,
    // within ±3 %: the captured intervals are so long that every mode
    // reaches 4 MiB at once (the paper's footnote 5). The tolerance is the
    // resolution of the comparison: the envelope is interpolated between
    // sweep points, and slowdown jumps where t crosses the trace's many
    // ≈ 30 s idle intervals (the HP-UX syncer), so a straight line between
    // two points misses part of the fixed curve (up to 2.4 % seen). At small slowdowns a mid-sized fixed request
    // (1 MiB) wins by 2×: adaptive still ends each interval at 4 MiB, so
    // every collision costs a 4 MiB request.
    for spec in [
        "adaptive-size:mode=exponential,s=64KiB,a=2,max=4MiB",
        "adaptive-size:mode=linear,s=64KiB,a=1,b=256KiB,max=4MiB",
        "adaptive-size:mode=swapping,s=1MiB,max=4MiB,swap-after=1s",
    ] {
        let c = curve(spec, &waits(3));
        for &(added, tput) in &c {
            let f = best_fixed(added);
            println!(
                "{spec}: added {:.4} ms/request, {:.3} MB/s; best fixed size {:.3} MB/s",
                added * 1e3,
                tput / 1e6,
                f / 1e6
            );
            if f.is_finite() {
                assert!(tput <= 1.03 * f, "{spec} at {added}: {tput} vs {f}");
            }
        }
        let &(lowest, tput) = c.iter().min_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
        assert!(best_fixed(lowest) >= 1.5 * tput, "{spec} at {lowest}");
    }
}

// ---------------------------------------------------------------------------
// Finite BG work with a deadline

#[test]
fn deadline_finishes_finite_work_that_waiting_does_not() {
    // Periods of 1–3 requests of 5 ms; idle intervals hyperexponential with
    // a decreasing hazard rate (90 % Exp(10 ms), 10 % Exp(1 s)), so a longer
    // wait buys more BG work per collision; 20,000 periods ≈ 38 min.
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    let periods: Vec<(u32, u64)> = (0..20_000)
        .map(|_| {
            let mean_ms = if rng.random_bool(0.1) { 1000.0 } else { 10.0 };
            let idle = Exp::new(1.0 / mean_ms).unwrap().sample(&mut rng);
            (rng.random_range(1..=3), (idle * 1e6) as u64 + 1)
        })
        .collect();
    let prep = Prepared::new(&trace_of(&periods, 5 * MS, |_| false), None, 0).unwrap();
    let span_s = prep.span_ns() as f64 / 1e9;
    let waits = ["50ms", "100ms", "200ms", "500ms", "1s"];
    for work in [30_000u64, 100_000, 150_000] {
        let cfg = SimConfig {
            bg_service: BgService::Constant { ns: 10 * MS },
            bg_work: BgWork::Requests(work),
            ..SimConfig::default()
        };
        // the deadline is the end of the trace: all work done = on time
        let d = run(
            &prep,
            &format!("deadline:work={work},by={span_s}s,t=2s"),
            &cfg,
        );
        let base = run(&prep, "fixed-wait:t=2s", &cfg);
        let aggressive = run(&prep, "aggressive", &cfg);
        // the best fixed wait that finishes, chosen knowing the whole trace
        let best = waits
            .iter()
            .map(|t| run(&prep, &format!("fixed-wait:t={t}"), &cfg))
            .filter(|r| r.bg.completed == work)
            .map(|r| r.fg.mean_added_delay_s)
            .fold(f64::INFINITY, f64::min);
        println!(
            "{work} requests by {span_s:.0} s: deadline {} done, {:.3} ms added per FG request; \
             fixed-wait(2 s) {} done; aggressive {:.3} ms; best finishing fixed wait {:.3} ms",
            d.bg.completed,
            d.fg.mean_added_delay_s * 1e3,
            base.bg.completed,
            aggressive.fg.mean_added_delay_s * 1e3,
            best * 1e3
        );
        assert_eq!(d.bg.completed, work);
        assert!(base.bg.completed < work);
        assert!(d.fg.mean_added_delay_s * 3.0 < aggressive.fg.mean_added_delay_s);
        assert!(d.fg.mean_added_delay_s <= 1.15 * best);
    }
}
