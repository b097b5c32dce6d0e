//! The data channel's messages: a frame is a 4-byte big-endian length and a
//! body; a body is a tag byte and fields (integers big-endian, strings and
//! byte strings with a 4-byte length). One request, one response, in order,
//! on a TCP connection that may carry many.
//!
//! Hand-written rather than serde so that every length is checked against
//! the frame before anything is allocated: a peer cannot make another
//! allocate more than [`MAX_FRAME_BYTES`].

use crate::error::{Error, Result};
use crate::manifest::{Hash, MAX_CHUNK_BYTES};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest frame accepted: a chunk of the largest size plus headroom,
/// or an advertisement list.
pub const MAX_FRAME_BYTES: u32 = MAX_CHUNK_BYTES + 64 * 1024;

/// A request to a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Chunk `index` of file `wire`, only if the peer's copy has manifest
    /// root `root` and the chunk is in its page cache.
    Chunk {
        /// File name on the wire (`ROOT/relative/path`).
        wire: String,
        /// The asker's manifest root.
        root: Hash,
        /// Chunk index.
        index: u32,
    },
    /// The peer's advertisement, unless its version is still `have`.
    Adverts {
        /// The version the asker holds (0: none).
        have: u64,
    },
    /// The peer's members and metrics as JSON.
    Status,
}

/// One advertised file: resident in the peer's page cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advert {
    /// File name on the wire.
    pub wire: String,
    /// Its manifest root.
    pub root: Hash,
}

/// A peer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The chunk's bytes.
    Chunk(Vec<u8>),
    /// The chunk is not (wholly) in the peer's page cache.
    NotCached,
    /// The peer will not serve this: the reason.
    Refused(String),
    /// The peer's advertised files at `version`.
    Adverts {
        /// Version of the list (grows when it changes).
        version: u64,
        /// The files.
        files: Vec<Advert>,
    },
    /// The asker's version is current.
    AdvertsUnchanged {
        /// The current version.
        version: u64,
    },
    /// JSON status.
    Status(String),
}

/// The largest request a server reads: a chunk request with the longest
/// name (4 KiB) and room to spare. A request is small, so a peer that
/// sends large or slow frames ties up little memory.
pub const MAX_REQUEST_BYTES: u32 = 8 * 1024;

/// Read one frame of at most [`MAX_FRAME_BYTES`]; `None` at a clean end
/// of the stream.
pub async fn read_frame(r: &mut (impl AsyncRead + Unpin)) -> Result<Option<Vec<u8>>> {
    match read_len(r, MAX_FRAME_BYTES).await? {
        None => Ok(None),
        Some(len) => read_body(r, len).await.map(Some),
    }
}

/// Read one response frame of at most [`MAX_FRAME_BYTES`]; `None` at a
/// clean end of the stream. A chunk's bytes are read straight into the
/// buffer the response holds, not into a frame buffer and copied out (a
/// 128 KiB allocation and copy less per remote read); anything else is
/// decoded by [`Response::decode`].
pub async fn read_response(r: &mut (impl AsyncRead + Unpin)) -> Result<Option<Response>> {
    let Some(len) = read_len(r, MAX_FRAME_BYTES).await? else {
        return Ok(None);
    };
    let err = |e: std::io::Error| Error::Protocol(format!("reading a frame of {len} bytes: {e}"));
    if len < 5 {
        return Response::decode(&read_body(r, len).await?).map(Some);
    }
    let mut head = [0u8; 5];
    r.read_exact(&mut head).await.map_err(err)?;
    if head[0] == 1 {
        // tag 1, then the chunk's length, which must fill the frame
        let n = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        if u64::from(n) + 5 != u64::from(len) {
            return Err(Error::Protocol(format!(
                "a chunk of {n} bytes in a frame of {len}"
            )));
        }
        let mut data = vec![0u8; n as usize];
        r.read_exact(&mut data).await.map_err(err)?;
        return Ok(Some(Response::Chunk(data)));
    }
    let mut body = vec![0u8; len as usize];
    body[..5].copy_from_slice(&head);
    r.read_exact(&mut body[5..]).await.map_err(err)?;
    Response::decode(&body).map(Some)
}

