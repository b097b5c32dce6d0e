//! A fleet's credentials: a certificate authority that signs each node's
//! certificate (mutual TLS on the data channel, with `rustls`), and the
//! gossip keys that seal every membership datagram ([`crate::seal`]).
//!
//! `fallow peer init --fleet DIR` makes the fleet directory: `ca.pem`,
//! `ca.key` and `gossip.keys` (the keys readable by the owner only; keep
//! it off the nodes). `fallow peer keygen --fleet DIR --ip IP --out NODE`
//! issues one node's directory: `ca.pem`, `node.pem` (signed by the CA,
//! naming the node's IP addresses), `node.key` and a copy of
//! `gossip.keys`. A node started with `--keys NODE` is known to the others
//! by the address its certificate names; a server checks that a client's
//! certificate names the address the connection comes from, and a client
//! that the server's names the address it dialled — so a member cannot
//! speak for another member's address on the data channel.
//!
//! Certificates are ECDSA P-256 (`rcgen`'s default), valid for
//! [`VALID_DAYS`]; TLS 1.3 and 1.2 with `rustls`'s safe defaults and the
//! `ring` provider.

use crate::error::{Error, Result};
use crate::seal::{GossipKey, Keyring};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::net::IpAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How long issued certificates are valid, days.
pub const VALID_DAYS: i64 = 825;

/// The CA's subject: every fleet's CA has the same name; what tells fleets
/// apart is the key that signs.
const CA_NAME: &str = "fallow peer fleet CA";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

fn gen(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |e| Error::invalid(what, e.to_string())
}

/// Write `data` to `path` atomically with `mode`
/// ([`fallow_core::outpath::Atomic`]: a new temporary file, never an
/// existing one whose permissions a key would inherit, fsynced and renamed
/// over `path`); never overwrite an existing file unless `replace`.
fn write_file(path: &Path, data: &[u8], mode: u32, replace: bool) -> Result<()> {
    if !replace && path.exists() {
        return Err(Error::invalid(
            path.display().to_string(),
            "exists: not overwritten (remove it first)",
        ));
    }
    fallow_core::outpath::Atomic {
        mode: Some(mode),
        ..fallow_core::outpath::Atomic::DURABLE
    }
    .write_bytes(path, data)
    .map_err(io(path))
}

fn validity(p: &mut CertificateParams) {
    let now = time_now();
    p.not_before = now - rcgen_duration_days(1);
    p.not_after = now + rcgen_duration_days(VALID_DAYS);
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn rcgen_duration_days(d: i64) -> time::Duration {
    time::Duration::days(d)
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("no names");
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.distinguished_name.push(DnType::CommonName, CA_NAME);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut p);
    p
}

/// Make a fleet directory: a new CA and one gossip key. Existing files are
/// never overwritten.
pub fn init_fleet(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let key = KeyPair::generate().map_err(gen("ca key"))?;
    let cert = ca_params().self_signed(&key).map_err(gen("ca cert"))?;
    let ring = Keyring::new(vec![GossipKey::random(1)])?;
    for name in ["ca.pem", "ca.key", "gossip.keys"] {
        if dir.join(name).exists() {
            return Err(Error::invalid(
                dir.join(name).display().to_string(),
                "exists: a fleet is already there (not overwritten)",
            ));
        }
    }
    write_file(
        &dir.join("ca.key"),
        key.serialize_pem().as_bytes(),
        0o600,
        false,
    )?;
    write_file(
        &dir.join("gossip.keys"),
        ring.to_text().as_bytes(),
        0o600,
        false,
    )?;
    write_file(&dir.join("ca.pem"), cert.pem().as_bytes(), 0o644, false)
}

/// Add a new gossip key to a fleet directory for a rotation: it is
/// appended (opened, not yet sealing) unless `promote`, which moves the
/// newest key first (sealing); `retire` drops every key but the first.
/// Returns the new ring.
pub fn rotate_gossip(dir: &Path, promote: bool, retire: bool) -> Result<Keyring> {
    let path = dir.join("gossip.keys");
    let ring = read_keyring(&path)?;
    let mut keys = ring.keys().to_vec();
    if retire {
        keys.truncate(1);
    } else if promote {
        let newest = keys.len() - 1;
        keys.swap(0, newest);
    } else {
        let id = (0u8..=255)
            .find(|id| keys.iter().all(|k| k.id != *id))
            .expect("fewer than 256 keys");
        keys.push(GossipKey::random(id));
    }
    let ring = Keyring::new(keys)?;
    write_file(&path, ring.to_text().as_bytes(), 0o600, true)?;
    Ok(ring)
}

