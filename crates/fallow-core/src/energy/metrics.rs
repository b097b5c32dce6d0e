//! What an energy run reports (SARD's Tables V and VI, Figures 8
//! and 9): idle periods, spin-ups, exposed spin-up delay, energy by state,
//! energy-delay product, remote traffic and BG work; and the same figures
//! normalised to the standalone disk and to the always-on disk.

use serde::Serialize;

/// Energy by disk state, J.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EnergyByState {
    /// Serving requests (read/write and seek power; BG work included).
    pub busy: f64,
    /// Spinning with nothing to do (the timeout, short gaps).
    pub idle: f64,
    /// Shutdowns and spin-ups.
    pub power_cycle: f64,
    /// Spun down.
    pub standby: f64,
    /// All of it.
    pub total: f64,
}

/// The time a disk spent in each power state and its transitions: what
/// [`EnergyByState::of`] prices.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PowerSpans {
    /// Serving requests, s (seek included).
    pub serve_s: f64,
    /// The part of `serve_s` spent seeking, s (at seek power; 0 when it
    /// cannot be told apart, as live, where all of it is at read/write power).
    pub seek_s: f64,
    /// Spinning with nothing to do, s.
    pub idle_s: f64,
    /// Spun down, after the shutdown ended and before a spin-up began, s.
    pub standby_s: f64,
    /// Spin-ups.
    pub spinups: u64,
    /// Shutdowns (spin-downs).
    pub shutdowns: u64,
}

impl EnergyByState {
    /// The one definition of a disk's energy, shared by `fallow energy`'s
    /// simulation and `fallow spindown`'s live estimate (the daemon
    /// once counted a spin-up's wait as busy at read/write power and
    /// again as spin-up energy, 15–41 % too high): serving at read/write
    /// power (its seek part at seek power), idle at idle power, standby at
    /// standby power, and each spin-up and shutdown its energy once
    /// (SARD's Table III gives transitions as energies). The time spent
    /// spinning up or down draws nothing more: it is neither busy, idle
    /// nor standby, even though the requests waiting on a spin-up count
    /// in the kernel's busy time.
    pub fn of(p: &super::PowerModel, t: &PowerSpans) -> EnergyByState {
        let busy = t.seek_s * p.seek_w + (t.serve_s - t.seek_s) * p.read_write_w;
        let idle = t.idle_s * p.idle_w;
        let power_cycle = t.spinups as f64 * p.spinup_j + t.shutdowns as f64 * p.shutdown_j;
        let standby = t.standby_s * p.standby_w;
        EnergyByState {
            busy,
            idle,
            power_cycle,
            standby,
            total: busy + idle + power_cycle + standby,
        }
    }

    /// What the same service costs on a disk that never spins down: the
    /// serving at its power, every other second of `elapsed_s` spinning
    /// idle (as `fallow emulate-disk` counts its `always_on_j`).
    pub fn always_on_j(p: &super::PowerModel, t: &PowerSpans, elapsed_s: f64) -> f64 {
        let serve = t.seek_s * p.seek_w + (t.serve_s - t.seek_s) * p.read_write_w;
        serve + (elapsed_s - t.serve_s).max(0.0) * p.idle_w
    }
}

/// Time by disk state; ns while the run accumulates, seconds in results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TimeByState<T = f64> {
    /// Serving FG requests (busy periods of local requests).
    pub busy: T,
    /// Serving BG requests.
    pub bg: T,
    /// Spinning idle.
    pub idle: T,
    /// Shutting down.
    pub shutdown: T,
    /// Spun down.
    pub standby: T,
    /// Spinning up.
    pub spinup: T,
    /// The whole window; the states above add up to it.
    pub total: T,
}

impl TimeByState<u64> {
    /// In seconds.
    pub fn to_seconds(&self) -> TimeByState<f64> {
        let s = |ns: u64| ns as f64 / 1e9;
        TimeByState {
            busy: s(self.busy),
            bg: s(self.bg),
            idle: s(self.idle),
            shutdown: s(self.shutdown),
            standby: s(self.standby),
            spinup: s(self.spinup),
            total: s(self.total),
        }
    }
}

/// Requests served over the network (by peers, or by the file server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RemoteStats {
    /// Requests.
    pub requests: u64,
    /// Bytes fetched.
    pub bytes: u64,
    /// Mean network time per request, s (their response time).
    pub mean_response_s: f64,
    /// Sum of network times, s.
    pub total_response_s: f64,
    #[serde(skip)]
    total_ns: u128,
}

impl RemoteStats {
    /// Count one request of `bytes` that took `ns`.
    pub fn add(&mut self, ns: u64, bytes: u64) {
        self.requests += 1;
        self.bytes += bytes;
        self.total_ns += ns as u128;
    }

    /// Fill in the seconds.
    pub fn finish(mut self) -> Self {
        self.total_response_s = self.total_ns as f64 / 1e9;
        self.mean_response_s = if self.requests > 0 {
            self.total_response_s / self.requests as f64
        } else {
            0.0
        };
        self
    }
}

