//! Per-device figures (docs/characterisation.md): for every reader whose records carry a
//! device, one device's analysis, simulation, tuning and energy study read
//! from a file of several devices equal those of a file holding only that
//! device's requests, and its span is its own: from its first arrival to
//! its last completion (recorded, or modelled by a service model), the
//! value this test computes from the requests it wrote (not from fallow).
//!
//! Devices start and end at very different times (the case that went wrong:
//! an MSR file of `hm` and `rsrch`, where `hm`'s span was measured from
//! `rsrch`'s first request and its BG throughput came out 11× too low).
//! A deterministic generator over many seeds stands in for proptest: each
//! case runs the four analyses twice per device.

use fallow_core::energy::{study, Availability, EnergyConfig, EnergyInput};
use fallow_core::sim::{simulate, Prepared, SimConfig};
use fallow_core::trace::{read_from, write_fallow_bin, DeviceSel, Format, ReadOptions};
use fallow_core::tune::{self, Budget, SearchMode, TuneConfig};
use fallow_core::{characterize, policy, CharacterizeOptions, ServiceModel, Trace};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde_json::Value;
use std::path::Path;

/// One request as written: absolute times in ns (multiples of 10 µs, which
/// every format below represents exactly), a unique sector.
#[derive(Debug, Clone)]
struct Req {
    device: usize,
    arrival_ns: u64,
    completion_ns: u64,
    sector: u64,
    size_bytes: u32,
    write: bool,
}

const TEN_US: u64 = 10_000;

/// 2 or 3 devices, each with its own start (0 to 1,000 s after the first)
/// and 15–40 requests, gaps of up to 3 s, service times up to 20 ms.
fn requests(seed: u64) -> (usize, Vec<Req>) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let devices = rng.random_range(2..=3usize);
    let mut all = Vec::new();
    let mut sector = 0u64;
    for device in 0..devices {
        let mut t = 1_000_000 + rng.random_range(0..100_000u64); // 10 µs units
        let mut done = 0u64;
        for _ in 0..rng.random_range(15..=40) {
            t += rng.random_range(0..300_000u64);
            let service = rng.random_range(1..2_000u64);
            // one queue per device: a completion never precedes the one before
            done = done.max(t) + service;
            sector += 64;
            all.push(Req {
                device,
                arrival_ns: t * TEN_US,
                completion_ns: done * TEN_US,
                sector,
                size_bytes: 512 * rng.random_range(1..=256u32),
                write: rng.random_bool(0.5),
            });
        }
    }
    all.sort_by_key(|r| (r.arrival_ns, r.device));
    (devices, all)
}

/// A format's writer for the requests of `keep`, and the name its reader
/// gives device `d`.
struct Writer {
    name: &'static str,
    /// Whether the format records completions (else a service model is used).
    completions: bool,
    write: fn(&[&Req]) -> Vec<u8>,
    device_name: fn(usize) -> String,
}

const HOSTS: [&str; 3] = ["hm", "rsrch", "src1"];
const DISKS: [&str; 3] = ["sda", "sdb", "nvme0n1"];
const DEVNUMS: [(u32, u32); 3] = [(8, 0), (8, 16), (259, 0)];
const DEVFILES: [&str; 3] = ["/dev/sda", "/dev/sdb", "/dev/nvme0n1"];

fn lines(reqs: &[&Req], line: impl Fn(&Req) -> String) -> Vec<u8> {
    reqs.iter()
        .map(|r| line(r))
        .collect::<String>()
        .into_bytes()
}

