//! The emulated disk's actuator: `fallow emulate-disk` serves
//! `MOUNTPOINT/power`, whose text (`state standby`, `spinups 3`, …) is
//! bookkeeping that never reaches the disk's queue, and which takes
//! `standby` to spin the disk down. The tests and the agreement with
//! `fallow energy` (docs/energy.md) run the daemon against it.

use super::actuator::{Actuator, DiskPower};
use crate::error::{Error, Result};
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

#[cfg(test)]
mod tests {
    use super::*;

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
