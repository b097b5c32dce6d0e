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
//! (`--tuned`: its best policy), then the defaults, as for `fallow scrub`
//! (`fallow_live::settings`); the session is `fallow_live::run::RunSession`.
//! This file parses flags, prints, and writes the report.

use crate::human::{bytes, count, pct, secs};
use crate::{exit_code_of, message, BadInput};
use anyhow::{Context, Result};
use clap::Args;
use fallow_live::run::{
    guard, native_alternative, FreezerKind, GuardianSpec, RunNote, RunOutcome, RunSession,
    RunSignals, RunStats,
};
use fallow_live::settings::{Command, Flags, Settings};
use fallow_live::{DriveReport, MonitorStats};
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Arguments of `fallow run`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Examples:
  fallow run --device sda -- rsync -a /data/ /backup/data/
      copy in the disk's idle time: paused within a slice of any other I/O on sda
  fallow run --device sda --policy fixed-wait:t=500ms --slice 50ms -- restic backup /data
      wait for 500 ms of quiet before resuming, run 50 ms at a time
  fallow run -v --device sda -- rsync -a /data/ /backup/data/
      end with the monitor's line: `events` (woken by the kernel's block tracepoints,
      the command's bios told apart by its cgroup v2) or `poll (why)`, and its CPU
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

    /// Hold the FG's slowdown within this budget with no tune result
    /// (`5%`: mean slowdown; `1ms`: mean added delay per FG request): the
    /// policy's knob is refitted live from what the monitor sees, starting
    /// at its least aggressive value, and the FG slowdown is measured and
    /// backed off from (docs/live.md, "Holding a budget"). Also
    /// `FALLOW_BUDGET` and the config's `budget`. Not with --tuned.
    #[arg(long, value_name = "BUDGET", conflicts_with = "tuned")]
    pub budget: Option<String>,

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
    #[arg(long, value_name = "FILE", help_heading = crate::atomic::OUTPUT_FILES)]
    pub report: Option<PathBuf>,

    #[command(flatten)]
    pub out: crate::atomic::OverwriteArg,

    /// No lines of fallow's own on standard error, except errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// At the end, also the monitor's line: which monitor ran (`events`,
    /// or `poll` and why not events), its samples, wakeups and CPU cost,
    /// and how the command's own I/O was told apart.
    #[arg(long, short = 'v')]
    pub verbose: bool,

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

use crate::args::parse_duration;

/// The flags as fallow-live's [`Flags`]; [`Settings::resolve`] does the rest.
fn settings(a: &RunArgs) -> Result<Settings> {
    let flags = Flags {
        config: a.config.clone(),
        policy: a.policy.clone(),
        tuned: a.tuned.clone(),
        budget: a.budget.clone(),
        interval_ns: a.interval,
        seed: a.seed,
        metrics: a.metrics.clone(),
        device: a.device.clone(),
        net: a.net.clone(),
        netns: a.netns.clone(),
        freezer: a.freezer.clone(),
        slice_ns: a.slice,
        report: a.report.clone(),
        ..Flags::default()
    };
    Settings::resolve(Command::Run, &flags).map_err(live)
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
    io_accounting: String,
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
    /// Such commands are now refused (docs/run.md), so this is null unless
    /// the library's session recognises more than the CLI's check.
    native_alternative: Option<String>,
    run: RunStats,
    driver: DriveReport,
    monitor: MonitorStats,
    /// The bios on the watched disk told apart by cgroup (the event
    /// monitor; null under the poller).
    bios: Option<fallow_live::monitor::BioCounts>,
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
    refuse_kernel_run(&args.command)?;
    let s = settings(&args)?;
    check_report_path(&args, &s)?;
    let signals = install_signal_handlers()?;
    let quiet = args.quiet;
    let mut note = |n: RunNote| say(quiet, &note_line(n));
    let guardian = Some(crate::invocation::guardian()?);
    let mut session = RunSession::open(
        &s,
        &args.command,
        guardian,
        &signals,
        &mut note,
        frozen_io_warning(quiet),
    )
    .map_err(live)?;
    let exporter = match &s.metrics() {
        Some(at) => {
            let stats = session.shared_stats();
            match crate::metrics_export::Exporter::start(at, session.driver_mut(), stats) {
                Ok(e) => Some(e),
                Err(e) => {
                    // the command has not run yet
                    session.abort();
                    return Err(e);
                }
            }
        }
        None => None,
    };
    if let (Some(e), Some(p)) = (&exporter, session.frozen_io_probe()) {
        e.follow_frozen_io(p);
    }
    for line in session.started(&secs(s.slice_ns as f64 / 1e9)) {
        say(args.quiet, &line);
    }
    if let Some(b) = session.driver_mut().budget_report() {
        let line = crate::scrub_out::budget_start_line(&b, s.budget_from().as_deref());
        say(args.quiet, line.trim_start_matches("fallow: "));
    }
    if let Some(a) = exporter.as_ref().and_then(|e| e.addr()) {
        say(args.quiet, &format!("metrics at http://{a}/metrics"));
    }
    let out = session.run(&signals, &mut note).map_err(live)?;
    say_outcome(&args, &out);
    if let Some(path) = &s.report {
        write_report(path, &args, &s, &out)?;
    }
    Ok(out.code)
}

