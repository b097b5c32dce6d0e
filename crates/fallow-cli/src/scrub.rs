//! `fallow scrub TARGET`: verify a block device or file read-only in the
//! idle time a policy picks, with a checkpoint that `--resume` continues
//! after a crash, `kill -9` or reboot (see docs/live.md).
//!
//! Settings come from flags, then a TOML config (`--config`: `[live]`,
//! `[scrub]` and `[metrics]` tables), then a `fallow tune --json` result
//! (`--tuned`: its best policy and request size), then the defaults, by
//! [`Settings::resolve`] (fallow-live); the session is fallow-live's
//! [`ScrubSession`]. With `--resume`, order, regions and request size
//! default to the checkpoint's. This file parses flags and prints.

use crate::human::{bytes, count, num, secs};
use crate::scrub_out::{self, Doc, ProgressLines, Signals};
use crate::BadInput;
use anyhow::Result;
use clap::{Args, ValueEnum};
use fallow_live::scrub::{Resume, ScrubEvent, ScrubPlan, ScrubSession, VerifyMode};
use fallow_live::settings::{Command, Flags, OrderChoice, Settings};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Arguments of `fallow scrub`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow scrub /dev/sdb --resume
      verify sdb with the default policy (fixed-wait:t=100ms) and 1 MiB requests, continuing
      the last run's checkpoint if there is one
  fallow scrub /dev/sdb --resume --tuned tune.json --order staggered --regions 128
  fallow scrub /dev/sdb --resume --max-rate 64MiB/s --window 01:00-06:00 --json
  fallow scrub disk.img --policy aggressive --size 4MiB --checkpoint disk.ck.json
  fallow scrub btrfs:/mnt/data --policy fixed-wait:t=200ms --max-rate 100MiB/s
      drive the kernel's btrfs scrub: each BG request lets it run for a slice (--slice, or
      the request size over its measured rate) and on to the next chunk boundary, where
      `btrfs scrub cancel` pauses it without losing work; `btrfs scrub resume` continues.
      Every member device is watched; --json adds errors_corrected, errors_uncorrectable and
      btrfs's own counters (native). Tested live on loop devices only (not on an HDD).
  fallow scrub fstrim:/srv --size 1GiB --minlen 64KiB --resume     (or: fallow trim /srv)
      FITRIM one range of --size per BG request; the next offset is checkpointed.
  fallow scrub md:/dev/md0 --size 64MiB --resume        (--action repair to rewrite mismatches)
      an md check by [sync_min, sync_max) windows of --size, one per BG request; held at
      sync_max between them; mismatch_cnt in native; the next sector is checkpointed.
  fallow scrub zfs:tank --policy fixed-wait:t=500ms --resume
      a ZFS scrub in slices, paused by `zpool scrub -p`, resumed by `zpool scrub`; progress
      from `zpool status -j -p` (OpenZFS >= 2.3) or its text; every leaf vdev's disk watched.
      md and zfs are NOT tested on a live array or pool (this machine's kernel has neither):
      only against a recorded sysfs tree and a fake `zpool` printing OpenZFS's formats.
      docs/native.md lists every native kind and what was tested live.

The target is opened read-only and never written, and no output may be the target or another
input, a device node, a FIFO or a directory; an existing --checkpoint that is not a fallow
checkpoint (or --log that is not a fallow scrub log) is replaced only with --overwrite
(`fallow scrub disk.img --checkpoint old.json --restart --overwrite`). The checkpoint (default
/var/lib/fallow/scrub/<target>.json for root, else $XDG_STATE_HOME/fallow/scrub/) is replaced
atomically after every request. --json prints target_bytes, scrubbed_bytes, requests,
bad_ranges ([first_byte, last_byte] pairs), elapsed_s, complete, the policy, the monitor's
samples and CPU cost, and the driver's counts; and on stderr, once a second, a progress line
{\"event\":\"progress\",\"schema_version\",\"scrubbed_bytes\",\"target_bytes\",\"pass\",\"rate_bytes_per_s\",\"eta_s\",
\"bad_ranges\",…}. --metrics serves the same as fallow_scrub_* gauges. Stopped by SIGINT, it
saves the checkpoint and exits with status 1; by SIGTERM (systemctl stop), the same with status
0; `--resume` continues.")]
pub struct ScrubArgs {
    /// The block device or file to verify (opened read-only), or a native
    /// job: `btrfs:MOUNT` (a btrfs scrub), `fstrim:MOUNT` (FITRIM by ranges),
    /// `md:/dev/mdX` (an md check by windows), `zfs:POOL` (a ZFS scrub).
    #[arg(value_name = "TARGET")]
    pub target: PathBuf,

    /// BG policy, `NAME[:k=v,…]` (`fallow policies`); `aggressive` scrubs
    /// whenever the device is idle. [default: fixed-wait:t=100ms]
    #[arg(long, short = 'p', value_name = "POLICY")]
    pub policy: Option<String>,

    /// Request (segment) size. [default: 1MiB (64MiB for btrfs: and
    /// fstrim: targets), or the tuned size]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: Option<u64>,

    /// A `fallow tune --json` result: its best policy and request size.
    #[arg(long, value_name = "TUNE.json")]
    pub tuned: Option<PathBuf>,

    /// A TOML config with `[live]`, `[scrub]` and `[metrics]` tables
    /// (docs/live.md); flags override its keys.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Visiting order. [default: sequential, or staggered with --regions]
    #[arg(long, value_enum)]
    pub order: Option<OrderArg>,

    /// Regions of the staggered order (implies --order staggered). [default: 128]
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..))]
    pub regions: Option<u64>,

    /// Rate ceiling, e.g. 64MiB/s.
    #[arg(long, value_name = "RATE")]
    pub max_rate: Option<String>,

    /// Read only in this daily window, local time (`01:00-06:00`; repeat
    /// for several; `22:00-06:00` wraps past midnight).
    #[arg(long = "window", value_name = "HH:MM-HH:MM")]
    pub windows: Vec<String>,

    /// Stop this run after this many bytes; --resume continues.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_bytes: Option<u64>,

    /// Checkpoint file. [default: see below]
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,

    /// Continue the checkpoint's pass (a fresh one if there is no
    /// checkpoint, the next one if it is complete).
    #[arg(long, conflicts_with = "restart")]
    pub resume: bool,

    /// Start a new pass, discarding an unfinished checkpoint.
    #[arg(long)]
    pub restart: bool,

    /// Least time between checkpoint writes (0: after every request, so a
    /// crash repeats at most one request). [default: 0]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub checkpoint_interval: Option<u64>,

    /// Append one JSON line per completed request (first_byte, last_byte,
    /// bad) to this file.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,

    /// Extra attempts of a failing request and of a failing sector. [default: 3]
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,

    /// Verify with SCSI VERIFY through SG_IO (no data transfer) where the
    /// device takes it, else fall back to reads with a message; `required`
    /// refuses to fall back.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "auto", value_name = "auto|required")]
    pub verify_cmd: Option<VerifyCmd>,

    /// Read through the page cache (dropping it around each read) instead of O_DIRECT.
    #[arg(long)]
    pub buffered: bool,

    /// Counters to watch for foreground I/O: `auto` (the target's disk),
    /// `none`, a device name (`sda`) or a file in /sys/block/<dev>/stat
    /// format (an emulated disk's). A device is watched through its block
    /// tracepoints where perf allows, else its stat file is polled
    /// (`FALLOW_MONITOR=poll` forces polling; -v says which). [default: auto]
    #[arg(long, value_name = "auto|none|DEV|FILE")]
    pub monitor: Option<String>,

    /// Monitor sampling interval. [default: 1ms]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<u64>,

    /// Seed of the policy's random stream. [default: 1]
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Print the final report as JSON on stdout (no progress bar).
    #[arg(long)]
    pub json: bool,

    /// Serve Prometheus metrics (FG/BG requests and bytes, collisions,
    /// time in each policy state) at `http://ADDR/metrics`, e.g.
    /// `127.0.0.1:9464`. [default: `[metrics] addr` of --config, if any]
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// Also print the monitor's CPU cost and the driver's counts.
    #[arg(long, short = 'v')]
    pub verbose: bool,

    #[command(flatten)]
    pub out: crate::atomic::OverwriteArg,

    /// btrfs: the least time one BG request lets the scrub run (50ms to
    /// 10s) before it is cancelled at the next chunk boundary; zfs: how
    /// long one BG request lets the scrub run before `zpool scrub -p`.
    /// [default: the request size over the measured scrub rate]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub slice: Option<u64>,

    /// fstrim: FITRIM's minimum free extent to discard (fstrim --minimum).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub minlen: Option<u64>,

    /// md: `check` (count mismatches) or `repair` (rewrite them).
    /// [default: check]
    #[arg(long, value_name = "ACTION")]
    pub action: Option<String>,
}

