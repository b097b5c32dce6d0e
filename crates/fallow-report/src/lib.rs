//! fallow's HTML pages: one self-contained file each (inline CSS and SVG,
//! no scripts, no external fonts), rendered from the core's reports as
//! plain data. The CLI (`--html`) and Python (`html=`) write the same
//! bytes through these functions.
//!
//! One file per page ([`analysis`], [`compare`], [`pareto`], [`energy`],
//! [`fleet`], and the demo's [`decision`] that opens its page), over the
//! shared header and footer ([`page`]), the plots of the characterisation
//! ([`plots`]) and the SVG plotting module ([`svg`]). [`describe`] and
//! [`energy_text`] put an input and an energy run into words, for the
//! pages and the CLI's terminal output alike. No module imports one above
//! it (`crates/fallow-core/tests/layers.rs`).

pub mod analysis;
pub mod compare;
pub mod decision;
pub mod describe;
pub mod energy;
pub mod energy_text;
pub mod fleet;
pub mod page;
pub mod pareto;
pub mod plots;
pub mod svg;
