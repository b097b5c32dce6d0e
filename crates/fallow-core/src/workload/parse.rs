//! Arrival processes as text, one grammar for the CLI, Python and configs:
//!
//! ```text
//! poisson                          exponential gaps (CV 1)
//! erlang:k=4  |  erlang:cv=0.5     Erlang-k gaps (CV 1/√k; cv= picks the nearest k)
//! lognormal:cv=3                   lognormal gaps with that CV
//! hyperexp:cv=4                    balanced-means two-phase hyperexponential gaps (CV ≥ 1)
//! mmpp:cv=9,burst=1000             two-state MMPP fitted to CV and burst length (see fit_mmpp2)
//! mmpp:rates=40/1,sojourn=20s/60s  two-state MMPP by its rates (1/s) and mean sojourns
//! ```
//!
//! Every form takes `rate=R`, the mean arrival rate in requests per second
//! (1/s if absent; for `mmpp:rates=…` the rates themselves give it, and
//! `rate=` rescales them). [`ArrivalProcess::parse_with_rate`] lets a
//! caller (`--arrival-rate`, `--utilization`) supply or override the rate.

use super::ArrivalProcess;
use crate::error::{Error, Result};
use crate::units::parse_duration_ns;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

const FORMS: &str = "poisson, erlang:k=K, lognormal:cv=C, hyperexp:cv=C, \
                     mmpp:cv=C,burst=B or mmpp:rates=R1/R2,sojourn=T1/T2; each with rate=R";

impl ArrivalProcess {
    /// Parse `spec` (the grammar above). `rate_per_s`, when given, sets the
    /// mean rate (rescaling the process's time axis). Fails when neither the
    /// spec nor the caller gives a rate, so a forgotten rate never silently
    /// becomes 1/s.
    pub fn parse_with_rate(spec: &str, rate_per_s: Option<f64>) -> Result<ArrivalProcess> {
        let (p, has_rate) = parse(spec)?;
        match rate_per_s {
            Some(r) => p.with_mean_rate(r),
            None if has_rate => Ok(p),
            None => Err(Error::invalid(
                "arrival rate",
                format!(
                    "`{spec}` has no rate: add rate=R (requests/s) to it, or give an arrival \
                     rate or a utilisation"
                ),
            )),
        }
    }
}

impl ArrivalProcess {
    /// Parse `spec` for a device with `service` and requests of
    /// `size_bytes`: the mean rate is `rate_per_s`, or the rate that gives
    /// FG `utilization` ([`super::rate_for_utilization`]), or the spec's own
    /// (`rate=R`); giving both a rate and a utilisation is an error.
    pub fn from_spec(
        spec: &str,
        rate_per_s: Option<f64>,
        utilization: Option<f64>,
        service: &crate::ServiceModel,
        size_bytes: u64,
    ) -> Result<ArrivalProcess> {
        let rate = match (rate_per_s, utilization) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "arrival rate",
                    "give an arrival rate or a utilisation, not both",
                ))
            }
            (Some(r), None) => Some(r),
            (None, Some(u)) => Some(super::rate_for_utilization(u, service, size_bytes)?),
            (None, None) => None,
        };
        ArrivalProcess::parse_with_rate(spec, rate)
    }
}

impl FromStr for ArrivalProcess {
    type Err = Error;
    /// Parse the grammar above; the mean rate is 1/s unless the spec gives one.
    fn from_str(s: &str) -> Result<Self> {
        parse(s).map(|(p, _)| p)
    }
}

