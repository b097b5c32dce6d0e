//! `fallow analyze` as one library call: a request (which device, how to
//! characterise it) in, a report out — the [`Characterization`] of the
//! device and its headline [`findings`], plain data that serialises to the
//! JSON of `fallow analyze --json`. The CLI, the demo and Python's
//! `fallow.analyze` all call [`analyze`], so they say the same thing.

mod findings;

pub use findings::{findings, headline_wait_s, interp_log, period_name, round_125, Finding};

use crate::characterize::{characterize, Characterization, CharacterizeOptions};
use crate::trace::{DeviceCount, DeviceSel, Trace};
use crate::Result;
use serde::Serialize;

/// What to analyse in a trace.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeRequest {
    /// The device; `None`: the busiest ([`busiest_device`]).
    pub device: Option<DeviceSel>,
    /// How to characterise it (service model, seed, lags, bins).
    pub options: CharacterizeOptions,
}

/// The report of [`analyze`]: the characterisation's keys, then
/// `findings`.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// Every analysis of the device's idleness.
    #[serde(flatten)]
    pub characterization: Characterization,
    /// The few sentences that sum it up, most important first.
    pub findings: Vec<Finding>,
}

impl Analysis {
    /// The report of a characterisation made elsewhere: its findings added.
    pub fn of(characterization: Characterization) -> Analysis {
        Analysis {
            findings: findings(&characterization),
            characterization,
        }
    }
}

/// The device with the most requests; the lowest id wins a tie, so the
/// choice is stable. `None` for an empty list.
pub fn busiest_device(devices: &[DeviceCount]) -> Option<u32> {
    devices
        .iter()
        .max_by(|a, b| a.requests.cmp(&b.requests).then(b.id.cmp(&a.id)))
        .map(|d| d.id)
}

/// Characterise the requested device of `trace` and state its findings.
/// The report keeps the file's whole device list.
pub fn analyze(trace: &Trace, request: &AnalyzeRequest) -> Result<Analysis> {
    let devices = trace.devices();
    let id = match &request.device {
        Some(sel) => trace.resolve_device(sel)?,
        None => busiest_device(&devices).unwrap_or(0),
    };
    let c = if devices.len() <= 1 && devices.first().is_none_or(|d| d.id == id) {
        characterize(trace, devices, Some(id), &request.options)?
    } else {
        let one = trace.select_device(id)?;
        characterize(&one, devices, Some(id), &request.options)?
    };
    Ok(Analysis::of(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Op;

    /// Two devices: 0 with 3 requests, 7 with 5 (`n` requests each 1 ms
    /// long, 10 ms apart).
    fn two_devices() -> Trace {
        let mut rows: Vec<(u64, u32)> = (0..3).map(|k| (k * 10_000_000, 0)).collect();
        rows.extend((0..5).map(|k| (k * 10_000_000 + 1_000, 7)));
        rows.sort();
        let n = rows.len();
        let arrival: Vec<u64> = rows.iter().map(|r| r.0).collect();
        let completion = arrival.iter().map(|a| a + 1_000_000).collect();
        let device = rows.iter().map(|r| r.1).collect();
        Trace::from_columns(
            arrival,
            Some(completion),
            vec![0; n],
            vec![4096; n],
            vec![Op::Read; n],
            device,
        )
        .unwrap()
    }

    #[test]
    fn the_busiest_device_is_analysed_unless_one_is_asked_for() {
        let t = two_devices();
        let a = analyze(&t, &AnalyzeRequest::default()).unwrap();
        // by hand: device 7 has 5 requests, so 4 idle intervals of 9 ms
        assert_eq!(a.characterization.trace.requests, 5);
        assert_eq!(a.characterization.idle.count, 4);
        assert!((a.characterization.idle.mean_s - 0.009).abs() < 1e-12);
        let asked = AnalyzeRequest {
            device: Some(DeviceSel::Id(0)),
            ..AnalyzeRequest::default()
        };
        let a0 = analyze(&t, &asked).unwrap();
        assert_eq!(a0.characterization.trace.requests, 3);
        // the report keeps the file's device list either way
        assert_eq!(a0.characterization.trace.devices.len(), 2);
        let none = AnalyzeRequest {
            device: Some(DeviceSel::Id(3)),
            ..AnalyzeRequest::default()
        };
        assert!(analyze(&t, &none).is_err());
    }

    #[test]
    fn a_tie_goes_to_the_lowest_id() {
        let d = |id, requests| DeviceCount {
            id,
            requests,
            name: None,
        };
        assert_eq!(busiest_device(&[d(4, 2), d(2, 2), d(9, 1)]), Some(2));
        assert_eq!(busiest_device(&[]), None);
    }

    #[test]
    fn the_report_is_the_characterisation_then_its_findings() {
        let a = analyze(&two_devices(), &AnalyzeRequest::default()).unwrap();
        let v = serde_json::to_value(&a).unwrap();
        let alone = serde_json::to_value(&a.characterization).unwrap();
        for (k, val) in alone.as_object().unwrap() {
            assert_eq!(&v[k], val, "{k}");
        }
        let f = v["findings"].as_array().unwrap();
        assert_eq!(f.len(), findings(&a.characterization).len());
        // by hand: device 7 is busy 5 × 1 ms of its 41 ms span (first
        // arrival to last completion), which the first finding states
        assert!((a.characterization.utilization - 5.0 / 41.0).abs() < 1e-9);
        assert_eq!(f[0]["topic"], "idle time");
        assert!(
            f[0]["text"]
                .as_str()
                .unwrap()
                .starts_with("The device is busy"),
            "{}",
            f[0]
        );
    }
}
