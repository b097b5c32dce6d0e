//! Remote chunk fetches against local reads that bypass the page cache, on
//! the same file in one run (`fallow peer bench`): is a peer's memory
//! over the network faster than the local disk? SARD's Figure 6
//! argues a remote memory fetch over gigabit Ethernet beats a disk access;
//! this measures it on the machine at hand.
//!
//! Three passes over every chunk of the file: remote one chunk at a time
//! (latency), remote with several connections in flight (throughput), and
//! local `O_DIRECT` reads of chunk size, one at a time. Every remote chunk
//! is verified against the local manifest.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::manifest::Manifest;
use crate::proto::{Request, Response};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One pass's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Pass {
    /// What was measured.
    pub name: String,
    /// Reads or fetches.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Wall time, s.
    pub seconds: f64,
    /// Throughput, MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// Median latency per operation, µs.
    pub p50_us: u64,
    /// Mean latency, µs.
    pub mean_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: u64,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The file's wire name.
    pub file: String,
    /// Its size, bytes.
    pub size_bytes: u64,
    /// Chunk size, bytes.
    pub chunk_bytes: u32,
    /// The peer.
    pub peer: SocketAddr,
    /// Remote, one at a time.
    pub remote_serial: Pass,
    /// Remote, `connections` in flight.
    pub remote_parallel: Pass,
    /// Local O_DIRECT, one at a time.
    pub local_direct: Pass,
    /// Connections of the parallel pass.
    pub connections: usize,
    /// Local median latency over remote median latency (> 1: remote is
    /// faster).
    pub latency_ratio: f64,
    /// Remote parallel throughput over local throughput (> 1: remote is
    /// faster).
    pub throughput_ratio: f64,
}

fn pass(name: &str, h: &Histogram<u64>, bytes: u64, took: Duration) -> Pass {
    let s = took.as_secs_f64().max(1e-9);
    Pass {
        name: name.into(),
        ops: h.len(),
        bytes,
        seconds: s,
        mb_per_s: bytes as f64 / s / 1e6,
        p50_us: h.value_at_quantile(0.5),
        mean_us: h.mean(),
        p99_us: h.value_at_quantile(0.99),
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")
}

/// Measure `wire` (indexed in `index`) against `peer`, `repeat` passes each.
pub fn run(
    index: &Index,
    wire: &str,
    peer: SocketAddr,
    connections: usize,
    repeat: u32,
    timeout: Duration,
    transport: crate::transport::Transport,
) -> Result<BenchReport> {
    let entry = index
        .get(wire)
        .ok_or_else(|| Error::invalid("--file", format!("`{wire}` is not an indexed file")))?;
    let m = Arc::new(entry.manifest.clone());
    if m.chunk_count() == 0 {
        return Err(Error::invalid("--file", format!("`{wire}` is empty")));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Net {
            what: "tokio runtime".into(),
            source: e,
        })?;
    let client = Arc::new(Client::new(timeout, transport));
    let wire_arc: Arc<str> = Arc::from(wire);
    let fetch =
        |client: Arc<Client>, i: u32| fetch_one(client, peer, wire_arc.clone(), m.clone(), i);
    let n = m.chunk_count();
    // serial
    let mut h = hist();
    let mut bytes = 0;
    let t = Instant::now();
    rt.block_on(async {
        for _ in 0..repeat {
            for i in 0..n {
                let (d, b) = fetch(client.clone(), i).await?;
                h.saturating_record(d.as_micros() as u64);
                bytes += b;
            }
        }
        Ok::<_, Error>(())
    })?;
    let remote_serial = pass("remote, 1 in flight", &h, bytes, t.elapsed());
    // parallel: `connections` workers over a shared counter
    let connections = connections.max(1);
    let t = Instant::now();
    let results = rt.block_on(async {
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let total = u64::from(n) * u64::from(repeat);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..connections {
            let next = next.clone();
            let client = client.clone();
            let (wire, m) = (wire_arc.clone(), m.clone());
            set.spawn(async move {
                let mut out = Vec::new();
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if k >= total {
                        return Ok::<_, Error>(out);
                    }
                    let i = (k % u64::from(n)) as u32;
                    out.push(fetch_one(client.clone(), peer, wire.clone(), m.clone(), i).await?);
                }
            });
        }
        let mut all = Vec::new();
        while let Some(r) = set.join_next().await {
            all.extend(r.map_err(|e| Error::Protocol(e.to_string()))??);
        }
        Ok::<_, Error>(all)
    });
    let took = t.elapsed();
    let results = results?;
    let mut h = hist();
    for (d, _) in &results {
        h.saturating_record(d.as_micros() as u64);
    }
    let bytes = results.iter().map(|r| r.1).sum();
    let remote_parallel = pass(&format!("remote, {connections} in flight"), &h, bytes, took);
    // local O_DIRECT: aligned buffer carved out of a larger allocation
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&entry.path)
        .map_err(|e| Error::io(&entry.path, e))?;
    let align = 4096;
    let chunk = m.chunk_bytes as usize;
    let mut raw = vec![0u8; chunk + align];
    let skip = (align - raw.as_ptr() as usize % align) % align;
    let buf = &mut raw[skip..skip + chunk];
    let mut h = hist();
    let mut bytes = 0;
    let t = Instant::now();
    for _ in 0..repeat {
        for i in 0..n {
            let r = m.chunk_range(i);
            let t1 = Instant::now();
            let got = read_direct(&f, r.start, buf).map_err(|e| Error::io(&entry.path, e))?;
            h.saturating_record(t1.elapsed().as_micros() as u64);
            if !m.verify(i, &buf[..got]) {
                return Err(Error::invalid(
                    "--file",
                    format!("{}: changed since it was hashed", entry.path.display()),
                ));
            }
            bytes += got as u64;
        }
    }
    let local_direct = pass("local O_DIRECT, 1 in flight", &h, bytes, t.elapsed());
    Ok(BenchReport {
        file: wire.into(),
        size_bytes: m.size_bytes,
        chunk_bytes: m.chunk_bytes,
        peer,
        latency_ratio: local_direct.p50_us as f64 / remote_serial.p50_us.max(1) as f64,
        throughput_ratio: remote_parallel.mb_per_s / local_direct.mb_per_s.max(1e-9),
        remote_serial,
        remote_parallel,
        local_direct,
        connections,
    })
}

/// Fetch and verify chunk `i`: its latency and size.
async fn fetch_one(
    client: Arc<Client>,
    peer: SocketAddr,
    wire: Arc<str>,
    m: Arc<Manifest>,
    i: u32,
) -> Result<(Duration, u64)> {
    let req = Request::Chunk {
        wire: wire.to_string(),
        root: m.root,
        index: i,
    };
    let t = Instant::now();
    match client.call(peer, &req).await? {
        Response::Chunk(d) if m.verify(i, &d) => Ok((t.elapsed(), d.len() as u64)),
        Response::Chunk(_) => Err(Error::Peer {
            addr: peer,
            message: format!("chunk {i} does not match the manifest"),
        }),
        other => Err(Error::Peer {
            addr: peer,
            message: format!("chunk {i}: {other:?} (is the file in its page cache?)"),
        }),
    }
}

/// One O_DIRECT read of a whole aligned buffer (shorter at the end of the
/// file).
fn read_direct(f: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
