//! Numbers for people: the core's formatters ([`fallow_core::human`]),
//! which the findings use too, so the terminal, the findings, the HTML
//! report and Python agree.

pub use fallow_core::human::*;
