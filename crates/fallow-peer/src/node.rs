//! One node of the fleet: its index, what it advertises, its view of the
//! peers, its metrics, and the tasks that keep them current — the data
//! server, the membership protocol, the residency scan that decides what to
//! advertise, the fetcher of the peers' lists, and the rescan of the index.

use crate::client::Client;
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::index::{Index, Root};
use crate::keys::NodeKeys;
use crate::membership::{Membership, MembershipConfig};
use crate::metrics::Metrics;
use crate::peers::PeerTable;
use crate::proto::{Advert, Request, Response};
use crate::server::{Gate, Limits};
use crate::transport::Transport;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// Settings of a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Address for the data channel (TCP) and gossip (UDP), same port.
    pub listen: SocketAddr,
    /// Members to join through.
    pub seeds: Vec<SocketAddr>,
    /// Application directories to index, serve and advertise.
    pub roots: Vec<Root>,
    /// Chunk size, bytes.
    pub chunk_bytes: u32,
    /// How often page-cache residency is checked to update the
    /// advertisement.
    pub advertise_every: Duration,
    /// Advertise a file when at least this share of its pages is cached.
    pub min_resident: f64,
    /// Re-walk the roots this often (only while the local disk is awake).
    pub rescan_every: Option<Duration>,
    /// Deadline of one request to a peer.
    pub fetch_timeout: Duration,
    /// Expected fleet size (tunes gossip).
    pub fleet_size: u32,
    /// Test only: corrupt every chunk served.
    pub tamper: bool,
    /// Test only: wait this long before answering each chunk request (to
    /// kill a peer mid-transfer).
    pub serve_delay: Duration,
    /// The fleet's credentials: mutual TLS and sealed gossip. Without
    /// them the node starts on loopback only.
    pub keys: Option<NodeKeys>,
    /// What the server may spend on peers.
    pub limits: Limits,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            seeds: Vec::new(),
            roots: Vec::new(),
            chunk_bytes: crate::manifest::DEFAULT_CHUNK_BYTES,
            advertise_every: Duration::from_secs(2),
            min_resident: 1.0,
            rescan_every: Some(Duration::from_secs(300)),
            fetch_timeout: Duration::from_millis(500),
            fleet_size: 100,
            tamper: false,
            serve_delay: Duration::ZERO,
            keys: None,
            limits: Limits::default(),
        }
    }
}

/// Descriptors kept free for the mount's local reads and the node's own
/// files, whatever peers do: connections are capped so that at least this
/// many (or a quarter of the limit, if more) stay unused.
pub const FD_RESERVE: u64 = 256;

