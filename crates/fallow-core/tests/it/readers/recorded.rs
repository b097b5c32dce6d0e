//! The readers of what people record (docs/formats.md): bcc biosnoop, fallow's
//! bpftrace one-liner, blktrace's binary per-CPU files, fio iologs and
//! latency logs, on the hand-made fixtures in `tests/data/traces` (every
//! expected value below is worked out by hand from the fixture's lines in
//! the comments) and on a real blktrace recording checked against
//! blkparse's figures and a separate short decoder here.

use super::{assert_mentions, fixture, read};
use fallow_core::trace::{read_trace, Format, Op, ReadOptions};
use std::collections::{HashMap, VecDeque};

#[test]
fn biosnoop_arrival_is_completion_minus_latency() {
    // Completions 4 µs, 178 µs, 2.003931 s, 2.004204 s; latencies 0.74,
    // 0.61, 0.25, 0.34 ms. Arrivals −736 µs, −432 µs, 2.003681 s,
    // 2.003864 s: the first request was issued before biosnoop's time 0.
    let t = read("small.biosnoop");
    assert_eq!(t.report().format, Some(Format::Biosnoop));
    assert_eq!(t.arrival_ns(), &[0, 304_000, 2_004_417_000, 2_004_600_000]);
    assert_eq!(
        t.completion_ns().unwrap(),
        &[740_000, 914_000, 2_004_667_000, 2_004_940_000]
    );
    assert_eq!(
        t.offset_bytes(),
        &[
            13_092_560 * 512,
            13_092_432 * 512,
            62_901_513 * 512,
            41_950_344 * 512
        ]
    );
    assert_eq!(t.size_bytes(), &[4096, 4096, 512, 65536]);
    assert_eq!(t.op(), &[Op::Write, Op::Write, Op::Write, Op::Read]);
    // xvda1, then xvdb, in order of first appearance (the index above
    // the 24 bits of an MSR disk number), listed and chosen by name.
    assert_eq!(t.device(), &[0, 0, 1 << 24, 1 << 24]);
    let names: Vec<String> = t.devices().iter().map(|d| d.label()).collect();
    assert_eq!(names, ["xvda1", "xvdb"]);
    let sel: fallow_core::trace::DeviceSel = "xvdb".parse().unwrap();
    assert_eq!(t.resolve_device(&sel).unwrap(), 1 << 24);
    assert!(t.resolve_device(&"sdz".parse().unwrap()).is_err());
    // The header, and the `<unknown>` disk line.
    assert_eq!(t.report().ignored, 2);
    assert_eq!(t.report().reordered, 0);
}

#[test]
fn biosnoop_with_q_reads_the_issue_not_the_queueing() {
    // Completions 0, 0.771, 5333.065 ms; latencies 0.55, 0.47, 0.65 ms
    // (QUE is before the issue, not part of the request).
    let t = read("small-q.biosnoop");
    assert_eq!(t.report().format, Some(Format::Biosnoop));
    assert_eq!(t.arrival_ns(), &[0, 851_000, 5_332_965_000]);
    assert_eq!(
        t.completion_ns().unwrap(),
        &[550_000, 1_321_000, 5_333_615_000]
    );
    assert_eq!(t.size_bytes(), &[4096, 3072, 512]);
}

#[test]
fn bpftrace_one_liner_output() {
    let t = read("small.bpftrace");
    assert_eq!(t.report().format, Some(Format::Bpftrace));
    assert_eq!(t.arrival_ns(), &[0, 59_000, 2_259_000]);
    assert_eq!(t.completion_ns().unwrap(), &[279_000, 759_000, 2_509_000]);
    assert_eq!(t.report().origin_ns, 81_237_741_000);
    // 8,16 and 259,0 as major << 20 | minor.
    assert_eq!(t.device(), &[8 << 20 | 16, 8 << 20 | 16, 259 << 20]);
    assert_eq!(t.op(), &[Op::Read, Op::Write, Op::Write]);
    assert_eq!(t.offset_bytes(), &[2048 * 512, 4096 * 512, 1024 * 512]);
    // The banner and the flush (0 bytes).
    assert_eq!(t.report().ignored, 2);
}

