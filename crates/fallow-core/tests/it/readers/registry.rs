//! The trace format registry, like the policy one: names sorted and unique,
//! every registered format has a fixture here that detection takes for it
//! (and for no other), and what each entry says about completions and
//! splitting agrees with what reading its fixture gives.

use super::fixture;
use fallow_core::trace::{
    formats, read_from, read_trace, read_trace_tuned, readers, writer_for, Completions, Format,
    Head, Parallelism, ReadOptions, Sniff, COLUMNAR_ENABLED,
};
use fallow_core::Error;
use std::collections::BTreeSet;

/// One fixture per format, by format name. A format added without a
/// fixture fails `every_format_has_a_fixture`.
const FIXTURES: &[(&str, &str)] = &[
    ("alibaba", "small.alibaba.csv"),
    ("arrow", "polars.arrow"),
    ("biosnoop", "small.biosnoop"),
    ("blkparse", "small.blkparse"),
    ("blktrace", "takeoverjp-nvme.blktrace.0"),
    ("bpftrace", "small.bpftrace"),
    ("fallow", "small.fallow"),
    ("fio-iolog", "small.iolog"),
    ("fio-lat", "small_clat.1.log"),
    ("hp-srt", "small.srt"),
    ("msr", "small.msr.csv"),
    ("parquet", "polars-zstd.parquet"),
    ("plain", "small.trace"),
    ("spc", "small.spc"),
    ("tencent", "small.tencent.csv"),
    ("vscsi", "small.vscsi"),
];

