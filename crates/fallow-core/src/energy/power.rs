//! The power-state model of a disk: power drawn while serving requests
//! (read/write and seek), while spinning idle and in standby, and the
//! energy and time of the two transitions (SARD, Table III and
//! Figure 1). The default is SARD's Western Digital Caviar WD2500JD.
//!
//! A TOML file overrides any field, for every device or per device id:
//!
//! ```toml
//! name = "WD2500JD"        # any field may be left out: the default stays
//! read_write_w = 10.6
//! seek_w = 13.25
//! idle_w = 10.0
//! standby_w = 1.8
//! spinup_j = 148.5
//! spinup_s = 9.0
//! shutdown_j = 6.4
//! shutdown_s = 4.0
//!
//! [device.1]               # only for device 1 of the trace
//! idle_w = 8.0
//! ```

use crate::error::{Error, Location, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Power and transition costs of one disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerModel {
    /// Model name, for reports.
    pub name: String,
    /// Power while transferring data, W.
    pub read_write_w: f64,
    /// Power while the head seeks, W.
    pub seek_w: f64,
    /// Power while spinning with nothing to do, W.
    pub idle_w: f64,
    /// Power while spun down, W.
    pub standby_w: f64,
    /// Energy of one spin-up, J.
    pub spinup_j: f64,
    /// Time from the spin-up command until the disk serves requests, ns.
    pub spinup_ns: u64,
    /// Energy of one shutdown (spin-down), J.
    pub shutdown_j: f64,
    /// Time of one shutdown, ns; a request arriving meanwhile waits for it
    /// to finish and then for a whole spin-up.
    pub shutdown_ns: u64,
}

impl Default for PowerModel {
    /// The WD2500JD of SARD, Table III.
    fn default() -> Self {
        PowerModel {
            name: "WD2500JD".into(),
            read_write_w: 10.6,
            seek_w: 13.25,
            idle_w: 10.0,
            standby_w: 1.8,
            spinup_j: 148.5,
            spinup_ns: 9_000_000_000,
            shutdown_j: 6.4,
            shutdown_ns: 4_000_000_000,
        }
    }
}

impl PowerModel {
    /// Energy of one power cycle (shutdown + spin-up), J.
    pub fn cycle_j(&self) -> f64 {
        self.spinup_j + self.shutdown_j
    }

    /// Break-even idle time, ns: an idle interval that starts with a
    /// spin-down costs less energy than spinning through it only when it
    /// lasts longer than this. Staying on costs `idle_w · L`; spinning down
    /// at once costs the shutdown, standby for `L − shutdown`, and the
    /// spin-up (which happens after the interval, at the next request):
    /// `shutdown_j + standby_w · (L − shutdown_s) + spinup_j`. Equal at
    /// `L = (cycle_j − standby_w · shutdown_s) / (idle_w − standby_w)`,
    /// and never shorter than the shutdown itself. 18.0 s for the WD2500JD.
    pub fn break_even_ns(&self) -> u64 {
        let shutdown_s = self.shutdown_ns as f64 / 1e9;
        let gap_w = self.idle_w - self.standby_w;
        if gap_w <= 0.0 {
            return u64::MAX;
        }
        let l_s = (self.cycle_j() - self.standby_w * shutdown_s) / gap_w;
        ((l_s.max(shutdown_s)) * 1e9).round() as u64
    }

    /// Check that every value is usable (finite, non-negative; standby
    /// below idle power).
    pub fn validate(&self) -> Result<()> {
        let fields = [
            ("read_write_w", self.read_write_w),
            ("seek_w", self.seek_w),
            ("idle_w", self.idle_w),
            ("standby_w", self.standby_w),
            ("spinup_j", self.spinup_j),
            ("shutdown_j", self.shutdown_j),
        ];
        for (name, v) in fields {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::invalid(
                    format!("power model {name}"),
                    format!("must be a non-negative number, got {v}"),
                ));
            }
        }
        if self.standby_w > self.idle_w {
            return Err(Error::invalid(
                "power model standby_w",
                format!(
                    "standby power {} W is above idle power {} W: spinning down could never save energy",
                    self.standby_w, self.idle_w
                ),
            ));
        }
        Ok(())
    }
}

/// One table of the TOML file: every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Overrides {
    name: Option<String>,
    read_write_w: Option<f64>,
    seek_w: Option<f64>,
    idle_w: Option<f64>,
    standby_w: Option<f64>,
    spinup_j: Option<f64>,
    spinup_s: Option<f64>,
    shutdown_j: Option<f64>,
    shutdown_s: Option<f64>,
}

/// The whole file: overrides for all devices and per device.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(flatten)]
    all: Overrides,
    #[serde(default)]
    device: BTreeMap<String, Overrides>,
}

/// Power models read from a TOML file: defaults, overridden for all
/// devices, then per device.
#[derive(Debug, Clone, Default)]
pub struct PowerFile {
    all: Overrides,
    device: BTreeMap<u32, Overrides>,
}