#[test]
fn fio_iolog_v3_and_v2_have_arrivals_but_no_completions() {
    let v3 = read("small.iolog");
    assert_eq!(v3.report().format, Some(Format::FioIolog));
    // 131, 160, 3000 µs.
    assert_eq!(v3.arrival_ns(), &[0, 29_000, 2_869_000]);
    assert!(v3.completion_ns().is_none());
    assert_eq!(v3.op(), &[Op::Read, Op::Write, Op::Read]);
    assert_eq!(v3.size_bytes(), &[4096, 65536, 512]);
    assert_eq!(v3.offset_bytes(), &[4096, 1_048_576, 8192]);
    // add, open, close, sync.
    assert_eq!(v3.report().ignored, 4);
    // Version 2: the waits (250 µs, then 1000 µs) are the clock.
    let v2 = read("small-v2.iolog");
    assert_eq!(v2.arrival_ns(), &[0, 250_000, 1_250_000]);
    assert_eq!(v2.report().ignored, 4);
    // Where it matters: busy periods need a service model, and the
    // message says why an iolog has no completions.
    let e = fallow_core::period::periods_of(&v3, None, 0)
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["fio iolog", "never when it completed", "--service"]);
}

#[test]
fn fio_clat_log_completion_is_the_logged_time() {
    // (1 ms, 280361 ns read), (1 ms, 311000 ns write), (3 ms, 250000 ns
    // read), a trim. Arrivals 719639, 689000, 2750000 ns.
    let t = read("small_clat.1.log");
    assert_eq!(t.report().format, Some(Format::FioLat));
    assert_eq!(t.arrival_ns(), &[0, 30_639, 2_061_000]);
    assert_eq!(t.completion_ns().unwrap(), &[311_000, 311_000, 2_311_000]);
    assert_eq!(t.op(), &[Op::Write, Op::Read, Op::Read]);
    assert_eq!(t.offset_bytes(), &[0, 1_052_672, 65536]);
    assert_eq!(t.report().ignored, 1);
}

/// A short, separate decoder of `struct blk_io_trace` (little-endian, as
/// recorded on x86): the issues (action 7) matched FIFO to completions
/// (action 8) of the same device and sector, as (issue ns, completion ns,
/// sector, bytes, write).
fn decode_blktrace(files: &[Vec<u8>]) -> Vec<(u64, u64, u64, u32, bool)> {
    let mut events = Vec::new();
    for data in files {
        let mut i = 0;
        while i + 48 <= data.len() {
            let u32_at = |o: usize| u32::from_le_bytes(data[i + o..i + o + 4].try_into().unwrap());
            let u64_at = |o: usize| u64::from_le_bytes(data[i + o..i + o + 8].try_into().unwrap());
            let pdu = u16::from_le_bytes(data[i + 46..i + 48].try_into().unwrap()) as usize;
            let action = u32_at(28);
            let kind = action & 0xff;
            if (kind == 7 || kind == 8) && action >> 16 & (1 << 10) == 0 && u32_at(24) > 0 {
                events.push((
                    u64_at(8),
                    kind,
                    u32_at(36),
                    u64_at(16),
                    u32_at(24),
                    action >> 17 & 1 == 1,
                ));
            }
            i += 48 + pdu;
        }
    }
    events.sort_by_key(|e| (e.0, e.1));
    // (device, sector) → pending (issue ns, bytes, write), oldest first.
    type Pending = HashMap<(u32, u64), VecDeque<(u64, u32, bool)>>;
    let mut pending: Pending = HashMap::new();
    let mut out = Vec::new();
    for (time, kind, dev, sector, bytes, write) in events {
        if kind == 7 {
            pending
                .entry((dev, sector))
                .or_default()
                .push_back((time, bytes, write));
        } else if let Some((a, b, w)) = pending.get_mut(&(dev, sector)).and_then(|q| q.pop_front())
        {
            out.push((a, time, sector, b, w));
        }
    }
    out.sort();
    out
}

