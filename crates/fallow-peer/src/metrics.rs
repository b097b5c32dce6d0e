//! Counters of one node: the overlay's reads by where they were served
//! (page cache, local disk, a peer, or the local disk after a failed remote
//! attempt) with bytes and latency, the chunk-level outcome of every remote
//! attempt, and what this node served to others. Snapshots are JSON
//! (`fallow peer status`).

use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Where an overlay read was served from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Served {
    /// The local page cache (the disk was not touched).
    PageCache,
    /// The local disk, which was spinning.
    Local,
    /// Peers, every chunk verified against the local manifest.
    Remote,
    /// The local disk after the remote path failed or had no peer: it
    /// spins up if asleep.
    Fallback(Fallback),
}

/// Why a read that could have gone to a peer went to the local disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// No live peer advertises the file with the same manifest root.
    NoPeer,
    /// The file is not indexed locally (or changed since): nothing to
    /// verify a peer's bytes against.
    NotIndexed,
    /// Some chunk came back from every peer tried with a wrong hash.
    Mismatch,
    /// Some chunk timed out or its peer failed (closed the connection,
    /// crashed).
    PeerFailed,
    /// Every peer tried no longer had the chunk cached or refused it.
    NotServed,
}

/// One latency distribution, µs.
#[derive(Debug)]
struct Latency(Mutex<Histogram<u64>>);

impl Latency {
    fn new() -> Latency {
        Latency(Mutex::new(
            Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("valid histogram bounds"),
        ))
    }
    fn record(&self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, 3_600_000_000);
        self.0.lock().expect("histogram lock").saturating_record(us);
    }
    fn summary(&self) -> LatencySummary {
        let h = self.0.lock().expect("histogram lock");
        LatencySummary {
            count: h.len(),
            mean_us: if h.is_empty() { 0.0 } else { h.mean() },
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        }
    }
}

/// Summary of a latency distribution.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Observations.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
}

#[derive(Debug)]
struct Class {
    reads: AtomicU64,
    bytes: AtomicU64,
    latency: Latency,
}

impl Class {
    fn new() -> Class {
        Class {
            reads: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            latency: Latency::new(),
        }
    }
    fn summary(&self) -> ClassSummary {
        ClassSummary {
            reads: self.reads.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            latency: self.latency.summary(),
        }
    }
}

/// Reads of one class.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ClassSummary {
    /// Reads.
    pub reads: u64,
    /// Bytes returned.
    pub bytes: u64,
    /// Latency of the whole read.
    pub latency: LatencySummary,
}

/// Outcome of one remote chunk attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Arrived and matched the manifest.
    Verified,
    /// Arrived with a wrong hash (a tampering or broken peer).
    Mismatch,
    /// The peer no longer holds it in memory.
    NotCached,
    /// The peer refused (not whitelisted there, different contents).
    Refused,
    /// No answer in time.
    Timeout,
    /// Connection failed or broke.
    Error,
}

/// All counters of a node.
#[derive(Debug)]
pub struct Metrics {
    page_cache: Class,
    local: Class,
    remote: Class,
    fallback: Class,
    fallback_why: [AtomicU64; 5],
    attempts: [AtomicU64; 6],
    chunk_fetch: Latency,
    ahead_started: AtomicU64,
    ahead_used: AtomicU64,
    served_chunks: AtomicU64,
    served_bytes: AtomicU64,
    served_not_cached: AtomicU64,
    served_refused: AtomicU64,
    served_adverts: AtomicU64,
    refused_conns: AtomicU64,
    gossip_dropped: AtomicU64,
    key_reload_refused: std::sync::Mutex<Option<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn fallback_slot(f: Fallback) -> usize {
    match f {
        Fallback::NoPeer => 0,
        Fallback::NotIndexed => 1,
        Fallback::Mismatch => 2,
        Fallback::PeerFailed => 3,
        Fallback::NotServed => 4,
    }
}

fn attempt_slot(a: Attempt) -> usize {
    match a {
        Attempt::Verified => 0,
        Attempt::Mismatch => 1,
        Attempt::NotCached => 2,
        Attempt::Refused => 3,
        Attempt::Timeout => 4,
        Attempt::Error => 5,
    }
}

impl Metrics {
    /// All zero.
    pub fn new() -> Metrics {
        Metrics {
            page_cache: Class::new(),
            local: Class::new(),
            remote: Class::new(),
            fallback: Class::new(),
            fallback_why: Default::default(),
            attempts: Default::default(),
            chunk_fetch: Latency::new(),
            ahead_started: AtomicU64::new(0),
            ahead_used: AtomicU64::new(0),
            served_chunks: AtomicU64::new(0),
            served_bytes: AtomicU64::new(0),
            served_not_cached: AtomicU64::new(0),
            served_refused: AtomicU64::new(0),
            served_adverts: AtomicU64::new(0),
            refused_conns: AtomicU64::new(0),
            gossip_dropped: AtomicU64::new(0),
            key_reload_refused: std::sync::Mutex::new(None),
        }
    }

