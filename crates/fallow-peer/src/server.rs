//! The serving side of the data channel: chunks of whitelisted files, and
//! only from the page cache, so serving a peer never spins up this node's
//! disk (SARD §III: peers help with what they hold in memory).
//! Requests name files as the index does; anything else is refused.
//!
//! Everything a peer can make the server spend is capped ([`Limits`]):
//! connections overall and per address, with handshakes in progress held
//! to half the cap and a few per address (anyone can open a connection
//! and send nothing; only proven peers get the other half), the time of a
//! TLS handshake and of each frame once its first byte arrived, the size of a
//! request, the bytes of answers in flight, and the answers computed at
//! once on blocking threads.

use crate::node::Shared;
use crate::proto::{
    read_body, read_len, write_encoded_frame, Request, Response, MAX_REQUEST_BYTES,
};
use crate::transport::{Conn, PeerKind, Transport};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// What one server may spend on its peers.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections open at once, overall: [`Limits::pending_share`] of
    /// them for handshakes in progress, the rest for connections whose
    /// peer is proven (a fleet certificate naming its source, or loopback
    /// without keys).
    pub max_conns: usize,
    /// Connections open at once from one IP address.
    pub max_conns_per_ip: usize,
    /// Handshakes in progress at once from one IP address.
    pub max_pending_per_ip: usize,
    /// A TLS handshake, and a frame once its first byte arrived, must
    /// complete within this.
    pub frame_deadline: Duration,
    /// A connection idle this long between requests is closed.
    pub idle: Duration,
    /// Bytes of answers (chunks) held in memory at once.
    pub answer_budget_bytes: usize,
    /// Chunk answers computed at once (each on a blocking thread).
    pub max_blocking: usize,
    /// An answer not computed within this (waiting for a thread included)
    /// is given up: the peer gets a refusal, and a file that somehow stalls
    /// a thread keeps only that thread's slot.
    pub answer_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_conns: 256,
            max_conns_per_ip: 16,
            // a reader fetches a read's chunks in parallel, up to the
            // client's 8 pooled connections per peer
            max_pending_per_ip: 8,
            frame_deadline: Duration::from_secs(5),
            idle: Duration::from_secs(60),
            answer_budget_bytes: 64 << 20,
            max_blocking: 8,
            answer_deadline: Duration::from_secs(2),
        }
    }
}

impl Limits {
    /// Handshakes in progress at once: half the cap. The other half is
    /// only for proven peers, so connections that never finish a handshake
    /// (anyone can open them, no key needed) cannot take it.
    pub fn pending_share(&self) -> usize {
        (self.max_conns / 2).max(1)
    }

    /// Connections of proven peers at once.
    pub fn proven_share(&self) -> usize {
        self.max_conns.saturating_sub(self.pending_share()).max(1)
    }
}

/// Handshakes in progress, by source address, oldest first; dropping an
/// entry's sender tells its task to give up.
#[derive(Debug, Default)]
struct Pending {
    by_ip: HashMap<
        IpAddr,
        std::collections::VecDeque<(u64, std::time::Instant, tokio::sync::oneshot::Sender<()>)>,
    >,
    total: usize,
    next_id: u64,
}

/// The server's shared counters of what is in use.
#[derive(Debug)]
pub struct Gate {
    limits: Limits,
    proven: Arc<Semaphore>,
    pending: Mutex<Pending>,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    /// Answer bytes, in KiB permits.
    budget: Semaphore,
    blocking: Arc<Semaphore>,
}

