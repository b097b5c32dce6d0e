//! SARD's remote service model (§III): which requests a peer could
//! serve while the local disk sleeps, and what fetching them over the
//! network costs.
//!
//! Every request gets a [`Route`]:
//! - [`Route::Local`]: must be served by the local disk (user data and
//!   writes in file-level traces, application files no peer holds, or the
//!   share of requests kept local by `--local-fraction`);
//! - [`Route::Peer`]: a peer holds the data in memory; SARD fetches it from
//!   the peer when the local disk is off (§III-E heuristic 3), and from the
//!   disk when it spins (heuristic 1);
//! - [`Route::Server`]: user data on the central file server (§II, "User
//!   data on central file servers"), which never touches the local disk.
//!
//! Availability comes either from a fraction of requests that stay local
//! (SARD's Table V rows: 100, 15, 10, 5, 2, 1 %), chosen by a seeded
//! hash so that the local set for 1 % is inside the one for 2 % and so on,
//! or from a peer model: `n` peers, each holding an application file in
//! memory with probability `p`, so at least one holds it with probability
//! `1 − (1 − p)^n` (§II, Figure 2: with 107 machines an application runs
//! on at least two more than 99 % of the time). The draw is per file (per
//! 1 MiB extent of a block trace, which names no files), so all requests
//! for one file agree.
//!
//! Network time of a remote request: `latency + size / bandwidth ×
//! (1 + contention · u)`, `u` uniform in [0, 1) per request from a seeded
//! hash — SARD's "1 Gbps Ethernet connection with at most 20 %
//! degradation due to contention modeled randomly" (§IV-B2).

use crate::error::{Error, Result};
use serde::Serialize;

/// How a request may be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[repr(u8)]
pub enum Route {
    /// Only the local disk can serve it.
    Local,
    /// A peer holds it: remote while the disk is off.
    Peer,
    /// The file server serves it; the local disk never sees it.
    Server,
}

/// Where remote availability comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Availability {
    /// No peers: every disk request is local (the standalone system).
    Standalone,
    /// This fraction of the disk's requests stays local, the rest may go
    /// to a peer (SARD's "% of requests served locally").
    LocalFraction {
        /// Fraction in [0, 1].
        fraction: f64,
    },
    /// `peers` machines, each holding a file with a probability.
    Peers {
        /// Number of peers.
        peers: u32,
        /// Probability that one peer holds an application file in memory.
        p: f64,
        /// Per-application probabilities: the longest matching path prefix wins.
        per_prefix: Vec<(String, f64)>,
    },
}

impl Availability {
    /// Check the parameters.
    pub fn validate(&self) -> Result<()> {
        let prob = |name: &str, p: f64| {
            if (0.0..=1.0).contains(&p) {
                Ok(())
            } else {
                Err(Error::invalid(
                    name.to_string(),
                    format!("must be a probability in [0, 1], got {p}"),
                ))
            }
        };
        match self {
            Availability::Standalone => Ok(()),
            Availability::LocalFraction { fraction } => prob("local fraction", *fraction),
            Availability::Peers { p, per_prefix, .. } => {
                prob("peer probability", *p)?;
                for (prefix, p) in per_prefix {
                    prob(&format!("peer probability of `{prefix}`"), *p)?;
                }
                Ok(())
            }
        }
    }

    /// Short label for tables: `100 %`, `1 %`, `10 peers`.
    pub fn label(&self) -> String {
        match self {
            Availability::Standalone => "100 % local".into(),
            Availability::LocalFraction { fraction } => {
                let p = fraction * 100.0;
                if (p - p.round()).abs() < 1e-9 {
                    format!("{p:.0} % local")
                } else {
                    format!("{p} % local")
                }
            }
            Availability::Peers { peers, p, .. } => format!("{peers} peers, p={p}"),
        }
    }

    /// Probability that at least one of `peers` holds a file whose path is
    /// `path` (`None`: no path, the default probability).
    pub fn held_probability(&self, path: Option<&str>) -> f64 {
        match self {
            Availability::Peers {
                peers,
                p,
                per_prefix,
            } => {
                let p = path
                    .and_then(|path| {
                        per_prefix
                            .iter()
                            .filter(|(prefix, _)| path.starts_with(prefix.as_str()))
                            .max_by_key(|(prefix, _)| prefix.len())
                            .map(|(_, p)| *p)
                    })
                    .unwrap_or(*p);
                1.0 - (1.0 - p).powi(*peers as i32)
            }
            _ => 0.0,
        }
    }
}

/// The network between a machine and its peers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Network {
    /// Latency of one request, ns.
    pub latency_ns: u64,
    /// Bandwidth, bytes per second.
    pub bandwidth_bytes_per_s: f64,
    /// Most slowdown of the transfer by contention (0.2 = up to 20 %).
    pub contention: f64,
}

