//! An arrival process from a front end's separate arguments (Python's
//! `fallow.synthetic(arrival=…, rate=…, k=…, cv=…, burst=…,
//! mmpp_rates=…, mmpp_switch=…)`), in the grammar of `--workload`.

use super::ArrivalProcess;
use crate::error::{Error, Result};

/// The arguments of an arrival process; `None` is not given.
#[derive(Debug, Clone, Default)]
pub struct ArrivalArgs<'a> {
    /// A spec in the `--workload` grammar (`poisson`, `erlang:k=4`, …).
    pub spec: &'a str,
    /// Mean requests per second: sets or overrides the spec's rate.
    pub rate_per_s: Option<f64>,
    /// Erlang shape, joined to the spec's parameters.
    pub k: Option<u32>,
    /// Coefficient of variation, joined to the spec's parameters.
    pub cv: Option<f64>,
    /// MMPP mean arrivals per burst, joined to the spec's parameters.
    pub burst: Option<f64>,
    /// An explicit two-state MMPP: the rates in each state, 1/s (with `mmpp_switch`).
    pub mmpp_rates: Option<[f64; 2]>,
    /// Its rates of leaving state 0 and state 1, 1/s (with `mmpp_rates`).
    pub mmpp_switch: Option<[f64; 2]>,
}

impl ArrivalArgs<'_> {
    /// The process: the explicit MMPP, or the spec with the parameters
    /// given as arguments joined to its own.
    pub fn process(&self) -> Result<ArrivalProcess> {
        match (self.mmpp_rates, self.mmpp_switch) {
            (Some(rate_per_s), Some(switch_per_s)) => {
                let p = ArrivalProcess::Mmpp2 {
                    rate_per_s,
                    switch_per_s,
                };
                match self.rate_per_s {
                    Some(r) => p.with_mean_rate(r),
                    None => Ok(p),
                }
            }
            (None, None) => {
                let extra: Vec<String> = [
                    self.k.map(|k| format!("k={k}")),
                    self.cv.map(|c| format!("cv={c}")),
                    self.burst.map(|b| format!("burst={b}")),
                ]
                .into_iter()
                .flatten()
                .collect();
                let mut spec = self.spec.to_string();
                if !extra.is_empty() {
                    spec.push(if spec.contains(':') { ',' } else { ':' });
                    spec.push_str(&extra.join(","));
                }
                ArrivalProcess::parse_with_rate(&spec, self.rate_per_s)
            }
            _ => Err(Error::invalid(
                "mmpp_switch",
                "an explicit MMPP needs both mmpp_rates=(r0, r1) and mmpp_switch=(s01, s10)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_join_the_spec() {
        let a = ArrivalArgs {
            spec: "erlang",
            k: Some(4),
            rate_per_s: Some(10.0),
            ..Default::default()
        };
        assert_eq!(
            a.process().unwrap(),
            ArrivalProcess::parse_with_rate("erlang:k=4", Some(10.0)).unwrap()
        );
        let half = ArrivalArgs {
            spec: "poisson",
            mmpp_rates: Some([1.0, 2.0]),
            ..Default::default()
        };
        assert!(
            matches!(half.process(), Err(Error::InvalidParameter { name, .. }) if name == "mmpp_switch")
        );
    }
}
