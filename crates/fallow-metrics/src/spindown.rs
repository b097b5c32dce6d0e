//! Metrics of `fallow spindown`, per disk: spin-ups and spin-downs, time
//! and estimated energy per power state against an always-on disk (from
//! the power model), the spin-up budget's use, and wakes by process. A
//! registry of its own (prefix `fallow_spindown`), served like
//! [`crate::Metrics`].
//!
//! The daemon keeps cumulative figures; [`SpindownMetrics::set_disk`]
//! copies them in, so counters here are gauges of totals (a restart of the
//! daemon restarts them, which Prometheus' `rate()` handles as a reset).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DiskLabels {
    disk: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    disk: String,
    state: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WakerLabels {
    disk: String,
    process: String,
    cgroup: String,
}

type FGauge = Gauge<f64, AtomicU64>;

/// One disk's figures, as the daemon reports them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskFigures {
    /// Spin-ups seen.
    pub spinups: u64,
    /// Spin-downs commanded.
    pub spindowns: u64,
    /// Time by state (`busy`, `idle`, `down`), s.
    pub state_seconds: Vec<(String, f64)>,
    /// Energy by state (`busy`, `idle`, `standby`, `power_cycle`), J.
    pub energy_joules: Vec<(String, f64)>,
    /// Energy of the same time on an always-on disk, J.
    pub always_on_joules: f64,
    /// The budget, spin-ups a day (0: none).
    pub budget_per_day: u32,
    /// Spin-downs in the last 24 h.
    pub budget_used_24h: u64,
    /// Times the budget lengthened the timeout.
    pub budget_held: u64,
    /// Wakes by (process, cgroup).
    pub wakes: Vec<(String, String, u64)>,
    /// Maintenance runs that rode someone else's spin-up.
    pub spinups_saved: u64,
    /// I/O comes from block tracepoint events (wakes are attributed);
    /// false when the counters are polled (the status says why).
    pub events: bool,
}

/// The registry of `fallow spindown`.
#[derive(Clone)]
pub struct SpindownMetrics {
    registry: Arc<Registry>,
    spinups: Family<DiskLabels, Gauge>,
    spindowns: Family<DiskLabels, Gauge>,
    state_seconds: Family<StateLabels, FGauge>,
    energy: Family<StateLabels, FGauge>,
    always_on: Family<DiskLabels, FGauge>,
    budget: Family<DiskLabels, Gauge>,
    budget_used: Family<DiskLabels, Gauge>,
    budget_held: Family<DiskLabels, Gauge>,
    wakes: Family<WakerLabels, Gauge>,
    saved: Family<DiskLabels, Gauge>,
    events: Family<DiskLabels, Gauge>,
}

impl std::fmt::Debug for SpindownMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpindownMetrics").finish_non_exhaustive()
    }
}

impl Default for SpindownMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl SpindownMetrics {
    /// An empty registry.
    pub fn new() -> Self {
        let mut r = Registry::with_prefix("fallow_spindown");
        let m = SpindownMetrics {
            registry: Arc::new(Registry::default()),
            spinups: Family::default(),
            spindowns: Family::default(),
            state_seconds: Family::default(),
            energy: Family::default(),
            always_on: Family::default(),
            budget: Family::default(),
            budget_used: Family::default(),
            budget_held: Family::default(),
            wakes: Family::default(),
            saved: Family::default(),
            events: Family::default(),
        };
        r.register(
            "spinups",
            "Spin-ups seen (I/O on a spun-down disk)",
            m.spinups.clone(),
        );
        r.register("spindowns", "Spin-downs commanded", m.spindowns.clone());
        r.register(
            "state_seconds",
            "Time in each state (busy, idle, down), seconds",
            m.state_seconds.clone(),
        );
        r.register(
            "energy_joules",
            "Estimated energy by state from the power model, joules",
            m.energy.clone(),
        );
        r.register(
            "always_on_energy_joules",
            "Estimated energy of the same time on a disk that never spins down, joules",
            m.always_on.clone(),
        );
        r.register(
            "budget_per_day",
            "Spin-up budget a day (0: none)",
            m.budget.clone(),
        );
        r.register(
            "budget_used_24h",
            "Spin-downs in the last 24 hours",
            m.budget_used.clone(),
        );
        r.register(
            "budget_held",
            "Times the budget lengthened the policy's timeout",
            m.budget_held.clone(),
        );
        r.register(
            "wakes",
            "Spin-ups by the process that caused them",
            m.wakes.clone(),
        );
        r.register(
            "spinups_saved",
            "Maintenance runs that rode a spin-up someone else caused",
            m.saved.clone(),
        );
        r.register(
            "events",
            "1: I/O read from block tracepoint events (wakes attributed); 0: counters polled (the status's events_unavailable says why, and whether wakers are named)",
            m.events.clone(),
        );
        SpindownMetrics {
            registry: Arc::new(r),
            ..m
        }
    }

