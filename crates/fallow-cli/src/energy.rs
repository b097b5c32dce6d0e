//! `fallow energy`: disk spin-down and SARD in simulation. Replays a block
//! trace (or a file-level trace) through the disk's power states under
//! spin-down policies, with a share of requests served by peers while the
//! disk sleeps (the SARD paper's Tables V and VI, Figures 8 and 9): a table
//! per figure, `--json`, and `--html` with the SARD paper's plots.

use crate::atomic::OverwriteArg;
use crate::human::{bandwidth, bytes, count, joules, pct, secs};
use crate::input::{self, ReadArgs};
use crate::output::{self, describe_model, Style};
use crate::table;
use crate::BadInput;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use fallow_core::energy::{
    self, read_file_trace, spindown, Availability, BgPlan, EnergyInput, EnergyRun, InputKind,
    Network, PowerFile, PowerModel, RemoteWhen, UserData,
};
/// What was simulated, for the tables, JSON and HTML (in the core, shared
/// with the Python binding).
pub use fallow_core::energy::{EnergyReport, InputInfo};
use fallow_core::outpath::OutputKind;
use fallow_core::sim::BgService;
use fallow_core::trace::DeviceSel;
use fallow_core::ServiceModel;
use fallow_report::energy_text::{bg_cells, describe_power, headlines, ratio};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Arguments of `fallow energy`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow energy ajw.1week.srt --device 0
      every spin-down policy on the standalone disk and with 15, 10, 5, 2 and 1 % of
      requests served locally (the rest by peers while the disk sleeps)
  fallow energy ajw.1week.srt --device 0 --policy timeout:t=10s --local-fraction 1,0.01 --json
  fallow energy ajw.1week.srt --device 0 --peers 20 --peer-prob 0.2 --html energy.html
  fallow energy session.csv --files --user-data server --policy timeout:t=5s
      a file-level trace (time_s,path,offset,size,op,app|user); user files on a file server
  fallow energy ajw.1week.srt --device 0 --bg-work 1GiB
      also fit 1 GiB of background work into the time the disk spins anyway
  fallow energy ajw.1week.srt --device 0 --csv > energy.csv
      one row per policy and setting (joules, seconds, fractions) for a spreadsheet

Policies: always-on, timeout:t=10s, adaptive[:t=,min=,max=,grow=,shrink=],
predictive[:rho=,wait=,else=]. Power model: the WD2500JD of the SARD seed (Table III)
unless --power gives a TOML file (keys read_write_w, seek_w, idle_w, standby_w, spinup_j,
spinup_s, shutdown_j, shutdown_s, name; [device.N] tables override per device).

--json prints {input, power, network, runs: [...]}; each run has idle_periods, mean_idle_s,
spinups, exposed_delay_s, exposed_delay_per_request_s, energy_j {busy, idle, power_cycle,
standby, total}, edp, vs_standalone and vs_always_on (ratios), remote, and bg with --bg-work.")]
pub struct EnergyArgs {
    /// The trace: a block trace in any format fallow reads, or with
    /// --files a file-level CSV (time_s,path,offset,size,op,kind).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Device of a block trace, by its id (blkparse: MAJOR,MINOR; MSR of several hosts: HOST:DISK). [default: the busiest]
    #[arg(long, short = 'd', value_name = "ID")]
    pub device: Option<DeviceSel>,

    /// Spin-down policy `NAME[:k=v,…]`; repeat for several. [default:
    /// every policy with its default parameters]
    #[arg(long = "policy", short = 'p', value_name = "POLICY")]
    pub policies: Vec<String>,

