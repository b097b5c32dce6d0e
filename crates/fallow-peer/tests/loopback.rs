//! Nodes on loopback in one process, without FUSE or namespaces (so these
//! run everywhere): the overlay's read path against an honest peer, a
//! tampering one, none, and a peer that does not hold the file in memory.

use fallow_peer::disk::{Disk, DiskSpec, EmulatedConfig};
use fallow_peer::index::Root;
use fallow_peer::metrics::{Fallback, Served};
use fallow_peer::node::{Node, NodeConfig};
use fallow_peer::overlay::Overlay;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + i / 977) as u8) ^ seed)
        .collect()
}

fn app(dir: &Path, name: &str) -> PathBuf {
    let app = dir.join(name);
    std::fs::create_dir_all(app.join("lib")).unwrap();
    std::fs::write(app.join("lib/big.so"), data(1_000_000, 1)).unwrap();
    std::fs::write(app.join("small"), data(5000, 2)).unwrap();
    app
}

fn config(dir: &Path, seeds: Vec<std::net::SocketAddr>, tamper: bool) -> NodeConfig {
    NodeConfig {
        roots: vec![Root::parse(&format!("app={}", dir.display())).unwrap()],
        seeds,
        advertise_every: Duration::from_millis(100),
        fleet_size: 3,
        tamper,
        ..NodeConfig::default()
    }
}

/// Make a file cold; false where the page cache cannot be emptied (tmpfs).
fn cold(p: &Path) -> bool {
    let f = std::fs::File::open(p).unwrap();
    f.sync_all().unwrap();
    fallow_peer::cache::drop_cached(&f).unwrap();
    let len = f.metadata().unwrap().len();
    fallow_peer::cache::residency(&f, len).unwrap().cached_pages == 0
}

fn wait_holders(node: &Node, n: usize) {
    let idx = node.shared().index();
    let e = idx.get("app/lib/big.so").unwrap();
    let t = Instant::now();
    while node.shared().peers.holders(&e.wire, &e.manifest.root).len() != n {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no {n} holders: {:?}",
            node.shared().peers.summary()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn reads_from_an_honest_peer_and_fallback_from_a_tampering_one() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, c) = (app(t.path(), "a"), app(t.path(), "b"), app(t.path(), "c"));
    // b holds the files in memory (it just wrote and hashed them)
    let nb = Node::start(config(&b, vec![], false), None).unwrap();
    let disk = Arc::new(
        Disk::open(&DiskSpec::Emulated(EmulatedConfig {
            timeout_ns: 60_000_000_000,
            spinup_ns: 100_000_000,
            shutdown_ns: 0,
            start_asleep: true,
        }))
        .unwrap(),
    );
    let na = Node::start(config(&a, vec![nb.addr()], false), Some(disk.clone())).unwrap();
    let big = a.join("lib/big.so");
    if !cold(&big) || !cold(&a.join("small")) {
        eprintln!("skipped: loopback overlay test (the page cache cannot be emptied here)");
        return;
    }
    wait_holders(&na, 1);
    let ov = Overlay::new(na.shared().clone(), 0, Duration::ZERO).unwrap();
    let rt = na.handle();
    let read = |rel: &str, off: u64, size: u32| {
        let f = Arc::new(std::fs::File::open(a.join(rel)).unwrap());
        rt.block_on(ov.read(f, Path::new(rel), off, size)).unwrap()
    };
    // an unaligned read spanning two chunks, and one past the end
    let want = data(1_000_000, 1);
    let (got, how) = read("lib/big.so", 100_000, 200_000);
    assert_eq!(how, Served::Remote);
    assert!(got == want[100_000..300_000]);
    let (got, how) = read("lib/big.so", 999_000, 128 * 1024);
    assert_eq!((got.len(), how), (1000, Served::Remote));
    assert!(disk.is_asleep());
    assert_eq!(disk.snapshot().spinups, 0);

    // b leaves; c tampers: caught, and the read comes from the disk
    nb.shutdown();
    let nc = Node::start(config(&c, vec![na.addr()], true), None).unwrap();
    wait_holders(&na, 1);
    let (got, how) = read("small", 0, 5000);
    assert_eq!(how, Served::Fallback(Fallback::Mismatch));
    assert!(got == data(5000, 2));
    let s = na.shared().metrics.snapshot();
    // verified: chunks 0–2 (bytes 100,000–299,999) and 7 (the tail)
    assert_eq!((s.chunks.mismatch, s.chunks.verified), (1, 4));
    assert_eq!(disk.snapshot().spinups, 1);
    // the disk now spins: the next read is local, peers or not
    assert!(cold(&big));
    let (got, how) = read("lib/big.so", 0, 4096);
    assert_eq!(how, Served::Local);
    assert!(got == want[..4096]);
    nc.shutdown();
    na.shutdown();
}

#[test]
fn no_peer_means_the_disk() {
    let t = tempfile::tempdir().unwrap();
    let a = app(t.path(), "a");
    let disk = Arc::new(
        Disk::open(
            &DiskSpec::parse("emulated:t=60s,spinup=50ms,shutdown=0s,start=asleep").unwrap(),
        )
        .unwrap(),
    );
    let na = Node::start(config(&a, vec![], false), Some(disk.clone())).unwrap();
    if !cold(&a.join("small")) {
        eprintln!("skipped: loopback overlay test (the page cache cannot be emptied here)");
        return;
    }
    let ov = Overlay::new(na.shared().clone(), 0, Duration::ZERO).unwrap();
    let f = Arc::new(std::fs::File::open(a.join("small")).unwrap());
    let t0 = Instant::now();
    let (got, how) = na
        .handle()
        .block_on(ov.read(f, Path::new("small"), 10, 100))
        .unwrap();
    assert_eq!(how, Served::Fallback(Fallback::NoPeer));
    assert!(
        t0.elapsed() >= Duration::from_millis(50),
        "the spin-up was slept"
    );
    assert!(got == data(5000, 2)[10..110]);
    let snap = disk.snapshot();
    assert_eq!(
        (snap.spinups, snap.standalone.spinups, snap.spinups_avoided),
        (1, 1, 0)
    );
    na.shutdown();
}
