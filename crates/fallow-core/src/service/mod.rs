//! Service models: how long the device takes to serve one request, for the
//! FG workload ([`ServiceModel`], with the FCFS queue that turns arrivals
//! into completions, [`fcfs_completions`]) and for background work
//! ([`BgService`], with how much of it there is, [`BgWork`]).
//!
//! The lowest layer above the trace: periods, workloads, policies and both
//! simulators read these models; they import nothing of those.

mod bg;
mod fg;

pub use bg::{
    BatchGaps, BgService, BgWork, Burst, Schedule, ScheduledBurst, MAX_SPAWNED_BG_REQUESTS,
};
pub use fg::{
    fcfs_completions, fcfs_completions_cancellable, DiskModel, Draws, ServiceModel, ServiceSampler,
};