/// `--order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// Segment after segment.
    Sequential,
    /// Segment i of every region before segment i + 1 (Practical Scrubbing §IV-A).
    Staggered,
}

/// `--verify-cmd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VerifyCmd {
    /// Reads, never SCSI VERIFY.
    Off,
    /// SCSI VERIFY where the device takes it, reads otherwise.
    Auto,
    /// SCSI VERIFY or nothing.
    Required,
}

pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    fallow_live::settings::parse_size(s)
}

use crate::args::parse_duration;

/// The flags as fallow-live's [`Flags`]; [`Settings::resolve`] does the rest.
fn settings(a: &ScrubArgs) -> Result<Settings> {
    let flags = Flags {
        config: a.config.clone(),
        policy: a.policy.clone(),
        tuned: a.tuned.clone(),
        interval_ns: a.interval,
        seed: a.seed,
        metrics: a.metrics.clone(),
        monitor: a.monitor.clone(),
        size: a.size,
        order: a.order.map(|o| match o {
            OrderArg::Sequential => OrderChoice::Sequential,
            OrderArg::Staggered => OrderChoice::Staggered,
        }),
        regions: a.regions,
        max_rate: a.max_rate.clone(),
        windows: a.windows.clone(),
        max_bytes: a.max_bytes,
        checkpoint: a.checkpoint.clone(),
        checkpoint_interval_ns: a.checkpoint_interval,
        log: a.log.clone(),
        retries: a.retries,
        verify: a.verify_cmd.map(|v| match v {
            VerifyCmd::Off => VerifyMode::Off,
            VerifyCmd::Auto => VerifyMode::Auto,
            VerifyCmd::Required => VerifyMode::Required,
        }),
        buffered: a.buffered,
        ..Flags::default()
    };
    Settings::resolve(Command::Scrub, &flags).map_err(live_err)
}

