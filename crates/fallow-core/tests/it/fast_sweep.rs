//! The one-pass sweep (`tune::fast`) against the simulator: at sampled
//! settings its totals and figures equal a simulation's to the bit, for
//! every policy that declares an interval rule, on a recorded trace and on
//! synthetic ones, with and without a switch penalty (a penalty larger
//! than a service time takes the sweep's slow path), one setting at a time
//! and several in one pass (the multi-lane walk, lanes leaving at their
//! caps); and `tune` gives the same answers whichever way it evaluates.

use fallow_core::policy;
use fallow_core::sim::{simulate, BgService, Prepared, SimConfig, SimResult, Totals};
use fallow_core::trace::{read_trace, ReadOptions};
use fallow_core::tune::{self, Budget, FastSweep, Setting, TuneConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;

fn synthetic(spec: &str, requests: usize, seed: u64) -> Prepared {
    let service = ServiceModel::Exponential { mean_ns: 5_000_000 };
    let t = SyntheticWorkload {
        arrivals: ArrivalProcess::from_spec(spec, None, Some(0.3), &service, 4096).unwrap(),
        requests,
        service,
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.5,
        seed,
    }
    .generate()
    .unwrap();
    Prepared::new(&t, None, seed).unwrap()
}

/// HP hplajw disk 0 of the shared traces.
fn hp() -> Prepared {
    let path = crate::readers::shared("hp-hplajw-1992/ajw.1week.srt");
    let t = read_trace(&path, &ReadOptions::default()).unwrap();
    let t = t.select_device(0).unwrap();
    Prepared::new(&t, None, 1).unwrap()
}

fn configs() -> Vec<SimConfig> {
    let size = "size:base=8ms,knee=64KiB,rate=100MB"
        .parse::<BgService>()
        .unwrap();
    vec![
        SimConfig {
            bg_service: size,
            ..SimConfig::default()
        },
        SimConfig {
            bg_service: size,
            switch_penalty_ns: 1_500_000,
            ..SimConfig::default()
        },
        SimConfig {
            // a penalty of several service times: shifts span whole services
            bg_service: BgService::Constant { ns: 3_000_000 },
            switch_penalty_ns: 20_000_000,
            ..SimConfig::default()
        },
    ]
}

/// The rule-bearing policies and the knob values to sample (ns or percent).
fn samples() -> Vec<(&'static str, Vec<f64>)> {
    let waits = vec![1e5, 7.3e5, 3e6, 1.37e7, 5e7, 2.1e8, 1e9, 2.9e10];
    vec![
        ("fixed-wait", waits.clone()),
        ("lossless-waiting", waits.clone()),
        ("preemption-interval", waits),
        ("oracle", vec![0.01, 0.5, 3.0, 10.0, 37.5, 80.0, 100.0]),
    ]
}

/// The sweep's totals `t` are the simulation `r`'s, to the bit.
fn same(prep: &Prepared, t: &Totals, r: &SimResult, at: &str) {
    assert_eq!(prep.figures(t), r.mean_figures(), "{at}");
    assert_eq!(t.collisions, r.fg.collisions, "{at}");
    assert_eq!(t.delayed_requests, r.fg.delayed_requests, "{at}");
    assert_eq!(t.bg_completed, r.bg.completed, "{at}");
    assert_eq!(t.bg_bytes, r.bg.bytes, "{at}");
    assert_eq!(t.idle_intervals, r.idle_intervals, "{at}");
    assert_eq!(
        (t.bg_busy_ns + t.bg_overrun_ns) as f64 / 1e9,
        r.bg.busy_s,
        "{at}"
    );
}

fn check(prep: &Prepared, what: &str) {
    let mut checked = 0;
    let mut exits = 0;
    for sim in configs() {
        let sweep = FastSweep::new(prep, &sim).expect("deterministic service, endless work");
        for (name, values) in samples() {
            let entry = policy::entry(name).unwrap();
            let rule = entry.interval_rule.expect("declares a rule");
            let knob = entry.knob.unwrap().name;
            // (setting, where, simulation, single-lane totals)
            let mut runs = Vec::new();
            for &v in &values {
                for size in [4096u64, 64 << 10, 1 << 20] {
                    let text = if name == "oracle" {
                        format!("{v}")
                    } else {
                        format!("{}ns", v as u64)
                    };
                    let spec = format!("{name}:{knob}={text}");
                    let cfg = SimConfig {
                        bg_size_bytes: size,
                        ..sim.clone()
                    };
                    let r = simulate(prep, policy::build(&spec).unwrap().as_mut(), &cfg).unwrap();
                    let t = sweep.totals(rule, v, size, &cfg, None).unwrap();
                    let at = format!(
                        "{what}: {spec} size {size} penalty {}",
                        sim.switch_penalty_ns
                    );
                    same(prep, &t, &r, &at);
                    // a cap stops the walk exactly when the total passes it
                    if t.added_ns > 0 {
                        assert!(sweep
                            .totals(rule, v, size, &cfg, Some(t.added_ns - 1))
                            .is_none());
                        assert_eq!(sweep.totals(rule, v, size, &cfg, Some(t.added_ns)), Some(t));
                    }
                    let setting = Setting {
                        value: v,
                        size_bytes: size,
                        cap_added_ns: None,
                    };
                    runs.push((setting, at, r, t));
                    checked += 1;
                }
            }
            // several settings in one pass (the multi-lane walk for those
            // that use many intervals): the same totals, uncapped and with
            // caps that stop lanes at different points or just do not
            for k in [1, 2, 3, 4, 5, 8] {
                for (c, chunk) in runs.chunks(k).enumerate() {
                    let settings: Vec<Setting> = chunk.iter().map(|run| run.0).collect();
                    let many = sweep.totals_many(rule, &settings, &sim);
                    for ((_, at, r, t), m) in chunk.iter().zip(&many) {
                        let m = m.expect("no cap");
                        same(prep, &m, r, &format!("{at}, {k} at once"));
                        assert_eq!(m, *t, "{at}, {k} at once");
                    }
                    let capped: Vec<Setting> = chunk
                        .iter()
                        .enumerate()
                        .map(|(l, (s, _, _, t))| Setting {
                            cap_added_ns: Some(match (l + c) % 3 {
                                0 => t.added_ns.saturating_sub(1),
                                1 => t.added_ns,
                                _ => t.added_ns / 2,
                            }),
                            ..*s
                        })
                        .collect();
                    let many = sweep.totals_many(rule, &capped, &sim);
                    for (s, (m, (_, at, _, t))) in capped.iter().zip(many.iter().zip(chunk)) {
                        let cap = s.cap_added_ns.unwrap();
                        let want = (t.added_ns <= cap).then_some(*t);
                        exits += want.is_none() as usize;
                        assert_eq!(*m, want, "{at}, {k} at once, cap {cap}");
                    }
                }
            }
        }
    }
    assert!(checked > 100);
    assert!(exits > 100, "{exits} settings over their caps");
}

#[test]
fn the_sweep_equals_the_simulation_at_sampled_points_on_synthetic_traces() {
    check(&synthetic("poisson", 20_000, 3), "M/M/1");
    check(&synthetic("mmpp:cv=9,burst=200", 20_000, 5), "MMPP");
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn the_sweep_equals_the_simulation_at_sampled_points_on_the_hp_trace() {
    check(&hp(), "HP disk 0");
}

#[test]
fn the_sweep_refuses_what_it_cannot_compute() {
    let prep = synthetic("poisson", 2000, 1);
    let exp = SimConfig::default(); // exponential BG service
    assert!(FastSweep::new(&prep, &exp).is_none());
    let finite = SimConfig {
        bg_service: BgService::Constant { ns: 1_000_000 },
        bg_work: fallow_core::sim::BgWork::Requests(10),
        ..SimConfig::default()
    };
    assert!(FastSweep::new(&prep, &finite).is_none());
}

#[test]
fn tune_gives_the_same_answers_by_sweep_and_by_simulation() {
    let prep = synthetic("mmpp:cv=9,burst=200", 5_000, 11);
    let sim = &configs()[1];
    for policy in [
        "fixed-wait",
        "lossless-waiting",
        "oracle",
        "preemption-interval",
    ] {
        let mut cfg = TuneConfig::new(Budget::parse_list("500us,2ms,3%").unwrap());
        cfg.sizes = tune::parse_sizes("16KiB..2MiB/8").unwrap();
        cfg.max_delay_ns = Some(25_000_000);
        cfg.threads = 2;
        cfg.fast = false;
        let slow = tune::tune(&prep, policy, sim, &cfg, &|_, _| {}).unwrap();
        assert_eq!(slow.method, "simulation", "{policy}");
        // one thread keeps several sizes going, joining as others finish;
        // two threads split them
        for threads in [1, 2] {
            cfg.fast = true;
            cfg.threads = threads;
            let fast = tune::tune(&prep, policy, sim, &cfg, &|_, _| {}).unwrap();
            assert_eq!(fast.method, "sweep", "{policy}");
            assert_eq!(
                serde_json::to_string(&fast.budgets).unwrap(),
                serde_json::to_string(&slow.budgets).unwrap(),
                "{policy}, {threads} threads"
            );
            assert_eq!(fast.simulations, slow.simulations, "{policy}");
            assert!(fast.budgets.iter().any(|b| b.best.is_some()), "{policy}");
        }
    }
    // a fixed parameter besides the knob and size, or exponential service: simulated
    let exp = SimConfig::default();
    let mut cfg = TuneConfig::new(Budget::parse_list("1ms").unwrap());
    // one size: exponential service charges nothing for size (docs/tuning.md, "Request sizes")
    cfg.sizes = vec![65_536];
    let t = tune::tune(&prep, "fixed-wait", &exp, &cfg, &|_, _| {}).unwrap();
    assert_eq!(t.method, "simulation");
}