fn writers() -> Vec<Writer> {
    vec![
        Writer {
            name: "msr",
            completions: true,
            write: |reqs| {
                // Windows filetime ticks of 100 ns; response time in ticks.
                lines(reqs, |r| {
                    format!(
                        "{},{},0,{},{},{},{}\n",
                        128_166_372_000_000_000 + r.arrival_ns / 100,
                        HOSTS[r.device],
                        if r.write { "Write" } else { "Read" },
                        r.sector * 512,
                        r.size_bytes,
                        (r.completion_ns - r.arrival_ns) / 100
                    )
                })
            },
            device_name: |d| format!("{}:0", HOSTS[d]),
        },
        Writer {
            name: "blkparse",
            completions: true,
            write: |reqs| {
                let at = |t: u64| format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000);
                let mut ev: Vec<(u64, u8, String)> = Vec::new();
                for (i, r) in reqs.iter().enumerate() {
                    let (maj, min) = DEVNUMS[r.device];
                    let rwbs = if r.write { "W" } else { "R" };
                    let blocks = r.size_bytes / 512;
                    ev.push((
                        r.arrival_ns,
                        0,
                        format!(
                            "{maj:3},{min:<3} 0 {:8} {:14} {:5}  D {rwbs:>3} {} + {blocks} [fio]\n",
                            2 * i + 1,
                            at(r.arrival_ns),
                            100 + i,
                            r.sector
                        ),
                    ));
                    ev.push((
                        r.completion_ns,
                        1,
                        format!(
                            "{maj:3},{min:<3} 1 {:8} {:14}     0  C {rwbs:>3} {} + {blocks} [0]\n",
                            2 * i + 2,
                            at(r.completion_ns),
                            r.sector
                        ),
                    ));
                }
                ev.sort_by_key(|e| (e.0, e.1));
                ev.into_iter().map(|e| e.2).collect::<String>().into_bytes()
            },
            device_name: |d| format!("{},{}", DEVNUMS[d].0, DEVNUMS[d].1),
        },
        Writer {
            name: "bpftrace",
            completions: true,
            write: |reqs| {
                let mut out = b"Attaching 3 probes...\n".to_vec();
                out.extend(lines(reqs, |r| {
                    let (maj, min) = DEVNUMS[r.device];
                    format!(
                        "fallow-io {} {} {maj} {min} {} {} {}\n",
                        r.arrival_ns + 5_000_000_000,
                        r.completion_ns + 5_000_000_000,
                        r.sector,
                        r.size_bytes,
                        if r.write { "WS" } else { "R" }
                    )
                }));
                out
            },
            device_name: |d| format!("{},{}", DEVNUMS[d].0, DEVNUMS[d].1),
        },
        Writer {
            name: "biosnoop",
            completions: true,
            write: |reqs| {
                // Lines in completion order; TIME(s) is the completion in
                // µs, LAT(ms) the latency in steps of 10 µs.
                let mut by_done: Vec<&&Req> = reqs.iter().collect();
                by_done.sort_by_key(|r| r.completion_ns);
                let mut out =
                    b"TIME(s)     COMM           PID     DISK      T SECTOR     BYTES   LAT(ms)\n"
                        .to_vec();
                for r in by_done {
                    let c = r.completion_ns;
                    let lat = (r.completion_ns - r.arrival_ns) / TEN_US;
                    out.extend(
                        format!(
                            "{}.{:06} fio            4242    {:<9} {} {:<10} {:<7} {}.{:02}\n",
                            c / 1_000_000_000,
                            c / 1_000 % 1_000_000,
                            DISKS[r.device],
                            if r.write { "W" } else { "R" },
                            r.sector,
                            r.size_bytes,
                            lat / 100,
                            lat % 100
                        )
                        .bytes(),
                    );
                }
                out
            },
            device_name: |d| DISKS[d].to_string(),
        },
        Writer {
            name: "blktrace",
            completions: true,
            write: |reqs| {
                let mut out = Vec::new();
                for r in reqs {
                    let (maj, min) = DEVNUMS[r.device];
                    let dev = maj << 20 | min;
                    let dir = if r.write { 2 } else { 1 };
                    let issue = 7 | (dir | 1 << 6) << 16;
                    let complete = 8 | (dir | 1 << 7) << 16;
                    out.extend(blk_record(r.arrival_ns, r.sector, r.size_bytes, issue, dev));
                    out.extend(blk_record(
                        r.completion_ns,
                        r.sector,
                        r.size_bytes,
                        complete,
                        dev,
                    ));
                }
                out
            },
            device_name: |d| format!("{},{}", DEVNUMS[d].0, DEVNUMS[d].1),
        },
        Writer {
            name: "hp-srt",
            completions: true,
            write: |reqs| {
                // Big-endian words (see the round-trip test): disk number
                // in bits 8..16 of devno, stop in µs after the enqueue.
                let mut out = Vec::new();
                for r in reqs {
                    let us = r.arrival_ns / 1_000 + 700_000_000_000;
                    let words: [u32; 13] = [
                        52,
                        1 << 16 | 1,
                        (us / 1_000_000) as u32,
                        (us % 1_000_000) as u32,
                        0,
                        ((r.completion_ns - r.arrival_ns) / 1_000) as u32,
                        r.size_bytes,
                        r.sector as u32,
                        (r.device as u32) << 8 | 3,
                        0,
                        0,
                        u32::from(!r.write),
                        0,
                    ];
                    out.extend(words.iter().flat_map(|w| w.to_be_bytes()));
                }
                out
            },
            device_name: |d| d.to_string(),
        },
        Writer {
            name: "fio-iolog",
            completions: false,
            write: |reqs| {
                // version 3: µs timestamps; each file added and opened
                // before its first request (the lines fio writes)
                let mut out = String::from("fio version 3 iolog\n");
                let mut added = [false; 3];
                for r in reqs {
                    let (us, file) = (r.arrival_ns / 1_000, DEVFILES[r.device]);
                    if !added[r.device] {
                        out += &format!("{us} {file} add\n{us} {file} open\n");
                        added[r.device] = true;
                    }
                    out += &format!(
                        "{us} {file} {} {} {}\n",
                        if r.write { "write" } else { "read" },
                        r.sector * 512,
                        r.size_bytes
                    );
                }
                out.into_bytes()
            },
            device_name: |d| DEVFILES[d].to_string(),
        },
        Writer {
            name: "spc",
            completions: false,
            write: |reqs| {
                lines(reqs, |r| {
                    format!(
                        "{},{},{},{},{}.{:09}\n",
                        r.device,
                        r.sector,
                        r.size_bytes,
                        if r.write { "w" } else { "r" },
                        r.arrival_ns / 1_000_000_000,
                        r.arrival_ns % 1_000_000_000
                    )
                })
            },
            device_name: |d| d.to_string(),
        },
        Writer {
            name: "plain",
            completions: false,
            write: |reqs| {
                lines(reqs, |r| {
                    format!(
                        "{}.{:06} {} {} {} {}\n",
                        r.arrival_ns / 1_000_000,
                        r.arrival_ns % 1_000_000,
                        r.device,
                        r.sector * 512,
                        r.size_bytes,
                        if r.write { "w" } else { "r" }
                    )
                })
            },
            device_name: |d| d.to_string(),
        },
    ]
}

