//! `fallow run [--policy P] [--device DEV] [--net IFACE] -- CMD …`: run a
//! maintenance command only in the idle time the policy picks, frozen
//! (cgroup v2, cgroup v1, or `SIGSTOP`) the rest of the time; its exit
//! status is fallow's. Also the hidden `fallow __guardian`, the process
//! that thaws the command if fallow is killed (`fallow_live::run::guardian`).
//!
//! Signals: Ctrl-C (`SIGINT`) is passed on to the command, which fallow
//! then lets finish unpaused; a second Ctrl-C ends fallow at once.
//! `SIGTERM` and `SIGHUP` end fallow and leave the command running,
//! thawed, like `SIGKILL` does (then through the guardian).
//!
//! Settings come from flags, then a TOML config (`--config`: `[live]`,
//! `[run]` and `[metrics]` tables), then a `fallow tune --json` result
//! (`--tuned`: its best policy), then the defaults, as for `fallow scrub`.

use crate::human::{bytes, count, pct, secs};
use crate::live_config::{self, Config, MetricsAddr};
use crate::{exit_code_of, message, BadInput};
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::sim::BgService;
use fallow_live::combine;
use fallow_live::net::{self, NamespaceTraffic, NetMonitorConfig, NetSource};
use fallow_live::run::{
    exit_code, guard, native_alternative, CommandSpec, FreezerKind, GuardianSpec, IoAccounting,
    Managed, RunConfig, RunStats, WatchedDisk, SLICE_RANGE_NS,
};
use fallow_live::{DriveReport, Driver, DriverConfig, Monitor, MonitorConfig, MonitorStats};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Arguments of `fallow run`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  fallow run --device sda -- rsync -a /data/ /backup/data/
      copy in the disk's idle time: paused within a slice of any other I/O on sda
  fallow run --device sda --policy fixed-wait:t=500ms --slice 50ms -- restic backup /data
      wait for 500 ms of quiet before resuming, run 50 ms at a time
  fallow run --net eth0 --netns bg --policy preemption-interval:p=20ms -- rsync -a /d/ nas:/d/
      yield to other traffic on eth0; the copy's own traffic, in namespace bg, is told apart
  fallow run --config /etc/fallow/fallow.toml -- restic backup /data
      policy, device, slice, report and metrics from the file's [live], [run] and [metrics]

Exit status: the command's (128 + N if a signal N ended it); 2 for bad input or
usage, 1 for other failures of fallow itself.")]
pub struct RunArgs {
    /// Serve Prometheus metrics (FG/BG requests and bytes, collisions,
    /// time in each policy state) at `http://ADDR/metrics`, e.g.
    /// `127.0.0.1:9464`. [default: `[metrics] addr` of --config, if any]
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// Run the policy of a `fallow tune --json` result (its `best.spec`;
    /// one budget) instead of `--policy`.
    #[arg(long, value_name = "FILE", conflicts_with = "policy")]
    pub tuned: Option<PathBuf>,

    /// A TOML config with `[live]`, `[run]` and `[metrics]` tables
    /// (docs/run.md); flags override its keys.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// BG policy from the registry (`fallow policies`): when the idle
    /// device lets the command run. One BG request is one slice.
    /// [default: fixed-wait]
    #[arg(long, value_name = "SPEC")]
    pub policy: Option<String>,

    /// Disk to watch for foreground I/O: a name (`sda`; a partition means
    /// its disk), a device node, a file or directory on the disk, or a
    /// counters file in /sys/block/*/stat format. [default: the disk of
    /// the current directory, unless --net is given]
    #[arg(long, value_name = "DEV")]
    pub device: Option<String>,

    /// Network interface to watch for foreground traffic (from
    /// /sys/class/net/IFACE/statistics), or a directory with rx_packets,
    /// tx_packets, rx_bytes and tx_bytes files. With --device as well, the
    /// command runs only when both are idle.
    #[arg(long, value_name = "IFACE")]
    pub net: Option<String>,

    /// Run the command in this network namespace (`ip netns exec NAME`) so
    /// its traffic is told apart from foreground traffic on --net.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,

    /// How to pause the command: cgroup2 (cgroup.freeze), cgroup1
    /// (freezer.state) or signal (SIGSTOP/SIGCONT to its process group).
    /// [default: the first of these that works here]
    #[arg(long, value_name = "KIND")]
    pub freezer: Option<String>,

