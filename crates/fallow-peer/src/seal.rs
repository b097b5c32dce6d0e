//! Authenticated encryption of every gossip datagram with the fleet's
//! gossip key, before the membership library sees a byte of it: an
//! outsider can neither read the membership nor join, probe, or declare a
//! member down.
//!
//! The scheme is HashiCorp memberlist's keyring (`security.go`: a version
//! byte, a random nonce, AES-GCM under the primary key; every key of the
//! ring tried on receipt) with two changes: the first byte names the key
//! that sealed the packet, so the receiver tries one key rather than all,
//! and the cipher is XChaCha20-Poly1305 (`chacha20poly1305` crate; a
//! 24-byte random nonce, so random nonces never repeat in practice). The
//! sender's clock is sealed in too, and a packet more than
//! [`MAX_SKEW`] old or early is dropped, which bounds how long a recorded
//! packet can be replayed.
//!
//! Rotation (accept old and new during a roll): every node first gets the
//! new key as a second line (it still seals with the old one and opens
//! both), then the new key is moved first (it seals with the new one), then
//! the old line is removed. A running node re-reads its key file when it
//! changes ([`crate::membership`]), so no step needs a restart.

use crate::error::{Error, Result};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Nonce length, bytes.
const NONCE_BYTES: usize = 24;
/// Poly1305 tag, bytes.
const TAG_BYTES: usize = 16;
/// Sealing adds: key id, nonce, timestamp (8 bytes, inside the
/// ciphertext), tag.
pub const OVERHEAD_BYTES: usize = 1 + NONCE_BYTES + 8 + TAG_BYTES;
/// Packets sealed further than this from the receiver's clock are dropped.
pub const MAX_SKEW: Duration = Duration::from_secs(60);
/// The most keys a ring holds.
pub const MAX_KEYS: usize = 8;

/// One gossip key: its id (the first byte of every packet it seals) and
/// the 32-byte secret.
#[derive(Clone)]
pub struct GossipKey {
    /// Key id, 0–255.
    pub id: u8,
    secret: [u8; 32],
}

impl std::fmt::Debug for GossipKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GossipKey({})", self.id)
    }
}

impl GossipKey {
    /// A key from its id and secret.
    pub fn new(id: u8, secret: [u8; 32]) -> GossipKey {
        GossipKey { id, secret }
    }

    /// A new random key.
    pub fn random(id: u8) -> GossipKey {
        let mut secret = [0u8; 32];
        rand::fill(&mut secret);
        GossipKey { id, secret }
    }

    /// `ID HEX` as in a key file.
    pub fn to_line(&self) -> String {
        format!("{} {}", self.id, crate::manifest::hex(&self.secret))
    }
}

