//! The fleet analysis (docs/fleet.md) through the binary: `fallow analyze FILE --device all`
//! gives every device the figures `fallow analyze FILE --device ID` gives
//! it, in one pass, as JSON and CSV. The core's tests (`fleet`)
//! check the same against the periods directly, and the state's size.

use crate::common;

use common::{bad_input, fallow, json, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn traces(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/traces")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

/// Every row of `--device all --json` against `--device ID --json`:
/// counts, means, span and utilisation exactly, the CV to 1e-9, the p90
/// within the histogram's 1 % where the device has enough idle intervals
/// (≥ 200) that neighbouring order statistics are close, and within the
/// device's idle range otherwise.
/// Returns the rows and how many had ≥ 200 idle intervals.
fn check(file: &str, extra: &[&str]) -> (usize, usize) {
    let mut a = vec!["analyze", file, "--device", "all"];
    a.extend(extra);
    let all = json(&a);
    let rows = all["devices"].as_array().unwrap();
    assert!(rows.len() > 1, "{file}: a multi-device file");
    let mut dense = 0;
    for row in rows {
        let sel = match &row["name"] {
            Value::String(s) => s.clone(),
            _ => row["id"].to_string(),
        };
        let mut a = vec!["analyze", file, "--device", &sel];
        a.extend(extra);
        let one = json(&a);
        let at = format!("{file} {sel}");
        assert_eq!(row["requests"], one["trace"]["requests"], "{at}");
        assert_eq!(row["span_s"], one["trace"]["span_s"], "{at}");
        assert_eq!(row["utilization"], one["utilization"], "{at}");
        assert_eq!(row["idle_count"], one["idle"]["count"], "{at}");
        assert_eq!(row["idle_mean_s"], one["idle"]["mean_s"], "{at}");
        assert_eq!(row["idle_total_s"], one["idle"]["total_s"], "{at}");
        assert_eq!(row["busy_count"], one["busy"]["count"], "{at}");
        assert_eq!(row["busy_mean_s"], one["busy"]["mean_s"], "{at}");
        let f = |v: &Value| v.as_f64().unwrap();
        let (cv, cv1) = (f(&row["idle_cv"]), f(&one["idle"]["cv"]));
        assert!(
            (cv - cv1).abs() <= 1e-9 * cv1.max(1.0),
            "{at}: {cv} vs {cv1}"
        );
        let (p90, exact) = (f(&row["idle_p90_s"]), f(&one["idle"]["p90_s"]));
        let (min, max) = (f(&one["idle"]["min_s"]), f(&one["idle"]["max_s"]));
        assert!(
            p90 >= min && p90 <= max,
            "{at}: {p90} outside [{min}, {max}]"
        );
        if one["idle"]["count"].as_u64().unwrap() >= 200 {
            assert!(
                (p90 - exact).abs() <= 0.01 * exact,
                "{at}: {p90} vs {exact}"
            );
            dense += 1;
        }
    }
    (rows.len(), dense)
}

#[test]
fn every_device_of_the_fixtures_gets_its_one_device_figures() {
    check(&traces("small.msr.csv"), &[]);
    check(
        &traces("small.msr.csv"),
        &["--service", "exp:3ms", "--seed", "4"],
    );
    check(&traces("small.alibaba.csv"), &["--service", "disk"]);
    check(&traces("small.tencent.csv"), &["--service", "const:2ms"]);
}

/// A fleet in the Alibaba layout: `volumes` volumes of their own rates,
/// interleaved by time.
fn generated(dir: &Path, volumes: u64) -> PathBuf {
    let mut rows = Vec::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for v in 0..volumes {
        let mut t = 1_577_836_800_000_000u64 + v;
        for i in 0..1_500u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t += 1 + (x >> 40) % (2_000 * (v + 1));
            let op = if i % 4 == 0 { 'W' } else { 'R' };
            rows.push((
                t,
                format!("{},{op},{},4096,{t}", 100 + v, (x >> 8) % (1 << 34)),
            ));
        }
    }
    rows.sort_by_key(|r| r.0);
    let path = dir.join("fleet.csv");
    let text: String = rows.into_iter().map(|r| r.1 + "\n").collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_generated_fleet_and_several_msr_hosts_get_their_one_device_figures() {
    let d = tempfile::tempdir().unwrap();
    let fleet = generated(d.path(), 4);
    let fleet = fleet.to_str().unwrap();
    // every volume has hundreds of idle intervals: the p90 is held to 1 %
    assert_eq!(check(fleet, &["--service", "exp:500us"]), (4, 4));
    // two MSR hosts, disk 0 each, interleaved by time
    let lines = |host: &str, start: u64, gap: u64| -> Vec<(u64, String)> {
        (0..300u64)
            .map(|i| {
                let t = 128_166_372_000_000_000 + start + i * gap + (i * i) % 997 * 50;
                (t, format!("{t},{host},0,Read,{},4096,20000", i * 4096))
            })
            .collect()
    };
    let mut both = lines("rsrch", 0, 300_000);
    both.extend(lines("hm", 1_234, 170_000));
    both.sort_by_key(|l| l.0);
    let hosts = d.path().join("hosts.csv");
    let text: String = both.into_iter().map(|l| l.1 + "\n").collect();
    std::fs::write(&hosts, text).unwrap();
    assert_eq!(check(hosts.to_str().unwrap(), &[]), (2, 2));
}

#[test]
fn csv_rows_carry_the_json_figures() {
    let file = traces("small.alibaba.csv");
    let o = fallow(&[
        "analyze",
        &file,
        "--device",
        "all",
        "--service",
        "disk",
        "--csv",
    ]);
    assert!(o.status.success());
    let text = stdout(&o);
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "device,requests,span_s,utilization,idle_count,idle_total_s,idle_mean_s,idle_cv,idle_p90_s,busy_mean_s"
    );
    let all = json(&["analyze", &file, "--device", "all", "--service", "disk"]);
    let rows = all["devices"].as_array().unwrap();
    let lines: Vec<&str> = lines.collect();
    assert_eq!(lines.len(), rows.len());
    for (line, row) in lines.iter().zip(rows) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[0], row["id"].to_string());
        assert_eq!(f[1], row["requests"].to_string());
        assert_eq!(
            f[2].parse::<f64>().unwrap(),
            row["span_s"].as_f64().unwrap()
        );
        assert_eq!(
            f[6].parse::<f64>().unwrap(),
            row["idle_mean_s"].as_f64().unwrap()
        );
    }
}