impl Default for Network {
    /// 1 Gbps Ethernet with up to 20 % contention (SARD §IV-B2) and a
    /// 200 µs request latency (a UDP request and reply on a LAN).
    fn default() -> Self {
        Network {
            latency_ns: 200_000,
            bandwidth_bytes_per_s: 125e6,
            contention: 0.2,
        }
    }
}

impl Network {
    /// Check the parameters.
    pub fn validate(&self) -> Result<()> {
        if !(self.bandwidth_bytes_per_s.is_finite() && self.bandwidth_bytes_per_s > 0.0) {
            return Err(Error::invalid(
                "network bandwidth",
                format!("must be positive, got {}", self.bandwidth_bytes_per_s),
            ));
        }
        if !(self.contention.is_finite() && self.contention >= 0.0) {
            return Err(Error::invalid(
                "network contention",
                format!("must be a non-negative fraction, got {}", self.contention),
            ));
        }
        Ok(())
    }

    /// Time to fetch `size_bytes` with contention draw `u` in [0, 1), ns.
    pub fn time_ns(&self, size_bytes: u64, u: f64) -> u64 {
        let transfer = size_bytes as f64 / self.bandwidth_bytes_per_s * 1e9;
        self.latency_ns + (transfer * (1.0 + self.contention * u)).round() as u64
    }
}

