//! `fallow convert` of an MSR file of several hosts to fallow's binary
//! cache loses nothing (issue 12): the devices keep their `host:disk`
//! names, and `--device rsrch:0` selects the same requests from the cache
//! as from the CSV.
//!
//! two_hosts.csv: `hm,0` at 0 and 20 ms, `rsrch,0` at 10, 30 and 40 ms,
//! each taking 1 ms; rsrch:0 alone is idle 11→30 and 31→40 ms.

use crate::common;

use common::{assert_close, bad_input, fallow, fixture, json, num, path_str};

#[test]
fn msr_host_names_survive_a_convert() {
    let d = tempfile::tempdir().unwrap();
    let fbt = d.path().join("two_hosts.fbt");
    let csv = fixture("two_hosts.csv");
    let o = fallow(&["convert", path_str(&csv), "-o", path_str(&fbt)]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    for input in [&csv, &fbt] {
        let v = json(&["analyze", path_str(input), "--device", "rsrch:0"]);
        assert_eq!(
            v["trace"]["devices"],
            serde_json::json!([
                {"id": 0, "requests": 2, "name": "hm:0"},
                {"id": 16777216, "requests": 3, "name": "rsrch:0"}
            ]),
            "{}",
            input.display()
        );
        assert_eq!(v["trace"]["requests"], 3);
        assert_eq!(v["idle"]["count"], 2);
        assert_close(num(&v, "idle.mean_s"), 0.014, 1e-12);
        // a plain 0 is as ambiguous in the cache as in the CSV
        bad_input(
            &["analyze", path_str(input), "--device", "0"],
            &["disk 0 is on several hosts", "hm:0", "rsrch:0"],
        );
    }
    let v = json(&["analyze", path_str(&fbt), "--device", "hm:0"]);
    assert_eq!(v["trace"]["format"], "fallow");
    assert_eq!(v["trace"]["requests"], 2);
}
