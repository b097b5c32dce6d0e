//! The settings of `fallow peer serve` and `fallow peer mount`, resolved
//! once: the flags a front end parsed ([`PeerFlags`]), then the config
//! file's `[peer]` table, then the defaults below, by the one precedence
//! of [`fallow_core::settings`]. The file is fallow's one config format:
//! a scrub, the spin-down daemon and a peer can share one file, each
//! reading its own table.
//!
//! ```toml
//! [peer]
//! listen = "10.0.0.2:7946"
//! keys = "peer-keys"            # relative to this file
//! peers = ["10.0.0.1:7946", "10.0.0.3:7946"]
//! chunk_size = "128KiB"
//! advertise_every = "2s"
//! min_resident = 1.0
//! rescan = "5min"
//! timeout = "500ms"
//! fleet_size = 100
//! disk_state = "device:/dev/sda"  # mount only
//! quarantine = "60s"              # mount only
//! ```
//!
//! The directories served (`--dir`, `--source`) and the mountpoint stay on
//! the command line: they are what the command is run on.

use crate::error::Result;
use crate::index::Root;
use crate::keys::NodeKeys;
use crate::node::NodeConfig;
use fallow_core::settings::{ConfigFile, Layers, Origin, Resolved};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where a node listens when neither a flag nor the file says.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:7946";
/// The chunk size of manifests and transfers.
pub const DEFAULT_CHUNK_SIZE: &str = "128KiB";
/// How often page-cache residency is checked.
pub const DEFAULT_ADVERTISE_EVERY: &str = "2s";
/// The share of a file's pages in memory that gets it advertised.
pub const DEFAULT_MIN_RESIDENT: f64 = 1.0;
/// How often changed files are re-walked and re-hashed.
pub const DEFAULT_RESCAN: &str = "5min";
/// The deadline of one request to a peer.
pub const DEFAULT_TIMEOUT: &str = "500ms";
/// The expected number of members.
pub const DEFAULT_FLEET_SIZE: u32 = 100;
/// Where a mount's disk power state comes from.
pub const DEFAULT_DISK_STATE: &str = "emulated";
/// How long a peer that sent bad bytes is left out.
pub const DEFAULT_QUARANTINE: &str = "60s";

/// The node's own table of the config file (every key may be left out).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerSection {
    listen: Option<String>,
    keys: Option<PathBuf>,
    peers: Option<Vec<String>>,
    chunk_size: Option<String>,
    advertise_every: Option<String>,
    min_resident: Option<f64>,
    rescan: Option<String>,
    timeout: Option<String>,
    fleet_size: Option<u32>,
    disk_state: Option<String>,
    quarantine: Option<String>,
}

/// The flags of `serve` and `mount` as given (None or empty: not given).
/// Sizes and durations are parsed by the front end.
#[derive(Debug, Clone, Default)]
pub struct PeerFlags {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--keys`.
    pub keys: Option<PathBuf>,
    /// `--peers`.
    pub peers: Vec<SocketAddr>,
    /// `--chunk-size`, bytes.
    pub chunk_size: Option<u64>,
    /// `--advertise-every`.
    pub advertise_every: Option<Duration>,
    /// `--min-resident`.
    pub min_resident: Option<f64>,
    /// `--rescan`.
    pub rescan: Option<Duration>,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--fleet-size`.
    pub fleet_size: Option<u32>,
    /// mount `--disk-state`.
    pub disk_state: Option<String>,
    /// mount `--quarantine`.
    pub quarantine: Option<Duration>,
}

