//! Settings shared by the live commands (`fallow scrub`, `fallow run`): the
//! TOML config's `[live]` table, and what a `fallow tune --json` result says
//! to run.
//!
//! A config file holds a `[live]` table (policy, tune result, monitor,
//! interval, seed) and one table per command (`[scrub]`, `[run]`, …); each
//! command reads its own strictly and ignores the others'. A key outside
//! any table is an error, as is an unknown key in `[live]`.

use crate::BadInput;
use anyhow::Result;
use fallow_core::sim::BgService;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `[live]`: settings shared by the live commands.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveSection {
    /// Policy spec (`fixed-wait:t=50ms`).
    pub policy: Option<String>,
    /// A `fallow tune --json` result (relative to the config file).
    pub tuned: Option<PathBuf>,
    /// Counters to watch: `auto`, `none`, a device name or a stat file.
    pub monitor: Option<String>,
    /// Monitor sampling interval (`1ms`).
    pub interval: Option<String>,
    /// Seed of the policy's random stream.
    pub seed: Option<u64>,
}

/// Read `path`: its `[live]` table, checked, and the `command`'s table
/// (empty if absent) for the caller to check. `[live]`'s `tuned` is made
/// relative to the file.
pub fn read_config(path: &Path, command: &str) -> Result<(LiveSection, toml::Table)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BadInput(format!("{}: cannot read the config: {e}", path.display())))?;
    let bad = |m: String| BadInput(format!("{}: {m}", path.display()));
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| bad(e.to_string()))?;
    let mut live = LiveSection::default();
    let mut own = toml::Table::new();
    for (k, v) in table {
        match (k.as_str(), v) {
            ("live", toml::Value::Table(t)) => {
                live = t
                    .try_into()
                    .map_err(|e: toml::de::Error| bad(format!("[live]: {e}")))?
            }
            (k, toml::Value::Table(t)) if k == command => own = t,
            (_, toml::Value::Table(_)) => {} // another command's table
            (k, _) => {
                return Err(bad(format!(
                    "top-level key `{k}`: settings go in a [live] or [{command}] table"
                ))
                .into())
            }
        }
    }
    live.tuned = live.tuned.map(|p| relative_to(path, p));
    Ok((live, own))
}

/// A path from the config file `config`, relative to its directory.
pub fn relative_to(config: &Path, p: PathBuf) -> PathBuf {
    if p.is_relative() {
        config.parent().unwrap_or(Path::new(".")).join(p)
    } else {
        p
    }
}

/// What a `fallow tune --json` result says to run.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedChoice {
    /// The policy spec to run (`best.spec`).
    pub spec: String,
    /// Request size, bytes (`best.request_size_bytes`).
    pub request_size_bytes: u64,
    /// The BG service model tune simulated (`--bg` of `best.reproduce_args`).
    pub bg_service: Option<BgService>,
}

/// Read a `fallow tune --json` result (one budget).
pub fn read_tuned(path: &Path) -> Result<TunedChoice> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        BadInput(format!(
            "{}: cannot read the tune result: {e}",
            path.display()
        ))
    })?;
    let bad = |m: String| BadInput(format!("{}: {m}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad(format!(
            "not JSON ({e}); give the output of `fallow tune --json`"
        ))
    })?;
    if let Some(list) = v.as_array() {
        let budgets: Vec<String> = list
            .iter()
            .filter_map(|d| d["budget_text"].as_str().map(str::to_string))
            .collect();
        return Err(bad(format!(
            "holds results for {} budgets ({}): tune with the one budget to run",
            list.len(),
            budgets.join(", ")
        ))
        .into());
    }
    let best = match v.get("best") {
        Some(serde_json::Value::Null) => {
            return Err(bad(format!(
                "no setting met the budget {}: nothing to run",
                v["budget_text"].as_str().unwrap_or("?")
            ))
            .into())
        }
        Some(b) => b,
        None => {
            return Err(bad("no `best` key: give the output of `fallow tune --json`".into()).into())
        }
    };
    let spec = best["spec"]
        .as_str()
        .ok_or_else(|| bad("`best.spec` is missing or not a string".into()))?
        .to_string();
    let request_size_bytes = best["request_size_bytes"]
        .as_u64()
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            bad("`best.request_size_bytes` is missing or not a positive integer".into())
        })?;
    // the BG model tune used, from the reproducing command (`--bg MODEL`)
    let bg_service = best["reproduce_args"].as_array().and_then(|a| {
        a.iter()
            .position(|x| x == "--bg")
            .and_then(|i| a.get(i + 1))
            .and_then(|m| m.as_str())
            .and_then(|m| m.parse().ok())
    });
    Ok(TunedChoice {
        spec,
        request_size_bytes,
        bg_service,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn live_is_strict_the_commands_table_is_returned_and_others_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "f.toml",
            "[live]\npolicy = \"aggressive\"\ntuned = \"t.json\"\n[scrub]\nsize = \"4MiB\"\n[run]\nanything = 1\n",
        );
        let (live, own) = read_config(&p, "scrub").unwrap();
        assert_eq!(live.policy.as_deref(), Some("aggressive"));
        assert_eq!(live.tuned, Some(d.path().join("t.json")));
        assert_eq!(own["size"].as_str(), Some("4MiB"));
        let (_, own) = read_config(&p, "record").unwrap();
        assert!(own.is_empty());
        let p = write(d.path(), "g.toml", "[live]\npolicyy = \"x\"\n");
        let e = read_config(&p, "scrub").unwrap_err().to_string();
        assert!(e.contains("g.toml") && e.contains("policyy"), "{e}");
        let p = write(d.path(), "h.toml", "policy = \"x\"\n");
        let e = read_config(&p, "scrub").unwrap_err().to_string();
        assert!(e.contains("top-level key `policy`"), "{e}");
        let p = write(d.path(), "i.toml", "[scrub\n");
        assert!(read_config(&p, "scrub")
            .unwrap_err()
            .to_string()
            .contains("i.toml"));
    }

    #[test]
    fn tuned_results_give_spec_size_and_bg_model() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "t.json",
            r#"{"budget_text": "1ms", "best": {"policy": "fixed-wait", "spec": "fixed-wait:t=205ms",
                "params": {"t": "205ms"}, "request_size_bytes": 262144, "bg_size_bytes": 262144,
                "reproduce_args": ["simulate", "x", "--bg", "const:5ms", "--policy", "fixed-wait:t=205ms"]}}"#,
        );
        assert_eq!(
            read_tuned(&p).unwrap(),
            TunedChoice {
                spec: "fixed-wait:t=205ms".into(),
                request_size_bytes: 262144,
                bg_service: Some(BgService::Constant { ns: 5_000_000 })
            }
        );
        let p = write(
            d.path(),
            "n.json",
            r#"{"budget_text": "1ms", "best": null}"#,
        );
        let e = read_tuned(&p).unwrap_err().to_string();
        assert!(e.contains("no setting met the budget 1ms"), "{e}");
        let p = write(
            d.path(),
            "l.json",
            r#"[{"budget_text": "1ms"}, {"budget_text": "2ms"}]"#,
        );
        let e = read_tuned(&p).unwrap_err().to_string();
        assert!(e.contains("2 budgets (1ms, 2ms)"), "{e}");
        let p = write(d.path(), "x.json", r#"{"best": {"spec": 3}}"#);
        assert!(read_tuned(&p)
            .unwrap_err()
            .to_string()
            .contains("best.spec"));
    }
}
