//! Every reader of the format registry on the same arbitrary bytes (format
//! forced, one after the other), so a format added to the registry is
//! fuzzed without a target of its own.
#![no_main]
use fallow_core::trace::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for format in Format::all() {
        fallow_fuzz::read_as(Some(format), data);
    }
});
