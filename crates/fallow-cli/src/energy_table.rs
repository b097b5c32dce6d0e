//! `fallow energy --csv`: one row per (policy, setting) run, through the
//! shared [`Table`] writer the other commands' `--csv` use: exact numbers
//! in base units (joules, seconds, bytes, fractions) under column names
//! that carry the unit; a ratio that does not exist (no standalone or
//! always-on run to divide by) is an empty field.

use crate::human::{bytes, count, joules, pct, secs};
use crate::table::{Cell, Column, Table};
use fallow_core::energy::EnergyRun;

fn ratio(v: Option<f64>) -> Cell {
    v.map_or_else(Cell::empty, |v| Cell::num(pct(v), v))
}

fn s(v: f64) -> Cell {
    Cell::num(secs(v), v)
}

fn j(v: f64) -> Cell {
    Cell::num(joules(v), v)
}

fn n(v: u64) -> Cell {
    Cell::int(count(v), v)
}

/// The runs of an energy report as a table; the BG-work columns only when
/// `--bg-work` gave BG work.
pub fn runs_table(runs: &[EnergyRun]) -> Table {
    let with_bg = runs.iter().any(|r| r.bg.is_some());
    let mut columns = vec![
        Column::new("policy", "policy"),
        Column::new("setting", "setting"),
        Column::new("local share", "local_fraction"),
        Column::new("requests", "requests"),
        Column::new("local", "local_requests"),
        Column::new("idle periods", "idle_periods"),
        Column::new("mean length", "mean_idle_s"),
        Column::new("spin-ups", "spinups"),
        Column::new("exposed delay", "exposed_delay_s"),
        Column::new("per request", "exposed_delay_per_request_s"),
        Column::new("energy", "energy_j"),
        Column::new("busy", "busy_j"),
        Column::new("idle", "idle_j"),
        Column::new("power cycle", "power_cycle_j"),
        Column::new("standby", "standby_j"),
        Column::new("EDP", "edp_js"),
        Column::new("energy vs standalone", "energy_vs_standalone"),
        Column::new("energy vs always-on", "energy_vs_always_on"),
        Column::new("EDP vs standalone", "edp_vs_standalone"),
        Column::new("delay vs standalone", "exposed_delay_vs_standalone"),
        Column::new("remote requests", "remote_requests"),
        Column::new("remote mean time", "remote_mean_response_s"),
    ];
    if with_bg {
        columns.extend([
            Column::new("BG requested", "bg_requested_bytes"),
            Column::new("BG done", "bg_done_bytes"),
            Column::new("BG time", "bg_busy_s"),
            Column::new("BG extra energy", "bg_extra_energy_j"),
            Column::new("FG delayed", "bg_fg_delayed_requests"),
            Column::new("FG added delay", "bg_fg_added_delay_s"),
        ]);
    }
    let mut t = Table::new(columns);
    for r in runs {
        let a = r.vs_standalone.unwrap_or_default();
        let mut row = vec![
            Cell::text(&r.policy),
            Cell::text(&r.setting),
            r.local_fraction
                .map_or_else(Cell::empty, |f| Cell::num(pct(f), f)),
            n(r.requests),
            n(r.local_requests),
            n(r.idle_periods),
            s(r.mean_idle_s),
            n(r.spinups),
            s(r.exposed_delay_s),
            s(r.exposed_delay_per_request_s),
            j(r.energy_j.total),
            j(r.energy_j.busy),
            j(r.energy_j.idle),
            j(r.energy_j.power_cycle),
            j(r.energy_j.standby),
            Cell::num(format!("{:.4e}", r.edp), r.edp),
            ratio(a.energy),
            ratio(r.vs_always_on.and_then(|o| o.energy)),
            ratio(a.edp),
            ratio(a.exposed_delay),
            n(r.remote.requests),
            s(r.remote.mean_response_s),
        ];
        if with_bg {
            match &r.bg {
                Some(b) => row.extend([
                    Cell::int(bytes(b.requested_bytes), b.requested_bytes),
                    Cell::int(bytes(b.done_bytes), b.done_bytes),
                    s(b.busy_s),
                    b.extra_energy_j.map_or_else(Cell::empty, j),
                    n(b.fg_delayed_requests),
                    s(b.fg_added_delay_s),
                ]),
                None => row.extend((0..6).map(|_| Cell::empty())),
            }
        }
        t.push(row);
    }
    t
}
