//! Integration tests of `fallow-core`, one module per area.

mod readers;
mod queueing;
