//! The policies of a comparison (`fallow compare`, `fallow.compare`): the
//! specs given, or the default line-up (every registered policy with its
//! default parameters, deployable ones first, clairvoyant references
//! last), built before any work so a typo fails at once; and their run,
//! side by side on the workspace's one pool.

use super::{check_sizes, simulate_until, BgService, Prepared, SimConfig, SimResult};
use crate::error::Result;
use crate::policy::{self, Policy};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

/// The policies to run, in order, with the specs they were built from,
/// and why a default one was left out.
pub struct Lineup {
    /// (spec, policy), in the order given.
    pub policies: Vec<(String, Box<dyn Policy>)>,
    /// `skipping SPEC: REASON`, one line per policy of the default
    /// line-up that cannot run here (front ends show them as warnings).
    pub skipped: Vec<String>,
}

/// The default line-up's specs.
pub fn default_specs() -> Vec<String> {
    let reg = policy::registry();
    reg.iter()
        .filter(|e| !e.clairvoyant)
        .chain(reg.iter().filter(|e| e.clairvoyant))
        .map(|e| e.name.to_string())
        .collect()
}

/// Build `specs` (None: the default line-up) for a run with BG service
/// `bg`. A policy that chooses its own request sizes needs a BG model that
/// charges for size ([`check_sizes`]): the default line-up leaves one out
/// and says why, one named explicitly is an error.
pub fn lineup(specs: Option<Vec<String>>, bg: &BgService) -> Result<Lineup> {
    let explicit = specs.is_some();
    let specs = specs.unwrap_or_else(default_specs);
    let mut out = Lineup {
        policies: Vec::with_capacity(specs.len()),
        skipped: Vec::new(),
    };
    for spec in specs {
        let built = policy::build(&spec).and_then(|p| {
            if p.chooses_size() {
                check_sizes(bg, Some(p.name()), 1)?;
            }
            Ok(p)
        });
        match built {
            Ok(p) => out.policies.push((spec, p)),
            Err(e) if !explicit => out.skipped.push(format!("skipping {spec}: {e}")),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// What [`run_lineup`] reports as it goes (the CLI's progress bar).
#[derive(Debug, Clone, Copy)]
pub enum LineupEvent<'a> {
    /// A worker took the policy of this spec.
    Started(&'a str),
    /// A policy's run ended.
    Finished,
}

/// Run every policy of a line-up on one prepared input, `threads` at a
/// time on the workspace's one pool ([`crate::polled::map_indexed`]: each
/// worker takes the next policy as it finishes one, so long and short runs
/// balance); the results in the line-up's order, each the same as a run
/// on its own. Once `cancel` is set, each run stops soon after
/// ([`super::simulate_cancellable`]). `fallow compare` and
/// `fallow.compare` both run their line-ups through it.
pub fn run_lineup(
    prep: &Prepared,
    policies: Vec<(String, Box<dyn Policy>)>,
    cfg: &SimConfig,
    threads: usize,
    cancel: Option<&AtomicBool>,
    progress: &(dyn Fn(LineupEvent<'_>) + Sync),
) -> Vec<(String, Result<SimResult>)> {
    let specs: Vec<String> = policies.iter().map(|(s, _)| s.clone()).collect();
    // each policy is taken by the one worker that runs it
    let policies: Vec<Mutex<Option<Box<dyn Policy>>>> = policies
        .into_iter()
        .map(|(_, p)| Mutex::new(Some(p)))
        .collect();
    let results = crate::polled::map_indexed(policies.len(), threads, |i| {
        let mut policy = policies[i]
            .lock()
            .expect("no panics while locked")
            .take()
            .expect("each policy runs once");
        progress(LineupEvent::Started(&specs[i]));
        let r = simulate_until(prep, policy.as_mut(), cfg, cancel);
        progress(LineupEvent::Finished);
        r
    });
    specs.into_iter().zip(results).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lineup_run_side_by_side_equals_each_run_alone() {
        use crate::sim::{simulate, Input, Request, Workload};
        let req = Request::new(Input::Workload(Workload {
            utilization: Some(0.3),
            requests: 20_000,
            ..Workload::new("mmpp:cv=9,burst=1000")
        }));
        let cfg = req.config();
        let prep = req.prepare().unwrap();
        let specs: Vec<String> = ["aggressive", "fixed-wait:t=50ms", "busy-bee", "oracle"]
            .map(String::from)
            .to_vec();
        let started = std::sync::atomic::AtomicUsize::new(0);
        let finished = std::sync::atomic::AtomicUsize::new(0);
        let side_by_side = run_lineup(
            &prep,
            lineup(Some(specs.clone()), &cfg.bg_service)
                .unwrap()
                .policies,
            &cfg,
            3,
            None,
            &|e| {
                let n = match e {
                    LineupEvent::Started(_) => &started,
                    LineupEvent::Finished => &finished,
                };
                n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            },
        );
        assert_eq!(side_by_side.len(), specs.len());
        for ((spec, together), want) in side_by_side.iter().zip(&specs) {
            assert_eq!(spec, want);
            let mut alone = policy::build(spec).unwrap();
            let alone = simulate(&prep, alone.as_mut(), &cfg).unwrap();
            let together = together.as_ref().unwrap();
            assert_eq!(together.fg.slowdown, alone.fg.slowdown, "{spec}");
            assert_eq!(together.bg.bytes, alone.bg.bytes, "{spec}");
            assert_eq!(together.fg.collisions, alone.fg.collisions, "{spec}");
        }
        assert_eq!(started.into_inner(), specs.len());
        assert_eq!(finished.into_inner(), specs.len());
        // a set cancel flag stops every run
        let stop = AtomicBool::new(true);
        let stopped = run_lineup(
            &prep,
            lineup(Some(specs.clone()), &cfg.bg_service)
                .unwrap()
                .policies,
            &cfg,
            2,
            Some(&stop),
            &|_| {},
        );
        assert!(stopped
            .iter()
            .all(|(_, r)| matches!(r, Err(crate::Error::Interrupted))));
    }

    #[test]
    fn default_lineup_puts_clairvoyant_last_and_skips_size_choosers() {
        let charges = "size".parse::<BgService>().unwrap();
        let flat = "const:5ms".parse::<BgService>().unwrap();
        assert!(charges.charges_for_size() && !flat.charges_for_size());
        let all = lineup(None, &charges).unwrap();
        assert!(all.skipped.is_empty());
        assert_eq!(all.policies.len(), policy::registry().len());
        let first_clairvoyant = all.policies.iter().position(|(_, p)| p.clairvoyant());
        let first_clairvoyant = first_clairvoyant.expect("the registry has references");
        assert!(all.policies[first_clairvoyant..]
            .iter()
            .all(|(_, p)| p.clairvoyant()));
        let choosers = all
            .policies
            .iter()
            .filter(|(_, p)| p.chooses_size())
            .count();
        assert!(choosers > 0);
        let flat_lineup = lineup(None, &flat).unwrap();
        assert_eq!(flat_lineup.skipped.len(), choosers);
        assert_eq!(flat_lineup.policies.len() + choosers, all.policies.len());
    }

    #[test]
    fn an_explicit_policy_fails() {
        let flat = "const:5ms".parse::<BgService>().unwrap();
        let chooser = policy::registry()
            .iter()
            .find(|e| policy::build(e.name).unwrap().chooses_size())
            .unwrap();
        assert!(lineup(Some(vec![chooser.name.into()]), &flat).is_err());
        assert!(lineup(Some(vec!["no-such".into()]), &flat).is_err());
        assert_eq!(
            lineup(Some(vec!["aggressive".into()]), &flat)
                .unwrap()
                .policies
                .len(),
            1
        );
    }
}
