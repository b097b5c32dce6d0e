//! The emulated disk's actuator: `fallow emulate-disk` serves
//! `MOUNTPOINT/power`, whose text (`state standby`, `spinups 3`, …) is
//! bookkeeping that never reaches the disk's queue, and which takes
//! `standby` to spin the disk down. The tests and the agreement with
//! `fallow energy` (docs/energy.md) run the daemon against it.

use super::activity::{ActivitySource, Issuer, Observation, StatPoll};
use super::actuator::{Actuator, DiskPower};
use crate::error::{Error, Result};
use crate::monitor::stat::StatSource;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The control file of an emulated disk.
#[derive(Debug, Clone)]
pub struct EmuActuator {
    path: PathBuf,
}

/// The emulator's counters, as `key value` lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmuCounters {
    /// Every field by name; numbers as text.
    pub fields: BTreeMap<String, String>,
}

impl EmuCounters {
    /// Parse the text of `MOUNTPOINT/power`.
    pub fn parse(text: &str, path: &Path) -> Result<EmuCounters> {
        let mut fields = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let (k, v) = line.split_once(' ').ok_or_else(|| Error::Parse {
                path: path.to_path_buf(),
                message: format!("line {}: expected `key value`, got `{line}`", i + 1),
            })?;
            fields.insert(k.to_string(), v.trim().to_string());
        }
        if !fields.contains_key("state") {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                message: "no `state` line: not an emulated disk's power file".into(),
            });
        }
        Ok(EmuCounters { fields })
    }

    /// A numeric field (0 when absent or not a number).
    pub fn num(&self, key: &str) -> f64 {
        self.fields
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    /// The `state` field.
    pub fn state(&self) -> &str {
        self.fields.get("state").map_or("", String::as_str)
    }
}

impl EmuActuator {
    /// The actuator of the emulated disk whose control file is `path`
    /// (`MOUNTPOINT/power`); reads it once to check.
    pub fn open(path: impl Into<PathBuf>) -> Result<EmuActuator> {
        let a = EmuActuator { path: path.into() };
        a.counters()?;
        Ok(a)
    }

    /// The control file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The emulator's power counters now (never wakes the disk).
    pub fn counters(&self) -> Result<EmuCounters> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| Error::io(&self.path, "cannot read the power file", e))?;
        EmuCounters::parse(&text, &self.path)
    }
}

impl Actuator for EmuActuator {
    fn describe(&self) -> String {
        format!("emulated:{}", self.path.display())
    }

    fn check(&mut self) -> Result<DiskPower> {
        let c = self.counters()?;
        Ok(match c.state() {
            "standby" | "spinning-down" => DiskPower::Standby,
            "spinning-up" => DiskPower::SpinningUp,
            _ => DiskPower::Spinning,
        })
    }

    fn standby(&mut self) -> Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(|e| Error::io(&self.path, "cannot open the power file", e))?;
        f.write_all(b"standby\n")
            .map_err(|e| Error::io(&self.path, "standby command failed", e))
    }
}

/// An emulated disk's I/O: its `stat` counters polled, and the
/// requesters of the requests since the previous look from its
/// `issuers` file (FUSE gives the emulator each request's pid; the block
/// tracepoints of a FUSE mount show only the FUSE server). Before, the
/// daemon named every waker of an emulated disk "unknown".
#[derive(Debug)]
pub struct EmuSource {
    stat: StatPoll,
    issuers_path: PathBuf,
    /// The `requests` count at the previous read of the issuers file.
    seen_requests: u64,
}

