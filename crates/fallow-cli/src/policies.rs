//! `fallow policies`: the policy registry — each policy's name, what it
//! does and its parameters — as text or `--json`.

use crate::output::{self, Style};
use crate::table::{Cell, Column, CsvArg, Table};
use anyhow::Result;
use clap::Args;
use fallow_core::policy::registry;
use serde::Serialize;
use std::fmt::Write as _;

/// Arguments of `fallow policies`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow policies
      every BG policy with its parameters and defaults, as `--policy NAME:k=v` takes them
  fallow policies --json
      the same for scripts: name, summary, params, clairvoyant")]
pub struct PoliciesArgs {
    /// Print the registry as JSON (a list of {name, summary, params, clairvoyant}).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub csv: CsvArg,
}

/// One registry entry as JSON.
#[derive(Debug, Serialize)]
struct Item {
    name: &'static str,
    summary: &'static str,
    params: String,
    clairvoyant: bool,
}

/// Run `fallow policies`.
pub fn run(args: PoliciesArgs) -> Result<()> {
    let items: Vec<Item> = registry()
        .iter()
        .map(|e| Item {
            name: e.name,
            summary: e.summary,
            params: e.params_help(),
            clairvoyant: e.clairvoyant,
        })
        .collect();
    if args.json {
        return output::print(&output::json_list_text(&items)?);
    }
    if args.csv.csv {
        let mut t = Table::new(vec![
            Column::new("name", "name"),
            Column::new("summary", "summary"),
            Column::new("params", "params"),
            Column::new("clairvoyant", "clairvoyant"),
        ]);
        for i in &items {
            t.push(vec![
                Cell::text(i.name),
                Cell::text(i.summary),
                Cell::text(&i.params),
                Cell::text(i.clairvoyant.to_string()),
            ]);
        }
        return output::print(&t.csv());
    }
    let st = Style::for_stdout();
    let width = items
        .iter()
        .map(|i| i.name.len() + if i.clairvoyant { 2 } else { 0 })
        .max()
        .unwrap_or(0)
        + 2;
    let mut s = String::new();
    for i in &items {
        let name = if i.clairvoyant {
            format!("{} *", i.name)
        } else {
            i.name.to_string()
        };
        let indent = " ".repeat(width);
        for (k, line) in output::wrap(i.summary, 98 - width).iter().enumerate() {
            if k == 0 {
                let _ = writeln!(s, "{}{line}", output::pad(&st.bold(&name), &name, width));
            } else {
                let _ = writeln!(s, "{indent}{line}");
            }
        }
        for line in output::wrap(&format!("params: {}", i.params), 98 - width) {
            let _ = writeln!(s, "{indent}{}", st.dim(&line));
        }
    }
    if items.iter().any(|i| i.clairvoyant) {
        let _ = writeln!(
            s,
            "\n* clairvoyant reference: sees the future, an upper bound rather than a deployable policy."
        );
    }
    let _ = writeln!(
        s,
        "\nUse as --policy NAME:k=v,… (durations take ns, us, ms, s; sizes B, KiB, MiB, …)."
    );
    output::print(&s)
}
