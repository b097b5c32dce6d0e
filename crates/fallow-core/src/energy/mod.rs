//! Disk energy management and SARD in simulation (`fallow energy`).
//!
//! Idle time saves energy too: a disk spun down in a long idle interval
//! draws a fraction of its idle power, but the next request waits seconds
//! for the spin-up. SARD (Wang et al.) serves application
//! files from peers' memory while the local disk sleeps, so fewer requests
//! wake it: idle periods get fewer and longer, spin-ups and their delays
//! fall. This module replays a trace through a disk power-state model
//! under a spin-down policy, with and without peers.
//!
//! ## Tour
//! - [`power`]: [`PowerModel`] (SARD's WD2500JD, Table III), the
//!   break-even time, TOML overrides per device ([`PowerFile`]).
//! - [`spindown`]: the [`SpinDown`] trait and its registry — `always-on`,
//!   `timeout`, `adaptive`, `predictive` — one file each.
//! - [`filetrace`]: file-level traces (time, path, offset, size, op,
//!   application or user file), for SARD's per-file decision.
//! - [`sard`]: which requests a peer may serve ([`Route`], from a local
//!   fraction or a peer model, [`Availability`]) and the [`Network`] cost.
//! - [`sim`]: the one-pass simulation ([`simulate`]) over an
//!   [`EnergyInput`] prepared once.
//! - [`metrics`]: [`EnergyRun`] (idle periods, spin-ups, exposed delay,
//!   energy by state, EDP) and the normalisation to the standalone and the
//!   always-on disk; [`study`] runs a grid of policies × settings.
//! - [`report`]: [`EnergyReport`], a study with its input, power model and
//!   network: what `fallow energy --json` prints and `fallow.energy` returns.
//!
//! ## Example
//! ```
//! use fallow_core::energy::{study, Availability, EnergyConfig, EnergyInput};
//! use fallow_core::trace::{Op, Trace};
//!
//! // Ten 10 ms reads, one every 60 s: under a 10 s timeout the disk
//! // spins down in each gap and every read waits 9 s for the spin-up.
//! let s = 1_000_000_000u64;
//! let arrival: Vec<u64> = (0..10).map(|i| i * 60 * s).collect();
//! let completion: Vec<u64> = arrival.iter().map(|a| a + 10_000_000).collect();
//! let trace = Trace::from_columns(arrival, Some(completion), vec![0; 10],
//!     vec![4096; 10], vec![Op::Read; 10], vec![0; 10])?;
//! let input = EnergyInput::from_trace(&trace, None, 1)?;
//! let runs = study(&input, &["timeout:t=10s".into()],
//!     &[Availability::LocalFraction { fraction: 0.5 }], &EnergyConfig::default())?;
//! let (alone, sard) = (&runs[0], &runs[1]);
//! assert_eq!(alone.spinups, 9);
//! assert_eq!(alone.exposed_delay_s, 81.0);
//! // with half the reads served by peers, fewer spin-ups and less delay
//! assert!(sard.spinups < alone.spinups);
//! assert!(sard.vs_standalone.unwrap().exposed_delay.unwrap() < 1.0);
//! # Ok::<(), fallow_core::Error>(())
//! ```

pub mod filetrace;
pub mod metrics;
mod options;
pub mod power;
pub mod report;
mod request;
pub mod sard;
pub mod sim;
pub mod spindown;

pub use filetrace::{read_file_trace, FileKind, FileTrace};
pub use metrics::{normalise, EnergyByState, EnergyRun, PowerSpans, Ratios};
pub use options::{busiest_device, power_overrides, Options};
pub use power::{PowerFile, PowerModel};
pub use report::{default_policies, EnergyReport, InputInfo, InputKind};
pub use request::{
    default_bg, Request, DEFAULT_BG_SERVICE, DEFAULT_BG_SIZE_BYTES, DEFAULT_BG_WAIT_NS,
    DEFAULT_PEER_PROB, DEFAULT_SEED,
};
pub use sard::{Availability, Network, Route};
pub use sim::{simulate, simulate_until, BgPlan, EnergyConfig, EnergyInput, RemoteWhen, UserData};
pub use spindown::SpinDown;