/// SplitMix64 of `seed` and `x`: independent, reproducible draws per
/// request or per file without a shared random stream, so a request's
/// draw does not depend on which others were drawn before it.
pub fn mix(seed: u64, x: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(x)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform draw in [0, 1) from [`mix`].
pub fn uniform(seed: u64, x: u64) -> f64 {
    (mix(seed, x) >> 11) as f64 / (1u64 << 53) as f64
}

/// FNV-1a of a path, so the peer draw of a file depends on its name only.
pub fn path_key(path: &str) -> u64 {
    path.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Stream of draws for the local-fraction choice (distinct from the
/// peer and network draws of the same seed).
const PRIORITY_STREAM: u64 = 0x5A2D_0001;
/// Stream of draws for which files the peers hold.
const HELD_STREAM: u64 = 0x5A2D_0002;

/// Routes of every request under `avail`.
///
/// `base[i]` is the request's nature: `Local` if it must stay local
/// whatever peers hold (writes, user data kept locally), `Peer` if a peer
/// could serve it (application reads; every request of a block trace),
/// `Server` for the file server. `key[i]` identifies its file (or extent)
/// for the peer model, and `path_of(key)` gives the file's path when known
/// (for per-application probabilities).
pub fn routes(
    base: &[Route],
    key: &[u64],
    path_of: &dyn Fn(usize) -> Option<String>,
    avail: &Availability,
    seed: u64,
) -> Result<Vec<Route>> {
    avail.validate()?;
    match avail {
        Availability::Standalone => Ok(base
            .iter()
            .map(|&r| if r == Route::Peer { Route::Local } else { r })
            .collect()),
        Availability::LocalFraction { fraction } => {
            let disk = base.iter().filter(|&&r| r != Route::Server).count();
            let mandatory = base.iter().filter(|&&r| r == Route::Local).count();
            let want = (fraction * disk as f64).round() as usize;
            let extra = want.saturating_sub(mandatory);
            // The `extra` eligible requests with the smallest priorities
            // stay local: nested sets as the fraction falls.
            let mut prio: Vec<u64> = base
                .iter()
                .enumerate()
                .filter(|(_, &r)| r == Route::Peer)
                .map(|(i, _)| mix(seed ^ PRIORITY_STREAM, i as u64))
                .collect();
            let threshold = if extra == 0 {
                None
            } else if extra >= prio.len() {
                Some(u64::MAX)
            } else {
                let (_, nth, _) = prio.select_nth_unstable(extra - 1);
                Some(*nth)
            };
            Ok(base
                .iter()
                .enumerate()
                .map(|(i, &r)| match r {
                    Route::Peer => match threshold {
                        Some(t) if mix(seed ^ PRIORITY_STREAM, i as u64) <= t => Route::Local,
                        _ => Route::Peer,
                    },
                    other => other,
                })
                .collect())
        }
        Availability::Peers { .. } => {
            let mut held: std::collections::HashMap<u64, bool> = Default::default();
            Ok(base
                .iter()
                .enumerate()
                .map(|(i, &r)| match r {
                    Route::Peer => {
                        let k = key[i];
                        let h = *held.entry(k).or_insert_with(|| {
                            let p = avail.held_probability(path_of(i).as_deref());
                            uniform(seed ^ HELD_STREAM, k) < p
                        });
                        if h {
                            Route::Peer
                        } else {
                            Route::Local
                        }
                    }
                    other => other,
                })
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_path(_: usize) -> Option<String> {
        None
    }

    #[test]
    fn local_fraction_is_exact_and_nested() {
        let n = 10_000;
        let base = vec![Route::Peer; n];
        let key: Vec<u64> = (0..n as u64).collect();
        let mut prev: Option<Vec<Route>> = None;
        for f in [1.0, 0.15, 0.1, 0.05, 0.02, 0.01, 0.0] {
            let r = routes(
                &base,
                &key,
                &no_path,
                &Availability::LocalFraction { fraction: f },
                7,
            )
            .unwrap();
            let local = r.iter().filter(|&&x| x == Route::Local).count();
            assert_eq!(local, (f * n as f64).round() as usize, "f = {f}");
            if let Some(p) = &prev {
                // every request local at f is local at the larger fraction before
                for (a, b) in r.iter().zip(p) {
                    assert!(*a != Route::Local || *b == Route::Local);
                }
            }
            prev = Some(r);
        }
    }

    #[test]
    fn mandatory_and_server_requests_are_kept() {
        let base = [
            Route::Local,
            Route::Peer,
            Route::Server,
            Route::Peer,
            Route::Peer,
        ];
        let key = [0, 1, 2, 3, 4];
        // 4 disk requests; 50 % = 2 local: the mandatory one and one more
        let r = routes(
            &base,
            &key,
            &no_path,
            &Availability::LocalFraction { fraction: 0.5 },
            1,
        )
        .unwrap();
        assert_eq!(r[0], Route::Local);
        assert_eq!(r[2], Route::Server);
        assert_eq!(r.iter().filter(|&&x| x == Route::Local).count(), 2);
        // 1 % = 0 wanted, but the mandatory one stays
        let r = routes(
            &base,
            &key,
            &no_path,
            &Availability::LocalFraction { fraction: 0.01 },
            1,
        )
        .unwrap();
        assert_eq!(
            r,
            [
                Route::Local,
                Route::Peer,
                Route::Server,
                Route::Peer,
                Route::Peer
            ]
        );
        let r = routes(&base, &key, &no_path, &Availability::Standalone, 1).unwrap();
        assert_eq!(
            r,
            [
                Route::Local,
                Route::Local,
                Route::Server,
                Route::Local,
                Route::Local
            ]
        );
    }

    #[test]
    fn peer_model_is_per_file_and_matches_its_probability() {
        // 1 − (1 − 0.1)^5 = 0.40951
        let avail = Availability::Peers {
            peers: 5,
            p: 0.1,
            per_prefix: vec![("/usr/bin/".into(), 1.0), ("/usr/bin/rare".into(), 0.0)],
        };
        assert!((avail.held_probability(None) - 0.40951).abs() < 1e-12);
        assert_eq!(avail.held_probability(Some("/usr/bin/vi")), 1.0);
        assert_eq!(avail.held_probability(Some("/usr/bin/rare-tool")), 0.0);
        let n = 20_000;
        let base = vec![Route::Peer; 2 * n];
        // two requests per file
        let key: Vec<u64> = (0..2 * n as u64).map(|i| i / 2).collect();
        let r = routes(&base, &key, &no_path, &avail, 3).unwrap();
        for pair in r.chunks(2) {
            assert_eq!(pair[0], pair[1]);
        }
        let held = r.iter().filter(|&&x| x == Route::Peer).count() as f64 / (2 * n) as f64;
        // binomial sd over 20,000 files: 0.0035
        assert!((held - 0.40951).abs() < 0.015, "{held}");
        let paths = |i: usize| {
            Some(if i % 2 == 0 {
                "/usr/bin/vi".to_string()
            } else {
                "/usr/bin/rare".to_string()
            })
        };
        let key: Vec<u64> = (0..100).collect();
        let r = routes(&[Route::Peer; 100], &key, &paths, &avail, 3).unwrap();
        for (i, x) in r.iter().enumerate() {
            assert_eq!(
                *x,
                if i % 2 == 0 {
                    Route::Peer
                } else {
                    Route::Local
                }
            );
        }
    }

    #[test]
    fn network_time_by_hand() {
        let n = Network::default();
        // 64 KiB at 125 MB/s = 524.288 µs; + 200 µs; contention 0..20 %
        assert_eq!(n.time_ns(65_536, 0.0), 200_000 + 524_288);
        assert_eq!(n.time_ns(65_536, 0.5), 200_000 + 576_717);
        assert!(Network {
            bandwidth_bytes_per_s: 0.0,
            ..n
        }
        .validate()
        .is_err());
        assert!(Availability::LocalFraction { fraction: 1.5 }
            .validate()
            .is_err());
    }

    #[test]
    fn uniform_draws_look_uniform() {
        let n = 100_000;
        let mean = (0..n).map(|i| uniform(9, i)).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
        assert_ne!(path_key("/a"), path_key("/b"));
    }
}
