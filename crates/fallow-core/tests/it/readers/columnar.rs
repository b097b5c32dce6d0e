//! Parquet and Arrow IPC (feature `arrow`). Round trips two ways: files
//! written here with the arrow crates directly (the documented columns, in
//! the types pandas and polars use: int64, timestamp[us], duration, bool,
//! dictionary strings; snappy and zstd) read back through detection; and
//! fallow's own writer (`write_columnar`) read back unchanged, MSR host
//! names included. Then the errors: they name the file and the column or
//! record, and nothing panics on a cut or forged file.
//!
//! Without the feature, the one test here checks that such a file is
//! refused naming the feature.

#[cfg(not(feature = "arrow"))]
#[test]
fn without_the_feature_a_parquet_file_is_refused_naming_it() {
    use fallow_core::trace::{read_from, ReadOptions};
    let e = read_from(
        &mut &b"PAR1\x15\x04rest-of-file"[..],
        std::path::Path::new("x.parquet"),
        &ReadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("x.parquet") && e.contains("`arrow` cargo feature"),
        "{e}"
    );
}

#[cfg(feature = "arrow")]
mod with_arrow {
    use arrow_array::types::Int32Type;
    use arrow_array::{
        ArrayRef, BooleanArray, DictionaryArray, DurationNanosecondArray, Int64Array, RecordBatch,
        StringArray, TimestampMicrosecondArray, UInt32Array, UInt64Array,
    };
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    use fallow_core::trace::{read_from, write_columnar, ColumnarKind, Format, Op, ReadOptions};
    use fallow_core::Trace;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    use proptest::prelude::*;
    use std::path::Path;
    use std::sync::Arc;

    const KINDS: [ColumnarKind; 3] = [
        ColumnarKind::Parquet,
        ColumnarKind::ArrowFile,
        ColumnarKind::ArrowStream,
    ];

    fn read(bytes: &[u8]) -> fallow_core::Result<Trace> {
        read_from(&mut &bytes[..], Path::new("t.col"), &ReadOptions::default())
    }

    /// A written file of `batch` in `kind`, by the arrow crates directly.
    fn foreign(batch: &RecordBatch, kind: ColumnarKind, snappy: bool) -> Vec<u8> {
        let mut out = Vec::new();
        match kind {
            ColumnarKind::Parquet => {
                let c = if snappy {
                    Compression::SNAPPY
                } else {
                    Compression::ZSTD(ZstdLevel::default())
                };
                let props = WriterProperties::builder().set_compression(c).build();
                let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
                w.write(batch).unwrap();
                w.close().unwrap();
            }
            ColumnarKind::ArrowFile => {
                let mut w =
                    arrow_ipc::writer::FileWriter::try_new(&mut out, &batch.schema()).unwrap();
                w.write(batch).unwrap();
                w.finish().unwrap();
            }
            ColumnarKind::ArrowStream => {
                let mut w =
                    arrow_ipc::writer::StreamWriter::try_new(&mut out, &batch.schema()).unwrap();
                w.write(batch).unwrap();
                w.finish().unwrap();
            }
        }
        out
    }

    /// (arrival µs, service ns, offset, size, write, host index, disk)
    type Row = (i64, i64, i64, u32, bool, usize, u32);