/// Issue a node's directory from the fleet directory: its certificate
/// names `ips` (the addresses it listens on; at least one for a server)
/// and `name`.
pub fn issue_node(fleet: &Path, out: &Path, name: &str, ips: &[IpAddr]) -> Result<()> {
    let ca_key_path = fleet.join("ca.key");
    let ca_key_pem = read_secret(&ca_key_path)?;
    let ca_key = KeyPair::from_pem(&ca_key_pem)
        .map_err(|e| Error::invalid(ca_key_path.display().to_string(), e.to_string()))?;
    let issuer = Issuer::new(ca_params(), ca_key);
    let ca_pem_path = fleet.join("ca.pem");
    let ca_pem = std::fs::read(&ca_pem_path).map_err(io(&ca_pem_path))?;
    let ring = read_keyring(&fleet.join("gossip.keys"))?;

    let mut p = CertificateParams::new(Vec::<String>::new()).expect("no names");
    p.distinguished_name.push(DnType::CommonName, name);
    p.subject_alt_names = ips.iter().map(|ip| SanType::IpAddress(*ip)).collect();
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.use_authority_key_identifier_extension = true;
    validity(&mut p);
    let key = KeyPair::generate().map_err(gen("node key"))?;
    let cert = p.signed_by(&key, &issuer).map_err(gen("node cert"))?;
    std::fs::create_dir_all(out).map_err(io(out))?;
    write_file(
        &out.join("node.key"),
        key.serialize_pem().as_bytes(),
        0o600,
        false,
    )?;
    write_file(
        &out.join("gossip.keys"),
        ring.to_text().as_bytes(),
        0o600,
        true,
    )?;
    write_file(&out.join("node.pem"), cert.pem().as_bytes(), 0o644, false)?;
    write_file(&out.join("ca.pem"), &ca_pem, 0o644, true)
}

/// Check that `path` can be trusted as key material: it and every
/// directory above it (its own directory included) are owned by root or by
/// this process's user, and none is writable by group or others — so no
/// other local user can replace the file, or rename its directory and put
/// another in its place. A directory writable by others is accepted only
/// with the sticky bit (as `/tmp`), where others cannot rename or remove
/// what they do not own. Symbolic links are refused: the file must be in
/// the directory that is checked.
pub fn check_trusted(path: &Path) -> Result<()> {
    let me = rustix::process::geteuid().as_raw();
    let trusted_owner = |uid: u32| uid == 0 || uid == me;
    let meta = std::fs::symlink_metadata(path).map_err(io(path))?;
    let refuse = |p: &Path, why: String| Err(Error::invalid(p.display().to_string(), why));
    if meta.file_type().is_symlink() {
        return refuse(path, "a symbolic link: put the file itself here".into());
    }
    let mode = meta.permissions().mode();
    if !trusted_owner(meta.uid()) {
        return refuse(
            path,
            format!(
                "owned by uid {}, not root or this user ({me}): `chown` it",
                meta.uid()
            ),
        );
    }
    if mode & 0o022 != 0 {
        return refuse(
            path,
            format!(
                "writable by group or others (mode {:04o}): `chmod go-w` it",
                mode & 0o7777
            ),
        );
    }
    let abs = std::path::absolute(path).map_err(io(path))?;
    let mut dir = abs.parent();
    while let Some(d) = dir {
        let m = std::fs::metadata(d).map_err(io(d))?;
        let mode = m.permissions().mode();
        if !trusted_owner(m.uid()) {
            return refuse(
                d,
                format!(
                    "a directory above key file `{}` is owned by uid {}, not root or this user ({me})",
                    path.display(),
                    m.uid()
                ),
            );
        }
        let sticky = mode & 0o1000 != 0;
        if mode & 0o022 != 0 && !sticky {
            return refuse(
                d,
                format!(
                    "a directory above key file `{}` is writable by group or others (mode {:04o}): `chmod go-w` it",
                    path.display(),
                    mode & 0o7777
                ),
            );
        }
        dir = d.parent();
    }
    Ok(())
}

/// Read a file that must not be readable by group or others, and that
/// only root or this user can replace ([`check_trusted`]).
fn read_secret(path: &Path) -> Result<String> {
    check_trusted(path)?;
    let meta = std::fs::metadata(path).map_err(io(path))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::invalid(
            path.display().to_string(),
            format!("readable by others (mode {mode:04o}): `chmod 600` it"),
        ));
    }
    std::fs::read_to_string(path).map_err(io(path))
}

