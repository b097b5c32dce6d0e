//! Round trips, one property per reader: random requests written out in
//! the format by a short writer here (from the format's documentation, not
//! from the reader) and read back keep every request: the count, arrival
//! and completion times (where the format has them), offsets, sizes,
//! directions and devices. Requests are compared as sorted lists, so the
//! writers may emit lines out of time order, which the readers must sort,
//! not drop. blkparse includes concurrent requests to one sector (once
//! `D D C C` kept one of two), MSR files several hosts with the same disk
//! numbers (once `hm,0` and `rsrch,0` were one device), also after a
//! round trip through fallow's binary cache, which keeps the host names.

use fallow_core::trace::{read_from, write_fallow_bin, Format, Op, ReadOptions};
use fallow_core::Trace;
use proptest::prelude::*;
use std::collections::HashMap;
use std::path::Path;

/// One request as the writers see it: absolute times in ns, a device key
/// the test can name independently of the reader's numbering.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Req {
    arrival_ns: u64,
    completion_ns: Option<u64>,
    offset_bytes: u64,
    size_bytes: u32,
    write: bool,
    device: String,
}

/// Raw draws: gap to the previous arrival, service time, offset and size
/// in units, direction, device index, and a sort key for shuffling lines.
type Draw = (u64, u64, u64, u32, bool, usize, u32);

fn draws(max_offset_units: u64) -> impl Strategy<Value = (Vec<Draw>, bool)> {
    (
        prop::collection::vec(
            (
                prop_oneof![Just(0u64), 0u64..5_000],
                0u64..20_000,
                0..max_offset_units,
                1u32..256,
                any::<bool>(),
                0usize..4,
                any::<u32>(),
            ),
            1..40,
        ),
        any::<bool>(),
    )
}

/// Arrivals from gaps, in `unit_ns` steps from `base`.
fn arrivals(d: &[Draw], base_units: u64, unit_ns: u64) -> Vec<u64> {
    let mut t = base_units;
    d.iter()
        .map(|x| {
            t += x.0;
            t * unit_ns
        })
        .collect()
}

/// Line order: as drawn (time order), or shuffled by the draws' keys.
fn order(d: &[Draw], shuffle: bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..d.len()).collect();
    if shuffle {
        idx.sort_by_key(|&i| d[i].6);
    }
    idx
}

/// What the reader returned, as [`Req`]s with absolute times and devices
/// named by `name`.
fn got(t: &Trace, name: impl Fn(u32) -> String) -> Vec<Req> {
    let origin = t.report().origin_ns;
    let mut v: Vec<Req> = (0..t.len())
        .map(|i| Req {
            arrival_ns: t.arrival_ns()[i] + origin,
            completion_ns: t.completion_ns().map(|c| c[i] + origin),
            offset_bytes: t.offset_bytes()[i],
            size_bytes: t.size_bytes()[i],
            write: t.op()[i] == Op::Write,
            device: name(t.device()[i]),
        })
        .collect();
    v.sort();
    v
}

fn read(text: &[u8], format: Option<Format>) -> Trace {
    let opts = ReadOptions {
        format,
        ..Default::default()
    };
    read_from(&mut &text[..], Path::new("roundtrip"), &opts).expect("a written trace reads")
}

/// Checks common to every format: nothing dropped, skipped or ignored,
/// and the requests equal.
fn check(t: &Trace, mut want: Vec<Req>, got: Vec<Req>) -> Result<(), TestCaseError> {
    want.sort();
    let r = t.report();
    prop_assert_eq!((r.skipped, r.ignored), (0, 0));
    prop_assert_eq!(got.len(), want.len());
    prop_assert_eq!(got, want);
    Ok(())
}

