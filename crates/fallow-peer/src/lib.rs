//! The SARD peer service (`fallow peer`): serve application files from
//! peers' memory while the local disk sleeps.
//!
//! SARD (Wang, Butt, Gniady, Bhattacharjee) observes that the
//! binaries and libraries a desktop reads are, in a lab or office, in many
//! other machines' page caches; while the local disk is spun down, a read
//! for them can be served by a peer instead of waking the disk. The energy
//! simulation (`fallow energy`, `fallow_core::energy`) measures what that
//! saves on traces; this crate does it for real.
//!
//! ## Tour
//! - [`index`]: the whitelist — configured application directories, each
//!   regular file's [`manifest::Manifest`] (BLAKE3 per 128 KiB chunk and a
//!   root hash), computed while the disk is awake; the one place a
//!   requested name becomes a file ([`index::Index::resolve`], `openat2`
//!   beneath the root, no symbolic links).
//! - [`cache`]: page-cache residency (`cachestat(2)`, else `mincore(2)`)
//!   and reads that never touch the disk (`preadv2(RWF_NOWAIT)` after a
//!   residency check).
//! - [`proto`], [`server`], [`client`]: the data channel — length-prefixed
//!   requests for a chunk, a peer's advertisement, or its status, over TCP.
//! - [`keys`], [`seal`], [`transport`]: the fleet's credentials (a CA
//!   and node certificates), sealed gossip, and mutual TLS on the data
//!   channel.
//! - [`membership`]: full membership with `foca` (SWIM + gossip) on UDP;
//!   gossip also carries each node's advertisement version, and
//!   [`peers::PeerTable`] fetches the lists and answers "who holds file F
//!   with root R".
//! - [`disk`]: the local disk's power state — a real drive (ATA CHECK POWER
//!   MODE), or an emulated one following the energy simulation's timeout
//!   model — and the standalone shadow that counts spin-ups avoided.
//! - [`overlay`] and [`fuse`]: the read path (page cache → spinning disk →
//!   verified chunks from peers → the disk as fallback) and the read-only
//!   FUSE mount around it.
//! - [`node`]: one node's tasks put together; [`metrics`]: its counters;
//!   [`bench`]: remote fetches against local `O_DIRECT` reads.
//! - [`settings`]: a node's settings from flags, the `[peer]` table of
//!   fallow's config file and the defaults, by the one precedence of
//!   `fallow_core::settings`.
//!
//! ## Example
//! ```
//! use fallow_peer::index::{Index, Refusal, Root};
//! use fallow_peer::manifest::Manifest;
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::create_dir(dir.path().join("bin"))?;
//! std::fs::write(dir.path().join("bin/tool"), vec![7u8; 300_000])?;
//! let root = Root::parse(&format!("app={}", dir.path().display()))?;
//! let index = Index::build(&[root], 128 * 1024, None)?;
//!
//! // a peer may ask for whitelisted names only
//! let entry = index.resolve("app/bin/tool").unwrap();
//! assert_eq!(entry.manifest.chunk_count(), 3); // 128 KiB + 128 KiB + 37,856 bytes
//! assert!(matches!(index.resolve("app/../etc/passwd"), Err(Refusal::BadPath(_))));
//! assert!(matches!(index.resolve("etc/passwd"), Err(Refusal::NotIndexed(_))));
//!
//! // a chunk from a peer is accepted only if it hashes as the local one
//! let good = vec![7u8; 131_072];
//! let mut bad = good.clone();
//! bad[0] ^= 1;
//! assert!(entry.manifest.verify(0, &good));
//! assert!(!entry.manifest.verify(0, &bad));
//! assert_eq!(Manifest::from_reader(&vec![7u8; 300_000][..], 128 * 1024)?, entry.manifest);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
pub mod bench;
pub mod cache;
pub mod client;
pub mod disk;
pub mod error;
pub mod fuse;
pub mod index;
pub mod keys;
pub mod manifest;
pub mod membership;
pub mod metrics;
pub mod node;
pub mod overlay;
pub mod peers;
pub mod proto;
pub mod seal;
pub mod server;
pub mod settings;
mod sys;
pub mod transport;

pub use error::{Error, Result};
