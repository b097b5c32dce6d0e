//! The example systemd units, `docs/examples/fallow-scrub.{service,timer}`:
//! `systemd-analyze verify` accepts them, `systemd-analyze security`
//! scores the service's exposure below 2.5 ("OK"), and the service's
//! command line is one `fallow scrub` accepts. Skips with a `skip:` line
//! where systemd-analyze is not installed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples")
}

/// The units in a fresh directory, with ExecStart's `/usr/local/bin/fallow`
/// replaced by the binary under test (verify checks that it exists).
fn units_with_this_binary(dir: &Path) -> PathBuf {
    for name in ["fallow-scrub.service", "fallow-scrub.timer"] {
        let text = std::fs::read_to_string(examples().join(name)).unwrap();
        assert!(
            name.ends_with(".timer") || text.contains("ExecStart=/usr/local/bin/fallow scrub "),
            "{name}: ExecStart changed; update this test"
        );
        let text = text.replace("/usr/local/bin/fallow", common::BIN);
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir.join("fallow-scrub.service")
}

fn systemd_analyze() -> Option<()> {
    match Command::new("systemd-analyze").arg("--version").output() {
        Ok(o) if o.status.success() => Some(()),
        _ => {
            eprintln!("skip: systemd-analyze is not installed (apt-get install systemd)");
            None
        }
    }
}

#[test]
fn the_units_verify() {
    if systemd_analyze().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let service = units_with_this_binary(dir.path());
    // --man=no: Documentation= names man:fallow(1), installed by the
    // package (`fallow man`), not on this machine
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&service)
        .arg(dir.path().join("fallow-scrub.timer"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {err}");
    // verify exits 0 on some warnings: none may name our units
    for line in err.lines() {
        assert!(
            !line.contains("fallow-scrub"),
            "systemd-analyze verify: {err}"
        );
    }
}

#[test]
fn the_service_is_hardened() {
    if systemd_analyze().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let service = units_with_this_binary(dir.path());
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&service)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    // "→ Overall exposure level for fallow-scrub.service: 1.9 OK 🙂"
    let score: f64 = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for fallow-scrub.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{text}\n{err}"));
    eprintln!("systemd-analyze security: fallow-scrub.service exposure {score}");
    assert!(score < 2.5, "exposure {score}:\n{text}");
    // the settings the issue asks for are there, not only a good score
    let unit = std::fs::read_to_string(&service).unwrap();
    for want in [
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "DevicePolicy=closed",
        "DeviceAllow=/dev/sdb r",
    ] {
        assert!(unit.lines().any(|l| l == want), "missing {want}");
    }
}

/// The service's `fallow scrub …` parses: `--help` after the same flags
/// would not check them, so the flags are given to a scrub of a missing
/// device, which must fail on the device (exit 2 naming it), not on a flag.
#[test]
fn the_service_command_line_parses() {
    let unit = std::fs::read_to_string(examples().join("fallow-scrub.service")).unwrap();
    let exec = unit
        .replace("\\\n", " ")
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart=").map(str::to_string))
        .unwrap();
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(&words[..3], ["/usr/local/bin/fallow", "scrub", "/dev/sdb"]);
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-disk");
    let cfg = dir.path().join("fallow.toml");
    std::fs::copy(examples().join("fallow.toml"), &cfg).unwrap();
    let ck = dir.path().join("ck.json");
    let args: Vec<String> = words[1..]
        .iter()
        .map(|w| match *w {
            "/dev/sdb" => missing.display().to_string(),
            "/etc/fallow/fallow.toml" => cfg.display().to_string(),
            "/var/lib/fallow/sdb.json" => ck.display().to_string(),
            "127.0.0.1:9464" => "127.0.0.1:0".to_string(),
            w => w.to_string(),
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::fallow(&args);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no-such-disk"), "{err}");
    assert!(!err.contains("unexpected argument"), "{err}");
}

/// `fallow spindown units` writes a service for the binary that runs it:
/// ExecStart is this binary, the directories it writes are created by
/// systemd (StateDirectory=, RuntimeDirectory=, LogsDirectory=: issue 22,
/// the old unit listed /var/lib/fallow as writable without creating it and
/// failed with status 226 on a fresh machine), `systemd-analyze verify`
/// accepts it and `systemd-analyze security` scores it at most 2.0. Its
/// command line is one `fallow spindown` accepts. (No systemd runs here:
/// the unit is not started.)
#[test]
fn the_spindown_service_written_for_this_binary_verifies_and_is_hardened() {
    let dir = tempfile::tempdir().unwrap();
    let service = dir.path().join("fallow-spindown.service");
    let o = common::fallow(&[
        "spindown",
        "units",
        "-o",
        service.to_str().unwrap(),
        "--device",
        "/dev/sdb",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let unit = std::fs::read_to_string(&service).unwrap();
    let bin = std::fs::canonicalize(common::BIN).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .to_string();
    assert!(
        exec.starts_with(&format!(
            "{} spindown --config /etc/fallow/spindown.toml ",
            bin.display()
        )),
        "{exec}"
    );
    for want in [
        "StateDirectory=fallow",
        "RuntimeDirectory=fallow",
        "LogsDirectory=fallow",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "DeviceAllow=/dev/sdb rw",
        "NoNewPrivileges=yes",
    ] {
        assert!(unit.lines().any(|l| l == want), "missing {want}:\n{unit}");
    }
    // every path the command writes is under a directory systemd creates
    for w in exec
        .split_whitespace()
        .filter(|w| w.starts_with("/run/") || w.starts_with("/var/"))
    {
        assert!(
            w.starts_with("/run/fallow/") || w.starts_with("/var/log/fallow/"),
            "{w} is not under RuntimeDirectory= or LogsDirectory="
        );
    }
    // written again: it is fallow's own unit, replaced without --overwrite
    let o = common::fallow(&["spindown", "units", "-o", service.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(std::fs::read_to_string(&service)
        .unwrap()
        .contains("DeviceAllow=block-sd rw"));
    std::fs::write(&service, &unit).unwrap();
    // the command line parses: a missing disk is the error, not a flag
    let cfg = dir.path().join("spindown.toml");
    std::fs::write(&cfg, "policy = \"timeout:t=20min\"\n").unwrap();
    let missing = dir.path().join("no-such-disk");
    let args: Vec<String> = exec
        .split_whitespace()
        .skip(1)
        .map(|w| match w {
            "/etc/fallow/spindown.toml" => cfg.display().to_string(),
            "/run/fallow/spindown.json" => dir.path().join("s.json").display().to_string(),
            "/var/log/fallow/spindown.jsonl" => dir.path().join("l.jsonl").display().to_string(),
            w => w.to_string(),
        })
        .chain([missing.display().to_string()])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::fallow(&args);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no-such-disk"), "{err}");
    if systemd_analyze().is_none() {
        return;
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&service)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {err}");
    for line in err.lines() {
        assert!(
            !line.contains("fallow-spindown"),
            "systemd-analyze verify: {err}"
        );
    }
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&service)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let score: f64 = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for fallow-spindown.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{text}"));
    eprintln!("systemd-analyze security: fallow-spindown.service exposure {score}");
    assert!(score <= 2.0, "exposure {score}:\n{text}");
}