/// Read a gossip key file (`ID HEX` lines; readable by the owner only).
pub fn read_keyring(path: &Path) -> Result<Keyring> {
    Keyring::parse(&read_secret(path)?, path)
}

/// A node's loaded credentials.
#[derive(Clone)]
pub struct NodeKeys {
    /// Where they came from.
    pub dir: PathBuf,
    /// TLS for accepting connections (client certificates required).
    pub server: Arc<rustls::ServerConfig>,
    /// TLS for connecting (presents the node's certificate).
    pub client: Arc<rustls::ClientConfig>,
    /// The gossip keys.
    pub gossip: Keyring,
    /// The addresses the node's certificate names.
    pub ips: Vec<IpAddr>,
}

impl std::fmt::Debug for NodeKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeKeys")
            .field("dir", &self.dir)
            .field("ips", &self.ips)
            .finish()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl NodeKeys {
    /// Load a node directory made by [`issue_node`].
    pub fn load(dir: &Path) -> Result<NodeKeys> {
        let bad = |p: &Path, e: &dyn std::fmt::Display| {
            Error::invalid(p.display().to_string(), e.to_string())
        };
        let ca_path = dir.join("ca.pem");
        let cert_path = dir.join("node.pem");
        let key_path = dir.join("node.key");
        // the CA decides who is a member: it must be as safe from other
        // local users as the private key
        check_trusted(&ca_path)?;
        check_trusted(&cert_path)?;
        let ca = CertificateDer::from_pem_file(&ca_path).map_err(|e| bad(&ca_path, &e))?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
            .map_err(|e| bad(&cert_path, &e))?
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| bad(&cert_path, &e))?;
        let leaf = chain
            .first()
            .ok_or_else(|| bad(&cert_path, &"no certificate"))?
            .clone();
        let key_pem = read_secret(&key_path)?;
        let key =
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| bad(&key_path, &e))?;
        let gossip = read_keyring(&dir.join("gossip.keys"))?;
        let ips = cert_ips(&leaf).map_err(|e| bad(&cert_path, &e))?;

        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).map_err(|e| bad(&ca_path, &e))?;
        let roots = Arc::new(roots);
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
                .build()
                .map_err(|e| bad(&ca_path, &e))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(dir, &e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| bad(&cert_path, &e))?;
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(dir, &e))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| bad(&cert_path, &e))?;
        Ok(NodeKeys {
            dir: dir.to_path_buf(),
            server: Arc::new(server),
            client: Arc::new(client),
            gossip,
            ips,
        })
    }
}

/// The IP addresses a certificate names (subject alternative names).
/// `webpki` only answers "is it valid for X?", so the candidates are the
/// DER's `[7] IMPLICIT OCTET STRING` items of 4 or 16 bytes (how an IP SAN
/// is encoded), and each is kept only if webpki confirms the certificate
/// is valid for it: a stray byte pattern can add no address.
fn cert_ips(der: &CertificateDer<'_>) -> std::result::Result<Vec<IpAddr>, String> {
    let cert = webpki::EndEntityCert::try_from(der).map_err(|e| e.to_string())?;
    let d = der.as_ref();
    let mut out: Vec<IpAddr> = Vec::new();
    for i in 0..d.len().saturating_sub(1) {
        let cand: Option<IpAddr> = match (d[i], d[i + 1]) {
            (0x87, 4) if i + 6 <= d.len() => Some(IpAddr::from(
                <[u8; 4]>::try_from(&d[i + 2..i + 6]).expect("4"),
            )),
            (0x87, 16) if i + 18 <= d.len() => Some(IpAddr::from(
                <[u8; 16]>::try_from(&d[i + 2..i + 18]).expect("16"),
            )),
            _ => None,
        };
        if let Some(ip) = cand {
            if !out.contains(&ip) && names_ip(&cert, ip) {
                out.push(ip);
            }
        }
    }
    Ok(out)
}

fn names_ip(cert: &webpki::EndEntityCert<'_>, ip: IpAddr) -> bool {
    cert.verify_is_valid_for_subject_name(&ServerName::IpAddress(ip.into()))
        .is_ok()
}

