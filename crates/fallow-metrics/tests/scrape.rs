//! Scrape the endpoint over HTTP the way Prometheus does and check the text.

use fallow_metrics::{Metrics, PolicyState};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Prometheus 2.x's scrape `Accept` header (scrape/scrape.go, `scrapeAcceptHeader`).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";

fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    get_accepting(addr, path, Some(PROMETHEUS_ACCEPT))
}

fn get_accepting(addr: SocketAddr, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_string(), body.to_string())
}

/// Whether a scrape gets a 200 (a refused or dropped connection does not).
fn answers(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    resp.starts_with("HTTP/1.1 200")
}

#[test]
fn scrape_returns_the_counters_in_text_format() {
    let m = Metrics::new();
    let server = m.serve("127.0.0.1:0").unwrap();
    let addr = server.addr();
    for _ in 0..3 {
        m.bg_request(1 << 20);
    }
    m.fg_request(4096);
    m.fg_request(8192);
    m.collision();
    m.add_state_time(PolicyState::Busy, Duration::from_millis(250));
    m.add_state_time(PolicyState::Busy, Duration::from_millis(1250));
    m.add_state_time(PolicyState::BgRunning, Duration::from_secs(2));
    m.set_state(PolicyState::BgRunning);
    // a frozen `fallow run` command still read 3 MiB over 0.75 s
    m.frozen_io(1 << 20, 0.25);
    m.frozen_io(2 << 20, 0.5);

    let (status, head, body) = get(addr, "/metrics");
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    let lines: Vec<&str> = body.lines().collect();
    for want in [
        "# TYPE fallow_bg_requests counter",
        "fallow_bg_requests_total 3",
        "fallow_bg_bytes_total 3145728",
        "fallow_fg_requests_total 2",
        "fallow_fg_bytes_total 12288",
        "fallow_collisions_total 1",
        "fallow_frozen_io_bytes_total 3145728",
        "fallow_frozen_io_seconds_total 0.75",
        "# TYPE fallow_policy_state_seconds counter",
        r#"fallow_policy_state_seconds_total{state="busy"} 1.5"#,
        r#"fallow_policy_state_seconds_total{state="bg-running"} 2.0"#,
        r#"fallow_policy_state_seconds_total{state="idle-waiting"} 0.0"#,
        r#"fallow_policy_state{state="bg-running"} 1"#,
        r#"fallow_policy_state{state="busy"} 0"#,
        "# EOF",
    ] {
        assert!(lines.contains(&want), "missing `{want}` in:\n{body}");
    }
    // every sample line is `name{labels} value` with a numeric value
    for l in lines.iter().filter(|l| !l.starts_with('#')) {
        let v = l.rsplit(' ').next().unwrap();
        assert!(v.parse::<f64>().is_ok(), "{l}");
        assert!(l.starts_with("fallow_"), "{l}");
    }

    let (status, _, _) = get(addr, "/nope");
    assert_eq!(status, 404);
    server.stop();
    assert!(!answers(addr), "still answering after stop");
}

/// What a scraper without an `Accept` header (curl, promtool) gets: the
/// classic text format 0.0.4, whose counter TYPE lines name the `_total`
/// samples and which has no `# EOF`; `promtool check metrics` (from
/// Debian's `prometheus` package) accepts it when installed.
#[test]
fn a_plain_scrape_gets_text_format_0_0_4_that_promtool_accepts() {
    let m = Metrics::new();
    let server = m.serve("127.0.0.1:0").unwrap();
    m.bg_request(4096);
    m.add_state_time(PolicyState::Busy, Duration::from_millis(500));
    m.set_state(PolicyState::Busy);
    for accept in [None, Some("*/*"), Some("text/plain")] {
        let (status, head, body) = get_accepting(server.addr(), "/metrics", accept);
        assert_eq!(status, 200, "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/plain; version=0.0.4"),
            "{accept:?}: {head}"
        );
        let lines: Vec<&str> = body.lines().collect();
        for want in [
            "# TYPE fallow_bg_bytes_total counter",
            "fallow_bg_bytes_total 4096",
            "# TYPE fallow_policy_state_seconds_total counter",
            r#"fallow_policy_state_seconds_total{state="busy"} 0.5"#,
            "# TYPE fallow_policy_state gauge",
            r#"fallow_policy_state{state="busy"} 1"#,
        ] {
            assert!(lines.contains(&want), "missing `{want}` in:\n{body}");
        }
        assert!(
            !body.contains("# EOF") && !body.contains("# UNIT"),
            "{body}"
        );
        // every TYPE line names samples that follow it
        for l in lines.iter().filter_map(|l| l.strip_prefix("# TYPE ")) {
            let name = l.split(' ').next().unwrap();
            assert!(
                lines.iter().any(|s| !s.starts_with('#')
                    && (s.starts_with(&format!("{name} ")) || s.starts_with(&format!("{name}{{")))),
                "TYPE {name} without samples in:\n{body}"
            );
        }
    }
    let (_, _, body) = get_accepting(server.addr(), "/metrics", None);
    promtool_check(&body);
}