#[test]
fn without_completions_or_in_disorder_the_error_says_why() {
    let file = traces("small.alibaba.csv");
    bad_input(
        &["analyze", &file, "--device", "all"],
        &["no completion times", "--service"],
    );
    let d = tempfile::tempdir().unwrap();
    let late = d.path().join("late.csv");
    std::fs::write(&late, "1,R,0,4096,100\n2,R,0,4096,50\n1,R,0,4096,90\n").unwrap();
    bad_input(
        &[
            "analyze",
            late.to_str().unwrap(),
            "--device",
            "all",
            "--service",
            "disk",
        ],
        &["line 3", "device 1", "arrival order"],
    );
    bad_input(&["analyze", &file, "--csv"], &["--device all"]);
}

/// `convert FILE --partition-by device -o DIR`, each
/// partition analysed alone against `analyze FILE --device NAME` (the
/// same requests in the same order give the same figures, modelled
/// service included), the directories named as docs/fleet.md says.
fn check_partitions(file: &str, extra: &[&str], dirs: &[(&str, &str)]) {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ds");
    let o = fallow(&[
        "convert",
        file,
        "--partition-by",
        "device",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let mut listed: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listed.sort();
    let mut want: Vec<String> = dirs.iter().map(|(dir, _)| dir.to_string()).collect();
    want.sort();
    assert_eq!(listed, want, "{file}");
    // nothing left beside the dataset (staging, the old dataset)
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    for (dir, device) in dirs {
        let part = out.join(dir).join("part-0.parquet");
        assert!(!out.join(dir).join("part-1.parquet").exists());
        let mut a = vec!["analyze", part.to_str().unwrap()];
        a.extend(extra);
        let alone = json(&a);
        let mut a = vec!["analyze", file, "--device", device];
        a.extend(extra);
        let one = json(&a);
        let at = format!("{file} {device}");
        for k in ["requests", "span_s"] {
            assert_eq!(alone["trace"][k], one["trace"][k], "{at} {k}");
        }
        assert_eq!(alone["utilization"], one["utilization"], "{at}");
        for k in ["count", "mean_s", "total_s", "cv", "p90_s", "max_s"] {
            assert_eq!(alone["idle"][k], one["idle"][k], "{at} idle {k}");
        }
        assert_eq!(alone["busy"], one["busy"], "{at}");
    }
}

#[test]
fn partitions_analyse_as_their_device_of_the_source() {
    check_partitions(
        &traces("small.msr.csv"),
        &[],
        &[("device=0", "0"), ("device=1", "1")],
    );
    check_partitions(
        &traces("small.alibaba.csv"),
        &["--service", "exp:3ms", "--seed", "4"],
        &[("device=17", "17"), ("device=419", "419")],
    );
    check_partitions(
        &traces("small.tencent.csv"),
        &["--service", "const:2ms"],
        &[("device=7", "7"), ("device=1063", "1063")],
    );
    let d = tempfile::tempdir().unwrap();
    let fleet = generated(d.path(), 3);
    check_partitions(
        fleet.to_str().unwrap(),
        &["--service", "exp:500us"],
        &[
            ("device=100", "100"),
            ("device=101", "101"),
            ("device=102", "102"),
        ],
    );
    // two MSR hosts: `host:disk` names, `:` escaped as %3A
    let hosts = d.path().join("hosts.csv");
    std::fs::write(
        &hosts,
        "128166372000000000,hm,0,Read,0,4096,20000\n\
         128166372000100000,rsrch,0,Write,4096,8192,30000\n\
         128166372000900000,hm,0,Read,8192,4096,20000\n\
         128166372001000000,rsrch,0,Read,0,4096,10000\n",
    )
    .unwrap();
    check_partitions(
        hosts.to_str().unwrap(),
        &[],
        &[("device=hm%3A0", "hm:0"), ("device=rsrch%3A0", "rsrch:0")],
    );
}

#[test]
fn a_partition_directory_is_new_empty_or_fallow_s_own() {
    let d = tempfile::tempdir().unwrap();
    let file = traces("small.alibaba.csv");
    let out = d.path().join("ds");
    let out_s = out.to_str().unwrap();
    let convert = |o: &str| fallow(&["convert", &file, "--partition-by", "device", "-o", o]);
    // empty: written
    std::fs::create_dir(&out).unwrap();
    assert!(convert(out_s).status.success());
    // fallow's own dataset: replaced, with no stale partition left
    std::fs::create_dir(out.join("device=999")).unwrap();
    std::fs::copy(
        out.join("device=17/part-0.parquet"),
        out.join("device=999/part-0.parquet"),
    )
    .unwrap();
    assert!(convert(out_s).status.success());
    assert!(!out.join("device=999").exists());
    assert!(out.join("device=419/part-0.parquet").exists());
    // anything else in it: refused, and left as it was, --overwrite or not
    std::fs::write(out.join("device=17/notes.txt"), "mine").unwrap();
    for extra in [&[][..], &["--overwrite"][..]] {
        let mut a = vec![
            "convert",
            file.as_str(),
            "--partition-by",
            "device",
            "-o",
            out_s,
        ];
        a.extend(extra);
        bad_input(&a, &["notes.txt", "not a dataset fallow wrote"]);
    }
    assert_eq!(
        std::fs::read_to_string(out.join("device=17/notes.txt")).unwrap(),
        "mine"
    );
    // a file, a directory holding the input, a FIFO
    let plain = d.path().join("plain.txt");
    std::fs::write(&plain, "x").unwrap();
    bad_input(
        &[
            "convert",
            &file,
            "--partition-by",
            "device",
            "-o",
            plain.to_str().unwrap(),
        ],
        &["is a file"],
    );
    let tree = d.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let input = tree.join("in.csv");
    std::fs::copy(&file, &input).unwrap();
    bad_input(
        &[
            "convert",
            input.to_str().unwrap(),
            "--partition-by",
            "device",
            "-o",
            tree.to_str().unwrap(),
        ],
        &["an input of this command"],
    );
    let fifo = d.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    bad_input(
        &[
            "convert",
            &file,
            "--partition-by",
            "device",
            "-o",
            fifo.to_str().unwrap(),
        ],
        &["FIFO"],
    );
    // a failed pass leaves no staging directory behind
    let unsorted = d.path().join("unsorted.csv");
    std::fs::write(
        &unsorted,
        "17,R,0,512,1577836800100000\n17,W,0,512,1577836800000000\n",
    )
    .unwrap();
    let fresh = d.path().join("fresh");
    bad_input(
        &[
            "convert",
            unsorted.to_str().unwrap(),
            "--partition-by",
            "device",
            "-o",
            fresh.to_str().unwrap(),
        ],
        &["arrival order"],
    );
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("partial")), "{names:?}");
    assert!(!fresh.exists());
}