    /// Shares of requests that stay local, comma-separated (the rest may
    /// be served by peers). [default: 1,0.15,0.1,0.05,0.02,0.01, the SARD
    /// paper's rows]
    #[arg(
        long,
        value_name = "F,F,…",
        value_delimiter = ',',
        conflicts_with = "peers",
        value_parser = crate::args::parse_fraction
    )]
    pub local_fraction: Vec<f64>,

    /// Peer model instead of fixed shares: this many peers, each holding
    /// an application file (a 1 MiB extent of a block trace) in memory with
    /// probability --peer-prob.
    #[arg(long, value_name = "N")]
    pub peers: Option<u32>,

    /// Probability that one peer holds a file in memory.
    #[arg(long, value_name = "P", default_value_t = 0.1, requires = "peers", value_parser = crate::args::parse_fraction)]
    pub peer_prob: f64,

    /// Probability for the files under a path prefix (file-level traces):
    /// `/usr/lib/firefox=0.6`; repeat; the longest matching prefix wins.
    #[arg(long, value_name = "PREFIX=P", requires = "peers")]
    pub peer_prob_for: Vec<String>,

    /// When requests a peer holds go to the peer: `asleep` (only while the
    /// disk is off, SARD §III-E) or `always`.
    #[arg(long, value_enum, default_value_t = RemoteArg::Asleep)]
    pub remote: RemoteArg,

    /// TRACE is a file-level CSV: time_s,path,offset,size,op,kind with
    /// kind app or user.
    #[arg(long)]
    pub files: bool,

    /// Where user data of a file-level trace lives: `local` (it must be
    /// served by the local disk) or `server` (a central file server, as in
    /// the SARD seed: it never touches the local disk).
    #[arg(long, value_enum, default_value_t = UserDataArg::Local, requires = "files")]
    pub user_data: UserDataArg,

    /// Service-time model for requests without recorded completions (and
    /// for file-level traces, default `disk`): `const:5ms`, `exp:5ms`,
    /// `disk[:rpm=7200,…]`.
    #[arg(long, value_name = "MODEL")]
    pub service: Option<ServiceModel>,

    /// Power model overrides, a TOML file. [default: WD2500JD]
    #[arg(long, value_name = "power.toml")]
    pub power: Option<PathBuf>,

    /// Network latency per remote request.
    #[arg(long, value_name = "DURATION", default_value = "200us", value_parser = parse_duration)]
    pub net_latency: u64,

    /// Network bandwidth, bytes per second (125MB = 1 Gbit/s).
    #[arg(long, value_name = "BYTES", default_value = "125MB", value_parser = parse_size)]
    pub net_bandwidth: u64,

    /// Largest slowdown of a transfer by contention, drawn uniformly per
    /// request (0.2 = up to 20 %).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.2, value_parser = crate::args::parse_fraction)]
    pub net_contention: f64,

    /// BG work to fit into the time the disk spins anyway (never waking
    /// it): `1GiB`. Reports how much got done and the extra energy.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub bg_work: Option<u64>,

    /// Size of one BG request.
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = parse_size, requires = "bg_work")]
    pub bg_size: u64,

    /// BG service model (each request takes its mean): `size[:base=8ms,knee=64KiB,rate=100MB]`,
    /// `const:8ms`.
    #[arg(
        long,
        value_name = "MODEL",
        default_value = "size",
        requires = "bg_work"
    )]
    pub bg: BgService,

    /// Idle time before BG work starts in an interval.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration, requires = "bg_work")]
    pub bg_wait: u64,

    /// Seed of the choice of local requests, the peer draws and the
    /// network contention.
    #[arg(long, value_name = "N", default_value_t = fallow_core::sim::DEFAULT_SEED)]
    pub seed: u64,

    /// Print the results as JSON instead of tables.
    #[arg(long)]
    pub json: bool,

    /// Also write a self-contained HTML page with the SARD paper's plots.
    #[arg(long, value_name = "OUT.html", help_heading = crate::atomic::OUTPUT_FILES)]
    pub html: Option<PathBuf>,

    #[command(flatten)]
    pub csv: crate::table::CsvArg,

    #[command(flatten)]
    pub read: ReadArgs,

    #[command(flatten)]
    pub out: OverwriteArg,
}

/// `--remote`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RemoteArg {
    /// Only while the local disk is off.
    Asleep,
    /// Always.
    Always,
}

/// `--user-data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UserDataArg {
    /// On the local disk.
    Local,
    /// On a central file server.
    Server,
}

use crate::args::{parse_duration, parse_size};