/// Raise the soft limit on open descriptors to the hard limit and return
/// the soft limit now in force.
pub fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    if l.current != l.maximum {
        l.current = l.maximum;
        let _ = setrlimit(Resource::Nofile, l);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// The connection cap that keeps the descriptor reserve with a soft limit
/// of `soft`: half of what is left after the reserve goes to accepted
/// connections, half to this node's own connections to peers.
pub fn conn_cap(soft: u64, wanted: usize) -> usize {
    let reserve = FD_RESERVE.max(soft / 4);
    let spare = soft.saturating_sub(reserve) / 2;
    (wanted as u64).min(spare).max(1) as usize
}

/// Where the node's identity lives: the listening address, unless it is
/// unspecified (`0.0.0.0`), when the certificate's first address is; and
/// without keys, only loopback.
pub fn check_listen(
    listen: SocketAddr,
    keys: Option<&NodeKeys>,
) -> Result<Option<std::net::IpAddr>> {
    match keys {
        None if listen.ip().is_loopback() => Ok(None),
        None => Err(Error::invalid(
            "--keys",
            format!(
                "refusing to listen on {listen} without fleet keys (anyone on the network could read, \
                 join and forge): make them with `fallow peer init --fleet DIR` once, then \
                 `fallow peer keygen --fleet DIR --ip THIS_IP --out NODE_DIR` for each node, and \
                 start with `--keys NODE_DIR` (or listen on 127.0.0.1)"
            ),
        )),
        Some(k) if listen.ip().is_unspecified() => match k.ips.first() {
            Some(ip) => Ok(Some(*ip)),
            None => Err(Error::invalid(
                "--keys",
                format!("{}: the certificate names no IP address to be known by", k.dir.display()),
            )),
        },
        Some(k) if k.ips.contains(&listen.ip()) => Ok(None),
        Some(k) => Err(Error::invalid(
            "--listen",
            format!(
                "{listen}: the certificate in {} names {:?}, not this address (peers would refuse it)",
                k.dir.display(),
                k.ips
            ),
        )),
    }
}

/// The files this node advertises.
#[derive(Debug, Clone, Default)]
pub struct OwnAdverts {
    /// Grows with every change (ms since the epoch, so a restarted node's
    /// versions are newer too).
    pub version: u64,
    /// Files resident in the page cache.
    pub files: Vec<Advert>,
}

/// State shared by a node's tasks, its server and its overlay.
#[derive(Debug)]
pub struct Shared {
    /// Where the node listens.
    pub addr: SocketAddr,
    index: RwLock<Arc<Index>>,
    adverts: RwLock<Arc<OwnAdverts>>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The server's caps and what is in use.
    pub gate: Arc<Gate>,
    /// True with mutual TLS and sealed gossip.
    pub secure: bool,
    /// The peers and what they advertise.
    pub peers: Arc<PeerTable>,
    /// Client for requests to peers.
    pub client: Client,
    /// Test only: corrupt served chunks.
    pub tamper: bool,
    /// Test only: delay before each chunk answer.
    pub serve_delay: Duration,
    /// The local disk, for a node with an overlay.
    pub disk: Option<Arc<Disk>>,
    membership: OnceLock<Membership>,
    started: Instant,
}

impl Shared {
    /// The current index.
    pub fn index(&self) -> Arc<Index> {
        self.index.read().expect("index lock").clone()
    }

    /// The current advertisement.
    pub fn adverts(&self) -> Arc<OwnAdverts> {
        self.adverts.read().expect("adverts lock").clone()
    }

    /// Live members other than this node.
    pub fn members(&self) -> Vec<SocketAddr> {
        self.membership
            .get()
            .map(|m| m.members().into_iter().map(|p| p.addr).collect())
            .unwrap_or_default()
    }

    /// Status as JSON: members, index, advertisement, peers, metrics, disk.
    pub fn status_json(&self) -> String {
        let idx = self.index();
        let adv = self.adverts();
        let members = self.members();
        let v = serde_json::json!({
            "addr": self.addr,
            "alive": members.len() + 1,
            "members": members,
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "index": {
                "roots": idx.roots.iter().map(|r| serde_json::json!({"name": r.name, "dir": r.dir})).collect::<Vec<_>>(),
                "files": idx.len(),
                "bytes": idx.bytes(),
                "chunk_bytes": idx.chunk_bytes,
                "skipped_unreadable": idx.skipped.unreadable.len(),
                "skipped_not_regular": idx.skipped.not_regular,
                "skipped_not_world_readable": idx.skipped.not_world_readable,
                "skipped_mount_points": idx.skipped.mount_points,
            },
            "advertised": {"version": adv.version, "files": adv.files.len()},
            "peers": self.peers.summary(),
            "metrics": self.metrics.snapshot(),
            "disk": self.disk.as_ref().map(|d| d.snapshot()),
            "tamper": self.tamper,
            "secure": self.secure,
            "conns": {"open": self.gate.open_conns(), "max": self.gate.limits().max_conns},
        });
        v.to_string()
    }
}

/// A running node.
pub struct Node {
    rt: Runtime,
    shared: Arc<Shared>,
    membership: Membership,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("addr", &self.shared.addr)
            .finish()
    }
}

