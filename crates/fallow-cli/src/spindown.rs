//! `fallow spindown DEV…`: the live spin-down daemon of `fallow-live`
//! (crates/fallow-live/src/spindown/). This file only parses flags and the
//! TOML config, and prints; the decisions, actuators and validation are
//! the library's.

use crate::BadInput;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use fallow_core::outpath::OutputKind;
use fallow_live::spindown::settings::{SpindownFlags, DEFAULT_STATE};
use fallow_live::spindown::{Daemon, Event, EventKind, SpindownConfig, Status};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Arguments of `fallow spindown`.
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "\
Examples:
  fallow spindown /dev/sdb --policy timeout:t=20min --max-spinups 50/day
      spin sdb down after 20 idle minutes, at most 50 spin-ups a day (the timeout grows to keep it)
  fallow spindown /dev/sdb /dev/sdc --policy adaptive --policy /dev/sdc=predictive --dry-run
      only log what the adaptive (sdb) and predictive (sdc) policies would do
  fallow spindown --config /etc/fallow/spindown.toml
      disks, policies, budgets and jobs from a file (see docs/spindown.md)
  fallow spindown /dev/sdb --job 'fallow scrub /dev/sdb --resume' --job-every 168h --job-deadline 24h
      a weekly scrub that runs when sdb spins anyway; after 24 h overdue it spends one spin-up
  fallow emulate-disk disk.img /mnt/emu --power fast.toml && fallow spindown /mnt/emu --policy timeout:t=2s
      the same against an emulated disk with power states (what the tests do)
  fallow spindown status
      what the running daemon sees: state, spin-ups, budget, energy, top wakers

Real disks are spun down with ATA STANDBY IMMEDIATE and read with CHECK POWER MODE
(the bytes hdparm -y and -C send, with its fallback opcodes 0x94/0x98) through SG_IO ATA
pass-through: SATA disks behind libata and USB bridges that pass ATA commands. SCSI/SAS
disks, which refuse ATA pass-through, get START STOP UNIT with the STANDBY power condition
(what sg_start --pc=3 sends) and REQUEST SENSE. Loop, virtio, NVMe, device-mapper and FUSE
devices refuse SG_IO: the daemon says so and exits 2 (with --dry-run it watches them anyway).
NO DRIVE HAS BEEN SPUN DOWN BY FALLOW'S TESTS: the machines they run on (development and
CI) have no ATA or SCSI disk; the commands are tested byte for byte against those the tools
sent (recorded with strace), and for their error handling. The daemon reads only the stat counters and CHECK
POWER MODE / REQUEST SENSE, which never wake a sleeping disk, and never spins down a disk
with I/O in flight.

Policies are `fallow energy`'s: timeout:t=DURATION, adaptive[:t=,min=,max=,grow=,shrink=],
predictive[:rho=,wait=,else=,warmup=,lags=], always-on.
Events are printed to stderr and, with --log, appended as JSON lines."
)]
pub struct SpindownArgs {
    #[command(subcommand)]
    pub action: Option<SpindownAction>,

    /// Disks to watch: `/dev/sdb`, `sdb`, an emulated disk's mount point
    /// (or MOUNTPOINT/disk), or a loop device over one.
    #[arg(value_name = "DEV")]
    pub devs: Vec<String>,

    /// Spin-down policy, `[DEV=]SPEC`; repeat for other disks.
    /// [default: timeout:t=10min]
    #[arg(long = "policy", short = 'p', value_name = "[DEV=]POLICY")]
    pub policies: Vec<String>,

    /// Spin-up budget, `[DEV=]N/UNIT`: at most N spin-downs in any window
    /// of that length (day, week, h, or a duration such as 30min). The
    /// policy's timeout is lengthened when the window has none to spare.
    #[arg(long, value_name = "[DEV=]N/UNIT")]
    pub max_spinups: Vec<String>,

    /// Only log what would be done; never spin a disk down.
    #[arg(long)]
    pub dry_run: bool,