const HOSTS: [&str; 3] = ["hm", "rsrch", "src1"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn msr_keeps_every_request_of_every_host((d, shuffle) in draws(1 << 30)) {
        // Windows filetime ticks of 100 ns, from 2008 like the MSR traces.
        let arr = arrivals(&d, 128_166_372_000_000_000, 100);
        let mut want = Vec::new();
        let mut text = String::from("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n");
        let lines: Vec<String> = d.iter().zip(&arr).map(|(x, &a)| {
            let (host, disk) = (HOSTS[x.5 % 3], x.5 / 3 + (x.5 % 2));
            want.push(Req {
                arrival_ns: a,
                completion_ns: Some(a + x.1 * 100),
                offset_bytes: x.2 * 512,
                size_bytes: x.3 * 512,
                write: x.4,
                device: format!("{host}:{disk}"),
            });
            format!("{},{host},{disk},{},{},{},{}\n", a / 100,
                if x.4 { "Write" } else { "Read" }, x.2 * 512, x.3 * 512, x.1)
        }).collect();
        for i in order(&d, shuffle) {
            text += &lines[i];
        }
        let t = read(text.as_bytes(), None);
        prop_assert_eq!(t.report().format, Some(Format::Msr));
        let hosts: std::collections::BTreeSet<&str> =
            want.iter().map(|r| r.device.split(':').next().unwrap()).collect();
        let got_csv = got(&t, |id| {
            // One host: plain disk numbers; several: names.
            if hosts.len() == 1 {
                format!("{}:{id}", hosts.iter().next().unwrap())
            } else {
                t.device_name(id).expect("every device has a name")
            }
        });
        let devices: std::collections::BTreeSet<String> =
            want.iter().map(|r| r.device.clone()).collect();
        prop_assert_eq!(t.devices().len(), devices.len());
        check(&t, want.clone(), got_csv)?;

        // Converted to fallow's binary cache (`fallow convert`) and read
        // back: every request on its (host, disk), every host named, and
        // every device selectable by `host:disk` as in the CSV.
        let mut bytes = Vec::new();
        write_fallow_bin(&t, &mut bytes).unwrap();
        let back = read(&bytes, None);
        prop_assert_eq!(back.report().format, Some(Format::Fallow));
        prop_assert_eq!(&back.report().hosts, &t.report().hosts);
        let got_back = got(&back, |id| back.device_name(id).expect("every device has a name"));
        check(&back, want, got_back)?;
        for name in &devices {
            let sel: fallow_core::trace::DeviceSel = name.parse().unwrap();
            let id = back.resolve_device(&sel).expect("a device of the CSV is in the cache");
            prop_assert_eq!(back.device_name(id), Some(name.clone()));
        }
    }

    #[test]
    fn spc_keeps_every_request((d, shuffle) in draws(1 << 40)) {
        let arr = arrivals(&d, 0, 1);
        let mut want = Vec::new();
        let lines: Vec<String> = d.iter().zip(&arr).map(|(x, &a)| {
            want.push(Req {
                arrival_ns: a,
                completion_ns: None,
                offset_bytes: x.2 * 512,
                size_bytes: x.3 * 512,
                write: x.4,
                device: x.5.to_string(),
            });
            format!("{},{},{},{},{}.{:09}\n", x.5, x.2, x.3 * 512,
                if x.4 { "w" } else { "R" }, a / 1_000_000_000, a % 1_000_000_000)
        }).collect();
        let text: String = order(&d, shuffle).into_iter().map(|i| lines[i].as_str()).collect();
        let t = read(text.as_bytes(), None);
        prop_assert_eq!(t.report().format, Some(Format::Spc));
        let got = got(&t, |id| id.to_string());
        check(&t, want, got)?;
    }

    #[test]
    fn plain_keeps_every_request((d, shuffle) in draws(1 << 40)) {
        // Default units: time in ms (six decimals are whole ns), bytes.
        let arr = arrivals(&d, 7, 1);
        let mut want = Vec::new();
        let lines: Vec<String> = d.iter().zip(&arr).map(|(x, &a)| {
            want.push(Req {
                arrival_ns: a,
                completion_ns: None,
                offset_bytes: x.2,
                size_bytes: x.3,
                write: x.4,
                device: x.5.to_string(),
            });
            format!("{}.{:06} {} {} {} {}\n", a / 1_000_000, a % 1_000_000, x.5, x.2, x.3,
                if x.4 { 0 } else { 1 })
        }).collect();
        let text: String = order(&d, shuffle).into_iter().map(|i| lines[i].as_str()).collect();
        let t = read(text.as_bytes(), None);
        prop_assert_eq!(t.report().format, Some(Format::Plain));
        let got = got(&t, |id| id.to_string());
        check(&t, want, got)?;
    }

    #[test]
    fn blkparse_keeps_concurrent_requests_to_one_sector((d, shuffle) in draws(4)) {
        // Four sectors on two devices: requests in flight to one sector are
        // common. blkparse cannot tell which of two such requests a
        // completion belongs to, so each sector's requests complete in
        // issue order (FIFO), which the reader assumes.
        // Issues at distinct times: two issues to one sector at the same
        // instant are told apart only by line order, which shuffling loses.
        let d: Vec<Draw> = d
            .into_iter()
            .map(|mut x| {
                x.0 += 1;
                x
            })
            .collect();
        let arr = arrivals(&d, 1_000, 1);
        let devs = [(8u32, 0u32), (8, 16)];
        let mut last_done: std::collections::HashMap<(usize, u64), u64> = Default::default();
        let mut want = Vec::new();
        // (time, rank: D before C at one instant, line)
        let mut events: Vec<(u64, u8, String)> = Vec::new();
        for (seq, (x, &a)) in d.iter().zip(&arr).enumerate() {
            let (dev, sector) = (x.5 % 2, x.2 * 8);
            let done = last_done.entry((dev, sector)).or_default();
            let c = (a + x.1).max(*done);
            *done = c;
            let (maj, min) = devs[dev];
            let rwbs = if x.4 { "WS" } else { "R" };
            let at = |t: u64| format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000);
            events.push((a, 0, format!(
                "{maj:3},{min:<3} 0 {:8} {:14} {:5}  D {rwbs:>3} {sector} + {} [fio]\n",
                2 * seq + 1, at(a), 100 + seq, x.3)));
            events.push((c, 1, format!(
                "{maj:3},{min:<3} 1 {:8} {:14}     0  C {rwbs:>3} {sector} + {} [0]\n",
                2 * seq + 2, at(c), x.3)));
            want.push(Req {
                arrival_ns: a,
                completion_ns: Some(c),
                offset_bytes: sector * 512,
                size_bytes: x.3 * 512,
                write: x.4,
                device: format!("{maj},{min}"),
            });
        }
        // blkparse prints events in time order; shuffled, the reader must
        // sort them (stably) before matching.
        events.sort_by_key(|e| (e.0, e.1));
        if shuffle {
            let mut keyed: Vec<(u32, String)> = events
                .into_iter()
                .zip(d.iter().flat_map(|x| [x.6, x.6.rotate_left(7)]))
                .map(|(e, k)| (k, e.2))
                .collect();
            keyed.sort();
            events = keyed.into_iter().map(|(_, l)| (0, 0, l)).collect();
        }
        let mut text: String = events.into_iter().map(|e| e.2).collect();
        text += "CPU0 (8,0):\n Reads Queued:           0,        0KiB\n";
        let t = read(text.as_bytes(), None);
        prop_assert_eq!(t.report().format, Some(Format::Blkparse));
        let got = got(&t, |id| format!("{},{}", id >> 20, id & 0xFFFFF));
        // Only the two summary lines are ignored.
        prop_assert_eq!(t.report().ignored, 2);
        want.sort();
        prop_assert_eq!(got, want);
        if !shuffle {
            prop_assert_eq!(t.report().reordered, 0);
        }
    }

    #[test]
    fn hp_srt_keeps_every_request((d, shuffle) in draws(1 << 31), header in any::<bool>()) {
        // Big-endian words: size, id (version 1, short I/O), sec, usec,
        // start, stop (µs after enqueue), size_bytes, sectno, devno (disk in
        // bits 8..16), drivertype, cylno, ioflags (bit 0: read), info.
        let arr = arrivals(&d, 700_000_000, 1_000);
        let mut want = Vec::new();
        let recs: Vec<Vec<u8>> = d.iter().zip(&arr).map(|(x, &a)| {
            let us = a / 1_000;
            want.push(Req {
                arrival_ns: a,
                completion_ns: Some(a + x.1 * 1_000),
                offset_bytes: x.2 * 512,
                size_bytes: x.3 * 512,
                write: x.4,
                device: x.5.to_string(),
            });
            let words: [u32; 13] = [52, 1 << 16 | 1, (us / 1_000_000) as u32, (us % 1_000_000) as u32,
                0, x.1 as u32, x.3 * 512, x.2 as u32, (x.5 as u32) << 8 | 3, 0, 0,
                u32::from(!x.4), 0];
            words.iter().flat_map(|w| w.to_be_bytes()).collect()
        }).collect();
        let mut bytes = if header { b"$$TR_IOREC-1.3 roundtrip\n\x0c".to_vec() } else { Vec::new() };
        for i in order(&d, shuffle) {
            bytes.extend_from_slice(&recs[i]);
        }
        let t = read(&bytes, None);
        prop_assert_eq!(t.report().format, Some(Format::HpSrt));
        let got = got(&t, |id| id.to_string());
        check(&t, want, got)?;
    }

    #[test]
    fn vscsi_keeps_every_request((d, shuffle) in draws(1 << 40)) {
        // 32-byte little-endian records: sn, len, nSG, cmd (READ(10) 0x28,
        // WRITE(10) 0x2a), ver 0x0100, lbn (sectors), ts (µs). One device.
        let arr = arrivals(&d, 5, 1_000);
        let mut want = Vec::new();
        let recs: Vec<Vec<u8>> = d.iter().zip(&arr).enumerate().map(|(i, (x, &a))| {
            want.push(Req {
                arrival_ns: a,
                completion_ns: None,
                offset_bytes: x.2 * 512,
                size_bytes: x.3 * 512,
                write: x.4,
                device: "0".into(),
            });
            let mut r = Vec::with_capacity(32);
            r.extend_from_slice(&(i as u32).to_le_bytes());
            r.extend_from_slice(&(x.3 * 512).to_le_bytes());
            r.extend_from_slice(&1u32.to_le_bytes());
            r.extend_from_slice(&(if x.4 { 0x2au16 } else { 0x28 }).to_le_bytes());
            r.extend_from_slice(&0x0100u16.to_le_bytes());
            r.extend_from_slice(&x.2.to_le_bytes());
            r.extend_from_slice(&(a / 1_000).to_le_bytes());
            r
        }).collect();
        let bytes: Vec<u8> = order(&d, shuffle).into_iter().flat_map(|i| recs[i].clone()).collect();
        // Detection needs two records; the format is forced for one.
        let t = read(&bytes, Some(Format::Vscsi));
        let got = got(&t, |id| id.to_string());
        check(&t, want, got)?;
    }

    #[test]
    fn fallow_binary_keeps_every_request((d, _) in draws(1 << 50), completions in any::<bool>()) {
        let arr = arrivals(&d, 3, 1);
        let want: Vec<Req> = d.iter().zip(&arr).map(|(x, &a)| Req {
            arrival_ns: a,
            completion_ns: completions.then_some(a + x.1),
            offset_bytes: x.2,
            size_bytes: x.3,
            write: x.4,
            device: x.5.to_string(),
        }).collect();
        let columns = Trace::from_columns(
            want.iter().map(|r| r.arrival_ns).collect(),
            completions.then(|| want.iter().map(|r| r.completion_ns.unwrap()).collect()),
            want.iter().map(|r| r.offset_bytes).collect(),
            want.iter().map(|r| r.size_bytes).collect(),
            want.iter().map(|r| if r.write { Op::Write } else { Op::Read }).collect(),
            want.iter().map(|r| r.device.parse().unwrap()).collect(),
        ).unwrap();
        let mut bytes = Vec::new();
        write_fallow_bin(&columns, &mut bytes).unwrap();
        let t = read(&bytes, None);
        prop_assert_eq!(t.report().format, Some(Format::Fallow));
        let got = got(&t, |id| id.to_string());
        check(&t, want, got)?;
    }
}

