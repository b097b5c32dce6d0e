//! What every fuzz target does: read the input as one format (or with
//! detection), both failing on and skipping bad records. Reading may fail,
//! never panic. A trace that reads must survive a round trip through
//! fallow's binary cache unchanged.

use fallow_core::trace::{read_from, write_fallow_bin, Format, ReadOptions};
use std::path::Path;

/// Read `data` as `format` (`None`: detect it) and check the round trip.
pub fn read_as(format: Option<Format>, data: &[u8]) {
    for skip_bad in [false, true] {
        let opts = ReadOptions {
            format,
            skip_bad,
            ..Default::default()
        };
        let Ok(t) = read_from(&mut &data[..], Path::new("fuzz"), &opts) else {
            continue;
        };
        let mut bin = Vec::new();
        write_fallow_bin(&t, &mut bin).expect("writing to memory cannot fail");
        let back = read_from(
            &mut &bin[..],
            Path::new("fuzz.fallow"),
            &ReadOptions::default(),
        )
        .expect("a written trace reads back");
        assert_eq!(back.arrival_ns(), t.arrival_ns());
        assert_eq!(back.completion_ns(), t.completion_ns());
        assert_eq!(back.offset_bytes(), t.offset_bytes());
        assert_eq!(back.size_bytes(), t.size_bytes());
        assert_eq!(back.op(), t.op());
        assert_eq!(back.device(), t.device());
        assert_eq!(back.report().origin_ns, t.report().origin_ns);
        // MSR host names too (`hm:0` and `rsrch:0` stay two named devices)
        assert_eq!(back.report().hosts, t.report().hosts);
    }
}
