//! The whole answer of an energy study, as `fallow energy --json` prints
//! it and `fallow.energy` returns it: the input described, the power model
//! and its break-even time, the network, and one [`EnergyRun`] per policy
//! and setting. One type for both, so the CLI and the Python binding
//! cannot drift apart in keys or figures.

use super::{
    spindown, study_until, Availability, BgPlan, EnergyConfig, EnergyInput, EnergyRun, Network,
    PowerModel, RemoteWhen,
};
use crate::error::Result;
use serde::Serialize;
use std::sync::atomic::AtomicBool;

/// An energy study, ready to print or serialise.
#[derive(Debug, Clone, Serialize)]
pub struct EnergyReport {
    /// The input.
    pub input: InputInfo,
    /// The disk's power model.
    pub power: PowerModel,
    /// Break-even idle time of that model, s.
    pub break_even_s: f64,
    /// The network.
    pub network: Network,
    /// When peer-held requests go to the peer.
    pub remote_when: RemoteWhen,
    /// BG work asked for.
    pub bg: Option<BgPlan>,
    /// One per policy and setting, each policy's standalone run first.
    pub runs: Vec<EnergyRun>,
}

/// What the input is: a block trace of one device or a file-level trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    /// A block trace (one device of it).
    Block,
    /// A file-level trace (`time_s,path,offset,size,op,kind`).
    File,
}

/// The input, described.
#[derive(Debug, Clone, Serialize)]
pub struct InputInfo {
    /// Path of the trace.
    pub path: String,
    /// `block` or `file`.
    pub kind: InputKind,
    /// Device simulated (block traces).
    pub device: Option<u32>,
    /// Requests.
    pub requests: u64,
    /// Requests that reach the local disk without peers.
    pub disk_requests: u64,
    /// Requests that must stay local whatever peers hold.
    pub mandatory_local: u64,
    /// Span, s.
    pub span_s: f64,
    /// The longest idle interval of the disk serving every request, s:
    /// the most any spin-down policy can act on.
    pub longest_idle_s: f64,
    /// Where completion times come from, in words.
    pub completions: String,
    /// The seed.
    pub seed: u64,
}

impl InputInfo {
    /// Describe a prepared input; `completions` says where its completion
    /// times come from (`recorded`, `modelled: …`).
    pub fn new(
        input: &EnergyInput,
        path: String,
        kind: InputKind,
        device: Option<u32>,
        completions: String,
        seed: u64,
    ) -> InputInfo {
        InputInfo {
            path,
            kind,
            device,
            requests: input.requests() as u64,
            disk_requests: input.disk_requests() as u64,
            mandatory_local: input.mandatory_local() as u64,
            span_s: input.span_ns() as f64 / 1e9,
            longest_idle_s: input.longest_idle_ns() as f64 / 1e9,
            completions,
            seed,
        }
    }
}

/// The policies of a study when none are named: every registered policy
/// but the always-on reference (which every study runs anyway), the
/// SARD paper's fixed timeout first.
pub fn default_policies() -> Vec<String> {
    let mut names: Vec<String> = spindown::registry()
        .iter()
        .filter(|e| !e.reference)
        .map(|e| e.name.to_string())
        .collect();
    names.sort_by_key(|n| n != "timeout");
    names
}

impl EnergyReport {
    /// Run [`study`] over `input` and assemble the report.
    pub fn run(
        input: &EnergyInput,
        info: InputInfo,
        policies: &[String],
        settings: &[Availability],
        cfg: &EnergyConfig,
    ) -> Result<EnergyReport> {
        EnergyReport::run_until(input, info, policies, settings, cfg, None)
    }

    /// [`EnergyReport::run`] that stops with [`crate::Error::Interrupted`]
    /// soon after `cancel` is set (see [`study_until`]).
    pub fn run_until(
        input: &EnergyInput,
        info: InputInfo,
        policies: &[String],
        settings: &[Availability],
        cfg: &EnergyConfig,
        cancel: Option<&AtomicBool>,
    ) -> Result<EnergyReport> {
        let runs = study_until(input, policies, settings, cfg, cancel)?;
        Ok(EnergyReport {
            input: info,
            break_even_s: cfg.power.break_even_ns() as f64 / 1e9,
            power: cfg.power.clone(),
            network: cfg.network,
            remote_when: cfg.remote_when,
            bg: cfg.bg,
            runs,
        })
    }
}