/// The process, and whether the spec fixed its rate.
fn parse(spec: &str) -> Result<(ArrivalProcess, bool)> {
    let bad = |m: String| Error::invalid("arrival process", format!("`{spec}`: {m}"));
    let (kind, arg) = spec.split_once(':').unwrap_or((spec, ""));
    let kind = kind.trim().to_ascii_lowercase();
    let mut kv = BTreeMap::new();
    for item in arg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| bad(format!("`{item}` is not key=value")))?;
        kv.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let take_num = |kv: &mut BTreeMap<String, String>, key: &str| -> Result<Option<f64>> {
        kv.remove(key)
            .map(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad(format!("{key}=`{v}` is not a number")))
            })
            .transpose()
    };
    let rate = take_num(&mut kv, "rate")?;
    let r = rate.unwrap_or(1.0);
    let need =
        |key: &str, v: Option<f64>| v.ok_or_else(|| bad(format!("{kind} needs {key}= ({FORMS})")));
    let (process, known, explicit_rate): (ArrivalProcess, &[&str], bool) = match kind.as_str() {
        "poisson" | "exp" | "exponential" => {
            (ArrivalProcess::Poisson { rate_per_s: r }, &["rate"], false)
        }
        "erlang" => {
            let k = match (take_num(&mut kv, "k")?, take_num(&mut kv, "cv")?) {
                (Some(_), Some(_)) => return Err(bad("give k= or cv=, not both".into())),
                (Some(k), None) if k >= 1.0 && k.fract() == 0.0 && k <= u32::MAX as f64 => k as u32,
                (Some(k), None) => return Err(bad(format!("k={k} must be a whole number >= 1"))),
                (None, Some(cv)) if cv > 0.0 && cv <= 1.0 => {
                    (1.0 / (cv * cv)).round().max(1.0) as u32
                }
                (None, Some(cv)) => {
                    return Err(bad(format!(
                        "erlang has CV <= 1 (got {cv}); use lognormal or hyperexp for CV > 1"
                    )))
                }
                (None, None) => return Err(bad("erlang needs k= (phases) or cv=".into())),
            };
            (
                ArrivalProcess::Erlang { rate_per_s: r, k },
                &["k", "cv", "rate"],
                false,
            )
        }
        "lognormal" | "lognorm" => (
            ArrivalProcess::Lognormal {
                rate_per_s: r,
                cv: need("cv", take_num(&mut kv, "cv")?)?,
            },
            &["cv", "rate"],
            false,
        ),
        "hyperexp" | "hyperexponential" | "h2" => (
            ArrivalProcess::Hyperexponential {
                rate_per_s: r,
                cv: need("cv", take_num(&mut kv, "cv")?)?,
            },
            &["cv", "rate"],
            false,
        ),
        "mmpp" | "mmpp2" => {
            let rates = kv.remove("rates");
            let sojourn = kv.remove("sojourn");
            let cv = take_num(&mut kv, "cv")?;
            let burst = take_num(&mut kv, "burst")?;
            match (rates, sojourn, cv, burst) {
                (Some(rates), Some(sojourn), None, None) => {
                    let pair = |s: &str, what: &str| -> Result<[String; 2]> {
                        let (a, b) = s.split_once('/').ok_or_else(|| {
                            bad(format!(
                                "{what}=`{s}` is two values joined by `/`, e.g. 40/1"
                            ))
                        })?;
                        Ok([a.trim().to_string(), b.trim().to_string()])
                    };
                    let [a, b] = pair(&rates, "rates")?;
                    let num = |v: &str| {
                        v.parse::<f64>()
                            .ok()
                            .filter(|x| x.is_finite() && *x >= 0.0)
                            .ok_or_else(|| bad(format!("rate `{v}` is not a non-negative number")))
                    };
                    let rate_per_s = [num(&a)?, num(&b)?];
                    let [s0, s1] = pair(&sojourn, "sojourn")?;
                    let mut switch_per_s = [0.0; 2];
                    for (i, s) in [s0, s1].iter().enumerate() {
                        let ns = parse_duration_ns(s)?;
                        if ns == 0 {
                            return Err(bad("sojourn times must be positive".into()));
                        }
                        switch_per_s[i] = 1e9 / ns as f64;
                    }
                    let p = ArrivalProcess::Mmpp2 {
                        rate_per_s,
                        switch_per_s,
                    };
                    p.validate().map_err(|e| bad(e.to_string()))?;
                    (p, &["rates", "sojourn", "rate"], true)
                }
                (None, None, Some(cv), Some(burst)) => (
                    ArrivalProcess::mmpp2_fitted(r, cv, burst)?,
                    &["cv", "burst", "rate"],
                    false,
                ),
                _ => {
                    return Err(bad(
                        "mmpp needs cv= and burst= (fitted), or rates= and sojourn= (explicit)"
                            .into(),
                    ))
                }
            }
        }
        other => {
            return Err(bad(format!(
                "unknown arrival process `{other}` (use {FORMS})"
            )))
        }
    };
    if let Some(k) = kv.keys().next() {
        return Err(bad(format!(
            "unknown parameter `{k}` (known: {})",
            known.join(", ")
        )));
    }
    let process = match (explicit_rate, rate) {
        (true, Some(r)) => process.with_mean_rate(r)?,
        _ => process,
    };
    process.validate().map_err(|e| bad(e.to_string()))?;
    Ok((process, rate.is_some() || explicit_rate))
}