/// The page of `--device all --html`. The "most" and "least"
/// tables against the JSON rows ranked here, the scatter's labelled points
/// (one per device, named), and the text output still printed. The CDF's
/// points are checked by hand in the renderer's unit tests.
#[test]
fn the_fleet_page_ranks_and_plots_every_device() {
    let d = tempfile::tempdir().unwrap();
    let fleet = generated(d.path(), 12);
    let fleet = fleet.to_str().unwrap();
    let html = d.path().join("fleet.html");
    let args = [
        "analyze",
        fleet,
        "--device",
        "all",
        "--service",
        "exp:500us",
    ];
    let rows = json(&args);
    let rows = rows["devices"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 12);
    let o = fallow(&[&args[..], &["--html", html.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        stdout(&o).contains("12 devices"),
        "the table is still printed"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<meta name=\"generator\" content=\"fallow"));
    // ranked here: idle total descending, ties by id
    let mut ranked: Vec<(f64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["idle_total_s"].as_f64().unwrap(),
                r["id"].as_u64().unwrap(),
            )
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let ids = |v: &[(f64, u64)]| v.iter().map(|r| r.1.to_string()).collect::<Vec<_>>();
    let most = ids(&ranked[..5]);
    let mut least = ids(&ranked[7..]);
    least.reverse();
    let listed = |title: &str| -> Vec<String> {
        let sec = page.split(&format!("<h2>{title}</h2>")).nth(1).unwrap();
        let sec = &sec[..sec.find("</table>").unwrap()];
        sec.split("<tr><td>")
            .skip(1)
            .map(|r| r.split("</td>").next().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed("Most idle time"), most);
    assert_eq!(listed("Least idle time"), least);
    // the scatter: one direct label per device, its name
    let scatter = page.split_once("fleet-scatter").unwrap().1;
    let scatter = &scatter[..scatter.find("</svg>").unwrap()];
    let mut labels: Vec<String> = scatter
        .split("<text class=\"annot")
        .skip(1)
        .map(|t| {
            t.split('>')
                .nth(1)
                .unwrap()
                .split('<')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    labels.sort();
    let mut names: Vec<String> = rows.iter().map(|r| r["id"].to_string()).collect();
    names.sort();
    assert_eq!(labels, names);
}