/// The issuers file's runs that end after request `after`, and its
/// `requests` count; `path` names it in errors.
pub fn parse_issuers(text: &str, after: u64, path: &Path) -> Result<(Vec<Issuer>, u64)> {
    let bad = |i: usize, what: &str| Error::Parse {
        path: path.to_path_buf(),
        message: format!("line {}: {what}", i + 1),
    };
    let mut lines = text.lines().enumerate();
    let requests = match lines.next() {
        Some((_, l)) => l
            .strip_prefix("requests ")
            .and_then(|n| n.trim().parse::<u64>().ok())
            .ok_or_else(|| bad(0, "expected `requests N`"))?,
        None => return Err(bad(0, "empty: not an emulated disk's issuers file")),
    };
    let mut out: Vec<Issuer> = Vec::new();
    for (i, line) in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let [_, last, pid, comm, cgroup] = f[..] else {
            return Err(bad(i, "expected `FIRST LAST PID COMM CGROUP`"));
        };
        let last: u64 = last.parse().map_err(|_| bad(i, "LAST is not a number"))?;
        let pid: u32 = pid.parse().map_err(|_| bad(i, "PID is not a number"))?;
        if last <= after {
            continue;
        }
        let who = Issuer {
            pid,
            comm: comm.to_string(),
            cgroup: (cgroup != "-").then(|| cgroup.to_string()),
        };
        if !out.contains(&who) {
            out.push(who);
        }
    }
    Ok((out, requests))
}

impl EmuSource {
    /// Poll the emulated disk in `dir` (its mount point). `None` when the
    /// emulator serves no `issuers` file (an older one).
    pub fn open(dir: &Path) -> Result<Option<EmuSource>> {
        let issuers_path = dir.join("issuers");
        if !issuers_path.is_file() {
            return Ok(None);
        }
        let stat = StatPoll::new(&StatSource::file(dir.join("stat"))?)?;
        let mut s = EmuSource {
            stat,
            issuers_path,
            seen_requests: 0,
        };
        // requests before the start woke nothing the daemon saw
        s.seen_requests = s.read_issuers()?.1;
        Ok(Some(s))
    }

    fn read_issuers(&self) -> Result<(Vec<Issuer>, u64)> {
        let text = std::fs::read_to_string(&self.issuers_path)
            .map_err(|e| Error::io(&self.issuers_path, "cannot read the issuers file", e))?;
        parse_issuers(&text, self.seen_requests, &self.issuers_path)
    }
}

impl ActivitySource for EmuSource {
    fn describe(&self) -> String {
        format!("{} + {}", self.stat.describe(), self.issuers_path.display())
    }

    fn next(&mut self, wait_ns: u64) -> Result<Observation> {
        // counters first: every request they count, done or in flight
        // (a request waiting for a spin-up is in flight only), is in the
        // issuers file read after them: the emulator records it first
        let mut obs = self.stat.next(wait_ns)?;
        if obs.io || obs.in_flight > 0 {
            let (issuers, requests) = self.read_issuers()?;
            obs.issuers = issuers;
            self.seen_requests = requests;
        }
        Ok(obs)
    }

    fn in_flight(&mut self) -> Result<u64> {
        self.stat.in_flight()
    }

    fn attribution_gap(&self) -> Option<&'static str> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_after_a_request_are_the_runs_ending_later() {
        let text = "requests 9\n1 4 100 dd /a\n5 5 0 kernel -\n6 8 200 cat -\n9 9 100 dd /a\n";
        let p = Path::new("issuers");
        let (who, n) = parse_issuers(text, 4, p).unwrap();
        assert_eq!(n, 9);
        let named: Vec<(u32, &str)> = who.iter().map(|i| (i.pid, i.comm.as_str())).collect();
        // dd's second run is the same issuer as its first: listed once
        assert_eq!(named, [(0, "kernel"), (200, "cat"), (100, "dd")]);
        assert_eq!(who[0].cgroup, None);
        assert_eq!(who[2].cgroup.as_deref(), Some("/a"));
        assert!(parse_issuers(text, 9, p).unwrap().0.is_empty());
        let e = parse_issuers("requests 1\n1 x 3 dd -\n", 0, Path::new("/m/issuers"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/m/issuers") && e.contains("line 2"), "{e}");
        assert!(parse_issuers("", 0, p).is_err());
    }

    #[test]
    fn counters_parse_and_bad_files_are_named() {
        let c =
            EmuCounters::parse("state idle\nspinups 3\ntotal_j 12.5\n", Path::new("p")).unwrap();
        assert_eq!(c.state(), "idle");
        assert_eq!(c.num("spinups"), 3.0);
        assert_eq!(c.num("total_j"), 12.5);
        let e = EmuCounters::parse("spinups 3\n", Path::new("/x/power"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/x/power") && e.contains("state"), "{e}");
        let e = EmuCounters::parse("state idle\nnonsense\n", Path::new("p"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
    }
}