/// The concurrent-sector case in full: 1,000 MSR-like requests, many of them to
/// the same few sectors while others are in flight, written as blkparse
/// and read back: all 1,000 (the old reader kept 883).
#[test]
fn a_thousand_overlapping_requests_all_survive_blkparse() {
    let mut text = String::new();
    let mut events = Vec::new();
    let mut last_done = std::collections::HashMap::new();
    let mut x: u64 = 12345;
    for i in 0..1000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let a = 1_000 + i * 500;
        let sector = (x >> 40) % 16 * 8;
        let done: &mut u64 = last_done.entry(sector).or_default();
        let c = (a + 100 + (x >> 20) % 20_000).max(*done);
        *done = c;
        events.push((a, 0, format!("8,0 0 {i} 0.{a:09} 1 D R {sector} + 8 [a]\n")));
        events.push((c, 1, format!("8,0 0 {i} 0.{c:09} 0 C R {sector} + 8 [0]\n")));
    }
    events.sort_by_key(|e| (e.0, e.1));
    for e in events {
        text += &e.2;
    }
    let t = read(text.as_bytes(), Some(Format::Blkparse));
    assert_eq!(t.len(), 1000);
    assert_eq!(t.report().ignored, 0);
}

/// Requests with times counted from the earliest arrival, for formats whose
/// time zero is not an arrival (biosnoop and fio latency logs log
/// completions; an arrival may fall before the log's zero).
fn rebased(mut v: Vec<Req>) -> Vec<Req> {
    let first = v.iter().map(|r| r.arrival_ns).min().unwrap_or(0);
    for r in &mut v {
        r.arrival_ns -= first;
        r.completion_ns = r.completion_ns.map(|c| c - first);
    }
    v.sort();
    v
}

