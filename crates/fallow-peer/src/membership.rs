//! Full membership with `foca` (SWIM with gossip: Das, Gupta, Motivala
//! 2002), driven by one tokio task on a UDP socket. Foca does no I/O of its
//! own: the task feeds it datagrams and due timers and carries out what it
//! asks (send, schedule, notify). SWIM suits SARD's fleets of up to
//! thousands: each member probes one random member per period, detection
//! time and per-member load do not grow with the fleet, and membership
//! changes ride on the probes as gossip.
//!
//! A member is its address (the same port serves UDP gossip and the TCP
//! data channel) and an incarnation (`bump`, its start time in ns): a
//! restarted process is a new member that wins the address, and one that
//! others declared down renews itself and rejoins. Custom broadcasts carry
//! "my advertisement is at version V"; the list itself travels over the
//! data channel ([`crate::peers`]), since thousands of file names do not fit
//! a datagram.
//!
//! With fleet keys every datagram is sealed ([`crate::seal`]) and one that
//! does not open is dropped before foca sees it. Then, before foca acts on
//! a datagram: its sender's identity must be the datagram's real source
//! address; every identity in it (sender, target, each member update) must
//! pass [`AddrPolicy`] — no unspecified, multicast, broadcast or port-0
//! address, no loopback unless this node is on loopback, the same address
//! family as this node, a start time (`bump`) not in the future and an
//! incarnation at most [`MAX_INCARNATION`]; and a new member is refused once
//! [`MAX_MEMBERS`] are known. Version broadcasts are kept only for known
//! members, so the broadcast state is bounded by the membership.

use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::peers::{PeerTable, MAX_MEMBERS};
use crate::seal::Keyring;
use foca::{
    AccumulatingRuntime, BroadcastHandler, Codec, Config, Foca, Header, Invalidates, Member,
    Message, OwnedNotification, PostcardCodec, Timer,
};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// A member of the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PeerId {
    /// Gossip (UDP) and data (TCP) address.
    pub addr: SocketAddr,
    /// Incarnation: larger wins the address.
    pub bump: u64,
}

impl foca::Identity for PeerId {
    type Addr = SocketAddr;

    fn renew(&self) -> Option<Self> {
        Some(PeerId {
            addr: self.addr,
            bump: self.bump.wrapping_add(1),
        })
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        self.bump > adversary.bump
    }
}

/// "The advertisement of `addr` is at `version`."
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdvertKey {
    addr: SocketAddr,
    version: u64,
}

impl Invalidates for AdvertKey {
    fn invalidates(&self, other: &Self) -> bool {
        self.addr == other.addr && self.version >= other.version
    }
}

impl AdvertKey {
    fn encode(&self) -> Vec<u8> {
        let mut b = self.version.to_be_bytes().to_vec();
        b.extend_from_slice(self.addr.to_string().as_bytes());
        b
    }

    fn decode(data: &[u8]) -> Result<AdvertKey, BadBroadcast> {
        if data.len() < 9 {
            return Err(BadBroadcast);
        }
        let version = u64::from_be_bytes(data[..8].try_into().expect("8 bytes"));
        let addr = std::str::from_utf8(&data[8..])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(BadBroadcast)?;
        Ok(AdvertKey { addr, version })
    }
}

/// A custom broadcast that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("malformed advertisement broadcast")]
pub struct BadBroadcast;

struct Handler {
    seen: HashMap<SocketAddr, u64>,
    table: Arc<PeerTable>,
    known: Known,
}

impl BroadcastHandler<PeerId> for Handler {
    type Key = AdvertKey;
    type Error = BadBroadcast;

    fn receive_item(
        &mut self,
        data: &[u8],
        sender: Option<&PeerId>,
    ) -> Result<Option<AdvertKey>, BadBroadcast> {
        let key = AdvertKey::decode(data)?;
        // versions of strangers are neither kept nor relayed
        if !self
            .known
            .read()
            .expect("known lock")
            .contains_key(&key.addr)
        {
            return Ok(None);
        }
        // only a member speaks for its own list: a version relayed or
        // forged by another is neither kept nor relayed (`None`: this
        // node's own, added locally)
        if sender.is_some_and(|s| s.addr != key.addr) {
            return Ok(None);
        }
        if self.seen.len() >= MAX_MEMBERS && !self.seen.contains_key(&key.addr) {
            self.seen
                .retain(|a, _| self.known.read().expect("known lock").contains_key(a));
        }
        let seen = self.seen.entry(key.addr).or_insert(0);
        if key.version <= *seen {
            return Ok(None);
        }
        *seen = key.version;
        self.table.note_version(key.addr, key.version);
        Ok(Some(key))
    }
}

/// The addresses of every member foca knows (alive, suspect or down),
/// with the newest start time (`bump`) known at each, shared with the
/// codec to cap the membership and to tell a member's own identity from a
/// forged newer one.
type Known = Arc<RwLock<HashMap<SocketAddr, u64>>>;

/// What the codec and the driver share about the datagram being decoded
/// and the identities a third party introduced.
#[derive(Debug, Default)]
struct Vetting {
    /// Sender of the datagram being decoded.
    sender: Option<PeerId>,
    /// The datagram is a `Feed` this node asked for (it announced to the
    /// sender): introductions in it are not capped.
    solicited_feed: bool,
    /// Addresses announced to recently: their `Feed` answers are asked for.
    announced: HashMap<SocketAddr, std::time::Instant>,
    /// New identities introduced per introducer in the current window.
    introduced: HashMap<SocketAddr, (std::time::Instant, u32)>,
    /// When another member's suspicion of each address was last accepted.
    suspected: HashMap<SocketAddr, std::time::Instant>,
    /// Identities introduced by a third party, for the driver to confirm.
    new_ids: Vec<PeerId>,
    /// Suspicions accepted from a third party (identity, incarnation): the
    /// driver declares the member down itself if it has not refuted them
    /// when its own suspicion time runs out.
    to_check: Vec<(PeerId, u16)>,
}