/// Run `fallow energy`.
pub fn run(args: EnergyArgs) -> Result<()> {
    if let Some(p) = &args.html {
        let guard = args.out.guard(
            [Some(args.trace.as_path()), args.power.as_deref()]
                .into_iter()
                .flatten(),
        );
        crate::atomic::check(&guard, p, OutputKind::HtmlReport, "--html")?;
    }
    let policies = if args.policies.is_empty() {
        energy::default_policies()
    } else {
        args.policies.clone()
    };
    for p in &policies {
        spindown::build(p).with_context(|| format!("--policy {p}"))?;
    }
    // the core's request: its checks (and defaults) are Python's too
    let mut req = energy::Request {
        policies,
        availability: settings(&args)?,
        remote_when: match args.remote {
            RemoteArg::Asleep => RemoteWhen::Asleep,
            RemoteArg::Always => RemoteWhen::Always,
        },
        user_data: match args.user_data {
            UserDataArg::Local => UserData::Local,
            UserDataArg::Server => UserData::Server,
        },
        service: args.service.clone(),
        power: PowerModel::default(),
        network: Network {
            latency_ns: args.net_latency,
            bandwidth_bytes_per_s: args.net_bandwidth as f64,
            contention: args.net_contention,
        },
        bg: args.bg_work.map(|work_bytes| BgPlan {
            work_bytes,
            size_bytes: args.bg_size,
            service: args.bg,
            wait_ns: args.bg_wait,
        }),
        seed: args.seed,
    };
    req.validate()?;
    let (input, info) = prepare(&args, &req)?;
    if let Some(path) = &args.power {
        req.power = PowerFile::read(path)?.model(info.device)?;
    }
    let spinner = input::spinner("simulating", input.requests() * req.policies.len() * 7);
    let report = req.run(&input, info);
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let report = report?;
    if let Some(path) = &args.html {
        crate::atomic::written(path, fallow_report::energy::write(path, &report))?;
    }
    if args.json {
        output::print(&output::json_text(&report)?)?;
        if let Some(path) = &args.html {
            eprintln!("fallow: wrote the HTML page to {}", path.display());
        }
    } else if args.csv.csv {
        output::print(&crate::energy_table::runs_table(&report.runs).csv())?;
        if let Some(path) = &args.html {
            eprintln!("fallow: wrote the HTML page to {}", path.display());
        }
    } else {
        let mut text = tables(&report);
        if let Some(path) = &args.html {
            let _ = writeln!(text, "\nHTML: {}", path.display());
        }
        output::print(&text)?;
    }
    Ok(())
}

/// The availability settings from the flags.
fn settings(args: &EnergyArgs) -> Result<Vec<Availability>> {
    if let Some(peers) = args.peers {
        let mut per_prefix = Vec::new();
        for item in &args.peer_prob_for {
            let (prefix, p) = item.rsplit_once('=').ok_or_else(|| {
                BadInput(format!(
                    "--peer-prob-for `{item}`: expected PREFIX=PROBABILITY"
                ))
            })?;
            let p = crate::args::parse_fraction(p)
                .map_err(|e| BadInput(format!("--peer-prob-for `{item}`: {e}")))?;
            per_prefix.push((prefix.to_string(), p));
        }
        let a = Availability::Peers {
            peers,
            p: args.peer_prob,
            per_prefix,
        };
        a.validate()?;
        return Ok(vec![a]);
    }
    let fractions = if args.local_fraction.is_empty() {
        energy::SEED_LOCAL_FRACTIONS.to_vec()
    } else {
        args.local_fraction.clone()
    };
    fractions
        .into_iter()
        .map(|fraction| {
            let a = Availability::LocalFraction { fraction };
            a.validate()
                .map_err(|_| {
                    BadInput(format!(
                        "--local-fraction {fraction}: a share must be between 0 and 1"
                    ))
                })
                .map(|_| a)
                .map_err(anyhow::Error::from)
        })
        .collect()
}

