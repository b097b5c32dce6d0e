//! Flags that once aborted or panicked: each now exits 2 with an
//! error naming the flag, quickly and without allocating first.

use crate::common;

use common::bad_input;

#[test]
fn request_counts_and_spawn_ratios_are_bounded_naming_the_flag() {
    let base = [
        "--workload",
        "poisson",
        "--utilization",
        "0.3",
        "--policy",
        "waiting",
    ];
    for cmd in ["simulate", "tune"] {
        for n in ["10000000000", "18446744073709551615"] {
            let mut a = vec![cmd];
            a.extend(base);
            a.extend(["--requests", n]);
            if cmd == "tune" {
                a.extend(["--budget", "1ms"]);
            }
            bad_input(&a, &["invalid --requests", n]);
        }
    }
    let mut a = vec!["simulate"];
    a.extend(base);
    a.extend(["--requests", "1000", "--bg-work", "writes:1e9%"]);
    bad_input(&a, &["invalid --bg-work", "lower the ratio"]);
}

#[test]
fn an_arrival_rate_too_low_for_the_time_range_is_named() {
    bad_input(
        &[
            "simulate",
            "--workload",
            "poisson",
            "--arrival-rate",
            "1e-6",
            "--policy",
            "aggressive",
        ],
        &["invalid --arrival-rate", "raise the rate"],
    );
}

#[test]
fn a_misspelt_config_table_is_an_error_naming_file_and_table() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("f.toml");
    std::fs::write(&cfg, "[scrubb]\nsize = \"4MiB\"\n").unwrap();
    let t = d.path().join("t.img");
    std::fs::write(&t, vec![0u8; 4096]).unwrap();
    let (t, cfg) = (t.to_str().unwrap(), cfg.to_str().unwrap());
    bad_input(
        &["scrub", t, "--config", cfg, "--monitor", "none"],
        &[cfg, "unknown table [scrubb]"],
    );
}

#[test]
fn analyze_output_scales_with_the_data_not_the_span() {
    // two MSR records 584 years apart (timestamps in 100 ns
    // ticks: 1.84e17 ticks = 1.84e19 ns) once gave 5.1 million hourly counts
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("span.csv");
    std::fs::write(
        &p,
        "0,hm,0,Read,0,4096,100\n184000000000000000,hm,0,Read,0,4096,100\n",
    )
    .unwrap();
    let o = common::fallow(&["analyze", p.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    // 2 requests: a few hundred curve points and ≤ 10,000 rate bins at most
    // (the size, not a wall time, is the check: 5.1 M counts cannot fit)
    assert!(o.stdout.len() < 1 << 20, "{} bytes of JSON", o.stdout.len());
    let v = common::json_of(&o);
    assert!(v["periodicity"].is_null(), "{}", v["periodicity"]);
    assert_eq!(v["trace"]["requests"], 2);
    // and the summary says why there is no periodicity
    let o = common::fallow(&["analyze", p.to_str().unwrap()]);
    let text = common::stdout_text(&o);
    assert!(text.contains("too sparse to test hourly counts"), "{text}");
}

#[test]
fn a_scrub_request_size_past_the_bound_is_refused_before_allocating() {
    // a sparse 2 TiB target: `--size 1TiB` aborted allocating its buffer
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("sparse.img");
    std::fs::File::create(&t).unwrap().set_len(2 << 40).unwrap();
    let ck = d.path().join("ck.json");
    bad_input(
        &[
            "scrub",
            t.to_str().unwrap(),
            "--size",
            "1TiB",
            "--checkpoint",
            ck.to_str().unwrap(),
            "--monitor",
            "none",
            "--max-bytes",
            "1",
        ],
        &["invalid --size", "at most 1073741824"],
    );
}

#[test]
fn emulator_thread_counts_are_bounded() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("disk.img");
    std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let o = common::fallow(&[
        "emulate-disk",
        img.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--foreground",
        "--threads",
        "100000000",
    ]);
    let e = common::stderr(&o);
    if e.contains("FUSE") {
        println!("skip: FUSE is not available here ({})", e.trim());
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("threads") && e.contains("must be 1 to 1024"),
        "{e}"
    );
}

/// Edge values: each is an error naming the flag, never a wrap, an
/// abort or a panic.
#[test]
fn fractions_durations_service_times_and_size_counts_are_bounded() {
    let w = [
        "--workload",
        "poisson",
        "--utilization",
        "0.3",
        "--requests",
        "200",
    ];
    let with = |head: &[&'static str], tail: &[&'static str]| {
        let mut a: Vec<&str> = head.to_vec();
        a.extend(w);
        a.extend(tail);
        a
    };
    // fractions in [0, 1] (1e300 wrapped to a lower delay than 0)
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.txt");
    std::fs::write(&trace, "0 0 0 4096 r 5\n100 0 4096 4096 r 105\n").unwrap();
    let trace = trace.to_str().unwrap();
    for v in [
        "--net-contention=1e300",
        "--net-contention=1.5",
        "--net-contention=-0.1",
        "--net-contention=nan",
    ] {
        bad_input(
            &["energy", trace, v],
            &["--net-contention", "fraction from 0 to 1"],
        );
    }
    // every other fraction-valued flag likewise, at the parser, naming the
    // flag (--peer-prob 2 and --local-fraction 1.5 were refused by the
    // core's "probability" check, naming no flag; --duty 1e300 and
    // --write-fraction -1 likewise; --min-resident reached the node)
    // (command, flag, a good value before the bad one for a list flag)
    let fractions: [(&[&str], &str, &str); 9] = [
        (&["energy", trace, "--peers", "3"], "--peer-prob", ""),
        (&["energy", trace], "--local-fraction", ""),
        (&["energy", trace], "--local-fraction", "0.5,"),
        (&["scrub-plan"], "--duty", ""),
        (&["peer", "serve"], "--min-resident", ""),
        (&["simulate", "--workload", "poisson"], "--utilization", ""),
        (
            &["simulate", "--workload", "poisson"],
            "--write-fraction",
            "",
        ),
        (&["recommend", "--workload", "poisson"], "--utilization", ""),
        (&["tune", "--workload", "poisson"], "--write-fraction", ""),
    ];
    for (head, flag, before) in fractions {
        for v in ["1e300", "1.5", "-0.1", "nan", "20%"] {
            let mut a = head.to_vec();
            a.push(Box::leak(format!("{flag}={before}{v}").into_boxed_str()));
            bad_input(&a, &[flag, "fraction from 0 to 1"]);
        }
    }
    bad_input(
        &["energy", trace, "--peers", "3", "--peer-prob-for=/usr=1.5"],
        &["--peer-prob-for", "fraction from 0 to 1"],
    );
    // a service time past its maximum (was saturating at 2^64 ns)
    bad_input(
        &["analyze", trace, "--service", "const:1e19ns"],
        &["--service", "maximum"],
    );
    // a count of sizes past its maximum (aborted, or panicked)
    for n in ["1000000000", "18446744073709551615"] {
        let sizes = format!("4KiB..1MiB/{n}");
        let sizes: &'static str = Box::leak(sizes.into_boxed_str());
        bad_input(
            &with(
                &["tune", "--policy", "waiting", "--budget", "1ms"],
                &["--sizes", sizes],
            ),
            &["--sizes", "1000 allowed"],
        );
    }
    // a bare duration is refused, as a bare budget is
    bad_input(
        &with(&["simulate", "--policy", "fixed-wait:t=100"], &[]),
        &["t", "no unit"],
    );
    bad_input(
        &with(&["tune", "--policy", "waiting", "--budget", "5"], &[]),
        &["--budget"],
    );
}
