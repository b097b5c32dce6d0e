//! How to read an input trace: the read flags every trace-reading
//! subcommand flattens. `--format` is defined here and nowhere else.

use super::parse_size;
use clap::Args;
use fallow_core::trace::{Format, PlainOptions, ReadOptions, TimeUnit};

/// How to read the input trace.
#[derive(Debug, Clone, Args)]
pub struct ReadArgs {
    // The help lists every format of the registry with its summary.
    #[arg(long, short = 'f', value_name = "FORMAT", help = Format::help())]
    pub format: Option<Format>,

    /// Skip malformed records instead of stopping at the first one; how many
    /// were skipped, and why, is reported on stderr.
    #[arg(long)]
    pub skip_bad: bool,

    /// Unit of the time column of `plain` traces: ns, us, ms or s.
    #[arg(long, value_name = "UNIT", default_value = "ms")]
    pub time_unit: TimeUnit,

    /// Bytes per unit of the offset column of `plain` traces: 1 for bytes,
    /// 512 for sectors; suffixes such as 4KiB are accepted.
    #[arg(long, value_name = "BYTES", default_value = "1", value_parser = parse_size)]
    pub offset_unit: u64,

    /// Bytes per unit of the size column of `plain` traces: 1 for bytes,
    /// 512 for sectors; suffixes such as 4KiB are accepted.
    #[arg(long, value_name = "BYTES", default_value = "1", value_parser = parse_size)]
    pub size_unit: u64,

    /// Read a sixth column of `plain` traces as each request's completion
    /// time (same unit and clock as the time column).
    #[arg(long)]
    pub completion_column: bool,
}

impl ReadArgs {
    /// The core's read options.
    pub fn options(&self) -> ReadOptions {
        ReadOptions {
            format: self.format,
            skip_bad: self.skip_bad,
            plain: PlainOptions {
                time_unit: self.time_unit,
                offset_unit_bytes: self.offset_unit,
                size_unit_bytes: self.size_unit,
                completion: self.completion_column,
            },
        }
    }
}