/// Read the trace and prepare it.
fn prepare(args: &EnergyArgs, req: &energy::Request) -> Result<(EnergyInput, InputInfo)> {
    let seed = req.seed;
    if args.files {
        let ft = read_file_trace(&args.trace)?;
        if ft.reordered > 0 {
            eprintln!(
                "fallow: {} line{} arrived earlier than a line before and {} sorted into place",
                count(ft.reordered),
                if ft.reordered == 1 { "" } else { "s" },
                if ft.reordered == 1 { "was" } else { "were" }
            );
        }
        let service = req.file_service();
        let input = req.prepare_files(&ft)?;
        let info = InputInfo::new(
            &input,
            args.trace.display().to_string(),
            InputKind::File,
            None,
            format!("modelled: {}", describe_model(&service.to_string())),
            seed,
        );
        return Ok((input, info));
    }
    let trace = input::read(&args.trace, &args.read)?;
    let selected = input::select_device(trace, args.device.clone())?;
    let input = req.prepare_block(&selected.trace)?;
    let info = InputInfo::new(
        &input,
        args.trace.display().to_string(),
        InputKind::Block,
        Some(selected.device),
        match &args.service {
            Some(m) => format!("modelled: {}", describe_model(&m.to_string())),
            None => "recorded".into(),
        },
        seed,
    );
    Ok((input, info))
}

/// A left-aligned first column and right-aligned others, a blank line
/// before each policy's rows but the first (its name is on its first row).
fn render_table(header: &[&str], rows: &[Vec<String>], st: &Style) -> String {
    let cells: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| r.iter().map(String::as_str).collect())
        .collect();
    let mut last_policy = "";
    let gaps: Vec<bool> = cells
        .iter()
        .map(|r| {
            let gap = !last_policy.is_empty() && r[0] != last_policy && !r[0].is_empty();
            if !r[0].is_empty() {
                last_policy = r[0];
            }
            gap
        })
        .collect();
    table::aligned(header, &cells, st, 0, |_| false, |i| gaps[i])
}

/// Policy name on its first row only.
fn first_only(runs: &[EnergyRun], i: usize) -> String {
    if i == 0 || runs[i - 1].policy != runs[i].policy {
        runs[i].policy.clone()
    } else {
        String::new()
    }
}

/// The terminal output: the SARD paper's Tables V/VI and Figures 8/9 as tables.
fn tables(r: &EnergyReport) -> String {
    let st = Style::for_stdout();
    let mut s = String::new();
    heading(&mut s, r, &st);
    delay_table(&mut s, r, &st);
    energy_table(&mut s, r, &st);
    bg_table(&mut s, r, &st);
    for line in headlines(r) {
        let _ = writeln!(s, "{line}");
    }
    if let Some(note) = r.no_spindown_note() {
        let _ = writeln!(s, "{note}");
    }
    s
}

/// The trace, the power model and the network, one line each.
fn heading(s: &mut String, r: &EnergyReport, st: &Style) {
    let name = std::path::Path::new(&r.input.path)
        .file_name()
        .map_or(r.input.path.clone(), |n| n.to_string_lossy().into_owned());
    let _ = writeln!(s, "{}", st.bold(&name));
    let mut detail = vec![];
    if let Some(d) = r.input.device {
        detail.push(format!("device {d}"));
    }
    detail.push(format!(
        "{} requests over {}",
        count(r.input.requests),
        secs(r.input.span_s)
    ));
    if r.input.disk_requests != r.input.requests {
        detail.push(format!("{} reach the disk", count(r.input.disk_requests)));
    }
    if r.input.mandatory_local > 0 {
        detail.push(format!(
            "{} must stay local",
            count(r.input.mandatory_local)
        ));
    }
    detail.push(format!("completions {}", r.input.completions));
    let _ = writeln!(s, "  {}", st.dim(&detail.join(" · ")));
    let p = &r.power;
    let _ = writeln!(s, "  {}", st.dim(&describe_power(p, r.break_even_s)));
    let n = &r.network;
    let _ = writeln!(
        s,
        "  {}",
        st.dim(&format!(
            "peers over {} with {} latency and up to {} contention; peer-held requests go remote {}",
            bandwidth(n.bandwidth_bytes_per_s),
            secs(n.latency_ns as f64 / 1e9),
            pct(n.contention),
            match r.remote_when {
                RemoteWhen::Asleep => "only while the disk is off",
                RemoteWhen::Always => "always",
            }
        ))
    );
    let _ = writeln!(s);
}