/// The keys a node opens gossip with; the first seals.
#[derive(Debug, Clone)]
pub struct Keyring {
    keys: Vec<GossipKey>,
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsealed {
    /// Shorter than the overhead.
    Short,
    /// Sealed with a key id this ring does not have.
    UnknownKey,
    /// The tag does not verify: forged, corrupted, or another fleet's key.
    Forged,
    /// Sealed more than [`MAX_SKEW`] away from now.
    Stale,
}

impl Keyring {
    /// A ring from keys, the first sealing; ids must be distinct.
    pub fn new(keys: Vec<GossipKey>) -> Result<Keyring> {
        if keys.is_empty() || keys.len() > MAX_KEYS {
            return Err(Error::invalid(
                "gossip keys",
                format!("{} keys: want 1 to {MAX_KEYS}", keys.len()),
            ));
        }
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].iter().any(|o| o.id == k.id) {
                return Err(Error::invalid(
                    "gossip keys",
                    format!("key id {} appears twice", k.id),
                ));
            }
        }
        Ok(Keyring { keys })
    }

    /// The keys, sealing key first.
    pub fn keys(&self) -> &[GossipKey] {
        &self.keys
    }

    /// Parse a key file: one `ID HEX64` a line, the sealing key first;
    /// blank lines and `#` comments are skipped. `path` names the file in
    /// errors.
    pub fn parse(text: &str, path: &Path) -> Result<Keyring> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| {
                Error::invalid(
                    format!("{}:{}", path.display(), n + 1),
                    format!("{why} (want `ID HEX`: a key id 0-255 and 64 hex digits)"),
                )
            };
            let (id, hex) = line.split_once(' ').ok_or_else(|| bad("no key"))?;
            let id: u8 = id.parse().map_err(|_| bad("bad key id"))?;
            let hex = hex.trim();
            if hex.len() != 64 || !hex.is_ascii() {
                return Err(bad("the key is not 64 hex digits"));
            }
            let mut secret = [0u8; 32];
            for (i, b) in secret.iter_mut().enumerate() {
                *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                    .map_err(|_| bad("the key is not hex"))?;
            }
            keys.push(GossipKey { id, secret });
        }
        Keyring::new(keys).map_err(|e| match e {
            Error::Invalid { message, .. } => Error::invalid(path.display().to_string(), message),
            e => e,
        })
    }

    /// The key file's text.
    pub fn to_text(&self) -> String {
        let mut s = String::from("# fallow peer gossip keys: ID HEX, the first seals, all open\n");
        for k in &self.keys {
            s.push_str(&k.to_line());
            s.push('\n');
        }
        s
    }

    /// Seal `plain` with the first key.
    pub fn seal(&self, plain: &[u8]) -> Vec<u8> {
        self.seal_at(plain, now_ms())
    }

    fn seal_at(&self, plain: &[u8], at_ms: u64) -> Vec<u8> {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_BYTES];
        rand::fill(&mut nonce);
        let mut msg = Vec::with_capacity(8 + plain.len());
        msg.extend_from_slice(&at_ms.to_be_bytes());
        msg.extend_from_slice(plain);
        let cipher = XChaCha20Poly1305::new(chacha20poly1305::Key::from_slice(&key.secret));
        let aad = [key.id];
        let sealed = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &msg,
                    aad: &aad,
                },
            )
            .expect("encryption of a datagram-sized message cannot fail");
        let mut out = Vec::with_capacity(1 + NONCE_BYTES + sealed.len());
        out.push(key.id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// Open a sealed datagram: its plain text, or why it was dropped.
    pub fn open(&self, data: &[u8]) -> Result<Vec<u8>, Unsealed> {
        self.open_at(data, now_ms())
    }

    fn open_at(&self, data: &[u8], now_ms: u64) -> Result<Vec<u8>, Unsealed> {
        if data.len() < OVERHEAD_BYTES {
            return Err(Unsealed::Short);
        }
        let key = self
            .keys
            .iter()
            .find(|k| k.id == data[0])
            .ok_or(Unsealed::UnknownKey)?;
        let cipher = XChaCha20Poly1305::new(chacha20poly1305::Key::from_slice(&key.secret));
        let nonce = XNonce::from_slice(&data[1..1 + NONCE_BYTES]);
        let mut plain = cipher
            .decrypt(
                nonce,
                Payload {
                    msg: &data[1 + NONCE_BYTES..],
                    aad: &data[..1],
                },
            )
            .map_err(|_| Unsealed::Forged)?;
        let at_ms = u64::from_be_bytes(plain[..8].try_into().expect("8 bytes"));
        if at_ms.abs_diff(now_ms) > MAX_SKEW.as_millis() as u64 {
            return Err(Unsealed::Stale);
        }
        plain.drain(..8);
        Ok(plain)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_opens_and_refuses_forgeries() {
        let ring = Keyring::new(vec![GossipKey::random(1)]).unwrap();
        let msg = b"ping from 10.0.0.2";
        let s = ring.seal(msg);
        assert_eq!(s.len(), msg.len() + OVERHEAD_BYTES);
        // the plain text does not appear in the datagram
        assert!(!s.windows(msg.len()).any(|w| w == msg));
        assert_eq!(ring.open(&s).unwrap(), msg);
        // every single-bit flip anywhere is caught
        for i in 0..s.len() {
            let mut t = s.clone();
            t[i] ^= 0x10;
            assert!(ring.open(&t).is_err(), "flip at byte {i} accepted");
        }
        assert_eq!(ring.open(&s[..10]), Err(Unsealed::Short));
        // another fleet's key with the same id
        let other = Keyring::new(vec![GossipKey::random(1)]).unwrap();
        assert_eq!(other.open(&s), Err(Unsealed::Forged));
        let other_id = Keyring::new(vec![GossipKey::random(2)]).unwrap();
        assert_eq!(other_id.open(&s), Err(Unsealed::UnknownKey));
        // a recorded packet replayed after the skew window
        let t0 = now_ms();
        let old = ring.seal_at(msg, t0 - MAX_SKEW.as_millis() as u64 - 1000);
        assert_eq!(ring.open_at(&old, t0), Err(Unsealed::Stale));
        let recent = ring.seal_at(msg, t0 - 1000);
        assert_eq!(ring.open_at(&recent, t0).unwrap(), msg);
    }

    #[test]
    fn rotation_accepts_old_and_new_during_the_roll() {
        let old = GossipKey::random(1);
        let new = GossipKey::random(2);
        let before = Keyring::new(vec![old.clone()]).unwrap();
        let step1 = Keyring::new(vec![old.clone(), new.clone()]).unwrap();
        let step2 = Keyring::new(vec![new.clone(), old.clone()]).unwrap();
        let after = Keyring::new(vec![new.clone()]).unwrap();
        // in each step, every node of the previous and next step talks to it
        for (a, b) in [(&before, &step1), (&step1, &step2), (&step2, &after)] {
            assert!(b.open(&a.seal(b"x")).is_ok());
            assert!(a.open(&b.seal(b"x")).is_ok());
        }
        // but the two ends of the roll do not: the old key is gone
        assert_eq!(after.open(&before.seal(b"x")), Err(Unsealed::UnknownKey));
    }

    #[test]
    fn key_files_parse_with_line_numbers() {
        let k = Keyring::new(vec![GossipKey::random(3), GossipKey::random(9)]).unwrap();
        let p = Path::new("g.keys");
        let back = Keyring::parse(&k.to_text(), p).unwrap();
        assert_eq!(back.keys()[0].secret, k.keys()[0].secret);
        assert_eq!(back.keys()[1].id, 9);
        let e = Keyring::parse("# c\n1 abc\n", p).unwrap_err();
        assert!(e.to_string().contains("g.keys:2"), "{e}");
        let e = Keyring::parse("", p).unwrap_err();
        assert!(e.to_string().contains("0 keys"), "{e}");
        let line = GossipKey::random(4).to_line();
        let e = Keyring::parse(&format!("{line}\n{line}\n"), p).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        let e = Keyring::parse(&format!("300 {}\n", "00".repeat(32)), p).unwrap_err();
        assert!(e.to_string().contains("key id"), "{e}");
    }
}