/// A library error as an anyhow error with the right exit code.
pub(crate) fn live_err(e: fallow_live::Error) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        anyhow::Error::new(e)
    }
}

/// Run `fallow scrub`.
pub fn run(args: ScrubArgs) -> Result<()> {
    let s = settings(&args)?;
    // btrfs:MOUNT, fstrim:MOUNT: the tool's own control (crate::native_scrub)
    if let Some(t) = fallow_live::native::NativeTarget::parse(&args.target.to_string_lossy())
        .map_err(live_err)?
    {
        return crate::native_scrub::run(&args, t, s);
    }
    let plan = ScrubPlan {
        target: args.target.clone(),
        policy: s.policy.clone(),
        policy_from: s.policy_from.to_string(),
        size: s.size,
        tuned_size: s.tuned_size,
        order: s.order,
        bg_service: s.bg_service,
        seed: s.seed,
        max_rate: s.max_rate,
        windows: s.windows.clone(),
        max_bytes: s.max_bytes,
        checkpoint: s.checkpoint.clone(),
        checkpoint_interval_ns: s.checkpoint_interval_ns,
        log: s.log.clone(),
        retries: s.retries,
        verify: s.verify,
        buffered: s.buffered,
        monitor: s.monitor.clone(),
        interval_ns: s.interval_ns,
        resume: if args.resume {
            Resume::Yes
        } else if args.restart {
            Resume::Restart
        } else {
            Resume::No
        },
        // the target is added by the scrubber
        outputs: args.out.guard(
            [
                args.config.as_deref(),
                s.tuned_path.as_deref(),
                Some(Path::new(&s.monitor)),
            ]
            .into_iter()
            .flatten(),
        ),
    };
    let mut session = ScrubSession::open(&plan).map_err(|e| live_err(s.sources.rename(e)))?;
    let warnings = session.warnings().to_vec();
    if !args.json {
        for w in &warnings {
            eprintln!("fallow: {w}");
        }
    }
    let signals = Signals::install()?;

    let (path, size_bytes) = (session.target_path().to_path_buf(), session.target_bytes());
    let checkpoint_path = session.checkpoint_path();
    let resumed = session.resumed_from_bytes();
    if !args.json && resumed > 0 {
        eprintln!(
            "fallow: resuming {} at {} of {} ({})",
            path.display(),
            bytes(resumed),
            bytes(size_bytes),
            checkpoint_path.display()
        );
    }
    let bar = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(size_bytes);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{wide_bar}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message(format!("scrubbing {}", path.display()));
        bar.set_position(resumed);
        bar.reset_eta();
        bar
    });
    let bar2 = bar.clone();
    let quiet = args.json;
    session.on_event(move |e| match e {
        ScrubEvent::Progress { scrubbed_bytes, .. } => {
            if let Some(b) = &bar2 {
                b.set_position(*scrubbed_bytes);
            }
        }
        ScrubEvent::Bad(r) => {
            let line = format!(
                "fallow: unreadable: bytes {}–{} ({})",
                r.first_byte, r.last_byte, r.error
            );
            match &bar2 {
                Some(b) => b.println(line),
                None if !quiet => eprintln!("{line}"),
                None => {}
            }
        }
        ScrubEvent::WindowClosed { opens_in_s } => {
            let line = format!(
                "fallow: outside the time window; reading resumes in {}",
                secs(f64::from(*opens_in_s))
            );
            match &bar2 {
                Some(b) => b.set_message(line),
                None if !quiet => eprintln!("{line}"),
                None => {}
            }
        }
    });

    let stats = session.shared_stats();
    let progress = session.progress();
    let _exporter = scrub_out::metrics(
        &s.metrics,
        session.driver_mut(),
        stats,
        progress.clone(),
        args.json,
    )?;
    let lines = ProgressLines::start(progress, args.json)?;
    let out = session.run(&signals.stop);
    lines.finish();
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let out = out.map_err(live_err)?;
    let (report, mon, drive) = (&out.report, &out.monitor, &out.drive);

    if args.json {
        Doc {
            report,
            devices: None,
            policy: &s.policy,
            policy_from: s.policy_from,
            outcome: drive.outcome,
            monitor: mon,
            monitor_cpu_fraction: mon.cpu_fraction(),
            driver: drive,
            warnings: &warnings,
        }
        .print()?;
    } else {
        crate::output::print(&summary(report, &s, mon, drive, args.verbose))?;
    }
    signals.end(
        drive.outcome,
        &format!(
            "at {} of {}",
            bytes(report.scrubbed_bytes),
            bytes(report.target_bytes)
        ),
        &format!(
            "the checkpoint {} is saved: run again with --resume to continue",
            checkpoint_path.display()
        ),
    )
}