#[test]
fn a_real_blktrace_recording_reads_as_blkparse_and_a_separate_decoder_say() {
    // testdata/sample.blktrace.0 of github.com/takeoverjp/blktrace_viewer
    // (BSD-3-Clause; commit e2294a27174db849a75f82b7b21e7975aeb686d9): a
    // real recording of NVMe reads on 259,0, all on CPU 1. Debian's
    // blkparse 1.2.0 (`blkparse -i - < takeoverjp-nvme.blktrace.0`) lists
    // 963 D and 963 C events of 8 sectors, all reads (RA), the first D at
    // 0.000001676 s and the last C at 0.345541853 s after its first event.
    let name = "takeoverjp-nvme.blktrace.0";
    let data = std::fs::read(fixture(name)).unwrap();
    let want = decode_blktrace(&[data]);
    assert_eq!(want.len(), 963);
    let t = read_trace(fixture(name), &ReadOptions::default()).unwrap();
    assert_eq!(t.report().format, Some(Format::Blktrace));
    let origin = t.report().origin_ns;
    let mut got: Vec<(u64, u64, u64, u32, bool)> = (0..t.len())
        .map(|i| {
            (
                t.arrival_ns()[i] + origin,
                t.completion_ns().unwrap()[i] + origin,
                t.offset_bytes()[i] / 512,
                t.size_bytes()[i],
                t.op()[i] == Op::Write,
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, want);
    // blkparse's figures
    assert_eq!(t.len(), 963);
    assert!(t.size_bytes().iter().all(|&s| s == 8 * 512));
    assert!(t.op().iter().all(|&o| o == Op::Read));
    assert!(t.device().iter().all(|&d| d == 259 << 20));
    assert_eq!(t.span_ns(), 345_541_853 - 1_676);
}

#[test]
fn a_blktrace_record_cut_short_names_the_file_and_field() {
    // The fixture's first record carries a 16-byte payload (an A event's
    // remap), so the second record starts at byte 64.
    let dir = tempfile::tempdir().unwrap();
    let data = std::fs::read(fixture("takeoverjp-nvme.blktrace.0")).unwrap();
    assert_eq!(u16::from_le_bytes([data[46], data[47]]), 16);
    std::fs::write(dir.path().join("d.blktrace.0"), &data[..64 + 26]).unwrap();
    let e = read_trace(dir.path().join("d.blktrace.0"), &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["d.blktrace.0", "byte offset 90", "field `bytes`"]);
    let mut bad = data[..128].to_vec();
    bad[66] = 0x99;
    std::fs::write(dir.path().join("d.blktrace.0"), &bad).unwrap();
    let e = read_trace(dir.path().join("d.blktrace.0"), &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["byte offset 64", "field `magic`"]);
}

#[test]
fn the_documented_bpftrace_one_liner_recorded_on_a_loop_device() {
    // Recorded on the development VM (bpftrace 0.17, Linux 6.18) with the
    // one-liner of docs/formats.md while `dd` wrote 64 × 64 KiB and read
    // 256 × 4 KiB with O_DIRECT on /dev/loop1 (7,1); the file keeps the
    // banner, loop1's lines and the flushes (0 bytes) of other devices.
    // Expected counts from the file with awk: 64 writes of 65536 bytes and
    // 255 reads of 4096 (one of the 256 reads was not printed: the
    // one-liner keys by sector, see docs/formats.md).
    let t = read("loop1.bpftrace");
    assert_eq!(t.report().format, Some(Format::Bpftrace));
    let loop1 = t.select_device(7 << 20 | 1).unwrap();
    let writes: Vec<u32> = (0..loop1.len())
        .filter(|&i| loop1.op()[i] == Op::Write)
        .map(|i| loop1.size_bytes()[i])
        .collect();
    assert_eq!(writes, vec![65536; 64]);
    assert_eq!(loop1.len() - writes.len(), 255);
    assert!(loop1
        .size_bytes()
        .iter()
        .zip(loop1.op())
        .all(|(&s, &o)| o == Op::Write || s == 4096));
    // Every other line is the banner or a flush.
    assert_eq!(t.len(), loop1.len());
    let flushes = std::fs::read_to_string(fixture("loop1.bpftrace"))
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(6) == Some("0"))
        .count() as u64;
    assert_eq!(t.report().ignored, 1 + flushes);
}
