//! Every reader on small hand-made files whose expected columns are worked
//! out by hand from the fixture text (or from `make_fixtures.py`).

use super::{assert_mentions, error, fixture, read, read_skipping};
use fallow_core::trace::{read_from, read_trace, write_fallow_bin, Format, Op, ReadOptions};
use fallow_core::Error;
use std::path::Path;

const R: Op = Op::Read;
const W: Op = Op::Write;
const MS: u64 = 1_000_000;

#[test]
fn plain_small() {
    let t = read("small.trace");
    assert_eq!(t.report().format, Some(Format::Plain));
    // 0.5, 1.25, 1.25, 10 ms, rebased to the first arrival
    assert_eq!(t.arrival_ns(), &[0, 750_000, 750_000, 9_500_000]);
    assert_eq!(t.report().origin_ns, 500_000);
    assert_eq!(t.completion_ns(), None);
    assert_eq!(t.offset_bytes(), &[4096, 8192, 0, 1_048_576]);
    assert_eq!(t.size_bytes(), &[4096, 512, 65536, 4096]);
    assert_eq!(t.op(), &[R, W, R, W]);
    assert_eq!(t.device(), &[0, 0, 1, 1]);
    assert_eq!(t.report().reordered, 0);
}

#[test]
fn out_of_order_arrivals_are_sorted_and_reported() {
    let t = read("out_of_order.trace");
    // file order 3 1 2 5 4 ms; 1, 2 and 4 arrive before an earlier line's time
    assert_eq!(t.arrival_ns(), &[0, MS, 2 * MS, 3 * MS, 4 * MS]);
    assert_eq!(t.offset_bytes(), &[512, 1024, 0, 2048, 1536]);
    assert_eq!(t.op(), &[R, W, R, R, W]);
    assert_eq!(t.report().reordered, 3);
    assert_eq!(t.report().origin_ns, MS);
}

#[test]
fn bad_field_names_file_line_and_field() {
    let (e, msg) = error("bad_field.trace", false);
    assert!(matches!(e, Error::Record { .. }));
    assert_mentions(&msg, &["bad_field.trace", "line 3", "field `size`", "abc"]);

    let t = read_skipping("bad_field.trace");
    assert_eq!(t.len(), 3);
    let r = t.report();
    assert_eq!(r.skipped, 2);
    assert_eq!(r.skip_examples.len(), 2);
    assert_mentions(&r.skip_examples[1], &["line 4", "field `op`", "`x`"]);
    assert_eq!(t.offset_bytes(), &[0, 512, 2048]);
}

#[test]
fn negative_timestamp() {
    let (_, msg) = error("negative_time.trace", false);
    assert_mentions(
        &msg,
        &["negative_time.trace", "line 2", "field `time`", "negative"],
    );
    let t = read_skipping("negative_time.trace");
    assert_eq!((t.len(), t.report().skipped), (1, 1));
}

#[test]
fn empty_and_unknown_files() {
    let (e, msg) = error("empty.trace", false);
    assert!(matches!(e, Error::Empty { .. }), "{msg}");
    assert_mentions(&msg, &["empty.trace", "empty"]);

    let (e, msg) = error("unknown.txt", false);
    assert!(matches!(e, Error::UnknownFormat { .. }), "{msg}");
    assert_mentions(&msg, &["unknown.txt", "hello world", "--format"]);

    let (e, msg) = error("unknown.bin", false);
    assert!(matches!(e, Error::UnknownFormat { .. }), "{msg}");
    assert_mentions(&msg, &["unknown.bin", "200 bytes of binary data"]);
}

#[test]
fn all_records_bad_is_empty_with_the_first_reason() {
    // Forced to plain, every SPC line is malformed (the size column holds
    // the opcode letter): with skip_bad nothing is left.
    let opts = ReadOptions {
        format: Some(Format::Plain),
        skip_bad: true,
        ..Default::default()
    };
    let e = read_trace(fixture("small.spc"), &opts)
        .unwrap_err()
        .to_string();
    assert_mentions(
        &e,
        &[
            "small.spc",
            "4 malformed records skipped",
            "line 1",
            "field `size`",
        ],
    );
}

