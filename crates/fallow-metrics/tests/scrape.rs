//! Scrape the endpoint over HTTP the way Prometheus does and check the text.

use fallow_metrics::{Metrics, PolicyState};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
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