/// A `struct blk_io_trace` (version 7, little-endian), no payload.
fn blk_record(time: u64, sector: u64, bytes: u32, action: u32, device: u32) -> Vec<u8> {
    let mut r = Vec::with_capacity(48);
    for w in [0x6561_7407u32, 1] {
        r.extend_from_slice(&w.to_le_bytes());
    }
    r.extend_from_slice(&time.to_le_bytes());
    r.extend_from_slice(&sector.to_le_bytes());
    for w in [bytes, action, 42, device, 0] {
        r.extend_from_slice(&w.to_le_bytes());
    }
    r.extend_from_slice(&[0; 4]);
    r
}

fn read(bytes: &[u8], format: Format) -> Trace {
    let opts = ReadOptions {
        format: Some(format),
        ..Default::default()
    };
    read_from(&mut &bytes[..], Path::new("per-device"), &opts)
        .unwrap_or_else(|e| panic!("{format}: a written trace reads: {e}"))
}

/// The service model of formats without completions.
const SERVICE_NS: u64 = 3_000_000;

/// Last completion − first arrival of `reqs`, ns, from their recorded
/// completions or, without them, a FCFS queue of constant service times
/// computed here.
fn span_ns(reqs: &[&Req], recorded: bool) -> u64 {
    let first = reqs[0].arrival_ns;
    let last = if recorded {
        reqs.iter().map(|r| r.completion_ns).max().unwrap()
    } else {
        reqs.iter()
            .fold(0u64, |done, r| done.max(r.arrival_ns) + SERVICE_NS)
    };
    last - first
}

