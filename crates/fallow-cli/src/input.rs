//! Reading a trace from the command line: the flags every trace-reading
//! subcommand shares, a progress bar for large files, notes on stderr about
//! skipped and reordered records, and device selection.

use crate::human::{count, counted};
use anyhow::Result;
use fallow_core::trace::{read_trace_with_progress, DeviceCount, DeviceSel};
use fallow_core::Trace;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

/// Files smaller than this load in well under a second: no progress bar.
const PROGRESS_MIN_BYTES: u64 = 16 << 20;

pub use crate::args::read::ReadArgs;

/// Read a trace, with a byte-based progress bar on an interactive stderr for
/// large files, then report skipped and reordered records on stderr.
pub fn read(path: &Path, args: &ReadArgs) -> Result<Trace> {
    let opts = args.options();
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let bar = (size >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(size);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        bar.set_message(format!("reading {name}"));
        bar
    });
    let result = read_trace_with_progress(path, &opts, &mut |bytes| {
        if let Some(bar) = &bar {
            bar.set_position(bytes);
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let trace = result?;
    report_read(&trace);
    Ok(trace)
}

/// Notes on stderr about what reading had to do to the input.
fn report_read(trace: &Trace) {
    let r = trace.report();
    if r.skipped > 0 && r.skip_examples.is_empty() {
        // a binary cache keeps how many records its source lacked, not them
        eprintln!(
            "fallow: {} skipped when this trace was converted (--skip-bad); the converted file keeps their number, not their text: convert the source again to see {}",
            counted(r.skipped, "malformed record was", "malformed records were"),
            if r.skipped == 1 { "it" } else { "them" }
        );
    } else if r.skipped > 0 {
        let shown = r.skip_examples.len().min(3);
        eprintln!(
            "fallow: skipped {} (--skip-bad); {}:",
            counted(r.skipped, "malformed record", "malformed records"),
            match (r.skipped, shown) {
                (1, _) => "it was".to_string(),
                (n, s) if n as usize == s => "they were".to_string(),
                (_, 1) => "the first was".to_string(),
                (_, s) => format!("the first {s} were"),
            }
        );
        for e in r.skip_examples.iter().take(3) {
            eprintln!("  {e}");
        }
    }
    if r.reordered > 0 {
        eprintln!(
            "fallow: {} record{} arrived earlier than a record before {} in the file and {} sorted into place by arrival time",
            count(r.reordered),
            if r.reordered == 1 { "" } else { "s" },
            if r.reordered == 1 { "it" } else { "them" },
            if r.reordered == 1 { "was" } else { "were" },
        );
    }
    if r.ignored > 0 && r.ignored_by_reason.is_empty() {
        eprintln!(
            "fallow: ignored {} no request (such as unmatched events)",
            counted(r.ignored, "record that carries", "records that carry")
        );
    } else if r.ignored > 0 {
        eprintln!(
            "fallow: ignored {} no request:",
            counted(r.ignored, "record that carries", "records that carry")
        );
        for (reason, n) in &r.ignored_by_reason {
            eprintln!("  {:>9}  {reason}", count(*n));
        }
    }
}

/// The device to analyse and the trace restricted to it.
pub struct Selected {
    /// Requests of the analysed device only.
    pub trace: Trace,
    /// Every device in the file with its request count.
    pub devices: Vec<DeviceCount>,
    /// The analysed device.
    pub device: u32,
}

/// Select `device`, or the busiest one (saying so on stderr) when the trace
/// has several and none was asked for.
pub fn select_device(trace: Trace, device: Option<DeviceSel>) -> Result<Selected> {
    let devices = trace.devices();
    let id = match device {
        Some(sel) => trace.resolve_device(&sel)?,
        None => {
            note_busiest(&devices);
            fallow_core::analyze::busiest_device(&devices).unwrap_or(0)
        }
    };
    let trace = if devices.len() == 1 && devices[0].id == id {
        trace
    } else {
        trace.select_device(id)?
    };
    Ok(Selected {
        trace,
        devices,
        device: id,
    })
}

/// Say on stderr which device is analysed when the trace has several and
/// none was asked for: the busiest ([`fallow_core::analyze::busiest_device`]).
pub fn note_busiest(devices: &[fallow_core::trace::DeviceCount]) {
    if devices.len() < 2 {
        return;
    }
    let Some(busiest) = fallow_core::analyze::busiest_device(devices) else {
        return;
    };
    // MSR files of several hosts name their devices `host:disk`, blkparse
    // traces `major,minor`
    let list = devices
        .iter()
        .map(|d| format!("{}: {}", d.label(), count(d.requests)))
        .collect::<Vec<_>>()
        .join(", ");
    eprintln!(
        "fallow: the trace has {} devices (requests per device: {list}); analysing the busiest, device {} (choose with --device)",
        devices.len(),
        fallow_core::trace::device_label(devices, busiest)
    );
}

/// A spinner on an interactive stderr while a long step runs on a big trace.
pub fn spinner(message: &str, requests: usize) -> Option<ProgressBar> {
    (requests >= 2_000_000 && std::io::stderr().is_terminal()).then(|| {
        let s = ProgressBar::new_spinner();
        s.set_message(message.to_string());
        s.enable_steady_tick(Duration::from_millis(120));
        s
    })
}
