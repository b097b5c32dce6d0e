//! The read path of the overlay, apart from FUSE so it can be tested
//! without a mount. For each read (SARD §III-E's heuristics):
//!
//! 1. the local page cache holds it → return it (the disk is not touched);
//! 2. the local disk spins → read it locally;
//! 3. the disk sleeps and live peers advertise the file with the local
//!    manifest's root → fetch the chunks the read touches from them (in
//!    parallel, each chunk from the next peer in turn), verify every chunk
//!    against the local manifest, return the bytes;
//! 4. otherwise — no peer, a hash mismatch at every peer tried, a timeout,
//!    a peer that died mid-transfer, a file changed since it was hashed —
//!    read locally, spinning the disk up. A read never fails because of a
//!    peer.
//!
//! A peer that sent bytes that fail verification is quarantined for a
//! while (`--quarantine`), and one that did not answer in time for
//! [`TIMEOUT_QUARANTINE`], as is one that answers "not cached" or refuses a
//! chunk of a file it advertises, or answers late ([`LATE_SHARE`] of the
//! deadline): its chunks are not asked for again until then,
//! by IP address, whatever identity it re-announces under. The remote part
//! of a read has one deadline (the client's timeout), and each chunk is
//! asked of at most [`HOLDERS_PER_CHUNK`] holders, so a fleet of stalling
//! or lying peers costs one read at most one deadline before the disk.

use crate::client::CallError;
use crate::disk::Disk;
use crate::index::Stamp;
use crate::metrics::{Attempt, Fallback, Served};
use crate::node::Shared;
use crate::proto::{Request, Response};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Holders asked for one chunk before giving up on peers.
pub const HOLDERS_PER_CHUNK: usize = 2;

/// How long a peer that did not answer in time is left out; also one that
/// answered "not cached" or refused a chunk of a file it advertises, or
/// answered later than [`LATE_SHARE`] of the read's deadline.
pub const TIMEOUT_QUARANTINE: Duration = Duration::from_secs(10);

/// An answer after this share of the client's timeout is late: it is used
/// if right, but its holder is left out like one that timed out, so a
/// holder answering just before the deadline costs one read, not every
/// read.
pub const LATE_SHARE: f64 = 0.5;

/// Chunks fetched ahead of a sequential reader: while the application
/// takes one chunk through FUSE and asks for the next, the next two are
/// already on their way (a read's own fetch is a TLS round trip, two to
/// three times a local read: docs/peer.md "Latency through the overlay").
pub const READAHEAD_CHUNKS: u32 = 2;

/// At most this many chunks fetched ahead and not yet read, over all files
/// of a mount (the memory they hold: this many chunks).
const READAHEAD_HELD: usize = 8;

/// A chunk fetched ahead and not read within this is dropped.
const READAHEAD_KEEP: Duration = Duration::from_secs(2);

/// Files whose last read's end is remembered (to tell a sequential reader).
const SEQUENTIAL_FILES: usize = 256;

/// A chunk fetched ahead: which file contents, which chunk.
type AheadKey = (String, [u8; 32], u32);

/// A chunk fetched ahead: when it was asked for, and the fetch's task.
type Ahead = (Instant, tokio::task::JoinHandle<Result<Vec<u8>, Fallback>>);

/// Chunks on their way or fetched for a sequential reader, and where each
/// file's last read ended.
#[derive(Debug, Default)]
struct Readahead {
    chunks: HashMap<AheadKey, Ahead>,
    last_end: HashMap<PathBuf, u64>,
}

impl Readahead {
    /// Whether a read at `offset` continues the last read of `rel` or
    /// starts the file (as the kernel's own readahead assumes of a read at
    /// 0); notes where this one ends.
    fn sequential(&mut self, rel: &Path, offset: u64, end: u64) -> bool {
        if self.last_end.len() >= SEQUENTIAL_FILES && !self.last_end.contains_key(rel) {
            self.last_end.clear();
        }
        self.last_end.insert(rel.to_path_buf(), end) == Some(offset) || offset == 0
    }