    /// How long the command runs per BG request; an FG arrival during a
    /// slice waits at most this long for the command to be paused.
    /// [default: 20ms]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub slice: Option<u64>,

    /// Sampling interval of the monitors. [default: 1ms]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<u64>,

    /// Seed of the policy's random stream. [default: 1]
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Write a JSON report of the run to FILE at the end.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    #[command(flatten)]
    pub out: crate::atomic::OverwriteArg,

    /// No lines of fallow's own on standard error, except errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// The command and its arguments (after `--`).
    #[arg(
        value_name = "CMD",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// Arguments of the hidden `fallow __guardian` (see the module doc).
#[derive(Debug, Clone, Args)]
pub struct GuardianArgs {
    /// How the command is frozen.
    #[arg(long, value_name = "KIND")]
    pub freezer: String,
    /// The cgroup's freeze control file.
    #[arg(long, value_name = "FILE")]
    pub control: Option<PathBuf>,
    /// A cgroup to remove once its processes have gone.
    #[arg(long, value_name = "DIR")]
    pub cgroup: Vec<PathBuf>,
    /// A release action of a native executor (JSON), done when fallow is gone.
    #[arg(long, value_name = "JSON")]
    pub release: Vec<String>,
}

fn parse_duration(s: &str) -> Result<u64, String> {
    fallow_core::units::parse_duration_ns(s).map_err(|e| e.to_string())
}

/// The policy when none is given.
pub const DEFAULT_POLICY: &str = "fixed-wait";
/// The slice when none is given: an FG arrival waits at most this long.
pub const DEFAULT_SLICE_NS: u64 = 20_000_000;
/// The monitors' sampling interval when none is given (the design point).
pub const DEFAULT_INTERVAL_NS: u64 = 1_000_000;

/// `[run]`: settings of `fallow run` (the `[live]` keys policy, tuned,
/// interval and seed may be repeated here to differ for it). The command
/// itself is not here: it stays on the command line after `--`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunSection {
    policy: Option<String>,
    tuned: Option<PathBuf>,
    interval: Option<String>,
    seed: Option<u64>,
    device: Option<String>,
    net: Option<String>,
    netns: Option<String>,
    freezer: Option<String>,
    slice: Option<String>,
    report: Option<PathBuf>,
}

/// Read the config: `[live]`, `[metrics]` and `[run]` strictly, paths
/// relative to the file.
fn read_config(path: &Path) -> Result<Config<RunSection>> {
    let mut cfg: Config<RunSection> = live_config::read_config(path, "run")?;
    let own = &mut cfg.own;
    own.tuned = own.tuned.take().map(|p| live_config::relative_to(path, p));
    own.report = own.report.take().map(|p| live_config::relative_to(path, p));
    Ok(cfg)
}

/// The disk to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Disk {
    /// As `--device` takes it; `from` names the config key it came from.
    Named { spec: String, from: Option<String> },
    /// The current directory's disk (the default without a network).
    CurrentDir,
    /// None: only the network is watched.
    Unwatched,
}

/// Settings after flags, config, tune result and defaults.
#[derive(Debug)]
struct Settings {
    policy: String,
    policy_from: &'static str,
    /// Where a policy that is not `--policy` was written (for errors).
    policy_source: Option<String>,
    disk: Disk,
    net: Option<(String, Option<String>)>,
    netns: Option<String>,
    freezer: Option<FreezerKind>,
    slice_ns: u64,
    interval_ns: u64,
    seed: u64,
    report: Option<PathBuf>,
    metrics: Option<MetricsAddr>,
}

