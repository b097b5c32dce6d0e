//! `fallow analyze FILE --device all`: every device of a multi-device file
//! in one streaming pass ([`fallow_core::fleet`]), one row each, as
//! a table, CSV or JSON.

use crate::human;
use crate::output::{self, Style};
use crate::table::{Cell, Column, Table};
use anyhow::Result;
use fallow_core::fleet::Fleet;
use fallow_core::period::CompletionSource;

/// How to print the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetOut {
    /// Aligned for a terminal.
    Text,
    /// RFC 4180 CSV, numbers in seconds and fractions.
    Csv,
    /// The [`Fleet`] as JSON.
    Json,
}

/// Print `fleet` as asked.
pub fn print(fleet: &Fleet, how: FleetOut) -> Result<()> {
    match how {
        FleetOut::Json => output::print(&output::json_text(fleet)?),
        FleetOut::Csv => output::print(&table(fleet).csv()),
        FleetOut::Text => output::print(&text(fleet)),
    }
}

fn table(fleet: &Fleet) -> Table {
    let mut t = Table::new(vec![
        Column::new("device", "device"),
        Column::new("requests", "requests"),
        Column::new("span", "span_s"),
        Column::new("util", "utilization"),
        Column::new("idle n", "idle_count"),
        Column::new("idle total", "idle_total_s"),
        Column::new("idle mean", "idle_mean_s"),
        Column::new("idle CV", "idle_cv"),
        Column::new("idle p90", "idle_p90_s"),
        Column::new("busy mean", "busy_mean_s"),
    ]);
    for d in &fleet.devices {
        t.push(vec![
            Cell::text(d.name.clone().unwrap_or_else(|| d.id.to_string())),
            Cell::int(human::count(d.requests), d.requests),
            Cell::num(human::secs(d.span_s), d.span_s),
            Cell::num(human::pct(d.utilization), d.utilization),
            Cell::int(human::count(d.idle_count), d.idle_count),
            Cell::num(human::secs(d.idle_total_s), d.idle_total_s),
            Cell::num(human::secs(d.idle_mean_s), d.idle_mean_s),
            Cell::num(human::num(d.idle_cv), d.idle_cv),
            Cell::num(human::secs(d.idle_p90_s), d.idle_p90_s),
            Cell::num(human::secs(d.busy_mean_s), d.busy_mean_s),
        ]);
    }
    t
}

fn text(fleet: &Fleet) -> String {
    let st = Style::for_stdout();
    let completions = match &fleet.completions {
        CompletionSource::Recorded => "recorded completions".to_string(),
        CompletionSource::Modelled { model, seed } => {
            format!("completions modelled by {model} (seed {seed}), FCFS per device")
        }
    };
    let mut s = format!(
        "{}\n  {}\n\n",
        st.bold(&format!(
            "{}: {} devices, {} ({})",
            fleet.path,
            fleet.devices.len(),
            human::requests(fleet.requests),
            fleet.format.map_or("?", |f| f.name()),
        )),
        st.dim(&format!(
            "one {} pass; {completions}",
            if fleet.streamed {
                "streaming"
            } else {
                "(whole-file)"
            }
        )),
    );
    s.push_str(&table(fleet).text(&st, 0, |_| false));
    s.push_str(&format!(
        "\nspan: first arrival to last completion of the device; util: busy share of it; \
         idle p90 within {} (a histogram's).\n",
        human::pct(fleet.p90_relative_error)
    ));
    if fleet.skipped > 0 {
        s.push_str(&format!(
            "{} skipped (--skip-bad).\n",
            human::counted(fleet.skipped, "malformed record", "malformed records")
        ));
    }
    s
}