/// New identities one member may introduce about others per
/// [`INTRODUCTION_WINDOW`] (a `Feed` this node asked for is not counted):
/// each is announced to, and added only when it answers from its own
/// address, so this caps the announces a member can make this node send.
pub const MAX_INTRODUCED: u32 = 64;

/// The window of [`MAX_INTRODUCED`].
pub const INTRODUCTION_WINDOW: Duration = Duration::from_secs(10);

/// A member learned from a third party is announced to at once and not
/// again within this; one learned from a `Feed` this node asked for must
/// send a datagram of its own within this, or it is declared down here.
pub const CONFIRM_WITHIN: Duration = Duration::from_secs(5);

/// Another member's suspicion (or "down") of a member is accepted at most
/// once per this for that member; between, it is ignored.
pub const SUSPICION_EVERY: Duration = Duration::from_secs(10);

/// A "you are down, renew yourself" message (`TurnUndead`) is obeyed at
/// most once per this.
pub const TURN_UNDEAD_EVERY: Duration = Duration::from_secs(30);

/// The largest incarnation accepted in an update. Foca's incarnation is a
/// `u16` a member raises by one per refuted suspicion; one forged at the
/// maximum could never be refuted. Live members stay far below.
pub const MAX_INCARNATION: u16 = 1 << 12;

/// How far in the future a member's start time (`bump`) may be.
const MAX_BUMP_AHEAD_NS: u64 = 60_000_000_000;

/// Which identities may appear in gossip.
#[derive(Debug, Clone, Copy)]
pub struct AddrPolicy {
    /// This node's identity address.
    pub me: SocketAddr,
}

impl AddrPolicy {
    /// Why `addr` may not be a member, if it may not.
    pub fn refuse(&self, addr: SocketAddr) -> Option<&'static str> {
        let ip = addr.ip();
        if addr.port() == 0 {
            return Some("port 0");
        }
        if ip.is_unspecified() {
            return Some("unspecified address");
        }
        if ip.is_multicast() || ip == IpAddr::from([255, 255, 255, 255]) {
            return Some("multicast or broadcast address");
        }
        if ip.is_loopback() != self.me.ip().is_loopback() {
            return Some("loopback address off loopback");
        }
        if ip.is_ipv4() != self.me.ip().is_ipv4() {
            return Some("another address family");
        }
        None
    }

    fn check(&self, id: &PeerId) -> bool {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        self.refuse(id.addr).is_none() && id.bump <= now_ns.saturating_add(MAX_BUMP_AHEAD_NS)
    }
}

/// A codec refusing what [`AddrPolicy`] forbids and new members past the
/// cap; the wire format is foca's postcard encoding.
struct GuardedCodec {
    policy: AddrPolicy,
    known: Known,
    vetting: Arc<std::sync::Mutex<Vetting>>,
}

/// Why the codec refused a datagram.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("{0}")]
    Postcard(#[from] postcard_error::Error),
    #[error("forbidden identity")]
    Identity,
    #[error("incarnation too large")]
    Incarnation,
    #[error("membership full")]
    Full,
    #[error("too many new members from one introducer")]
    Introductions,
    #[error("another member says a newer identity of a member is down")]
    ForgedIdentity,
}

mod postcard_error {
    /// foca's postcard codec error, by the trait's associated type.
    pub type Error = <foca::PostcardCodec as foca::Codec<super::PeerId>>::Error;
}

fn ids_of(m: &Message<PeerId>) -> Option<&PeerId> {
    match m {
        Message::PingReq { target, .. } | Message::IndirectAck { target, .. } => Some(target),
        Message::IndirectPing { origin, .. } | Message::ForwardedAck { origin, .. } => Some(origin),
        _ => None,
    }
}

impl Codec<PeerId> for GuardedCodec {
    type Error = Refused;

    fn encode_header(
        &mut self,
        header: &Header<PeerId>,
        buf: impl bytes::BufMut,
    ) -> Result<(), Refused> {
        Ok(PostcardCodec.encode_header(header, buf)?)
    }

    fn decode_header(&mut self, buf: impl bytes::Buf) -> Result<Header<PeerId>, Refused> {
        let h: Header<PeerId> = PostcardCodec.decode_header(buf)?;
        let ok = self.policy.check(&h.src)
            && self.policy.check(&h.dst)
            && ids_of(&h.message).is_none_or(|id| self.policy.check(id));
        if !ok {
            return Err(Refused::Identity);
        }
        if h.src_incarnation > MAX_INCARNATION {
            return Err(Refused::Incarnation);
        }
        let mut v = self.vetting.lock().expect("vetting lock");
        v.solicited_feed = matches!(h.message, Message::Feed)
            && v.announced
                .get(&h.src.addr)
                .is_some_and(|t| t.elapsed() < Duration::from_secs(10));
        v.sender = Some(h.src.clone());
        Ok(h)
    }

    fn encode_member(
        &mut self,
        member: &Member<PeerId>,
        buf: impl bytes::BufMut,
    ) -> Result<(), Refused> {
        Ok(PostcardCodec.encode_member(member, buf)?)
    }

    fn decode_member(&mut self, buf: impl bytes::Buf) -> Result<Member<PeerId>, Refused> {
        let m: Member<PeerId> = PostcardCodec.decode_member(buf)?;
        if !self.policy.check(m.id()) {
            return Err(Refused::Identity);
        }
        if m.incarnation() > MAX_INCARNATION {
            return Err(Refused::Incarnation);
        }
        let known = self.known.read().expect("known lock");
        if known.len() >= MAX_MEMBERS && !known.contains_key(&m.id().addr) {
            return Err(Refused::Full);
        }
        let known_bump = known.get(&m.id().addr).copied();
        drop(known);
        let me = self.policy.me;
        self.vet(m, known_bump, me)
    }
}