impl Node {
    /// Index the roots, bind the port, join the fleet and start serving.
    pub fn start(cfg: NodeConfig, disk: Option<Arc<Disk>>) -> Result<Node> {
        if !(cfg.min_resident > 0.0 && cfg.min_resident <= 1.0) {
            return Err(Error::invalid(
                "--min-resident",
                format!("{}: must be in (0, 1]", cfg.min_resident),
            ));
        }
        let identity = check_listen(cfg.listen, cfg.keys.as_ref())?;
        let index = Index::build(&cfg.roots, cfg.chunk_bytes, None)?;
        let soft = raise_nofile();
        let mut limits = cfg.limits.clone();
        limits.max_conns = conn_cap(soft, limits.max_conns);
        let transport = match &cfg.keys {
            Some(k) => Transport::tls(k.clone()),
            None => Transport::plain(),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            // the server's answers take at most `max_blocking` of these;
            // the rest serve the mount's reads and the index
            .max_blocking_threads(limits.max_blocking + 16)
            .enable_all()
            .thread_name("fallow-peer")
            // every read through the overlay wakes several of these threads
            // (and the holder's); on a busy machine each wake-up could wait
            // out another task's slice (docs/peer.md, "Latency through the
            // overlay"). Not fatal if refused: the threads run as before.
            .on_thread_start(|| {
                let _ = crate::sys::request_short_slice(crate::sys::READ_PATH_SLICE_NS);
            })
            .build()
            .map_err(|e| Error::Net {
                what: "tokio runtime".into(),
                source: e,
            })?;
        let (shared, membership) = rt.block_on(async {
            let listener = tokio::net::TcpListener::bind(cfg.listen)
                .await
                .map_err(|e| Error::Net {
                    what: format!("tcp listener {}", cfg.listen),
                    source: e,
                })?;
            let addr = listener.local_addr().map_err(|e| Error::Net {
                what: format!("tcp listener {}", cfg.listen),
                source: e,
            })?;
            let peers = Arc::new(PeerTable::new());
            let metrics = Arc::new(Metrics::new());
            let addr = SocketAddr::new(identity.unwrap_or(addr.ip()), addr.port());
            let shared = Arc::new(Shared {
                addr,
                index: RwLock::new(Arc::new(index)),
                adverts: RwLock::new(Arc::new(OwnAdverts::default())),
                metrics: metrics.clone(),
                gate: Arc::new(Gate::new(limits)),
                secure: cfg.keys.is_some(),
                peers: peers.clone(),
                client: Client::new(cfg.fetch_timeout, transport.clone()),
                tamper: cfg.tamper,
                serve_delay: cfg.serve_delay,
                disk,
                membership: OnceLock::new(),
                started: Instant::now(),
            });
            // gossip on the data port's number, so one address names a peer
            let bound = SocketAddr::new(cfg.listen.ip(), addr.port());
            let membership = Membership::start(
                bound,
                MembershipConfig {
                    fleet_size: cfg.fleet_size,
                    seeds: cfg.seeds.clone(),
                    keys: cfg.keys.as_ref().map(|k| k.gossip.clone()),
                    keys_file: cfg.keys.as_ref().map(|k| k.dir.join("gossip.keys")),
                    identity,
                },
                peers,
                metrics,
            )
            .await?;
            shared
                .membership
                .set(membership.clone())
                .expect("membership set once");
            tokio::spawn(crate::server::serve(listener, shared.clone(), transport));
            tokio::spawn(advertiser(shared.clone(), membership.clone(), cfg.clone()));
            tokio::spawn(fetcher(shared.clone()));
            if let Some(every) = cfg.rescan_every {
                tokio::spawn(rescanner(
                    shared.clone(),
                    cfg.roots.clone(),
                    cfg.chunk_bytes,
                    every,
                ));
            }
            Ok::<_, Error>((shared, membership))
        })?;
        Ok(Node {
            rt,
            shared,
            membership,
        })
    }

    /// Where the node listens.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The node's shared state.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The node's runtime.
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.rt.handle().clone()
    }

