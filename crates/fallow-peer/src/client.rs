//! The asking side of the data channel: one request, one response, with a
//! deadline covering connect, send and receive; connections are kept per
//! peer and reused, and dropped after any error or timeout (a late answer
//! must never be read as the answer to the next request).

use crate::error::{Error, Result};
use crate::proto::{read_response, write_frame, Request, Response};
use crate::transport::{Conn, Transport};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

/// Idle connections kept per peer.
const POOL_PER_PEER: usize = 8;

/// Idle connections kept in all: each holds a descriptor, and the fleet
/// may be large (the descriptor reserve of [`crate::node::FD_RESERVE`]).
const POOL_TOTAL: usize = 64;

/// A client of peers' data channels.
pub struct Client {
    pool: Mutex<HashMap<SocketAddr, Vec<Conn>>>,
    transport: Transport,
    /// Deadline of one request.
    pub timeout: Duration,
}

/// Why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// No complete answer before the deadline.
    Timeout,
    /// The connection failed or the answer was malformed.
    Failed,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.transport)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Client {
    /// A client whose requests time out after `timeout` (connect, TLS
    /// handshake, send and receive together).
    pub fn new(timeout: Duration, transport: Transport) -> Client {
        Client {
            pool: Mutex::new(HashMap::new()),
            transport,
            timeout,
        }
    }

    /// Send `req` to `addr` and wait for the answer.
    pub async fn call(&self, addr: SocketAddr, req: &Request) -> Result<Response> {
        self.call_classified(addr, req)
            .await
            .map_err(|(kind, msg)| Error::Peer {
                addr,
                message: match kind {
                    CallError::Timeout => format!("no answer within {:?}", self.timeout),
                    CallError::Failed if !self.transport.is_tls() => {
                        format!("{msg} (a fleet with keys speaks TLS only: pass --keys NODE_DIR)")
                    }
                    CallError::Failed => msg,
                },
            })
    }

    /// [`Client::call`] with the failure's kind.
    pub async fn call_classified(
        &self,
        addr: SocketAddr,
        req: &Request,
    ) -> Result<Response, (CallError, String)> {
        let body = req.encode();
        let pooled = self
            .pool
            .lock()
            .expect("pool lock")
            .get_mut(&addr)
            .and_then(Vec::pop);
        let fut = async {
            // a pooled connection may have been closed by the peer since
            // (idle limit, restart): one retry on a fresh connection
            let reused = pooled.is_some();
            match exchange(&self.transport, addr, pooled, &body).await {
                Err(_) if reused => exchange(&self.transport, addr, None, &body).await,
                r => r,
            }
        };
        match tokio::time::timeout(self.timeout, fut).await {
            Err(_) => Err((CallError::Timeout, "timeout".into())),
            Ok(Err(msg)) => Err((CallError::Failed, msg)),
            Ok(Ok((conn, resp))) => {
                let mut pool = self.pool.lock().expect("pool lock");
                let total: usize = pool.values().map(Vec::len).sum();
                let v = pool.entry(addr).or_default();
                if v.len() < POOL_PER_PEER && total < POOL_TOTAL {
                    v.push(conn);
                }
                Ok(resp)
            }
        }
    }

    /// Forget idle connections to `addr` (it left or crashed).
    pub fn forget(&self, addr: SocketAddr) {
        self.pool.lock().expect("pool lock").remove(&addr);
    }
}

/// One request and its answer on `conn` (or a new connection).
async fn exchange(
    transport: &Transport,
    addr: SocketAddr,
    conn: Option<Conn>,
    body: &[u8],
) -> Result<(Conn, Response), String> {
    let mut conn = match conn {
        Some(c) => c,
        None => transport.connect(addr).await?,
    };
    write_frame(&mut conn, body)
        .await
        .map_err(|e| e.to_string())?;
    let resp = read_response(&mut conn)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "connection closed before the answer".to_string())?;
    Ok((conn, resp))
}
