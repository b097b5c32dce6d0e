//! The flags of `fallow scrub` and `fallow trim`, shared by the block
//! scrubber (`scrub`) and the native executors (`native_scrub`).

use super::{parse_duration, parse_size};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

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
      sync_max between them; I/O to the array mid-window brakes it (sync_speed_min/max = 1
      KiB/s) and the next request lifts it to the user's limits, restored at the end and by
      the guardian after kill -9; mismatch_cnt in native; the next sector is checkpointed.
  fallow scrub zfs:tank --policy fixed-wait:t=500ms --resume
      a ZFS scrub in slices, paused by `zpool scrub -p`, resumed by `zpool scrub`; progress
      from `zpool status -j -p` (OpenZFS >= 2.3) or its text; every leaf vdev's disk watched.
      Pause/resume is its only granularity (no speed knob): an FG arrival waits for the
      slice's end. If fallow dies its guardian pauses a running scrub and never resumes one.
      md and zfs are NOT tested on a live array or pool (this machine's kernel has neither):
      only against a recorded sysfs tree with a fake md thread (md's brake included) and a
      fake `zpool` printing OpenZFS's formats.
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

    /// Hold the FG's slowdown within this budget with no tune result
    /// (`5%`: mean slowdown; `1ms`: mean added delay per FG request): the
    /// policy's knob is refitted live from what the monitor sees, starting
    /// at its least aggressive value, and the FG slowdown is measured and
    /// backed off from (docs/live.md, "Holding a budget"). Also
    /// `FALLOW_BUDGET` and the config's `budget`. Not with --tuned.
    #[arg(long, value_name = "BUDGET", conflicts_with = "tuned")]
    pub budget: Option<String>,

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

    /// Stop this run after this many bytes; --resume continues. A hard
    /// cap for a device or file (exact), md: (the window's sync_max) and fstrim: (the range's length;
    /// both round down to a chunk, an ext4 group or a MiB); btrfs: stops
    /// once its status shows the cap (1.5 MB past 32 MiB measured at 100
    /// MiB/s); zfs: after the slice that crosses it.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_bytes: Option<u64>,

    /// Checkpoint file. [default: see below]
    #[arg(long, value_name = "FILE", help_heading = crate::atomic::OUTPUT_FILES)]
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
    #[arg(long, value_name = "FILE", help_heading = crate::atomic::OUTPUT_FILES)]
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
