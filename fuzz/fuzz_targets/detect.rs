//! Format detection, then whichever reader it picks, on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fallow_fuzz::read_as(None, data));
