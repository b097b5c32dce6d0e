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

/// Wait until `node` sees exactly the nodes `want` (in any order) holding
/// the big file. By address, not by count: a node that has just left can
/// stay in the table until its leave is processed, and a count would take
/// it for the newcomer (the read then goes to the node that left, whose
/// failure quarantines the shared loopback IP, and no tampering is seen).
/// 30 s: the newcomer's first advertisement waits for its residency tick
/// and the reader's fetch interval, slower on a loaded machine.
fn wait_holders(node: &Node, want: &[&Node]) {
    let idx = node.shared().index();
    let e = idx.get("app/lib/big.so").unwrap();
    let mut want: Vec<_> = want.iter().map(|n| n.addr()).collect();
    want.sort();
    let t = Instant::now();
    while node.shared().peers.holders(&e.wire, &e.manifest.root) != want {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "holders are not {want:?}: {:?}",
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
    wait_holders(&na, &[&nb]);
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
    wait_holders(&na, &[&nc]);
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

/// A reader going through a file in order finds each chunk after its
/// first already fetched (and verified): every chunk is fetched once, and
/// a reader out of order starts no fetch ahead.
#[test]
fn a_sequential_reader_finds_its_next_chunks_fetched_ahead() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (app(t.path(), "a"), app(t.path(), "b"));
    let nb = Node::start(config(&b, vec![], false), None).unwrap();
    let disk = Arc::new(
        Disk::open(
            &DiskSpec::parse("emulated:t=600s,spinup=50ms,shutdown=0s,start=asleep").unwrap(),
        )
        .unwrap(),
    );
    let na = Node::start(config(&a, vec![nb.addr()], false), Some(disk.clone())).unwrap();
    if !cold(&a.join("lib/big.so")) {
        eprintln!("skipped: readahead test (the page cache cannot be emptied here)");
        return;
    }
    wait_holders(&na, &[&nb]);
    let ov = Overlay::new(na.shared().clone(), 0, Duration::ZERO).unwrap();
    let want = data(1_000_000, 1);
    let chunk = 128 * 1024u64;
    let chunks = want.len().div_ceil(chunk as usize) as u64; // 8, the last short
    let read = |off: u64| {
        let f = Arc::new(std::fs::File::open(a.join("lib/big.so")).unwrap());
        let (got, how) = na
            .handle()
            .block_on(ov.read(f, Path::new("lib/big.so"), off, chunk as u32))
            .unwrap();
        assert_eq!(how, Served::Remote, "read at {off}");
        let end = (off + chunk).min(want.len() as u64) as usize;
        assert!(got == want[off as usize..end], "bytes at {off}");
    };
    for k in 0..chunks {
        read(k * chunk);
    }
    let s = na.shared().metrics.snapshot();
    eprintln!("in order: {:?}", s.chunks);
    assert_eq!(s.chunks.verified, chunks, "each chunk fetched once");
    assert_eq!(
        (s.chunks.ahead, s.chunks.ahead_used),
        (chunks - 1, chunks - 1)
    );
    // out of order (no read starts where the one before ended, none at 0)
    for k in [5, 2, 7, 3, 1] {
        read(k * chunk);
    }
    let s = na.shared().metrics.snapshot();
    assert_eq!(s.chunks.verified, chunks + 5);
    assert_eq!(
        (s.chunks.ahead, s.chunks.ahead_used),
        (chunks - 1, chunks - 1)
    );
    assert_eq!(disk.snapshot().spinups, 0);
    nb.shutdown();
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

/// The advertised names of a node.
fn advertised(node: &Node) -> Vec<String> {
    let a = node.shared().adverts();
    a.files.iter().map(|f| f.wire.clone()).collect()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A local user who owns a directory under a served root swaps an indexed
/// file for a FIFO, a unix socket or a device node: the residency scan
/// goes on (the name leaves the advertisement and comes back with the
/// file), twice as many requests for it as there are answer threads are
/// all refused at once, and the node keeps serving the other file and its
/// status throughout.
#[test]
fn special_files_swapped_in_never_stall_the_scan_or_the_answers() {
    use fallow_peer::client::Client;
    use fallow_peer::proto::{Request, Response};
    use fallow_peer::transport::Transport;
    let t = tempfile::tempdir().unwrap();
    let b = app(t.path(), "b");
    let nb = Node::start(config(&b, vec![], false), None).unwrap();
    let both = ["app/lib/big.so".to_string(), "app/small".to_string()];
    let t0 = Instant::now();
    while advertised(&nb) != both {
        if t0.elapsed() > Duration::from_secs(10) {
            eprintln!("skip: special-file test (the fresh files are not cached here)");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let idx = nb.shared().index();
    let (small_root, big_root) = (
        idx.get("app/small").unwrap().manifest.root,
        idx.get("app/lib/big.so").unwrap().manifest.root,
    );
    let client = Arc::new(Client::new(Duration::from_secs(10), Transport::plain()));
    let rt = nb.handle();
    let addr = nb.addr();
    let small = b.join("small");
    let aside = t.path().join("small.orig");
    let mknod = |kind, dev| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &small,
            kind,
            rustix::fs::Mode::from_raw_mode(0o644),
            dev,
        )
    };
    for kind in ["fifo", "socket", "device"] {
        std::fs::rename(&small, &aside).unwrap();
        let _sock;
        match kind {
            "fifo" => mknod(rustix::fs::FileType::Fifo, 0).unwrap(),
            "socket" => _sock = std::os::unix::net::UnixListener::bind(&small).unwrap(),
            _ => {
                let made = mknod(
                    rustix::fs::FileType::CharacterDevice,
                    rustix::fs::makedev(1, 3),
                );
                if made.is_err() {
                    eprintln!("skip: device node part (mknod needs CAP_MKNOD)");
                    std::fs::rename(&aside, &small).unwrap();
                    continue;
                }
            }
        }
        // mid-serve: two waves of 8 requests at once for the swapped name
        // (8 is the answer threads, and what one address may have in
        // handshakes at once); each is refused well within the client's
        // 10 s, where a blocking open would have held every thread
        let t1 = Instant::now();
        let answers = rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for k in 0..16 {
                if k == 8 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let c = client.clone();
                set.spawn(async move {
                    let req = Request::Chunk {
                        wire: "app/small".into(),
                        root: small_root,
                        index: 0,
                    };
                    c.call(addr, &req).await
                });
            }
            let mut out = Vec::new();
            while let Some(r) = set.join_next().await {
                out.push(r.unwrap());
            }
            out
        });
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "{kind}: {:?}",
            t1.elapsed()
        );
        for a in answers {
            assert!(
                matches!(&a, Ok(Response::Refused(m)) if m.contains("changed")),
                "{kind}: {a:?}"
            );
        }
        // status and the other file are still served
        let status = rt.block_on(client.call(addr, &Request::Status)).unwrap();
        assert!(matches!(status, Response::Status(ref j) if j.contains("\"advertised\"")));
        let chunk = rt
            .block_on(client.call(
                addr,
                &Request::Chunk {
                    wire: "app/lib/big.so".into(),
                    root: big_root,
                    index: 1,
                },
            ))
            .unwrap();
        let want = data(1_000_000, 1);
        assert!(matches!(chunk, Response::Chunk(ref d) if d[..] == want[128 * 1024..256 * 1024]));
        // mid-scan: the scan passes it (the name leaves the advertisement)
        wait_for("the swapped file leaves the advertisement", || {
            advertised(&nb) == both[..1]
        });
        // and, the file put back, the scan brings it back
        std::fs::remove_file(&small).unwrap();
        std::fs::rename(&aside, &small).unwrap();
        std::fs::read(&small).unwrap();
        wait_for("the file is advertised again", || advertised(&nb) == both);
    }
    nb.shutdown();
}