impl EnergyReport {
    /// Why every chart of spin-downs is empty, and what to try, when no
    /// run spun the disk down (`fallow energy` on the demo's trace once
    /// printed rows of zeros and flat lines with no word of why).
    /// `None` when some run did.
    pub fn no_spindown_note(&self) -> Option<String> {
        if self.runs.iter().any(|r| r.shutdowns > 0) {
            return None;
        }
        let longest = self.input.longest_idle_s;
        let be = self.break_even_s;
        let mut s = format!(
            "No run spun the disk down: the longest idle interval of this trace is {}, shorter than \
             every policy waited.",
            crate::units::format_duration_ns(longest * 1e9)
        );
        if longest > 0.0 {
            // a whole number of ms under the longest interval
            let t_ms = ((longest * 1e3) / 2.0).floor().max(1.0);
            s.push_str(&format!(
                " A timeout under it would act on it (e.g. --policy timeout:t={t_ms}ms)."
            ));
        }
        if longest < be {
            s.push_str(&format!(
                " But spinning down saves energy only over an idle interval longer than the disk's \
                 break-even time, {}: every idle interval here is shorter, so on this trace a \
                 spin-down would cost energy and delay.",
                crate::units::format_duration_ns(be * 1e9)
            ));
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Op, Trace};

    #[test]
    fn default_policies_put_the_timeout_first_and_leave_out_always_on() {
        let p = default_policies();
        assert_eq!(p[0], "timeout");
        assert!(!p.iter().any(|n| n == "always-on"));
        assert!(p.iter().any(|n| n == "adaptive") && p.iter().any(|n| n == "predictive"));
    }

    #[test]
    fn report_carries_the_study_and_the_config() {
        // three reads 60 s apart: two spin-ups under a 10 s timeout
        let s = 1_000_000_000u64;
        let arrival = vec![0, 60 * s, 120 * s];
        let completion: Vec<u64> = arrival.iter().map(|a| a + s / 100).collect();
        let trace = Trace::from_columns(
            arrival,
            Some(completion),
            vec![0; 3],
            vec![4096; 3],
            vec![Op::Read; 3],
            vec![0; 3],
        )
        .unwrap();
        let input = EnergyInput::from_trace(&trace, None, 1).unwrap();
        let info = InputInfo::new(
            &input,
            "t".into(),
            InputKind::Block,
            Some(0),
            "recorded".into(),
            1,
        );
        assert_eq!((info.requests, info.disk_requests), (3, 3));
        let cfg = EnergyConfig::default();
        let r = EnergyReport::run(
            &input,
            info,
            &["timeout:t=10s".into()],
            &[Availability::LocalFraction { fraction: 1.0 }],
            &cfg,
        )
        .unwrap();
        assert_eq!(r.runs.len(), 1);
        assert_eq!(r.runs[0].spinups, 2);
        // 60 s - 10 ms between a completion and the next arrival
        assert!((r.input.longest_idle_s - 59.99).abs() < 1e-9);
        assert_eq!(r.no_spindown_note(), None);
        assert_eq!(r.break_even_s, cfg.power.break_even_ns() as f64 / 1e9);
        // a 90 s timeout never acts on 60 s gaps: the note says why, what
        // timeout would act (half the longest, in whole ms), and that the
        // gaps beat the WD2500JD's 18 s break-even
        let quiet = EnergyReport::run(
            &input,
            r.input.clone(),
            &["timeout:t=90s".into()],
            &[Availability::LocalFraction { fraction: 1.0 }],
            &cfg,
        )
        .unwrap();
        assert_eq!(quiet.runs[0].shutdowns, 0);
        let note = quiet.no_spindown_note().expect("a note");
        assert!(note.contains("59.990 s"), "{note}");
        assert!(note.contains("timeout:t=29995ms"), "{note}");
        assert!(!note.contains("break-even"), "{note}");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["input"]["kind"], "block");
        assert_eq!(v["remote_when"], "asleep");
    }
}