/// Read a frame's 4-byte length, refusing more than `max`; `None` at a
/// clean end of the stream.
pub async fn read_len(r: &mut (impl AsyncRead + Unpin), max: u32) -> Result<Option<u32>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::Protocol(format!("reading a frame: {e}"))),
    }
    let len = u32::from_be_bytes(len);
    if len > max {
        return Err(Error::Protocol(format!(
            "frame of {len} bytes is larger than {max}"
        )));
    }
    Ok(Some(len))
}

/// Read a frame's body of `len` bytes (already checked against a limit).
pub async fn read_body(r: &mut (impl AsyncRead + Unpin), len: u32) -> Result<Vec<u8>> {
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)
        .await
        .map_err(|e| Error::Protocol(format!("reading a frame of {len} bytes: {e}")))?;
    Ok(body)
}

/// Write a whole frame (length prefix and body, as [`Response::encode_frame`]
/// makes), then flush: TLS buffers records, so push them out now.
pub async fn write_encoded_frame(w: &mut (impl AsyncWrite + Unpin), frame: &[u8]) -> Result<()> {
    w.write_all(frame)
        .await
        .map_err(|e| Error::Protocol(format!("writing a frame: {e}")))?;
    w.flush()
        .await
        .map_err(|e| Error::Protocol(format!("writing a frame: {e}")))?;
    Ok(())
}

/// Write one frame.
pub async fn write_frame(w: &mut (impl AsyncWrite + Unpin), body: &[u8]) -> Result<()> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|l| *l <= MAX_FRAME_BYTES)
        .ok_or_else(|| Error::Protocol(format!("frame of {} bytes is too large", body.len())))?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    write_encoded_frame(w, &out).await
}

impl Request {
    /// Encode as a frame body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Request::Chunk { wire, root, index } => {
                b.push(1);
                put_bytes(&mut b, wire.as_bytes());
                b.extend_from_slice(root);
                b.extend_from_slice(&index.to_be_bytes());
            }
            Request::Adverts { have } => {
                b.push(2);
                b.extend_from_slice(&have.to_be_bytes());
            }
            Request::Status => b.push(3),
        }
        b
    }

    /// Decode a frame body.
    pub fn decode(body: &[u8]) -> Result<Request> {
        let mut d = Decoder(body);
        let r = match d.u8()? {
            1 => Request::Chunk {
                wire: d.string()?,
                root: d.hash()?,
                index: d.u32()?,
            },
            2 => Request::Adverts { have: d.u64()? },
            3 => Request::Status,
            t => return Err(Error::Protocol(format!("unknown request tag {t}"))),
        };
        d.end()?;
        Ok(r)
    }
}

