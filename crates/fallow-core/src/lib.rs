//! # fallow-core
//!
//! The engine of fallow, which puts a storage device's idle time to work.
//! This crate reads block traces, finds busy periods and idle intervals,
//! and characterises idleness the way the source papers do. It does no I/O
//! beyond reading files and has no async; its only threads are scoped ones
//! that read a large uncompressed text trace in parallel (one per core, or
//! `FALLOW_THREADS`), gone when [`read_trace`] returns.
//!
//! Data flows one way, each layer importing only the ones before it (the
//! `layers` test checks that the module graph has no cycle):
//!
//! ```text
//! trace file ─► trace ─► Trace ─┐
//! service models (FG, BG) ──────┼─► period ─► Periods ─► stats / characterize
//! workload (synthetic FG) ──────┘                 │
//!                                                 ▼
//!                 policy (when BG work runs) ─► sim (FG/BG replay) ─► tune (budgets)
//!            spin-down policy (when to sleep) ─► energy (power-state replay)
//! ```
//!
//! ## Tour
//! Bottom-up, in the order a newcomer needs them:
//! - [`error`], [`units`], [`registry`]: typed errors naming the parameter,
//!   durations and sizes as text (`5ms`, `64KiB`), and the one shape of a
//!   list of named things (policies, spin-down policies, trace readers).
//! - [`trace`]: [`Trace`] (struct of arrays, integer ns), [`trace::Format`],
//!   [`trace::read_trace`] with format detection, transparent gzip and
//!   parallel reading of large text traces.
//! - [`dist`]: lognormal and hyperexponential distributions given by a mean
//!   and a CV, shared by service models and arrival processes.
//! - [`service`]: how long one request takes — [`ServiceModel`] (constant,
//!   exponential, lognormal, hyperexponential, disk) and the FCFS queue
//!   that turns arrivals into completions for traces without them, and
//!   [`service::BgService`] / [`service::BgWork`] for background work.
//! - [`period`]: [`Periods`] — busy periods as the union of
//!   `[arrival, completion]`, idle intervals as the gaps.
//! - [`workload`]: seeded synthetic arrival processes (Poisson, Erlang,
//!   lognormal, hyperexponential, two-state MMPP fitted to a CV and a burst
//!   length), written as text (`mmpp:cv=9,burst=1000`), with the arrival
//!   rate for a target utilisation.
//! - [`stats`]: one analysis per file; [`characterize()`] runs them all.
//! - [`policy`]: the [`policy::Policy`] trait (told when the device falls
//!   idle, answers when BG work runs), one file per policy, each exporting
//!   its [`policy::Entry`]; [`policy::registry()`] lists them.
//! - [`sim`]: the trace-driven FG/BG simulator — a trace's busy periods
//!   replayed under a policy, with the foreground's slowdown and the BG
//!   throughput as the result; one seeded stream per run.
//! - [`tune`]: the most BG work a policy gets within a budget on the
//!   foreground's response time, by searching its knob and request size
//!   over many simulations.
//! - [`energy`]: the second policy/simulator pair — spin-down policies
//!   ([`energy::spindown`]) decide when a disk sleeps, and a power-state
//!   replay (with SARD peers serving reads while the local disk sleeps)
//!   gives the energy saved and the delays paid.
//! - [`scrubplan`]: mean latent error time of a scrub order (which
//!   `--order` and `--regions` to run); [`outpath`]: the guard every output
//!   path passes before anything is written to it.
//!
//! ## Example
//! ```
//! use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
//! use fallow_core::{characterize, CharacterizeOptions, ServiceModel};
//!
//! // An M/M/1 queue at 30 % utilisation: λ = 30/s, mean service 10 ms.
//! let trace = SyntheticWorkload {
//!     arrivals: ArrivalProcess::Poisson { rate_per_s: 30.0 },
//!     requests: 20_000,
//!     service: ServiceModel::Exponential { mean_ns: 10_000_000 },
//!     request_size_bytes: 4096,
//!     capacity_bytes: 1 << 30,
//!     write_fraction: 0.5,
//!     seed: 1,
//! }
//! .generate()?;
//! let c = characterize(&trace, trace.devices(), None, &CharacterizeOptions::default())?;
//! // Idle intervals of an M/M/1 queue are exponential with mean 1/λ.
//! assert!((c.idle.mean_s - 1.0 / 30.0).abs() < 0.002);
//! assert!((c.utilization - 0.3).abs() < 0.02);
//! # Ok::<(), fallow_core::Error>(())
//! ```
#![deny(missing_docs)]

/// Version of the JSON documents fallow writes (`--json` of every CLI
/// command, as `"schema_version"`): raised when a key changes meaning or
/// a document changes shape. 2: `tune --json` is one object with a
/// `budgets` list whatever the number of budgets, and carries `guarantee`.
pub const JSON_SCHEMA_VERSION: u32 = 2;

pub mod analyze;
pub mod characterize;
pub mod dist;
pub mod energy;
pub mod error;
pub mod fleet;
pub mod human;
pub mod outpath;
pub mod period;
pub mod policy;
pub mod polled;
pub mod quantity;
pub mod registry;
pub mod scrubplan;
pub mod service;
pub mod settings;
pub mod sim;
pub mod stats;
pub mod trace;
pub mod tune;
pub mod units;
pub mod workload;

/// `docs/extending.md`, whose worked examples (a complete policy file and
/// a complete reader file) CI compiles and runs as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/extending.md")]
pub mod extending {}

pub use characterize::{characterize, long_gaps, Characterization, CharacterizeOptions, LongGap};
pub use error::{Error, Location, Result};
pub use period::Periods;
pub use service::ServiceModel;
pub use trace::{read_trace, ReadOptions, Trace};