    fn rows() -> impl Strategy<Value = Vec<Row>> {
        prop::collection::vec(
            (
                0i64..1_000_000_000,
                0i64..50_000_000,
                0i64..(1 << 40),
                0u32..(1 << 20),
                any::<bool>(),
                0usize..3,
                0u32..4,
            ),
            1..60,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// A frame as pandas or polars would write it (a datetime arrival in
        /// µs, a duration of ns since the epoch for completion, int64
        /// offsets, a categorical host) reads as the same requests, sorted.
        #[test]
        fn foreign_files_read_as_written(rows in rows(), kind in 0usize..3, snappy in any::<bool>()) {
            const HOSTS: [&str; 3] = ["hm", "rsrch", "src1"];
            let arrival_us: Vec<i64> = rows.iter().map(|r| r.0).collect();
            let completion_ns: Vec<i64> = rows.iter().map(|r| r.0 * 1_000 + r.1).collect();
            let host_keys: Vec<i32> = rows.iter().map(|r| r.5 as i32).collect();
            let schema = Arc::new(Schema::new(vec![
                Field::new("arrival_ns", DataType::Timestamp(TimeUnit::Microsecond, None), false),
                Field::new("completion_ns", DataType::Duration(TimeUnit::Nanosecond), false),
                Field::new("offset_bytes", DataType::Int64, false),
                Field::new("size_bytes", DataType::UInt32, false),
                Field::new("is_write", DataType::Boolean, false),
                Field::new("device", DataType::Int64, false),
                Field::new("host", DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)), false),
                Field::new("ignored", DataType::Utf8, true),
            ]));
            let hosts: DictionaryArray<Int32Type> = DictionaryArray::new(
                host_keys.into(),
                Arc::new(StringArray::from(HOSTS.to_vec())),
            );
            let cols: Vec<ArrayRef> = vec![
                Arc::new(TimestampMicrosecondArray::from(arrival_us.clone())),
                Arc::new(DurationNanosecondArray::from(completion_ns.clone())),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
                Arc::new(UInt32Array::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
                Arc::new(BooleanArray::from(rows.iter().map(|r| r.4).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.6 as i64).collect::<Vec<_>>())),
                Arc::new(hosts),
                Arc::new(StringArray::from(vec![None::<&str>; rows.len()])),
            ];
            let batch = RecordBatch::try_new(schema, cols).unwrap();
            let bytes = foreign(&batch, KINDS[kind], snappy);
            let t = read(&bytes).unwrap();
            let want_format = if kind == 0 { Format::Parquet } else { Format::Arrow };
            prop_assert_eq!(t.report().format, Some(want_format));
            // The requests as (absolute ns, completion, offset, size, write, "host:disk").
            let mut want: Vec<(u64, u64, u64, u32, bool, String)> = rows.iter().map(|r| (
                r.0 as u64 * 1_000, (r.0 * 1_000 + r.1) as u64, r.2 as u64, r.3, r.4,
                format!("{}:{}", HOSTS[r.5], r.6),
            )).collect();
            want.sort();
            let origin = t.report().origin_ns;
            let mut got: Vec<(u64, u64, u64, u32, bool, String)> = (0..t.len()).map(|i| (
                t.arrival_ns()[i] + origin,
                t.completion_ns().unwrap()[i] + origin,
                t.offset_bytes()[i],
                t.size_bytes()[i],
                t.op()[i] == Op::Write,
                t.device_name(t.device()[i]).unwrap(),
            )).collect();
            got.sort();
            prop_assert_eq!(got, want);
            prop_assert_eq!((t.report().skipped, t.report().ignored), (0, 0));
        }