    /// Leave the fleet (others see it at once rather than after a failed
    /// probe) and stop every task.
    pub fn shutdown(self) {
        let m = self.membership.clone();
        self.rt.block_on(async move { m.leave().await });
        self.rt.shutdown_timeout(Duration::from_secs(1));
    }
}

/// Share of one core the residency scan may take: each tick checks files
/// from where the last one stopped until it has spent this share of the
/// tick's period, so the cost is bounded whatever the tree's size, and a
/// large tree is covered over several ticks (60,000 files at about 16 µs
/// each, 2 s ticks: a full pass every ~100 s).
pub const SCAN_CPU_SHARE: f64 = 0.01;

/// The residency scan's state between ticks.
#[derive(Debug, Default)]
struct Scan {
    /// The last file checked; the next tick starts after it.
    cursor: Option<String>,
    /// Files found resident, with the root they were found under.
    resident: std::collections::BTreeMap<String, crate::manifest::Hash>,
}

impl Scan {
    /// Check files for `budget`, continuing from the cursor; true when the
    /// set of resident files changed.
    fn step(&mut self, idx: &Index, min_resident: f64, budget: Duration) -> bool {
        let t = Instant::now();
        let before = self.resident.len();
        // files no longer indexed, or re-hashed to another root, go
        self.resident
            .retain(|w, r| idx.get(w).is_some_and(|e| &e.manifest.root == r));
        let mut changed = self.resident.len() != before;
        let mut checked = 0usize;
        loop {
            let next = match &self.cursor {
                None => idx.files().next(),
                Some(c) => idx.files_after(c).next(),
            };
            let Some(e) = next else {
                self.cursor = None; // a full pass: wrap around
                if checked == 0 {
                    break; // an empty index
                }
                if checked >= idx.len() {
                    break; // every file checked this tick
                }
                continue;
            };
            self.cursor = Some(e.wire.clone());
            let resident = idx.open_for_scan(e).is_some_and(|f| {
                crate::cache::residency(&f, e.manifest.size_bytes)
                    .is_ok_and(|r| r.total_pages > 0 && r.fraction() >= min_resident)
            });
            changed |= if resident {
                self.resident.insert(e.wire.clone(), e.manifest.root) != Some(e.manifest.root)
            } else {
                self.resident.remove(&e.wire).is_some()
            };
            checked += 1;
            if checked >= idx.len() || t.elapsed() >= budget {
                break;
            }
        }
        changed
    }

    fn adverts(&self) -> Vec<Advert> {
        self.resident
            .iter()
            .map(|(w, r)| Advert {
                wire: w.clone(),
                root: *r,
            })
            .collect()
    }
}