    /// An overlay read was served.
    pub fn read(&self, served: Served, bytes: usize, took: Duration) {
        let class = match served {
            Served::PageCache => &self.page_cache,
            Served::Local => &self.local,
            Served::Remote => &self.remote,
            Served::Fallback(why) => {
                self.fallback_why[fallback_slot(why)].fetch_add(1, Ordering::Relaxed);
                &self.fallback
            }
        };
        class.reads.fetch_add(1, Ordering::Relaxed);
        class.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        class.latency.record(took);
    }

    /// A remote chunk attempt ended.
    pub fn attempt(&self, a: Attempt, took: Duration) {
        self.attempts[attempt_slot(a)].fetch_add(1, Ordering::Relaxed);
        if a == Attempt::Verified {
            self.chunk_fetch.record(took);
        }
    }

    /// A chunk's fetch started ahead of a sequential reader.
    pub fn fetched_ahead(&self) {
        self.ahead_started.fetch_add(1, Ordering::Relaxed);
    }

    /// A read used a chunk fetched ahead.
    pub fn used_ahead(&self) {
        self.ahead_used.fetch_add(1, Ordering::Relaxed);
    }

    /// This node served a chunk of `bytes` to a peer.
    pub fn served_chunk(&self, bytes: usize) {
        self.served_chunks.fetch_add(1, Ordering::Relaxed);
        self.served_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// This node answered "not cached".
    pub fn served_not_cached(&self) {
        self.served_not_cached.fetch_add(1, Ordering::Relaxed);
    }

    /// This node refused a request.
    pub fn served_refused(&self) {
        self.served_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// This node sent its advertisement.
    pub fn served_adverts(&self) {
        self.served_adverts.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection was refused: over a cap, a failed or slow TLS
    /// handshake, a certificate not naming its source.
    pub fn refused_conn(&self) {
        self.refused_conns.fetch_add(1, Ordering::Relaxed);
    }

    /// A gossip datagram was dropped: not sealed with a fleet key, stale,
    /// or naming a forbidden or forged identity.
    pub fn gossip_dropped(&self) {
        self.gossip_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// A changed gossip key file was not loaded (the keys in use stay):
    /// why, naming the path; `None` once a reload succeeds.
    pub fn key_reload(&self, refused: Option<String>) {
        *self.key_reload_refused.lock().expect("metrics lock") = refused;
    }

    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let a = |x: Attempt| self.attempts[attempt_slot(x)].load(Ordering::Relaxed);
        let f = |x: Fallback| self.fallback_why[fallback_slot(x)].load(Ordering::Relaxed);
        MetricsSnapshot {
            reads: Reads {
                page_cache: self.page_cache.summary(),
                local: self.local.summary(),
                remote: self.remote.summary(),
                fallback: self.fallback.summary(),
            },
            fallback_reasons: FallbackReasons {
                no_peer: f(Fallback::NoPeer),
                not_indexed: f(Fallback::NotIndexed),
                mismatch: f(Fallback::Mismatch),
                peer_failed: f(Fallback::PeerFailed),
                not_served: f(Fallback::NotServed),
            },
            chunks: Chunks {
                verified: a(Attempt::Verified),
                mismatch: a(Attempt::Mismatch),
                not_cached: a(Attempt::NotCached),
                refused: a(Attempt::Refused),
                timeout: a(Attempt::Timeout),
                error: a(Attempt::Error),
                fetch_latency: self.chunk_fetch.summary(),
                ahead: self.ahead_started.load(Ordering::Relaxed),
                ahead_used: self.ahead_used.load(Ordering::Relaxed),
            },
            served: ServedToPeers {
                chunks: self.served_chunks.load(Ordering::Relaxed),
                bytes: self.served_bytes.load(Ordering::Relaxed),
                not_cached: self.served_not_cached.load(Ordering::Relaxed),
                refused: self.served_refused.load(Ordering::Relaxed),
                adverts: self.served_adverts.load(Ordering::Relaxed),
                refused_conns: self.refused_conns.load(Ordering::Relaxed),
                gossip_dropped: self.gossip_dropped.load(Ordering::Relaxed),
            },
            key_reload_refused: self
                .key_reload_refused
                .lock()
                .expect("metrics lock")
                .clone(),
        }
    }
}

/// Overlay reads by class.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Reads {
    /// From the local page cache.
    pub page_cache: ClassSummary,
    /// From the spinning local disk.
    pub local: ClassSummary,
    /// From peers, verified.
    pub remote: ClassSummary,
    /// From the local disk after the remote path failed.
    pub fallback: ClassSummary,
}

/// Fallback reads by reason.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FallbackReasons {
    /// No peer advertised the file.
    pub no_peer: u64,
    /// Not indexed locally.
    pub not_indexed: u64,
    /// A chunk failed verification at every peer tried.
    pub mismatch: u64,
    /// A peer timed out or failed.
    pub peer_failed: u64,
    /// Peers no longer had it cached or refused.
    pub not_served: u64,
}

/// Remote chunk attempts by outcome.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Chunks {
    /// Verified.
    pub verified: u64,
    /// Wrong hash: rejected.
    pub mismatch: u64,
    /// Not cached at the peer.
    pub not_cached: u64,
    /// Refused by the peer.
    pub refused: u64,
    /// Timed out.
    pub timeout: u64,
    /// Connection errors.
    pub error: u64,
    /// Latency of verified fetches (request to verified bytes).
    pub fetch_latency: LatencySummary,
    /// Fetches started ahead of a sequential reader (counted above too,
    /// by outcome).
    pub ahead: u64,
    /// Reads that used a chunk fetched ahead.
    pub ahead_used: u64,
}

/// What this node served to peers.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServedToPeers {
    /// Chunks sent.
    pub chunks: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// "Not cached" answers.
    pub not_cached: u64,
    /// Refusals.
    pub refused: u64,
    /// Advertisement lists sent.
    pub adverts: u64,
    /// Connections refused (caps, TLS, certificate not naming its source).
    pub refused_conns: u64,
    /// Gossip datagrams dropped (unsealed, stale, forbidden identities).
    pub gossip_dropped: u64,
}

