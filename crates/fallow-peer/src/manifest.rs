//! Manifests: a file cut into fixed-size chunks, each with its BLAKE3 hash,
//! and a root hash over the size, the chunk size and the chunk hashes. Two
//! machines hold the same file exactly when their roots match; a chunk a
//! peer sends is accepted only if its hash equals the one in the local
//! manifest, computed while the local disk was awake, so a peer can never
//! make a read return bytes the local disk does not hold.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::path::Path;

/// A BLAKE3 hash.
pub type Hash = [u8; 32];

/// The default chunk size: 128 KiB, the largest read the kernel sends a
/// FUSE file system by default, so one read is usually one chunk.
pub const DEFAULT_CHUNK_BYTES: u32 = 128 * 1024;

/// The largest chunk size accepted (and so the largest chunk reply).
pub const MAX_CHUNK_BYTES: u32 = 16 * 1024 * 1024;

/// The chunk hashes of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// File size, bytes.
    pub size_bytes: u64,
    /// Chunk size, bytes (the last chunk may be shorter).
    pub chunk_bytes: u32,
    /// BLAKE3 of each chunk, in file order.
    pub chunks: Vec<Hash>,
    /// BLAKE3 over the size, the chunk size and the chunk hashes.
    pub root: Hash,
}

impl Manifest {
    /// Hash everything `r` yields, `chunk_bytes` at a time.
    pub fn from_reader(mut r: impl Read, chunk_bytes: u32) -> io::Result<Manifest> {
        check_chunk_bytes(chunk_bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut buf = vec![0u8; chunk_bytes as usize];
        let mut chunks = Vec::new();
        let mut size_bytes = 0u64;
        loop {
            let n = read_full(&mut r, &mut buf)?;
            if n == 0 {
                break;
            }
            chunks.push(*blake3::hash(&buf[..n]).as_bytes());
            size_bytes += n as u64;
            if n < buf.len() {
                break;
            }
        }
        Ok(Manifest::from_chunks(size_bytes, chunk_bytes, chunks))
    }

    /// Hash a file.
    pub fn of_file(path: &Path, chunk_bytes: u32) -> Result<Manifest> {
        let f = File::open(path).map_err(|e| Error::io(path, e))?;
        Manifest::from_reader(io::BufReader::with_capacity(1 << 20, f), chunk_bytes)
            .map_err(|e| Error::io(path, e))
    }

    /// A manifest from its chunk hashes (the root is computed).
    pub fn from_chunks(size_bytes: u64, chunk_bytes: u32, chunks: Vec<Hash>) -> Manifest {
        let root = root_of(size_bytes, chunk_bytes, &chunks);
        Manifest {
            size_bytes,
            chunk_bytes,
            chunks,
            root,
        }
    }

    /// Number of chunks.
    pub fn chunk_count(&self) -> u32 {
        self.chunks.len() as u32
    }

    /// Byte range of chunk `i` in the file.
    pub fn chunk_range(&self, i: u32) -> Range<u64> {
        let start = u64::from(i) * u64::from(self.chunk_bytes);
        let end = (start + u64::from(self.chunk_bytes)).min(self.size_bytes);
        start.min(end)..end
    }

    /// The chunks a byte range touches (empty past the end).
    pub fn chunks_for(&self, offset: u64, len: u64) -> Range<u32> {
        let end = offset.saturating_add(len).min(self.size_bytes);
        if len == 0 || offset >= end {
            return 0..0;
        }
        let c = u64::from(self.chunk_bytes);
        (offset / c) as u32..end.div_ceil(c) as u32
    }

    /// True when `data` is exactly chunk `i` of this file.
    pub fn verify(&self, i: u32, data: &[u8]) -> bool {
        let Some(want) = self.chunks.get(i as usize) else {
            return false;
        };
        let r = self.chunk_range(i);
        data.len() as u64 == r.end - r.start && blake3::hash(data).as_bytes() == want
    }
}

/// The root hash: a domain-separated BLAKE3 over the size, the chunk size
/// and every chunk hash, so files that differ in length or chunking never
/// share a root.
pub fn root_of(size_bytes: u64, chunk_bytes: u32, chunks: &[Hash]) -> Hash {
    let mut h = blake3::Hasher::new_derive_key("fallow-peer manifest v1");
    h.update(&size_bytes.to_le_bytes());
    h.update(&chunk_bytes.to_le_bytes());
    for c in chunks {
        h.update(c);
    }
    *h.finalize().as_bytes()
}

/// Check a chunk size: a positive multiple of 4 KiB up to
/// [`MAX_CHUNK_BYTES`] (page-aligned, so residency and O_DIRECT reads line
/// up with chunks).
pub fn check_chunk_bytes(chunk_bytes: u32) -> Result<()> {
    if chunk_bytes == 0 || chunk_bytes % 4096 != 0 || chunk_bytes > MAX_CHUNK_BYTES {
        return Err(Error::invalid(
            "chunk size",
            format!(
                "{chunk_bytes} bytes: must be a positive multiple of 4 KiB up to {} MiB",
                MAX_CHUNK_BYTES >> 20
            ),
        ));
    }
    Ok(())
}

/// A hash as 64 hex digits.
pub fn hex(hash: &Hash) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// Read until `buf` is full or the end of the input.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: u32 = 4096;

