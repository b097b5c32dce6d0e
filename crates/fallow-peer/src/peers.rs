//! What this node knows of the others: which peers are alive (from the
//! membership protocol), which files each advertises as resident in its
//! page cache (fetched over the data channel when its advertised version
//! changes), and which peers are quarantined after serving bad bytes.

use crate::manifest::Hash;
use crate::proto::Advert;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most members (peers) a node keeps: more are refused by the
/// membership's codec, and versions gossiped for more are dropped.
pub const MAX_MEMBERS: usize = 4096;

/// The most quarantined addresses remembered; when full, the soonest to
/// expire is forgotten first.
pub const MAX_QUARANTINED: usize = 4096;

/// Re-fetch a peer's list at least this often, in case a gossiped version
/// was missed.
pub const REFRESH_AFTER: Duration = Duration::from_secs(10);

/// Fetch one peer's list at most this often, whatever versions gossip
/// announces: a peer's own list changes at most once per residency tick
/// (2 s), so this costs an honest peer nothing, and bounds what a member
/// that keeps announcing new versions (or a large list) makes each reader
/// spend on it.
pub const MIN_FETCH_INTERVAL: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
struct Peer {
    /// Incarnation of the peer process (its membership identity's bump):
    /// a restarted peer starts over.
    bump: u64,
    /// Latest version heard of by gossip.
    gossip_version: u64,
    /// Version of `files`.
    fetched_version: u64,
    fetched_at: Option<Instant>,
    files: HashMap<String, Hash>,
}

/// One peer in a [`PeerTable::summary`].
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct PeerSummary {
    /// Its data address.
    pub addr: SocketAddr,
    /// Files it advertises.
    pub files: usize,
    /// Version of that list.
    pub version: u64,
    /// Quarantined for serving bad bytes or not answering.
    pub quarantined: bool,
}

/// The live peers and their advertisements.
#[derive(Debug, Default)]
pub struct PeerTable {
    peers: Mutex<HashMap<SocketAddr, Peer>>,
    /// Versions gossiped for peers not (yet) in the table: a broadcast can
    /// arrive in the same datagram as the news that its sender joined.
    pending: Mutex<HashMap<SocketAddr, u64>>,
    /// Addresses left out until the instant, by IP: a peer that lied or
    /// stalled stays out when it re-announces under a new identity or port.
    quarantine: Mutex<HashMap<std::net::IpAddr, Instant>>,
}

impl PeerTable {
    /// Empty.
    pub fn new() -> PeerTable {
        PeerTable::default()
    }

    /// The membership changed: these are the live peers (address and
    /// incarnation). Peers not listed are forgotten with their lists.
    pub fn set_members(&self, live: &[(SocketAddr, u64)]) {
        let mut peers = self.peers.lock().expect("peer table lock");
        let mut pending = self.pending.lock().expect("pending lock");
        peers.retain(|addr, p| live.iter().any(|(a, b)| a == addr && *b == p.bump));
        for (addr, bump) in live.iter().take(MAX_MEMBERS) {
            peers.entry(*addr).or_insert_with(|| Peer {
                bump: *bump,
                gossip_version: pending.remove(addr).unwrap_or(0),
                ..Peer::default()
            });
        }
    }

    /// Gossip says `addr`'s list is at `version`.
    pub fn note_version(&self, addr: SocketAddr, version: u64) {
        match self.peers.lock().expect("peer table lock").get_mut(&addr) {
            Some(p) => p.gossip_version = p.gossip_version.max(version),
            None => {
                let mut pending = self.pending.lock().expect("pending lock");
                if pending.len() >= MAX_MEMBERS && !pending.contains_key(&addr) {
                    return;
                }
                let v = pending.entry(addr).or_insert(0);
                *v = (*v).max(version);
            }
        }
    }

    /// Peers whose list should be fetched now, with the version held.
    pub fn due(&self, now: Instant) -> Vec<(SocketAddr, u64)> {
        let peers = self.peers.lock().expect("peer table lock");
        peers
            .iter()
            .filter(|(_, p)| match p.fetched_at {
                None => true,
                Some(t) => {
                    let since = now.saturating_duration_since(t);
                    since >= REFRESH_AFTER
                        || (p.gossip_version > p.fetched_version && since >= MIN_FETCH_INTERVAL)
                }
            })
            .map(|(a, p)| (*a, p.fetched_version))
            .collect()
    }

