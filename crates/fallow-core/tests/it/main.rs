//! Integration tests of `fallow-core`, one module per area.

mod queueing;
mod readers;
mod sim;
