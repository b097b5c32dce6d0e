//! One energy request: the spin-down policies, who serves requests while
//! the disk sleeps, the network, the power model and optional BG work, with
//! the defaults and checks `fallow energy` and `fallow.energy` share.
//!
//! Front ends read the trace (a block trace of one device, or a file-level
//! trace) and convert their arguments into a [`Request`]; errors name the
//! parameter (`policy`, `local_fraction`, `peer_prob`, `net_bandwidth`,
//! `net_contention`, `bg_size`, …: Python's keyword spelling, the CLI maps
//! them to its flags).

use super::sim::{BgPlan, EnergyConfig, EnergyInput, RemoteWhen, UserData};
use super::{default_policies, spindown, Availability, FileTrace, Network, PowerModel};
use super::{EnergyReport, InputInfo, SEED_LOCAL_FRACTIONS};
use crate::error::{Error, Result};
use crate::sim::BgService;
use crate::trace::Trace;
use crate::ServiceModel;
use std::sync::atomic::AtomicBool;

/// Probability that one peer holds a file in memory, when not given.
pub const DEFAULT_PEER_PROB: f64 = 0.1;
/// Size of one BG request, bytes.
pub const DEFAULT_BG_SIZE_BYTES: u64 = 65_536;
/// BG service model (each request takes its mean for the size).
pub const DEFAULT_BG_SERVICE: &str = "size";
/// Idle time before BG work starts in an interval, ns.
pub const DEFAULT_BG_WAIT_NS: u64 = 100_000_000;
/// Seed of the choice of local requests, the peer draws and the contention.
pub const DEFAULT_SEED: u64 = crate::dist::DEFAULT_SEED;

/// `work_bytes` of BG work with the default request size, service and wait.
pub fn default_bg(work_bytes: u64) -> BgPlan {
    BgPlan {
        work_bytes,
        size_bytes: DEFAULT_BG_SIZE_BYTES,
        service: DEFAULT_BG_SERVICE
            .parse::<BgService>()
            .expect("the default BG service parses"),
        wait_ns: DEFAULT_BG_WAIT_NS,
    }
}

/// Everything an energy study needs besides the trace.
#[derive(Debug, Clone)]
pub struct Request {
    /// Spin-down policy specs (default: every non-reference policy).
    pub policies: Vec<String>,
    /// The availability settings, one row each (default: the SARD paper's
    /// shares of requests kept local).
    pub availability: Vec<Availability>,
    /// When peer-held requests go to the peer.
    pub remote_when: RemoteWhen,
    /// Where the user data of a file-level trace lives.
    pub user_data: UserData,
    /// Service-time model: completions of a block trace without recorded
    /// ones; every request of a file-level trace (default `disk`).
    pub service: Option<ServiceModel>,
    /// The disk's power model.
    pub power: PowerModel,
    /// The network to peers.
    pub network: Network,
    /// BG work to fit into the time the disk spins anyway.
    pub bg: Option<BgPlan>,
    /// Seed of every draw.
    pub seed: u64,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            policies: default_policies(),
            availability: SEED_LOCAL_FRACTIONS
                .iter()
                .map(|&fraction| Availability::LocalFraction { fraction })
                .collect(),
            remote_when: RemoteWhen::Asleep,
            user_data: UserData::Local,
            service: None,
            power: PowerModel::default(),
            network: Network::default(),
            bg: None,
            seed: DEFAULT_SEED,
        }
    }
}

impl Request {
    /// Check every setting, so a bad one fails before any work.
    pub fn validate(&self) -> Result<()> {
        if self.policies.is_empty() {
            return Err(Error::invalid("policy", "give at least one policy"));
        }
        for p in &self.policies {
            spindown::build(p)?;
        }
        for a in &self.availability {
            a.validate()?;
        }
        self.network.validate()?;
        if let Some(bg) = &self.bg {
            for (name, v) in [("bg_work", bg.work_bytes), ("bg_size", bg.size_bytes)] {
                if v == 0 {
                    return Err(Error::invalid(name, "must be at least 1 byte"));
                }
            }
        }
        Ok(())
    }

    /// The simulator's settings.
    pub fn config(&self) -> EnergyConfig {
        EnergyConfig {
            power: self.power.clone(),
            network: self.network,
            remote_when: self.remote_when,
            disk: match &self.service {
                Some(ServiceModel::Disk(d)) => *d,
                _ => Default::default(),
            },
            bg: self.bg,
            seed: self.seed,
        }
    }

    /// Prepare a block trace of one device.
    pub fn prepare_block(&self, trace: &Trace) -> Result<EnergyInput> {
        self.prepare_block_until(trace, None)
    }

    /// [`Request::prepare_block`] that stops with [`Error::Interrupted`]
    /// soon after `cancel` is set.
    pub fn prepare_block_until(
        &self,
        trace: &Trace,
        cancel: Option<&AtomicBool>,
    ) -> Result<EnergyInput> {
        EnergyInput::from_trace_until(trace, self.service.as_ref(), self.seed, cancel)
    }

    /// The service model of a file-level trace: as given, or `disk`.
    pub fn file_service(&self) -> ServiceModel {
        self.service
            .clone()
            .unwrap_or(ServiceModel::Disk(Default::default()))
    }

    /// Prepare a file-level trace.
    pub fn prepare_files(&self, ft: &FileTrace) -> Result<EnergyInput> {
        EnergyInput::from_file_trace(ft, &self.file_service(), self.user_data, self.seed)
    }

    /// Every policy under every availability setting, described by `info`.
    pub fn run(&self, input: &EnergyInput, info: InputInfo) -> Result<EnergyReport> {
        self.run_until(input, info, None)
    }

    /// [`Request::run`] that stops with [`Error::Interrupted`] soon after
    /// `cancel` is set (a front end's Ctrl-C); with the flag
    /// clear or `None` it is [`Request::run`].
    pub fn run_until(
        &self,
        input: &EnergyInput,
        info: InputInfo,
        cancel: Option<&AtomicBool>,
    ) -> Result<EnergyReport> {
        self.validate()?;
        EnergyReport::run_until(
            input,
            info,
            &self.policies,
            &self.availability,
            &self.config(),
            cancel,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_seeds() {
        let r = Request::default();
        assert_eq!(r.availability.len(), 6);
        assert!(matches!(
            r.availability[0],
            Availability::LocalFraction { fraction } if fraction == 1.0
        ));
        assert_eq!(r.policies.first().map(String::as_str), Some("timeout"));
        // 1 Gbit/s and 200 µs (SARD seed §IV-B2)
        assert_eq!(r.network.bandwidth_bytes_per_s, 125e6);
        assert_eq!(r.network.latency_ns, 200_000);
        assert_eq!(r.seed, 1);
        let bg = default_bg(1 << 30);
        assert_eq!((bg.size_bytes, bg.wait_ns), (65_536, 100_000_000));
        r.validate().unwrap();
    }

    #[test]
    fn errors_name_the_parameter() {
        let name = |r: &Request| match r.validate() {
            Err(Error::InvalidParameter { name, .. }) => name,
            other => panic!("expected an invalid parameter, got {other:?}"),
        };
        let r = Request {
            policies: vec![],
            ..Request::default()
        };
        assert_eq!(name(&r), "policy");
        let mut bg = default_bg(1);
        bg.size_bytes = 0;
        let r = Request {
            bg: Some(bg),
            ..Request::default()
        };
        assert_eq!(name(&r), "bg_size");
    }
}
