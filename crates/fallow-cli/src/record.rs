//! `fallow record DEV -o trace.csv`: record a block trace of one device
//! from the kernel's block tracepoints (see the `fallow-record` crate) as
//! MSR Cambridge CSV, which `fallow analyze` reads with exact completion
//! times. Runs for `--duration` or until Ctrl-C/SIGTERM; the trace file is
//! written atomically at the end, and the private trace instance removed.

use crate::atomic::OverwriteArg;
use crate::BadInput;
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::outpath::OutputKind;
use fallow_record::{write_msr, Device, Op, Recorder};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `fallow record`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (as root; tracefs):
  fallow record /dev/sdb --duration 60s -o trace.csv
      a minute of sdb's requests as MSR CSV; then `fallow analyze trace.csv`
  fallow record loop0 --duration 10min -o night.csv --hostname db --disk-number 1
      named as host `db`, disk 1 in the file (`--device db:1` selects it)")]
pub struct RecordArgs {
    /// The block device: a path (`/dev/sdb`, `/dev/loop0`, a
    /// /dev/disk/by-id link) or a kernel name (`sdb`). Whole devices only.
    #[arg(value_name = "DEV")]
    pub device: String,

    /// How long to record (`60s`, `10min`, `1h`). [default: until Ctrl-C]
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,

    /// Output trace file (MSR Cambridge CSV).
    #[arg(long, short = 'o', value_name = "TRACE.csv", help_heading = crate::atomic::OUTPUT_FILES)]
    pub output: PathBuf,

    /// Hostname column of the CSV. [default: this machine's hostname]
    #[arg(long, value_name = "NAME")]
    pub hostname: Option<String>,

    /// DiskNumber column of the CSV (the device id `fallow analyze --device` selects).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub disk_number: u32,

    /// Print a summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub out: OverwriteArg,
}

#[derive(Debug, Serialize)]
struct Summary<'a> {
    device: &'a str,
    output: &'a PathBuf,
    requests: usize,
    reads: usize,
    writes: usize,
    failed: usize,
    bytes: u64,
    duration_s: f64,
    unfinished: u64,
    unmatched_completions: u64,
    skipped_other: u64,
    lost_events: u64,
}

/// Run `fallow record`.
pub fn run(args: RecordArgs) -> Result<()> {
    let duration = match &args.duration {
        Some(d) => {
            let ns = fallow_core::units::parse_duration_ns(d)
                .map_err(|e| BadInput(format!("--duration: {e}")))?;
            if ns == 0 {
                return Err(BadInput("--duration must be positive".into()).into());
            }
            Some(Duration::from_nanos(ns))
        }
        None => None,
    };
    // the device recorded is an input too (refused as a device node anyway)
    let guard = args.out.guard([Path::new(&args.device)]);
    crate::atomic::check(&guard, &args.output, OutputKind::TextTrace, "-o")?;
    let device = Device::resolve(&args.device).map_err(|e| BadInput(e.to_string()))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let recorder = Recorder::start(&device)?;
    eprintln!(
        "fallow: recording {} ({}:{}) {}; Ctrl-C to stop{}",
        device.name,
        device.major,
        device.minor,
        match duration {
            Some(d) => format!("for {}", crate::human::secs(d.as_secs_f64())),
            None => "until stopped".into(),
        },
        if duration.is_some() { " early" } else { "" }
    );
    let rec = recorder.run(duration, &stop)?;
    let hostname = match &args.hostname {
        Some(h) => h.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default(),
    };
    crate::atomic::write_atomically(&args.output, |w| {
        write_msr(&rec, &hostname, args.disk_number, w)?;
        Ok(())
    })?;
    let reads = rec.requests.iter().filter(|r| r.op == Op::Read).count();
    let summary = Summary {
        device: &rec.device,
        output: &args.output,
        requests: rec.requests.len(),
        reads,
        writes: rec.requests.len() - reads,
        failed: rec.requests.iter().filter(|r| r.error != 0).count(),
        bytes: rec.requests.iter().map(|r| r.size_bytes as u64).sum(),
        duration_s: rec.duration_ns as f64 / 1e9,
        unfinished: rec.unfinished,
        unmatched_completions: rec.unmatched_completions,
        skipped_other: rec.skipped_other,
        lost_events: rec.lost_events,
    };
    eprintln!(
        "fallow: wrote {} ({}, {}, {}) over {} to {}",
        crate::human::counted(summary.requests as u64, "request", "requests"),
        crate::human::counted(reads as u64, "read", "reads"),
        crate::human::counted(summary.writes as u64, "write", "writes"),
        crate::human::bytes(summary.bytes),
        crate::human::secs(summary.duration_s),
        args.output.display()
    );
    if rec.requests.is_empty() {
        eprintln!(
            "fallow: warning: no requests were recorded (was {} idle?)",
            rec.device
        );
    }
    if rec.lost_events > 0 {
        eprintln!(
            "fallow: warning: the trace buffer dropped {} events; the trace misses requests",
            rec.lost_events
        );
    }
    if summary.unfinished + summary.skipped_other > 0 {
        eprintln!(
            "fallow: left out {} requests still in flight at the end and {} discards/flushes",
            summary.unfinished, summary.skipped_other
        );
    }
    if args.json {
        crate::output::print(&crate::output::json_text(&summary)?)?;
    }
    Ok(())
}