    /// Drop the chunks fetched ahead that were not read in time (their
    /// fetches run to their end unread).
    fn drop_stale(&mut self) {
        self.chunks
            .retain(|_, (at, _)| at.elapsed() < READAHEAD_KEEP);
    }
}

/// The overlay of one indexed root.
#[derive(Debug)]
pub struct Overlay {
    shared: Arc<Shared>,
    disk: Arc<Disk>,
    root: usize,
    source: PathBuf,
    /// How long a peer that sent bad bytes is left out.
    pub quarantine: Duration,
    ahead: Mutex<Readahead>,
}

impl Overlay {
    /// The overlay of root number `root` of the node's index; the node must
    /// have a disk.
    pub fn new(shared: Arc<Shared>, root: usize, quarantine: Duration) -> Option<Overlay> {
        let disk = shared.disk.clone()?;
        let source = shared.index().roots.get(root)?.dir.clone();
        Some(Overlay {
            shared,
            disk,
            root,
            source,
            quarantine,
            ahead: Mutex::default(),
        })
    }

    /// The directory overlaid.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The disk.
    pub fn disk(&self) -> &Arc<Disk> {
        &self.disk
    }

    /// Read up to `size` bytes at `offset` of `file`, the local file at
    /// `rel` under the source, and say where they came from.
    pub async fn read(
        &self,
        file: Arc<File>,
        rel: &Path,
        offset: u64,
        size: u32,
    ) -> io::Result<(Vec<u8>, Served)> {
        let t = Instant::now();
        let meta = file.metadata()?;
        let len = (size as u64).min(meta.len().saturating_sub(offset)) as usize;
        if len == 0 {
            return Ok((Vec::new(), Served::PageCache));
        }
        // on this thread: `read_cached` never waits for the disk (residency
        // by `cachestat`, then `RWF_NOWAIT`), and handing it to a blocking
        // thread and back cost two thread wake-ups per read, each a chance
        // to wait for a core on a loaded machine (docs/peer.md, "Latency
        // through the overlay")
        let sequential =
            self.ahead
                .lock()
                .expect("readahead lock")
                .sequential(rel, offset, offset + len as u64);
        let mut buf = vec![0u8; len];
        let n = crate::cache::read_cached(&file, offset, &mut buf)?;
        let served = if n == len {
            Served::PageCache
        } else if !self.disk.is_asleep() {
            buf = self.local(file, offset, len).await?;
            Served::Local
        } else {
            match self.remote(rel, &meta, offset, len, sequential).await {
                Ok(b) => {
                    self.disk.note_read_elsewhere();
                    buf = b;
                    Served::Remote
                }
                Err(why) => {
                    buf = self.local(file, offset, len).await?;
                    Served::Fallback(why)
                }
            }
        };
        self.shared.metrics.read(served, buf.len(), t.elapsed());
        Ok((buf, served))
    }

    /// Read from the local disk (waiting for a spin-up if it sleeps).
    async fn local(&self, file: Arc<File>, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let disk = self.disk.clone();
        tokio::task::spawn_blocking(move || {
            disk.begin_local_read();
            let mut b = vec![0u8; len];
            let r = read_at_most(&file, offset, &mut b);
            disk.end_local_read();
            let n = r?;
            b.truncate(n);
            Ok(b)
        })
        .await
        .map_err(io::Error::other)?
    }