    /// How often the I/O counters are read when they must be polled (an
    /// emulated disk's stat file, FALLOW_MONITOR=poll, no perf events),
    /// and while a disk is busy or a job runs. With the block-tracepoint
    /// source (tracefs is mounted for it when it is not) an idle disk
    /// wakes the daemon only on I/O and at its policy's deadlines.
    /// [default: 50ms]
    #[arg(long, value_name = "DURATION")]
    pub poll: Option<String>,

    /// Power model for the energy estimates and the adaptive policy's
    /// break-even time (TOML, as `fallow energy --power`). [default: WD2500JD]
    #[arg(long, value_name = "power.toml")]
    pub power: Option<PathBuf>,

    /// Settings file (TOML): poll, policy, max_spinups, power, log, state,
    /// metrics, and [[disk]] tables with dev, policy, max_spinups, jobs.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Append every event as a JSON line to this file (a new file, or one
    /// of these logs; never an input, a device node, a FIFO or someone
    /// else's file).
    #[arg(long, value_name = "FILE", help_heading = crate::atomic::OUTPUT_FILES)]
    pub log: Option<PathBuf>,

    /// Status file, rewritten atomically, read by `fallow spindown status`
    /// (the same rules as --log). [default: /run/fallow/spindown.json]
    #[arg(long, value_name = "FILE", help_heading = crate::atomic::OUTPUT_FILES)]
    pub state: Option<PathBuf>,

    #[command(flatten)]
    pub overwrite: crate::atomic::OverwriteArg,

    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9465).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// A maintenance command (run with sh -c) that rides the first DEV's
    /// spin-ups; repeat for several.
    #[arg(long, value_name = "CMD")]
    pub job: Vec<String>,

    /// How often each --job is due. [default: 24h]
    #[arg(long, value_name = "DURATION")]
    pub job_every: Option<String>,

    /// How long a due --job waits for the disk to spin anyway before one
    /// spin-up is spent on it. [default: 6h]
    #[arg(long, value_name = "DURATION")]
    pub job_deadline: Option<String>,

    /// Stop after this long (tests, benchmarks). [default: until SIGINT/SIGTERM]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// Print the final status as JSON on stdout when stopping.
    #[arg(long)]
    pub json: bool,
}

/// `fallow spindown status`.
#[derive(Debug, Subcommand)]
pub enum SpindownAction {
    /// Show the running daemon's status: state, spin-ups, budget, energy, top wakers.
    Status(StatusArgs),
    /// Write a systemd service for this fallow binary (where it is installed).
    Units(UnitsArgs),
}

/// Arguments of `fallow spindown units`.
#[derive(Debug, Args)]
#[command(after_help = "\
Example:
  fallow spindown units -o /etc/systemd/system/fallow-spindown.service --device /dev/sdb
  systemctl daemon-reload && systemctl enable --now fallow-spindown

The service runs as a dynamic user in the disk group with CAP_SYS_RAWIO (ATA/SCSI
pass-through) and CAP_PERFMON (block tracepoints) only; systemd mounts tracefs
(sys-kernel-tracing.mount) and creates /run/fallow, /var/lib/fallow and
/var/log/fallow. `systemctl reload` sends SIGHUP: the config is read again.")]
pub struct UnitsArgs {
    /// The service file to write.
    #[arg(
        long,
        short = 'o',
        value_name = "FILE",
        help_heading = crate::atomic::OUTPUT_FILES
    )]
    pub output: PathBuf,

    /// The settings file the service reads.
    #[arg(long, value_name = "FILE", default_value = "/etc/fallow/spindown.toml")]
    pub config: PathBuf,

    /// A disk the service may open (repeat); default: every SCSI/SATA disk (block-sd).
    #[arg(long, value_name = "DEV")]
    pub device: Vec<String>,

    #[command(flatten)]
    pub overwrite: crate::atomic::OverwriteArg,
}