/// BG work run only while the disk spins anyway.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BgStats {
    /// BG work asked for, bytes.
    pub requested_bytes: u64,
    /// BG work done, bytes.
    pub done_bytes: u64,
    /// BG requests completed.
    pub done_requests: u64,
    /// Time the disk served BG requests, s.
    pub busy_s: f64,
    /// Energy of that time at read/write power, J.
    pub energy_j: f64,
    /// Energy of the run with BG work minus the same run without, J
    /// (filled by [`normalise`]).
    pub extra_energy_j: Option<f64>,
    /// FG requests that found a BG request in service.
    pub collisions: u64,
    /// FG requests delayed by BG work (directly or by the shift it caused).
    pub fg_delayed_requests: u64,
    /// Sum of those delays, s.
    pub fg_added_delay_s: f64,
}

/// A run's figures over a reference run's (`None` where the reference is 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Ratios {
    /// Total energy.
    pub energy: Option<f64>,
    /// Energy by state, each over the reference's total (Figure 8's bars).
    pub busy: Option<f64>,
    /// Idle energy over the reference's total.
    pub idle: Option<f64>,
    /// Power-cycle energy over the reference's total.
    pub power_cycle: Option<f64>,
    /// Standby energy over the reference's total.
    pub standby: Option<f64>,
    /// Exposed spin-up delay.
    pub exposed_delay: Option<f64>,
    /// Energy-delay product (Figure 9).
    pub edp: Option<f64>,
    /// Number of idle periods (Table V).
    pub idle_periods: Option<f64>,
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

impl Ratios {
    /// `run` over `reference`.
    pub fn of(run: &EnergyRun, reference: &EnergyRun) -> Ratios {
        let total = reference.energy_j.total;
        Ratios {
            energy: ratio(run.energy_j.total, total),
            busy: ratio(run.energy_j.busy, total),
            idle: ratio(run.energy_j.idle, total),
            power_cycle: ratio(run.energy_j.power_cycle, total),
            standby: ratio(run.energy_j.standby, total),
            exposed_delay: ratio(run.exposed_delay_s, reference.exposed_delay_s),
            edp: ratio(run.edp, reference.edp),
            idle_periods: ratio(run.idle_periods as f64, reference.idle_periods as f64),
        }
    }
}

/// Everything one run of one policy under one availability reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EnergyRun {
    /// Policy spec as given (`timeout:t=10s`).
    pub policy: String,
    /// Availability label (`1 % local`, `standalone`).
    pub setting: String,
    /// Fraction of disk requests forced local, for local-fraction settings.
    pub local_fraction: Option<f64>,
    /// All requests of the trace.
    pub requests: u64,
    /// Requests the local disk served.
    pub local_requests: u64,
    /// Idle periods with a spin-down (each ends in a spin-up, except one
    /// cut by the end of the trace): SARD's Table V.
    pub idle_periods: u64,
    /// Their mean length, from the disk falling idle to the next local
    /// request (or the end of the trace), s.
    pub mean_idle_s: f64,
    /// Every idle interval of the disk, however short.
    pub idle_intervals: u64,
    /// Their mean length, s.
    pub mean_idle_interval_s: f64,
    /// Spin-ups.
    pub spinups: u64,
    /// Shutdowns.
    pub shutdowns: u64,
    /// Total exposed spin-up delay: per spin-up, the wait of the request
    /// that triggered it (SARD's Table VI), s.
    pub exposed_delay_s: f64,
    /// Sum over all requests of their wait caused by spin-ups, s.
    pub request_delay_s: f64,
    /// That sum per request of the trace, s.
    pub exposed_delay_per_request_s: f64,
    /// Requests that waited for a spin-up.
    pub delayed_requests: u64,
    /// Energy by state, J.
    pub energy_j: EnergyByState,
    /// Time by state, s.
    pub time_s: TimeByState,
    /// Estimated seek time within busy time, s.
    pub seek_s: f64,
    /// The trace's span, s.
    pub span_s: f64,
    /// Execution time: span plus exposed delay, s.
    pub execution_s: f64,
    /// Energy-delay product: total energy × execution time, J·s.
    pub edp: f64,
    /// Requests served by peers.
    pub remote: RemoteStats,
    /// Requests served by the file server.
    pub server: RemoteStats,
    /// BG work, when asked for.
    pub bg: Option<BgStats>,
    /// Over the same policy on the standalone disk.
    pub vs_standalone: Option<Ratios>,
    /// Over the always-on standalone disk.
    pub vs_always_on: Option<Ratios>,
}

impl EnergyRun {
    /// An empty result for `policy` over `requests` requests.
    pub fn new(policy: &str, requests: u64) -> Self {
        EnergyRun {
            policy: policy.to_string(),
            requests,
            ..EnergyRun::default()
        }
    }
}

/// Fill `vs_standalone` and `vs_always_on` of every run; `standalone(run)`
/// finds the run's standalone counterpart, `always_on` is the always-on
/// standalone run.
pub fn normalise(
    runs: &mut [EnergyRun],
    standalone: &dyn Fn(&EnergyRun) -> Option<EnergyRun>,
    always_on: Option<&EnergyRun>,
) {
    for r in runs.iter_mut() {
        r.vs_standalone = standalone(r).map(|s| Ratios::of(r, &s));
        r.vs_always_on = always_on.map(|a| Ratios::of(r, a));
    }
}

#[cfg(test)]
mod tests {}
