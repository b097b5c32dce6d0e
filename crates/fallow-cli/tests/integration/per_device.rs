//! Per-device figures through the binary: one device of a multi-device file gets the
//! figures of a file holding only its requests (the MSR file of hosts `hm`
//! and `rsrch`, where `hm:0`'s BG throughput came out 11x too low), and a
//! biosnoop capture's disks are listed and chosen by name (`--device sda`).
//! The core's per-reader property test is `fallow-core`'s `per_device`.

use crate::common;

use common::{bad_input, json};
use serde_json::Value;

/// `n` MSR lines of `host`, disk 0, starting `start_ticks` (100 ns) after
/// the trace's first, 0.127 s apart, each served in 2 ms.
fn msr_lines(host: &str, start_ticks: u64, n: u64) -> String {
    (0..n)
        .map(|i| {
            let t = 128_166_372_000_000_000 + start_ticks + i * 1_270_000;
            let op = if i % 3 == 0 { "Write" } else { "Read" };
            format!(
                "{t},{host},0,{op},{},{},20000\n",
                i * 65536,
                4096 * (1 + i % 16)
            )
        })
        .collect()
}

fn figures(v: &Value) -> (Value, Value, Value, Value) {
    (
        v["bg"]["throughput_bytes_per_s"].clone(),
        v["utilization"].clone(),
        v["span_s"].clone(),
        v["fg"]["mean_added_delay_s"].clone(),
    )
}

#[test]
fn an_msr_host_of_a_merged_file_gets_its_own_figures() {
    let d = tempfile::tempdir().unwrap();
    // rsrch from time 0, hm from 20 minutes later, 1,000 requests each
    let (rsrch, hm) = (
        msr_lines("rsrch", 0, 1000),
        msr_lines("hm", 12_000_000_000, 1000),
    );
    let mut both: Vec<&str> = rsrch.lines().chain(hm.lines()).collect();
    both.sort_by_key(|l| l.split(',').next().unwrap().parse::<u64>().unwrap());
    let both_path = d.path().join("both.csv");
    std::fs::write(&both_path, both.join("\n") + "\n").unwrap();
    let hm_path = d.path().join("hm.csv");
    std::fs::write(&hm_path, &hm).unwrap();
    let (b, h) = (both_path.to_str().unwrap(), hm_path.to_str().unwrap());
    let sim = |file: &str, dev: &[&str]| {
        let mut a = vec!["simulate", file, "--policy", "fixed-wait:t=10ms"];
        a.extend(dev);
        json(&a)
    };
    let merged = sim(b, &["--device", "hm:0"]);
    let alone = sim(h, &[]);
    assert_eq!(figures(&merged), figures(&alone));
    // 999 gaps of 0.127 s and the last request's 2 ms
    let span = merged["span_s"].as_f64().unwrap();
    assert!((span - (999.0 * 0.127 + 0.002)).abs() < 1e-9, "{span}");
    // analyze's span too, and with a service model it runs to the last
    // modelled completion: 999 gaps plus one 5 ms service time
    let an = |file: &str, dev: &[&str], extra: &[&str]| {
        let mut a = vec!["analyze", file];
        a.extend(dev);
        a.extend(extra);
        json(&a)["trace"]["span_s"].as_f64().unwrap()
    };
    assert_eq!(an(b, &["--device", "hm:0"], &[]), span);
    let modelled = an(b, &["--device", "hm:0"], &["--service", "const:5ms"]);
    assert!(
        (modelled - (999.0 * 0.127 + 0.005)).abs() < 1e-9,
        "{modelled}"
    );
    assert_eq!(an(h, &[], &["--service", "const:5ms"]), modelled);
}

#[test]
fn biosnoop_disks_are_listed_and_chosen_by_name() {
    let d = tempfile::tempdir().unwrap();
    let mut text =
        String::from("TIME(s)     COMM           PID     DISK      T SECTOR     BYTES   LAT(ms)\n");
    // sda every 0.5 s from 1 s, sdb every 0.25 s from 30 s, 1 ms latency
    let mut lines: Vec<(u64, String)> = Vec::new();
    for i in 0..40u64 {
        let c = 1_000_000 + i * 500_000;
        lines.push((
            c,
            format!(
                "{}.{:06} fio  42  sda  R {} 4096   1.00\n",
                c / 1_000_000,
                c % 1_000_000,
                i * 8
            ),
        ));
        let c = 30_000_000 + i * 250_000;
        lines.push((
            c,
            format!(
                "{}.{:06} fio  42  sdb  W {} 8192   1.00\n",
                c / 1_000_000,
                c % 1_000_000,
                i * 16
            ),
        ));
    }
    lines.sort();
    text.extend(lines.into_iter().map(|l| l.1));
    let p = d.path().join("bio.txt");
    std::fs::write(&p, text).unwrap();
    let p = p.to_str().unwrap();
    let v = json(&["analyze", p, "--device", "sdb"]);
    let names: Vec<&str> = v["trace"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sda", "sdb"]);
    // sdb's own span: 39 gaps of 0.25 s plus its last 1 ms request
    let span = v["trace"]["span_s"].as_f64().unwrap();
    assert!((span - (39.0 * 0.25 + 0.001)).abs() < 1e-9, "{span}");
    bad_input(&["analyze", p, "--device", "sdz"], &["sdz", "sda", "sdb"]);
}
