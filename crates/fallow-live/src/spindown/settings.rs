//! `fallow spindown`'s settings, resolved once for every front end: the
//! flags a front end parsed ([`SpindownFlags`]), then the config file (a
//! disk's own `[[spindown.disk]]` table, then `[spindown]`), then the
//! defaults. [`SpindownFlags::resolve`] gives the daemon's
//! [`SpindownConfig`] and what the front end does around it (the log, the
//! metrics address, the files its outputs must never overwrite).
//!
//! The config file is the live commands' one format
//! ([`crate::settings::config`]): `fallow scrub`, `fallow run` and
//! `fallow spindown` can share a file, each reading its own table
//! (`[scrub]`, `[run]`, `[spindown]`) and skipping the others'. A file
//! with its keys at the top level and `[[disk]]` tables (the layout
//! before the shared one) is still read, with a warning saying where the
//! keys go now.

use super::{DiskSpec, JobSpec, SpindownConfig, SpinupLimit, DEFAULT_POLICY, DEFAULT_POLL_NS};
use crate::error::{Error, Result};
use crate::settings::config::{config_of, relative_to, setting, TABLES};
use fallow_core::energy::{PowerFile, PowerModel};
use fallow_core::settings::{ConfigFile, Layers};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The status file when none is given.
pub const DEFAULT_STATE: &str = "/run/fallow/spindown.json";
/// How often a job is due when neither its flag nor its table says.
pub const DEFAULT_JOB_EVERY: &str = "24h";
/// How long a due job waits for the disk to spin anyway, by default.
pub const DEFAULT_JOB_DEADLINE: &str = "6h";

/// `[spindown]` of a config file (every key may be left out).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpindownSection {
    /// As `--poll`.
    pub poll: Option<String>,
    /// The policy of disks without their own.
    pub policy: Option<String>,
    /// The spin-up budget of disks without their own (`50/day`).
    pub max_spinups: Option<String>,
    /// As `--power`.
    pub power: Option<PathBuf>,
    /// As `--log`.
    pub log: Option<PathBuf>,
    /// As `--state`.
    pub state: Option<PathBuf>,
    /// As `--metrics` (the daemon's own endpoint, not `[metrics]`'s: a
    /// scrub and the daemon sharing the file each serve their own).
    pub metrics: Option<String>,
    /// As `--dry-run` (either one makes it a dry run): a service can be
    /// tried without spinning anything down.
    pub dry_run: Option<bool>,
    /// `[[spindown.disk]]`: one table per disk.
    #[serde(default)]
    pub disk: Vec<DiskSection>,
}

/// `[[spindown.disk]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskSection {
    /// The disk, as a DEV argument names it.
    pub dev: String,
    /// Its policy.
    pub policy: Option<String>,
    /// Its spin-up budget.
    pub max_spinups: Option<String>,
    /// Maintenance commands that ride its spin-ups.
    #[serde(default)]
    pub jobs: Vec<JobSection>,
}

/// One job of a `[[spindown.disk]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSection {
    /// Run with `sh -c`.
    pub command: String,
    /// How often it is due (default `--job-every`'s).
    pub every: Option<String>,
    /// How long it waits for a spin-up (default `--job-deadline`'s).
    pub deadline: Option<String>,
}

/// What a front end parsed: `fallow spindown`'s flags, as given (`None`
/// and empty lists: not given).
#[derive(Debug, Default, Clone)]
pub struct SpindownFlags {
    /// DEV arguments.
    pub devs: Vec<String>,
    /// `--policy [DEV=]SPEC`, repeated.
    pub policies: Vec<String>,
    /// `--max-spinups [DEV=]N/UNIT`, repeated.
    pub max_spinups: Vec<String>,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--poll`.
    pub poll: Option<String>,
    /// `--power`.
    pub power: Option<PathBuf>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--log`.
    pub log: Option<PathBuf>,
    /// `--state`.
    pub state: Option<PathBuf>,
    /// `--metrics`.
    pub metrics: Option<String>,
    /// `--job`, repeated: jobs of the first disk.
    pub jobs: Vec<String>,
    /// `--job-every`.
    pub job_every: Option<String>,
    /// `--job-deadline`.
    pub job_deadline: Option<String>,
    /// `--duration`.
    pub duration: Option<String>,
}

