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

use crate::human::{count, pct, secs};
use crate::{exit_code_of, message, BadInput};
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::sim::BgService;
use fallow_live::combine;
use fallow_live::net::{self, NamespaceTraffic, NetMonitorConfig, NetSource};
use fallow_live::run::{
    exit_code, guard, CommandSpec, FreezerKind, GuardianCommand, GuardianSpec, IoAccounting,
    Managed, RunConfig, RunStats, WatchedDisk,
};
use fallow_live::{DriveReport, Driver, DriverConfig, Monitor, MonitorConfig, MonitorStats};
use serde::Serialize;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
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

Exit status: the command's (128 + N if a signal N ended it); 2 for bad input or
usage, 1 for other failures of fallow itself.")]
pub struct RunArgs {
    /// Serve Prometheus metrics (FG/BG requests and bytes, collisions,
    /// time in each policy state) at `http://ADDR/metrics`, e.g.
    /// `127.0.0.1:9464`.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// Run the policy of a `fallow tune --json` result (its `best.spec`;
    /// one budget) instead of `--policy`.
    #[arg(long, value_name = "FILE", conflicts_with = "policy")]
    pub tuned: Option<std::path::PathBuf>,

    /// BG policy from the registry (`fallow policies`): when the idle
    /// device lets the command run. One BG request is one slice.
    #[arg(long, value_name = "SPEC", default_value = "fixed-wait")]
    pub policy: String,

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
    #[arg(long, value_name = "DURATION", default_value = "20ms", value_parser = parse_duration)]
    pub slice: u64,

    /// Sampling interval of the monitors.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_duration)]
    pub interval: u64,

    /// Seed of the policy's random stream.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,

    /// Write a JSON report of the run to FILE at the end.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

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
}

fn parse_duration(s: &str) -> Result<u64, String> {
    fallow_core::units::parse_duration_ns(s).map_err(|e| e.to_string())
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
    command: Vec<String>,
    pid: u32,
    freezer: FreezerKind,
    cgroup: Option<PathBuf>,
    io_accounting: &'static str,
    netns: Option<String>,
    slice_s: f64,
    /// `exited`, `interrupted` (Ctrl-C passed on), or `left-running`
    /// (fallow ended by SIGTERM or SIGHUP).
    end: &'static str,
    /// The command's exit status (none when left running).
    exit_code: Option<i32>,
    run: RunStats,
    driver: DriveReport,
    monitor: MonitorStats,
}

/// Run `fallow run`; the exit code is the command's.
pub fn main(args: RunArgs) -> ExitCode {
    match run(args) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(err) => {
            eprintln!("fallow: error: {}", message(&err));
            ExitCode::from(exit_code_of(&err))
        }
    }
}

fn say(quiet: bool, line: &str) {
    if !quiet {
        eprintln!("fallow run: {line}");
    }
}