    #[test]
    fn chunks_and_ranges_by_hand() {
        // 10,000 bytes in 4 KiB chunks: 4096 + 4096 + 1808
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let m = Manifest::from_reader(&data[..], C).unwrap();
        assert_eq!(m.size_bytes, 10_000);
        assert_eq!(m.chunk_count(), 3);
        assert_eq!(m.chunk_range(2), 8192..10_000);
        assert_eq!(m.chunks[1], *blake3::hash(&data[4096..8192]).as_bytes());
        assert!(m.verify(2, &data[8192..]));
        assert!(!m.verify(2, &data[8192..9999]), "short chunk");
        assert!(!m.verify(1, &data[8192..]), "wrong index");
        assert!(!m.verify(3, &data[8192..]), "past the end");
        let mut bad = data[4096..8192].to_vec();
        bad[17] ^= 1;
        assert!(!m.verify(1, &bad), "one flipped bit");
        assert_eq!(m.chunks_for(0, 1), 0..1);
        assert_eq!(m.chunks_for(4095, 2), 0..2);
        assert_eq!(m.chunks_for(4096, 4096), 1..2);
        assert_eq!(m.chunks_for(9000, 5000), 2..3);
        assert_eq!(m.chunks_for(10_000, 10), 0..0);
        assert_eq!(m.chunks_for(5, 0), 0..0);
    }

    #[test]
    fn roots_separate_size_chunking_and_content() {
        let a = Manifest::from_reader(&[1u8; 8192][..], C).unwrap();
        let b = Manifest::from_reader(&[1u8; 8192][..], 8192).unwrap();
        let c = Manifest::from_reader(&[1u8; 8191][..], C).unwrap();
        let mut d = [1u8; 8192];
        d[8191] = 2;
        let d = Manifest::from_reader(&d[..], C).unwrap();
        let roots = [a.root, b.root, c.root, d.root];
        for i in 0..4 {
            for j in i + 1..4 {
                assert_ne!(roots[i], roots[j], "{i} {j}");
            }
        }
        assert_eq!(a, Manifest::from_reader(&[1u8; 8192][..], C).unwrap());
        let empty = Manifest::from_reader(&[][..], C).unwrap();
        assert_eq!((empty.size_bytes, empty.chunk_count()), (0, 0));
    }

    #[test]
    fn chunk_sizes_are_checked() {
        assert!(check_chunk_bytes(128 * 1024).is_ok());
        for bad in [0, 1000, MAX_CHUNK_BYTES + 4096] {
            let e = check_chunk_bytes(bad).unwrap_err().to_string();
            assert!(e.contains("chunk size"), "{e}");
        }
        assert_eq!(hex(&[0xab; 32]).len(), 64);
    }
}