impl Response {
    /// Encode as a frame body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        self.encode_into(&mut b);
        b
    }

    /// Encode as a whole frame, length prefix and body in one buffer: a
    /// chunk's bytes are copied once (the body, then the frame, was a copy
    /// each, about 10 µs per 128 KiB on the server of every read).
    pub fn encode_frame(&self) -> Result<Vec<u8>> {
        let hint = match self {
            Response::Chunk(data) => data.len() + 16,
            _ => 64,
        };
        let mut b = Vec::with_capacity(hint);
        b.extend_from_slice(&[0; 4]);
        self.encode_into(&mut b);
        let len = u32::try_from(b.len() - 4)
            .ok()
            .filter(|l| *l <= MAX_FRAME_BYTES)
            .ok_or_else(|| {
                Error::Protocol(format!("frame of {} bytes is too large", b.len() - 4))
            })?;
        b[..4].copy_from_slice(&len.to_be_bytes());
        Ok(b)
    }

    fn encode_into(&self, b: &mut Vec<u8>) {
        match self {
            Response::Chunk(data) => {
                b.push(1);
                put_bytes(b, data);
            }
            Response::NotCached => b.push(2),
            Response::Refused(why) => {
                b.push(3);
                put_bytes(b, why.as_bytes());
            }
            Response::Adverts { version, files } => {
                b.push(4);
                b.extend_from_slice(&version.to_be_bytes());
                b.extend_from_slice(&(files.len() as u32).to_be_bytes());
                for f in files {
                    put_bytes(b, f.wire.as_bytes());
                    b.extend_from_slice(&f.root);
                }
            }
            Response::AdvertsUnchanged { version } => {
                b.push(5);
                b.extend_from_slice(&version.to_be_bytes());
            }
            Response::Status(json) => {
                b.push(6);
                put_bytes(b, json.as_bytes());
            }
        }
    }

    /// Decode a frame body.
    pub fn decode(body: &[u8]) -> Result<Response> {
        let mut d = Decoder(body);
        let r = match d.u8()? {
            1 => Response::Chunk(d.bytes()?.to_vec()),
            2 => Response::NotCached,
            3 => Response::Refused(d.string()?),
            4 => {
                let version = d.u64()?;
                let n = d.u32()?;
                // each entry takes at least 4 + 32 bytes: a count the frame
                // cannot hold is an error before any allocation
                if u64::from(n) * 36 > d.0.len() as u64 {
                    return Err(Error::Protocol(format!(
                        "advert count {n} exceeds the frame"
                    )));
                }
                let mut files = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    files.push(Advert {
                        wire: d.string()?,
                        root: d.hash()?,
                    });
                }
                Response::Adverts { version, files }
            }
            5 => Response::AdvertsUnchanged { version: d.u64()? },
            6 => Response::Status(d.string()?),
            t => return Err(Error::Protocol(format!("unknown response tag {t}"))),
        };
        d.end()?;
        Ok(r)
    }
}

fn put_bytes(b: &mut Vec<u8>, s: &[u8]) {
    b.extend_from_slice(&(s.len() as u32).to_be_bytes());
    b.extend_from_slice(s);
}

