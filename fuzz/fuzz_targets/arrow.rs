//! The `arrow` reader on arbitrary bytes (format forced).
#![no_main]
use fallow_core::trace::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fallow_fuzz::read_as(Some(Format::Arrow), data));