/// True when the certificate `der` names `ip` (the server's check that a
/// client connects from the address its certificate claims).
pub fn cert_names_ip(der: &CertificateDer<'_>, ip: IpAddr) -> bool {
    webpki::EndEntityCert::try_from(der).is_ok_and(|c| names_ip(&c, ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_issues_nodes_whose_certificates_name_their_addresses() {
        let t = tempfile::tempdir().unwrap();
        let fleet = t.path().join("fleet");
        init_fleet(&fleet).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&fleet.join("ca.key")), 0o600);
        assert_eq!(mode(&fleet.join("gossip.keys")), 0o600);
        // a second init refuses to overwrite the fleet
        assert!(init_fleet(&fleet)
            .unwrap_err()
            .to_string()
            .contains("exists"));
        let ips: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap(), "fd00::2".parse().unwrap()];
        issue_node(&fleet, &t.path().join("n2"), "n2", &ips).unwrap();
        let k = NodeKeys::load(&t.path().join("n2")).unwrap();
        assert_eq!(k.ips, ips);
        let leaf = CertificateDer::from_pem_file(t.path().join("n2/node.pem")).unwrap();
        assert!(cert_names_ip(&leaf, ips[0]));
        assert!(!cert_names_ip(&leaf, "10.0.0.3".parse().unwrap()));
        // the node's gossip ring is the fleet's
        let fk = read_keyring(&fleet.join("gossip.keys")).unwrap();
        assert!(k.gossip.open(&fk.seal(b"x")).is_ok());
        // a key readable by others is refused
        std::fs::set_permissions(
            t.path().join("n2/node.key"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let e = NodeKeys::load(&t.path().join("n2")).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }

    #[test]
    fn rotation_steps_in_the_fleet_directory() {
        let t = tempfile::tempdir().unwrap();
        init_fleet(t.path()).unwrap();
        let r0 = read_keyring(&t.path().join("gossip.keys")).unwrap();
        let r1 = rotate_gossip(t.path(), false, false).unwrap();
        assert_eq!(r1.keys().len(), 2);
        assert_eq!(r1.keys()[0].id, r0.keys()[0].id, "the old key still seals");
        let r2 = rotate_gossip(t.path(), true, false).unwrap();
        assert_eq!(r2.keys()[0].id, r1.keys()[1].id, "the new key seals");
        let r3 = rotate_gossip(t.path(), false, true).unwrap();
        assert_eq!(r3.keys().len(), 1);
        assert!(r0.open(&r3.seal(b"x")).is_err());
        assert!(r3.open(&r1.seal(b"x")).is_err(), "old key retired");
    }

    #[test]
    fn key_files_others_could_replace_are_refused_naming_the_path() {
        let t = tempfile::tempdir().unwrap();
        let fleet = t.path().join("fleet");
        init_fleet(&fleet).unwrap();
        let dir = t.path().join("n1");
        issue_node(&fleet, &dir, "n1", &["10.0.0.1".parse().unwrap()]).unwrap();
        let chmod = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        let refused = |want: &Path, why: &str| {
            let e = NodeKeys::load(&dir).unwrap_err().to_string();
            assert!(
                e.contains(&want.display().to_string()) && e.contains(why),
                "{e}"
            );
        };
        assert!(
            NodeKeys::load(&dir).is_ok(),
            "the legitimate directory loads"
        );
        // the directory itself writable by others, or by its group
        for m in [0o777, 0o770, 0o757] {
            chmod(&dir, m);
            refused(&dir, "writable by group or others");
        }
        // with the sticky bit others cannot replace what they do not own
        chmod(&dir, 0o1777);
        assert!(NodeKeys::load(&dir).is_ok());
        chmod(&dir, 0o700);
        // a directory above it
        chmod(t.path(), 0o777);
        refused(t.path(), "a directory above key file");
        chmod(t.path(), 0o700);
        // each file writable by others (the CA decides who is a member)
        for f in ["ca.pem", "node.pem", "gossip.keys", "node.key"] {
            let p = dir.join(f);
            let before = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            chmod(&p, before | 0o002);
            refused(&p, "writable by group or others");
            chmod(&p, before);
        }
        // a link in place of the gossip keys
        let g = dir.join("gossip.keys");
        std::fs::rename(&g, t.path().join("g")).unwrap();
        std::os::unix::fs::symlink(t.path().join("g"), &g).unwrap();
        refused(&g, "symbolic link");
        std::fs::remove_file(&g).unwrap();
        std::fs::rename(t.path().join("g"), &g).unwrap();
        assert!(NodeKeys::load(&dir).is_ok());
        // owned by another user (needs root to give it away)
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&g, Some(65534), None).unwrap();
            refused(&g, "owned by uid 65534");
            std::os::unix::fs::chown(&g, Some(0), None).unwrap();
            std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
            refused(&dir, "owned by uid 65534");
            std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
            assert!(NodeKeys::load(&dir).is_ok());
        } else {
            eprintln!("skip: ownership part (chown needs root)");
        }
    }
}
