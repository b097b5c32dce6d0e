//! What `fallow scrub` does around a session, the same for a block target
//! ([`crate::scrub`]) and a native one ([`crate::native_scrub`]): the
//! signals, the metrics endpoint, `--json` progress lines, the JSON
//! report's shared keys, the driver's summary line, and how a stopped run
//! ends.
//!
//! Signals: the first SIGINT or SIGTERM stops the run after the request in
//! service (the checkpoint is consistent at every instant, and a native
//! job is left as its tool resumes it); a second ends the process at
//! once. Stopped by SIGINT, fallow exits 1 (the work is not done); stopped
//! by SIGTERM, the way a service manager stops a unit (`systemctl stop`),
//! it says so on stderr and exits 0, so the unit ends inactive, not failed.

use crate::human::{count, secs};
use crate::metrics_export::Exporter;
use anyhow::{Context, Result};
use fallow_live::settings::MetricsAddr;
use fallow_live::SharedStats;
use fallow_live::{DriveReport, Driver, Outcome, Progress, ProgressProbe};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often `--json` prints a progress line while the scrub moves.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The stop flags a scrub's signals raise.
#[derive(Debug)]
pub struct Signals {
    /// Raised by SIGINT or SIGTERM: the driver stops.
    pub stop: Arc<AtomicBool>,
    term: Arc<AtomicBool>,
}

impl Signals {
    /// Install the handlers (see the module doc).
    pub fn install() -> Result<Signals> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Arc::new(AtomicBool::new(false));
        let term = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            // a second signal ends the process at once; the first stops
            // after the request
            signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())
                .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
                .context("installing a signal handler")?;
        }
        signal_hook::flag::register(SIGTERM, term.clone())
            .context("installing a signal handler")?;
        Ok(Signals { stop, term })
    }

    /// How a run that ended with `outcome` ends: `Ok` if it was not
    /// stopped, or stopped by SIGTERM (then `left` is said on stderr);
    /// else the error `interrupted` followed by `left`.
    pub fn end(&self, outcome: Outcome, interrupted: &str, left: &str) -> Result<()> {
        if outcome != Outcome::Stopped {
            return Ok(());
        }
        if self.term.load(Ordering::SeqCst) {
            eprintln!("fallow: stopped by SIGTERM {interrupted}; {left}");
            return Ok(());
        }
        Err(anyhow::anyhow!("interrupted {interrupted}; {left}"))
    }
}

/// Serve `--metrics` for a scrub (its progress gauges included); says
/// where unless `json`.
pub fn metrics(
    at: &Option<MetricsAddr>,
    driver: &mut Driver,
    stats: SharedStats,
    progress: ProgressProbe,
    json: bool,
) -> Result<Option<Exporter>> {
    let Some(at) = at else { return Ok(None) };
    let e = Exporter::start_scrub(at, driver, stats, progress)?;
    if let (Some(a), false) = (e.addr(), json) {
        eprintln!("fallow: metrics at http://{a}/metrics");
    }
    Ok(Some(e))
}

/// One `--json` progress line: `{"event": "progress", …}` with the keys of
/// [`Progress`].
#[derive(Debug, Serialize)]
struct ProgressLine<'a> {
    event: &'static str,
    /// After `event`, which readers match first (`{"event":"progress"`).
    schema_version: u32,
    #[serde(flatten)]
    progress: &'a Progress,
}

