//! An energy report in words, the same in the terminal tables of
//! `fallow energy` and in its HTML report: the power model in one line and
//! one headline per policy.

use fallow_core::energy::{EnergyReport, EnergyRun, PowerModel};
use fallow_core::human::{bytes, count, joules, pct, secs};

/// The power model in one line, its figures as given.
pub fn describe_power(p: &PowerModel, break_even_s: f64) -> String {
    format!(
        "{}: read/write {} W, seek {} W, idle {} W, standby {} W, spin-up {} J in {}, shutdown {} J in {}; break-even idle time {}",
        p.name,
        p.read_write_w,
        p.seek_w,
        p.idle_w,
        p.standby_w,
        p.spinup_j,
        secs(p.spinup_ns as f64 / 1e9),
        p.shutdown_j,
        secs(p.shutdown_ns as f64 / 1e9),
        secs(break_even_s)
    )
}

/// A run's BG-work cells after its policy (setting, done, share, BG time,
/// extra energy, FG requests delayed, FG added delay): the same in the
/// terminal table and the HTML report. `None` without BG work.
pub fn bg_cells(x: &EnergyRun) -> Option<[String; 7]> {
    let b = x.bg?;
    Some([
        x.setting.clone(),
        bytes(b.done_bytes),
        pct(b.done_bytes as f64 / b.requested_bytes.max(1) as f64),
        secs(b.busy_s),
        b.extra_energy_j.map_or("–".into(), joules),
        count(b.fg_delayed_requests),
        secs(b.fg_added_delay_s),
    ])
}

/// `12.3 %` of a ratio, `–` when there is none.
pub fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "–".into(), pct)
}

/// One sentence per policy: the delay cut at the smallest local share.
pub fn headlines(r: &EnergyReport) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for x in &r.runs {
        if seen.contains(&x.policy.as_str()) {
            continue;
        }
        seen.push(&x.policy);
        let mine: Vec<&EnergyRun> = r.runs.iter().filter(|y| y.policy == x.policy).collect();
        let (Some(alone), Some(last)) = (mine.first(), mine.last()) else {
            continue;
        };
        if mine.len() < 2 || alone.exposed_delay_s == 0.0 {
            continue;
        }
        let cut = 1.0 - last.exposed_delay_s / alone.exposed_delay_s;
        out.push(format!(
            "{}: at {} the exposed spin-up delay is {} instead of {} ({} less), {} spin-ups instead of {}, energy {} of the standalone disk's.",
            x.policy,
            last.setting,
            secs(last.exposed_delay_s),
            secs(alone.exposed_delay_s),
            pct(cut),
            count(last.spinups),
            count(alone.spinups),
            ratio(last.vs_standalone.and_then(|v| v.energy))
        ));
    }
    out
}