/// The figures a user acts on, as JSON: analyze's (without the file's
/// device list and path), a simulation, a tuning and an energy study.
/// Tuning is the slow one (0.4 s a case in a debug build): only with `tune`.
fn figures(t: &Trace, recorded: bool, with_tune: bool) -> Vec<(&'static str, Value)> {
    let service = (!recorded).then_some(ServiceModel::Constant { ns: SERVICE_NS });
    let opts = CharacterizeOptions {
        service: service.clone(),
        ..Default::default()
    };
    let mut c = serde_json::to_value(characterize(t, vec![], None, &opts).unwrap()).unwrap();
    let trace = c["trace"].take();
    let prep = Prepared::new(t, service.as_ref(), 0).unwrap();
    let sim = SimConfig::default();
    let mut pol = policy::build("fixed-wait:t=5ms").unwrap();
    let s = simulate(&prep, pol.as_mut(), &sim).unwrap();
    let tuned = with_tune.then(|| {
        tune::tune(
            &prep,
            "fixed-wait",
            &sim,
            &TuneConfig {
                budgets: Budget::parse_list("1ms").unwrap(),
                sizes: tune::parse_sizes("64KiB").unwrap(),
                max_delay_ns: None,
                threads: 1,
                fast: true,
                search: SearchMode::Coarse,
                auto_limit_visits: tune::AUTO_EXACT_LIMIT_VISITS,
                cancel: None,
            },
            &|_, _| {},
        )
        .unwrap()
    });
    let input = EnergyInput::from_trace(t, service.as_ref(), 0).unwrap();
    let energy = study(
        &input,
        &["timeout:t=2s".to_string()],
        &[Availability::LocalFraction { fraction: 0.5 }],
        &EnergyConfig::default(),
    )
    .unwrap();
    vec![
        ("analyze span_s", trace["span_s"].clone()),
        ("analyze", c),
        ("simulate", serde_json::to_value(&s).unwrap()),
        ("tune", serde_json::to_value(&tuned).unwrap()),
        ("energy", serde_json::to_value(&energy).unwrap()),
    ]
}

#[test]
fn each_devices_figures_equal_those_of_a_file_of_its_requests_alone() {
    for w in writers() {
        let format: Format = w.name.parse().unwrap();
        for seed in 0..8u64 {
            let (devices, reqs) = requests(seed);
            let all: Vec<&Req> = reqs.iter().collect();
            let multi = read(&(w.write)(&all), format);
            assert_eq!(multi.devices().len(), devices, "{} seed {seed}", w.name);
            for d in 0..devices {
                let what = format!("{} seed {seed} device {}", w.name, (w.device_name)(d));
                let mine: Vec<&Req> = reqs.iter().filter(|r| r.device == d).collect();
                let alone = read(&(w.write)(&mine), format);
                // chosen by the name the reader gives it, as `--device` does
                let sel: DeviceSel = (w.device_name)(d).parse().unwrap();
                let id = multi
                    .resolve_device(&sel)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let picked = multi.select_device(id).unwrap();
                assert_eq!(picked.len(), mine.len(), "{what}");
                assert_eq!(picked.arrival_ns(), alone.arrival_ns(), "{what}");
                assert_eq!(picked.completion_ns(), alone.completion_ns(), "{what}");
                assert_eq!(
                    picked.report().origin_ns,
                    alone.report().origin_ns,
                    "{what}"
                );
                let want_span_s = span_ns(&mine, w.completions) as f64 / 1e9;
                let (a, b) = (
                    figures(&picked, w.completions, seed < 2),
                    figures(&alone, w.completions, seed < 2),
                );
                for ((name, x), (_, y)) in a.iter().zip(&b) {
                    assert_eq!(x, y, "{what}: {name}");
                }
                for (name, v) in &a {
                    let span = match *name {
                        "analyze span_s" => v.as_f64(),
                        "simulate" => v["span_s"].as_f64(),
                        _ => continue,
                    };
                    assert_eq!(span, Some(want_span_s), "{what}: {name}");
                }
                let e = &a[4].1[0];
                assert_eq!(
                    e["span_s"].as_f64(),
                    Some(want_span_s),
                    "{what}: energy span"
                );
            }
        }
    }
}

/// The same through fallow's binary cache (`fallow convert`): names and
/// per-device spans survive, for MSR hosts and biosnoop disks.
#[test]
fn names_and_spans_survive_the_binary_cache() {
    for w in writers()
        .into_iter()
        .filter(|w| ["msr", "biosnoop"].contains(&w.name))
    {
        let (devices, reqs) = requests(99);
        let all: Vec<&Req> = reqs.iter().collect();
        let multi = read(&(w.write)(&all), w.name.parse().unwrap());
        let mut bytes = Vec::new();
        write_fallow_bin(&multi, &mut bytes).unwrap();
        let back = read(&bytes, Format::Fallow);
        for d in 0..devices {
            let name = (w.device_name)(d);
            let id = back.resolve_device(&name.parse().unwrap()).unwrap();
            assert_eq!(back.device_name(id), Some(name.clone()), "{}", w.name);
            let mine: Vec<&Req> = reqs.iter().filter(|r| r.device == d).collect();
            let t = back.select_device(id).unwrap();
            assert_eq!(t.span_ns(), span_ns(&mine, true), "{} {name}", w.name);
        }
    }
}