impl GuardedCodec {
    /// What a member may say about another (SWIM trusts members to report
    /// their probes; one fleet key seals for all):
    ///
    /// - anything about itself;
    /// - "down" or "suspect" about a member this node knows by that
    ///   identity becomes a suspicion, which the member refutes if it is
    ///   alive; this node declares it down only when its own suspicion
    ///   time runs out unrefuted (as in SWIM, where every member that hears
    ///   a suspicion starts its own timer; foca starts one only at the
    ///   member whose probe failed), at most one per
    ///   [`SUSPICION_EVERY`] per member — a forged "down", even about this
    ///   node, no longer makes a member renew its identity;
    /// - "down" or "suspect" about a newer identity (start time) at a known
    ///   member's address is refused: only the member itself can restart;
    /// - a new identity counts against its introducer's cap
    ///   ([`MAX_INTRODUCED`] per [`INTRODUCTION_WINDOW`]) and is announced
    ///   to; it is added only when it answers from its own address (in a
    ///   `Feed` this node asked for it is added at once and must confirm
    ///   itself within [`CONFIRM_WITHIN`]).
    fn vet(
        &mut self,
        m: Member<PeerId>,
        known_bump: Option<u64>,
        me: SocketAddr,
    ) -> Result<Member<PeerId>, Refused> {
        use foca::State;
        let mut v = self.vetting.lock().expect("vetting lock");
        let Some(sender) = v.sender.clone() else {
            return Ok(m);
        };
        if *m.id() == sender {
            return Ok(m);
        }
        let now = std::time::Instant::now();
        let known_bump = if m.id().addr == me {
            // this node is always known to itself
            Some(known_bump.unwrap_or(0).max(m.id().bump))
        } else {
            known_bump
        };
        match (m.state(), known_bump) {
            (State::Alive, Some(_)) => Ok(m),
            (State::Suspect | State::Down, Some(b)) if m.id().bump > b => {
                Err(Refused::ForgedIdentity)
            }
            // an older identity at a known address: foca lets the newer win
            (State::Suspect | State::Down, Some(b)) if m.id().bump < b => Ok(m),
            (State::Suspect | State::Down, Some(_)) => {
                let recent = v
                    .suspected
                    .get(&m.id().addr)
                    .is_some_and(|t| now.duration_since(*t) < SUSPICION_EVERY);
                if recent {
                    // ignored: "alive at incarnation 0" changes nothing
                    // foca knows
                    return Ok(Member::new(m.id().clone(), 0, State::Alive));
                }
                if v.suspected.len() >= MAX_MEMBERS {
                    v.suspected
                        .retain(|_, t| now.duration_since(*t) < SUSPICION_EVERY);
                }
                v.suspected.insert(m.id().addr, now);
                if v.to_check.len() < MAX_MEMBERS {
                    v.to_check.push((m.id().clone(), m.incarnation()));
                }
                Ok(Member::new(m.id().clone(), m.incarnation(), State::Suspect))
            }
            // "down" about an address never seen adds no live member
            (State::Down, None) => Ok(m),
            (State::Alive | State::Suspect, None) => {
                if !v.solicited_feed {
                    let (since, n) = v.introduced.entry(sender.addr).or_insert((now, 0));
                    if now.duration_since(*since) >= INTRODUCTION_WINDOW {
                        (*since, *n) = (now, 0);
                    }
                    if *n >= MAX_INTRODUCED {
                        return Err(Refused::Introductions);
                    }
                    *n += 1;
                    if v.introduced.len() > MAX_MEMBERS {
                        v.introduced
                            .retain(|_, (t, _)| now.duration_since(*t) < INTRODUCTION_WINDOW);
                    }
                }
                if v.new_ids.len() < MAX_MEMBERS {
                    v.new_ids.push(m.id().clone());
                }
                if v.solicited_feed {
                    return Ok(m);
                }
                // Held out of the membership until it speaks for itself:
                // it is announced to (confirm_new_members), and a real
                // member answers from its own address and is added on its
                // own word. Fakes never enter foca's probe rotation, where
                // a stream of them (appended at its end) kept the round
                // from wrapping, so a crashed member was not probed again
                // and its death was seen only through others. In its
                // place, "the sender is alive at incarnation 0", which
                // changes nothing: foca has just taken the sender as alive
                // from the datagram's header.
                Ok(Member::new(sender, 0, State::Alive))
            }
        }
    }
}

/// Settings of the membership protocol.
#[derive(Debug, Clone)]
pub struct MembershipConfig {
    /// Expected fleet size: sets how many times gossip is relayed and how
    /// long a suspect has to refute (foca's LAN profile).
    pub fleet_size: u32,
    /// Seeds to join through (announced to every second while not
    /// members).
    pub seeds: Vec<SocketAddr>,
    /// The keys sealing every datagram; `None` only on loopback.
    pub keys: Option<Keyring>,
    /// The file the keys came from: re-read when it changes (checked every
    /// second), so a key roll needs no restart.
    pub keys_file: Option<std::path::PathBuf>,
    /// This node's identity address when it differs from the bound one
    /// (bound to `0.0.0.0`, known by its certificate's address).
    pub identity: Option<IpAddr>,
}

enum Cmd {
    Advertise(u64),
    Leave(oneshot::Sender<()>),
}

/// A running membership: the live members and a way to advertise and to
/// leave.
#[derive(Debug, Clone)]
pub struct Membership {
    tx: mpsc::Sender<Cmd>,
    /// This member.
    pub me: PeerId,
    members: Arc<RwLock<Vec<PeerId>>>,
}