    /// Fetch and verify `len` bytes at `offset` from peers (a read
    /// within one chunk of a `sequential` reader also starts fetching the
    /// chunks after it).
    async fn remote(
        &self,
        rel: &Path,
        meta: &std::fs::Metadata,
        offset: u64,
        len: usize,
        sequential: bool,
    ) -> Result<Vec<u8>, Fallback> {
        let idx = self.shared.index();
        let wire = idx.wire_of(self.root, rel).ok_or(Fallback::NotIndexed)?;
        let entry = idx.get(&wire).ok_or(Fallback::NotIndexed)?;
        // the manifest is only a promise about the bytes it was made from
        if Stamp::of(meta) != entry.stamp {
            return Err(Fallback::NotIndexed);
        }
        let holders = self.shared.peers.holders(&wire, &entry.manifest.root);
        if holders.is_empty() {
            return Err(Fallback::NoPeer);
        }
        let chunks = entry.manifest.chunks_for(offset, len as u64);
        // one deadline over every chunk and holder of this read
        let deadline = tokio::time::Instant::now() + self.shared.client.timeout;
        if chunks.len() == 1 {
            // one chunk (a read within a chunk: the kernel's 128 KiB reads
            // of a file with 128 KiB chunks): fetched in this task, not a
            // spawned one, which saves a hand-off there and back
            let i = chunks.start;
            let root = entry.manifest.root;
            let fetched_ahead =
                self.ahead
                    .lock()
                    .expect("readahead lock")
                    .chunks
                    .remove(&(wire.clone(), root, i));
            if sequential {
                let count = entry.manifest.chunk_count();
                self.read_ahead(&idx, &wire, root, i, count, &holders);
            }
            // a chunk fetched ahead was verified like any other; one that
            // failed is asked for again here, under this read's deadline
            let ahead = match fetched_ahead {
                Some((_, fetch)) => tokio::time::timeout_at(deadline, fetch)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .and_then(Result::ok),
                None => None,
            };
            let mut data = match ahead {
                Some(data) => {
                    self.shared.metrics.used_ahead();
                    data
                }
                None => {
                    fetch_chunk(
                        &self.shared,
                        &idx,
                        &wire,
                        i,
                        &holders,
                        self.quarantine,
                        deadline,
                    )
                    .await?
                }
            };
            let r = entry.manifest.chunk_range(i);
            let from = (offset - r.start) as usize;
            let to = ((offset + len as u64).min(r.end) - r.start) as usize;
            if from == 0 && to == data.len() {
                return Ok(data);
            }
            data.truncate(to);
            return Ok(data.split_off(from));
        }
        let mut set = tokio::task::JoinSet::new();
        for i in chunks.clone() {
            let shared = self.shared.clone();
            let idx = idx.clone();
            let wire = wire.clone();
            let holders = holders.clone();
            let quarantine = self.quarantine;
            set.spawn(async move {
                let r = fetch_chunk(&shared, &idx, &wire, i, &holders, quarantine, deadline).await;
                (i, r)
            });
        }
        let mut got: Vec<Option<Vec<u8>>> = vec![None; chunks.len()];
        let mut worst: Option<Fallback> = None;
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((i, Ok(data))) => got[(i - chunks.start) as usize] = Some(data),
                Ok((_, Err(why))) => worst = Some(worse(worst, why)),
                Err(_) => worst = Some(worse(worst, Fallback::PeerFailed)),
            }
        }
        if let Some(why) = worst {
            return Err(why);
        }
        let mut out = Vec::with_capacity(len);
        for (k, data) in got.into_iter().enumerate() {
            let data = data.expect("every chunk fetched");
            let r = entry.manifest.chunk_range(chunks.start + k as u32);
            let from = offset.max(r.start) - r.start;
            let to = (offset + len as u64).min(r.end) - r.start;
            out.extend_from_slice(&data[from as usize..to as usize]);
        }
        Ok(out)
    }

    /// Start fetching the [`READAHEAD_CHUNKS`] chunks after chunk `i` (of
    /// `count`) that are not on their way yet, within [`READAHEAD_HELD`].
    fn read_ahead(
        &self,
        idx: &Arc<crate::index::Index>,
        wire: &str,
        root: [u8; 32],
        i: u32,
        count: u32,
        holders: &[SocketAddr],
    ) {
        let last = i
            .saturating_add(READAHEAD_CHUNKS)
            .min(count.saturating_sub(1));
        let mut ahead = self.ahead.lock().expect("readahead lock");
        ahead.drop_stale();
        for j in i + 1..=last {
            let key = (wire.to_string(), root, j);
            if ahead.chunks.contains_key(&key) || ahead.chunks.len() >= READAHEAD_HELD {
                continue;
            }
            self.shared.metrics.fetched_ahead();
            let shared = self.shared.clone();
            let idx = idx.clone();
            let wire = wire.to_string();
            let holders = holders.to_vec();
            let quarantine = self.quarantine;
            let fetch = tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + shared.client.timeout;
                fetch_chunk(&shared, &idx, &wire, j, &holders, quarantine, deadline).await
            });
            ahead.chunks.insert(key, (Instant::now(), fetch));
        }
    }
}