fn settings(a: &RunArgs) -> Result<Settings> {
    let cfg = match &a.config {
        Some(p) => read_config(p)?,
        None => Config::default(),
    };
    let (shared, own) = (&cfg.live, &cfg.own);
    let file = cfg.path.display().to_string();
    let choice = live_config::choose_policy(
        a.policy.as_deref(),
        a.tuned.as_deref(),
        own.policy.as_deref().or(shared.policy.as_deref()),
        own.tuned.as_deref().or(shared.tuned.as_deref()),
        DEFAULT_POLICY,
    )?;
    let policy_source = match choice.from {
        "config" if own.policy.is_some() => Some(format!("{file}: [run] policy")),
        "config" => Some(format!("{file}: [live] policy")),
        "tune result" => a
            .tuned
            .as_deref()
            .or(own.tuned.as_deref())
            .or(shared.tuned.as_deref())
            .map(|p| format!("{}: best.spec", p.display())),
        _ => None,
    };
    let net = match (&a.net, &own.net) {
        (Some(n), _) => Some((n.clone(), None)),
        (None, Some(n)) => Some((n.clone(), Some(format!("{file}: [run] net")))),
        (None, None) => None,
    };
    // [live] monitor is what scrub watches; for run it names the disk,
    // with `auto` run's default and `none` no disk at all
    let disk = match (&a.device, &own.device, shared.monitor.as_deref()) {
        (Some(d), ..) => Disk::Named {
            spec: d.clone(),
            from: None,
        },
        (None, Some(d), _) => Disk::Named {
            spec: d.clone(),
            from: Some(format!("{file}: [run] device")),
        },
        (None, None, Some("none")) => Disk::Unwatched,
        (None, None, Some("auto") | None) if net.is_some() => Disk::Unwatched,
        (None, None, Some("auto") | None) => Disk::CurrentDir,
        (None, None, Some(m)) => Disk::Named {
            spec: m.to_string(),
            from: Some(format!("{file}: [live] monitor")),
        },
    };
    if disk == Disk::Unwatched && net.is_none() {
        return Err(cfg.bad(
            "live",
            "monitor",
            "`none` leaves fallow run nothing to watch: give --device or --net, or [run] device or net",
        ));
    }
    let freezer = match (&a.freezer, &own.freezer) {
        (Some(f), _) => Some(f.parse::<FreezerKind>().map_err(live)?),
        (None, Some(f)) => Some(
            FreezerKind::ALL
                .into_iter()
                .find(|k| k.name() == f.trim())
                .ok_or_else(|| {
                    cfg.bad(
                        "run",
                        "freezer",
                        format!("`{f}`: use cgroup2, cgroup1 or signal"),
                    )
                })?,
        ),
        (None, None) => None,
    };
    // a flag's slice is checked where the command starts, naming --slice
    let file_slice = cfg.duration("run", "slice", own.slice.as_deref())?;
    if let (None, Some(ns)) = (a.slice, file_slice) {
        let (lo, hi) = SLICE_RANGE_NS;
        if !(lo..=hi).contains(&ns) {
            return Err(cfg.bad("run", "slice", format!("{ns} ns: use 1 ms to 60 s")));
        }
    }
    let interval_ns = a
        .interval
        .or(cfg.duration("run", "interval", own.interval.as_deref())?)
        .or(cfg.duration("live", "interval", shared.interval.as_deref())?)
        .unwrap_or(DEFAULT_INTERVAL_NS);
    Ok(Settings {
        policy: choice.spec,
        policy_from: choice.from,
        policy_source,
        disk,
        net,
        netns: a.netns.clone().or(own.netns.clone()),
        freezer,
        slice_ns: a.slice.or(file_slice).unwrap_or(DEFAULT_SLICE_NS),
        interval_ns,
        seed: a.seed.or(own.seed).or(shared.seed).unwrap_or(1),
        report: a.report.clone().or(own.report.clone()),
        metrics: cfg.metrics_addr(a.metrics.as_deref()),
    })
}

/// A library error as the CLI reports it: bad input exits 2.
fn live(e: fallow_live::Error) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

/// The JSON report.
#[derive(Debug, Serialize)]
struct Report {
    /// `fallow VERSION`: marks the file as fallow's (fallow_core::outpath).
    generator: String,
    command: Vec<String>,
    pid: u32,
    freezer: FreezerKind,
    cgroup: Option<PathBuf>,
    io_accounting: &'static str,
    /// The policy spec run, and where it came from (`--policy`, `config`,
    /// `tune result`, `default`).
    policy: String,
    policy_from: &'static str,
    netns: Option<String>,
    slice_s: f64,
    /// `exited`, `interrupted` (Ctrl-C passed on), or `left-running`
    /// (fallow ended by SIGTERM or SIGHUP).
    end: &'static str,
    /// The command's exit status (none when left running).
    exit_code: Option<i32>,
    /// For a command whose work runs in the kernel (btrfs scrub, zpool
    /// scrub, mdadm, fstrim): why freezing cannot pause it and what can.
    native_alternative: Option<String>,
    run: RunStats,
    driver: DriveReport,
    monitor: MonitorStats,
}

/// `e`, preceded by the config key the value came from (if it did).
fn named(e: anyhow::Error, from: &Option<String>) -> anyhow::Error {
    match from {
        Some(f) => e.context(f.clone()),
        None => e,
    }
}