/// The resolved settings.
#[derive(Debug)]
pub struct Resolved {
    /// The daemon's configuration (the status file in `state_file`).
    pub config: SpindownConfig,
    /// The disks, flags' first, then the config's others.
    pub devs: Vec<String>,
    /// Where events are appended, if anywhere.
    pub log: Option<PathBuf>,
    /// Where to serve Prometheus metrics, if anywhere.
    pub metrics: Option<String>,
    /// Files the status and the log must never overwrite: the config, the
    /// power files, each DEV path (and its `disk` and `/dev/` forms).
    pub inputs: Vec<PathBuf>,
    /// What the user should know (an old config layout).
    pub warnings: Vec<String>,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Setting(msg.into())
}

fn duration(what: &str, s: &str) -> Result<u64> {
    ns_of(s).map_err(|e| bad(format!("{what} {e}")))
}

/// The table of one disk's settings, as origins name it.
const DISK_TABLE: &str = "spindown.disk";

/// A duration setting's text, in ns; the message says what was given.
fn ns_of(s: &str) -> std::result::Result<u64, String> {
    fallow_core::units::parse_duration_ns(s).map_err(|e| format!("`{s}`: {e}"))
}

/// Read `[spindown]` of the config at `path`, or a file in the old layout
/// (keys at the top level, `[[disk]]`), with a warning for the latter.
pub fn read_section(path: &Path) -> Result<(SpindownSection, Option<String>)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad(format!("--config {}: {e}", path.display())))?;
    let with_line = |e: toml::de::Error| {
        let line = e.span().map_or(1, |s| {
            text[..s.start.min(text.len())].matches('\n').count() + 1
        });
        bad(format!(
            "--config {}: line {line}: {}",
            path.display(),
            e.message()
        ))
    };
    let table: toml::Table = text.parse().map_err(with_line)?;
    // a shared file has its settings in tables (`metrics = "…"` at the top
    // level is the old layout's own key)
    let shared = table
        .iter()
        .any(|(k, v)| v.is_table() && TABLES.contains(&k.as_str()));
    if table.is_empty() || shared {
        let cfg = config_of::<SpindownSection>(path, table, "spindown")?;
        return Ok((relative_paths(path, cfg.own), None));
    }
    // the layout before the shared one: strict, with the line of an error
    let section: SpindownSection = toml::from_str(&text).map_err(with_line)?;
    let section = relative_paths(path, section);
    let warning = format!(
        "{}: settings at the top level are the old layout; put them in a [spindown] table \
         ([[disk]] becomes [[spindown.disk]]), so one file can serve fallow scrub, run and spindown",
        path.display()
    );
    Ok((section, Some(warning)))
}

/// The file's paths (`power`, `log`, `state`) relative to the file, as
/// every command's config paths are: a service started from `/` reads the
/// same files as a shell in the file's directory.
fn relative_paths(file: &Path, mut s: SpindownSection) -> SpindownSection {
    for p in [&mut s.power, &mut s.log, &mut s.state] {
        *p = p.take().map(|x| relative_to(file, x));
    }
    s
}

/// `[DEV=]VALUE` flags: the value for `dev`, the last matching one winning
/// over the last one without a DEV.
pub fn per_disk<'a>(flags: &'a [String], devs: &[String], dev: &str) -> Result<Option<&'a str>> {
    let mut all = None;
    let mut own = None;
    for f in flags {
        // a DEV= prefix names one of the DEV arguments; anything else
        // (`timeout:t=10s`) is a value for every disk
        match f.split_once('=') {
            Some((d, v)) if devs.iter().any(|x| x == d) => {
                if d == dev {
                    own = Some(v);
                }
            }
            Some((d, _)) if d.starts_with('/') && !d.contains(':') => {
                return Err(bad(format!(
                    "`{f}`: {d} is not one of the disks given ({})",
                    devs.join(", ")
                )))
            }
            _ => all = Some(f.as_str()),
        }
    }
    Ok(own.or(all))
}

