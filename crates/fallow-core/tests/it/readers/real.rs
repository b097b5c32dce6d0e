//! Every reader on the real traces in `../shared/traces`, checked against
//! the facts their README states, plus a few counts made here by simple
//! routines that share no code with the readers. Skipped (with a note)
//! when the traces are not there.

use super::shared;
use fallow_core::period;
use fallow_core::trace::{read_from, read_trace, write_fallow_bin, Format, Op, ReadOptions};
use fallow_core::Trace;
use std::io::Read;
use std::path::Path;

const S: f64 = 1e9;

fn read(path: &Path) -> Trace {
    read_trace(path, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn round_to(x: f64, decimals: i32) -> f64 {
    let k = 10f64.powi(decimals);
    (x * k).round() / k
}

fn reads(t: &Trace) -> usize {
    t.op().iter().filter(|&&o| o == Op::Read).count()
}

/// Mean and coefficient of variation (population), computed here.
fn mean_cv(x: &[u64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt() / mean)
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn hp_hplajw_1992() {
    let p = shared("hp-hplajw-1992/ajw.1week.srt");
    let t = read(&p);
    assert_eq!(t.report().format, Some(Format::HpSrt));
    assert_eq!(t.len(), 44_519);
    let devices: Vec<(u32, u64)> = t.devices().iter().map(|d| (d.id, d.requests)).collect();
    assert_eq!(devices, vec![(0, 42_252), (1, 2_267)]);
    assert!(t.completion_ns().is_some());
    assert_eq!(round_to(t.span_ns() as f64 / S / 86_400.0, 2), 6.98);
    assert_eq!(t.report().skipped, 0);
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn cloudphysics_vscsi() {
    let p = shared("cloudphysics-vscsi/cloudPhysicsIO.vscsi");
    let t = read(&p);
    assert_eq!(t.report().format, Some(Format::Vscsi));
    assert_eq!(t.len(), 113_872);
    assert!(t.completion_ns().is_none());
    assert_eq!(round_to(t.span_ns() as f64 / S / 3600.0, 1), 2.0);
    // Count READ(10) opcodes (0x28 at byte 12 of each 32-byte record) by hand.
    let raw = std::fs::read(&p).unwrap();
    let read10 = raw
        .chunks(32)
        .filter(|r| r[12] == 0x28 && r[13] == 0)
        .count();
    assert_eq!(reads(&t), read10);
    // The first record's lbn (bytes 16..24, little-endian) in 512-byte sectors.
    let lbn = raw[16..24]
        .iter()
        .rev()
        .fold(0u64, |v, &b| v << 8 | b as u64);
    assert!(t.offset_bytes().contains(&(lbn * 512)));
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn msr_cuts() {
    // (file, span in whole seconds from the README, read percentage in the name)
    let cuts = [
        ("msr.cut.per_10k.most_thpt_rand_iops.1006.trace", 1.0, None),
        ("msr.cut.per_10k.rw_20_80.105.trace", 243.0, Some(20.0)),
        ("msr.cut.per_10k.rw_40_60.1370.trace", 86.0, Some(40.0)),
    ];
    for (name, span_s, read_pct) in cuts {
        let p = shared(&format!("msr-cuts/{name}"));
        let t = read(&p);
        assert_eq!(t.report().format, Some(Format::Plain), "{name}");
        assert_eq!(t.len(), 10_000, "{name}");
        assert_eq!((t.span_ns() as f64 / S).round(), span_s, "{name}");
        // Reads counted with the standard library's splitter: op (5th) is 1.
        let text = std::fs::read_to_string(&p).unwrap();
        let ones = text
            .lines()
            .filter(|l| l.split_whitespace().nth(4) == Some("1"))
            .count();
        assert_eq!(reads(&t), ones, "{name}");
        if let Some(pct) = read_pct {
            let got = 100.0 * reads(&t) as f64 / t.len() as f64;
            assert!((got - pct).abs() < 1.0, "{name}: {got}% reads");
        }
    }
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn pgbench_ext4_loop() {
    let p = shared("pgbench-ext4-loop/pgbench-ext4-loop.csv.gz");
    let t = read(&p);
    assert_eq!(t.report().format, Some(Format::Msr));
    assert_eq!(t.len(), 24_708);
    assert_eq!(reads(&t), 8_969);
    assert_eq!(round_to(t.span_ns() as f64 / S, 1), 241.7);
    let p = period::extract(t.arrival_ns(), t.completion_ns().unwrap());
    assert_eq!(p.idle_len_ns.len(), 19_287);
    let (mean, cv) = mean_cv(&p.idle_len_ns);
    assert_eq!(round_to(mean / 1e6, 1), 12.3);
    assert_eq!(round_to(cv, 2), 2.31);
    let longest = *p.idle_len_ns.iter().max().unwrap() as f64 / S;
    assert_eq!(round_to(longest, 2), 0.70);
    let busy =
        p.busy_requests.iter().map(|&r| r as f64).sum::<f64>() / p.busy_requests.len() as f64;
    assert_eq!(round_to(busy, 2), 1.28);
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn blkparse_sample() {
    let p = shared("blkparse-sample/blktrace.txt.gz");
    let t = read(&p);
    assert_eq!(t.report().format, Some(Format::Blkparse));
    // README: 50,000 lines, about 170 D/C pairs. Count issues that move data
    // here (action D, with `+ n`); in this sample every one completes.
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&p).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text.lines().count(), 50_000);
    let issues = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() > 8 && f[5] == "D" && f[8] == "+")
        .count();
    assert_eq!(issues, 170);
    assert_eq!(t.len(), issues);
    // Every other line (each pair uses a D and a C line) is ignored.
    assert_eq!(t.report().ignored, 50_000 - 2 * 170);
    assert!(t.span_ns() as f64 / S <= 9.4);
    let c = t.completion_ns().unwrap();
    assert!(t.arrival_ns().iter().zip(c).all(|(a, c)| c >= a));
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn every_real_trace_round_trips_through_fallow_bin() {
    let all = [
        "hp-hplajw-1992/ajw.1week.srt",
        "cloudphysics-vscsi/cloudPhysicsIO.vscsi",
        "msr-cuts/msr.cut.per_10k.most_thpt_rand_iops.1006.trace",
        "msr-cuts/msr.cut.per_10k.rw_20_80.105.trace",
        "msr-cuts/msr.cut.per_10k.rw_40_60.1370.trace",
        "pgbench-ext4-loop/pgbench-ext4-loop.csv.gz",
        "blkparse-sample/blktrace.txt.gz",
    ];
    for rel in all {
        let p = shared(rel);
        let t = read(&p);
        let mut bin = Vec::new();
        write_fallow_bin(&t, &mut bin).unwrap();
        let back = read_from(
            &mut &bin[..],
            Path::new("cache.fallow"),
            &ReadOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(back.report().format, Some(Format::Fallow), "{rel}");
        assert_eq!(back.report().source_format, t.report().format, "{rel}");
        assert_eq!(back.arrival_ns(), t.arrival_ns(), "{rel}");
        assert_eq!(back.completion_ns(), t.completion_ns(), "{rel}");
        assert_eq!(back.offset_bytes(), t.offset_bytes(), "{rel}");
        assert_eq!(back.size_bytes(), t.size_bytes(), "{rel}");
        assert_eq!(back.op(), t.op(), "{rel}");
        assert_eq!(back.device(), t.device(), "{rel}");
        let (a, b) = (t.report(), back.report());
        assert_eq!(
            (b.origin_ns, b.skipped, b.reordered, b.ignored),
            (a.origin_ns, a.skipped, a.reordered, a.ignored),
            "{rel}"
        );
    }
}