/// Run `fallow run`; the exit code is the command's.
pub fn main(args: RunArgs) -> u8 {
    match run(args) {
        Ok(code) => code.clamp(0, 255) as u8,
        Err(err) => {
            eprintln!("fallow: error: {}", message(&err));
            exit_code_of(&err)
        }
    }
}

fn say(quiet: bool, line: &str) {
    if !quiet {
        eprintln!("fallow run: {line}");
    }
}

fn run(args: RunArgs) -> Result<i32> {
    let s = settings(&args)?;
    // the report must not replace an input or a device, found out at the end
    if let Some(p) = &s.report {
        let guard = args.out.guard(
            [args.config.as_deref(), args.tuned.as_deref()]
                .into_iter()
                .flatten(),
        );
        crate::atomic::check(
            &guard,
            p,
            fallow_core::outpath::OutputKind::JsonReport,
            "--report",
        )?;
    }
    let driver_cfg = DriverConfig {
        // a BG request is a slice of the command's time, whatever its size
        initial_bg_service: BgService::Constant { ns: s.slice_ns },
        seed: s.seed,
        ..DriverConfig::default()
    };
    let mut driver =
        Driver::from_spec(&s.policy, driver_cfg).map_err(|e| named(live(e), &s.policy_source))?;

    // what to watch
    let disk = match &s.disk {
        Disk::Named { spec, from } => {
            Some(WatchedDisk::parse(spec).map_err(|e| named(live(e), from))?)
        }
        Disk::Unwatched => None,
        Disk::CurrentDir => Some(WatchedDisk::parse(".").map_err(|e| {
            BadInput(format!(
                "the current directory's disk cannot be watched ({e}): name it with --device"
            ))
        })?),
    };
    let net_source = match &s.net {
        Some((n, from)) => Some(NetSource::parse(n).map_err(|e| named(live(e), from))?),
        None => None,
    };
    if s.netns.is_some() && s.net.is_none() {
        say(
            args.quiet,
            "note: --netns without --net: the namespace only isolates the command's network",
        );
    }
    if s.net.is_some() && s.netns.is_none() {
        say(
            args.quiet,
            "note: --net without --netns: the command's own traffic on the interface counts as foreground",
        );
    }

    let (program, cmd_args) = args.command.split_first().expect("clap requires CMD");
    let spec = CommandSpec {
        program: program.clone(),
        args: cmd_args.to_vec(),
        netns: s.netns.clone(),
    };
    spec.check().map_err(live)?;
    let native = native_alternative(&args.command);
    if let Some(n) = &native {
        say(
            args.quiet,
            &format!("note: {n}; fallow run warns if the command goes on reading while frozen"),
        );
    }

    // signals: a flag per kind; any of them stops the driver
    let stop = Arc::new(AtomicBool::new(false));
    let flag = || Arc::new(AtomicBool::new(false));
    let (int, term, hup) = (flag(), flag(), flag());
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        use signal_hook::flag;
        let reg =
            |r: std::io::Result<signal_hook::SigId>| r.context("cannot install a signal handler");
        // a second Ctrl-C ends fallow at once (the command was thawed at the first)
        reg(flag::register_conditional_shutdown(
            SIGINT,
            130,
            int.clone(),
        ))?;
        reg(flag::register(SIGINT, int.clone()))?;
        reg(flag::register(SIGINT, stop.clone()))?;
        for (sig, f) in [(SIGTERM, &term), (SIGHUP, &hup)] {
            reg(flag::register(sig, f.clone()))?;
            reg(flag::register(sig, stop.clone()))?;
        }
    }

    let cfg = RunConfig {
        freezer: s.freezer,
        slice_ns: s.slice_ns,
        account_dev: disk.as_ref().and_then(|d| d.dev),
        guardian: Some(crate::invocation::guardian()?),
    };
    let mut managed = Managed::spawn(&spec, &cfg, stop.clone()).map_err(live)?;
    {
        // said at once, from the watch's thread, while the driver waits
        let quiet = args.quiet;
        let why = native.clone().unwrap_or_else(|| {
            "its work runs outside its processes (in the kernel), where freezing does not reach"
                .into()
        });
        managed.on_frozen_io(Box::new(move |n| {
            say(
                quiet,
                &format!(
                    "warning: frozen, the command still read {} in {}: freezing does not pause its I/O; {why}. Its time frozen but reading is reported as frozen_io_s, not as frozen",
                    bytes(n.bytes),
                    secs(n.after_freeze_s)
                ),
            );
        }));
    }

    let mut monitor = match start_monitors(&s, disk.as_ref(), net_source.as_ref(), &managed) {
        Ok(m) => m,
        Err(e) => {
            // it has not run: end it rather than leave it to run unwatched
            let _ = managed.kill();
            let _ = managed.finish();
            return Err(e);
        }
    };
    let exporter = match &s.metrics {
        Some(at) => {
            match crate::metrics_export::Exporter::start(at, &mut driver, monitor.shared_stats()) {
                Ok(e) => Some(e),
                Err(e) => {
                    // as above: the command has not run yet
                    let _ = monitor.stop();
                    let _ = managed.kill();
                    let _ = managed.finish();
                    return Err(e);
                }
            }
        }
        None => None,
    };
    if let (Some(e), Some(p)) = (&exporter, managed.frozen_io_probe()) {
        e.follow_frozen_io(p);
    }
    let source = monitor.stats().source;
    say(
        args.quiet,
        &format!(
            "pid {}, frozen by {}{}, {}; policy {} ({}), {} slices; watching {}",
            managed.pid(),
            managed.freezer().kind(),
            managed
                .freezer()
                .cgroup_dir()
                .map(|d| format!(" ({})", d.display()))
                .unwrap_or_default(),
            match managed.accounting() {
                IoAccounting::None =>
                    "its disk I/O not told apart (not a disk in sysfs)".to_string(),
                a => format!("its disk I/O told apart by {}", a.name()),
            },
            s.policy,
            s.policy_from,
            secs(s.slice_ns as f64 / 1e9),
            source,
        ),
    );
    for why in managed.freezer().passed_over() {
        say(args.quiet, &format!("passed over {why}"));
    }

    if let Some(a) = exporter.as_ref().and_then(|e| e.addr()) {
        say(args.quiet, &format!("metrics at http://{a}/metrics"));
    }
    let drive = driver.run(&mut monitor, &mut managed, &stop);
    let drive = match drive {
        Ok(r) => r,
        Err(e) => {
            let pid = managed.pid();
            let _ = managed.detach();
            // a failure during the run (the watched device went away), not bad input: 1
            return Err(anyhow::Error::from(e)).with_context(|| {
                format!("the command (pid {pid}) continues, unpaused and unwatched")
            });
        }
    };

    // before the cgroups go: once they are removed the command's I/O can
    // no longer be read, and its last requests would look like FG work
    let last_stats = monitor.stats();
    let mon = monitor.stop().unwrap_or_else(|e| {
        // the run is over: say so, and still see to the command
        say(args.quiet, &format!("the monitor failed at the end: {e}"));
        last_stats
    });
    let pid = managed.pid();
    let kind = managed.freezer().kind();
    let cgroup = managed.freezer().cgroup_dir().map(PathBuf::from);
    let accounting = managed.accounting().name();
    let signalled = [(&term, 15), (&hup, 1)]
        .into_iter()
        .find(|(f, _)| f.load(Ordering::SeqCst))
        .map(|(_, n)| n);
    let (end, stats, command_code) = match signalled {
        Some(sig) if !managed.has_exited() => {
            let stats = managed.stats();
            managed.detach().map_err(live)?;
            say(
                args.quiet,
                &format!(
                    "ended by signal {sig}: the command (pid {pid}) runs on, unpaused, after {} of running",
                    secs(stats.running_s)
                ),
            );
            ("left-running", stats, None)
        }
        _ => {
            let end = if !managed.has_exited() && int.load(Ordering::SeqCst) {
                say(args.quiet, "interrupted: passing SIGINT on to the command");
                managed.interrupt().map_err(live)?;
                "interrupted"
            } else {
                "exited"
            };
            let done = managed.finish().map_err(live)?;
            for why in &done.left_behind {
                say(
                    args.quiet,
                    &format!("left to the guardian (a child of the command still runs): {why}"),
                );
            }
            (end, done.stats, Some(exit_code(done.status)))
        }
    };
    // left running: 128 + the signal, as a shell reports a command it ended
    let code = command_code.unwrap_or(128 + signalled.unwrap_or(15));
    if let Some(c) = command_code {
        let leaked = if stats.frozen_io_intervals > 0 {
            format!(
                ", frozen but still reading {} ({} in {} intervals)",
                secs(stats.frozen_io_s),
                bytes(stats.frozen_io_bytes),
                count(stats.frozen_io_intervals)
            )
        } else {
            String::new()
        };
        say(
            args.quiet,
            &format!(
                "command exited with status {c} after {}: ran {} ({}), frozen {}{leaked}, {} thaws; {} FG busy periods on {}; monitor CPU {} of a core",
                secs(drive.wall_s),
                secs(stats.running_s),
                pct(stats.running_s
                    / (stats.running_s + stats.frozen_s + stats.frozen_io_s).max(1e-9)),
                secs(stats.frozen_s),
                count(stats.thaws),
                count(mon.busy_periods),
                mon.source,
                pct(mon.cpu_fraction()),
            ),
        );
    }
    if let Some(path) = &s.report {
        let report = Report {
            generator: format!("fallow {}", env!("CARGO_PKG_VERSION")),
            command: args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            pid,
            freezer: kind,
            cgroup,
            io_accounting: accounting,
            policy: s.policy.clone(),
            policy_from: s.policy_from,
            netns: s.netns.clone(),
            slice_s: s.slice_ns as f64 / 1e9,
            end,
            exit_code: command_code,
            native_alternative: native.clone(),
            run: stats,
            driver: drive,
            monitor: mon,
        };
        crate::atomic::write_atomically(path, |w| {
            serde_json::to_writer_pretty(&mut *w, &report)?;
            writeln!(w)?;
            Ok(())
        })
        .with_context(|| format!("cannot write the report {}", path.display()))?;
    }
    Ok(code)
}