impl fmt::Display for ArrivalProcess {
    /// The explicit form, which parses back to the same process (MMPPs as
    /// rates and sojourn times, whether fitted or not).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArrivalProcess::Poisson { rate_per_s } => write!(f, "poisson:rate={rate_per_s}"),
            ArrivalProcess::Erlang { rate_per_s, k } => {
                write!(f, "erlang:k={k},rate={rate_per_s}")
            }
            ArrivalProcess::Lognormal { rate_per_s, cv } => {
                write!(f, "lognormal:cv={cv},rate={rate_per_s}")
            }
            ArrivalProcess::Hyperexponential { rate_per_s, cv } => {
                write!(f, "hyperexp:cv={cv},rate={rate_per_s}")
            }
            ArrivalProcess::Mmpp2 {
                rate_per_s,
                switch_per_s,
            } => write!(
                f,
                "mmpp:rates={}/{},sojourn={}s/{}s",
                rate_per_s[0],
                rate_per_s[1],
                1.0 / switch_per_s[0],
                1.0 / switch_per_s[1]
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(
            "poisson".parse::<ArrivalProcess>().unwrap(),
            ArrivalProcess::Poisson { rate_per_s: 1.0 }
        );
        assert_eq!(
            "erlang:k=4,rate=50".parse::<ArrivalProcess>().unwrap(),
            ArrivalProcess::Erlang {
                rate_per_s: 50.0,
                k: 4
            }
        );
        // cv 0.33 → 1/0.1089 = 9.18 → k = 9
        assert_eq!(
            "erlang:cv=0.33".parse::<ArrivalProcess>().unwrap(),
            ArrivalProcess::Erlang {
                rate_per_s: 1.0,
                k: 9
            }
        );
        assert_eq!(
            "lognormal:cv=3".parse::<ArrivalProcess>().unwrap(),
            ArrivalProcess::Lognormal {
                rate_per_s: 1.0,
                cv: 3.0
            }
        );
        assert_eq!(
            "hyperexp:cv=4,rate=2".parse::<ArrivalProcess>().unwrap(),
            ArrivalProcess::Hyperexponential {
                rate_per_s: 2.0,
                cv: 4.0
            }
        );
        // 40/s for 20 s, 1/s for 60 s: π = (60, 20)/80... leaving rates 1/20, 1/60
        let p: ArrivalProcess = "mmpp:rates=40/1,sojourn=20s/60s".parse().unwrap();
        let ArrivalProcess::Mmpp2 {
            rate_per_s,
            switch_per_s,
        } = p
        else {
            panic!("{p:?}")
        };
        assert_eq!(rate_per_s, [40.0, 1.0]);
        assert!((switch_per_s[0] - 0.05).abs() < 1e-15);
        assert!((switch_per_s[1] - 1.0 / 60.0).abs() < 1e-15);
        // time share of state 1 is 20/80: mean rate 0.25·40 + 0.75·1 = 10.75
        assert!((p.mean_rate_per_s() - 10.75).abs() < 1e-12);
        let fitted: ArrivalProcess = "mmpp:cv=9,burst=1000,rate=0.5".parse().unwrap();
        assert!((fitted.mean_rate_per_s() - 0.5).abs() < 1e-12);
        assert!((fitted.interarrival_cv() - 9.0).abs() < 1e-9);
    }