impl Gate {
    /// A gate enforcing `limits`.
    pub fn new(limits: Limits) -> Gate {
        Gate {
            proven: Arc::new(Semaphore::new(limits.proven_share())),
            pending: Mutex::new(Pending::default()),
            per_ip: Mutex::new(HashMap::new()),
            // at least one chunk of the largest size fits
            budget: Semaphore::new(
                (limits.answer_budget_bytes >> 10)
                    .max(crate::manifest::MAX_CHUNK_BYTES as usize >> 10),
            ),
            blocking: Arc::new(Semaphore::new(limits.max_blocking.max(1))),
            limits,
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Connections open now (handshakes in progress and proven peers).
    pub fn open_conns(&self) -> usize {
        let pending = self.pending.lock().expect("pending lock").total;
        pending + self.limits.proven_share() - self.proven.available_permits()
    }

    fn admit_ip(&self, ip: IpAddr) -> bool {
        let mut m = self.per_ip.lock().expect("per-ip lock");
        let n = m.entry(ip).or_insert(0);
        if *n >= self.limits.max_conns_per_ip {
            return false;
        }
        *n += 1;
        true
    }

    fn release_ip(&self, ip: IpAddr) {
        let mut m = self.per_ip.lock().expect("per-ip lock");
        if let Some(n) = m.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&ip);
            }
        }
    }

    /// A handshake from `ip` begins: its id and the receiver that fires if
    /// it is evicted, or `None` when `ip` has its share of handshakes in
    /// progress already. When the pending share is full, the oldest
    /// handshake is evicted, taken from the addresses with more than one in
    /// progress if there are any: connections that hold a handshake open
    /// (slowloris) are the oldest, while a member's handshake completes in
    /// milliseconds, and a member with one connection in progress is not
    /// evicted while an address with several is.
    fn begin_handshake(&self, ip: IpAddr) -> Option<(u64, tokio::sync::oneshot::Receiver<()>)> {
        let mut p = self.pending.lock().expect("pending lock");
        if p.by_ip.get(&ip).map_or(0, |q| q.len()) >= self.limits.max_pending_per_ip {
            return None;
        }
        if p.total >= self.limits.pending_share() {
            let oldest = |many: bool| {
                p.by_ip
                    .iter()
                    .filter(|(_, q)| !many || q.len() > 1)
                    .filter_map(|(ip, q)| q.front().map(|(_, t, _)| (*t, *ip)))
                    .min()
                    .map(|(_, ip)| ip)
            };
            let victim = oldest(true).or_else(|| oldest(false));
            if let Some(v) = victim {
                let q = p.by_ip.get_mut(&v).expect("victim listed");
                q.pop_front(); // its sender dropped: that task gives up
                if q.is_empty() {
                    p.by_ip.remove(&v);
                }
                p.total -= 1;
            }
        }
        let id = p.next_id;
        p.next_id += 1;
        let (tx, rx) = tokio::sync::oneshot::channel();
        p.by_ip
            .entry(ip)
            .or_default()
            .push_back((id, std::time::Instant::now(), tx));
        p.total += 1;
        Some((id, rx))
    }

    /// The handshake `id` from `ip` ended (if it was not evicted).
    fn end_handshake(&self, ip: IpAddr, id: u64) {
        let mut p = self.pending.lock().expect("pending lock");
        let Some(q) = p.by_ip.get_mut(&ip) else {
            return;
        };
        let before = q.len();
        q.retain(|(i, _, _)| *i != id);
        let removed = before - q.len();
        if q.is_empty() {
            p.by_ip.remove(&ip);
        }
        p.total -= removed;
    }
}

/// Accept connections until the runtime shuts down.
///
/// The loop always accepts: a connection over its address's share is
/// closed at once, a handshake beyond the pending share evicts another
/// ([`Gate::begin_handshake`]), and a proven peer over the proven share is
/// closed, so descriptors stay within the cap while a member can still get
/// through a flood of connections that never finish their handshake.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, transport: Transport) {
    let gate = shared.gate.clone();
    loop {
        let Ok((stream, from)) = listener.accept().await else {
            // out of descriptors or similar: back off, keep serving
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if !gate.admit_ip(from.ip()) {
            shared.metrics.refused_conn();
            continue; // dropped: closed at once
        }
        let Some((id, evicted)) = gate.begin_handshake(from.ip()) else {
            gate.release_ip(from.ip());
            shared.metrics.refused_conn();
            continue;
        };
        let s = shared.clone();
        let t = transport.clone();
        let g = gate.clone();
        tokio::spawn(async move {
            let deadline = g.limits.frame_deadline;
            let done = tokio::select! {
                r = tokio::time::timeout(deadline, t.accept(stream, from)) => r.ok().and_then(|r| r.ok()),
                _ = evicted => None,
            };
            g.end_handshake(from.ip(), id);
            match done {
                Some((conn, kind)) => match g.proven.clone().try_acquire_owned() {
                    Ok(permit) => {
                        connection(conn, kind, from, &s).await;
                        drop(permit);
                    }
                    Err(_) => s.metrics.refused_conn(),
                },
                None => s.metrics.refused_conn(),
            }
            g.release_ip(from.ip());
        });
    }
}