/// Three holders: c honest, b answers every chunk 300 ms late (within the
/// 500 ms deadline), d advertises the file but answers "not cached" (its
/// copy was evicted after it advertised, and it re-advertises only every
/// hour). A reader's 12 reads are all served remotely, b and d each cost at
/// most one read before they are left out, and the median read stays far
/// below b's 300 ms.
#[test]
fn holders_that_answer_late_or_not_cached_are_demoted() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, c, d) = (
        app(t.path(), "a"),
        app(t.path(), "b"),
        app(t.path(), "c"),
        app(t.path(), "d"),
    );
    // quarantine is by IP address: each holder on its own loopback address
    let on = |ip: &str| format!("{ip}:0").parse().unwrap();
    let nc = Node::start(
        NodeConfig {
            listen: on("127.0.0.3"),
            ..config(&c, vec![], false)
        },
        None,
    )
    .unwrap();
    let nb = Node::start(
        NodeConfig {
            serve_delay: Duration::from_millis(300),
            listen: on("127.0.0.2"),
            ..config(&b, vec![nc.addr()], false)
        },
        None,
    )
    .unwrap();
    let nd = Node::start(
        NodeConfig {
            advertise_every: Duration::from_secs(3600),
            listen: on("127.0.0.4"),
            ..config(&d, vec![nc.addr()], false)
        },
        None,
    )
    .unwrap();
    let disk = Arc::new(
        Disk::open(
            &DiskSpec::parse("emulated:t=600s,spinup=50ms,shutdown=0s,start=asleep").unwrap(),
        )
        .unwrap(),
    );
    let na = Node::start(config(&a, vec![nc.addr()], false), Some(disk.clone())).unwrap();
    let big = a.join("lib/big.so");
    if !cold(&big) || !cold(&d.join("lib/big.so")) {
        eprintln!("skipped: demotion test (the page cache cannot be emptied here)");
        return;
    }
    wait_holders(&na, &[&nb, &nc, &nd]);
    let ov = Overlay::new(na.shared().clone(), 0, Duration::from_secs(60)).unwrap();
    let want = data(1_000_000, 1);
    let mut took = Vec::new();
    for k in 0..12u64 {
        // chunks 0–7 of the 1,000,000-byte file, round and round, 4 KiB in
        let off = (k % 7) * 128 * 1024 + 4096;
        let f = Arc::new(std::fs::File::open(&big).unwrap());
        let t0 = Instant::now();
        let (got, how) = na
            .handle()
            .block_on(ov.read(f, Path::new("lib/big.so"), off, 8192))
            .unwrap();
        took.push(t0.elapsed());
        assert_eq!(how, Served::Remote, "read {k}");
        assert!(got == want[off as usize..off as usize + 8192]);
    }
    let peers = na.shared().peers.clone();
    let s = na.shared().metrics.snapshot();
    eprintln!("reads {took:?}; chunks {:?}", s.chunks);
    // holders in address order b, c, d: chunk 0 is asked of b first (late,
    // verified, then left out); chunk 1 of d first among c, d (not cached,
    // left out, c serves it): each costs one read, then c serves the rest
    let slow = took
        .iter()
        .filter(|d| **d >= Duration::from_millis(300))
        .count();
    assert_eq!(slow, 1, "b was asked more than once: {took:?}");
    assert_eq!(s.chunks.not_cached, 1, "d asked again: {:?}", s.chunks);
    assert!(peers.is_quarantined(nb.addr()) && peers.is_quarantined(nd.addr()));
    assert!(
        !peers.is_quarantined(nc.addr()),
        "the honest holder was left out"
    );
    took.sort();
    assert!(took[6] < Duration::from_millis(150), "{took:?}");
    assert_eq!(disk.snapshot().spinups, 0);
    for n in [na, nb, nc, nd] {
        n.shutdown();
    }
}
