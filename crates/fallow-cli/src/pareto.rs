//! `fallow pareto`: each policy's knob swept over its coarse ladder at one
//! request size (`--bg-size`), and the non-dominated points kept: BG
//! throughput against mean added FG delay. A table, `--json` (a list of the
//! core's `Front`s) or an HTML page with one line per policy.

use crate::args::{threads, BgArgs, InputArgs};
use crate::atomic::OverwriteArg;
use crate::human::{bytes, num, secs};
use crate::output::{self, Style};
use crate::prepare::prepare;
use crate::progress::Progress;
use crate::table::{Cell, Column, CsvArg, Table};
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::outpath::OutputKind;
use fallow_core::tune::pareto::{pareto_with_progress, Front};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Arguments of `fallow pareto`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow pareto ajw.1week.srt --device 0 --bg size:base=8ms,knee=64KiB,rate=100MB \\
      --bg-size 1MiB --html pareto.html
  fallow pareto --workload hyperexp:cv=4 --utilization 0.2 --policy fixed-wait \\
      --policy oracle --json

--json prints a list with, per policy: policy, clairvoyant, knob, request_size_bytes, points
(every setting: spec, knob, bg_throughput_bytes_per_s, fg_mean_added_delay_s, fg_slowdown,
fg_collision_rate, idle_used_fraction) and front (the non-dominated points, least delay first).")]
pub struct ParetoArgs {
    /// A policy to sweep, `NAME[:k=v,…]` (its knob is swept, the other
    /// parameters stay fixed); repeatable. [default: every policy; one that
    /// chooses its request sizes only under a BG model that charges for size]
    #[arg(long, short = 'p', value_name = "POLICY")]
    pub policy: Vec<String>,

    /// Print the fronts as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub csv: CsvArg,

    /// Also write an HTML page plotting the fronts to this file.
    #[arg(long, value_name = "OUT", help_heading = crate::atomic::OUTPUT_FILES)]
    pub html: Option<PathBuf>,

    /// Settings simulated at once. [default: the number of cores, or FALLOW_THREADS]
    #[arg(long, value_name = "N", value_parser = crate::args::threads_parser())]
    pub threads: Option<u64>,

    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub bg: BgArgs,

    #[command(flatten)]
    pub out: OverwriteArg,
}

/// Run `fallow pareto`.
pub fn run(args: ParetoArgs) -> Result<()> {
    if let Some(p) = &args.html {
        let guard = args.out.guard(args.input.trace.as_deref());
        crate::atomic::check(&guard, p, OutputKind::HtmlReport, "--html")?;
    }
    let sim = args.bg.config(args.input.seed);
    let policies: Vec<String> = if args.policy.is_empty() {
        // every policy that can run under this BG model; one that cannot
        // is left out with a line saying why
        let (names, skipped) = fallow_core::tune::pareto::default_policies(&sim.bg_service)?;
        for line in &skipped {
            eprintln!("fallow: {line}");
        }
        names
    } else {
        args.policy.clone()
    };
    // a bad policy fails before any reading
    for p in &policies {
        crate::prepare::build_policy(p)?;
    }
    let input = prepare(&args.input)?;
    // moves with every setting simulated, not only between policies
    let bar = Progress::new(
        "settings",
        "{msg} [{wide_bar}] {pos}/{len} settings {eta}",
        0,
        true,
    )?;
    let mut fronts = Vec::with_capacity(policies.len());
    for (i, p) in policies.iter().enumerate() {
        if let Some(b) = &bar {
            b.set_message(format!("sweeping {}/{} {p}", i + 1, policies.len()));
        }
        let f = pareto_with_progress(
            &input.prep,
            p,
            &sim,
            args.bg.bg_size,
            threads(args.threads),
            &|done, total| {
                if let Some(b) = &bar {
                    b.set_length(total);
                    b.set_position(done);
                }
            },
            None,
        )
        .with_context(|| format!("sweeping --policy {p}"))?;
        fronts.push(f);
    }
    if let Some(b) = bar {
        b.finish();
    }
    if let Some(path) = &args.html {
        let written =
            fallow_report::pareto::write(path, &input.subject, &args.bg.describe(), &fronts);
        crate::atomic::written(path, written)?;
    }
    if args.json {
        output::print(&output::json_list_text(&fronts)?)
    } else if args.csv.csv {
        output::print(&points_table(&fronts).csv())
    } else {
        output::print(&table(&args, &input, &fronts))
    }
}

