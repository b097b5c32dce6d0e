//! Parquet and Arrow IPC from the command line (docs/formats.md): `fallow convert
//! -o x.parquet / x.arrow / x.arrows` and `fallow analyze` of each give the
//! same answers as the CSV they came from (two_hosts.csv: `hm,0` at 0 and
//! 20 ms, `rsrch,0` at 10, 30 and 40 ms, each taking 1 ms; rsrch:0 alone
//! is idle 11→30 and 31→40 ms, mean 14 ms), MSR host names included; a
//! Parquet file fallow did not write is not replaced without --overwrite.
//! Without the `arrow` feature, both are refused naming it (exit 2).

use crate::common::{self, bad_input, fallow, fixture, path_str};

#[cfg(feature = "arrow")]
#[test]
fn convert_to_parquet_and_arrow_and_analyze_them() {
    use crate::common::{assert_close, json, num};
    let d = tempfile::tempdir().unwrap();
    let csv = fixture("two_hosts.csv");
    for (name, format) in [
        ("t.parquet", "parquet"),
        ("t.arrow", "arrow"),
        ("t.arrows", "arrow"),
    ] {
        let out = d.path().join(name);
        let o = fallow(&["convert", path_str(&csv), "-o", path_str(&out)]);
        assert!(o.status.success(), "{name}: {}", common::stderr(&o));
        let v = json(&["analyze", path_str(&out), "--device", "rsrch:0"]);
        assert_eq!(v["trace"]["format"], format, "{name}");
        assert_eq!(
            v["trace"]["devices"],
            serde_json::json!([
                {"id": 0, "requests": 2, "name": "hm:0"},
                {"id": 16777216, "requests": 3, "name": "rsrch:0"}
            ]),
            "{name}"
        );
        assert_eq!(v["trace"]["requests"], 3, "{name}");
        assert_eq!(v["idle"]["count"], 2, "{name}");
        assert_close(num(&v, "idle.mean_s"), 0.014, 1e-12);
        // fallow's own output is replaced without asking
        let again = fallow(&["convert", path_str(&csv), "-o", path_str(&out)]);
        assert!(again.status.success(), "{name}: {}", common::stderr(&again));
        // and a cache of it keeps going: parquet → fbt → analyze
        let fbt = d.path().join(format!("{name}.fbt"));
        let o = fallow(&["convert", path_str(&out), "-o", path_str(&fbt)]);
        assert!(o.status.success(), "{name}: {}", common::stderr(&o));
        let v = json(&["analyze", path_str(&fbt), "--device", "hm:0"]);
        assert_eq!(v["trace"]["requests"], 2, "{name}");
    }
}

#[cfg(feature = "arrow")]
#[test]
fn a_parquet_file_fallow_did_not_write_is_kept() {
    let d = tempfile::tempdir().unwrap();
    let theirs = d.path().join("theirs.parquet");
    // any Parquet file without fallow's metadata (here: a header and a tail)
    std::fs::write(&theirs, b"PAR1 someone else's data PAR1").unwrap();
    bad_input(
        &[
            "convert",
            path_str(&fixture("two_hosts.csv")),
            "-o",
            path_str(&theirs),
        ],
        &["theirs.parquet", "--overwrite"],
    );
    assert_eq!(
        std::fs::read(&theirs).unwrap(),
        b"PAR1 someone else's data PAR1"
    );
}

#[cfg(feature = "arrow")]
#[test]
fn an_arrow_file_without_arrival_names_the_column() {
    let d = tempfile::tempdir().unwrap();
    // an IPC stream: its schema message holds the name once, in clear
    let out = d.path().join("t.arrows");
    let o = fallow(&[
        "convert",
        path_str(&fixture("two_hosts.csv")),
        "-o",
        path_str(&out),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    // rename the column in place: same length, so the file stays valid
    let mut bytes = std::fs::read(&out).unwrap();
    let mut renamed = 0;
    for i in 0..bytes.len() - 10 {
        if &bytes[i..i + 10] == b"arrival_ns" {
            bytes[i..i + 10].copy_from_slice(b"arrival_xx");
            renamed += 1;
        }
    }
    assert!(renamed > 0);
    std::fs::write(&out, &bytes).unwrap();
    bad_input(
        &["analyze", path_str(&out)],
        &["t.arrows", "no `arrival_ns` column"],
    );
}

#[cfg(not(feature = "arrow"))]
#[test]
fn without_the_feature_parquet_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.parquet");
    std::fs::write(&p, b"PAR1\x15\x04 not read PAR1").unwrap();
    bad_input(
        &["analyze", path_str(&p)],
        &["x.parquet", "`arrow` cargo feature"],
    );
    let out = d.path().join("y.arrow");
    bad_input(
        &[
            "convert",
            path_str(&fixture("two_hosts.csv")),
            "-o",
            path_str(&out),
        ],
        &["`arrow` cargo feature"],
    );
    assert!(!out.exists());
}