impl Membership {
    /// Bind `addr` (UDP) and start the protocol on the current tokio
    /// runtime. Live members are mirrored into `table`.
    pub async fn start(
        addr: SocketAddr,
        cfg: MembershipConfig,
        table: Arc<PeerTable>,
        metrics: Arc<Metrics>,
    ) -> Result<Membership> {
        let socket = UdpSocket::bind(addr).await.map_err(|e| Error::Net {
            what: format!("udp socket {addr}"),
            source: e,
        })?;
        let addr = socket.local_addr().map_err(|e| Error::Net {
            what: format!("udp socket {addr}"),
            source: e,
        })?;
        let addr = SocketAddr::new(cfg.identity.unwrap_or(addr.ip()), addr.port());
        let bump = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        let me = PeerId { addr, bump };
        let policy = AddrPolicy { me: addr };
        if let Some(why) = policy.refuse(addr) {
            return Err(Error::invalid(
                "--listen",
                format!(
                    "{addr}: cannot be a member's identity ({why}); give the address peers reach"
                ),
            ));
        }
        let size = NonZeroU32::new(cfg.fleet_size.max(1)).expect("non-zero");
        let mut config = Config::new_lan(size);
        // foca's LAN profile waits 500 ms for a probe's answer; a loaded
        // 2-core machine (or a busy desktop) misses that now and then, and
        // a live member flaps out and back in. A second, and at least 6 s
        // of suspicion, keep live members in at the cost of slower crash
        // detection (about 10 s instead of 5 s).
        config.probe_rtt = Duration::from_secs(1);
        config.probe_period = Duration::from_secs(2);
        config.suspect_to_down_after = config.suspect_to_down_after.max(Duration::from_secs(6));
        let config_suspect_after = config.suspect_to_down_after;
        let known: Known = Arc::new(RwLock::new(HashMap::new()));
        let vetting = Arc::new(std::sync::Mutex::new(Vetting::default()));
        let handler = Handler {
            seen: HashMap::new(),
            table: table.clone(),
            known: known.clone(),
        };
        let codec = GuardedCodec {
            policy,
            known: known.clone(),
            vetting: vetting.clone(),
        };
        let rng: rand::rngs::StdRng = rand::make_rng();
        let foca = Foca::with_custom_broadcast(me.clone(), config, rng, codec, handler);
        let (tx, rx) = mpsc::channel(64);
        let members = Arc::new(RwLock::new(Vec::new()));
        let driver = Driver {
            foca,
            socket,
            runtime: AccumulatingRuntime::new(),
            timers: BinaryHeap::new(),
            seq: 0,
            members: members.clone(),
            table,
            seeds: cfg.seeds.into_iter().filter(|s| *s != addr).collect(),
            keys_mtime: cfg
                .keys_file
                .as_ref()
                .and_then(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok()),
            keys_file: cfg.keys_file,
            keys: cfg.keys,
            known,
            metrics,
            vetting,
            unconfirmed: HashMap::new(),
            turned_undead: None,
            checks: Vec::new(),
            suspect_after: config_suspect_after,
        };
        tokio::spawn(driver.run(rx));
        Ok(Membership { tx, me, members })
    }

    /// The live members other than this one, by address.
    pub fn members(&self) -> Vec<PeerId> {
        self.members.read().expect("members lock").clone()
    }

    /// Gossip that this node's advertisement is now at `version`.
    pub async fn advertise(&self, version: u64) {
        let _ = self.tx.send(Cmd::Advertise(version)).await;
    }

    /// Tell the others this node is leaving, and stop.
    pub async fn leave(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Cmd::Leave(ack)).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(1), done).await;
        }
    }
}

type FocaT = Foca<PeerId, GuardedCodec, rand::rngs::StdRng, Handler>;

struct Driver {
    foca: FocaT,
    socket: UdpSocket,
    runtime: AccumulatingRuntime<PeerId>,
    /// Due timers, earliest first; the sequence number keeps timers due at
    /// the same instant in the order foca asked for them.
    timers: BinaryHeap<Reverse<(Instant, u64, Timer<PeerId>)>>,
    seq: u64,
    members: Arc<RwLock<Vec<PeerId>>>,
    table: Arc<PeerTable>,
    seeds: Vec<SocketAddr>,
    keys: Option<Keyring>,
    keys_file: Option<std::path::PathBuf>,
    keys_mtime: Option<std::time::SystemTime>,
    known: Known,
    metrics: Arc<Metrics>,
    vetting: Arc<std::sync::Mutex<Vetting>>,
    /// Members learned from a third party that have not yet sent a
    /// datagram of their own, with the instant they are declared down.
    unconfirmed: HashMap<PeerId, Instant>,
    /// When a `TurnUndead` was last obeyed.
    turned_undead: Option<Instant>,
    /// Suspicions heard from others, with when to declare the member down
    /// if it still has not refuted them.
    checks: Vec<(Instant, PeerId, u16)>,
    /// How long a suspect has to refute (foca's `suspect_to_down_after`).
    suspect_after: Duration,
}

impl Driver {
    /// Re-read the key file if it changed since it was read; a file that
    /// does not parse, or that another local user could have written
    /// ([`crate::keys::check_trusted`]), leaves the keys in use and is
    /// named in the metrics (`key_reload_refused`).
    fn reload_keys(&mut self) {
        let Some(path) = &self.keys_file else {
            return;
        };
        let Ok(mtime) = std::fs::metadata(path).and_then(|m| m.modified()) else {
            return;
        };
        if Some(mtime) == self.keys_mtime {
            return;
        }
        self.keys_mtime = Some(mtime);
        match crate::keys::read_keyring(path) {
            Ok(ring) => {
                self.keys = Some(ring);
                self.metrics.key_reload(None);
            }
            Err(e) => self.metrics.key_reload(Some(e.to_string())),
        }
    }

    /// Open a datagram from `from` and check that its sender is `from`:
    /// the plain text for foca, or `None` to drop it. A sender heard from
    /// directly is confirmed; a `TurnUndead` beyond one per
    /// [`TURN_UNDEAD_EVERY`] is dropped.
    fn admit(&mut self, data: &[u8], from: SocketAddr) -> Option<Vec<u8>> {
        let plain = match &self.keys {
            Some(k) => k.open(data).ok()?,
            None => data.to_vec(),
        };
        let mut b = &plain[..];
        let h: Header<PeerId> = PostcardCodec.decode_header(&mut b).ok()?;
        if h.src.addr != from {
            return None;
        }
        if matches!(h.message, Message::TurnUndead) {
            let now = Instant::now();
            if self
                .turned_undead
                .is_some_and(|t| now.duration_since(t) < TURN_UNDEAD_EVERY)
            {
                return None;
            }
            self.turned_undead = Some(now);
        }
        self.unconfirmed.remove(&h.src);
        Some(plain)
    }

