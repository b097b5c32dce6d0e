//! `--metrics ADDR` of the live commands: the driver's states, BG requests
//! and collisions, and the monitor's FG totals, served in the Prometheus /
//! OpenMetrics text format at `http://ADDR/metrics` (crate `fallow-metrics`).

use anyhow::{Context, Result};
use fallow_core::tune::Budget;
use fallow_live::budget::BudgetReport;
use fallow_live::run::FrozenIoProbe;
use fallow_live::settings::MetricsAddr;
use fallow_live::{DriveObserver, DriveState, Driver, ProgressProbe, SharedStats};
use fallow_metrics::{BudgetFigures, Metrics, MetricsServer, PolicyState, ScrubProgress};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the monitor's FG totals are copied into the counters.
const FG_SYNC: Duration = Duration::from_millis(250);

/// The running exporter; stops serving when dropped.
pub struct Exporter {
    server: Option<MetricsServer>,
    stop: Arc<AtomicBool>,
    sync: Option<std::thread::JoinHandle<()>>,
    frozen_io: Arc<Mutex<Option<FrozenIoProbe>>>,
    progress: Arc<Mutex<Option<ProgressProbe>>>,
}

impl Exporter {
    /// Serve on `at` (`--metrics` or the config's `[metrics] addr`) and
    /// observe `driver` and the monitor's `stats`.
    pub fn start(at: &MetricsAddr, driver: &mut Driver, stats: SharedStats) -> Result<Exporter> {
        let metrics = if driver.budget_report().is_some() {
            Metrics::with_budget(false)
        } else {
            Metrics::new()
        };
        Self::start_with(at, driver, stats, metrics)
    }

    /// [`Exporter::start`] for a scrub: also its progress gauges, from `progress`.
    pub fn start_scrub(
        at: &MetricsAddr,
        driver: &mut Driver,
        stats: SharedStats,
        progress: ProgressProbe,
    ) -> Result<Exporter> {
        let metrics = if driver.budget_report().is_some() {
            Metrics::with_budget(true)
        } else {
            Metrics::for_scrub()
        };
        let e = Self::start_with(at, driver, stats, metrics)?;
        *e.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(progress);
        Ok(e)
    }

    fn start_with(
        at: &MetricsAddr,
        driver: &mut Driver,
        stats: SharedStats,
        metrics: Metrics,
    ) -> Result<Exporter> {
        let server = metrics.serve(&at.addr).with_context(|| at.from.clone())?;
        if let Some(b) = driver.budget_report() {
            metrics.budget(&budget_figures(&b));
        }
        driver.set_observer(Box::new(Observer {
            metrics: metrics.clone(),
            state: PolicyState::Busy,
            since: Instant::now(),
        }));
        metrics.set_state(PolicyState::Busy);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let frozen_io: Arc<Mutex<Option<FrozenIoProbe>>> = Arc::default();
        let frozen2 = frozen_io.clone();
        let progress: Arc<Mutex<Option<ProgressProbe>>> = Arc::default();
        let progress2 = progress.clone();
        let sync = std::thread::Builder::new()
            .name("fallow-metrics-fg".into())
            .spawn(move || {
                // the monitor keeps totals; the counters take their growth
                let (mut requests, mut bytes) = (0u64, 0u64);
                let (mut frozen_bytes, mut frozen_s) = (0u64, 0.0f64);
                loop {
                    let probe = frozen2.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    if let Some(f) = probe.map(|p| p.stats()) {
                        metrics.frozen_io(
                            f.bytes.saturating_sub(frozen_bytes),
                            (f.seconds - frozen_s).max(0.0),
                        );
                        (frozen_bytes, frozen_s) =
                            (frozen_bytes.max(f.bytes), frozen_s.max(f.seconds));
                    }
                    let probe = progress2.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    if let Some(p) = probe.and_then(|p| p.get()) {
                        metrics.scrub_progress(&ScrubProgress {
                            done_bytes: p.scrubbed_bytes,
                            target_bytes: p.target_bytes,
                            pass: p.pass,
                            rate_bytes_per_s: p.rate_bytes_per_s,
                            eta_s: p.eta_s,
                            bad_ranges: p.bad_ranges,
                            bad_bytes: p.bad_bytes,
                            errors_corrected: p.errors_corrected,
                            errors_uncorrectable: p.errors_uncorrectable,
                            complete: p.complete,
                        });
                    }
                    let s = stats.get();
                    let b = s.fg_read_bytes + s.fg_write_bytes;
                    metrics.fg_requests(
                        s.fg_requests.saturating_sub(requests),
                        b.saturating_sub(bytes),
                    );
                    (requests, bytes) = (requests.max(s.fg_requests), bytes.max(b));
                    if stop2.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(FG_SYNC);
                }
            })
            .context("starting the metrics thread")?;
        Ok(Exporter {
            server: Some(server),
            stop,
            sync: Some(sync),
            frozen_io,
            progress,
        })
    }

    /// Also export what `probe` counts: a `fallow run` command's reads
    /// while frozen.
    pub fn follow_frozen_io(&self, probe: FrozenIoProbe) {
        *self.frozen_io.lock().unwrap_or_else(|p| p.into_inner()) = Some(probe);
    }

    /// Where it serves.
    pub fn addr(&self) -> Option<std::net::SocketAddr> {
        self.server.as_ref().map(|s| s.addr())
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.sync.take() {
            let _ = t.join();
        }
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

/// Driver events into counters.
struct Observer {
    metrics: Metrics,
    state: PolicyState,
    since: Instant,
}

impl DriveObserver for Observer {
    fn state(&mut self, state: DriveState) {
        let state = match state {
            DriveState::Busy => PolicyState::Busy,
            DriveState::IdleWaiting => PolicyState::IdleWaiting,
            DriveState::BgRunning => PolicyState::BgRunning,
        };
        let now = Instant::now();
        self.metrics
            .add_state_time(self.state, now.duration_since(self.since));
        (self.state, self.since) = (state, now);
        self.metrics.set_state(state);
    }

    fn bg_request(&mut self, bytes: u64, _service_ns: u64) {
        self.metrics.bg_request(bytes);
    }

    fn collision(&mut self) {
        self.metrics.collision();
    }

    fn budget(&mut self, report: &BudgetReport) {
        self.metrics.budget(&budget_figures(report));
    }
}

/// A budgeted run's report as the gauges take it.
fn budget_figures(b: &BudgetReport) -> BudgetFigures {
    let (slowdown_limit, added_delay_limit_s) = match b.budget.parse::<Budget>() {
        Ok(Budget::Slowdown { fraction }) => (Some(fraction), None),
        Ok(Budget::AddedDelay { ns }) => (None, Some(ns as f64 / 1e9)),
        Err(_) => (None, None),
    };
    let m = b.measured.as_ref();
    BudgetFigures {
        slowdown_limit,
        added_delay_limit_s,
        slowdown: m.map(|m| m.slowdown),
        slowdown_ci95: m.map(|m| m.slowdown_ci95),
        p99_slowdown: m.map(|m| m.p99_slowdown),
        added_delay_s: m.map(|m| m.added_delay_s),
        knob_value: b.history.last().map_or(f64::NAN, |r| r.value),
        refits: b.refits,
        backoffs: b.backoffs,
        unmet: b.unmet.is_some(),
    }
}