fn summary(
    r: &fallow_live::ScrubReport,
    s: &Settings,
    mon: &fallow_live::MonitorStats,
    d: &fallow_live::DriveReport,
    verbose: bool,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let how = match (r.method.as_str(), r.direct_io) {
        ("scsi-verify", _) => "SCSI VERIFY",
        (_, true) => "O_DIRECT reads",
        _ => "buffered reads",
    };
    let order = match r.regions {
        Some(n) => format!("staggered over {n} regions"),
        None => "sequential".into(),
    };
    let _ = writeln!(
        out,
        "{} · {} · {} · {how}, {} requests, {order}",
        r.target,
        if r.target_kind == "block" {
            "block device"
        } else {
            "file"
        },
        bytes(r.target_bytes),
        bytes(r.request_size_bytes)
    );
    let _ = writeln!(
        out,
        "  policy {} ({}) · monitor {}",
        s.policy, s.policy_from, mon.source
    );
    let rate = if r.run_elapsed_s > 0.0 {
        format!(
            " ({} MB/s)",
            num(r.run_bytes as f64 / r.run_elapsed_s / 1e6)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  scrubbed {} of {} · this run {} in {}{rate} · {} requests{}",
        bytes(r.scrubbed_bytes),
        bytes(r.target_bytes),
        bytes(r.run_bytes),
        secs(r.run_elapsed_s),
        count(r.run_requests),
        if r.complete {
            format!(" · pass {} complete", r.pass)
        } else {
            " · not complete".into()
        }
    );
    if r.bad_ranges.is_empty() {
        let _ = writeln!(out, "  no unreadable sectors");
    } else {
        let n: u64 = r.bad_ranges.iter().map(|b| b[1] - b[0] + 1).sum();
        let _ = writeln!(
            out,
            "  UNREADABLE: {} in {} ranges:",
            bytes(n),
            r.bad_ranges.len()
        );
        for b in r.bad_ranges.iter().take(20) {
            let _ = writeln!(out, "    bytes {}–{}", b[0], b[1]);
        }
        if r.bad_ranges.len() > 20 {
            let _ = writeln!(out, "    … (--json lists all)");
        }
    }
    let _ = writeln!(out, "  checkpoint {}", r.checkpoint);
    if verbose {
        let _ = writeln!(
            out,
            "  monitor ({}): {} samples at {}, CPU {} ({:.2} % of a core, {} per sample), {} late",
            mon.kind_label(),
            count(mon.samples),
            secs(mon.interval_s),
            secs(mon.cpu_s),
            mon.cpu_fraction() * 100.0,
            secs(mon.cpu_per_sample_s()),
            count(mon.late_samples)
        );
        let _ = writeln!(
            out,
            "  foreground: {} busy periods, {} requests, {} read, {} written",
            count(mon.busy_periods),
            count(mon.fg_requests),
            bytes(mon.fg_read_bytes),
            bytes(mon.fg_write_bytes)
        );
        out.push_str(&scrub_out::driver_line(d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped example must stay readable as it documents the keys.
    #[test]
    fn the_example_config_reads() {
        let ex = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/examples/fallow.toml"
        );
        let cfg = fallow_live::settings::read_scrub_config(Path::new(ex)).unwrap();
        assert_eq!(cfg.own.order, Some(OrderChoice::Staggered));
        assert_eq!(cfg.metrics.addr.as_deref(), Some("127.0.0.1:9464"));
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            scrub: ScrubArgs,
        }
        let cli = <Cli as clap::Parser>::parse_from(["scrub", "/dev/null", "--config", ex]);
        let s = settings(&cli.scrub).unwrap();
        assert_eq!(
            (s.policy.as_str(), s.policy_from),
            ("fixed-wait:t=100ms", "config")
        );
        assert_eq!(s.windows.0.len(), 1);
    }
}