/// Kernel-run maintenance (docs/run.md, "Work it cannot pause"): freezing
/// the command pauses nothing, so fallow would run it unpaused and count
/// the device's reads as frozen time. Refused before anything runs, with
/// the native executor's exact command.
fn refuse_kernel_run(command: &[OsString]) -> Result<()> {
    if let Some(n) = native_alternative(command) {
        return Err(BadInput(format!(
            "{n}. `fallow run` freezes the command, which pauses nothing of the work the kernel does; nothing was run"
        ))
        .into());
    }
    Ok(())
}

/// The report must not replace an input or a device, found out at the end.
fn check_report_path(args: &RunArgs, s: &Settings) -> Result<()> {
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
    Ok(())
}

/// Signals: a flag per kind; any of them stops the driver.
fn install_signal_handlers() -> Result<RunSignals> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::flag;
    let signals = RunSignals::default();
    let reg = |r: std::io::Result<signal_hook::SigId>| r.context("cannot install a signal handler");
    // a second Ctrl-C ends fallow at once (the command was thawed at the first)
    reg(flag::register_conditional_shutdown(
        SIGINT,
        130,
        signals.int.clone(),
    ))?;
    reg(flag::register(SIGINT, signals.int.clone()))?;
    reg(flag::register(SIGINT, signals.stop.clone()))?;
    for (sig, f) in [(SIGTERM, &signals.term), (SIGHUP, &signals.hup)] {
        reg(flag::register(sig, f.clone()))?;
        reg(flag::register(sig, signals.stop.clone()))?;
    }
    Ok(signals)
}

/// The line the session's note `n` is said as.
fn note_line(n: RunNote) -> String {
    match n {
        RunNote::Text(t) => t,
        RunNote::MonitorFailed(e) => format!("the monitor failed at the end: {e}"),
        RunNote::LeftRunning {
            signal,
            pid,
            running_s,
        } => format!(
            "ended by signal {signal}: the command (pid {pid}) runs on, unpaused, after {} of running",
            secs(running_s)
        ),
        RunNote::Interrupting => "interrupted: passing SIGINT on to the command".into(),
        RunNote::LeftToGuardian(why) => {
            format!("left to the guardian (a child of the command still runs): {why}")
        }
    }
}

/// The warning said at once, from the watch's thread, while the driver
/// waits, when the frozen command still reads (a command fallow recognises
/// as kernel-run was refused by [`refuse_kernel_run`]; this is one it does
/// not, e.g. a script that starts a scrub).
fn frozen_io_warning(quiet: bool) -> fallow_live::run::OnFrozenIo {
    let why = "its work runs outside its processes (in the kernel), where freezing does not reach";
    Box::new(move |n: &fallow_live::run::FrozenIoNotice| {
        say(
            quiet,
            &format!(
                "warning: frozen, the command still read {} in {}: freezing does not pause its I/O; {why}. Its time frozen but reading is reported as frozen_io_s, not as frozen",
                bytes(n.bytes),
                secs(n.after_freeze_s)
            ),
        );
    })
}

/// The closing lines: how the command ended, the budget's lines and, with
/// `--verbose`, the monitor's.
fn say_outcome(args: &RunArgs, out: &RunOutcome) {
    let (stats, mon, drive) = (&out.stats, &out.monitor, &out.drive);
    if let Some(c) = out.exit_code {
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
                "command exited with status {c} after {}: ran {} ({}), frozen {}{leaked}, {} thaws; {} FG busy periods on {}; monitor ({}) CPU {} of a core",
                secs(drive.wall_s),
                secs(stats.running_s),
                pct(stats.running_s
                    / (stats.running_s + stats.frozen_s + stats.frozen_io_s).max(1e-9)),
                secs(stats.frozen_s),
                count(stats.thaws),
                count(mon.busy_periods),
                mon.source,
                mon.kind_label(),
                pct(mon.cpu_fraction()),
            ),
        );
    }
    for line in crate::scrub_out::budget_lines(drive).lines() {
        say(args.quiet, line.trim_start());
    }
    if args.verbose {
        say(
            args.quiet,
            &format!(
                "monitor ({}): {} samples at {}, {} wakeups, CPU {} ({:.2} % of a core, {} per sample), {} late; the command's I/O told apart by {}{}",
                mon.kind_label(),
                count(mon.samples),
                secs(mon.interval_s),
                count(mon.wakeups),
                secs(mon.cpu_s),
                mon.cpu_fraction() * 100.0,
                secs(mon.cpu_per_sample_s()),
                count(mon.late_samples),
                out.io_accounting,
                out.bios.map_or(String::new(), |b| format!(
                    ": {} bios the command's, {} FG, {} kernel writes left to the counters, {} lost",
                    count(b.command_bios),
                    count(b.foreground_bios),
                    count(b.kernel_write_bios),
                    count(b.lost)
                )),
            ),
        );
    }
}

