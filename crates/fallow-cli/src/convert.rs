//! `fallow convert`: re-encode a trace in fallow's binary column format,
//! which `fallow analyze` detects by its magic bytes and loads far faster
//! than re-parsing text. The output is written atomically.

use crate::atomic::OverwriteArg;
use crate::human::{bytes, count};
use crate::input::{self, ReadArgs};
use anyhow::Result;
use clap::Args;
use fallow_core::outpath::OutputKind;
use std::path::PathBuf;

/// Arguments of `fallow convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The trace file to convert; gzip-compressed files are read transparently.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Output file in fallow's binary format (conventionally `.fbt`). Written
    /// to a temporary file in the same directory and renamed into place, so
    /// it is never left half-written.
    #[arg(long, short = 'o', value_name = "OUT.fbt")]
    pub output: PathBuf,

    #[command(flatten)]
    pub read: ReadArgs,

    #[command(flatten)]
    pub out: OverwriteArg,
}

/// Run `fallow convert`.
pub fn run(args: ConvertArgs) -> Result<()> {
    let guard = args.out.guard([args.trace.as_path()]);
    crate::atomic::check(&guard, &args.output, OutputKind::FallowBin, "-o")?;
    let trace = input::read(&args.trace, &args.read)?;
    crate::atomic::write_atomically(&args.output, |w| {
        fallow_core::trace::write_fallow_bin(&trace, w)?;
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