async fn advertiser(shared: Arc<Shared>, membership: Membership, cfg: NodeConfig) {
    let mut tick = tokio::time::interval(cfg.advertise_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_gossip = Instant::now();
    let budget = cfg
        .advertise_every
        .mul_f64(SCAN_CPU_SHARE)
        .max(Duration::from_micros(200));
    let scan = Arc::new(std::sync::Mutex::new(Scan::default()));
    loop {
        tick.tick().await;
        let s = shared.clone();
        let min = cfg.min_resident;
        let sc = scan.clone();
        let Ok(files) = tokio::task::spawn_blocking(move || {
            let mut sc = sc.lock().expect("scan lock");
            sc.step(&s.index(), min, budget).then(|| sc.adverts())
        })
        .await
        else {
            return;
        };
        let changed = files.is_some();
        if let Some(files) = files {
            let old = shared.adverts();
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            let version = now_ms.max(old.version + 1);
            *shared.adverts.write().expect("adverts lock") =
                Arc::new(OwnAdverts { version, files });
        }
        // re-gossip now and then so late joiners hear the version too
        if changed || last_gossip.elapsed() >= Duration::from_secs(5) {
            membership.advertise(shared.adverts().version).await;
            last_gossip = Instant::now();
        }
    }
}

/// Advertisement lists fetched at once.
const FETCHES_AT_ONCE: usize = 8;

async fn fetcher(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut set = tokio::task::JoinSet::new();
        // a bounded number of fetches (and connections) at once
        let slots = Arc::new(tokio::sync::Semaphore::new(FETCHES_AT_ONCE));
        for (addr, have) in shared.peers.due(Instant::now()) {
            let s = shared.clone();
            let slots = slots.clone();
            set.spawn(async move {
                let Ok(_slot) = slots.acquire().await else {
                    return;
                };
                let idx = s.index();
                let useful = |w: &str, r: &crate::manifest::Hash| {
                    idx.get(w).is_some_and(|e| &e.manifest.root == r)
                };
                match s.client.call(addr, &Request::Adverts { have }).await {
                    Ok(Response::Adverts { version, files }) => {
                        s.peers.set_adverts(addr, version, Some(files), &useful)
                    }
                    Ok(Response::AdvertsUnchanged { version }) => {
                        s.peers.set_adverts(addr, version, None, &useful)
                    }
                    _ => {
                        s.client.forget(addr);
                        s.peers.fetch_failed(addr)
                    }
                }
            });
        }
        while set.join_next().await.is_some() {}
    }
}

async fn rescanner(shared: Arc<Shared>, roots: Vec<Root>, chunk_bytes: u32, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is now: the index was just built
    loop {
        tick.tick().await;
        // hashing reads the disk: only while it spins anyway
        if shared.disk.as_ref().is_some_and(|d| d.is_asleep()) {
            continue;
        }
        let s = shared.clone();
        let roots = roots.clone();
        let built = tokio::task::spawn_blocking(move || {
            Index::build(&roots, chunk_bytes, Some(&s.index()))
        })
        .await;
        if let Ok(Ok(idx)) = built {
            *shared.index.write().expect("index lock") = Arc::new(idx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_residency_scan_covers_the_index_within_its_budget() {
        let t = tempfile::tempdir().unwrap();
        for k in 0..50 {
            std::fs::write(t.path().join(format!("f{k:02}")), vec![k as u8; 5000]).unwrap();
        }
        let root = Root::parse(&format!("app={}", t.path().display())).unwrap();
        let idx = Index::build(std::slice::from_ref(&root), 4096, None).unwrap();
        let mut scan = Scan::default();
        // a zero budget checks one file a tick: 50 ticks for a full pass
        for tick in 0..50 {
            scan.step(&idx, 1.0, Duration::ZERO);
            assert!(scan.resident.len() <= tick + 1);
        }
        if scan.resident.len() != 50 {
            eprintln!("skip: residency scan test (fresh files are not all cached here)");
            return;
        }
        // a generous budget checks every file once in one tick, no more
        let f7 = std::fs::File::open(t.path().join("f07")).unwrap();
        crate::cache::drop_cached(&f7).unwrap();
        let cold = crate::cache::residency(&f7, 5000).unwrap().cached_pages == 0;
        assert!(scan.step(&idx, 1.0, Duration::from_secs(10)) == cold);
        assert_eq!(scan.resident.len(), if cold { 49 } else { 50 });
        assert!(
            !scan.step(&idx, 1.0, Duration::from_secs(10)),
            "nothing changed"
        );
        // a file gone from the index leaves the advertisement at once
        std::fs::remove_file(t.path().join("f00")).unwrap();
        let idx2 = Index::build(&[root], 4096, Some(&idx)).unwrap();
        assert!(scan.step(&idx2, 1.0, Duration::ZERO));
        assert!(!scan.adverts().iter().any(|a| a.wire == "app/f00"));
    }
}