async fn connection(mut conn: Conn, kind: PeerKind, from: SocketAddr, shared: &Arc<Shared>) {
    let limits = shared.gate.limits.clone();
    loop {
        // idle wait for the next request, then one deadline for the frame
        let len =
            match tokio::time::timeout(limits.idle, read_len(&mut conn, MAX_REQUEST_BYTES)).await {
                Ok(Ok(Some(len))) => len,
                _ => return,
            };
        let frame =
            match tokio::time::timeout(limits.frame_deadline, read_body(&mut conn, len)).await {
                Ok(Ok(f)) => f,
                _ => return,
            };
        // an answer's buffer is at most one chunk: reserve it in the
        // budget before it is allocated, and hold it until it is sent
        let kib = (shared.index().chunk_bytes as usize).div_ceil(1024) as u32;
        let Ok(_bytes) = shared.gate.budget.acquire_many(kib).await else {
            return;
        };
        let resp = match Request::decode(&frame) {
            Err(e) => Response::Refused(e.to_string()),
            Ok(req) => match answer_async(shared, req, kind, from).await {
                Some(r) => r,
                None => return,
            },
        };
        let Ok(frame) = resp.encode_frame() else {
            return;
        };
        drop(resp);
        let sent = tokio::time::timeout(
            limits.frame_deadline,
            write_encoded_frame(&mut conn, &frame),
        )
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            return;
        }
    }
}

/// Answer on a blocking thread within the budgets; `None` when the
/// runtime is shutting down.
async fn answer_async(
    shared: &Arc<Shared>,
    req: Request,
    kind: PeerKind,
    from: SocketAddr,
) -> Option<Response> {
    if matches!(req, Request::Status) && !status_allowed(kind, from) {
        shared.metrics.served_refused();
        return Some(Response::Refused(
            "refused: status is served to fleet members and on loopback only".into(),
        ));
    }
    let is_chunk = matches!(req, Request::Chunk { .. });
    if is_chunk && !shared.serve_delay.is_zero() {
        tokio::time::sleep(shared.serve_delay).await;
    }
    let deadline = shared.gate.limits.answer_deadline;
    let s = shared.clone();
    let job = async move {
        // chunks (which read files) share the bounded answer threads; the
        // status and the advertisement list are built from memory and
        // never wait for those, so a flood of chunk requests cannot take
        // `status` from anyone
        let permit = if is_chunk {
            Some(s.gate.blocking.clone().acquire_owned().await.ok()?)
        } else {
            None
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            answer(&s, req)
        })
        .await
        .ok()
    };
    match tokio::time::timeout(deadline, job).await {
        Ok(r) => r,
        Err(_) => {
            shared.metrics.served_refused();
            Some(Response::Refused(format!(
                "refused: no answer within {} ms",
                deadline.as_millis()
            )))
        }
    }
}

/// Status (paths, members, disk state) goes to fleet members, and to
/// anyone on loopback — local users can read the same from `/proc` and the
/// file system anyway.
fn status_allowed(kind: PeerKind, from: SocketAddr) -> bool {
    kind == PeerKind::Member || from.ip().is_loopback()
}

/// The answer to one request (blocking: reads files).
pub fn answer(shared: &Shared, req: Request) -> Response {
    match req {
        Request::Chunk { wire, root, index } => {
            let r = answer_chunk(shared, &wire, &root, index);
            match &r {
                Response::Chunk(d) => shared.metrics.served_chunk(d.len()),
                Response::NotCached => shared.metrics.served_not_cached(),
                _ => shared.metrics.served_refused(),
            }
            r
        }
        Request::Adverts { have } => {
            shared.metrics.served_adverts();
            let a = shared.adverts();
            if have == a.version {
                Response::AdvertsUnchanged { version: a.version }
            } else {
                Response::Adverts {
                    version: a.version,
                    files: a.files.clone(),
                }
            }
        }
        Request::Status => Response::Status(shared.status_json()),
    }
}

fn answer_chunk(shared: &Shared, wire: &str, root: &[u8; 32], index: u32) -> Response {
    let idx = shared.index();
    let entry = match idx.resolve(wire) {
        Ok(e) => e,
        Err(refusal) => return Response::Refused(refusal.to_string()),
    };
    if &entry.manifest.root != root {
        return Response::Refused(format!("refused: `{wire}` has different contents here"));
    }
    if index >= entry.manifest.chunk_count() {
        return Response::Refused(format!("refused: `{wire}` has no chunk {index}"));
    }
    let file = match idx.open(entry) {
        Ok(f) => f,
        Err(refusal) => return Response::Refused(refusal.to_string()),
    };
    let range = entry.manifest.chunk_range(index);
    let mut buf = vec![0u8; (range.end - range.start) as usize];
    match crate::cache::read_cached(&file, range.start, &mut buf) {
        Ok(n) if n == buf.len() => {}
        // partly or not cached: never wait for the disk
        Ok(_) => return Response::NotCached,
        Err(e) => return Response::Refused(format!("refused: reading `{wire}`: {e}")),
    }
    if shared.tamper {
        // test-only (`--tamper`): a peer that lies about content
        buf[0] ^= 0xff;
    }
    Response::Chunk(buf)
}
