//! # fallow-live
//!
//! fallow's background-scheduling policies against a real block device in
//! real time. The same policy objects the simulator runs
//! ([`fallow_core::policy`]) are driven by what the device is doing now
//! instead of by a trace:
//!
//! ```text
//! /sys/block/<dev>/stat ─► monitor (1 ms samples − fallow's own I/O) ─► Event::{Busy, Idle}
//!                                                                           │
//!                      BgExecutor::run_one ◄── driver ◄── Policy (registry) ◄┘
//! ```
//!
//! ## Tour
//! - [`monitor`]: [`Monitor`] samples a device's counters ([`StatSource`]:
//!   a sysfs device, or any file in that format) on its own thread,
//!   subtracts fallow's own I/O ([`OwnCounters`], a managed command's
//!   [`monitor::CgroupIo`]) and sends [`Event`]s; it reports its own CPU
//!   cost. [`monitor::Detector`] is the pure state machine inside it. It
//!   samples every interval ([`monitor::MonitorKind::Poll`]) or, where the
//!   kernel allows, only while the device is busy, woken by the block
//!   tracepoints ([`monitor::MonitorKind::Auto`]).
//!   [`monitor::EventMonitor`] gives those block events themselves, with
//!   the process, cgroup or writeback inode behind each (`fallow spindown`).
//! - [`driver`]: [`Driver`] runs one policy from the registry against the
//!   events and issues BG work through a [`BgExecutor`] (one request at a
//!   time, never preempted).
//! - [`scrub`]: [`Scrubber`], a `BgExecutor` that verifies a device or file
//!   read-only (`O_DIRECT`, or SCSI VERIFY), sequentially or staggered,
//!   with an atomic checkpoint after every request, error narrowing to the
//!   failing sectors, a rate ceiling and time windows.
//! - [`run`]: [`Managed`], a maintenance command as a `BgExecutor`: one
//!   request lets it run for a slice; paused with the cgroup v2 or v1
//!   freezer or `SIGSTOP`, its own disk I/O subtracted by the monitor, and
//!   a guardian process that thaws it if fallow dies (`fallow run`).
//! - [`spindown`]: `fallow spindown`, a live spin-down daemon: the
//!   spin-down policies `fallow energy` simulates, a spin-up budget, wake
//!   logging, and maintenance jobs that ride spin-ups; actuators for ATA
//!   disks (SG_IO) and the emulated disk.
//! - [`net`]: the monitor for a network interface (Eggert & Touch's
//!   idletime scheduling for networks), and [`combine::either`], several
//!   monitors as one.
//! - [`settings`]: one [`settings::Settings`] for every live command, and
//!   the one precedence (flags, config file, tune result, defaults).
//! - Sessions, so a front end only converts settings and prints:
//!   [`scrub::ScrubSession`], [`native::NativeSession`], [`run::RunSession`];
//!   a scrub's [`Progress`] (done/total, pass, rate, ETA, bad ranges) is
//!   published as it runs ([`progress`]).
//! - [`clock`]: monotonic and thread-CPU time.
//!
//! ## Example
//! A policy from the registry, driven live; here the device is one the
//! monitor cannot see (always idle), and the executor only counts.
//! ```
//! use fallow_live::{BgExecutor, Driver, DriverConfig, Monitor, Step};
//! use std::sync::atomic::AtomicBool;
//!
//! struct Count(u64);
//! impl BgExecutor for Count {
//!     fn run_one(&mut self, size_bytes: u64) -> fallow_live::Result<Step> {
//!         assert_eq!(size_bytes, 64 * 1024);
//!         self.0 += 1;
//!         Ok(if self.0 == 10 { Step::Finished } else { Step::More })
//!     }
//! }
//!
//! let mut monitor = Monitor::without_device();
//! let cfg = DriverConfig { bg_size_bytes: 64 * 1024, ..DriverConfig::default() };
//! let mut driver = Driver::from_spec("fixed-wait:t=5ms", cfg)?;
//! let report = driver.run(&mut monitor, &mut Count(0), &AtomicBool::new(false))?;
//! assert_eq!(report.bg_requests, 10);
//! # Ok::<(), fallow_live::Error>(())
//! ```
#![deny(missing_docs)]

pub mod budget;
pub mod clock;
pub mod combine;
pub mod driver;
pub mod error;
pub mod job_doc;
pub mod monitor;
pub mod native;
pub mod net;
pub mod progress;
pub mod run;
pub mod run_kinds;
pub mod scrub;
pub mod scrub_order;
pub mod scrub_pace;
pub mod scrub_verify;
pub mod service_fit;
pub mod settings;
pub mod spindown;

pub use driver::{
    BgExecutor, DriveObserver, DriveReport, DriveState, Driver, DriverConfig, EventSource, Outcome,
    Step,
};
pub use error::{Error, Result};
pub use monitor::{
    Event, Monitor, MonitorConfig, MonitorStats, OwnCounters, SharedStats, StatSource,
};
pub use progress::{Progress, ProgressProbe};
pub use run::{CommandSpec, FreezerKind, Managed, RunConfig};
pub use scrub::{ScrubConfig, ScrubReport, Scrubber};