/// Every setting swept, one row each, for `--csv`: `on_front` says whether
/// it is on its policy's Pareto front (what the text table counts).
fn points_table(fronts: &[Front]) -> Table {
    let mut t = Table::new(vec![
        Column::new("policy", "policy"),
        Column::new("spec", "spec"),
        Column::new("knob", "knob"),
        Column::new("knob value", "knob_value"),
        Column::new("BG", "bg_throughput_bytes_per_s"),
        Column::new("added delay", "fg_mean_added_delay_s"),
        Column::new("slowdown", "fg_slowdown"),
        Column::new("delayed", "fg_collision_rate"),
        Column::new("idle used", "idle_used_fraction"),
        Column::new("front", "on_front"),
        Column::new("clairvoyant", "clairvoyant"),
    ]);
    for f in fronts {
        for p in &f.points {
            let on_front = f.front.iter().any(|q| q.spec == p.spec);
            t.push(vec![
                Cell::text(f.policy.clone()),
                Cell::text(p.spec.clone()),
                Cell::text(f.knob.unwrap_or_default()),
                Cell::text(p.knob.clone().unwrap_or_default()),
                Cell::num(
                    format!("{} MB/s", num(p.bg_throughput_bytes_per_s / 1e6)),
                    p.bg_throughput_bytes_per_s,
                ),
                Cell::num(secs(p.fg_mean_added_delay_s), p.fg_mean_added_delay_s),
                Cell::num(format!("{:.2} %", p.fg_slowdown * 100.0), p.fg_slowdown),
                Cell::num(
                    format!("{:.2} %", p.fg_collision_rate * 100.0),
                    p.fg_collision_rate,
                ),
                Cell::num(
                    format!("{:.2} %", p.idle_used_fraction * 100.0),
                    p.idle_used_fraction,
                ),
                Cell::text(on_front.to_string()),
                Cell::text(f.clairvoyant.to_string()),
            ]);
        }
    }
    t
}

fn table(args: &ParetoArgs, input: &crate::prepare::Input, fronts: &[Front]) -> String {
    let st = Style::for_stdout();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        st.bold(&format!(
            "{} · Pareto fronts at {} requests",
            input.subject.title,
            bytes(args.bg.bg_size)
        ))
    );
    for line in output::wrap(&input.subject.detail, 96) {
        let _ = writeln!(s, "  {}", st.dim(&line));
    }
    let _ = writeln!(s, "  {}", st.dim(&args.bg.describe()));
    let _ = writeln!(s);
    let head = format!(
        "  {:<32}{:<10}{:>8}{:>16}{:>26}",
        "policy", "knob", "front", "best BG", "added delay range"
    );
    let _ = writeln!(s, "{}", st.bold(&head));
    for f in fronts {
        let name = if f.clairvoyant {
            format!("{} (clairvoyant)", f.policy)
        } else {
            f.policy.clone()
        };
        let best = f
            .front
            .iter()
            .map(|p| p.bg_throughput_bytes_per_s)
            .fold(0.0f64, f64::max);
        let range = match (f.front.first(), f.front.last()) {
            (Some(a), Some(b)) if f.front.len() > 1 => format!(
                "{} – {}",
                secs(a.fg_mean_added_delay_s),
                secs(b.fg_mean_added_delay_s)
            ),
            (Some(a), _) => secs(a.fg_mean_added_delay_s),
            _ => "–".into(),
        };
        let _ = writeln!(
            s,
            "  {:<32}{:<10}{:>8}{:>16}{:>26}",
            name,
            f.knob.unwrap_or("–"),
            format!("{}/{}", f.front.len(), f.points.len()),
            format!("{} MB/s", num(best / 1e6)),
            range
        );
    }
    if let Some(p) = &args.html {
        let _ = writeln!(s);
        let _ = writeln!(s, "  {}", st.dim(&format!("wrote {}", p.display())));
    }
    s.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}
