//! The HP hplajw trace's idle periods on disk 0, computed twice: by the
//! fallow pipeline (`read_trace` → `select_device(0)` → `period::extract`)
//! and by a minimal routine here that shares no code with it (whole file
//! in memory, form feed found by hand, records walked by their size word,
//! big-endian fields decoded with shifts, busy periods by its own sweep).
//! Both must agree exactly and match the README's facts.

use super::shared;
use fallow_core::period;
use fallow_core::trace::{read_trace, ReadOptions};

/// `(enqueue µs, completion µs)` of every disk-0 request, in file order.
fn disk0_by_hand(bytes: &[u8]) -> Vec<(u64, u64)> {
    let word = |at: usize| -> u32 {
        (bytes[at] as u32) << 24
            | (bytes[at + 1] as u32) << 16
            | (bytes[at + 2] as u32) << 8
            | bytes[at + 3] as u32
    };
    let mut at = bytes.iter().position(|&b| b == 0x0C).unwrap() + 1;
    let mut out = Vec::new();
    while at < bytes.len() {
        let size = word(at) as usize;
        let field = |i: usize| word(at + 4 * i);
        // fields: size id sec usec start stop size_bytes sectno devno ...
        assert_eq!(field(1) & 0xFFFF, 1, "only short I/O records in this file");
        let disk = (field(8) >> 8) & 0xFF;
        if disk == 0 {
            let enqueue = field(2) as u64 * 1_000_000 + field(3) as u64;
            out.push((enqueue, enqueue + field(5) as u64));
        }
        at += size;
    }
    assert_eq!(at, bytes.len());
    out
}

/// Idle gaps (µs) and requests per busy period of the union of intervals.
fn sweep(mut reqs: Vec<(u64, u64)>) -> (Vec<u64>, Vec<u32>) {
    reqs.sort_by_key(|r| r.0);
    let (mut idle, mut busy) = (Vec::new(), Vec::new());
    let (mut end, mut count) = (reqs[0].1, 0u32);
    for (a, c) in reqs {
        if a > end {
            idle.push(a - end);
            busy.push(count);
            count = 0;
        }
        end = end.max(c);
        count += 1;
    }
    busy.push(count);
    (idle, busy)
}

#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn hp_disk0_idle_periods_match_an_independent_decoder_and_the_readme() {
    let path = shared("hp-hplajw-1992/ajw.1week.srt");
    let mine = disk0_by_hand(&std::fs::read(&path).unwrap());
    assert_eq!(mine.len(), 42_252);
    let (idle_us, busy_reqs) = sweep(mine);

    let trace = read_trace(&path, &ReadOptions::default()).unwrap();
    let disk0 = trace.select_device(0).unwrap();
    let p = period::extract(disk0.arrival_ns(), disk0.completion_ns().unwrap());
    let idle_ns: Vec<u64> = idle_us.iter().map(|&u| u * 1000).collect();
    assert_eq!(p.idle_len_ns, idle_ns);
    assert_eq!(p.busy_requests, busy_reqs);

    // README: 25,480 idle intervals, mean idle 23.6 s, CV 7.4, longest
    // 1,770 s, mean busy period 1.66 requests (longest 504).
    let n = idle_us.len() as f64;
    assert_eq!(idle_us.len(), 25_480);
    let mean = idle_us.iter().map(|&v| v as f64).sum::<f64>() / n;
    let sd = (idle_us
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    assert_eq!((mean / 1e6 * 10.0).round(), 236.0);
    assert_eq!((sd / mean * 10.0).round(), 74.0);
    assert_eq!(
        (*idle_us.iter().max().unwrap() as f64 / 1e6).round(),
        1770.0
    );
    let busy_mean = busy_reqs.iter().map(|&r| r as f64).sum::<f64>() / busy_reqs.len() as f64;
    assert_eq!((busy_mean * 100.0).round(), 166.0);
    assert_eq!(*busy_reqs.iter().max().unwrap(), 504);
}