/// Checks for the readers of recorded formats: `ignored` records ignored by
/// design (banners, file actions), nothing skipped, the requests equal.
fn check_ignoring(
    t: &Trace,
    want: Vec<Req>,
    got: Vec<Req>,
    ignored: u64,
) -> Result<(), TestCaseError> {
    let r = t.report();
    prop_assert_eq!((r.skipped, r.ignored), (0, ignored));
    prop_assert_eq!(got.len(), want.len());
    prop_assert_eq!(rebased(got), rebased(want));
    Ok(())
}

/// Device names by first appearance in `names` (the line order), as the
/// biosnoop and fio iolog readers number them.
fn first_seen(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = Vec::new();
    for n in names {
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    seen
}

const DISKS: [&str; 4] = ["sda", "nvme0n1", "xvdb", "md127"];

/// A `struct blk_io_trace` (version 7) in either byte order, with `pdu`.
fn blk_record(
    le: bool,
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    device: u32,
    pdu: &[u8],
) -> Vec<u8> {
    let mut r = Vec::with_capacity(48 + pdu.len());
    let w32 = |r: &mut Vec<u8>, v: u32| {
        r.extend_from_slice(&if le { v.to_le_bytes() } else { v.to_be_bytes() })
    };
    let w64 = |r: &mut Vec<u8>, v: u64| {
        r.extend_from_slice(&if le { v.to_le_bytes() } else { v.to_be_bytes() })
    };
    w32(&mut r, 0x6561_7407);
    w32(&mut r, 1);
    w64(&mut r, time);
    w64(&mut r, sector);
    w32(&mut r, bytes);
    w32(&mut r, action);
    w32(&mut r, 42);
    w32(&mut r, device);
    w32(&mut r, 0);
    let len = pdu.len() as u16;
    r.extend_from_slice(&0u16.to_be_bytes());
    r.extend_from_slice(&if le {
        len.to_le_bytes()
    } else {
        len.to_be_bytes()
    });
    r.extend_from_slice(pdu);
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn biosnoop_keeps_every_request((d, shuffle) in draws(1 << 30), queue in any::<bool>()) {
        // Completions in whole µs (TIME(s) has six decimals), latencies in
        // steps of 10 µs (LAT(ms) has two); the arrival, completion −
        // latency, may fall before time 0. Lines in completion order.
        let comp = arrivals(&d, 0, 1_000);
        let mut rows: Vec<(u64, String, Req)> = d.iter().zip(&comp).map(|(x, &c)| {
            let lat_10us = x.1 % 5_000;
            let disk = DISKS[x.5];
            let comm = if x.6 % 3 == 0 { "Web Content" } else { "kworker/u8:2" };
            let que = if queue { format!(" {:7.2}", (x.6 % 1000) as f64 / 100.0) } else { String::new() };
            let line = format!("{:<11} {comm:<14} {:<7} {disk:<9} {} {:<10} {:<7}{que} {:7}\n",
                format!("{}.{:06}", c / 1_000_000_000, c / 1_000 % 1_000_000),
                x.6 % 40_000, if x.4 { "W" } else { "R" }, x.2, x.3 * 512,
                format!("{}.{:02}", lat_10us / 100, lat_10us % 100));
            (c, line, Req {
                arrival_ns: c + 1_000_000_000 - lat_10us * 10_000,
                completion_ns: Some(c + 1_000_000_000),
                offset_bytes: x.2 * 512,
                size_bytes: x.3 * 512,
                write: x.4,
                device: disk.to_string(),
            })
        }).collect();
        rows.sort_by_key(|r| r.0);
        let mut text = String::from(if queue {
            "TIME(s)     COMM           PID     DISK      T SECTOR     BYTES  QUE(ms) LAT(ms)\n"
        } else {
            "TIME(s)     COMM           PID     DISK      T SECTOR     BYTES   LAT(ms)\n"
        });
        let idx: Vec<usize> = if shuffle { order(&d, true) } else { (0..rows.len()).collect() };
        let names = first_seen(idx.iter().map(|&i| rows[i].2.device.clone()));
        for &i in &idx {
            text += &rows[i].1;
        }
        let t = read(text.as_bytes(), None);
        prop_assert_eq!(t.report().format, Some(Format::Biosnoop));
        // Devices named as the DISK column names them, numbered in order
        // of first appearance.
        let got = got(&t, |id| {
            let name = t.device_name(id).expect("every disk has a name");
            assert_eq!(names[(id >> 24) as usize], name);
            name
        });
        let want = rows.into_iter().map(|r| r.2).collect();
        check_ignoring(&t, want, got, 1)?;
    }

    #[test]
    fn bpftrace_keeps_every_request((d, shuffle) in draws(1 << 40)) {
        let arr = arrivals(&d, 5_000_000_000, 1);
        let devs = [(8u32, 0u32), (8, 16), (259, 0), (253, 1)];
        let mut want = Vec::new();
        let lines: Vec<String> = d.iter().zip(&arr).map(|(x, &a)| {
            let (maj, min) = devs[x.5];
            want.push(Req {
                arrival_ns: a,
                completion_ns: Some(a + x.1),
                offset_bytes: x.2 * 512,
                size_bytes: x.3 * 512,
                write: x.4,
                device: format!("{maj},{min}"),
            });
            format!("fallow-io {a} {} {maj} {min} {} {} {}\n", a + x.1, x.2, x.3 * 512,
                if x.4 { "WS" } else { "RA" })
        }).collect();
        let mut text = String::from("Attaching 3 probes...\n");
        text.extend(order(&d, shuffle).into_iter().map(|i| lines[i].clone()));
        let t = read(text.as_bytes(), None);
        prop_assert_eq!(t.report().format, Some(Format::Bpftrace));
        let got = got(&t, |id| format!("{},{}", id >> 20, id & 0xFFFFF));
        check_ignoring(&t, want, got, 1)?;
    }

    #[test]
    fn blktrace_merges_cpus_and_keeps_concurrent_requests((d, _) in draws(4), le in any::<bool>()) {
        // Issues on one CPU's stream, completions on the other's; the
        // streams are concatenated, so only sorting by time can pair them.
        // Four sectors on two devices, completing FIFO per sector as the
        // reader assumes; a notify record with a payload (a process
        // name) before each issue.
        let d: Vec<Draw> = d.into_iter().map(|mut x| { x.0 += 1; x }).collect();
        let arr = arrivals(&d, 1_000_000, 1);
        let devs = [8u32 << 20, 8 << 20 | 16];
        let mut last_done: HashMap<(usize, u64), u64> = HashMap::new();
        let (mut cpu0, mut cpu1) = (Vec::new(), Vec::new());
        let mut want = Vec::new();
        for (x, &a) in d.iter().zip(&arr) {
            let (dev, sector) = (x.5 % 2, x.2 * 8);
            let done = last_done.entry((dev, sector)).or_default();
            let c = (a + x.1).max(*done);
            *done = c;
            // action | category << 16: BLK_TC_WRITE 1<<1 or READ 1<<0,
            // ISSUE 1<<6, COMPLETE 1<<7, NOTIFY 1<<10.
            let dir = if x.4 { 2 } else { 1 };
            let (issue, complete) = (7 | (dir | 1 << 6) << 16, 8 | (dir | 1 << 7) << 16);
            let (first, second) = if x.6 % 2 == 0 { (&mut cpu0, &mut cpu1) } else { (&mut cpu1, &mut cpu0) };
            first.extend(blk_record(le, a, 0, 0, (1 << 10) << 16, devs[dev], b"fio\0"));
            first.extend(blk_record(le, a, sector, x.3 * 512, issue, devs[dev], &[]));
            second.extend(blk_record(le, c, sector, x.3 * 512, complete, devs[dev], &[]));
            want.push(Req {
                arrival_ns: a,
                completion_ns: Some(c),
                offset_bytes: sector * 512,
                size_bytes: x.3 * 512,
                write: x.4,
                device: format!("{},{}", devs[dev] >> 20, devs[dev] & 0xFFFFF),
            });
        }
        let mut bytes = cpu0;
        bytes.extend(cpu1);
        let t = read(&bytes, None);
        prop_assert_eq!(t.report().format, Some(Format::Blktrace));
        let got = got(&t, |id| format!("{},{}", id >> 20, id & 0xFFFFF));
        want.sort();
        // Only the notify records are ignored.
        prop_assert_eq!(t.report().ignored, d.len() as u64);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn fio_iolog_keeps_every_request((d, _) in draws(1 << 40), v3 in any::<bool>()) {
        // Version 3: µs timestamps; version 2: `wait` lines carry the gaps.
        // One file per device; fio logs in submission order.
        let arr = arrivals(&d, 0, 1);
        let files: Vec<String> = (0..4).map(|i| format!("/dev/{}", DISKS[i])).collect();
        let mut text = format!("fio version {} iolog\n", if v3 { 3 } else { 2 });
        let ts = |us: u64| if v3 { format!("{us} ") } else { String::new() };
        let mut want = Vec::new();
        let mut added = Vec::new();
        let mut prev = 0;
        for (x, &a) in d.iter().zip(&arr) {
            let file = &files[x.5];
            if !added.contains(file) {
                text += &format!("{}{file} add\n{}{file} open\n", ts(prev), ts(prev));
                added.push(file.clone());
            }
            if !v3 && a > prev {
                text += &format!("{file} wait {} 0\n", a - prev);
            }
            prev = a;
            text += &format!("{}{file} {} {} {}\n", ts(a), if x.4 { "write" } else { "read" }, x.2, x.3);
            want.push(Req {
                arrival_ns: a * 1_000,
                completion_ns: None,
                offset_bytes: x.2,
                size_bytes: x.3,
                write: x.4,
                device: file.clone(),
            });
        }
        let t = read(text.as_bytes(), None);
        prop_assert_eq!(t.report().format, Some(Format::FioIolog));
        prop_assert!(t.completion_ns().is_none());
        // each file a device named by its path, in order of first appearance
        let got = got(&t, |id| {
            let name = t.device_name(id).expect("every file names a device");
            assert_eq!(added[(id >> 24) as usize], name);
            name
        });
        check_ignoring(&t, want, got, 2 * added.len() as u64)?;
    }

    #[test]
    fn fio_latency_log_keeps_every_request((d, shuffle) in draws(1 << 40), issue_time in any::<bool>()) {
        // Completion at whole ms (the logged time) when no issue time is
        // logged; with log_issue_time, arrival = issue time exactly.
        let arr = arrivals(&d, 0, 1_000);
        let mut want = Vec::new();
        let lines: Vec<String> = d.iter().zip(&arr).map(|(x, &a)| {
            let lat = x.1 * 37;
            // Shifted by 1 s so an arrival before the log's zero stays positive.
            let base = 1_000_000_000;
            let (arrival, completion, time_ms, issue) = if issue_time {
                (base + a + 1, base + a + 1 + lat, (a + 1 + lat) / 1_000_000, format!(", {}", a + 1))
            } else {
                let c = (a / 1_000) * 1_000_000;
                (base + c - lat, base + c, a / 1_000, String::new())
            };
            want.push(Req {
                arrival_ns: arrival,
                completion_ns: Some(completion),
                offset_bytes: x.2,
                size_bytes: x.3 * 512,
                write: x.4,
                device: "0".into(),
            });
            format!("{time_ms}, {lat}, {}, {}, {}, 0{issue}\n", u8::from(x.4), x.3 * 512, x.2)
        }).collect();
        let text: String = order(&d, shuffle).into_iter().map(|i| lines[i].as_str()).collect();
        let opts = ReadOptions { format: None, ..Default::default() };
        let t = read_from(&mut text.as_bytes(), Path::new("job_clat.1.log"), &opts).unwrap();
        prop_assert_eq!(t.report().format, Some(Format::FioLat));
        let got = got(&t, |id| id.to_string());
        check_ignoring(&t, want, got, 0)?;
    }

    #[test]
    fn plain_keeps_every_completion_column((d, shuffle) in draws(1 << 40)) {
        let arr = arrivals(&d, 7, 1);
        let mut want = Vec::new();
        let lines: Vec<String> = d.iter().zip(&arr).map(|(x, &a)| {
            let c = a + x.1;
            want.push(Req {
                arrival_ns: a,
                completion_ns: Some(c),
                offset_bytes: x.2,
                size_bytes: x.3,
                write: x.4,
                device: x.5.to_string(),
            });
            format!("{}.{:06} {} {} {} {} {}.{:06}\n", a / 1_000_000, a % 1_000_000, x.5, x.2, x.3,
                if x.4 { "w" } else { "r" }, c / 1_000_000, c % 1_000_000)
        }).collect();
        let text: String = order(&d, shuffle).into_iter().map(|i| lines[i].as_str()).collect();
        let opts = ReadOptions {
            format: Some(Format::Plain),
            plain: fallow_core::trace::PlainOptions { completion: true, ..Default::default() },
            ..Default::default()
        };
        let t = read_from(&mut text.as_bytes(), Path::new("roundtrip"), &opts).unwrap();
        let got = got(&t, |id| id.to_string());
        check(&t, want, got)?;
    }
}

/// blktrace per-CPU files on disk: naming any one of them reads the set.
#[test]
fn blktrace_per_cpu_files_are_read_as_one_trace() {
    let dir = tempfile::tempdir().unwrap();
    let dev = 8u32 << 20 | 32;
    let (issue, complete) = (7 | (1 | 1 << 6) << 16, 8 | (1 | 1 << 7) << 16);
    // CPU 0 issues two reads; CPU 3 completes them; a file of another
    // device's set beside them is not read.
    let mut cpu0 = blk_record(true, 1_000, 64, 4096, issue, dev, &[]);
    cpu0.extend(blk_record(true, 1_500, 128, 8192, issue, dev, &[]));
    let mut cpu3 = blk_record(true, 2_000, 64, 4096, complete, dev, &[]);
    cpu3.extend(blk_record(true, 9_000, 128, 8192, complete, dev, &[]));
    std::fs::write(dir.path().join("sdc.blktrace.0"), &cpu0).unwrap();
    std::fs::write(dir.path().join("sdc.blktrace.3"), &cpu3).unwrap();
    // A CPU that saw no I/O leaves an empty file; naming it reads the set.
    std::fs::write(dir.path().join("sdc.blktrace.1"), b"").unwrap();
    std::fs::write(
        dir.path().join("sdd.blktrace.0"),
        blk_record(true, 5, 0, 512, issue, 1, &[]),
    )
    .unwrap();
    for name in ["sdc.blktrace.0", "sdc.blktrace.1", "sdc.blktrace.3"] {
        let t =
            fallow_core::trace::read_trace(dir.path().join(name), &ReadOptions::default()).unwrap();
        assert_eq!(t.report().format, Some(Format::Blktrace));
        assert_eq!(t.arrival_ns(), &[0, 500]);
        assert_eq!(t.completion_ns().unwrap(), &[1_000, 8_000]);
        assert_eq!(t.size_bytes(), &[4096, 8192]);
        assert_eq!(t.report().ignored, 0);
    }
}

/// Found by the `msr` fuzz target (cargo-fuzz, `-O -a`, 26 November
/// 2026): two hosts whose names differ only in bytes that are not UTF-8
/// read as the same text (`����nch`, U+FFFD for each bad byte) yet are two
/// devices. The binary cache refused its own output ("appears twice");
/// both devices, and their names as read, must survive it.
#[test]
fn msr_hosts_that_read_alike_survive_the_binary_cache() {
    let crash: &[u8] = b"1340853120000,\x90\x88\x9d\xa2nch,0,Read,+138502944,4096,2670\n\
128166000000000,\x90\x98\x9d\xa2nch,0,Read,+138502944,4096,2670\n\
128166172/030616#\n";
    let opts = ReadOptions {
        format: Some(Format::Msr),
        skip_bad: true,
        ..Default::default()
    };
    let t = read_from(&mut &crash[..], Path::new("crash.csv"), &opts).unwrap();
    assert_eq!((t.len(), t.report().skipped), (2, 1));
    assert_eq!(t.devices().len(), 2);
    let hosts = &t.report().hosts;
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[0], hosts[1]);
    let mut bytes = Vec::new();
    write_fallow_bin(&t, &mut bytes).unwrap();
    let back = read(&bytes, None);
    assert_eq!(&back.report().hosts, hosts);
    assert_eq!(back.device(), t.device());
    assert_eq!(back.devices(), t.devices());
}
