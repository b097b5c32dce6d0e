//! `fallow convert`: re-encode a trace in fallow's binary column format,
//! which `fallow analyze` detects by its magic bytes and loads far faster
//! than re-parsing text, or (by the output's extension, through the format
//! registry's writers) as Parquet or Arrow IPC for pandas, polars, pyarrow
//! and DuckDB, or as MSR CSV (`.csv`). The output is written atomically.
//! With `--partition-by device` the output is a directory: a Hive-style
//! Parquet dataset, one `device=<name>` directory per device, written in
//! one streaming pass ([`fallow_core::trace::partition`]) beside the
//! target and renamed into place when complete.

use crate::atomic::OverwriteArg;
use crate::human::{bytes, count};
use crate::input::{self, ReadArgs};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `fallow convert`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow convert ajw.1week.srt -o ajw.fbt
      fallow's binary format: the same trace loads many times faster
  fallow convert hm_0.csv.gz -o hm_0.parquet
      Parquet (or .arrow, .feather, .arrows) in the columns of docs/formats.md, for polars or DuckDB
  fallow convert disk.trace --format plain --completion-column -o disk.csv
      MSR CSV, which every trace tool reads (the trace needs completion times)
  fallow convert cut.trace --format plain --time-unit ms -o cut.fbt
      a text trace whose units are given on the command line
  fallow convert alibaba_block_traces_2020.csv --partition-by device -o fleet/
      one pass, bounded memory: fleet/device=<name>/part-0.parquet per device (docs/fleet.md)")]
pub struct ConvertArgs {
    /// The trace file to convert; gzip-compressed files are read transparently.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    // the help lists the registry's writers (fallow_core::trace::Format::output_help)
    #[arg(long, short = 'o', value_name = "OUT.fbt", help = fallow_core::trace::Format::output_help(), help_heading = crate::atomic::OUTPUT_FILES)]
    pub output: PathBuf,

    /// Split a multi-device trace into a directory (`-o DIR`), one
    /// `device=<name>/part-N.parquet` per device, in one streaming pass
    /// with bounded memory. DIR must be new, empty, or a dataset fallow
    /// wrote (which is replaced).
    #[arg(long, value_name = "KEY", value_enum)]
    pub partition_by: Option<PartitionKey>,

    #[command(flatten)]
    pub read: ReadArgs,

    #[command(flatten)]
    pub out: OverwriteArg,
}

/// What `--partition-by` splits by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PartitionKey {
    /// One partition per device of the trace.
    Device,
}

/// Run `fallow convert`.
pub fn run(args: ConvertArgs) -> Result<()> {
    if args.partition_by.is_some() {
        return run_partitioned(&args);
    }
    let guard = args.out.guard([args.trace.as_path()]);
    // checked before the trace is read, as every output is
    fallow_core::outpath::check_trace_output(&guard, &args.output, "-o")?;
    let trace = input::read(&args.trace, &args.read)?;
    match fallow_core::outpath::write_trace(&trace, &args.output, &guard, "-o") {
        Ok(_) => {}
        // a failed write is the machine's (exit 1), as every output's
        Err(fallow_core::Error::Io { path, source }) => {
            return Err(
                anyhow::Error::new(source).context(format!("cannot write {}", path.display()))
            )
        }
        Err(e) => return Err(e.into()),
    }
    let in_size = std::fs::metadata(&args.trace).map(|m| m.len()).unwrap_or(0);
    let out_size = std::fs::metadata(&args.output)
        .map(|m| m.len())
        .unwrap_or(0);
    let devices = trace.devices().len();
    eprintln!(
        "fallow: wrote {} requests on {} device{} to {} ({}; the input is {})",
        count(trace.len() as u64),
        devices,
        if devices == 1 { "" } else { "s" },
        args.output.display(),
        bytes(out_size),
        bytes(in_size),
    );
    Ok(())
}

/// `--partition-by device`: the dataset is written into a hidden staging
/// directory beside `-o`, which replaces `-o` only once complete (an
/// existing dataset is moved aside first and then removed).
#[cfg(not(feature = "arrow"))]
fn run_partitioned(_: &ConvertArgs) -> Result<()> {
    Err(crate::BadInput(
        "--partition-by writes Parquet, and this fallow was built without the `arrow` cargo \
         feature (rebuild with default features)"
            .into(),
    )
    .into())
}

#[cfg(feature = "arrow")]
fn run_partitioned(args: &ConvertArgs) -> Result<()> {
    use anyhow::Context;
    use fallow_core::trace::partition::{partition_by_device, Limits};
    let guard = args.out.guard([args.trace.as_path()]);
    guard.check_dataset(&args.output, "-o")?;
    let dir = &args.output;
    let name = dir
        .file_name()
        .expect("check_dataset refuses a path without a name")
        .to_string_lossy()
        .into_owned();
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let pid = std::process::id();
    let staging = parent.join(format!(".{name}.{pid}.partial"));
    std::fs::create_dir(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))?;
    let written = partition_by_device(
        &args.trace,
        &args.read.options(),
        &staging,
        Limits::default(),
    );
    let out = match written {
        Ok(out) => out,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e.into());
        }
    };
    let aside = parent.join(format!(".{name}.{pid}.old"));
    let replaced = dir.exists();
    if replaced {
        std::fs::rename(dir, &aside)
            .with_context(|| format!("cannot move the old {} aside", dir.display()))?;
    }
    if let Err(e) = std::fs::rename(&staging, dir) {
        if replaced {
            let _ = std::fs::rename(&aside, dir);
        }
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e).with_context(|| format!("cannot move the dataset to {}", dir.display()));
    }
    if replaced {
        std::fs::remove_dir_all(&aside)
            .with_context(|| format!("cannot remove the old dataset at {}", aside.display()))?;
    }
    let parts: u32 = out.partitions.iter().map(|p| p.parts).sum();
    eprintln!(
        "fallow: wrote {} requests on {} device{} to {} ({} Parquet file{}; {})",
        count(out.requests),
        out.partitions.len(),
        if out.partitions.len() == 1 { "" } else { "s" },
        dir.display(),
        count(u64::from(parts)),
        if parts == 1 { "" } else { "s" },
        bytes(dir_bytes(dir)),
    );
    if out.skipped > 0 {
        eprintln!(
            "fallow: {} malformed records skipped (--skip-bad)",
            count(out.skipped)
        );
    }
    Ok(())
}

#[cfg(feature = "arrow")]
/// Bytes of the files one level of partitions down.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    let files = |d: &std::path::Path| -> Vec<std::fs::DirEntry> {
        std::fs::read_dir(d)
            .map(|it| it.flatten().collect())
            .unwrap_or_default()
    };
    files(dir)
        .iter()
        .flat_map(|p| files(&p.path()))
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum()
}