/// `--json` progress lines on stderr (stdout keeps the one report): one
/// when the scrub starts, then at most one per [`PROGRESS_EVERY`] while it
/// moves, and the last when it ends.
pub struct ProgressLines {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressLines {
    /// Start printing what `probe` says (nothing unless `json`).
    pub fn start(probe: ProgressProbe, json: bool) -> Result<ProgressLines> {
        let stop = Arc::new(AtomicBool::new(false));
        if !json {
            return Ok(ProgressLines { stop, thread: None });
        }
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fallow-progress".into())
            .spawn(move || {
                let mut last: Option<Progress> = None;
                loop {
                    // read before looking at the flag: the last state is printed
                    let done = stop2.load(Ordering::SeqCst);
                    if let Some(p) = probe.get() {
                        if last.as_ref() != Some(&p) {
                            let line = ProgressLine {
                                event: "progress",
                                schema_version: fallow_core::JSON_SCHEMA_VERSION,
                                progress: &p,
                            };
                            if let Ok(text) = serde_json::to_string(&line) {
                                eprintln!("{text}");
                            }
                            last = Some(p);
                        }
                    }
                    if done {
                        return;
                    }
                    std::thread::park_timeout(PROGRESS_EVERY);
                }
            })
            .context("starting the progress thread")?;
        Ok(ProgressLines {
            stop,
            thread: Some(thread),
        })
    }

    /// Print the last line and stop.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The JSON report (fallow-live's, so Python's `fallow.live.scrub` gives
/// the same document).
pub use fallow_live::job_doc::JobDoc as Doc;

/// Print a job's JSON report, pretty, on stdout.
pub fn print_doc<R: Serialize>(doc: &Doc<'_, R>) -> Result<()> {
    crate::output::print(&crate::output::json_text(doc)?)
}

/// What a budgeted run held and measured (empty without a budget): the
/// budget, the setting and how it started, the measured FG slowdown, the
/// refits and back-offs, and why the budget is unmet if it is.
pub fn budget_lines(d: &DriveReport) -> String {
    use std::fmt::Write as _;
    let Some(b) = &d.budget else {
        return String::new();
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  budget {}: setting {} · started at {} · {} refits, {} back-offs (refits fit to {}, switch penalty {}, {})",
        b.budget,
        b.setting,
        b.start,
        count(b.refits),
        count(b.backoffs),
        b.model_budget,
        secs(b.switch_penalty_s),
        b.switch_penalty_from
    );
    let m = b.measured.as_ref().or(b.measured_recent.as_ref());
    match (m, b.measure.as_str()) {
        (Some(m), _) => {
            let _ = writeln!(
                out,
                "  measured FG: {} reads ({} overlapped by BG work), mean {} against {} alone: slowdown {:+.2} % ± {:.2} %, p99 {:+.1} %{}",
                count(m.fg_reads as u64),
                count(m.overlapped as u64),
                secs(m.mean_s),
                secs(m.baseline_mean_s),
                m.slowdown * 100.0,
                m.slowdown_ci95 * 100.0,
                m.p99_slowdown * 100.0,
                if b.measured.is_some() {
                    ""
                } else {
                    " (before the last change of setting)"
                }
            );
        }
        (None, "events") => {
            let _ = writeln!(out, "  measured FG: no reads with a baseline yet");
        }
        (None, why) => {
            let _ = writeln!(out, "  measured FG: {why}");
        }
    }
    if let Some(u) = &b.unmet {
        let _ = writeln!(out, "  budget unmet: {u}");
    }
    out
}

/// The line a budgeted run starts with: the budget, where it came from,
/// the setting it starts at and why (no history: the least aggressive).
pub fn budget_start_line(b: &fallow_live::budget::BudgetReport, from: Option<&str>) -> String {
    format!(
        "fallow: budget {}{}: refitting {} of {} every {} idle intervals (or {} s) on a window of {}; starting at {}",
        b.budget,
        from.map(|f| format!(" ({f})")).unwrap_or_default(),
        b.knob,
        b.setting.split(':').next().unwrap_or_default(),
        b.every,
        b.refit_after_s,
        b.window,
        b.start
    )
}

/// The verbose summary's line about the driver.
pub fn driver_line(d: &DriveReport) -> String {
    format!(
        "  driver: {} idle intervals, {} BG requests (mean {}), {} collisions, throttled {}\n",
        count(d.idle_intervals),
        count(d.bg_requests),
        secs(d.bg_mean_service_s),
        count(d.collisions),
        secs(d.throttled_s)
    )
}