    /// A fetched list (or `None`: unchanged since the version held). Only
    /// the entries `useful` keeps are stored — files this node indexed
    /// with the same root, the only ones it could ever ask for — so a
    /// peer's huge list costs this node no more than its own index.
    pub fn set_adverts(
        &self,
        addr: SocketAddr,
        version: u64,
        files: Option<Vec<Advert>>,
        useful: &dyn Fn(&str, &Hash) -> bool,
    ) {
        let mut peers = self.peers.lock().expect("peer table lock");
        let Some(p) = peers.get_mut(&addr) else {
            return; // it left meanwhile
        };
        if let Some(files) = files {
            p.files = files
                .into_iter()
                .filter(|a| useful(&a.wire, &a.root))
                .map(|a| (a.wire, a.root))
                .collect();
        }
        // the peer itself is the authority on its version: a higher one
        // heard in gossip (forged, or from before a restart) is forgotten,
        // so it cannot keep this node fetching
        p.fetched_version = version;
        p.gossip_version = version;
        p.fetched_at = Some(Instant::now());
    }

    /// A fetch failed: try again later rather than at once. The last list
    /// fetched is kept: a holder unreachable for a while (a flooded data
    /// port) still serves what it advertised, and a holder that fails a
    /// read is quarantined by the overlay instead.
    pub fn fetch_failed(&self, addr: SocketAddr) {
        if let Some(p) = self.peers.lock().expect("peer table lock").get_mut(&addr) {
            // counts as fetched now, so the next try waits REFRESH_AFTER
            // unless gossip announces a newer version
            p.fetched_at = Some(Instant::now());
        }
    }

    /// Live, unquarantined peers advertising `wire` with manifest `root`,
    /// in address order.
    pub fn holders(&self, wire: &str, root: &Hash) -> Vec<SocketAddr> {
        let now = Instant::now();
        let peers = self.peers.lock().expect("peer table lock");
        let q = self.quarantine.lock().expect("quarantine lock");
        let mut v: Vec<SocketAddr> = peers
            .iter()
            .filter(|(a, _)| q.get(&a.ip()).is_none_or(|t| *t <= now))
            .filter(|(_, p)| p.files.get(wire) == Some(root))
            .map(|(a, _)| *a)
            .collect();
        v.sort();
        v
    }

    /// Stop asking `addr`'s IP address for chunks for `dur` (it sent bytes
    /// that did not match the manifest, or did not answer in time). Kept
    /// by address, not by member, so a new identity does not reset it.
    pub fn quarantine(&self, addr: SocketAddr, dur: Duration) {
        let now = Instant::now();
        let until = now + dur;
        let mut q = self.quarantine.lock().expect("quarantine lock");
        q.retain(|_, t| *t > now);
        if q.len() >= MAX_QUARANTINED && !q.contains_key(&addr.ip()) {
            if let Some(first) = q.iter().min_by_key(|(_, t)| **t).map(|(ip, _)| *ip) {
                q.remove(&first);
            }
        }
        let t = q.entry(addr.ip()).or_insert(until);
        *t = (*t).max(until);
    }

    /// True while `addr`'s IP address is quarantined.
    pub fn is_quarantined(&self, addr: SocketAddr) -> bool {
        let q = self.quarantine.lock().expect("quarantine lock");
        q.get(&addr.ip()).is_some_and(|t| *t > Instant::now())
    }