impl SpindownFlags {
    /// Resolve every setting (flags, then the config file, then the
    /// defaults) and check what can be checked without the disks.
    pub fn resolve(&self) -> Result<Resolved> {
        let (file, warning) = match &self.config {
            Some(p) => read_section(p)?,
            None => (SpindownSection::default(), None),
        };
        let mut devs = self.devs.clone();
        for d in &file.disk {
            if !devs.contains(&d.dev) {
                devs.push(d.dev.clone());
            }
        }
        if devs.is_empty() {
            return Err(bad(
                "no disk given: name one or more DEV, or [[spindown.disk]] tables in --config",
            ));
        }
        // where a value came from, for its errors (`--poll`, `FILE:
        // [spindown] poll`, `FILE: [spindown.disk] policy of /dev/sdb`)
        let named = self
            .config
            .as_deref()
            .map(|p| ConfigFile::named(p, "spindown"));
        let f = named.as_ref();
        let poll = Layers::of(f)
            .flag("--poll", self.poll.clone())
            .own("poll", file.poll.clone())
            .resolve();
        let poll_ns = match poll {
            Some(r) => r.try_map(|s| ns_of(&s)).map_err(setting)?.value,
            None => DEFAULT_POLL_NS,
        };
        let power_path = Layers::of(f)
            .flag("--power", self.power.clone())
            .own("power", file.power.clone())
            .resolve();
        let power = match power_path {
            Some(r) => {
                let model = |p: PathBuf| {
                    PowerFile::read(&p)
                        .and_then(|f| f.model(None))
                        .map_err(|e| e.to_string())
                };
                r.try_map(model).map_err(setting)?.value
            }
            None => PowerModel::default(),
        };
        let every = self.job_every.as_deref().unwrap_or(DEFAULT_JOB_EVERY);
        let deadline = self.job_deadline.as_deref().unwrap_or(DEFAULT_JOB_DEADLINE);
        let every_ns = duration("--job-every", every)?;
        let deadline_ns = duration("--job-deadline", deadline)?;
        let disks = devs
            .iter()
            .enumerate()
            .map(|(i, dev)| self.disk(f, &file, &devs, (i, dev), (every_ns, deadline_ns)))
            .collect::<Result<Vec<_>>>()?;
        let state = Layers::of(f)
            .flag("--state", self.state.clone())
            .own("state", file.state.clone())
            .or(PathBuf::from(DEFAULT_STATE))
            .value;
        let inputs = self.inputs(&file, &devs);
        let config = SpindownConfig {
            disks,
            poll_ns,
            dry_run: self.dry_run || file.dry_run.unwrap_or(false),
            power,
            state_file: Some(state),
            duration_ns: self
                .duration
                .as_deref()
                .map(|s| duration("--duration", s))
                .transpose()?,
        };
        Ok(Resolved {
            config,
            devs,
            log: Layers::of(f)
                .flag("--log", self.log.clone())
                .own("log", file.log)
                .resolve()
                .map(|r| r.value),
            metrics: Layers::of(f)
                .flag("--metrics", self.metrics.clone())
                .own("metrics", file.metrics)
                .resolve()
                .map(|r| r.value),
            inputs,
            warnings: warning.into_iter().collect(),
        })
    }

    /// Disk `i` of `devs`, `dev`: its policy, spin-up limit and jobs, each
    /// by the one precedence (a flag, its `[[spindown.disk]]` table, then
    /// `[spindown]`), the jobs of `--job` going to the first disk.
    fn disk(
        &self,
        f: Option<&ConfigFile>,
        file: &SpindownSection,
        devs: &[String],
        (i, dev): (usize, &String),
        (every_ns, deadline_ns): (u64, u64),
    ) -> Result<DiskSpec> {
        let fd = file.disk.iter().find(|d| &d.dev == dev);
        let policy = Layers::of(f)
            .flag(
                "--policy",
                per_disk(&self.policies, devs, dev)?.map(str::to_string),
            )
            .part(
                DISK_TABLE,
                &format!("policy of {dev}"),
                fd.and_then(|d| d.policy.clone()),
            )
            .own("policy", file.policy.clone())
            .or(DEFAULT_POLICY.to_string())
            .value;
        let flag = per_disk(&self.max_spinups, devs, dev)?.map(str::to_string);
        let max_spinups = Layers::of(f)
            .flag("--max-spinups", flag)
            .part(
                DISK_TABLE,
                &format!("max_spinups of {dev}"),
                fd.and_then(|d| d.max_spinups.clone()),
            )
            .own("max_spinups", file.max_spinups.clone())
            .resolve()
            .map(|r| r.try_map(|s| SpinupLimit::parse(&s).map_err(|e| e.to_string())))
            .transpose()
            .map_err(setting)?
            .map(|r| r.value);
        let mut jobs = Vec::new();
        if i == 0 {
            jobs.extend(self.jobs.iter().map(|c| JobSpec {
                command: c.clone(),
                every_ns,
                deadline_ns,
            }));
        }
        for j in fd.map_or(&[][..], |d| &d.jobs[..]) {
            jobs.push(JobSpec {
                command: j.command.clone(),
                every_ns: match &j.every {
                    Some(s) => duration("job every", s)?,
                    None => every_ns,
                },
                deadline_ns: match &j.deadline {
                    Some(s) => duration("job deadline", s)?,
                    None => deadline_ns,
                },
            });
        }
        Ok(DiskSpec {
            target: dev.clone(),
            policy,
            max_spinups,
            jobs,
        })
    }