/// A node's settings, each with where it came from.
#[derive(Debug, Clone)]
pub struct PeerSettings {
    /// The data channel's and gossip's address.
    pub listen: Resolved<SocketAddr>,
    /// The node's keys directory, if any.
    pub keys: Option<Resolved<PathBuf>>,
    /// Members to join through.
    pub peers: Resolved<Vec<SocketAddr>>,
    /// Chunk size, bytes.
    pub chunk_bytes: Resolved<u32>,
    /// Residency check interval.
    pub advertise_every: Resolved<Duration>,
    /// Share of pages in memory to advertise a file.
    pub min_resident: Resolved<f64>,
    /// Re-walk interval.
    pub rescan: Resolved<Duration>,
    /// Deadline of one request to a peer.
    pub timeout: Resolved<Duration>,
    /// Expected fleet size.
    pub fleet_size: Resolved<u32>,
    /// Where a mount's disk state comes from (`emulated`, `device:…`).
    pub disk_state: Resolved<String>,
    /// How long a peer that sent bad bytes is left out.
    pub quarantine: Resolved<Duration>,
}

fn duration(text: &str) -> std::result::Result<Duration, String> {
    fallow_core::units::parse_duration_ns(text)
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

fn address(s: &str) -> std::result::Result<SocketAddr, String> {
    s.trim()
        .parse()
        .map_err(|e| format!("`{s}`: {e} (give IP:PORT)"))
}

fn fraction(v: f64) -> std::result::Result<f64, String> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not a fraction from 0 to 1 (0.2 is 20 %)"))
    }
}

fn chunk(bytes: u64) -> std::result::Result<u32, String> {
    let c = u32::try_from(bytes).map_err(|_| format!("{bytes} bytes: too large"))?;
    crate::manifest::check_chunk_bytes(c).map_err(|e| e.to_string())?;
    Ok(c)
}

/// A duration: the flag, else `key` of the file (text), else `default`.
fn duration_of(
    file: Option<&ConfigFile>,
    flag: (&str, Option<Duration>),
    key: (&str, Option<&String>),
    default: &str,
) -> Result<Resolved<Duration>> {
    let default = duration(default).expect("the defaults parse");
    let layers = Layers::of(file).flag(flag.0, flag.1);
    let layers = layers.own_parsed(key.0, key.1, |s| duration(s))?;
    Ok(layers.or(default))
}

impl PeerFlags {
    /// Every setting: the flag, else the config file's `[peer]`, else the
    /// default; each value checked, an error naming where it came from.
    pub fn resolve(&self) -> Result<PeerSettings> {
        let file = match &self.config {
            Some(p) => Some(ConfigFile::read(p, "peer")?),
            None => None,
        };
        let f = file.as_ref();
        let own: PeerSection = match f {
            Some(f) => f.table("peer")?,
            None => PeerSection::default(),
        };
        let listen = Layers::of(f)
            .flag("--listen", self.listen)
            .own_parsed("listen", own.listen.as_deref(), address)?
            .or(address(DEFAULT_LISTEN).expect("the default parses"));
        let keys = Layers::of(f)
            .flag("--keys", self.keys.clone())
            .own(
                "keys",
                own.keys
                    .clone()
                    .map(|p| f.map_or(p.clone(), |f| f.relative(p))),
            )
            .resolve();
        let given = (!self.peers.is_empty()).then(|| self.peers.clone());
        let peers = Layers::of(f)
            .flag("--peers", given)
            .own_parsed("peers", own.peers.as_ref(), |list| {
                list.iter().map(|s| address(s)).collect()
            })?
            .or(Vec::new());
        let bytes = |s: &str| fallow_core::units::parse_bytes(s).map_err(|e| e.to_string());
        let chunk_bytes = Layers::of(f)
            .flag("--chunk-size", self.chunk_size)
            .own_parsed("chunk_size", own.chunk_size.as_deref(), bytes)?
            .or(bytes(DEFAULT_CHUNK_SIZE).expect("the default parses"))
            .try_map(chunk)?;
        let min_resident = Layers::of(f)
            .flag("--min-resident", self.min_resident)
            .own("min_resident", own.min_resident)
            .or(DEFAULT_MIN_RESIDENT)
            .try_map(fraction)?;
        let fleet_size = Layers::of(f)
            .flag("--fleet-size", self.fleet_size)
            .own("fleet_size", own.fleet_size)
            .or(DEFAULT_FLEET_SIZE)
            .try_map(|n| match n {
                0 => Err("must be at least 1".to_string()),
                n => Ok(n),
            })?;
        let disk_state = Layers::of(f)
            .flag("--disk-state", self.disk_state.clone())
            .own("disk_state", own.disk_state.clone())
            .or(DEFAULT_DISK_STATE.to_string())
            .try_map(|s: String| {
                crate::disk::DiskSpec::parse(&s).map_err(|e| e.to_string())?;
                Ok(s)
            })?;
        Ok(PeerSettings {
            listen,
            keys,
            peers,
            chunk_bytes,
            advertise_every: duration_of(
                f,
                ("--advertise-every", self.advertise_every),
                ("advertise_every", own.advertise_every.as_ref()),
                DEFAULT_ADVERTISE_EVERY,
            )?,
            min_resident,
            rescan: duration_of(
                f,
                ("--rescan", self.rescan),
                ("rescan", own.rescan.as_ref()),
                DEFAULT_RESCAN,
            )?,
            timeout: duration_of(
                f,
                ("--timeout", self.timeout),
                ("timeout", own.timeout.as_ref()),
                DEFAULT_TIMEOUT,
            )?,
            fleet_size,
            disk_state,
            quarantine: duration_of(
                f,
                ("--quarantine", self.quarantine),
                ("quarantine", own.quarantine.as_ref()),
                DEFAULT_QUARANTINE,
            )?,
        })
    }
}