impl PowerFile {
    /// Read and check a TOML power file.
    pub fn read(path: &Path) -> Result<PowerFile> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        PowerFile::parse(&text, path)
    }

    /// Parse TOML text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<PowerFile> {
        let shape: FileShape = toml::from_str(text).map_err(|e| {
            // flattened tables lose the span of an unknown key: find it
            let unknown = e
                .message()
                .split_once("unknown field `")
                .and_then(|(_, rest)| rest.split_once('`'))
                .map(|(key, _)| key.to_string());
            let line = match (unknown, e.span()) {
                (Some(key), _) => line_of_key(text, &key),
                (None, Some(s)) => text[..s.start.min(text.len())].matches('\n').count() as u64 + 1,
                (None, None) => 1,
            };
            Error::Record {
                path: path.to_path_buf(),
                location: Location::Line(line),
                field: "power model",
                message: e.message().to_string(),
            }
        })?;
        let mut device = BTreeMap::new();
        for (k, v) in shape.device {
            let id: u32 = k.trim().parse().map_err(|_| Error::Record {
                path: path.to_path_buf(),
                location: Location::Line(line_of(text, &format!("device.{k}"))),
                field: "device",
                message: format!("`[device.{k}]`: a device id is a whole number"),
            })?;
            device.insert(id, v);
        }
        let file = PowerFile {
            all: shape.all,
            device,
        };
        // every model the file can produce must be valid
        file.model(None).map_err(|e| with_path(e, path))?;
        for &id in file.device.keys() {
            file.model(Some(id)).map_err(|e| with_path(e, path))?;
        }
        Ok(file)
    }

    /// The model of `device` (`None`: the file's all-device model).
    pub fn model(&self, device: Option<u32>) -> Result<PowerModel> {
        let mut m = PowerModel::default();
        apply(&mut m, &self.all)?;
        if let Some(o) = device.and_then(|d| self.device.get(&d)) {
            apply(&mut m, o)?;
        }
        m.validate()?;
        Ok(m)
    }
}

/// Line of the first line that starts with `key` (then blanks and `=`).
fn line_of_key(text: &str, key: &str) -> u64 {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(1, |i| i as u64 + 1)
}

fn line_of(text: &str, needle: &str) -> u64 {
    text.find(needle)
        .map(|i| text[..i].matches('\n').count() as u64 + 1)
        .unwrap_or(1)
}

fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::InvalidParameter { name, message } => Error::InvalidParameter {
            name: format!("{name} in {}", path.display()),
            message,
        },
        other => other,
    }
}

fn seconds_ns(name: &str, s: f64) -> Result<u64> {
    if !s.is_finite() || !(0.0..=1e9).contains(&s) {
        return Err(Error::invalid(
            format!("power model {name}"),
            format!("must be a duration in seconds, got {s}"),
        ));
    }
    Ok((s * 1e9).round() as u64)
}

fn apply(m: &mut PowerModel, o: &Overrides) -> Result<()> {
    if let Some(v) = &o.name {
        m.name = v.clone();
    }
    let set = |slot: &mut f64, v: Option<f64>| {
        if let Some(v) = v {
            *slot = v;
        }
    };
    set(&mut m.read_write_w, o.read_write_w);
    set(&mut m.seek_w, o.seek_w);
    set(&mut m.idle_w, o.idle_w);
    set(&mut m.standby_w, o.standby_w);
    set(&mut m.spinup_j, o.spinup_j);
    set(&mut m.shutdown_j, o.shutdown_j);
    if let Some(s) = o.spinup_s {
        m.spinup_ns = seconds_ns("spinup_s", s)?;
    }
    if let Some(s) = o.shutdown_s {
        m.shutdown_ns = seconds_ns("shutdown_s", s)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_seed_table_iii() {
        let m = PowerModel::default();
        assert_eq!(m.read_write_w, 10.6);
        assert_eq!(m.seek_w, 13.25);
        assert_eq!(m.idle_w, 10.0);
        assert_eq!(m.standby_w, 1.8);
        assert_eq!(m.spinup_j, 148.5);
        assert_eq!(m.spinup_ns, 9_000_000_000);
        assert_eq!(m.shutdown_j, 6.4);
        assert_eq!(m.shutdown_ns, 4_000_000_000);
    }

    #[test]
    fn break_even_by_hand() {
        // (148.5 + 6.4 − 1.8·4) / (10 − 1.8) = 147.7 / 8.2 = 18.0122 s
        let be = PowerModel::default().break_even_ns() as f64 / 1e9;
        assert!((be - 147.7 / 8.2).abs() < 1e-6, "{be}");
    }

    #[test]
    fn file_overrides_all_then_per_device() {
        let text = "idle_w = 8.0\nspinup_s = 5\n[device.1]\nidle_w = 7.5\nname = \"other\"\n";
        let f = PowerFile::parse(text, Path::new("p.toml")).unwrap();
        let all = f.model(Some(0)).unwrap();
        assert_eq!(all.idle_w, 8.0);
        assert_eq!(all.spinup_ns, 5_000_000_000);
        assert_eq!(all.name, "WD2500JD");
        let d1 = f.model(Some(1)).unwrap();
        assert_eq!(d1.idle_w, 7.5);
        assert_eq!(d1.spinup_ns, 5_000_000_000);
        assert_eq!(d1.name, "other");
    }

    #[test]
    fn bad_files_name_the_file_line_and_field() {
        let e = PowerFile::parse("idle_w = 10\nidel_w = 3\n", Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("p.toml") && e.contains("line 2") && e.contains("idel_w"),
            "{e}"
        );
        let e = PowerFile::parse("standby_w = 12\n", Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("standby_w") && e.contains("p.toml"), "{e}");
        let e = PowerFile::parse("[device.x]\nidle_w = 3\n", Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("device.x"), "{e}");
        let e = PowerFile::parse("idle_w = \"ten\"\n", Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
        assert!(PowerFile::parse("spinup_s = -1\n", Path::new("p.toml")).is_err());
    }
}
