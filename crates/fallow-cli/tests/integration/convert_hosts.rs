//! `fallow convert` of an MSR file of several hosts to fallow's binary
//! cache loses nothing: the devices keep their `host:disk`
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

/// `-o out.csv` writes MSR CSV through the core's registered writer, never
/// fallow's binary format: the text starts with the MSR header, keeps the
/// hosts, and reads back as the same trace (every analysis figure equal).
#[test]
fn a_csv_output_is_msr_csv_that_reads_back_the_same() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("again.csv");
    let csv = fixture("two_hosts.csv");
    let o = fallow(&["convert", path_str(&csv), "-o", path_str(&out)]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = std::fs::read_to_string(&out).expect("MSR CSV is text");
    assert!(
        text.starts_with("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n"),
        "{text}"
    );
    assert!(
        text.contains(",rsrch,0,") && text.contains(",hm,0,"),
        "{text}"
    );
    for device in ["hm:0", "rsrch:0"] {
        let mut a = json(&["analyze", path_str(&csv), "--device", device]);
        let mut b = json(&["analyze", path_str(&out), "--device", device]);
        assert_eq!(b["trace"]["format"], "msr");
        for v in [&mut a, &mut b] {
            v["trace"]["path"] = serde_json::Value::Null;
        }
        assert_eq!(a, b, "{device}");
    }
    // a trace without completion times is refused, naming the remedy
    let plain = d.path().join("p.trace");
    std::fs::write(&plain, "0 0 0 4096 R\n5 0 4096 4096 W\n").unwrap();
    bad_input(
        &[
            "convert",
            path_str(&plain),
            "--format",
            "plain",
            "-o",
            path_str(&d.path().join("p.csv")),
        ],
        &["no completion times", "--completion-column"],
    );
}