/// Idle periods and spin-up delay (SARD Tables V, VI).
fn delay_table(s: &mut String, r: &EnergyReport, st: &Style) {
    let _ = writeln!(
        s,
        "{}",
        st.bold("Idle periods and spin-up delay (SARD Tables V, VI)")
    );
    let header = [
        "policy",
        "setting",
        "local reqs",
        "idle periods",
        "mean length",
        "spin-ups",
        "exposed delay",
        "per request",
        "vs standalone",
        "remote",
    ];
    let rows: Vec<Vec<String>> = r
        .runs
        .iter()
        .enumerate()
        .map(|(i, x)| {
            vec![
                first_only(&r.runs, i),
                x.setting.clone(),
                count(x.local_requests),
                count(x.idle_periods),
                secs(x.mean_idle_s),
                count(x.spinups),
                secs(x.exposed_delay_s),
                secs(x.exposed_delay_per_request_s),
                ratio(x.vs_standalone.and_then(|v| v.exposed_delay)),
                count(x.remote.requests),
            ]
        })
        .collect();
    s.push_str(&render_table(&header, &rows, st));
    let _ = writeln!(
        s,
        "idle periods: idle intervals with a spin-down; exposed delay: per spin-up, the wait of the request\n\
         that woke the disk; per request: every request's wait for spin-ups over all requests.\n"
    );
}

/// Energy by state (SARD Figures 8, 9).
fn energy_table(s: &mut String, r: &EnergyReport, st: &Style) {
    let _ = writeln!(
        s,
        "{}",
        st.bold("Energy (SARD Figures 8, 9): by state as a share of the standalone disk's energy")
    );
    let header = [
        "policy",
        "setting",
        "energy",
        "busy",
        "idle",
        "power cycle",
        "standby",
        "vs standalone",
        "vs always-on",
        "EDP vs standalone",
        "EDP vs always-on",
    ];
    let rows: Vec<Vec<String>> = r
        .runs
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let a = x.vs_standalone.unwrap_or_default();
            let o = x.vs_always_on.unwrap_or_default();
            vec![
                first_only(&r.runs, i),
                x.setting.clone(),
                joules(x.energy_j.total),
                ratio(a.busy),
                ratio(a.idle),
                ratio(a.power_cycle),
                ratio(a.standby),
                ratio(a.energy),
                ratio(o.energy),
                ratio(a.edp),
                ratio(o.edp),
            ]
        })
        .collect();
    s.push_str(&render_table(&header, &rows, st));
    let _ = writeln!(
        s,
        "EDP: energy × (span + exposed delay). always-on: the standalone disk without power management.\n"
    );
}

/// BG work while the disk spins anyway (`--bg`), when asked for.
fn bg_table(s: &mut String, r: &EnergyReport, st: &Style) {
    let Some(plan) = &r.bg else {
        return;
    };
    let _ = writeln!(
        s,
        "{}",
        st.bold(&format!(
            "BG work only while the disk spins anyway: {} in {} requests, after {} idle",
            bytes(plan.work_bytes),
            bytes(plan.size_bytes),
            secs(plan.wait_ns as f64 / 1e9)
        ))
    );
    let header = [
        "policy",
        "setting",
        "done",
        "share",
        "BG time",
        "extra energy",
        "FG delayed",
        "FG added delay",
    ];
    let rows: Vec<Vec<String>> = r
        .runs
        .iter()
        .enumerate()
        .filter_map(|(i, x)| {
            let cells = bg_cells(x)?;
            Some(
                std::iter::once(first_only(&r.runs, i))
                    .chain(cells)
                    .collect(),
            )
        })
        .collect();
    s.push_str(&render_table(&header, &rows, st));
    let _ = writeln!(
        s,
        "BG work never wakes the disk and stops at the spin-down; extra energy: the run with BG work\n\
         minus the same run without.\n"
    );
}