struct Decoder<'a>(&'a [u8]);

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::Protocol(format!(
                "message cut short: {n} bytes needed, {} left",
                self.0.len()
            )));
        }
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn hash(&mut self) -> Result<Hash> {
        Ok(self.take(32)?.try_into().expect("32 bytes"))
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?.to_vec())
            .map_err(|_| Error::Protocol("a string is not UTF-8".into()))
    }
    fn end(&self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::Protocol(format!("{} trailing bytes", self.0.len())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let reqs = [
            Request::Chunk {
                wire: "usr/bin/ls".into(),
                root: [9; 32],
                index: 77,
            },
            Request::Adverts { have: 5 },
            Request::Status,
        ];
        for r in reqs {
            assert_eq!(Request::decode(&r.encode()).unwrap(), r);
        }
        let resps = [
            Response::Chunk(vec![1, 2, 3]),
            Response::NotCached,
            Response::Refused("no".into()),
            Response::Adverts {
                version: 3,
                files: vec![
                    Advert {
                        wire: "a/b".into(),
                        root: [1; 32],
                    },
                    Advert {
                        wire: "a/c".into(),
                        root: [2; 32],
                    },
                ],
            },
            Response::AdvertsUnchanged { version: 4 },
            Response::Status("{}".into()),
        ];
        for r in resps {
            assert_eq!(Response::decode(&r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn layout_by_hand_and_malformed_input() {
        // tag 1, length 3, "a/b", 32 × 0xee, index 2
        let mut want = vec![1, 0, 0, 0, 3, b'a', b'/', b'b'];
        want.extend([0xee; 32]);
        want.extend([0, 0, 0, 2]);
        let r = Request::Chunk {
            wire: "a/b".into(),
            root: [0xee; 32],
            index: 2,
        };
        assert_eq!(r.encode(), want);
        for cut in 0..want.len() {
            assert!(Request::decode(&want[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = want.clone();
        long.push(0);
        assert!(Request::decode(&long)
            .unwrap_err()
            .to_string()
            .contains("trailing"));
        assert!(Request::decode(&[9])
            .unwrap_err()
            .to_string()
            .contains("tag 9"));
        // an advert count far beyond the frame fails before allocating
        let mut huge = vec![4];
        huge.extend(1u64.to_be_bytes());
        huge.extend(u32::MAX.to_be_bytes());
        assert!(Response::decode(&huge)
            .unwrap_err()
            .to_string()
            .contains("exceeds"));
        // a string length beyond the frame
        let bad = [3, 0xff, 0xff, 0xff, 0xff, b'x'];
        assert!(Response::decode(&bad).is_err());
    }

    #[tokio::test]
    async fn responses_read_from_a_stream_decode_as_frames_do() {
        let resps = [
            Response::Chunk(vec![7; 1000]),
            Response::Chunk(Vec::new()),
            Response::NotCached,
            Response::Refused("no".into()),
            Response::AdvertsUnchanged { version: 4 },
            Response::Status("{}".into()),
        ];
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        for r in &resps {
            let frame = r.encode_frame().unwrap();
            // the one-buffer frame is the length and the body, by hand
            let body = r.encode();
            assert_eq!(frame[..4], (body.len() as u32).to_be_bytes());
            assert_eq!(frame[4..], body[..]);
            write_encoded_frame(&mut a, &frame).await.unwrap();
        }
        drop(a);
        for r in &resps {
            assert_eq!(read_response(&mut b).await.unwrap().as_ref(), Some(r));
        }
        assert!(read_response(&mut b).await.unwrap().is_none());
        // a chunk whose length does not fill its frame, either way
        for (n, frame_len) in [(3u32, 9u32), (5, 9), (u32::MAX, 9)] {
            let (mut a, mut b) = tokio::io::duplex(64);
            let mut f = frame_len.to_be_bytes().to_vec();
            f.push(1);
            f.extend(n.to_be_bytes());
            f.extend([0; 4]);
            a.write_all(&f).await.unwrap();
            assert!(read_response(&mut b)
                .await
                .unwrap_err()
                .to_string()
                .contains("in a frame of 9"));
        }
        // a frame cut short, and one longer than allowed
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&[0, 0, 0, 9, 1, 0, 0, 0, 4, 1]).await.unwrap();
        drop(a);
        assert!(read_response(&mut b).await.is_err());
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&(MAX_FRAME_BYTES + 1).to_be_bytes())
            .await
            .unwrap();
        assert!(read_response(&mut b).await.is_err());
    }

    #[tokio::test]
    async fn frames_over_a_stream() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        write_frame(&mut a, b"hello").await.unwrap();
        write_frame(&mut a, b"").await.unwrap();
        drop(a);
        assert_eq!(read_frame(&mut b).await.unwrap().unwrap(), b"hello");
        assert_eq!(read_frame(&mut b).await.unwrap().unwrap(), b"");
        assert!(read_frame(&mut b).await.unwrap().is_none());
        // a server reads requests of at most 8 KiB: a larger length is
        // refused before anything is allocated
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&(MAX_REQUEST_BYTES + 1).to_be_bytes())
            .await
            .unwrap();
        assert!(read_len(&mut b, MAX_REQUEST_BYTES).await.is_err());
        let longest = Request::Chunk {
            wire: "a".repeat(crate::index::MAX_WIRE_BYTES),
            root: [0; 32],
            index: u32::MAX,
        };
        assert!(longest.encode().len() <= MAX_REQUEST_BYTES as usize);
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&(MAX_FRAME_BYTES + 1).to_be_bytes())
            .await
            .unwrap();
        assert!(read_frame(&mut b)
            .await
            .unwrap_err()
            .to_string()
            .contains("larger"));
    }
}