#[test]
fn spc_small() {
    let t = read("small.spc");
    assert_eq!(t.report().format, Some(Format::Spc));
    assert_eq!(t.arrival_ns(), &[0, 6_474_000, 26_332_000, 1_500_000_000]);
    assert_eq!(
        t.offset_bytes(),
        &[303_567 * 512, 303_574 * 512, 1000 * 512, 2000 * 512]
    );
    assert_eq!(t.size_bytes(), &[3584, 3584, 512, 8192]);
    assert_eq!(t.op(), &[W, R, R, W]);
    assert_eq!(t.device(), &[0, 0, 1, 1]);
    assert_eq!(t.completion_ns(), None);
}

/// The Alibaba Cloud layout (docs/formats.md), values worked out by hand from
/// the fixture's lines (µs → ns, arrivals sorted across volumes, volume
/// ids kept as device ids).
#[test]
fn alibaba_small() {
    let t = read("small.alibaba.csv");
    assert_eq!(t.report().format.map(|f| f.name()), Some("alibaba"));
    // rebased to the first arrival (…800000009 µs): +0, +99,991 µs, …
    assert_eq!(t.arrival_ns(), &[0, 99_991_000, 249_991_000, 1_499_991_000]);
    assert_eq!(t.device(), &[419, 17, 419, 17]);
    assert_eq!(t.offset_bytes(), &[8_171_520, 0, 8_175_616, 1_048_576]);
    assert_eq!(t.size_bytes(), &[4096, 512, 8192, 65536]);
    assert_eq!(t.op(), &[W, R, R, W]);
    assert_eq!(t.completion_ns(), None);
}

/// The Tencent CBS layout: whole seconds, 512-byte sectors,
/// IOType 0 = read, the volume id as the device id.
#[test]
fn tencent_small() {
    let t = read("small.tencent.csv");
    assert_eq!(t.report().format.map(|f| f.name()), Some("tencent"));
    assert_eq!(t.arrival_ns(), &[0, 0, 1_000_000_000, 3_000_000_000]);
    assert_eq!(t.device(), &[1063, 1063, 7, 7]);
    assert_eq!(t.offset_bytes(), &[2048 * 512, 4096 * 512, 0, 100 * 512]);
    assert_eq!(t.size_bytes(), &[4096, 8192, 512, 256 * 512]);
    assert_eq!(t.op(), &[R, W, R, W]);
    assert_eq!(t.completion_ns(), None);
}

#[test]
fn spc_non_numeric() {
    let (_, msg) = error("non_numeric.spc", false);
    assert_mentions(&msg, &["non_numeric.spc", "line 2", "field `lba`", "x12"]);
}

#[test]
fn blkparse_small() {
    let t = read("small.blkparse");
    assert_eq!(t.report().format, Some(Format::Blkparse));
    let sda = 8 << 20; // 8,0
    let sdb = (8 << 20) | 16; // 8,16
                              // D events at 10 µs, 20 µs, 2 ms, 3.2 ms (the 3.0 ms one was requeued)
    assert_eq!(t.arrival_ns(), &[0, 10_000, 1_990_000, 3_190_000]);
    assert_eq!(t.report().origin_ns, 10_000);
    assert_eq!(
        t.completion_ns().unwrap(),
        &[990_000, 490_000, 2_090_000, 3_890_000]
    );
    assert_eq!(
        t.offset_bytes(),
        &[2048 * 512, 4096 * 512, 100 * 512, 8192 * 512]
    );
    assert_eq!(t.size_bytes(), &[4096, 8192, 4096, 4096]);
    assert_eq!(t.op(), &[R, W, W, R]);
    assert_eq!(t.device(), &[sda, sda, sdb, sda]);
    // 19 lines, 8 used (4 D + 4 C): Q, G, the flush D and C, the requeued D,
    // the R event, the C without D, the D without C, the m message and two
    // summary lines are ignored.
    assert_eq!(t.report().ignored, 11);
    // completions came out of issue order, but issues were in order
    assert_eq!(t.report().reordered, 0);
}

