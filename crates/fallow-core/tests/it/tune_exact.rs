//! Exact tuning against an exhaustive run of the simulator
//! (docs/tuning.md): on every shared real trace, for fixed-wait (the one-pass
//! sweep's policy), every step of the knob ladder is simulated at several
//! sizes with [`simulate`], and the best point within each of three budgets
//! is picked by hand; `tune`'s answer per size must equal it (throughput,
//! then added delay) and its overall answer must be at least the best
//! exhaustive point. The traces are cut to their first 2,000 requests (the
//! size of an `hm` sample) so the ~11,000 simulations per trace stay
//! quick; traces without completion times get an exponential 5 ms service.

use crate::readers::shared;
use fallow_core::policy;
use fallow_core::sim::{simulate, BgService, Prepared, SimConfig};
use fallow_core::trace::{read_trace, ReadOptions, Trace};
use fallow_core::tune::{self, ladder, Budget, Guarantee, SearchMode, TuneConfig};
use fallow_core::ServiceModel;
use std::path::{Path, PathBuf};

/// Requests kept of each trace (fewer in debug builds, where a simulation is slower).
const REQUESTS: usize = if cfg!(debug_assertions) { 1000 } else { 2000 };

/// The shared traces: (path, device: the README's for HP, else the busiest).
fn shared_traces() -> Vec<(PathBuf, Option<u32>)> {
    let mut v = vec![
        (shared("hp-hplajw-1992/ajw.1week.srt"), Some(0)),
        (shared("cloudphysics-vscsi/cloudPhysicsIO.vscsi"), None),
        (shared("blkparse-sample/blktrace.txt.gz"), None),
        (shared("pgbench-ext4-loop/pgbench-ext4-loop.csv.gz"), None),
    ];
    if let Ok(rd) = std::fs::read_dir(shared("msr-cuts")) {
        let mut cuts: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "trace"))
            .collect();
        cuts.sort();
        v.extend(cuts.into_iter().map(|p| (p, None)));
    }
    v
}

/// The first `REQUESTS` requests of the chosen device, prepared.
fn prepare(path: &Path, device: Option<u32>) -> Prepared {
    let opts = ReadOptions::default();
    let t = read_trace(path, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dev = device.unwrap_or_else(|| {
        t.devices()
            .iter()
            .max_by_key(|d| (d.requests, std::cmp::Reverse(d.id)))
            .unwrap()
            .id
    });
    let t = t.select_device(dev).unwrap();
    let n = t.len().min(REQUESTS);
    let cut = Trace::from_columns(
        t.arrival_ns()[..n].to_vec(),
        t.completion_ns().map(|c| c[..n].to_vec()),
        t.offset_bytes()[..n].to_vec(),
        t.size_bytes()[..n].to_vec(),
        t.op()[..n].to_vec(),
        t.device()[..n].to_vec(),
    )
    .unwrap();
    let service = ServiceModel::Exponential { mean_ns: 5_000_000 };
    let svc = cut.completion_ns().is_none().then_some(&service);
    Prepared::new(&cut, svc, 1).unwrap()
}

/// Every ladder step simulated at `size`: (throughput, added delay s, slowdown) each.
fn exhaustive(prep: &Prepared, sim: &SimConfig, size: u64) -> Vec<(f64, f64, f64)> {
    let knob = policy::entry("fixed-wait").unwrap().knob.unwrap();
    let steps = ladder(&knob);
    let mut cfg = sim.clone();
    cfg.bg_size_bytes = size;
    let out = std::sync::Mutex::new(vec![(0.0, 0.0, 0.0); steps.len()]);
    std::thread::scope(|s| {
        for part in 0..2 {
            let (steps, out, cfg) = (&steps, &out, &cfg);
            s.spawn(move || {
                for (i, st) in steps.iter().enumerate().skip(part).step_by(2) {
                    let mut p = policy::build(&format!("fixed-wait:t={}", st.text)).unwrap();
                    let r = simulate(prep, p.as_mut(), cfg).unwrap();
                    out.lock().unwrap()[i] = (
                        r.bg.throughput_bytes_per_s,
                        r.fg.mean_added_delay_s,
                        r.fg.slowdown,
                    );
                }
            });
        }
    });
    out.into_inner().unwrap()
}

/// The best point within `b` by hand: most throughput, then least delay.
fn best_within(points: &[(f64, f64, f64)], b: &Budget) -> Option<(f64, f64)> {
    let mut best: Option<(f64, f64)> = None;
    for &(tp, d, sd) in points {
        if !b.meets_means(sd, d) {
            continue;
        }
        if best.is_none_or(|(btp, bd)| tp > btp || (tp == btp && d < bd)) {
            best = Some((tp, d));
        }
    }
    best
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn tune_equals_the_exhaustive_simulation_on_every_shared_trace() {
    let traces = shared_traces();
    let sim = SimConfig {
        bg_service: "size:base=8ms,knee=64KiB,rate=100MB"
            .parse::<BgService>()
            .unwrap(),
        ..SimConfig::default()
    };
    let budgets = Budget::parse_list("1ms,4ms,5%").unwrap();
    let sizes = vec![64u64 << 10, 1 << 20];
    let mut checked = 0;
    for (path, device) in traces {
        let prep = prepare(&path, device);
        let cfg = TuneConfig {
            budgets: budgets.clone(),
            sizes: sizes.clone(),
            max_delay_ns: None,
            threads: 2,
            fast: true,
            // the whole ladder, however long the trace
            search: SearchMode::Exact,
            auto_limit_visits: tune::AUTO_EXACT_LIMIT_VISITS,
            cancel: None,
        };
        let t = tune::tune(&prep, "fixed-wait", &sim, &cfg, &|_, _| {}).unwrap();
        assert_eq!(t.guarantee, Guarantee::Exact);
        let all: Vec<Vec<(f64, f64, f64)>> =
            sizes.iter().map(|&s| exhaustive(&prep, &sim, s)).collect();
        for (b, tuned) in budgets.iter().zip(&t.budgets) {
            let mut overall: Option<f64> = None;
            for (z, row) in tuned.sizes.iter().enumerate() {
                let want = best_within(&all[z], b);
                let got = row
                    .best
                    .as_ref()
                    .map(|c| (c.bg_throughput_bytes_per_s, c.fg_mean_added_delay_s));
                assert_eq!(
                    got,
                    want,
                    "{} {b} at {} B: tune against the exhaustive simulation",
                    path.display(),
                    sizes[z]
                );
                if let Some((tp, _)) = want {
                    overall = Some(overall.map_or(tp, |o: f64| o.max(tp)));
                }
            }
            let got = tuned.best.as_ref().map(|c| c.bg_throughput_bytes_per_s);
            assert!(
                got.unwrap_or(0.0) >= overall.unwrap_or(0.0),
                "{} {b}: {got:?} below {overall:?}",
                path.display()
            );
            eprintln!(
                "{} {b}: tune {:.4} MB/s = exhaustive best {:.4} MB/s",
                path.file_name().unwrap().to_string_lossy(),
                got.unwrap_or(0.0) / 1e6,
                overall.unwrap_or(0.0) / 1e6
            );
        }
        checked += 1;
    }
    eprintln!("{checked} traces checked against the exhaustive simulation");
}
