//! The serving side of the data channel: chunks of whitelisted files, and
//! only from the page cache, so serving a peer never spins up this node's
//! disk (SARD seed §III: peers help with what they hold in memory).
//! Requests name files as the index does; anything else is refused.

use crate::node::Shared;
use crate::proto::{read_frame, write_frame, Request, Response};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// A connection idle this long is closed.
const IDLE_LIMIT: Duration = Duration::from_secs(120);

/// Accept connections until the runtime shuts down.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // out of descriptors or similar: back off, keep serving
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(stream, shared.clone()));
    }
}

async fn connection(mut stream: TcpStream, shared: Arc<Shared>) {
    loop {
        let frame = match tokio::time::timeout(IDLE_LIMIT, read_frame(&mut stream)).await {
            Ok(Ok(Some(f))) => f,
            // idle, closed, or malformed: drop the connection
            _ => return,
        };
        let resp = match Request::decode(&frame) {
            Err(e) => Response::Refused(e.to_string()),
            Ok(req) => {
                if matches!(req, Request::Chunk { .. }) && !shared.serve_delay.is_zero() {
                    tokio::time::sleep(shared.serve_delay).await;
                }
                let s = shared.clone();
                match tokio::task::spawn_blocking(move || answer(&s, req)).await {
                    Ok(r) => r,
                    Err(_) => return,
                }
            }
        };
        if write_frame(&mut stream, &resp.encode()).await.is_err() {
            return;
        }
    }
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
