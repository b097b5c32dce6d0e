//! `fallow scrub TARGET`: verify a block device or file read-only in the
//! idle time a policy picks, with a checkpoint that `--resume` continues
//! after a crash, `kill -9` or reboot (see docs/live.md).
//!
//! Settings come from flags, then a TOML config (`--config`: `[live]`,
//! `[scrub]` and `[metrics]` tables), then a `fallow tune --json` result
//! (`--tuned`: its best policy and request size), then the defaults; the
//! policy by [`live_config::choose_policy`]. With `--resume`,
//! order, regions and request size default to the checkpoint's.

use crate::human::{bytes, count, num, secs};
use crate::live_config::{self, Config, MetricsAddr};
use crate::BadInput;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use fallow_core::sim::BgService;
use fallow_live::monitor::StatSource;
use fallow_live::scrub::{self, Checkpoint, Order, Resume, ScrubEvent, Target, TargetKind};
use fallow_live::{Driver, DriverConfig, Monitor, MonitorConfig, OwnCounters, ScrubConfig};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The policy when none is given: wait a little after the last FG request
/// before reading (Practical Scrubbing §V-B2's Waiting, their best simple
/// policy), so a scrub yields to foreground bursts.
pub const DEFAULT_POLICY: &str = "fixed-wait:t=100ms";
/// Request size when none is given: large enough that a checkpoint per
/// request costs little, small enough that an FG request that finds one
/// in service waits only ~10 ms on a disk (Practical Scrubbing Fig. 4).
pub const DEFAULT_SIZE: u64 = 1 << 20;
/// Regions of a staggered order when `--order staggered` comes without
/// `--regions` (Practical Scrubbing §IV-A: as fast as sequential from 128 on).
pub const DEFAULT_REGIONS: u64 = 128;
const DEFAULT_RETRIES: u32 = 3;

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
samples and CPU cost, and the driver's counts. Interrupted (SIGINT, SIGTERM), it saves the
checkpoint and exits with status 1; `--resume` continues.")]
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
    /// format (an emulated disk's). [default: auto]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderArg {
    /// Segment after segment.
    Sequential,
    /// Segment i of every region before segment i + 1 (Practical Scrubbing §IV-A).
    Staggered,
}

/// `--verify-cmd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyCmd {
    /// Reads, never SCSI VERIFY.
    Off,
    /// SCSI VERIFY where the device takes it, reads otherwise.
    Auto,
    /// SCSI VERIFY or nothing.
    Required,
}

pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    match fallow_core::units::parse_bytes(s) {
        Ok(0) => Err("must be at least 1 byte".into()),
        Ok(b) => Ok(b),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_duration(s: &str) -> Result<u64, String> {
    fallow_core::units::parse_duration_ns(s).map_err(|e| e.to_string())
}

/// `[scrub]`: settings of `fallow scrub` (the `[live]` keys may be
/// repeated here to differ for scrubbing).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScrubSection {
    policy: Option<String>,
    tuned: Option<PathBuf>,
    monitor: Option<String>,
    interval: Option<String>,
    seed: Option<u64>,
    size: Option<String>,
    order: Option<OrderArg>,
    regions: Option<u64>,
    max_rate: Option<String>,
    windows: Option<Vec<String>>,
    max_bytes: Option<String>,
    checkpoint: Option<PathBuf>,
    checkpoint_interval: Option<String>,
    log: Option<PathBuf>,
    retries: Option<u32>,
    verify_cmd: Option<VerifyCmd>,
    buffered: Option<bool>,
}

/// Read the config: `[live]`, `[metrics]` and `[scrub]` strictly, paths
/// relative to the file.
fn read_config(path: &Path) -> Result<Config<ScrubSection>> {
    let mut cfg: Config<ScrubSection> = live_config::read_config(path, "scrub")?;
    let sc = &mut cfg.own;
    sc.tuned = sc.tuned.take().map(|p| live_config::relative_to(path, p));
    sc.checkpoint = sc
        .checkpoint
        .take()
        .map(|p| live_config::relative_to(path, p));
    sc.log = sc.log.take().map(|p| live_config::relative_to(path, p));
    Ok(cfg)
}

