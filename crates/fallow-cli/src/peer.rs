//! `fallow peer`: SARD for real. `serve` indexes application
//! directories, advertises the files resident in its page cache to the
//! fleet (foca SWIM membership) and serves their chunks from memory only;
//! `mount` does the same and overlays a directory with FUSE, reading from
//! peers — verified chunk by chunk against the local manifest — while the
//! local disk sleeps; `status`, `get` and `bench` talk to a running peer.

use crate::BadInput;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use fallow_peer::disk::{Disk, DiskSpec};
use fallow_peer::error::Error as PeerError;
use fallow_peer::index::{Index, Root};
use fallow_peer::keys::NodeKeys;
use fallow_peer::manifest::hex;
use fallow_peer::node::{Node, NodeConfig};
use fallow_peer::proto::{Request, Response};
use fallow_peer::settings::{PeerFlags, PeerSettings};
use fallow_peer::transport::Transport;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `fallow peer`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer init --fleet /root/fleet
      once per fleet: a CA and a gossip key (keep this directory off the nodes)
  fallow peer keygen --fleet /root/fleet --ip 10.0.0.2 --out /etc/fallow/peer
      once per node: its certificate (naming its address) and the gossip keys
  fallow peer serve --keys /etc/fallow/peer --dir /usr/bin --dir /usr/lib \\
        --listen 10.0.0.2:7946 --peers 10.0.0.1:7946
      index, advertise what is in memory, serve chunks from the page cache only
  fallow peer mount --keys /etc/fallow/peer --source /usr/bin --mountpoint /mnt/bin \\
        --listen 10.0.0.1:7946 --peers 10.0.0.2:7946 --disk-state device:/dev/sda
      overlay /usr/bin: while sda sleeps, read from peers, verified, else from sda
  fallow peer mount --source app=/srv/app --mountpoint /mnt/app \\
        --disk-state emulated:t=10s,spinup=200ms,start=asleep --listen 127.0.0.1:7000
      the same with an emulated disk (the energy simulation's timeout model)
  fallow peer status --keys /etc/fallow/peer --peer 10.0.0.2:7946
  fallow peer bench --keys /etc/fallow/peer --peer 10.0.0.2:7946 --dir app=/srv/app --file app/big.bin
  fallow peer rotate --fleet /root/fleet [--promote|--retire]
      roll the gossip key: add (all nodes open it), promote (it seals), retire the old one;
      copy gossip.keys to every node after each step (running nodes re-read it)

Without --keys a node listens on loopback only: off loopback the data channel is mutual
TLS (certificates signed by the fleet CA, naming the node's address) and every gossip
datagram is sealed with the fleet's gossip key.

Files are named ROOT/relative/path on the wire; ROOT is the name given as NAME=DIR
(default: the directory's path without the leading /), so fleets that keep an
application in different places still agree on names.")]
pub struct PeerArgs {
    #[command(subcommand)]
    command: PeerCommand,
}

#[derive(Debug, Subcommand)]
enum PeerCommand {
    /// Index directories, join the fleet, advertise and serve cached chunks.
    Serve(ServeArgs),
    /// `serve`, plus a FUSE overlay that reads from peers while the disk sleeps.
    Mount(MountArgs),
    /// A running peer's members, advertisement and metrics.
    Status(StatusArgs),
    /// Ask a peer for one chunk of a file (a debugging aid).
    Get(GetArgs),
    /// Remote chunk fetches against local O_DIRECT reads of the same file.
    Bench(BenchArgs),
    /// Make a fleet: a certificate authority and a gossip key.
    Init(InitArgs),
    /// Issue a node's keys (certificate naming its addresses, gossip keys).
    Keygen(KeygenArgs),
    /// Roll the fleet's gossip key: add a new one, promote it, retire the old.
    Rotate(RotateArgs),
}

/// Arguments of `fallow peer init`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer init --fleet /root/fleet
      a CA and a gossip key, once per fleet (keep this directory off the nodes)")]
struct InitArgs {
    /// The fleet directory to create (ca.pem, ca.key, gossip.keys).
    #[arg(long, value_name = "DIR")]
    fleet: PathBuf,
}

/// Arguments of `fallow peer keygen`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer keygen --fleet /root/fleet --ip 10.0.0.2 --out /etc/fallow/peer
      a node's certificate naming 10.0.0.2, with the fleet's gossip keys")]
struct KeygenArgs {
    /// The fleet directory made by `fallow peer init`.
    #[arg(long, value_name = "DIR")]
    fleet: PathBuf,

    /// An address the node listens on (repeat for several; the first is its
    /// identity when it listens on 0.0.0.0) — for a machine that only runs
    /// `status`, `get` or `bench`, the address it connects from: peers
    /// accept a certificate only from an address it names.
    #[arg(long = "ip", value_name = "IP", required = true)]
    ips: Vec<std::net::IpAddr>,

    /// The node's directory to write (ca.pem, node.pem, node.key, gossip.keys).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,

    /// The certificate's common name. [default: the first IP]
    #[arg(long)]
    name: Option<String>,
}

/// Arguments of `fallow peer rotate`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer rotate --fleet /root/fleet
      add a new gossip key (copy gossip.keys to every node; they reload it)
  fallow peer rotate --fleet /root/fleet --promote
      seal with the new key once every node has it
  fallow peer rotate --fleet /root/fleet --retire
      then drop the old one")]
struct RotateArgs {
    /// The fleet directory.
    #[arg(long, value_name = "DIR")]
    fleet: PathBuf,

    /// Make the newest key the sealing one (step 2 of a roll).
    #[arg(long, conflicts_with = "retire")]
    promote: bool,

    /// Drop every key but the sealing one (step 3 of a roll).
    #[arg(long)]
    retire: bool,
}

/// Flags shared by `serve` and `mount`. Each may come from the `[peer]`
/// table of a config file instead (`--config`); a flag wins over the file,
/// the file over the default (`fallow_peer::settings`).
#[derive(Debug, Args)]
struct NodeArgs {
    /// A config file (TOML) whose `[peer]` table gives any of the flags
    /// below (`listen = "10.0.0.2:7946"`, `peers = ["10.0.0.1:7946"]`,
    /// `keys = "DIR"` relative to the file, `chunk_size = "128KiB"`, …); the
    /// same file as `fallow scrub`'s, `run`'s and `spindown`'s, each
    /// reading its own table.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Address for the data channel (TCP) and gossip (UDP), same port; on
    /// 0.0.0.0 the node is known by its certificate's first address.
    /// [default: 0.0.0.0:7946]
    #[arg(long, value_name = "IP:PORT")]
    listen: Option<SocketAddr>,

    /// The node's keys (`fallow peer keygen`); required off loopback.
    #[arg(long, value_name = "DIR")]
    keys: Option<PathBuf>,

    /// Peers to join through, comma-separated (any live member will do).
    #[arg(long, value_name = "IP:PORT,…", value_delimiter = ',')]
    peers: Vec<SocketAddr>,

    /// Chunk size of manifests and transfers (a multiple of 4 KiB).
    /// [default: 128KiB]
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    chunk_size: Option<u64>,

    /// How often page-cache residency is checked to update what is
    /// advertised. [default: 2s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    advertise_every: Option<Duration>,

    /// Advertise a file when at least this share of its pages is in memory.
    /// [default: 1]
    #[arg(long, value_name = "FRACTION", value_parser = crate::args::parse_fraction)]
    min_resident: Option<f64>,

    /// Re-walk and re-hash changed files this often (only while the disk
    /// spins). [default: 5min]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    rescan: Option<Duration>,

    /// Deadline of one request to a peer. [default: 500ms]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,

    /// Expected number of members (tunes gossip relays and suspicion time).
    /// [default: 100]
    #[arg(long, value_name = "N")]
    fleet_size: Option<u32>,

    /// TEST ONLY: corrupt every chunk served, to exercise verification.
    #[arg(long, hide_short_help = true)]
    tamper: bool,

    /// TEST ONLY: wait this long before answering each chunk request.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration, hide_short_help = true)]
    serve_delay: Duration,
}

/// Arguments of `fallow peer serve`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer serve --keys /etc/fallow/peer --dir /usr/bin --listen 10.0.0.2:7946 --peers 10.0.0.1:7946
      advertise and serve what of /usr/bin is in this node's page cache
  fallow peer serve --dir app=/srv/app
      without keys: loopback only, for a look on one machine")]
struct ServeArgs {
    /// Directory to index and serve, `[NAME=]DIR`; repeat for several.
    #[arg(long = "dir", value_name = "[NAME=]DIR", required = true)]
    dirs: Vec<String>,

    #[command(flatten)]
    node: NodeArgs,
}

/// Arguments of `fallow peer mount`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer mount --keys /etc/fallow/peer --source /usr/bin --mountpoint /mnt/bin --peers 10.0.0.1:7946
      read /usr/bin through /mnt/bin, from peers' memory while the local disk sleeps")]
struct MountArgs {
    /// The directory to overlay, `[NAME=]DIR` (indexed and served too).
    #[arg(long, value_name = "[NAME=]DIR")]
    source: String,

    /// Where to mount the overlay (an existing directory).
    #[arg(long, value_name = "DIR")]
    mountpoint: PathBuf,

    /// Where the disk's power state comes from:
    /// `emulated[:t=10s,spinup=9s,shutdown=4s,start=awake|asleep]`,
    /// `device:/dev/sdX[,t=10s]` (ATA CHECK POWER MODE) or `awake`.
    /// [default: emulated]
    #[arg(long, value_name = "SPEC")]
    disk_state: Option<String>,

    /// Leave a peer that sent bytes failing verification out this long.
    /// [default: 60s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    quarantine: Option<Duration>,

    /// More directories to serve (not overlaid), `[NAME=]DIR`.
    #[arg(long = "dir", value_name = "[NAME=]DIR")]
    dirs: Vec<String>,

    #[command(flatten)]
    node: NodeArgs,
}

/// Arguments of `fallow peer status`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer status --peer 10.0.0.2:7946 --keys /etc/fallow/peer
      members, what the node advertises, its counters
  fallow peer status --peer 127.0.0.1:7946 --json
      a keyless node on this machine, as JSON")]
struct StatusArgs {
    /// The peer to ask.
    #[arg(long, value_name = "IP:PORT")]
    peer: SocketAddr,

    /// Keys to present (`fallow peer keygen`; the certificate must name the
    /// address this command connects from); none: plain, loopback peers only.
    #[arg(long, value_name = "DIR")]
    keys: Option<PathBuf>,

    /// Print the whole status as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `fallow peer get`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer get --peer 10.0.0.2:7946 --keys /etc/fallow/peer --chunk 0 bin/ls
      the first chunk of bin/ls as that node serves it (a debugging aid)")]
struct GetArgs {
    /// The peer to ask.
    #[arg(long, value_name = "IP:PORT")]
    peer: SocketAddr,

    /// Keys to present (`fallow peer keygen`; the certificate must name the
    /// address this command connects from); none: plain, loopback peers only.
    #[arg(long, value_name = "DIR")]
    keys: Option<PathBuf>,

    /// File name on the wire, `ROOT/relative/path`.
    #[arg(value_name = "NAME")]
    name: String,

    /// Chunk index.
    #[arg(long, default_value_t = 0)]
    chunk: u32,

    /// Manifest root to ask for (hex). [default: the one the peer advertises]
    #[arg(long, value_name = "HEX")]
    root: Option<String>,
}

/// Arguments of `fallow peer bench`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow peer bench --peer 10.0.0.2:7946 --keys /etc/fallow/peer --dir app=/srv/app --file app/big.bin
      remote chunk fetches against local O_DIRECT reads of the same file")]
struct BenchArgs {
    /// The peer serving the file from its page cache.
    #[arg(long, value_name = "IP:PORT")]
    peer: SocketAddr,

    /// Keys to present (`fallow peer keygen`; the certificate must name the
    /// address this command connects from); none: plain, loopback peers only.
    #[arg(long, value_name = "DIR")]
    keys: Option<PathBuf>,

    /// The local copy's directory, `[NAME=]DIR` (named as on the peer).
    #[arg(long = "dir", value_name = "[NAME=]DIR")]
    dir: String,

    /// The file, `ROOT/relative/path`.
    #[arg(long, value_name = "NAME")]
    file: String,

    /// Requests in flight in the throughput pass.
    #[arg(long, default_value_t = 4)]
    connections: usize,

    /// Passes over the file for each measurement.
    #[arg(long, default_value_t = 3)]
    repeat: u32,

    /// Chunk size (as the peer's).
    #[arg(long, value_name = "SIZE", default_value = "128KiB", value_parser = parse_bytes)]
    chunk_size: u64,

    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

use crate::args::{parse_bytes, parse_std_duration as parse_duration};

/// A library error, as bad input (exit 2) when the input is at fault.
fn lift(e: PeerError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

fn roots(specs: &[String]) -> Result<Vec<Root>> {
    specs.iter().map(|s| Root::parse(s).map_err(lift)).collect()
}

fn chunk_bytes(size: u64) -> Result<u32> {
    let c = u32::try_from(size).map_err(|_| BadInput(format!("--chunk-size {size}: too large")))?;
    fallow_peer::manifest::check_chunk_bytes(c).map_err(lift)?;
    Ok(c)
}

fn load_keys(dir: Option<&PathBuf>) -> Result<Option<NodeKeys>> {
    dir.map(|d| NodeKeys::load(d).map_err(lift)).transpose()
}

fn transport(dir: Option<&PathBuf>) -> Result<Transport> {
    Ok(match load_keys(dir)? {
        Some(k) => Transport::tls(k),
        None => Transport::plain(),
    })
}

/// The node's settings: the flags, then `--config`'s `[peer]`, then the
/// defaults (`fallow_peer::settings`), each checked; those the file gave
/// are said on stderr.
fn settings(a: &NodeArgs, mount: Option<&MountArgs>) -> Result<PeerSettings> {
    let flags = PeerFlags {
        config: a.config.clone(),
        listen: a.listen,
        keys: a.keys.clone(),
        peers: a.peers.clone(),
        chunk_size: a.chunk_size,
        advertise_every: a.advertise_every,
        min_resident: a.min_resident,
        rescan: a.rescan,
        timeout: a.timeout,
        fleet_size: a.fleet_size,
        disk_state: mount.and_then(|m| m.disk_state.clone()),
        quarantine: mount.and_then(|m| m.quarantine),
    };
    let s = flags.resolve().map_err(lift)?;
    let from_file = s.from_file();
    if !from_file.is_empty() {
        eprintln!(
            "fallow peer: from the config file: {}",
            from_file.join(", ")
        );
    }
    Ok(s)
}

/// The node's configuration: `s` over `roots`, with the test-only flags.
fn node_config(a: &NodeArgs, s: &PeerSettings, roots: Vec<Root>) -> Result<NodeConfig> {
    let mut cfg = s.node_config(roots).map_err(lift)?;
    cfg.tamper = a.tamper;
    cfg.serve_delay = a.serve_delay;
    Ok(cfg)
}

/// Run `fallow peer`.
pub fn run(args: PeerArgs) -> Result<()> {
    match args.command {
        PeerCommand::Serve(a) => serve(a),
        PeerCommand::Mount(a) => mount(a),
        PeerCommand::Status(a) => status(a),
        PeerCommand::Get(a) => get(a),
        PeerCommand::Bench(a) => bench(a),
        PeerCommand::Init(a) => {
            fallow_peer::keys::init_fleet(&a.fleet).map_err(lift)?;
            println!(
                "fleet made in {}: ca.pem, ca.key and gossip.keys (keep ca.key and gossip.keys secret); \
                 now `fallow peer keygen --fleet {} --ip NODE_IP --out NODE_DIR` for each node",
                a.fleet.display(),
                a.fleet.display()
            );
            Ok(())
        }
        PeerCommand::Keygen(a) => {
            let name = a.name.clone().unwrap_or_else(|| a.ips[0].to_string());
            fallow_peer::keys::issue_node(&a.fleet, &a.out, &name, &a.ips).map_err(lift)?;
            println!(
                "node keys for {name} ({}) in {}: start it with --keys {}",
                a.ips
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                a.out.display(),
                a.out.display()
            );
            Ok(())
        }
        PeerCommand::Rotate(a) => {
            let ring =
                fallow_peer::keys::rotate_gossip(&a.fleet, a.promote, a.retire).map_err(lift)?;
            let ids: Vec<String> = ring.keys().iter().map(|k| k.id.to_string()).collect();
            println!(
                "gossip keys now {} (key {} seals): copy {}/gossip.keys to every node's keys \
                 directory (running nodes re-read it within a second)",
                ids.join(", "),
                ids[0],
                a.fleet.display()
            );
            Ok(())
        }
    }
}

/// Block until SIGINT or SIGTERM.
fn wait_for_signal(node: &Node) -> Result<()> {
    node.handle().block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok(())
    })
}

fn announce(node: &Node, what: &str) {
    let idx = node.shared().index();
    let roots: Vec<String> = idx
        .roots
        .iter()
        .map(|r| format!("{}={}", r.name, r.dir.display()))
        .collect();
    eprintln!(
        "fallow peer: {what} {} files ({:.1} MiB) of {} on {}{}",
        idx.len(),
        idx.bytes() as f64 / 1048576.0,
        roots.join(", "),
        node.addr(),
        if node.shared().tamper {
            " — TAMPERING (test only)"
        } else {
            ""
        }
    );
}

fn serve(a: ServeArgs) -> Result<()> {
    let s = settings(&a.node, None)?;
    let cfg = node_config(&a.node, &s, roots(&a.dirs)?)?;
    let node = Node::start(cfg, None).map_err(lift)?;
    announce(&node, "serving");
    wait_for_signal(&node)?;
    eprintln!("fallow peer: leaving");
    node.shutdown();
    Ok(())
}

fn mount(a: MountArgs) -> Result<()> {
    let s = settings(&a.node, Some(&a))?;
    let spec = DiskSpec::parse(&s.disk_state.value).map_err(lift)?;
    let disk = Arc::new(Disk::open(&spec).map_err(lift)?);
    let mut specs = vec![a.source.clone()];
    specs.extend(a.dirs.iter().cloned());
    let cfg = node_config(&a.node, &s, roots(&specs)?)?;
    let node = Node::start(cfg, Some(disk)).map_err(lift)?;
    let quarantine = s.quarantine.value;
    let overlay = fallow_peer::overlay::Overlay::new(node.shared().clone(), 0, quarantine)
        .context("the overlay needs the source root and a disk")?;
    let session =
        fallow_peer::fuse::mount(Arc::new(overlay), node.handle(), &a.mountpoint).map_err(lift)?;
    announce(&node, "overlaying");
    eprintln!(
        "fallow peer: mounted {} on {} (disk: {})",
        a.source,
        a.mountpoint.display(),
        s.disk_state.value
    );
    wait_for_signal(&node)?;
    eprintln!("fallow peer: unmounting and leaving");
    if let Err(e) = session.umount_and_join() {
        eprintln!("fallow peer: unmounting {}: {e}", a.mountpoint.display());
    }
    println!("{}", node.shared().status_json());
    node.shutdown();
    Ok(())
}

fn one_call(peer: SocketAddr, keys: Option<&PathBuf>, req: &Request) -> Result<Response> {
    let t = transport(keys)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let client = fallow_peer::client::Client::new(Duration::from_secs(5), t);
    rt.block_on(client.call(peer, req))
        .map_err(anyhow::Error::from)
}

fn status(a: StatusArgs) -> Result<()> {
    let Response::Status(json) = one_call(a.peer, a.keys.as_ref(), &Request::Status)? else {
        anyhow::bail!("peer {}: unexpected answer to a status request", a.peer);
    };
    if a.json {
        // the node's status, with this document's schema version first
        let v: serde_json::Value =
            serde_json::from_str(&json).context("peer status is not JSON")?;
        println!("{}", crate::output::json_text(&v)?.trim_end());
        return Ok(());
    }
    let v: serde_json::Value = serde_json::from_str(&json).context("peer status is not JSON")?;
    let reads = &v["metrics"]["reads"];
    println!(
        "peer {}: {} alive (members {})",
        v["addr"], v["alive"], v["members"]
    );
    println!(
        "indexed {} files, {} bytes; advertising {} (version {})",
        v["index"]["files"],
        v["index"]["bytes"],
        v["advertised"]["files"],
        v["advertised"]["version"]
    );
    for class in ["page_cache", "local", "remote", "fallback"] {
        let c = &reads[class];
        println!(
            "reads {class:<10} {:>8} reads {:>12} bytes  p50 {} µs  p99 {} µs",
            c["reads"], c["bytes"], c["latency"]["p50_us"], c["latency"]["p99_us"]
        );
    }
    println!("fallback reasons: {}", v["metrics"]["fallback_reasons"]);
    println!("chunks fetched: {}", v["metrics"]["chunks"]);
    println!("served to peers: {}", v["metrics"]["served"]);
    if !v["disk"].is_null() {
        println!(
            "disk: {} asleep={} spin-ups {} (standalone {}), avoided {}",
            v["disk"]["kind"],
            v["disk"]["asleep"],
            v["disk"]["spinups"],
            v["disk"]["standalone"]["spinups"],
            v["disk"]["spinups_avoided"]
        );
    }
    Ok(())
}

fn get(a: GetArgs) -> Result<()> {
    let root = match &a.root {
        Some(h) => parse_hex(h)?,
        None => match one_call(a.peer, a.keys.as_ref(), &Request::Adverts { have: 0 })? {
            Response::Adverts { files, .. } => files
                .iter()
                .find(|f| f.wire == a.name)
                .map(|f| f.root)
                .unwrap_or([0; 32]),
            _ => [0; 32],
        },
    };
    let req = Request::Chunk {
        wire: a.name.clone(),
        root,
        index: a.chunk,
    };
    match one_call(a.peer, a.keys.as_ref(), &req)? {
        Response::Chunk(d) => {
            println!(
                "chunk {} of {}: {} bytes, blake3 {}",
                a.chunk,
                a.name,
                d.len(),
                hex(blake3::hash(&d).as_bytes())
            );
            Ok(())
        }
        Response::NotCached => anyhow::bail!(
            "peer {}: chunk {} of {} is not cached",
            a.peer,
            a.chunk,
            a.name
        ),
        Response::Refused(why) => anyhow::bail!("peer {}: {why}", a.peer),
        other => anyhow::bail!("peer {}: unexpected answer {other:?}", a.peer),
    }
}

fn parse_hex(h: &str) -> Result<[u8; 32]> {
    let bad = || BadInput(format!("--root `{h}`: expected 64 hex digits"));
    if h.len() != 64 {
        return Err(bad().into());
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&h[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

fn bench(a: BenchArgs) -> Result<()> {
    let root = Root::parse(&a.dir).map_err(lift)?;
    let idx = Index::build(&[root], chunk_bytes(a.chunk_size)?, None).map_err(lift)?;
    let r = fallow_peer::bench::run(
        &idx,
        &a.file,
        a.peer,
        a.connections,
        a.repeat.max(1),
        Duration::from_secs(10),
        transport(a.keys.as_ref())?,
    )
    .map_err(lift)?;
    if a.json {
        return crate::output::print(&crate::output::json_text(&r)?);
    }
    println!(
        "{} ({:.1} MiB, {} KiB chunks) from {}, {} passes",
        r.file,
        r.size_bytes as f64 / 1048576.0,
        r.chunk_bytes / 1024,
        r.peer,
        a.repeat.max(1)
    );
    println!(
        "{:<30} {:>8} {:>10} {:>9} {:>9} {:>9}",
        "", "ops", "MB/s", "p50 µs", "mean µs", "p99 µs"
    );
    for p in [&r.remote_serial, &r.remote_parallel, &r.local_direct] {
        println!(
            "{:<30} {:>8} {:>10.1} {:>9} {:>9.0} {:>9}",
            p.name, p.ops, p.mb_per_s, p.p50_us, p.mean_us, p.p99_us
        );
    }
    println!(
        "local/remote median latency: {:.2}×; remote/local throughput: {:.2}×",
        r.latency_ratio, r.throughput_ratio
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use fallow_peer::settings::*;

    /// The defaults `serve --help` and `mount --help` state are the library's.
    #[test]
    fn help_states_the_librarys_defaults() {
        use clap::Args as _;
        let mut cmd = super::MountArgs::augment_args(clap::Command::new("mount"));
        let help = cmd.render_long_help().to_string();
        for d in [
            DEFAULT_LISTEN.to_string(),
            DEFAULT_CHUNK_SIZE.to_string(),
            DEFAULT_ADVERTISE_EVERY.to_string(),
            DEFAULT_MIN_RESIDENT.to_string(),
            DEFAULT_RESCAN.to_string(),
            DEFAULT_TIMEOUT.to_string(),
            DEFAULT_FLEET_SIZE.to_string(),
            DEFAULT_DISK_STATE.to_string(),
            DEFAULT_QUARANTINE.to_string(),
        ] {
            assert!(help.contains(&format!("[default: {d}]")), "{d} in\n{help}");
        }
    }
}