/// The disk monitor, the network monitor, or both as one.
fn start_monitors(
    s: &Settings,
    disk: Option<&WatchedDisk>,
    net_source: Option<&NetSource>,
    managed: &Managed,
) -> Result<Monitor> {
    let mut monitors = Vec::new();
    if let Some(d) = disk {
        let own = managed.own_io().into_iter().collect();
        let cfg = MonitorConfig {
            interval_ns: s.interval_ns,
        };
        monitors.push(Monitor::start(&d.source, own, cfg).map_err(live)?);
    }
    if let Some(n) = net_source {
        let own = s
            .netns
            .as_deref()
            .map(|ns| NamespaceTraffic::of_process_in(managed.pid(), ns))
            .transpose()
            .map_err(live)?;
        let cfg = NetMonitorConfig {
            interval_ns: s.interval_ns,
        };
        monitors.push(net::start(n, own, cfg).map_err(live)?);
    }
    if monitors.len() == 1 {
        Ok(monitors.pop().expect("one monitor"))
    } else {
        combine::either(monitors).map_err(live)
    }
}

/// `fallow __guardian`: watch over a command until fallow says `done` on
/// standard input, or its end shows fallow is gone.
pub fn guardian(args: GuardianArgs) -> Result<()> {
    let kind: FreezerKind = args.freezer.parse().map_err(live)?;
    let spec = GuardianSpec {
        kind,
        control: args.control,
        cgroups: args.cgroup,
        release: args
            .release
            .iter()
            .map(|r| fallow_live::run::ReleaseAction::from_arg(r))
            .collect::<Result<_, _>>()
            .map_err(live)?,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone())
            .context("cannot install a signal handler")?;
    }
    let report = guard(std::io::stdin(), &spec, &stop, 100);
    for r in &report.released {
        eprintln!("fallow __guardian: fallow is gone; done: {}", r.to_arg());
    }
    if report.thawed && report.fallow_gone && !report.pgids.is_empty() {
        eprintln!(
            "fallow __guardian: fallow is gone; thawed the command (process group {}); its cgroups go when its last process does",
            report
                .pgids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for e in &report.errors {
        eprintln!("fallow __guardian: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Settings of `fallow run ARGS -- true`.
    fn of(args: &[&str]) -> Result<Settings> {
        let mut argv = vec!["run"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--", "true"]);
        settings(&Cli::try_parse_from(argv).unwrap().run)
    }

    fn err(args: &[&str]) -> String {
        let e = of(args).unwrap_err();
        assert_eq!(crate::exit_code_of(&e), 2, "{e:#}");
        crate::message(&e)
    }

    fn named(spec: &str, from: Option<String>) -> Disk {
        Disk::Named {
            spec: spec.into(),
            from,
        }
    }

    #[test]
    fn defaults_without_a_config() {
        let s = of(&[]).unwrap();
        assert_eq!(
            (s.policy.as_str(), s.policy_from),
            ("fixed-wait", "default")
        );
        assert_eq!(s.disk, Disk::CurrentDir);
        assert_eq!(
            (s.slice_ns, s.interval_ns, s.seed),
            (20_000_000, 1_000_000, 1)
        );
        assert_eq!((s.freezer, &s.report, &s.metrics), (None, &None, &None));
        // --net alone watches no disk
        assert_eq!(of(&["--net", "eth0"]).unwrap().disk, Disk::Unwatched);
    }

    #[test]
    fn the_file_beats_the_defaults_and_flags_beat_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "f.toml",
            "[live]\npolicy = \"aggressive\"\nmonitor = \"/run/emu.stat\"\ninterval = \"2ms\"\nseed = 7\n\n\
             [run]\nnetns = \"bg\"\nfreezer = \"signal\"\nslice = \"50ms\"\nreport = \"r.json\"\n\n\
             [metrics]\naddr = \"127.0.0.1:9464\"\n\n[scrub]\nsize = \"4MiB\"\n",
        );
        let f = p.to_str().unwrap();
        let file = |key: &str| Some(format!("{f}: {key}"));
        // the values clap would default (slice, interval, seed, policy) come from the file
        let s = of(&["--config", f]).unwrap();
        assert_eq!((s.policy.as_str(), s.policy_from), ("aggressive", "config"));
        assert_eq!(s.policy_source, file("[live] policy"));
        assert_eq!(s.disk, named("/run/emu.stat", file("[live] monitor")));
        assert_eq!(
            (s.slice_ns, s.interval_ns, s.seed),
            (50_000_000, 2_000_000, 7)
        );
        assert_eq!(s.freezer, Some(FreezerKind::Signal));
        assert_eq!(s.netns.as_deref(), Some("bg"));
        assert_eq!(s.report, Some(d.path().join("r.json")));
        assert_eq!(s.metrics.as_ref().unwrap().addr, "127.0.0.1:9464");
        // every flag beats the file
        let s = of(&[
            "--config",
            f,
            "--policy",
            "fixed-wait:t=1s",
            "--device",
            "sda",
            "--netns",
            "other",
            "--freezer",
            "cgroup2",
            "--slice",
            "30ms",
            "--interval",
            "5ms",
            "--seed",
            "3",
            "--report",
            "x.json",
            "--metrics",
            "127.0.0.1:0",
        ])
        .unwrap();
        assert_eq!(
            (s.policy.as_str(), s.policy_from),
            ("fixed-wait:t=1s", "--policy")
        );
        assert_eq!(s.disk, named("sda", None));
        assert_eq!(
            (s.slice_ns, s.interval_ns, s.seed),
            (30_000_000, 5_000_000, 3)
        );
        assert_eq!(s.freezer, Some(FreezerKind::Cgroup2));
        assert_eq!(s.netns.as_deref(), Some("other"));
        assert_eq!(s.report, Some(PathBuf::from("x.json")));
        assert_eq!(s.metrics.as_ref().unwrap().from, "--metrics");
        // [run] repeats of [live] keys beat [live]; [run] device beats [live] monitor
        let p = write(
            d.path(),
            "g.toml",
            "[live]\npolicy = \"aggressive\"\nmonitor = \"none\"\ninterval = \"2ms\"\nseed = 7\n\
             [run]\npolicy = \"random\"\ndevice = \"vda\"\ninterval = \"3ms\"\nseed = 8\n",
        );
        let g = p.to_str().unwrap();
        let s = of(&["--config", g]).unwrap();
        assert_eq!(s.policy, "random");
        assert_eq!(s.policy_source, Some(format!("{g}: [run] policy")));
        assert_eq!(s.disk, named("vda", Some(format!("{g}: [run] device"))));
        assert_eq!((s.interval_ns, s.seed), (3_000_000, 8));
    }

    #[test]
    fn live_monitor_none_and_auto_for_run() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "n.toml",
            "[live]\nmonitor = \"none\"\n[run]\nnet = \"eth0\"\n",
        );
        let s = of(&["--config", p.to_str().unwrap()]).unwrap();
        assert_eq!(s.disk, Disk::Unwatched);
        assert_eq!(
            s.net,
            Some(("eth0".into(), Some(format!("{}: [run] net", p.display()))))
        );
        let p = write(d.path(), "a.toml", "[live]\nmonitor = \"auto\"\n");
        assert_eq!(
            of(&["--config", p.to_str().unwrap()]).unwrap().disk,
            Disk::CurrentDir
        );
        // nothing left to watch
        let p = write(d.path(), "o.toml", "[live]\nmonitor = \"none\"\n");
        let e = err(&["--config", p.to_str().unwrap()]);
        assert!(
            e.contains("o.toml: [live] monitor") && e.contains("nothing to watch"),
            "{e}"
        );
        // but a --device flag gives it a disk
        let s = of(&["--config", p.to_str().unwrap(), "--device", "sda"]).unwrap();
        assert_eq!(s.disk, named("sda", None));
    }

    #[test]
    fn a_tuned_flag_beats_the_files_policy() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "t.json",
            r#"{"budget_text": "1ms", "best": {"spec": "fixed-wait:t=205ms", "request_size_bytes": 4096}}"#,
        );
        // relative to the file, not the working directory
        let p = write(d.path(), "f.toml", "[run]\ntuned = \"t.json\"\n");
        let s = of(&["--config", p.to_str().unwrap()]).unwrap();
        assert_eq!(
            (s.policy.as_str(), s.policy_from),
            ("fixed-wait:t=205ms", "tune result")
        );
        let p = write(d.path(), "g.toml", "[live]\npolicy = \"aggressive\"\n");
        let t = d.path().join("t.json");
        let s = of(&[
            "--config",
            p.to_str().unwrap(),
            "--tuned",
            t.to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(
            (s.policy.as_str(), s.policy_from),
            ("fixed-wait:t=205ms", "tune result")
        );
        // the flags themselves still conflict
        assert!(
            Cli::try_parse_from(["run", "--tuned", "t", "--policy", "x", "--", "true"]).is_err()
        );
    }

    /// The shipped example must stay readable as it documents the keys.
    #[test]
    fn the_example_config_reads() {
        let ex = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/examples/fallow.toml"
        );
        let s = of(&["--config", ex]).unwrap();
        assert_eq!(
            (s.policy.as_str(), s.policy_from),
            ("fixed-wait:t=100ms", "config")
        );
        assert_eq!(s.disk, named("sda", Some(format!("{ex}: [run] device"))));
        assert_eq!((s.slice_ns, s.interval_ns), (20_000_000, 1_000_000));
        assert_eq!(s.metrics.unwrap().addr, "127.0.0.1:9464");
    }

    #[test]
    fn the_run_table_is_strict() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            ("[run]\nslise = \"20ms\"\n", "[run]: unknown field `slise`"),
            ("[run]\ncommand = [\"rsync\"]\n", "unknown field `command`"),
            ("[run]\nseed = \"x\"\n", "in `seed`"),
            ("[run]\nslice = \"fast\"\n", "[run] slice"),
            (
                "[run]\nslice = \"0s\"\n",
                "[run] slice: 0 ns: use 1 ms to 60 s",
            ),
            ("[run]\ninterval = \"1 hour\"\n", "[run] interval"),
            ("[live]\ninterval = \"x\"\n", "[live] interval"),
            ("[run]\nfreezer = \"cgroup3\"\n", "[run] freezer: `cgroup3`"),
            (
                "[metrics]\nadr = \"127.0.0.1:1\"\n",
                "[metrics]: unknown field `adr`",
            ),
            ("device = \"sda\"\n", "top-level key `device`"),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let p = write(d.path(), &format!("c{i}.toml"), text);
            let e = err(&["--config", p.to_str().unwrap()]);
            assert!(
                e.contains(&format!("c{i}.toml")) && e.contains(want),
                "{text}: `{want}` not in: {e}"
            );
            assert!(!e.contains('\n'), "{e}");
        }
        // a tune result that cannot be read, found beside the file
        let p = write(d.path(), "t.toml", "[run]\ntuned = \"no-such.json\"\n");
        let e = err(&["--config", p.to_str().unwrap()]);
        assert!(
            e.contains(&d.path().join("no-such.json").display().to_string()),
            "{e}"
        );
        // a bad value is an error even where a flag overrides it
        let p = write(d.path(), "s.toml", "[run]\nslice = \"fast\"\n");
        assert!(of(&["--config", p.to_str().unwrap(), "--slice", "5ms"]).is_err());
        let e = err(&["--config", "/no/such/fallow.toml"]);
        assert!(e.contains("/no/such/fallow.toml"), "{e}");
    }
}
