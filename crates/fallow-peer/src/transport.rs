//! The data channel's connections: mutual TLS with the fleet's
//! credentials ([`crate::keys`]), or plain TCP for a node without keys,
//! which [`crate::node::Node::start`] allows on loopback only.
//!
//! A TLS server requires a client certificate signed by the fleet CA that
//! names the address the connection comes from; a TLS client requires the
//! server's certificate to name the address it dialled. The identity of a
//! member on the data channel is so bound to its key and to its real
//! address.

use crate::keys::{cert_names_ip, NodeKeys};
use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A byte stream a frame can be read from and written to.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// An established connection, TLS or plain.
pub type Conn = Box<dyn Stream>;

/// Who is at the other end of an accepted connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    /// A fleet member: a CA-signed certificate naming the source address.
    Member,
    /// No credentials, from a loopback address (a node without keys).
    Loopback,
}

/// How connections are made and accepted.
#[derive(Clone)]
pub struct Transport {
    keys: Option<NodeKeys>,
    connector: Option<tokio_rustls::TlsConnector>,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("tls", &self.keys.is_some())
            .finish()
    }
}

impl Transport {
    /// Plain TCP (loopback only).
    pub fn plain() -> Transport {
        Transport {
            keys: None,
            connector: None,
            acceptor: None,
        }
    }

    /// Mutual TLS with `keys`.
    pub fn tls(keys: NodeKeys) -> Transport {
        Transport {
            connector: Some(tokio_rustls::TlsConnector::from(keys.client.clone())),
            acceptor: Some(tokio_rustls::TlsAcceptor::from(keys.server.clone())),
            keys: Some(keys),
        }
    }

    /// The credentials, if any.
    pub fn keys(&self) -> Option<&NodeKeys> {
        self.keys.as_ref()
    }

    /// True with TLS.
    pub fn is_tls(&self) -> bool {
        self.keys.is_some()
    }

    /// Connect to `addr` (and complete the TLS handshake). The caller
    /// bounds the time.
    pub async fn connect(&self, addr: SocketAddr) -> Result<Conn, String> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connecting: {e}"))?;
        let _ = tcp.set_nodelay(true);
        match &self.connector {
            None => Ok(Box::new(tcp)),
            Some(c) => {
                let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
                let tls = c
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS handshake: {e}"))?;
                Ok(Box::new(tls))
            }
        }
    }

    /// Complete an accepted connection from `from`: the TLS handshake and
    /// the check that the client's certificate names `from`'s address; a
    /// plain connection only from loopback. The caller bounds the time.
    pub async fn accept(
        &self,
        tcp: TcpStream,
        from: SocketAddr,
    ) -> Result<(Conn, PeerKind), String> {
        let _ = tcp.set_nodelay(true);
        match &self.acceptor {
            None if from.ip().is_loopback() => Ok((Box::new(tcp), PeerKind::Loopback)),
            None => Err(format!("{from}: plain connection from off loopback")),
            Some(a) => {
                let tls = a
                    .accept(tcp)
                    .await
                    .map_err(|e| format!("{from}: TLS handshake: {e}"))?;
                let names_source = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .is_some_and(|leaf| cert_names_ip(leaf, from.ip()));
                if !names_source {
                    return Err(format!(
                        "{from}: the client's certificate does not name its address"
                    ));
                }
                Ok((Box::new(tls), PeerKind::Member))
            }
        }
    }
}