impl PeerSettings {
    /// The node's configuration over `roots`, its keys loaded. The
    /// intervals are floored (advertising at 10 ms, re-walking at 1 s):
    /// shorter ones would spin a core on residency checks and walks.
    pub fn node_config(&self, roots: Vec<Root>) -> Result<NodeConfig> {
        let keys = match &self.keys {
            Some(k) => Some(NodeKeys::load(&k.value)?),
            None => None,
        };
        Ok(NodeConfig {
            keys,
            limits: Default::default(),
            listen: self.listen.value,
            seeds: self.peers.value.clone(),
            roots,
            chunk_bytes: self.chunk_bytes.value,
            advertise_every: self.advertise_every.value.max(Duration::from_millis(10)),
            min_resident: self.min_resident.value,
            rescan_every: Some(self.rescan.value.max(Duration::from_secs(1))),
            fetch_timeout: self.timeout.value,
            fleet_size: self.fleet_size.value,
            tamper: false,
            serve_delay: Duration::ZERO,
        })
    }

    /// The settings that did not come from a flag or a default, as
    /// `name value (origin)`: what a node says at start, so a value from
    /// a shared config file is never a surprise.
    pub fn from_file(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut note = |name: &str, value: String, origin: &Origin| {
            if matches!(origin, Origin::File { .. }) {
                out.push(format!("{name} {value} ({origin})"));
            }
        };
        note("listen", self.listen.value.to_string(), &self.listen.origin);
        if let Some(k) = &self.keys {
            note("keys", k.value.display().to_string(), &k.origin);
        }
        let peers: Vec<String> = self.peers.value.iter().map(|a| a.to_string()).collect();
        note("peers", peers.join(","), &self.peers.origin);
        // as a key of the file takes them (a chunk is whole KiB)
        let chunk = format!("{}KiB", self.chunk_bytes.value >> 10);
        note("chunk_size", chunk, &self.chunk_bytes.origin);
        let secs = |d: Duration| format!("{d:?}");
        let every = &self.advertise_every;
        note("advertise_every", secs(every.value), &every.origin);
        let share = self.min_resident.value.to_string();
        note("min_resident", share, &self.min_resident.origin);
        note("rescan", secs(self.rescan.value), &self.rescan.origin);
        note("timeout", secs(self.timeout.value), &self.timeout.origin);
        let n = self.fleet_size.value.to_string();
        note("fleet_size", n, &self.fleet_size.origin);
        let disk = &self.disk_state;
        note("disk_state", disk.value.clone(), &disk.origin);
        let q = &self.quarantine;
        note("quarantine", secs(q.value), &q.origin);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fallow.toml");
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    #[test]
    fn defaults_then_the_file_then_flags() {
        let s = PeerFlags::default().resolve().unwrap();
        assert_eq!(s.listen.value, DEFAULT_LISTEN.parse().unwrap());
        assert_eq!(s.chunk_bytes.value, crate::manifest::DEFAULT_CHUNK_BYTES);
        assert_eq!(s.timeout.value, Duration::from_millis(500));
        assert_eq!(s.rescan.value, Duration::from_secs(300));
        assert!(s.keys.is_none() && s.peers.value.is_empty());
        assert!(s.from_file().is_empty());

        let (dir, p) = config(
            "[scrub]\nsize = \"1MiB\"\n[peer]\nlisten = \"127.0.0.1:7001\"\nkeys = \"k\"\n\
             peers = [\"127.0.0.1:7002\"]\nchunk_size = \"64KiB\"\ntimeout = \"2s\"\n",
        );
        let flags = PeerFlags {
            config: Some(p.clone()),
            ..Default::default()
        };
        let s = flags.resolve().unwrap();
        assert_eq!(s.listen.value, "127.0.0.1:7001".parse().unwrap());
        assert_eq!(s.keys.as_ref().unwrap().value, dir.path().join("k"));
        assert_eq!(s.peers.value, vec!["127.0.0.1:7002".parse().unwrap()]);
        assert_eq!(s.chunk_bytes.value, 64 << 10);
        assert_eq!(s.timeout.value, Duration::from_secs(2));
        assert_eq!(s.fleet_size.value, DEFAULT_FLEET_SIZE);
        let said = s.from_file().join("\n");
        assert!(said.contains(&format!(
            "listen 127.0.0.1:7001 ({}: [peer] listen)",
            p.display()
        )));
        assert_eq!(s.from_file().len(), 5, "{said}");

        let flags = PeerFlags {
            listen: Some("127.0.0.1:7003".parse().unwrap()),
            timeout: Some(Duration::from_millis(250)),
            ..flags
        };
        let s = flags.resolve().unwrap();
        assert_eq!(s.listen.value, "127.0.0.1:7003".parse().unwrap());
        assert_eq!(s.listen.origin, Origin::Flag("--listen".into()));
        assert_eq!(s.timeout.value, Duration::from_millis(250));
        assert_eq!(s.chunk_bytes.value, 64 << 10);
    }

    #[test]
    fn bad_values_name_the_file_table_and_key() {
        for (text, key) in [
            ("[peer]\nchunk_size = \"6KiB\"\n", "[peer] chunk_size"),
            ("[peer]\nlisten = \"nowhere\"\n", "[peer] listen"),
            ("[peer]\ntimeout = \"soon\"\n", "[peer] timeout"),
            ("[peer]\nmin_resident = 1.5\n", "[peer] min_resident"),
            ("[peer]\nfleet_size = 0\n", "[peer] fleet_size"),
            ("[peer]\ndisk_state = \"sleepy\"\n", "[peer] disk_state"),
            ("[peer]\npeers = [\"10.0.0.1\"]\n", "[peer] peers"),
        ] {
            let (_dir, p) = config(text);
            let flags = PeerFlags {
                config: Some(p.clone()),
                ..Default::default()
            };
            let e = flags.resolve().unwrap_err();
            let m = e.to_string();
            assert!(m.contains(&format!("{}: {key}", p.display())), "{m}");
            assert!(e.is_bad_input(), "{m}");
        }
        // an unknown key, a flag's bad value
        let (_dir, p) = config("[peer]\nlisten_on = \"x\"\n");
        let flags = PeerFlags {
            config: Some(p),
            ..Default::default()
        };
        assert!(flags
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("listen_on"));
        let flags = PeerFlags {
            chunk_size: Some(1000),
            ..Default::default()
        };
        let m = flags.resolve().unwrap_err().to_string();
        assert!(m.contains("--chunk-size"), "{m}");
    }
}