use crate::error::Result;
use crate::polled::cancelled;
use std::sync::atomic::AtomicBool;

/// SARD's rows of Table V and VI: the share of requests served locally.
pub const SEED_LOCAL_FRACTIONS: [f64; 6] = [1.0, 0.15, 0.1, 0.05, 0.02, 0.01];

/// Run every policy under the standalone disk and every setting; the
/// results, policy by policy, start with the standalone run, then one per
/// setting, each normalised to that policy's standalone run and to the
/// always-on standalone disk. With BG work in `cfg`, each run is made
/// without and with it: the figures are those without, and `bg` holds
/// what the BG work got done and its extra energy.
pub fn study(
    input: &EnergyInput,
    policies: &[String],
    settings: &[Availability],
    cfg: &EnergyConfig,
) -> Result<Vec<EnergyRun>> {
    study_until(input, policies, settings, cfg, None)
}

/// [`study`] that stops with [`crate::Error::Interrupted`] soon after
/// `cancel` is set: every run reads it (see [`simulate_until`]), and so
/// does every step between runs. With the flag clear or `None` it is
/// [`study`].
pub fn study_until(
    input: &EnergyInput,
    policies: &[String],
    settings: &[Availability],
    cfg: &EnergyConfig,
    cancel: Option<&AtomicBool>,
) -> Result<Vec<EnergyRun>> {
    let check = || {
        if cancelled(cancel) {
            Err(crate::Error::Interrupted)
        } else {
            Ok(())
        }
    };
    for p in policies {
        spindown::build(p)?; // a typo fails before any run
    }
    // 100 % local is the standalone disk: one run for both
    let mut all = vec![Availability::Standalone];
    all.extend(
        settings
            .iter()
            .filter(|s| {
                **s != Availability::Standalone
                    && **s != Availability::LocalFraction { fraction: 1.0 }
            })
            .cloned(),
    );
    let routes = all
        .iter()
        .map(|a| {
            check()?;
            input.routes(a, cfg.seed)
        })
        .collect::<Result<Vec<_>>>()?;
    let plain = EnergyConfig {
        bg: None,
        ..cfg.clone()
    };
    let one = |spec: &str, setting: &Availability, routes: &[sard::Route]| -> Result<EnergyRun> {
        let mut r = simulate_until(
            input,
            routes,
            spindown::build(spec)?.as_mut(),
            &plain,
            cancel,
        )?;
        if cfg.bg.is_some() {
            let with = simulate_until(input, routes, spindown::build(spec)?.as_mut(), cfg, cancel)?;
            if let Some(mut bg) = with.bg {
                bg.extra_energy_j = Some(with.energy_j.total - r.energy_j.total);
                r.bg = Some(bg);
            }
        }
        r.policy = spec.to_string();
        r.setting = setting.label();
        r.local_fraction = match setting {
            Availability::LocalFraction { fraction } => Some(*fraction),
            Availability::Standalone => Some(1.0),
            Availability::Peers { .. } => None,
        };
        Ok(r)
    };
    let mut runs = Vec::with_capacity(policies.len() * all.len());
    for spec in policies {
        for (setting, r) in all.iter().zip(&routes) {
            runs.push(one(spec, setting, r)?);
        }
    }
    let always_on = one("always-on", &Availability::Standalone, &routes[0])?;
    let standalone: Vec<EnergyRun> = runs
        .iter()
        .filter(|r| r.setting == Availability::Standalone.label())
        .cloned()
        .collect();
    normalise(
        &mut runs,
        &|r| standalone.iter().find(|s| s.policy == r.policy).cloned(),
        Some(&always_on),
    );
    Ok(runs)
}