    /// The files the status and the log must never overwrite
    /// ([`Resolved::inputs`]): the config, the power files, each DEV path
    /// and its `disk` and `/dev/` forms.
    fn inputs(&self, file: &SpindownSection, devs: &[String]) -> Vec<PathBuf> {
        let mut inputs: Vec<PathBuf> = self.config.iter().cloned().collect();
        inputs.extend(self.power.clone());
        inputs.extend(file.power.clone());
        for d in devs {
            let p = PathBuf::from(d);
            inputs.push(p.join("disk"));
            if !d.starts_with('/') && !d.starts_with('.') {
                inputs.push(Path::new("/dev").join(d));
            }
            inputs.push(p);
        }
        inputs
    }
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
    fn the_example_config_parses_in_the_shared_layout() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/spindown.toml");
        let (c, warning) = read_section(&p).unwrap();
        assert_eq!(warning, None);
        assert_eq!(c.disk.len(), 2);
        assert_eq!(c.disk[1].jobs.len(), 1);
        assert_eq!(
            SpinupLimit::parse(c.max_spinups.as_deref().unwrap())
                .unwrap()
                .count,
            50
        );
        for j in &c.disk[1].jobs {
            duration("every", j.every.as_deref().unwrap()).unwrap();
            duration("deadline", j.deadline.as_deref().unwrap()).unwrap();
        }
    }

    /// The same settings in the shared layout and in the old one resolve
    /// alike; the old one says where its keys go; a shared file's other
    /// tables are skipped, and a scrub reading it skips `[spindown]`.
    #[test]
    fn the_old_layout_reads_with_a_warning_and_shared_files_serve_every_command() {
        let d = tempfile::tempdir().unwrap();
        let keys = "poll = \"1s\"\npolicy = \"timeout:t=20min\"\nmax_spinups = \"9/day\"\n\
                    state = \"st.json\"\nlog = \"l.jsonl\"\n";
        let disk = "dev = \"/dev/sdb\"\npolicy = \"adaptive\"\n";
        let old = write(d.path(), "old.toml", &format!("{keys}[[disk]]\n{disk}"));
        let new = write(
            d.path(),
            "new.toml",
            &format!(
                "[scrub]\nsize = \"1MiB\"\n[live]\npolicy = \"fixed-wait\"\n\
                 [spindown]\n{keys}[[spindown.disk]]\n{disk}"
            ),
        );
        let resolve = |p: &Path| {
            SpindownFlags {
                devs: vec!["/dev/sdc".into()],
                config: Some(p.to_path_buf()),
                ..SpindownFlags::default()
            }
            .resolve()
            .unwrap()
        };
        let (a, b) = (resolve(&old), resolve(&new));
        assert_eq!(a.config, b.config);
        assert_eq!(a.devs, ["/dev/sdc", "/dev/sdb"]);
        assert_eq!(a.config.poll_ns, 1_000_000_000);
        // the file's paths are relative to the file, in either layout
        for r in [&a, &b] {
            assert_eq!(r.config.state_file, Some(d.path().join("st.json")));
            assert_eq!(r.log, Some(d.path().join("l.jsonl")));
        }
        let policies: Vec<&str> = a.config.disks.iter().map(|d| d.policy.as_str()).collect();
        assert_eq!(policies, ["timeout:t=20min", "adaptive"]);
        assert!(b.warnings.is_empty());
        assert!(a.warnings[0].contains("[spindown]"), "{:?}", a.warnings);
        // the scrub's reader skips [spindown]
        let scrub = crate::settings::config::read_config::<toml::Table>(&new, "scrub").unwrap();
        assert!(scrub.own.contains_key("size"));
    }

    /// Flags beat a disk's table, which beats `[spindown]`, which beats the
    /// defaults; an error names the flag, or the file and its line.
    #[test]
    fn flags_then_the_disk_then_the_section_then_the_defaults() {
        let d = tempfile::tempdir().unwrap();
        let cfg = write(
            d.path(),
            "s.toml",
            "[spindown]\npolicy = \"timeout:t=1h\"\nstate = \"/tmp/x.json\"\n\
             [[spindown.disk]]\ndev = \"b\"\npolicy = \"adaptive\"\n",
        );
        let flags = SpindownFlags {
            devs: vec!["a".into(), "b".into(), "c".into()],
            policies: vec!["c=predictive".into()],
            config: Some(cfg.clone()),
            ..SpindownFlags::default()
        };
        let r = flags.resolve().unwrap();
        let policies: Vec<&str> = r.config.disks.iter().map(|d| d.policy.as_str()).collect();
        assert_eq!(policies, ["timeout:t=1h", "adaptive", "predictive"]);
        assert_eq!(
            r.config.state_file.as_deref(),
            Some(Path::new("/tmp/x.json"))
        );
        assert_eq!(r.config.poll_ns, DEFAULT_POLL_NS);
        let none = SpindownFlags {
            devs: vec!["a".into()],
            ..SpindownFlags::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(none.config.disks[0].policy, DEFAULT_POLICY);
        assert_eq!(
            none.config.state_file.as_deref(),
            Some(Path::new(DEFAULT_STATE))
        );
        assert!(r.inputs.contains(&cfg) && r.inputs.contains(&PathBuf::from("/dev/a")));
        // errors
        let e = SpindownFlags {
            poll: Some("soon".into()),
            ..flags.clone()
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("--poll"), "{e}");
        let old = write(d.path(), "o.toml", "policy = \"timeout\"\npolcy = 3\n");
        let e = SpindownFlags {
            config: Some(old),
            ..flags
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }

    /// A bad value from the file names the file, table and key it came
    /// from (before, a file's poll was reported as `--poll` and a disk's
    /// spin-up budget as `max_spinups in --config`).
    #[test]
    fn a_bad_value_from_the_file_names_its_table_and_key() {
        let d = tempfile::tempdir().unwrap();
        for (text, at) in [
            ("[spindown]\npoll = \"soon\"\n", "[spindown] poll: `soon`"),
            (
                "[spindown]\nmax_spinups = \"lots\"\n",
                "[spindown] max_spinups: ",
            ),
            (
                "[[spindown.disk]]\ndev = \"a\"\nmax_spinups = \"9/fortnight\"\n",
                "[spindown.disk] max_spinups of a: ",
            ),
            (
                "[spindown]\npower = \"no-such-power.toml\"\n",
                "[spindown] power: ",
            ),
        ] {
            let cfg = write(d.path(), "bad.toml", text);
            let e = SpindownFlags {
                devs: vec!["a".into()],
                config: Some(cfg.clone()),
                ..SpindownFlags::default()
            }
            .resolve()
            .unwrap_err();
            let want = format!("{}: {at}", cfg.display());
            assert!(e.to_string().starts_with(&want), "{want} in {e}");
            assert!(e.is_bad_input(), "{e}");
        }
    }

    #[test]
    fn per_disk_flags_pick_the_disk_or_fall_back() {
        let devs = vec!["/dev/sdb".to_string(), "/dev/sdc".to_string()];
        let flags = vec![
            "timeout:t=10s".to_string(),
            "/dev/sdc=adaptive:t=5s".to_string(),
        ];
        assert_eq!(
            per_disk(&flags, &devs, "/dev/sdb").unwrap(),
            Some("timeout:t=10s")
        );
        assert_eq!(
            per_disk(&flags, &devs, "/dev/sdc").unwrap(),
            Some("adaptive:t=5s")
        );
        assert_eq!(per_disk(&[], &devs, "/dev/sdb").unwrap(), None);
        let e = per_disk(&["/dev/sdz=adaptive".to_string()], &devs, "/dev/sdb")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/sdz"), "{e}");
    }
}