/// Arguments of `fallow spindown status`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow spindown status
      the running daemon's state, spin-ups, budget, energy and top wakers (exit 1 if it is gone)
  fallow spindown status --state /run/fallow/spindown.json --json
      the same as JSON, from another status file")]
pub struct StatusArgs {
    /// The daemon's status file. [default: /run/fallow/spindown.json]
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,

    /// Print it as JSON.
    #[arg(long)]
    pub json: bool,
}

fn bad(e: impl std::fmt::Display) -> anyhow::Error {
    BadInput(e.to_string()).into()
}

/// Refuse the status file and the log where writing them would destroy
/// something (fallow_core::outpath): an input (--config, --power, a DEV
/// path), a device node, a FIFO, a directory, a file fallow did not write
/// (without --overwrite), or each other.
fn check_outputs(
    args: &SpindownArgs,
    inputs: &[PathBuf],
    state: &Path,
    log: Option<&Path>,
) -> Result<()> {
    let mut guard = args.overwrite.guard(inputs.iter().map(PathBuf::as_path));
    crate::atomic::check(&guard, state, OutputKind::SpindownStatus, "--state")?;
    if let Some(log) = log {
        guard.add_input(state);
        crate::atomic::check(&guard, log, OutputKind::SpindownLog, "--log")?;
        if log == state {
            return Err(bad(format!(
                "--log {}: is also the --state file; give them different paths",
                log.display()
            )));
        }
    }
    Ok(())
}

/// The daemon's settings, from the flags and the config file (read
/// again on SIGHUP), with the outputs checked: the config, where the
/// status goes, the log's path and the metrics address.
struct Settings {
    cfg: SpindownConfig,
    log: Option<PathBuf>,
    metrics: Option<String>,
}

fn settings(args: &SpindownArgs) -> Result<Settings> {
    let flags = SpindownFlags {
        devs: args.devs.clone(),
        policies: args.policies.clone(),
        max_spinups: args.max_spinups.clone(),
        dry_run: args.dry_run,
        poll: args.poll.clone(),
        power: args.power.clone(),
        config: args.config.clone(),
        log: args.log.clone(),
        state: args.state.clone(),
        metrics: args.metrics.clone(),
        jobs: args.job.clone(),
        job_every: args.job_every.clone(),
        job_deadline: args.job_deadline.clone(),
        duration: args.duration.clone(),
    };
    let r = flags.resolve().map_err(bad)?;
    for w in &r.warnings {
        eprintln!("fallow: {w}");
    }
    let state = r.config.state_file.clone().unwrap_or_default();
    check_outputs(args, &r.inputs, &state, r.log.as_deref())?;
    if let Some(dir) = state.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the directory of {}", state.display()))?;
    }
    Ok(Settings {
        cfg: r.config,
        log: r.log,
        metrics: r.metrics,
    })
}