    /// Every known peer, by address.
    pub fn summary(&self) -> Vec<PeerSummary> {
        let peers = self.peers.lock().expect("peer table lock");
        let mut v: Vec<PeerSummary> = peers
            .iter()
            .map(|(a, p)| PeerSummary {
                addr: *a,
                files: p.files.len(),
                version: p.fetched_version,
                quarantined: self.is_quarantined(*a),
            })
            .collect();
        v.sort_by_key(|p| p.addr);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(n: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, n], 7946))
    }

    fn adv(wire: &str, root: u8) -> Advert {
        Advert {
            wire: wire.into(),
            root: [root; 32],
        }
    }

    #[test]
    fn holders_follow_membership_versions_and_quarantine() {
        let t = PeerTable::new();
        // a version gossiped before its sender is known is kept for it
        t.note_version(addr(2), 4);
        t.set_members(&[(addr(2), 1), (addr(3), 1)]);
        assert_eq!(t.due(Instant::now()).len(), 2, "never fetched");
        let all = |_: &str, _: &Hash| true;
        t.set_adverts(addr(2), 3, Some(vec![]), &all);
        let mut due = t.due(Instant::now() + MIN_FETCH_INTERVAL);
        due.sort();
        // 2 answered version 3 itself: the gossiped 4 is forgotten
        assert_eq!(due, [(addr(3), 0)]);
        t.note_version(addr(2), 4);
        let mut due = t.due(Instant::now() + MIN_FETCH_INTERVAL);
        due.sort();
        assert_eq!(due, [(addr(2), 3), (addr(3), 0)], "version 4 was gossiped");
        t.set_adverts(
            addr(2),
            5,
            Some(vec![adv("app/a", 1), adv("app/b", 2)]),
            &all,
        );
        t.set_adverts(
            addr(3),
            9,
            Some(vec![adv("app/a", 1), adv("app/b", 3)]),
            &all,
        );
        assert!(t.due(Instant::now()).is_empty());
        assert_eq!(t.holders("app/a", &[1; 32]), [addr(2), addr(3)]);
        assert_eq!(t.holders("app/b", &[2; 32]), [addr(2)], "same root only");
        assert!(t.holders("app/c", &[1; 32]).is_empty());
        t.note_version(addr(3), 10);
        assert!(t.due(Instant::now()).is_empty(), "fetched under 2 s ago");
        assert_eq!(t.due(Instant::now() + MIN_FETCH_INTERVAL), [(addr(3), 9)]);
        t.quarantine(addr(2), Duration::from_secs(60));
        assert_eq!(t.holders("app/a", &[1; 32]), [addr(3)]);
        // 3 crashed and came back as a new incarnation: its list is gone
        t.set_members(&[(addr(2), 1), (addr(3), 2)]);
        assert!(t.holders("app/a", &[1; 32]).is_empty());
        // 2 re-announces on another port: the quarantine follows its IP
        let other_port = SocketAddr::from(([10, 0, 0, 2], 9000));
        t.set_members(&[(other_port, 7)]);
        t.set_adverts(other_port, 1, Some(vec![adv("app/a", 1)]), &all);
        assert!(t.holders("app/a", &[1; 32]).is_empty(), "still quarantined");
        assert!(t.summary()[0].quarantined);
        t.set_members(&[]);
        assert!(t.summary().is_empty());
        assert!(t.due(Instant::now() + REFRESH_AFTER).is_empty());
        // only files the reader indexed are kept from a peer's list
        t.set_members(&[(addr(4), 1)]);
        let only_a = |w: &str, r: &Hash| w == "app/a" && r == &[1; 32];
        let huge: Vec<Advert> = (0..10_000).map(|k| adv(&format!("junk/{k}"), 1)).collect();
        t.set_adverts(
            addr(4),
            1,
            Some([huge, vec![adv("app/a", 1)]].concat()),
            &only_a,
        );
        assert_eq!(t.summary()[0].files, 1);
        assert_eq!(t.holders("app/a", &[1; 32]), [addr(4)]);
    }

    /// A member gossiping ever larger versions for another (or forging
    /// one huge version) makes a reader fetch that peer's list at most
    /// once per 2 s, and once it answers, a forged version is forgotten; a
    /// failed fetch keeps the last good list.
    #[test]
    fn forged_versions_cost_one_fetch_per_interval_and_failures_keep_the_list() {
        let t = PeerTable::new();
        let all = |_: &str, _: &Hash| true;
        t.set_members(&[(addr(2), 1)]);
        t.set_adverts(addr(2), 5, Some(vec![adv("app/a", 1)]), &all);
        let now = Instant::now();
        // an attacker announces u64::MAX for 2, 20 times a second for 10 s
        let mut fetches = 0;
        for k in 0..200u32 {
            t.note_version(addr(2), u64::MAX - u64::from(k % 2));
            let at = now + Duration::from_millis(50) * k;
            if t.due(at) == [(addr(2), 5)] {
                fetches += 1;
                // 2 answers its real version (unchanged)
                let mut peers = t.peers.lock().unwrap();
                let p = peers.get_mut(&addr(2)).unwrap();
                p.fetched_version = 5;
                p.gossip_version = 5;
                p.fetched_at = Some(at);
            }
        }
        // 0–9.95 s at one fetch per 2 s after the last: at 2, 4, 6 and 8 s
        // (instead of 200, one per forged announcement)
        assert_eq!(fetches, 4);
        // after the attacker stops, the forged version is forgotten
        t.set_adverts(addr(2), 5, None, &all);
        assert!(t.due(Instant::now() + MIN_FETCH_INTERVAL).is_empty());
        // 2 unreachable: its list stays, and is asked again after 10 s
        t.fetch_failed(addr(2));
        assert_eq!(t.holders("app/a", &[1; 32]), [addr(2)]);
        assert!(t.due(Instant::now() + MIN_FETCH_INTERVAL).is_empty());
        assert_eq!(t.due(Instant::now() + REFRESH_AFTER).len(), 1);
    }
}