/// Settings after flags, config, tune result and defaults.
#[derive(Debug)]
struct Settings {
    policy: String,
    policy_from: &'static str,
    size: Option<u64>,
    tuned_size: Option<u64>,
    tuned_path: Option<PathBuf>,
    order: Option<Order>,
    bg_service: Option<BgService>,
    max_rate: Option<f64>,
    windows: scrub::Windows,
    max_bytes: Option<u64>,
    checkpoint: Option<PathBuf>,
    checkpoint_interval_ns: u64,
    log: Option<PathBuf>,
    retries: u32,
    verify: VerifyCmd,
    buffered: bool,
    monitor: String,
    interval_ns: u64,
    seed: u64,
    metrics: Option<MetricsAddr>,
}

fn settings(a: &ScrubArgs) -> Result<Settings> {
    let cfg = match &a.config {
        Some(p) => read_config(p)?,
        None => Config::default(),
    };
    let (live, sc) = (&cfg.live, &cfg.own);
    let dur = |v: &Option<String>, key: &str| cfg.duration("scrub", key, v.as_deref());
    let live_dur = |v: &Option<String>, key: &str| cfg.duration("live", key, v.as_deref());
    let size_of = |v: &Option<String>, key: &str| -> Result<Option<u64>> {
        v.as_deref()
            .map(|s| parse_size(s).map_err(|e| cfg.bad("scrub", key, e)))
            .transpose()
    };
    let choice = live_config::choose_policy(
        a.policy.as_deref(),
        a.tuned.as_deref(),
        sc.policy.as_deref().or(live.policy.as_deref()),
        sc.tuned.as_deref().or(live.tuned.as_deref()),
        DEFAULT_POLICY,
    )?;
    let (policy, policy_from, tuned) = (choice.spec, choice.from, choice.tuned);
    let size = a.size.or(size_of(&sc.size, "size")?);
    let regions = a.regions.or(sc.regions);
    let order = match (a.order.or(sc.order), regions) {
        (Some(OrderArg::Sequential), Some(_)) => {
            return Err(
                BadInput("--regions goes with --order staggered, not sequential".into()).into(),
            )
        }
        (Some(OrderArg::Sequential), None) => Some(Order::Sequential),
        (Some(OrderArg::Staggered), r) | (None, r @ Some(_)) => Some(Order::Staggered {
            regions: r.unwrap_or(DEFAULT_REGIONS),
        }),
        (None, None) => None,
    };
    // a file's value that fails names the file and key; a flag's, the flag
    let max_rate = match (&a.max_rate, &sc.max_rate) {
        (Some(r), _) => Some(scrub::parse_rate(r).map_err(|e| BadInput(e.to_string()))?),
        (None, Some(r)) => Some(scrub::parse_rate(r).map_err(|e| cfg.bad("scrub", "max_rate", e))?),
        (None, None) => None,
    };
    let parse_windows = |texts: &[String]| -> Result<scrub::Windows, String> {
        texts
            .iter()
            .map(|w| w.parse::<scrub::Window>().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()
            .map(scrub::Windows)
    };
    let windows = match (&a.windows[..], &sc.windows) {
        ([], Some(w)) => parse_windows(w).map_err(|e| cfg.bad("scrub", "windows", e))?,
        (w, _) => parse_windows(w).map_err(BadInput)?,
    };
    Ok(Settings {
        policy,
        policy_from,
        size,
        tuned_size: tuned.as_ref().map(|t| t.request_size_bytes),
        tuned_path: a.tuned.clone().or(sc.tuned.clone()).or(live.tuned.clone()),
        order,
        bg_service: tuned.as_ref().and_then(|t| t.bg_service),
        max_rate,
        windows,
        max_bytes: a.max_bytes.or(size_of(&sc.max_bytes, "max_bytes")?),
        checkpoint: a.checkpoint.clone().or(sc.checkpoint.clone()),
        checkpoint_interval_ns: a
            .checkpoint_interval
            .or(dur(&sc.checkpoint_interval, "checkpoint_interval")?)
            .unwrap_or(0),
        log: a.log.clone().or(sc.log.clone()),
        retries: a.retries.or(sc.retries).unwrap_or(DEFAULT_RETRIES),
        verify: a.verify_cmd.or(sc.verify_cmd).unwrap_or(VerifyCmd::Off),
        buffered: a.buffered || sc.buffered.unwrap_or(false),
        monitor: a
            .monitor
            .clone()
            .or(sc.monitor.clone())
            .or(live.monitor.clone())
            .unwrap_or_else(|| "auto".into()),
        interval_ns: a
            .interval
            .or(dur(&sc.interval, "interval")?)
            .or(live_dur(&live.interval, "interval")?)
            .unwrap_or(1_000_000),
        seed: a.seed.or(sc.seed).or(live.seed).unwrap_or(1),
        metrics: cfg.metrics_addr(a.metrics.as_deref()),
    })
}

impl Settings {
    /// What a native target takes of them (the rest is the block scrubber's).
    fn shared(self) -> crate::native_scrub::Shared {
        crate::native_scrub::Shared {
            policy: self.policy,
            policy_from: self.policy_from,
            size: self.size,
            tuned_size: self.tuned_size,
            bg_service: self.bg_service,
            max_rate: self.max_rate,
            windows: self.windows,
            max_bytes: self.max_bytes,
            checkpoint: self.checkpoint,
            monitor: self.monitor,
            interval_ns: self.interval_ns,
            seed: self.seed,
            metrics: self.metrics,
        }
    }
}

/// A library error as an anyhow error with the right exit code.
pub(crate) fn live_err(e: fallow_live::Error) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        anyhow::Error::new(e)
    }
}