/// Run `fallow spindown`.
pub fn run(args: SpindownArgs) -> Result<()> {
    match args.action {
        Some(SpindownAction::Status(s)) => return status(s),
        Some(SpindownAction::Units(u)) => return units(u),
        None => {}
    }
    let Settings {
        cfg,
        log: log_path,
        metrics,
    } = settings(&args)?;
    let state_path = cfg.state_file.clone();
    let mut daemon = Daemon::new(cfg).map_err(|e| {
        if e.is_bad_input() {
            bad(e)
        } else {
            anyhow::Error::from(e)
        }
    })?;
    let _server = match &metrics {
        Some(addr) => {
            let m = fallow_metrics::SpindownMetrics::new();
            let server = m.serve(addr).map_err(bad)?;
            eprintln!("fallow: metrics at http://{}/metrics", server.addr());
            daemon.set_status_hook(Box::new(move |s: &Status| export(&m, s)));
            Some(server)
        }
        None => None,
    };
    let open_log = |p: &Path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| bad(format!("--log {}: {e}", p.display())))
    };
    // shared with the reload, which opens it again (after logrotate)
    let log = std::cell::RefCell::new(match &log_path {
        Some(p) => Some(open_log(p)?),
        None => None,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        // SIGHUP reloads the settings and reopens the log (a logrotate
        // HUP used to stop the daemon for good under Restart=on-failure)
        let flag = if sig == signal_hook::consts::SIGHUP {
            &hup
        } else {
            &stop
        };
        signal_hook::flag::register(sig, Arc::clone(flag)).context("installing signal handlers")?;
        // and end the daemon's sleep, which on an idle disk lasts until
        // its next deadline
        signal_hook::low_level::pipe::register(sig, daemon.stop_handle()?)
            .context("installing signal handlers")?;
    }
    // The log in use and its path; a reload opens the log it names (the
    // same path after logrotate, or a new one: checked by the output
    // guard in `settings`) and the `reloaded` event switches to it when
    // the reload is applied (a refused one keeps the old log, reopened
    // if its path is unchanged), so that event is the new log's first line.
    let log_path = std::cell::RefCell::new(log_path);
    type Pending = (Option<PathBuf>, Option<std::fs::File>);
    let pending_log: std::cell::RefCell<Option<Pending>> = std::cell::RefCell::new(None);
    let shown = |p: &Option<PathBuf>| {
        p.as_ref()
            .map_or("none".into(), |p| p.display().to_string())
    };
    let mut reload = || -> std::result::Result<(SpindownConfig, Vec<String>), String> {
        let s = settings(&args).map_err(|e| format!("{e:#}"))?;
        let mut notes = Vec::new();
        let file = match &s.log {
            Some(p) => Some(open_log(p).map_err(|e| format!("{e:#}"))?),
            None => None,
        };
        let old = log_path.borrow().clone();
        if s.log != old {
            notes.push(format!("log {} (was {})", shown(&s.log), shown(&old)));
        }
        // refused parts, said: the status file and the metrics server
        // are the daemon's identity to `status` and to Prometheus
        if s.cfg.state_file != state_path {
            notes.push(format!(
                "state NOT changed: still {} (a new status path takes a restart)",
                shown(&state_path)
            ));
        }
        if s.metrics != metrics {
            notes.push(format!(
                "metrics NOT changed: still {} (a new address takes a restart)",
                metrics.as_deref().unwrap_or("none")
            ));
        }
        *pending_log.borrow_mut() = Some((s.log, file));
        Ok((s.cfg, notes))
    };
    let mut log_err = None;
    let final_status =
        daemon.run_reloading(&stop, Some((&hup, &mut reload)), &mut |e: &Event| {
            if let EventKind::Reloaded { applied, .. } = &e.kind {
                if let Some((path, file)) = pending_log.borrow_mut().take() {
                    if *applied || path == *log_path.borrow() {
                        *log.borrow_mut() = file;
                        *log_path.borrow_mut() = path;
                    }
                }
            }
            eprintln!("fallow: {}", describe(e));
            if let Some(f) = &mut *log.borrow_mut() {
                let line = crate::output::json_line(e).unwrap_or_default();
                if let Err(err) = writeln!(f, "{line}") {
                    log_err.get_or_insert(err);
                }
            }
        })?;
    if let Some(e) = log_err {
        return Err(anyhow::Error::from(e).context("writing --log"));
    }
    if args.json {
        crate::output::print(&crate::output::json_text(&final_status)?)?;
    } else {
        print_status(&final_status);
    }
    Ok(())
}