fn format(name: &str) -> Format {
    name.parse().unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The first 64 KiB of a fixture, as detection sees it.
fn head(file: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(fixture(file)).unwrap();
    bytes.truncate(1 << 16);
    bytes
}

#[test]
fn registry_is_sorted_unique_and_documented() {
    assert_eq!(formats().check(), Ok(()));
    let codes: BTreeSet<u32> = readers().iter().map(|e| e.code).collect();
    assert_eq!(codes.len(), readers().len(), "fallow-binary codes unique");
    assert!(!codes.contains(&0), "code 0 means unknown");
    let ranks: BTreeSet<u16> = readers().iter().map(|e| e.detect_rank).collect();
    assert_eq!(ranks.len(), readers().len(), "detection ranks unique");
    for e in readers() {
        assert_eq!(format(e.name).name(), e.name);
        for alias in e.aliases {
            assert_eq!(format(alias).name(), e.name, "alias {alias}");
            assert_eq!(format(&alias.to_ascii_uppercase()).name(), e.name);
        }
        assert!(Format::help().contains(&format!("{} ({})", e.name, e.summary)));
    }
    let err = "nope".parse::<Format>().unwrap_err().to_string();
    let known: Vec<&str> = readers().iter().map(|e| e.name).collect();
    assert!(
        err.contains(&format!(
            "unknown format `nope` (known: {})",
            known.join(", ")
        )),
        "{err}"
    );
}

#[test]
fn every_format_has_a_fixture() {
    let with_fixture: Vec<&str> = FIXTURES.iter().map(|(name, _)| *name).collect();
    let registered: Vec<&str> = readers().iter().map(|e| e.name).collect();
    assert_eq!(with_fixture, registered);
}

#[test]
fn each_fixture_is_detected_as_its_format_and_no_other() {
    for &(name, file) in FIXTURES {
        let want = format(name);
        let bytes = head(file);
        let path = fixture(file);
        let sample = Head::new(&bytes, &path);
        assert_eq!((want.entry().detect)(&sample), Sniff::Yes, "{file}");
        // Readers asked before this one must pass it on.
        for e in readers() {
            if e.detect_rank < want.entry().detect_rank {
                let verdict = (e.detect)(&sample);
                assert!(
                    matches!(verdict, Sniff::No | Sniff::Hint(_)),
                    "{} takes {file} ({name}): {verdict:?}",
                    e.name
                );
            }
        }
        match read_trace(&path, &ReadOptions::default()) {
            Ok(t) => assert_eq!(t.report().format, Some(want), "{file}"),
            // Without the `arrow` feature a columnar file is still detected,
            // and refused by the name of its format.
            Err(e @ Error::Unsupported(_)) if !COLUMNAR_ENABLED => {
                let e = e.to_string();
                assert!(e.contains("Arrow IPC") || e.contains("Parquet"), "{e}");
                assert!(name == "arrow" || name == "parquet", "{e}");
            }
            Err(e) => panic!("{file}: {e}"),
        }
    }
}

#[test]
fn completions_agree_with_what_the_fixtures_hold() {
    for &(name, file) in FIXTURES {
        let f = format(name);
        let completions = f.entry().completions;
        if completions == Completions::InFile {
            // The file decides (fallow's header flag, a `completion_ns`
            // column): the readers' own tests check both kinds of file.
            continue;
        }
        let opts = ReadOptions {
            format: Some(f),
            ..Default::default()
        };
        let t = read_trace(fixture(file), &opts).unwrap_or_else(|e| panic!("{file}: {e}"));
        let has = t.completion_ns().is_some();
        assert_eq!(has, completions == Completions::Recorded, "{name}");
    }
    // `plain` with its completion column asked for (a sixth field).
    let dir = std::env::temp_dir().join(format!("fallow-it-registry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("six.trace");
    std::fs::write(&path, "0.5 0 4096 4096 1 0.75\n1 0 0 512 0 1.5\n").unwrap();
    let mut opts = ReadOptions {
        format: Some(Format::Plain),
        ..Default::default()
    };
    opts.plain.completion = true;
    let t = read_trace(&path, &opts);
    std::fs::remove_dir_all(&dir).unwrap();
    // 0.75 and 1.5 ms, rebased to the first arrival (0.5 ms).
    assert_eq!(t.unwrap().completion_ns(), Some(&[250_000, 1_000_000][..]));
}

#[test]
fn splittable_formats_read_the_same_split_into_tiny_chunks() {
    let split = Parallelism {
        threads: 4,
        min_file_bytes: 1,
        chunk_bytes: 32,
    };
    let mut checked = 0;
    for &(name, file) in FIXTURES {
        let f = format(name);
        if !f.entry().splittable {
            continue;
        }
        let opts = ReadOptions {
            format: Some(f),
            ..Default::default()
        };
        let path = fixture(file);
        let whole = read_trace_tuned(&path, &opts, &mut |_| {}, Parallelism::sequential()).unwrap();
        let parts = read_trace_tuned(&path, &opts, &mut |_| {}, split).unwrap();
        assert_eq!(parts.arrival_ns(), whole.arrival_ns(), "{name}");
        assert_eq!(parts.completion_ns(), whole.completion_ns(), "{name}");
        assert_eq!(parts.offset_bytes(), whole.offset_bytes(), "{name}");
        assert_eq!(parts.size_bytes(), whole.size_bytes(), "{name}");
        assert_eq!(parts.op(), whole.op(), "{name}");
        assert_eq!(parts.device(), whole.device(), "{name}");
        checked += 1;
    }
    let splittable = readers().iter().filter(|e| e.splittable).count();
    assert_eq!(checked, splittable, "every splittable format is split");
}

#[test]
fn every_writer_writes_what_its_format_reads_back() {
    let mut extensions: Vec<&str> = readers()
        .iter()
        .flat_map(|e| e.writers.iter().flat_map(|w| w.extensions.iter().copied()))
        .collect();
    let n = extensions.len();
    extensions.sort_unstable();
    extensions.dedup();
    assert_eq!(extensions.len(), n, "an extension chooses one writer");

    let t = read_trace(fixture("small.trace"), &ReadOptions::default()).unwrap();
    for e in readers() {
        for w in e.writers {
            for ext in w.extensions {
                let out = std::path::PathBuf::from(format!("out.{}", ext.to_ascii_uppercase()));
                let (f, chosen) = writer_for(&out);
                assert_eq!(f.name(), e.name, "{ext}");
                assert!(std::ptr::eq(chosen, w), "{ext}");
            }
            let mut bytes = Vec::new();
            match (w.write)(&t, &mut bytes) {
                Ok(()) => {}
                Err(err @ Error::Unsupported(_)) if !COLUMNAR_ENABLED && e.name != "msr" => {
                    assert!(e.name == "arrow" || e.name == "parquet", "{err}");
                    continue;
                }
                // MSR CSV records every response time: a trace without
                // completions is refused, not written with made-up ones
                // (its round trip is trace::msr's unit tests')
                Err(err @ Error::Unsupported(_)) if e.name == "msr" => {
                    assert!(t.completion_ns().is_none(), "{err}");
                    assert!(err.to_string().contains("no completion times"), "{err}");
                    continue;
                }
                Err(err) => panic!("{}: {err}", e.name),
            }
            let path = std::path::PathBuf::from(format!("back.{}", w.extensions[0]));
            let back = read_from(&mut &bytes[..], &path, &ReadOptions::default()).unwrap();
            assert_eq!(back.report().format.map(Format::name), Some(e.name));
            assert_eq!(back.arrival_ns(), t.arrival_ns(), "{}", e.name);
            assert_eq!(back.offset_bytes(), t.offset_bytes(), "{}", e.name);
            assert_eq!(back.size_bytes(), t.size_bytes(), "{}", e.name);
            assert_eq!(back.op(), t.op(), "{}", e.name);
            assert_eq!(back.device(), t.device(), "{}", e.name);
        }
    }
    // Any other extension (or none) is fallow's binary cache.
    for other in ["out.fbt", "out.bin", "out"] {
        assert_eq!(writer_for(std::path::Path::new(other)).0, Format::Fallow);
    }
}