    /// Announce to members a third party introduced (a real member
    /// answers), and declare down here those that did not answer within
    /// [`CONFIRM_WITHIN`].
    fn confirm_new_members(&mut self) {
        let now = Instant::now();
        let (new_ids, to_check) = {
            let mut v = self.vetting.lock().expect("vetting lock");
            (
                std::mem::take(&mut v.new_ids),
                std::mem::take(&mut v.to_check),
            )
        };
        for (id, inc) in to_check {
            self.checks.push((now + self.suspect_after, id, inc));
        }
        let due: Vec<(PeerId, u16)> = self
            .checks
            .iter()
            .filter(|(t, _, _)| *t <= now)
            .map(|(_, id, inc)| (id.clone(), *inc))
            .collect();
        self.checks.retain(|(t, _, _)| *t > now);
        for (id, inc) in due {
            let unrefuted = self.foca.iter_membership_state().any(|m| {
                *m.id() == id && m.state() == foca::State::Suspect && m.incarnation() == inc
            });
            if unrefuted {
                let down = Member::new(id, inc, foca::State::Down);
                let _ = self
                    .foca
                    .apply_many(std::iter::once(down), true, &mut self.runtime);
            }
        }
        for id in new_ids {
            if id == *self.foca.identity() || self.unconfirmed.contains_key(&id) {
                continue;
            }
            self.unconfirmed.insert(id.clone(), now + CONFIRM_WITHIN);
            self.note_announced(id.addr);
            let _ = self.foca.announce(id, &mut self.runtime);
        }
        let expired: Vec<PeerId> = self
            .unconfirmed
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.unconfirmed.remove(&id);
            let incarnation = self
                .foca
                .iter_membership_state()
                .find(|m| *m.id() == id)
                .map(|m| m.incarnation());
            if let Some(inc) = incarnation {
                let down = Member::new(id, inc, foca::State::Down);
                let _ = self
                    .foca
                    .apply_many(std::iter::once(down), false, &mut self.runtime);
            }
        }
    }

    fn note_announced(&self, addr: SocketAddr) {
        let mut v = self.vetting.lock().expect("vetting lock");
        let now = std::time::Instant::now();
        if v.announced.len() >= MAX_MEMBERS {
            v.announced
                .retain(|_, t| now.duration_since(*t) < Duration::from_secs(10));
        }
        v.announced.insert(addr, now);
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        let mut buf = vec![0u8; 65_536];
        let mut rejoin = tokio::time::interval(Duration::from_secs(1));
        rejoin.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next = self
                .timers
                .peek()
                .map(|Reverse((t, _, _))| *t)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                r = self.socket.recv_from(&mut buf) => {
                    if let Ok((n, from)) = r {
                        // a datagram that does not open, whose sender is
                        // not its source, or that foca or the codec
                        // refuses, is dropped and counted
                        let ok = match self.admit(&buf[..n], from) {
                            Some(plain) => self.foca.handle_data(&plain, &mut self.runtime).is_ok(),
                            None => false,
                        };
                        self.confirm_new_members();
                        if !ok {
                            self.metrics.gossip_dropped();
                        }
                    }
                }
                _ = tokio::time::sleep_until(next) => {
                    let now = Instant::now();
                    while self.timers.peek().is_some_and(|Reverse((t, _, _))| *t <= now) {
                        let Reverse((_, _, timer)) = self.timers.pop().expect("peeked");
                        let _ = self.foca.handle_timer(timer, &mut self.runtime);
                    }
                }
                _ = rejoin.tick() => {
                    self.reload_keys();
                    self.confirm_new_members();
                    // announce to every seed that is not a member (yet, or
                    // any more): checking only "alone" would leave a seed
                    // outside when two newcomers find each other first
                    for s in &self.seeds {
                        if !self.foca.iter_members().any(|m| m.id().addr == *s) {
                            self.note_announced(*s);
                            let dst = PeerId { addr: *s, bump: 0 };
                            let _ = self.foca.announce(dst, &mut self.runtime);
                        }
                    }
                }
                cmd = rx.recv() => match cmd {
                    Some(Cmd::Advertise(version)) => {
                        let key = AdvertKey { addr: self.foca.identity().addr, version };
                        let _ = self.foca.add_broadcast(&key.encode());
                        // push it out now rather than at the next probe
                        let _ = self.foca.gossip(&mut self.runtime);
                    }
                    Some(Cmd::Leave(ack)) => {
                        let _ = self.foca.leave_cluster(&mut self.runtime);
                        self.flush().await;
                        let _ = ack.send(());
                        return;
                    }
                    None => return,
                },
            }
            self.flush().await;
        }
    }

    /// Carry out what foca asked for.
    async fn flush(&mut self) {
        while let Some((dst, data)) = self.runtime.to_send() {
            let out = match &self.keys {
                Some(k) => k.seal(&data),
                None => data.to_vec(),
            };
            let _ = self.socket.send_to(&out, dst.addr).await;
        }
        let now = Instant::now();
        while let Some((after, timer)) = self.runtime.to_schedule() {
            self.seq += 1;
            self.timers.push(Reverse((now + after, self.seq, timer)));
        }
        let mut changed = false;
        while let Some(n) = self.runtime.to_notify() {
            changed |= matches!(
                n,
                OwnedNotification::MemberUp(_)
                    | OwnedNotification::MemberDown(_)
                    | OwnedNotification::Rename(..)
                    | OwnedNotification::Idle
                    | OwnedNotification::Defunct
                    | OwnedNotification::Rejoin(_)
            );
        }
        if changed {
            let mut known = HashMap::new();
            for m in self.foca.iter_membership_state() {
                let b = known.entry(m.id().addr).or_insert(m.id().bump);
                *b = (*b).max(m.id().bump);
            }
            *self.known.write().expect("known lock") = known;
            let mut live: Vec<PeerId> = self.foca.iter_members().map(|m| m.id().clone()).collect();
            live.sort();
            self.table
                .set_members(&live.iter().map(|p| (p.addr, p.bump)).collect::<Vec<_>>());
            *self.members.write().expect("members lock") = live;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advert_keys_round_trip_and_invalidate_older_versions() {
        let a = AdvertKey {
            addr: "10.0.0.2:7946".parse().unwrap(),
            version: 7,
        };
        assert_eq!(AdvertKey::decode(&a.encode()).unwrap(), a);
        assert!(AdvertKey::decode(&[1, 2]).is_err());
        let newer = AdvertKey { version: 8, ..a };
        assert!(newer.invalidates(&a) && !a.invalidates(&newer));
        let other = AdvertKey {
            addr: "10.0.0.3:7946".parse().unwrap(),
            version: 9,
        };
        assert!(!other.invalidates(&a));
    }

    async fn wait_for(m: &Membership, n: usize, limit: Duration) -> Duration {
        let t = Instant::now();
        while m.members().len() != n {
            assert!(
                t.elapsed() < limit,
                "{} sees {:?}, want {n} others",
                m.me.addr,
                m.members()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        t.elapsed()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_members_converge_and_see_a_leave() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let ring = Keyring::new(vec![crate::seal::GossipKey::random(1)]).unwrap();
        let cfg = |seeds| MembershipConfig {
            fleet_size: 3,
            seeds,
            keys: Some(ring.clone()),
            keys_file: None,
            identity: None,
        };
        let m = || Arc::new(Metrics::new());
        let t1 = Arc::new(PeerTable::new());
        let a = Membership::start(any, cfg(vec![]), t1.clone(), m())
            .await
            .unwrap();
        let b = Membership::start(any, cfg(vec![a.me.addr]), Arc::new(PeerTable::new()), m())
            .await
            .unwrap();
        let c = Membership::start(any, cfg(vec![b.me.addr]), Arc::new(PeerTable::new()), m())
            .await
            .unwrap();
        for m in [&a, &b, &c] {
            wait_for(m, 2, Duration::from_secs(10)).await;
        }
        // a learned of c through b's gossip; the table mirrors it
        assert_eq!(t1.summary().len(), 2);
        c.leave().await;
        wait_for(&a, 1, Duration::from_secs(10)).await;
        wait_for(&b, 1, Duration::from_secs(10)).await;
        assert_eq!(a.members()[0].addr, b.me.addr);
    }

    #[test]
    fn address_policy_refuses_what_cannot_be_a_peer() {
        let p = AddrPolicy {
            me: "10.0.0.1:7946".parse().unwrap(),
        };
        for bad in [
            "127.0.0.1:7946",
            "0.0.0.0:7946",
            "224.0.0.1:7946",
            "255.255.255.255:7946",
            "10.0.0.2:0",
            "[::1]:7946",
            "[fd00::2]:7946",
        ] {
            assert!(p.refuse(bad.parse().unwrap()).is_some(), "{bad}");
        }
        assert_eq!(p.refuse("10.0.0.2:7946".parse().unwrap()), None);
        let future = PeerId {
            addr: "10.0.0.2:7946".parse().unwrap(),
            bump: u64::MAX,
        };
        assert!(!p.check(&future), "a start time in the future");
        // on loopback, loopback peers are the fleet
        let lo = AddrPolicy {
            me: "127.0.0.1:7000".parse().unwrap(),
        };
        assert_eq!(lo.refuse("127.0.0.1:7001".parse().unwrap()), None);
        assert!(lo.refuse("10.0.0.2:7946".parse().unwrap()).is_some());
    }

    /// Datagrams an attacker sends to a member: unsealed fake members, a
    /// sealed packet whose sender is not its source, a forged "down" at
    /// the maximum incarnation, an unspecified member address. All are
    /// dropped and counted; the membership is unchanged.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forged_datagrams_are_dropped() {
        use bytes::BufMut;
        use foca::State;
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let ring = Keyring::new(vec![crate::seal::GossipKey::random(7)]).unwrap();
        let cfg = |seeds| MembershipConfig {
            fleet_size: 3,
            seeds,
            keys: Some(ring.clone()),
            keys_file: None,
            identity: None,
        };
        let metrics = Arc::new(Metrics::new());
        let a = Membership::start(
            any,
            cfg(vec![]),
            Arc::new(PeerTable::new()),
            metrics.clone(),
        )
        .await
        .unwrap();
        let b = Membership::start(
            any,
            cfg(vec![a.me.addr]),
            Arc::new(PeerTable::new()),
            Arc::new(Metrics::new()),
        )
        .await
        .unwrap();
        wait_for(&a, 1, Duration::from_secs(10)).await;
        wait_for(&b, 1, Duration::from_secs(10)).await;
        let before = metrics.snapshot().served.gossip_dropped;

        let atk = UdpSocket::bind(any).await.unwrap();
        let me_atk = PeerId {
            addr: atk.local_addr().unwrap(),
            bump: 1,
        };
        let packet = |src: &PeerId, updates: &[Member<PeerId>]| {
            let mut buf = Vec::new();
            let h = Header {
                src: src.clone(),
                src_incarnation: 0,
                dst: a.me.clone(),
                message: Message::Gossip,
            };
            PostcardCodec.encode_header(&h, &mut buf).unwrap();
            buf.put_u16(updates.len() as u16);
            for m in updates {
                PostcardCodec.encode_member(m, &mut buf).unwrap();
            }
            buf
        };
        let mut sent = 0;
        // 300 fake members, unsealed
        let fakes: Vec<Member<PeerId>> = (0..300u16)
            .map(|k| {
                Member::alive(PeerId {
                    addr: SocketAddr::from(([127, 0, 0, 1], 20_000 + k)),
                    bump: 1,
                })
            })
            .collect();
        for chunk in fakes.chunks(30) {
            atk.send_to(&packet(&me_atk, chunk), a.me.addr)
                .await
                .unwrap();
            sent += 1;
        }
        // sealed with the fleet key (an insider), claiming to be b
        let down_b = Member::new(b.me.clone(), 1, State::Down);
        let spoofed = ring.seal(&packet(&b.me, std::slice::from_ref(&down_b)));
        atk.send_to(&spoofed, a.me.addr).await.unwrap();
        // sealed, from its real address, b down at the maximum incarnation
        let max_down = Member::new(b.me.clone(), u16::MAX, State::Down);
        atk.send_to(&ring.seal(&packet(&me_atk, &[max_down])), a.me.addr)
            .await
            .unwrap();
        // sealed, a member at the unspecified address
        let nowhere = Member::alive(PeerId {
            addr: "0.0.0.0:7946".parse().unwrap(),
            bump: 1,
        });
        atk.send_to(&ring.seal(&packet(&me_atk, &[nowhere])), a.me.addr)
            .await
            .unwrap();
        sent += 3;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            metrics.snapshot().served.gossip_dropped - before,
            sent,
            "every forged datagram dropped"
        );
        let members: Vec<SocketAddr> = a.members().iter().map(|p| p.addr).collect();
        assert_eq!(members, [b.me.addr], "the membership is unchanged");
    }

    /// A key roll without restarts: both members re-read their key files
    /// at each step and stay members throughout; afterwards a member that
    /// holds only the new key joins them (so they seal with it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_key_roll_needs_no_restart() {
        use crate::seal::GossipKey;
        use std::os::unix::fs::PermissionsExt;
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let t = tempfile::tempdir().unwrap();
        let (old, new) = (GossipKey::random(1), GossipKey::random(2));
        let write = |name: &str, keys: &[&GossipKey]| {
            let ring = Keyring::new(keys.iter().map(|k| (*k).clone()).collect()).unwrap();
            let p = t.path().join(name);
            std::fs::write(&p, ring.to_text()).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            ring
        };
        let start = |name: &'static str, ring: Keyring, seeds: Vec<SocketAddr>| {
            let cfg = MembershipConfig {
                fleet_size: 3,
                seeds,
                keys: Some(ring),
                keys_file: Some(t.path().join(name)),
                identity: None,
            };
            Membership::start(
                any,
                cfg,
                Arc::new(PeerTable::new()),
                Arc::new(Metrics::new()),
            )
        };
        let r0 = write("a", &[&old]);
        write("b", &[&old]);
        let a = start("a", r0.clone(), vec![]).await.unwrap();
        let b = start("b", r0, vec![a.me.addr]).await.unwrap();
        wait_for(&a, 1, Duration::from_secs(10)).await;
        for step in [vec![&old, &new], vec![&new, &old], vec![&new]] {
            write("a", &step);
            write("b", &step);
            tokio::time::sleep(Duration::from_millis(2500)).await;
            assert_eq!(a.members().len(), 1, "a lost b at a step of the roll");
            assert_eq!(b.members().len(), 1, "b lost a at a step of the roll");
        }
        let c = start("c", write("c", &[&new]), vec![a.me.addr])
            .await
            .unwrap();
        wait_for(&c, 2, Duration::from_secs(10)).await;
    }

    /// The key file's directory made writable by others and the file
    /// replaced by another fleet's key: the reload is refused, naming the
    /// directory, and the member stays in its fleet; a proper roll
    /// afterwards (directory fixed) is loaded again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_key_file_others_could_write_is_not_reloaded() {
        use crate::seal::GossipKey;
        use std::os::unix::fs::PermissionsExt;
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let t = tempfile::tempdir().unwrap();
        let (da, db) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir(&da).unwrap();
        std::fs::create_dir(&db).unwrap();
        let fleet = GossipKey::random(1);
        let write = |dir: &std::path::Path, key: &GossipKey| {
            let ring = Keyring::new(vec![key.clone()]).unwrap();
            let p = dir.join("gossip.keys");
            let tmp = dir.join("gossip.keys.new");
            std::fs::write(&tmp, ring.to_text()).unwrap();
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::fs::rename(&tmp, &p).unwrap();
            ring
        };
        let ring = write(&da, &fleet);
        write(&db, &fleet);
        let metrics = Arc::new(Metrics::new());
        let start = |dir: &std::path::Path, seeds: Vec<SocketAddr>, m: Arc<Metrics>| {
            let cfg = MembershipConfig {
                fleet_size: 3,
                seeds,
                keys: Some(ring.clone()),
                keys_file: Some(dir.join("gossip.keys")),
                identity: None,
            };
            Membership::start(any, cfg, Arc::new(PeerTable::new()), m)
        };
        let a = start(&da, vec![], metrics.clone()).await.unwrap();
        let b = start(&db, vec![a.me.addr], Arc::new(Metrics::new()))
            .await
            .unwrap();
        wait_for(&a, 1, Duration::from_secs(10)).await;
        std::fs::set_permissions(&da, std::fs::Permissions::from_mode(0o777)).unwrap();
        write(&da, &GossipKey::random(9));
        tokio::time::sleep(Duration::from_millis(3000)).await;
        let why = metrics
            .snapshot()
            .key_reload_refused
            .expect("reload refused");
        assert!(
            why.contains(da.to_str().unwrap()) && why.contains("writable by group or others"),
            "{why}"
        );
        assert_eq!(a.members().len(), 1, "a left its fleet");
        assert_eq!(b.members().len(), 1, "b lost a");
        // the directory fixed and the fleet's key put back: loaded again
        std::fs::set_permissions(&da, std::fs::Permissions::from_mode(0o700)).unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        write(&da, &fleet);
        let t0 = Instant::now();
        while metrics.snapshot().key_reload_refused.is_some() {
            assert!(t0.elapsed() < Duration::from_secs(10), "never reloaded");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(a.members().len(), 1);
    }

    #[test]
    fn a_version_is_taken_only_from_its_member() {
        let owner: SocketAddr = "10.0.0.2:7946".parse().unwrap();
        let other = PeerId {
            addr: "10.0.0.3:7946".parse().unwrap(),
            bump: 1,
        };
        let table = Arc::new(PeerTable::new());
        table.set_members(&[(owner, 1)]);
        let mut h = Handler {
            seen: HashMap::new(),
            table: table.clone(),
            known: Arc::new(RwLock::new(HashMap::from([(owner, 1)]))),
        };
        let forged = AdvertKey {
            addr: owner,
            version: u64::MAX,
        };
        assert_eq!(
            h.receive_item(&forged.encode(), Some(&other)).unwrap(),
            None
        );
        assert!(h.seen.is_empty(), "a forged version was kept");
        assert_eq!(table.due(std::time::Instant::now()), [(owner, 0)]);
        let own = AdvertKey {
            addr: owner,
            version: 5,
        };
        let me = PeerId {
            addr: owner,
            bump: 1,
        };
        assert_eq!(h.receive_item(&own.encode(), Some(&me)).unwrap(), Some(own));
        assert_eq!(h.seen[&owner], 5);
    }

    /// An insider (sealing with the fleet key, from its own address) sends,
    /// every 0.5 s for 14 s: "b is down" to a, "you are down" to b, a
    /// `TurnUndead` to b, and 100 new fake members to a. Meanwhile c is
    /// killed. b stays a member at a throughout and renews its identity at
    /// most once (the one `TurnUndead` obeyed per 30 s); a never holds more
    /// fakes than two introduction windows' worth, and none 7 s after the
    /// attack; c is declared down at a within 20 s (11–12 s measured
    /// without injection) despite the injection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn members_cannot_forge_statements_about_others() {
        use bytes::BufMut;
        use foca::State;
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let ring = Keyring::new(vec![crate::seal::GossipKey::random(7)]).unwrap();
        let cfg = |seeds| MembershipConfig {
            fleet_size: 3,
            seeds,
            keys: Some(ring.clone()),
            keys_file: None,
            identity: None,
        };
        let start = |seeds| {
            Membership::start(
                any,
                cfg(seeds),
                Arc::new(PeerTable::new()),
                Arc::new(Metrics::new()),
            )
        };
        let a = start(vec![]).await.unwrap();
        let b = start(vec![a.me.addr]).await.unwrap();
        let c = start(vec![a.me.addr]).await.unwrap();
        for m in [&a, &b, &c] {
            wait_for(m, 2, Duration::from_secs(15)).await;
        }
        let atk = UdpSocket::bind(any).await.unwrap();
        let me_atk = PeerId {
            addr: atk.local_addr().unwrap(),
            bump: 1,
        };
        let packet = |dst: &PeerId, message: Message<PeerId>, updates: &[Member<PeerId>]| {
            let mut buf = Vec::new();
            let h = Header {
                src: me_atk.clone(),
                src_incarnation: 0,
                dst: dst.clone(),
                message,
            };
            PostcardCodec.encode_header(&h, &mut buf).unwrap();
            buf.put_u16(updates.len() as u16);
            for m in updates {
                PostcardCodec.encode_member(m, &mut buf).unwrap();
            }
            ring.seal(&buf)
        };
        let b_at_a = |a: &Membership| a.members().into_iter().find(|p| p.addr == b.me.addr);
        let fakes_at = |m: &Membership| {
            m.members()
                .iter()
                .filter(|p| p.addr.ip() == IpAddr::from([127, 0, 0, 2]))
                .count()
        };
        let mut b_ids = vec![b_at_a(&a).unwrap().bump];
        let c_addr = c.me.addr;
        let t0 = Instant::now();
        let mut c_gone_after = None;
        let mut killed = Some(c);
        let mut most_fakes = 0;
        let mut k = 0u16;
        // c dies at 1 s; docs/peer.md documents 11-12 s to declare a
        // crashed member down, and the fakes never enter a's probe rotation,
        // so the injection must not slow it (9.8-11.4 s at load 12 here)
        while t0.elapsed() < Duration::from_secs(25) {
            let b_now = b_at_a(&a).expect("a lost b");
            if b_ids.last() != Some(&b_now.bump) {
                b_ids.push(b_now.bump);
            }
            for inc in [0, 1] {
                let down = Member::new(b_now.clone(), inc, State::Down);
                atk.send_to(
                    &packet(&a.me, Message::Gossip, std::slice::from_ref(&down)),
                    a.me.addr,
                )
                .await
                .unwrap();
                atk.send_to(&packet(&b_now, Message::Gossip, &[down]), b.me.addr)
                    .await
                    .unwrap();
            }
            atk.send_to(&packet(&b_now, Message::TurnUndead, &[]), b.me.addr)
                .await
                .unwrap();
            for _ in 0..4 {
                let fakes: Vec<Member<PeerId>> = (0..25)
                    .map(|_| {
                        k += 1;
                        Member::alive(PeerId {
                            addr: SocketAddr::from(([127, 0, 0, 2], 1000 + k)),
                            bump: 1,
                        })
                    })
                    .collect();
                atk.send_to(&packet(&a.me, Message::Gossip, &fakes), a.me.addr)
                    .await
                    .unwrap();
            }
            most_fakes = most_fakes.max(fakes_at(&a));
            if t0.elapsed() >= Duration::from_secs(1) {
                drop(killed.take()); // c crashes: its task and socket end
            }
            if killed.is_none()
                && c_gone_after.is_none()
                && !a.members().iter().any(|p| p.addr == c_addr)
            {
                c_gone_after = Some(t0.elapsed() - Duration::from_secs(1));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        eprintln!(
            "b's identities at a: {}; at most {most_fakes} of {k} fakes at a; c declared down after {c_gone_after:?}",
            b_ids.len()
        );
        assert!(b_ids.len() <= 2, "b renewed {} times", b_ids.len() - 1);
        // introduced by a third party, none ever speaks for itself
        assert_eq!(most_fakes, 0, "fake members listed at a");
        let gone = c_gone_after.expect("c still listed 24 s after it was killed");
        // 11-12 s documented (measured 9.8-11.4 s); the loop looks every
        // 0.5 s, and a CI rehearsal with the fuzz and Python builds beside
        // the tests (nice 19) saw 13.2 s: SWIM's probe rounds stretch with
        // the scheduler. 15 s still fails a node that is never declared
        // down or waits out a whole extra suspicion period.
        assert!(
            gone < Duration::from_secs(15),
            "c declared down after {gone:?}"
        );
        // the fakes expire once the attack stops
        tokio::time::sleep(CONFIRM_WITHIN + Duration::from_secs(2)).await;
        assert_eq!(fakes_at(&a), 0, "fakes outlived the attack");
        assert!(b_at_a(&a).is_some() && b.members().iter().any(|p| p.addr == a.me.addr));
    }
}
