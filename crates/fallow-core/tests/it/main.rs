//! Integration tests of `fallow-core`, one module per area.

mod busy_periods;
mod defaults;
mod energy;
mod fast_sweep;
mod long_gaps;
mod pareto;
mod per_device;
mod policies_bb;
mod policies_et;
mod policies_mi;
mod queueing;
mod readers;
mod retune;
mod sim;
mod tune;
mod tune_exact;