fn export(m: &fallow_metrics::SpindownMetrics, s: &Status) {
    for d in &s.disks {
        let e = &d.energy_j;
        m.set_disk(
            &d.disk,
            &fallow_metrics::DiskFigures {
                spinups: d.spinups,
                spindowns: d.spindowns,
                state_seconds: vec![
                    ("busy".into(), d.time_s.busy),
                    ("idle".into(), d.time_s.idle),
                    ("down".into(), d.time_s.down),
                ],
                energy_joules: vec![
                    ("busy".into(), e.busy),
                    ("idle".into(), e.idle),
                    ("standby".into(), e.standby),
                    ("power_cycle".into(), e.power_cycle),
                ],
                always_on_joules: e.always_on,
                budget_per_day: d.max_spinups_per_day.unwrap_or(0.0).floor() as u32,
                budget_used_24h: d.spindowns_24h as u64,
                budget_held: d.budget_held,
                wakes: d
                    .wakers
                    .iter()
                    .map(|w| {
                        (
                            w.process.clone(),
                            w.cgroup.clone().unwrap_or_default(),
                            w.wakes,
                        )
                    })
                    .collect(),
                spinups_saved: d.spinups_saved as u64,
                events: d.events_unavailable.is_none(),
            },
        );
    }
}

fn describe(e: &Event) -> String {
    let what = match &e.kind {
        EventKind::Start {
            source,
            actuator,
            policy,
            power_state,
            max_spinups,
            events_unavailable,
            mounted_tracefs,
            poll_s,
        } => format!(
            "watching {} ({}{}), spun down by {}, policy {}{}; now {}",
            e.disk,
            source,
            match (events_unavailable, mounted_tracefs) {
                (Some(why), _) => format!(
                    "; no I/O events, so counters polled every {poll_s} s: {why}"
                ),
                (None, true) => format!(
                    "; tracefs was not mounted: mounted it at {}",
                    fallow_live::spindown::target::TRACEFS_MOUNT
                ),
                (None, false) => String::new(),
            },
            actuator,
            policy,
            max_spinups.as_deref().map_or(String::new(), |n| format!(", at most {n} spin-ups")),
            power_state
        ),
        EventKind::SpinDown {
            idle_s,
            timeout_s,
            dry_run,
        } => format!(
            "{}{}: idle {idle_s:.1} s (timeout {timeout_s:.1} s)",
            if *dry_run { "would spin down " } else { "spun down " },
            e.disk
        ),
        EventKind::SpinDownSkipped { in_flight } => format!(
            "{}: not spun down: {in_flight} request(s) in flight",
            e.disk
        ),
        EventKind::BudgetHeld {
            policy_timeout_s,
            timeout_s,
            used_in_window,
            max_spinups,
        } => format!(
            "{}: budget: {used_in_window} spin-downs in the window of {max_spinups}; timeout lengthened from {policy_timeout_s:.1} s to {timeout_s:.1} s (logged once until the next spin-down)",
            e.disk
        ),
        EventKind::Wake {
            idle_s,
            down_s,
            issuers,
            unattributed,
            dry_run,
        } => format!(
            "{}{} after {down_s:.1} s down (idle {idle_s:.1} s) by {}",
            e.disk,
            if *dry_run { " would have spun up" } else { " spun up" },
            if issuers.is_empty() {
                format!("unknown ({})", unattributed.as_deref().unwrap_or("no issuer seen"))
            } else {
                issuers
                    .iter()
                    .map(|i| match &i.cgroup {
                        Some(c) => format!("{}[{}] in {c}", i.comm, i.pid),
                        None => format!("{}[{}]", i.comm, i.pid),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        EventKind::JobStart { command, trigger } => {
            format!("{}: job `{command}` started ({trigger:?})", e.disk)
        }
        EventKind::JobEnd {
            command,
            exit_code,
            duration_s,
            stopped,
        } => format!(
            "{}: job `{command}` {} after {duration_s:.1} s, exit {}",
            e.disk,
            if *stopped { "stopped (the daemon is stopping)" } else { "ended" },
            exit_code.map_or("by signal".into(), |c| c.to_string())
        ),
        EventKind::Reloaded { message, applied } => format!(
            "{}: {}: {message}",
            e.disk,
            if *applied {
                "settings reloaded"
            } else {
                "settings NOT reloaded (the old ones stay)"
            }
        ),
        EventKind::Error { message } => format!("{}: error: {message}", e.disk),
    };
    format!("[{:.1} s] {what}", e.t_s)
}

fn print_status(s: &Status) {
    println!(
        "fallow spindown (pid {}), up {:.0} s{}, {:.3} s CPU ({:.3} % of a core); as of {}",
        s.pid,
        s.uptime_s,
        if s.dry_run { ", dry run" } else { "" },
        s.cpu_s,
        if s.uptime_s > 0.0 {
            s.cpu_s / s.uptime_s * 100.0
        } else {
            0.0
        },
        s.updated
    );
    for d in &s.disks {
        let e = &d.energy_j;
        if let Some(why) = &d.events_unavailable {
            println!("{}: no I/O events, counters polled: {why}", d.disk);
        }
        println!(
            "{}: {} ({}), policy {}, {}",
            d.disk,
            d.state,
            d.timeout_s
                .map_or("no timeout running".into(), |t| format!("timeout {t:.1} s")),
            d.policy,
            d.actuator
        );
        println!(
            "  spin-ups {}, spin-downs {}{}",
            d.spinups,
            d.spindowns,
            match &d.max_spinups {
                Some(n) => format!(
                    "; budget {n}, {} in its window ({} in 24 h), ran out {} time(s)",
                    d.spindowns_in_window, d.spindowns_24h, d.budget_held
                ),
                None => String::new(),
            }
        );
        println!(
            "  time: busy {:.1} s, idle {:.1} s, down {:.1} s; energy {:.1} J vs {:.1} J always on ({:+.1} %)",
            d.time_s.busy,
            d.time_s.idle,
            d.time_s.down,
            e.total,
            e.always_on,
            if e.always_on > 0.0 {
                (e.total / e.always_on - 1.0) * 100.0
            } else {
                0.0
            }
        );
        if !d.wakers.is_empty() {
            println!(
                "  top wakers, last 24 h ({} since the start):",
                d.wakers.iter().map(|w| w.wakes).sum::<u64>()
            );
            for w in d.wakers_24h.iter().take(10) {
                println!(
                    "    {:>5}  {}{}",
                    w.wakes,
                    w.process,
                    w.cgroup
                        .as_deref()
                        .map_or(String::new(), |c| format!(" ({c})"))
                );
            }
        }
        for j in &d.jobs {
            println!(
                "  job `{}`: started {:.1} s ({}), {}",
                j.command,
                j.started_s,
                j.trigger,
                match (j.ended_s, j.exit_code) {
                    (None, _) => "running".into(),
                    (Some(t), _) if j.stopped => {
                        format!("stopped at {t:.1} s when the daemon stopped (not finished)")
                    }
                    (Some(t), c) => format!(
                        "ended {t:.1} s, exit {}",
                        c.map_or("by signal".into(), |c| c.to_string())
                    ),
                }
            );
        }
        if !d.jobs.is_empty() {
            println!("  spin-ups saved by jobs: {}", d.spinups_saved);
        }
    }
}

/// The systemd service of `fallow spindown` for the binary `exec`
/// (program and leading arguments), reading `config`, allowed `devices`.
fn unit_text(exec: &str, config: &Path, devices: &[String]) -> String {
    let allow = if devices.is_empty() {
        "DeviceAllow=block-sd rw\n".to_string()
    } else {
        devices
            .iter()
            .map(|d| format!("DeviceAllow={d} rw\n"))
            .collect()
    };
    format!(
        "{generator} {version} (fallow spindown units)
# Spin disks down by fallow's policies within a spin-up budget, log every
# wake, run maintenance jobs when the disks spin anyway.
#   systemctl daemon-reload && systemctl enable --now fallow-spindown
#   fallow spindown status; journalctl -u fallow-spindown -f
#   systemctl reload fallow-spindown    # SIGHUP: the config is read again

[Unit]
Description=fallow: spin disks down within a spin-up budget
Documentation=man:fallow-spindown(1)
After=local-fs.target sys-kernel-tracing.mount
Wants=sys-kernel-tracing.mount

[Service]
Type=exec
ExecStart={exec} spindown --config {config} --state /run/fallow/spindown.json --log /var/log/fallow/spindown.jsonl
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=30s
Nice=5
RuntimeDirectory=fallow
RuntimeDirectoryPreserve=yes
StateDirectory=fallow
LogsDirectory=fallow
ConfigurationDirectory=fallow

DynamicUser=yes
SupplementaryGroups=disk
CapabilityBoundingSet=CAP_SYS_RAWIO CAP_PERFMON
AmbientCapabilities=CAP_SYS_RAWIO CAP_PERFMON
NoNewPrivileges=yes
DevicePolicy=closed
{allow}ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateMounts=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
RemoveIPC=yes
KeyringMode=private
UMask=0077
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
IPAddressDeny=any
IPAddressAllow=localhost
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged @mount @swap @reboot @module @obsolete @clock @debug @cpu-emulation
SystemCallErrorNumber=EPERM

[Install]
WantedBy=multi-user.target
",
        generator = fallow_core::outpath::UNIT_GENERATOR,
        version = env!("CARGO_PKG_VERSION"),
        config = config.display(),
    )
}

/// `fallow spindown units`: the service for this binary, through the
/// output guard (never the binary, the config, a device node, a FIFO or a
/// unit someone else wrote).
fn units(a: UnitsArgs) -> Result<()> {
    let me = crate::invocation::relaunch()?;
    let program = me.program.canonicalize().unwrap_or(me.program.clone());
    let mut exec = vec![program.display().to_string()];
    exec.extend(
        me.leading_args
            .iter()
            .map(|a| a.to_string_lossy().into_owned()),
    );
    if exec.iter().any(|w| w.contains(char::is_whitespace)) {
        return Err(bad(format!(
            "the fallow executable's path `{}` holds white space, which a unit's ExecStart cannot take unquoted",
            exec.join(" ")
        )));
    }
    let guard = a.overwrite.guard([program.as_path(), a.config.as_path()]);
    crate::atomic::check(&guard, &a.output, OutputKind::SystemdUnit, "--output")?;
    let text = unit_text(&exec.join(" "), &a.config, &a.device);
    crate::atomic::write_atomically(&a.output, |w| Ok(w.write_all(text.as_bytes())?))?;
    eprintln!(
        "fallow: wrote {} (ExecStart {} spindown --config {})",
        a.output.display(),
        exec.join(" "),
        a.config.display()
    );
    Ok(())
}

fn status(a: StatusArgs) -> Result<()> {
    let path = a.state.unwrap_or_else(|| PathBuf::from(DEFAULT_STATE));
    let s = Status::read(&path).map_err(|e| {
        bad(format!(
            "{e} (is `fallow spindown` running? its --state names the file)"
        ))
    })?;
    // the file outlives the daemon: say so rather than show a stopped
    // daemon's last status as if it ran (exit 1)
    if let Err(why) = s.daemon_alive() {
        anyhow::bail!(
            "fallow spindown is not running: {why}; {} is its last status, written {}",
            path.display(),
            s.updated
        );
    }
    if a.json {
        crate::output::print(&crate::output::json_text(&s)?)?;
    } else {
        print_status(&s);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use fallow_live::spindown::settings::{DEFAULT_JOB_DEADLINE, DEFAULT_JOB_EVERY, DEFAULT_STATE};
    use fallow_live::spindown::DEFAULT_POLICY;

    /// The defaults `--help` states are the library's.
    #[test]
    fn help_states_the_librarys_defaults() {
        use clap::Args as _;
        let mut cmd = super::SpindownArgs::augment_args(clap::Command::new("spindown"));
        let help = cmd.render_long_help().to_string();
        for d in [
            DEFAULT_POLICY,
            DEFAULT_STATE,
            DEFAULT_JOB_EVERY,
            DEFAULT_JOB_DEADLINE,
        ] {
            assert!(help.contains(&format!("[default: {d}]")), "{d} in\n{help}");
        }
    }
}