/// Write the JSON report of the run to `path`.
fn write_report(path: &Path, args: &RunArgs, s: &Settings, out: &RunOutcome) -> Result<()> {
    let report = Report {
        generator: format!("fallow {}", env!("CARGO_PKG_VERSION")),
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        pid: out.pid,
        freezer: out.freezer,
        cgroup: out.cgroup.clone(),
        io_accounting: out.io_accounting.clone(),
        policy: s.policy.clone(),
        policy_from: s.policy_from(),
        netns: s.netns.clone(),
        slice_s: s.slice_ns as f64 / 1e9,
        end: out.end,
        exit_code: out.exit_code,
        native_alternative: out.native_alternative.clone(),
        run: out.stats.clone(),
        driver: out.drive.clone(),
        monitor: out.monitor.clone(),
        bios: out.bios,
    };
    crate::atomic::write_atomically(path, |w| {
        serde_json::to_writer_pretty(&mut *w, &report)?;
        writeln!(w)?;
        Ok(())
    })
    .with_context(|| format!("cannot write the report {}", path.display()))
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
    for r in &report.retried {
        eprintln!("fallow __guardian: {r}");
    }
    for r in &report.released {
        eprintln!("fallow __guardian: fallow is gone; done: {}", r.to_arg());
    }
    for s in &report.said {
        eprintln!("fallow __guardian: {s}");
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
    use fallow_live::settings::Disk;
    use std::path::Path;

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

    /// A named disk and the file's key that named it.
    fn named(spec: &str, from: Option<String>) -> (Disk, Option<String>) {
        (Disk::Named(spec.into()), from)
    }

    /// The disk of `s`, and the file's key that named it.
    fn disk(s: &Settings) -> (Disk, Option<String>) {
        (s.disk.clone(), s.provenance.from_file("device"))
    }

    #[test]
    fn defaults_without_a_config() {
        let s = of(&[]).unwrap();
        assert_eq!(
            (s.policy.as_str(), s.policy_from()),
            ("fixed-wait", "default")
        );
        assert_eq!(s.disk, Disk::CurrentDir);
        assert_eq!(
            (s.slice_ns, s.interval_ns, s.seed),
            (20_000_000, 1_000_000, 1)
        );
        assert_eq!((s.freezer, &s.report, s.metrics()), (None, &None, None));
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
        assert_eq!(
            (s.policy.as_str(), s.policy_from()),
            ("aggressive", "config")
        );
        assert_eq!(s.policy_source(), file("[live] policy"));
        assert_eq!(disk(&s), named("/run/emu.stat", file("[live] monitor")));
        assert_eq!(
            (s.slice_ns, s.interval_ns, s.seed),
            (50_000_000, 2_000_000, 7)
        );
        assert_eq!(s.freezer, Some(FreezerKind::Signal));
        assert_eq!(s.netns.as_deref(), Some("bg"));
        assert_eq!(s.report, Some(d.path().join("r.json")));
        assert_eq!(s.metrics().unwrap().addr, "127.0.0.1:9464");
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
            (s.policy.as_str(), s.policy_from()),
            ("fixed-wait:t=1s", "--policy")
        );
        assert_eq!(disk(&s), named("sda", None));
        assert_eq!(
            (s.slice_ns, s.interval_ns, s.seed),
            (30_000_000, 5_000_000, 3)
        );
        assert_eq!(s.freezer, Some(FreezerKind::Cgroup2));
        assert_eq!(s.netns.as_deref(), Some("other"));
        assert_eq!(s.report, Some(PathBuf::from("x.json")));
        assert_eq!(s.metrics().unwrap().from, "--metrics");
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
        assert_eq!(s.policy_source(), Some(format!("{g}: [run] policy")));
        assert_eq!(disk(&s), named("vda", Some(format!("{g}: [run] device"))));
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
            (s.net.as_deref(), s.provenance.from_file("net")),
            (Some("eth0"), Some(format!("{}: [run] net", p.display())))
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
        assert_eq!(disk(&s), named("sda", None));
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
            (s.policy.as_str(), s.policy_from()),
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
            (s.policy.as_str(), s.policy_from()),
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
            (s.policy.as_str(), s.policy_from()),
            ("fixed-wait:t=100ms", "config")
        );
        assert_eq!(disk(&s), named("sda", Some(format!("{ex}: [run] device"))));
        assert_eq!((s.slice_ns, s.interval_ns), (20_000_000, 1_000_000));
        assert_eq!(s.metrics().unwrap().addr, "127.0.0.1:9464");
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
