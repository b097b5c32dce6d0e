//! Wording a new user meets in the first hour (issue 17 item 7): a `.fbt`
//! converted with --skip-bad says what it lost in a whole sentence, and
//! counts of one are singular.

use crate::common;

use common::{fallow, fixture, path_str, stderr};

#[test]
fn a_converted_trace_says_what_it_skipped_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let fbt = dir.path().join("b.fbt");
    let o = fallow(&[
        "convert",
        path_str(&fixture("broken.csv")),
        "-o",
        path_str(&fbt),
        "--skip-bad",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // reading the source: the count, singular, and the one reason
    let err = stderr(&o);
    assert!(
        err.contains("skipped 1 malformed record (--skip-bad); it was:"),
        "{err}"
    );
    assert!(err.contains("line 4"), "{err}");
    // reading the cache: no dangling "the first:" with nothing after it
    let o = fallow(&["analyze", path_str(&fbt)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("malformed"))
        .unwrap_or_else(|| panic!("no word of the skipped record: {err}"));
    assert!(!line.trim_end().ends_with(':'), "{line}");
    assert!(
        line.contains("1 malformed record was skipped when this trace was converted"),
        "{line}"
    );
    // the summary: "1 malformed record skipped", never "1 ... records"
    let out = common::stdout(&o);
    assert!(out.contains("1 malformed record skipped"), "{out}");
    assert!(!out.contains("1 malformed records"), "{out}");
}