/// The JSON report.
#[derive(Debug, Serialize)]
struct Doc<'a> {
    #[serde(flatten)]
    scrub: &'a fallow_live::ScrubReport,
    policy: &'a str,
    policy_from: &'a str,
    outcome: fallow_live::Outcome,
    monitor: &'a fallow_live::MonitorStats,
    monitor_cpu_fraction: f64,
    driver: &'a fallow_live::DriveReport,
    warnings: &'a [String],
}

/// Run `fallow scrub`.
pub fn run(args: ScrubArgs) -> Result<()> {
    let s = settings(&args)?;
    // btrfs:MOUNT, fstrim:MOUNT: the tool's own control (crate::native_scrub)
    if let Some(t) = fallow_live::native::NativeTarget::parse(&args.target.to_string_lossy())
        .map_err(live_err)?
    {
        return crate::native_scrub::run(&args, t, s.shared());
    }
    let mut warnings: Vec<String> = Vec::new();
    let mut warn = |m: String, json: bool| {
        if !json {
            eprintln!("fallow: {m}");
        }
        warnings.push(m);
    };
    // a bad policy fails before the device is touched
    let policy_probe = fallow_live::Driver::from_spec(&s.policy, DriverConfig::default())
        .map_err(live_err)
        .with_context(|| format!("policy {} (from {})", s.policy, s.policy_from))?;
    drop(policy_probe);

    let target = Target::open(&args.target, !s.buffered).map_err(live_err)?;
    if let Some(r) = &target.buffered_reason {
        if !s.buffered {
            warn(
                format!(
                    "{}: {r}; reading through the page cache, dropping it around each read",
                    target.path.display()
                ),
                args.json,
            );
        }
    }
    let checkpoint_path = match &s.checkpoint {
        Some(p) => p.clone(),
        None => {
            let p = scrub::checkpoint::default_path(&args.target).map_err(live_err)?;
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    BadInput(format!(
                        "cannot create {} for the checkpoint ({e}); give --checkpoint FILE",
                        dir.display()
                    ))
                })?;
            }
            p
        }
    };
    // with --resume, what the flags leave open comes from the checkpoint
    let existing = if args.resume {
        Checkpoint::load(&checkpoint_path).map_err(live_err)?
    } else {
        None
    };
    let size = s
        .size
        .or(existing.as_ref().map(|c| c.request_size_bytes))
        .or(s.tuned_size)
        .unwrap_or(DEFAULT_SIZE);
    let order = s
        .order
        .or(existing.as_ref().map(|c| c.order))
        .unwrap_or(Order::Sequential);

    // the read path: SCSI VERIFY if asked and possible, else reads
    let dev = target.device.clone();
    let own = Arc::new(OwnCounters::new(
        dev.as_ref().and_then(|d| d.max_request_bytes),
    ));
    let mut method = "read";
    let mut verifier: Box<dyn scrub::Verifier + Send> =
        Box::new(target.reader(own.clone()).map_err(live_err)?);
    if s.verify != VerifyCmd::Off {
        let start = match (&dev, target.kind) {
            (Some(d), TargetKind::Block) => d.start_bytes,
            _ => 0,
        };
        match scrub::SgVerifier::probe(target.file(), start, target.granule_bytes) {
            Ok(v) => {
                verifier = Box::new(v);
                method = "scsi-verify";
            }
            Err(why) if s.verify == VerifyCmd::Required => {
                return Err(BadInput(format!(
                    "--verify-cmd=required: {}: {why}",
                    target.path.display()
                ))
                .into())
            }
            Err(why) => warn(
                format!(
                    "--verify-cmd: {}: {why}; verifying with {} reads instead",
                    target.path.display(),
                    if target.direct {
                        "O_DIRECT"
                    } else {
                        "buffered"
                    }
                ),
                args.json,
            ),
        }
    }

    let mut scrubber = scrub::Scrubber::new(
        &target,
        verifier,
        method,
        own.clone(),
        ScrubConfig {
            request_size_bytes: size,
            order,
            retries: s.retries,
            max_rate_bytes_per_s: s.max_rate,
            windows: s.windows.clone(),
            max_bytes: s.max_bytes,
            checkpoint_path: checkpoint_path.clone(),
            checkpoint_interval_ns: s.checkpoint_interval_ns,
            log_path: s.log.clone(),
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
        },
        if args.resume {
            Resume::Yes
        } else if args.restart {
            Resume::Restart
        } else {
            Resume::No
        },
    )
    .map_err(live_err)?;

    // the monitor
    let mut monitor = match s.monitor.as_str() {
        "none" => Monitor::without_device(),
        "auto" => match &dev {
            Some(d) => {
                let src = d.stat_source().map_err(live_err)?;
                start_monitor(&src, &own, s.interval_ns)?
            }
            None => {
                warn(
                    format!(
                        "{}: no block device under it that sysfs knows (tmpfs, overlayfs?); scrubbing without watching for foreground I/O (--monitor DEV to name one)",
                        target.path.display()
                    ),
                    args.json,
                );
                Monitor::without_device()
            }
        },
        spec => {
            let src = StatSource::parse(spec).map_err(live_err)?;
            start_monitor(&src, &own, s.interval_ns)?
        }
    };
    let mut driver = Driver::from_spec(
        &s.policy,
        DriverConfig {
            bg_size_bytes: size,
            initial_bg_service: s
                .bg_service
                .unwrap_or(DriverConfig::default().initial_bg_service),
            seed: s.seed,
        },
    )
    .map_err(live_err)?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // a second signal ends the process at once (the checkpoint is
        // consistent at every instant); the first stops after the request
        signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
            .context("installing a signal handler")?;
    }

    let resumed = scrubber.resumed_from_bytes();
    if !args.json && resumed > 0 {
        eprintln!(
            "fallow: resuming {} at {} of {} ({})",
            target.path.display(),
            bytes(resumed),
            bytes(target.size_bytes),
            checkpoint_path.display()
        );
    }
    let bar = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(target.size_bytes);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{wide_bar}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message(format!("scrubbing {}", target.path.display()));
        bar.set_position(resumed);
        bar.reset_eta();
        bar
    });
    let bar2 = bar.clone();
    let quiet = args.json;
    scrubber.on_event(move |e| match e {
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

    let _exporter = match &s.metrics {
        Some(at) => {
            let e =
                crate::metrics_export::Exporter::start(at, &mut driver, monitor.shared_stats())?;
            if let (Some(a), false) = (e.addr(), args.json) {
                eprintln!("fallow: metrics at http://{a}/metrics");
            }
            Some(e)
        }
        None => None,
    };
    let drive = driver.run(&mut monitor, &mut scrubber, &stop);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let flushed = scrubber.flush();
    let mon = monitor.stop();
    let drive = drive.map_err(live_err)?;
    flushed.map_err(live_err)?;
    let mon = mon.map_err(live_err)?;
    let report = scrubber.report();

    if args.json {
        let doc = Doc {
            scrub: &report,
            policy: &s.policy,
            policy_from: s.policy_from,
            outcome: drive.outcome,
            monitor: &mon,
            monitor_cpu_fraction: mon.cpu_fraction(),
            driver: &drive,
            warnings: &warnings,
        };
        crate::output::print(&crate::output::json_text(&doc)?)?;
    } else {
        crate::output::print(&summary(&report, &s, &mon, &drive, args.verbose))?;
    }
    if drive.outcome == fallow_live::Outcome::Stopped {
        return Err(anyhow::anyhow!(
            "interrupted at {} of {}; the checkpoint {} is saved: run again with --resume to continue",
            bytes(report.scrubbed_bytes),
            bytes(report.target_bytes),
            checkpoint_path.display()
        ));
    }
    Ok(())
}

fn start_monitor(src: &StatSource, own: &Arc<OwnCounters>, interval_ns: u64) -> Result<Monitor> {
    Monitor::start(src, vec![own.clone()], MonitorConfig { interval_ns }).map_err(live_err)
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
            "  monitor: {} samples at {}, CPU {} ({:.2} % of a core, {} per sample), {} late",
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
        let _ = writeln!(
            out,
            "  driver: {} idle intervals, {} BG requests (mean {}), {} collisions, throttled {}",
            count(d.idle_intervals),
            count(d.bg_requests),
            secs(d.bg_mean_service_s),
            count(d.collisions),
            secs(d.throttled_s)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The shipped example must stay readable as it documents the keys.
    #[test]
    fn the_example_config_reads() {
        let ex = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/examples/fallow.toml"
        );
        let cfg = read_config(Path::new(ex)).unwrap();
        assert_eq!(cfg.own.order, Some(OrderArg::Staggered));
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

    #[test]
    fn config_sections_are_strict_and_others_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "f.toml",
            "[live]\npolicy = \"aggressive\"\n[scrub]\nsize = \"4MiB\"\norder = \"staggered\"\nregions = 8\nwindows = [\"01:00-06:00\"]\ncheckpoint = \"ck.json\"\n[run]\nanything = 1\n",
        );
        let cfg = read_config(&p).unwrap();
        let (live, sc) = (cfg.live, cfg.own);
        assert_eq!(live.policy.as_deref(), Some("aggressive"));
        assert_eq!(sc.size.as_deref(), Some("4MiB"));
        assert_eq!(sc.order, Some(OrderArg::Staggered));
        assert_eq!(sc.checkpoint, Some(d.path().join("ck.json")));
        let p = write(d.path(), "g.toml", "[scrub]\nsise = \"4MiB\"\n");
        let e = read_config(&p).unwrap_err().to_string();
        assert!(e.contains("g.toml") && e.contains("sise"), "{e}");
        let p = write(d.path(), "h.toml", "policy = \"x\"\n");
        let e = read_config(&p).unwrap_err().to_string();
        assert!(e.contains("top-level key `policy`"), "{e}");
        let p = write(d.path(), "i.toml", "[scrub\n");
        assert!(read_config(&p).unwrap_err().to_string().contains("i.toml"));
    }
}