    #[test]
    fn rates_come_from_the_spec_or_the_caller() {
        assert!(ArrivalProcess::parse_with_rate("poisson", None).is_err());
        assert_eq!(
            ArrivalProcess::parse_with_rate("poisson", Some(3.0)).unwrap(),
            ArrivalProcess::Poisson { rate_per_s: 3.0 }
        );
        // the caller's rate wins
        assert_eq!(
            ArrivalProcess::parse_with_rate("poisson:rate=2", Some(3.0)).unwrap(),
            ArrivalProcess::Poisson { rate_per_s: 3.0 }
        );
        // explicit MMPP rates carry their own mean rate; a caller's rescales both
        let p = ArrivalProcess::parse_with_rate("mmpp:rates=3/1,sojourn=1s/1s", None).unwrap();
        assert_eq!(p.mean_rate_per_s(), 2.0);
        let q = ArrivalProcess::parse_with_rate("mmpp:rates=3/1,sojourn=1s/1s", Some(4.0)).unwrap();
        assert_eq!(
            q,
            ArrivalProcess::Mmpp2 {
                rate_per_s: [6.0, 2.0],
                switch_per_s: [2.0, 2.0]
            }
        );
    }

    #[test]
    fn utilisation_sets_the_rate() {
        let s = crate::ServiceModel::Constant { ns: 10_000_000 };
        // ρ = λ·E[S]: 0.3 / 10 ms = 30/s
        let p = ArrivalProcess::from_spec("erlang:k=2", None, Some(0.3), &s, 4096).unwrap();
        assert!((p.mean_rate_per_s() - 30.0).abs() < 1e-9);
        let p = ArrivalProcess::from_spec("poisson:rate=5", None, None, &s, 4096).unwrap();
        assert_eq!(p.mean_rate_per_s(), 5.0);
        assert!(ArrivalProcess::from_spec("poisson", Some(1.0), Some(0.3), &s, 4096).is_err());
        assert!(ArrivalProcess::from_spec("poisson", None, None, &s, 4096).is_err());
    }

    #[test]
    fn errors_name_the_problem() {
        for (spec, needle) in [
            ("bursty", "unknown arrival process"),
            ("erlang", "needs k="),
            ("erlang:cv=2", "CV <= 1"),
            ("erlang:k=2.5", "whole number"),
            ("lognormal", "needs cv="),
            ("hyperexp:cv=0.5", "cv >= 1"),
            ("poisson:rate=-1", "positive"),
            ("poisson:k=3", "unknown parameter `k`"),
            ("mmpp:cv=9", "burst="),
            ("mmpp:cv=9,burst=10", "160"),
            ("mmpp:rates=3,sojourn=1s/1s", "joined by `/`"),
            ("lognormal:cv=x", "not a number"),
        ] {
            let e = spec.parse::<ArrivalProcess>().unwrap_err().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }

    #[test]
    fn display_parses_back() {
        for spec in [
            "poisson:rate=0.3",
            "erlang:k=4,rate=12.5",
            "lognormal:cv=3,rate=7",
            "hyperexp:cv=4,rate=0.25",
            "mmpp:cv=3,burst=48,rate=10",
        ] {
            let p: ArrivalProcess = spec.parse().unwrap();
            let q: ArrivalProcess = p.to_string().parse().unwrap();
            assert!(
                (p.mean_rate_per_s() / q.mean_rate_per_s() - 1.0).abs() < 1e-9
                    && (p.interarrival_cv() / q.interarrival_cv() - 1.0).abs() < 1e-9,
                "{spec}: {p} vs {q}"
            );
        }
    }
}