    /// Copy one disk's figures in.
    pub fn set_disk(&self, disk: &str, f: &DiskFigures) {
        let d = DiskLabels {
            disk: disk.to_string(),
        };
        let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.spinups.get_or_create(&d).set(i(f.spinups));
        self.spindowns.get_or_create(&d).set(i(f.spindowns));
        for (state, v) in &f.state_seconds {
            self.state_seconds
                .get_or_create(&StateLabels {
                    disk: disk.to_string(),
                    state: state.clone(),
                })
                .set(*v);
        }
        for (state, v) in &f.energy_joules {
            self.energy
                .get_or_create(&StateLabels {
                    disk: disk.to_string(),
                    state: state.clone(),
                })
                .set(*v);
        }
        self.always_on.get_or_create(&d).set(f.always_on_joules);
        self.budget
            .get_or_create(&d)
            .set(i64::from(f.budget_per_day));
        self.budget_used.get_or_create(&d).set(i(f.budget_used_24h));
        self.budget_held.get_or_create(&d).set(i(f.budget_held));
        for (process, cgroup, n) in &f.wakes {
            self.wakes
                .get_or_create(&WakerLabels {
                    disk: disk.to_string(),
                    process: process.clone(),
                    cgroup: cgroup.clone(),
                })
                .set(i(*n));
        }
        self.saved.get_or_create(&d).set(i(f.spinups_saved));
        self.events.get_or_create(&d).set(i64::from(f.events));
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Serve `/metrics` on `addr` from a background thread.
    pub fn serve(&self, addr: &str) -> Result<crate::MetricsServer, crate::Error> {
        crate::serve_text(addr, {
            let m = self.clone();
            move || m.encode()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_appear_with_disk_labels() {
        let m = SpindownMetrics::new();
        m.set_disk(
            "/dev/sdb",
            &DiskFigures {
                spinups: 3,
                spindowns: 4,
                state_seconds: vec![("down".into(), 12.5)],
                energy_joules: vec![("standby".into(), 22.5)],
                always_on_joules: 125.0,
                budget_per_day: 50,
                budget_used_24h: 4,
                budget_held: 1,
                wakes: vec![("smbd".into(), "/system.slice/smbd.service".into(), 2)],
                spinups_saved: 1,
                events: false,
            },
        );
        let t = m.encode();
        for needle in [
            r#"fallow_spindown_spinups{disk="/dev/sdb"} 3"#,
            r#"fallow_spindown_spindowns{disk="/dev/sdb"} 4"#,
            r#"fallow_spindown_state_seconds{disk="/dev/sdb",state="down"} 12.5"#,
            r#"fallow_spindown_always_on_energy_joules{disk="/dev/sdb"} 125.0"#,
            r#"fallow_spindown_wakes{disk="/dev/sdb",process="smbd",cgroup="/system.slice/smbd.service"} 2"#,
            r#"fallow_spindown_budget_per_day{disk="/dev/sdb"} 50"#,
            r#"fallow_spindown_events{disk="/dev/sdb"} 0"#,
        ] {
            assert!(t.contains(needle), "{needle} not in\n{t}");
        }
    }
}