#[test]
fn blkparse_completion_before_issue() {
    // Events are matched in time order (lines out of order are sorted), so
    // a completion timed before its issue cannot be that issue's: both are
    // unmatched, and the message says so rather than "no requests".
    let (_, msg) = error("completion_before_issue.blkparse", false);
    assert_mentions(
        &msg,
        &[
            "completion_before_issue.blkparse",
            "no requests",
            "1 blkparse: completion without a pending issue",
            "1 blkparse: issue without a completion",
        ],
    );
}

#[test]
fn hp_srt_small() {
    let t = read("small.srt");
    assert_eq!(t.report().format, Some(Format::HpSrt));
    // r5 (99.999999 s) sorts before r1 (100.5), r2 (100.51), r3 (101.0)
    assert_eq!(t.report().origin_ns, 99_999_999_000);
    assert_eq!(
        t.arrival_ns(),
        &[0, 500_001_000, 510_001_000, 1_000_001_000]
    );
    assert_eq!(
        t.completion_ns().unwrap(),
        &[1_000_000, 520_001_000, 515_001_000, 1_030_001_000]
    );
    assert_eq!(t.device(), &[0, 0, 1, 0]);
    assert_eq!(t.op(), &[W, R, W, R]);
    assert_eq!(t.size_bytes(), &[2048, 4096, 8192, 1024]);
    assert_eq!(
        t.offset_bytes(),
        &[77 * 512, 1000 * 512, 2000 * 512, 3 * 512]
    );
    assert_eq!(t.report().reordered, 1);
    assert_eq!(t.report().ignored, 1); // the suspect record
}

#[test]
fn hp_srt_truncated_record() {
    let (_, msg) = error("truncated.srt", false);
    assert_mentions(
        &msg,
        &[
            "truncated.srt",
            "byte offset 160",
            "field `sectno`",
            "30 of 52 bytes",
        ],
    );
    let t = read_skipping("truncated.srt");
    assert_eq!((t.len(), t.report().skipped), (2, 1));
}

#[test]
fn hp_srt_bad_usec_and_bad_size() {
    let (_, msg) = error("bad_usec.srt", false);
    assert_mentions(&msg, &["bad_usec.srt", "byte offset 104", "field `usec`"]);
    let t = read_skipping("bad_usec.srt");
    assert_eq!((t.len(), t.report().skipped), (2, 1));
    // A bad length cannot be skipped: the next record's start is unknown.
    let (_, msg) = error("bad_size.srt", true);
    assert_mentions(
        &msg,
        &["bad_size.srt", "byte offset 104", "field `size`", "5000"],
    );
}

#[test]
fn vscsi_small() {
    let t = read("small.vscsi");
    assert_eq!(t.report().format, Some(Format::Vscsi));
    // ts 999,000 µs (record 4) comes first; then 1.0 s, 1.0005 s, 1.002 s
    assert_eq!(t.report().origin_ns, 999_000_000);
    assert_eq!(t.arrival_ns(), &[0, 1_000_000, 1_500_000, 3_000_000]);
    assert_eq!(
        t.offset_bytes(),
        &[300 * 512, 100 * 512, 200 * 512, 400 * 512]
    );
    assert_eq!(t.size_bytes(), &[512, 4096, 8192, 65536]);
    assert_eq!(t.op(), &[R, R, W, W]);
    assert_eq!(t.device(), &[0, 0, 0, 0]);
    assert_eq!(t.report().ignored, 1); // SYNCHRONIZE CACHE
    assert_eq!(t.report().reordered, 1);
}

#[test]
fn vscsi_truncated_and_bad_version() {
    let (_, msg) = error("truncated.vscsi", false);
    assert_mentions(
        &msg,
        &[
            "truncated.vscsi",
            "byte offset 64",
            "field `lbn`",
            "20 of 32 bytes",
        ],
    );
    let (_, msg) = error("bad_version.vscsi", false);
    assert_mentions(
        &msg,
        &[
            "bad_version.vscsi",
            "byte offset 32",
            "field `ver`",
            "version 3",
        ],
    );
    let t = read_skipping("bad_version.vscsi");
    assert_eq!((t.len(), t.report().skipped), (2, 1));
}