/// A snapshot of [`Metrics`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricsSnapshot {
    /// Overlay reads by class.
    pub reads: Reads,
    /// Fallback reads by reason.
    pub fallback_reasons: FallbackReasons,
    /// Remote chunk attempts.
    pub chunks: Chunks,
    /// Served to peers.
    pub served: ServedToPeers,
    /// Why the last change of the gossip key file was not loaded (not
    /// owned by root or this user, writable by others, does not parse).
    pub key_reload_refused: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_class_and_reason() {
        let m = Metrics::new();
        m.read(Served::Remote, 100, Duration::from_micros(300));
        m.read(Served::Remote, 50, Duration::from_micros(100));
        m.read(
            Served::Fallback(Fallback::Mismatch),
            7,
            Duration::from_millis(200),
        );
        m.read(Served::PageCache, 1, Duration::from_micros(5));
        m.attempt(Attempt::Mismatch, Duration::from_micros(10));
        m.attempt(Attempt::Verified, Duration::from_micros(40));
        m.served_chunk(4096);
        let s = m.snapshot();
        assert_eq!((s.reads.remote.reads, s.reads.remote.bytes), (2, 150));
        // two significant digits: 300 µs within 1 %
        assert!((300..=303).contains(&s.reads.remote.latency.max_us));
        assert_eq!(s.reads.fallback.reads, 1);
        assert_eq!(s.fallback_reasons.mismatch, 1);
        assert_eq!(s.reads.local.reads, 0);
        assert_eq!((s.chunks.verified, s.chunks.mismatch), (1, 1));
        assert_eq!(s.chunks.fetch_latency.count, 1);
        assert_eq!((s.served.chunks, s.served.bytes), (1, 4096));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["reads"]["page_cache"]["reads"], 1);
    }
}