/// `promtool check metrics` on `body`, or a visible skip without promtool.
fn promtool_check(body: &str) {
    use std::process::{Command, Stdio};
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        eprintln!("skip: promtool not installed (apt-get install prometheus); text format checked without it");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\non:\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("promtool check metrics: ok");
}

#[test]
fn a_taken_port_is_a_clear_error() {
    let m = Metrics::new();
    let first = m.serve("127.0.0.1:0").unwrap();
    let addr = first.addr().to_string();
    let err = m.serve(&addr).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("metrics endpoint {addr}: cannot listen")),
        "{err}"
    );
}

/// A scrub's progress gauges: only in a scrub's registry, set as given,
/// unknowns as NaN, error kinds only once the tool reports them.
#[test]
fn scrub_progress_gauges_are_served_with_unknowns_as_nan() {
    let plain = Metrics::new().encode();
    assert!(!plain.contains("fallow_scrub_"), "{plain}");
    let m = Metrics::for_scrub();
    let text = m.encode();
    assert!(text.contains("fallow_scrub_eta_seconds NaN"), "{text}");
    assert!(text.contains("fallow_scrub_done_bytes 0"), "{text}");
    assert!(!text.contains("fallow_scrub_errors{"), "{text}");
    m.scrub_progress(&fallow_metrics::ScrubProgress {
        done_bytes: 3 << 20,
        target_bytes: Some(8 << 20),
        pass: Some(2),
        rate_bytes_per_s: Some(1048576.0),
        eta_s: Some(5.0),
        bad_ranges: 1,
        bad_bytes: 4096,
        errors_corrected: Some(0),
        errors_uncorrectable: Some(7),
        complete: false,
    });
    let server = m.serve("127.0.0.1:0").unwrap();
    let (status, _, body) = get(server.addr(), "/metrics");
    assert_eq!(status, 200);
    for want in [
        "fallow_scrub_done_bytes 3145728",
        "fallow_scrub_target_bytes 8388608",
        "fallow_scrub_pass 2",
        "fallow_scrub_rate_bytes_per_second 1048576.0",
        "fallow_scrub_eta_seconds 5.0",
        "fallow_scrub_bad_ranges 1",
        "fallow_scrub_bad_bytes 4096",
        r#"fallow_scrub_errors{kind="corrected"} 0"#,
        r#"fallow_scrub_errors{kind="uncorrectable"} 7"#,
        "fallow_scrub_complete 0",
    ] {
        assert!(body.contains(want), "`{want}` not in:\n{body}");
    }
    server.stop();
}

/// A budgeted run's gauges: only in its registry, NaN until measured.
#[test]
fn budget_gauges_are_served_with_unknowns_as_nan() {
    assert!(!Metrics::for_scrub().encode().contains("fallow_budget_"));
    let m = Metrics::with_budget(true);
    let text = m.encode();
    assert!(
        text.contains("fallow_budget_measured_slowdown NaN"),
        "{text}"
    );
    assert!(text.contains("fallow_scrub_done_bytes 0"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    m.budget(&fallow_metrics::BudgetFigures {
        slowdown_limit: Some(0.05),
        added_delay_limit_s: None,
        slowdown: Some(0.03),
        slowdown_ci95: Some(0.01),
        p99_slowdown: Some(0.25),
        added_delay_s: Some(0.0005),
        knob_value: 2e8,
        refits: 4,
        backoffs: 1,
        unmet: false,
    });
    let text = m.encode();
    for want in [
        "fallow_budget_slowdown_limit 0.05",
        "fallow_budget_added_delay_limit_seconds NaN",
        "fallow_budget_measured_slowdown 0.03",
        "fallow_budget_measured_slowdown_ci95 0.01",
        "fallow_budget_measured_p99_slowdown 0.25",
        "fallow_budget_measured_added_delay_seconds 0.0005",
        "fallow_budget_knob_value 200000000.0",
        "fallow_budget_refits 4",
        "fallow_budget_backoffs 1",
        "fallow_budget_unmet 0",
    ] {
        assert!(text.contains(want), "`{want}` not in:\n{text}");
    }
}
