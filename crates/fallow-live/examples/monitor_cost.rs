//! What the monitor costs: sample a device for a few seconds and print
//! its CPU time, per sample and as a share of one core.
//!
//! ```text
//! cargo run --release -p fallow-live --example monitor_cost -- [DEVICE|STAT_FILE] [SECONDS] [INTERVAL]
//! ```
//! DEVICE defaults to the disk the current directory is on, SECONDS to 5,
//! INTERVAL to 1ms.

use fallow_live::monitor::{resolve_device, StatSource};
use fallow_live::{Monitor, MonitorConfig};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let source = match args.first() {
        Some(spec) => StatSource::parse(spec)?,
        None => resolve_device(&std::env::current_dir()?)?
            .ok_or("the current directory is on no block device sysfs knows: name one")?
            .stat_source()?,
    };
    let seconds: f64 = args.get(1).map_or(Ok(5.0), |s| s.parse())?;
    let interval_ns = match args.get(2) {
        Some(s) => fallow_core::units::parse_duration_ns(s)?,
        None => 1_000_000,
    };
    let mut m = Monitor::start(&source, vec![], MonitorConfig { interval_ns })?;
    let mut events = 0u64;
    let end = std::time::Instant::now() + Duration::from_secs_f64(seconds);
    while std::time::Instant::now() < end {
        if m.recv_timeout(10_000_000)?.is_some() {
            events += 1;
        }
    }
    let s = m.stop()?;
    println!(
        "{}: {} samples in {:.2} s at {} µs ({} late), {} events, {} busy periods",
        s.source,
        s.samples,
        s.wall_s,
        s.interval_s * 1e6,
        s.late_samples,
        events,
        s.busy_periods
    );
    println!(
        "monitor CPU: {:.3} s = {:.2} % of one core, {:.1} µs per sample",
        s.cpu_s,
        s.cpu_fraction() * 100.0,
        s.cpu_per_sample_s() * 1e6
    );
    Ok(())
}