#[test]
fn fallow_small() {
    let t = read("small.fallow");
    let r = t.report();
    assert_eq!(r.format, Some(Format::Fallow));
    assert_eq!(r.source_format, Some(Format::HpSrt));
    assert_eq!(
        (r.origin_ns, r.skipped, r.reordered, r.ignored),
        (1_000_000_000, 4, 5, 6)
    );
    assert_eq!(t.arrival_ns(), &[0, 1000, 5000]);
    assert_eq!(t.completion_ns().unwrap(), &[700, 9000, 5001]);
    assert_eq!(t.offset_bytes(), &[0, 4096, 1 << 40]);
    assert_eq!(t.size_bytes(), &[4096, 512, 131_072]);
    assert_eq!(t.op(), &[R, W, R]);
    assert_eq!(t.device(), &[0, 0, 7]);
}

#[test]
fn fallow_truncated_and_bad_completion() {
    // Truncation is fatal even when skipping: the later columns are missing.
    let (_, msg) = error("truncated.fallow", true);
    assert_mentions(
        &msg,
        &[
            "truncated.fallow",
            "byte offset 124",
            "field `offset_bytes`",
            "1 of 3 values",
        ],
    );
    let (_, msg) = error("bad_completion.fallow", false);
    assert_mentions(
        &msg,
        &[
            "bad_completion.fallow",
            "byte offset 96",
            "field `completion_ns`",
            "500 ns before",
        ],
    );
    let t = read_skipping("bad_completion.fallow");
    assert_eq!(t.arrival_ns(), &[0, 5000]);
    assert_eq!(t.report().skipped, 4 + 1);
}

#[test]
fn forced_format_mismatch_is_an_error() {
    let opts = ReadOptions {
        format: Some(Format::HpSrt),
        ..Default::default()
    };
    let e = read_trace(fixture("small.vscsi"), &opts)
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["small.vscsi", "byte offset 0", "field `size`"]);
    let opts = ReadOptions {
        format: Some(Format::Fallow),
        ..Default::default()
    };
    let e = read_trace(fixture("small.trace"), &opts)
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["small.trace", "byte offset 0", "field `magic`"]);
}

#[test]
fn gzip_is_transparent() {
    let raw = std::fs::read(fixture("small.spc")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &raw).unwrap();
    let dir = std::env::temp_dir().join(format!("fallow-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("small.spc.gz");
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    let t = read_trace(&path, &ReadOptions::default()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(t.report().format, Some(Format::Spc));
    assert_eq!(t.len(), 4);
}

#[test]
fn fixtures_round_trip_through_fallow_bin() {
    for name in [
        "small.trace",
        "out_of_order.trace",
        "small.spc",
        "small.blkparse",
        "small.srt",
        "small.vscsi",
        "small.fallow",
    ] {
        let t = read(name);
        let mut bin = Vec::new();
        write_fallow_bin(&t, &mut bin).unwrap();
        let back = read_from(&mut &bin[..], Path::new(name), &ReadOptions::default()).unwrap();
        assert_eq!(back.arrival_ns(), t.arrival_ns(), "{name}");
        assert_eq!(back.completion_ns(), t.completion_ns(), "{name}");
        assert_eq!(back.offset_bytes(), t.offset_bytes(), "{name}");
        assert_eq!(back.size_bytes(), t.size_bytes(), "{name}");
        assert_eq!(back.op(), t.op(), "{name}");
        assert_eq!(back.device(), t.device(), "{name}");
        let (a, b) = (t.report(), back.report());
        assert_eq!(
            (b.origin_ns, b.skipped, b.reordered, b.ignored),
            (a.origin_ns, a.skipped, a.reordered, a.ignored),
            "{name}"
        );
        assert_eq!(b.source_format, a.source_format.or(a.format), "{name}");
    }
}