fn run(args: RunArgs) -> Result<i32> {
    let freezer = args
        .freezer
        .as_deref()
        .map(str::parse::<FreezerKind>)
        .transpose()
        .map_err(live)?;
    let driver_cfg = DriverConfig {
        // a BG request is a slice of the command's time, whatever its size
        initial_bg_service: BgService::Constant { ns: args.slice },
        seed: args.seed,
        ..DriverConfig::default()
    };
    let policy = match &args.tuned {
        Some(path) => crate::live_config::read_tuned(path)?.spec,
        None => args.policy.clone(),
    };
    let mut driver = Driver::from_spec(&policy, driver_cfg).map_err(live)?;

    // what to watch
    let disk = match (&args.device, &args.net) {
        (Some(d), _) => Some(WatchedDisk::parse(d).map_err(live)?),
        (None, Some(_)) => None,
        (None, None) => Some(WatchedDisk::parse(".").map_err(|e| {
            BadInput(format!(
                "the current directory's disk cannot be watched ({e}): name it with --device"
            ))
        })?),
    };
    let net_source = args
        .net
        .as_deref()
        .map(NetSource::parse)
        .transpose()
        .map_err(live)?;
    if args.netns.is_some() && args.net.is_none() {
        say(
            args.quiet,
            "note: --netns without --net: the namespace only isolates the command's network",
        );
    }
    if args.net.is_some() && args.netns.is_none() {
        say(
            args.quiet,
            "note: --net without --netns: the command's own traffic on the interface counts as foreground",
        );
    }

    let (program, cmd_args) = args.command.split_first().expect("clap requires CMD");
    let spec = CommandSpec {
        program: program.clone(),
        args: cmd_args.to_vec(),
        netns: args.netns.clone(),
    };
    spec.check().map_err(live)?;

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

    let exe =
        std::env::current_exe().context("cannot find the fallow executable for the guardian")?;
    let cfg = RunConfig {
        freezer,
        slice_ns: args.slice,
        account_dev: disk.as_ref().and_then(|d| d.dev),
        guardian: Some(GuardianCommand {
            program: exe,
            leading_args: vec!["__guardian".into()],
        }),
    };
    let mut managed = Managed::spawn(&spec, &cfg, stop.clone()).map_err(live)?;

    let mut monitor = match start_monitors(&args, disk.as_ref(), net_source.as_ref(), &managed) {
        Ok(m) => m,
        Err(e) => {
            // it has not run: end it rather than leave it to run unwatched
            let _ = managed.kill();
            let _ = managed.finish();
            return Err(e);
        }
    };
    let source = monitor.stats().source;
    say(
        args.quiet,
        &format!(
            "pid {}, frozen by {}{}, {}; policy {}, {} slices; watching {}",
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
            policy,
            secs(args.slice as f64 / 1e9),
            source,
        ),
    );
    for why in managed.freezer().passed_over() {
        say(args.quiet, &format!("passed over {why}"));
    }

    let _exporter = match &args.metrics {
        Some(addr) => {
            let e =
                crate::metrics_export::Exporter::start(addr, &mut driver, monitor.shared_stats())?;
            if let Some(a) = e.addr() {
                say(args.quiet, &format!("metrics at http://{a}/metrics"));
            }
            Some(e)
        }
        None => None,
    };
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
        say(
            args.quiet,
            &format!(
                "command exited with status {c} after {}: ran {} ({}), frozen {}, {} thaws; {} FG busy periods on {}; monitor CPU {} of a core",
                secs(drive.wall_s),
                secs(stats.running_s),
                pct(stats.running_s / (stats.running_s + stats.frozen_s).max(1e-9)),
                secs(stats.frozen_s),
                count(stats.thaws),
                count(mon.busy_periods),
                mon.source,
                pct(mon.cpu_fraction()),
            ),
        );
    }
    if let Some(path) = &args.report {
        let report = Report {
            command: args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            pid,
            freezer: kind,
            cgroup,
            io_accounting: accounting,
            netns: args.netns.clone(),
            slice_s: args.slice as f64 / 1e9,
            end,
            exit_code: command_code,
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
    args: &RunArgs,
    disk: Option<&WatchedDisk>,
    net_source: Option<&NetSource>,
    managed: &Managed,
) -> Result<Monitor> {
    let mut monitors = Vec::new();
    if let Some(d) = disk {
        let own = managed.own_io().into_iter().collect();
        let cfg = MonitorConfig {
            interval_ns: args.interval,
        };
        monitors.push(Monitor::start(&d.source, own, cfg).map_err(live)?);
    }
    if let Some(n) = net_source {
        let own = args
            .netns
            .as_deref()
            .map(|ns| NamespaceTraffic::of_process_in(managed.pid(), ns))
            .transpose()
            .map_err(live)?;
        let cfg = NetMonitorConfig {
            interval_ns: args.interval,
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
    if report.thawed && report.fallow_gone {
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