/// The more telling of two reasons: a mismatch (someone lied) over a failed
/// peer over a peer that merely did not serve.
fn worse(a: Option<Fallback>, b: Fallback) -> Fallback {
    let rank = |f: Fallback| match f {
        Fallback::Mismatch => 3,
        Fallback::PeerFailed => 2,
        _ => 1,
    };
    match a {
        Some(a) if rank(a) >= rank(b) => a,
        _ => b,
    }
}

/// Chunk `i` from the first holder that sends the right bytes, starting at
/// holder `i mod n` so a read's chunks spread over the holders.
async fn fetch_chunk(
    shared: &Shared,
    idx: &crate::index::Index,
    wire: &str,
    i: u32,
    holders: &[SocketAddr],
    quarantine: Duration,
    deadline: tokio::time::Instant,
) -> Result<Vec<u8>, Fallback> {
    let manifest = &idx.get(wire).ok_or(Fallback::NotIndexed)?.manifest;
    let req = Request::Chunk {
        wire: wire.to_string(),
        root: manifest.root,
        index: i,
    };
    let mut why = Fallback::NotServed;
    let n = holders.len();
    let late = shared.client.timeout.mul_f64(LATE_SHARE);
    for k in 0..n.min(HOLDERS_PER_CHUNK) {
        if tokio::time::Instant::now() >= deadline {
            break; // no time left: the next holder is not to blame
        }
        let peer = holders[(i as usize + k) % n];
        let t = Instant::now();
        let call = tokio::time::timeout_at(deadline, shared.client.call_classified(peer, &req))
            .await
            .unwrap_or_else(|_| Err((CallError::Timeout, "the read's deadline passed".into())));
        let outcome = match call {
            Ok(Response::Chunk(data)) if manifest.verify(i, &data) => {
                shared.metrics.attempt(Attempt::Verified, t.elapsed());
                if t.elapsed() > late {
                    shared.peers.quarantine(peer, TIMEOUT_QUARANTINE);
                }
                return Ok(data);
            }
            Ok(Response::Chunk(_)) => {
                shared.peers.quarantine(peer, quarantine);
                why = worse(Some(why), Fallback::Mismatch);
                Attempt::Mismatch
            }
            // it advertised this file: a broken promise costs it like a
            // timeout (an honest holder whose page was just evicted is
            // left out for a few seconds too, and re-advertises)
            Ok(Response::NotCached) => {
                shared.peers.quarantine(peer, TIMEOUT_QUARANTINE);
                Attempt::NotCached
            }
            Ok(_) => {
                shared.peers.quarantine(peer, TIMEOUT_QUARANTINE);
                Attempt::Refused
            }
            Err((kind, _)) => {
                shared.client.forget(peer);
                why = worse(Some(why), Fallback::PeerFailed);
                if kind == CallError::Timeout {
                    shared.peers.quarantine(peer, TIMEOUT_QUARANTINE);
                    Attempt::Timeout
                } else {
                    Attempt::Error
                }
            }
        };
        shared.metrics.attempt(outcome, t.elapsed());
    }
    Err(why)
}

/// `pread` until `buf` is full or the end of the file.
fn read_at_most(f: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