        /// fallow's writer and reader: every column, the origin and the
        /// source format survive, with and without completions.
        #[test]
        fn written_files_read_back_unchanged(
            rows in rows(),
            completions in any::<bool>(),
            kind in 0usize..3,
        ) {
            let t = Trace::from_columns(
                rows.iter().map(|r| 5_000 + r.0 as u64).collect(),
                completions.then(|| rows.iter().map(|r| 5_000 + (r.0 + r.1) as u64).collect()),
                rows.iter().map(|r| r.2 as u64).collect(),
                rows.iter().map(|r| r.3).collect(),
                rows.iter().map(|r| if r.4 { Op::Write } else { Op::Read }).collect(),
                rows.iter().map(|r| r.6 * 7).collect(),
            ).unwrap();
            let mut bytes = Vec::new();
            write_columnar(&t, KINDS[kind], &mut bytes).unwrap();
            let back = read(&bytes).unwrap();
            prop_assert_eq!(back.arrival_ns(), t.arrival_ns());
            prop_assert_eq!(back.completion_ns(), t.completion_ns());
            prop_assert_eq!(back.offset_bytes(), t.offset_bytes());
            prop_assert_eq!(back.size_bytes(), t.size_bytes());
            prop_assert_eq!(back.op(), t.op());
            prop_assert_eq!(back.device(), t.device());
            prop_assert_eq!(back.report().origin_ns, t.report().origin_ns);
        }
    }

    /// An MSR file of two hosts with the same disk numbers: through
    /// Parquet and Arrow it keeps two devices named `hm:0` and `rsrch:0`,
    /// the same ids and the source format.
    #[test]
    fn msr_hosts_survive_a_round_trip() {
        // `rsrch` first in the file but later in time: the host numbering
        // is by first appearance in the file, which sorting must not change.
        let csv = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
                   128166372000000100,rsrch,0,Write,8192,512,10\n\
                   128166372000000000,hm,0,Read,0,4096,20\n\
                   128166372000000200,hm,1,Read,0,4096,20\n";
        let t = read_from(
            &mut csv.as_bytes(),
            Path::new("m.csv"),
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(t.report().hosts, ["rsrch", "hm"]);
        for kind in KINDS {
            let mut bytes = Vec::new();
            write_columnar(&t, kind, &mut bytes).unwrap();
            let back = read(&bytes).unwrap();
            assert_eq!(back.device(), t.device(), "{kind:?}");
            assert_eq!(back.report().hosts, t.report().hosts, "{kind:?}");
            let labels: Vec<String> = back.devices().iter().map(|d| d.label()).collect();
            assert_eq!(labels, ["rsrch:0", "hm:0", "hm:1"], "{kind:?}");
            assert_eq!(back.report().source_format, Some(Format::Msr));
            assert_eq!(back.report().origin_ns, t.report().origin_ns);
        }
    }

    fn batch_of(fields: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(fields).unwrap()
    }

    #[test]
    fn errors_name_the_file_and_the_column_or_record() {
        let no_arrival = batch_of(vec![(
            "time",
            Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
        )]);
        let wrong_type = batch_of(vec![
            (
                "arrival_ns",
                Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
            ),
            ("size_bytes", Arc::new(StringArray::from(vec!["a", "b"]))),
        ]);
        let negative = batch_of(vec![
            (
                "arrival_ns",
                Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef,
            ),
            (
                "offset_bytes",
                Arc::new(Int64Array::from(vec![0, 0, -4096])),
            ),
        ]);
        let null = batch_of(vec![(
            "arrival_ns",
            Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef,
        )]);
        let too_big = batch_of(vec![
            (
                "arrival_ns",
                Arc::new(Int64Array::from(vec![1])) as ArrayRef,
            ),
            ("size_bytes", Arc::new(UInt64Array::from(vec![1u64 << 40]))),
        ]);
        for kind in KINDS {
            let cases: [(&RecordBatch, &[&str]); 5] = [
                (&no_arrival, &["t.col", "no `arrival_ns` column", "time"]),
                (&wrong_type, &["t.col", "column `size_bytes`", "Utf8"]),
                (
                    &negative,
                    &["t.col", "record 2", "`offset_bytes`", "negative"],
                ),
                (&null, &["t.col", "record 1", "`arrival_ns`", "null"]),
                (
                    &too_big,
                    &["t.col", "record 0", "`size_bytes`", "over 4294967295"],
                ),
            ];
            for (batch, words) in cases {
                let e = read(&foreign(batch, kind, false)).unwrap_err().to_string();
                for w in words {
                    assert!(e.contains(w), "{kind:?}: `{w}` not in: {e}");
                }
            }
        }
        // --skip-bad counts the bad record and keeps the rest
        let bytes = foreign(&negative, ColumnarKind::Parquet, true);
        let opts = ReadOptions {
            skip_bad: true,
            ..Default::default()
        };
        let t = read_from(&mut &bytes[..], Path::new("t.col"), &opts).unwrap();
        assert_eq!((t.len(), t.report().skipped), (2, 1));
    }

    /// Every prefix of a written file (and a few forged lengths) fails
    /// with an error, never a panic or an allocation of what it claims.
    #[test]
    fn cut_and_forged_files_are_errors() {
        let t = Trace::from_columns(
            (0..300).map(|i| i * 1_000).collect(),
            None,
            vec![4096; 300],
            vec![512; 300],
            vec![Op::Read; 300],
            vec![0; 300],
        )
        .unwrap();
        for kind in KINDS {
            let mut bytes = Vec::new();
            write_columnar(&t, kind, &mut bytes).unwrap();
            for cut in (1..bytes.len()).step_by(7) {
                // an error, or (a stream cut after whole batches) fewer rows
                if let Ok(back) = read(&bytes[..cut]) {
                    assert!(back.len() <= 300, "{kind:?} cut at {cut}");
                }
            }
            // forge every 4-byte little-endian field to a huge length
            for at in (0..bytes.len().saturating_sub(4)).step_by(4) {
                let mut forged = bytes.clone();
                forged[at..at + 4].copy_from_slice(&0x7fff_fff8u32.to_le_bytes());
                let _ = read(&forged);
            }
        }
    }

    /// A compressed Arrow buffer claiming to decompress to 1 TiB is refused
    /// before the decoder allocates it.
    #[test]
    fn implausible_decompressed_sizes_are_refused() {
        let batch = batch_of(vec![(
            "arrival_ns",
            Arc::new(Int64Array::from((0..1000).collect::<Vec<i64>>())) as ArrayRef,
        )]);
        let mut out = Vec::new();
        let opts = arrow_ipc::writer::IpcWriteOptions::default()
            .try_with_compression(Some(arrow_ipc::CompressionType::ZSTD))
            .unwrap();
        let mut w =
            arrow_ipc::writer::StreamWriter::try_new_with_options(&mut out, &batch.schema(), opts)
                .unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        assert_eq!(read(&out).unwrap().len(), 1000, "the honest file reads");
        // The compressed buffer's 8-byte length prefix says 8000: make it 1 TiB.
        let needle = 8000i64.to_le_bytes();
        let at = out
            .windows(8)
            .rposition(|w| w == needle)
            .expect("the decompressed length of the values buffer");
        out[at..at + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
        let e = read(&out).unwrap_err().to_string();
        assert!(e.contains("decompresses to more than"), "{e}");
    }

    /// The error reading the fixture `name`, which must name the file.
    fn refused_fixture(name: &str) -> String {
        let err =
            fallow_core::trace::read_trace(super::super::fixture(name), &ReadOptions::default())
                .expect_err("a corrupt file is an error")
                .to_string();
        assert!(err.contains(name), "{err}");
        err
    }

    /// The `arrow` fuzz target's first crash: a stream whose dictionary
    /// batch of 128-bit values has a buffer length that is not a multiple
    /// of 16, on which arrow 60 asserts inside `ArrayData` validation. It
    /// is an error naming the file and the decoder's complaint; the test
    /// binary (like the CLI) goes on.
    #[test]
    fn a_decoder_that_panics_on_a_corrupt_file_gives_an_error_naming_it() {
        use super::super::fixture;
        use fallow_core::trace::read_trace;
        let err = refused_fixture("corrupt-dictionary-width.arrows");
        assert!(err.contains("Arrow IPC data: malformed"), "{err}");
        assert!(err.contains("prefix.is_empty()"), "{err}");
        // and a good file read afterwards on the same thread still reads
        let good = read_trace(fixture("polars.arrows"), &ReadOptions::default()).unwrap();
        assert_eq!(good.len(), 5);
    }

    /// The `parquet` fuzz target's out-of-memory input (2,281 bytes): a
    /// page header parquet 60 read as a dictionary of about 800 million
    /// values, sizing a 6 GiB buffer before reading a value. The page
    /// headers are now read before decoding and the file is refused,
    /// naming the row group, column and byte of the page.
    #[test]
    fn a_page_header_claiming_more_values_than_its_bytes_is_refused() {
        let err = refused_fixture("oom-dictionary-count.parquet");
        // its second column's header has a field of the wrong type (3, the
        // compressed size, as a boolean), which parquet read past; the
        // dictionary-count rule itself is tested in trace::parquet's tests
        assert!(
            err.contains("Parquet page header: row group 0, column 1, byte 178"),
            "{err}"
        );
    }

    /// Files written by pandas (pyarrow, snappy, datetime64[ns] arrivals),
    /// polars (zstd, categorical hosts, IPC file and stream) and pyarrow's
    /// feather (lz4): `tests/data/traces/make_columnar_fixtures.py`, whose
    /// docstring gives the values checked here.
    #[test]
    fn files_from_pandas_polars_and_pyarrow_read() {
        use super::super::fixture;
        use fallow_core::trace::read_trace;
        for (name, format) in [
            ("pandas-snappy.parquet", Format::Parquet),
            ("polars-zstd.parquet", Format::Parquet),
            ("polars.arrow", Format::Arrow),
            ("polars.arrows", Format::Arrow),
            ("pyarrow-lz4.feather", Format::Arrow),
        ] {
            let t = read_trace(fixture(name), &ReadOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(t.report().format, Some(format), "{name}");
            assert_eq!(t.len(), 5, "{name}");
            let ms: Vec<u64> = t.arrival_ns().iter().map(|a| a / 1_000_000).collect();
            assert_eq!(ms, [0, 10, 20, 30, 40], "{name}");
            let service: Vec<u64> = (0..5)
                .map(|i| t.completion_ns().unwrap()[i] - t.arrival_ns()[i])
                .collect();
            assert_eq!(service, [1_000_000; 5], "{name}");
            let writes = t.op().iter().filter(|&&o| o == Op::Write).count();
            assert_eq!(writes, 3, "{name}");
            assert_eq!(t.offset_bytes().iter().sum::<u64>(), 28672, "{name}");
            assert_eq!(
                t.size_bytes().iter().map(|&s| s as u64).sum::<u64>(),
                17408,
                "{name}"
            );
            let labels: Vec<(String, u64)> = t
                .devices()
                .iter()
                .map(|d| (d.label(), d.requests))
                .collect();
            assert_eq!(
                labels,
                [("hm:0".to_string(), 2), ("rsrch:0".to_string(), 3)],
                "{name}"
            );
        }
        // a codec this build lacks is an error naming the file and codec
        let e = read_trace(fixture("pandas-gzip.parquet"), &ReadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pandas-gzip.parquet") && e.to_lowercase().contains("gzip"),
            "{e}"
        );
    }
}
