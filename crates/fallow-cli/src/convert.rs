//! `fallow convert`: re-encode a trace in fallow's binary column format,
//! which `fallow analyze` detects by its magic bytes and loads far faster
//! than re-parsing text, or (by the output's extension, through the format
//! registry's writers) as Parquet or Arrow IPC for pandas, polars, pyarrow
//! and DuckDB, or as MSR CSV (`.csv`). The output is written atomically.

use crate::atomic::OverwriteArg;
use crate::human::{bytes, count};
use crate::input::{self, ReadArgs};
use anyhow::Result;
use clap::Args;
use fallow_core::outpath::OutputKind;
use fallow_core::trace::Format;
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
      a text trace whose units are given on the command line")]
pub struct ConvertArgs {
    /// The trace file to convert; gzip-compressed files are read transparently.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Output file: `.parquet` (zstd), `.arrow`/`.feather`/`.ipc` (Arrow IPC
    /// file), `.arrows` (Arrow IPC stream) in the columns of docs/formats.md,
    /// or else fallow's binary format (conventionally `.fbt`). Written to a
    /// temporary file in the same directory and renamed into place, so it
    /// is never left half-written.
    #[arg(long, short = 'o', value_name = "OUT.fbt", help_heading = crate::atomic::OUTPUT_FILES)]
    pub output: PathBuf,

    #[command(flatten)]
    pub read: ReadArgs,

    #[command(flatten)]
    pub out: OverwriteArg,
}

/// Run `fallow convert`.
pub fn run(args: ConvertArgs) -> Result<()> {
    let guard = args.out.guard([args.trace.as_path()]);
    // The format registry's writers, by the output's extension.
    let (format, writer) = fallow_core::trace::writer_for(&args.output);
    let columnar = format == Format::Arrow || format == Format::Parquet;
    if columnar && !fallow_core::trace::COLUMNAR_ENABLED {
        return Err(crate::BadInput(format!(
            "-o {}: this fallow was built without the `arrow` cargo feature, so it cannot write \
             Parquet or Arrow files (rebuild with default features, or write `.fbt`)",
            args.output.display()
        ))
        .into());
    }
    let kind = if columnar {
        OutputKind::ColumnarTrace
    } else if format == Format::Fallow {
        OutputKind::FallowBin
    } else {
        OutputKind::TextTrace // `.csv`: MSR CSV
    };
    crate::atomic::check(&guard, &args.output, kind, "-o")?;
    let trace = input::read(&args.trace, &args.read)?;
    crate::atomic::write_atomically(&args.output, |w| {
        (writer.write)(&trace, w)?;
        Ok(())
    })?;
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
