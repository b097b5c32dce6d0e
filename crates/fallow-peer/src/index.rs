//! The whitelist: the application directories a node indexes, each file's
//! [`Manifest`], and the one function that turns a path a peer asks for
//! into a file it may read.
//!
//! Files are named on the wire as `ROOT/relative/path`, where `ROOT` is the
//! root's name (`usr/bin` for `/usr/bin` by default, or a name given as
//! `app=/srv/app`), so machines that keep the same application in
//! different places still agree on names. Only regular files found while
//! walking a root are indexed: symbolic links are not followed (a link's
//! target is indexed where it lives, if inside a root), and a request is
//! served only for a name in the index, opened beneath its root with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` and checked to be the
//! same inode, size and modification time as when it was hashed.

use crate::error::{Error, Result};
use crate::manifest::{check_chunk_bytes, Manifest};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// An indexed application directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// Its name on the wire.
    pub name: String,
    /// The directory, canonical.
    pub dir: PathBuf,
}

impl Root {
    /// Parse `[NAME=]DIR`: the directory must exist; the default name is
    /// its canonical path without the leading `/`.
    pub fn parse(spec: &str) -> Result<Root> {
        let (name, dir) = match spec.split_once('=') {
            Some((n, d)) => (Some(n.trim().to_string()), d),
            None => (None, spec),
        };
        let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
        if !dir.is_dir() {
            return Err(Error::invalid(
                "--dir",
                format!("{}: not a directory", dir.display()),
            ));
        }
        let name = match name {
            Some(n) => n,
            None => dir
                .to_str()
                .ok_or_else(|| Error::invalid("--dir", format!("{}: not UTF-8", dir.display())))?
                .trim_start_matches('/')
                .to_string(),
        };
        let name = name.trim_matches('/').to_string();
        if name.is_empty() || check_wire(&name).is_err() {
            return Err(Error::invalid(
                "--dir",
                format!("`{spec}`: the root name must be a relative path without `.` or `..` (name it: NAME=DIR)"),
            ));
        }
        Ok(Root { name, dir })
    }
}

/// What identifies a file's contents without reading them: when any of
/// these changes, its manifest is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Device id.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size, bytes.
    pub size_bytes: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i128,
}

impl Stamp {
    /// The stamp of file metadata.
    pub fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size_bytes: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

/// One indexed file.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Name on the wire: `ROOT/relative/path`.
    pub wire: String,
    /// Index of its root in [`Index::roots`].
    pub root: usize,
    /// Path relative to the root.
    pub rel: PathBuf,
    /// Its absolute path.
    pub path: PathBuf,
    /// Its contents' manifest.
    pub manifest: Manifest,
    /// Metadata when it was hashed.
    pub stamp: Stamp,
}

/// Why a request for a path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not a plain relative name (`..`, `.`, an absolute path, an empty
    /// component, a NUL byte, too long).
    #[error("refused: bad path `{0}` (names are ROOT/relative/path without `.` or `..`)")]
    BadPath(String),
    /// A well-formed name that is not in the whitelist.
    #[error("refused: `{0}` is not an indexed file")]
    NotIndexed(String),
    /// The file changed since it was indexed (or is no longer beneath its
    /// root as a regular file).
    #[error("refused: `{0}` changed since it was indexed")]
    Changed(String),
}

/// The longest wire name accepted, bytes.
pub const MAX_WIRE_BYTES: usize = 4096;

/// Check that `wire` is a plain relative name: components that are not
/// empty, `.` or `..`, no NUL, not absolute.
pub fn check_wire(wire: &str) -> Result<(), Refusal> {
    let bad = || Refusal::BadPath(wire.chars().take(200).collect());
    if wire.is_empty()
        || wire.len() > MAX_WIRE_BYTES
        || wire.contains('\0')
        || wire.starts_with('/')
    {
        return Err(bad());
    }
    if wire
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(bad());
    }
    Ok(())
}

/// Files that could not be indexed, with the reason.
#[derive(Debug, Clone, Default)]
pub struct Skipped {
    /// Unreadable files and directories, with the OS error.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Names that are not UTF-8 (they cannot be named on the wire).
    pub not_utf8: u64,
    /// Symbolic links, devices, sockets and FIFOs.
    pub not_regular: u64,
}

/// The whitelist of one node.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// The roots, in the order given.
    pub roots: Vec<Root>,
    /// Chunk size of every manifest.
    pub chunk_bytes: u32,
    files: BTreeMap<String, Entry>,
    /// What the last walk could not index.
    pub skipped: Skipped,
}

impl Index {
    /// Walk the roots and hash every regular file. Files whose [`Stamp`]
    /// matches their entry in `previous` keep its manifest (a rescan reads
    /// only what changed). Two roots with the same name are an error.
    pub fn build(roots: &[Root], chunk_bytes: u32, previous: Option<&Index>) -> Result<Index> {
        check_chunk_bytes(chunk_bytes)?;
        for (i, r) in roots.iter().enumerate() {
            if roots[..i].iter().any(|o| o.name == r.name) {
                return Err(Error::invalid(
                    "--dir",
                    format!("two roots are named `{}`: name them (NAME=DIR)", r.name),
                ));
            }
        }
        let mut index = Index {
            roots: roots.to_vec(),
            chunk_bytes,
            ..Index::default()
        };
        let reuse = previous.filter(|p| p.chunk_bytes == chunk_bytes);
        for (ri, root) in roots.iter().enumerate() {
            let mut stack = vec![PathBuf::new()];
            while let Some(rel_dir) = stack.pop() {
                let dir = root.dir.join(&rel_dir);
                let rd = match std::fs::read_dir(&dir) {
                    Ok(rd) => rd,
                    Err(e) if rel_dir.as_os_str().is_empty() => return Err(Error::io(&dir, e)),
                    Err(e) => {
                        index.skipped.unreadable.push((dir, e.to_string()));
                        continue;
                    }
                };
                let mut names: Vec<_> = rd.filter_map(|e| e.ok()).collect();
                names.sort_by_key(|e| e.file_name());
                for de in names {
                    let rel = rel_dir.join(de.file_name());
                    let path = root.dir.join(&rel);
                    let meta = match std::fs::symlink_metadata(&path) {
                        Ok(m) => m,
                        Err(e) => {
                            index.skipped.unreadable.push((path, e.to_string()));
                            continue;
                        }
                    };
                    if meta.is_dir() {
                        stack.push(rel);
                        continue;
                    }
                    if !meta.is_file() {
                        index.skipped.not_regular += 1;
                        continue;
                    }
                    let Some(rel_str) = rel.to_str() else {
                        index.skipped.not_utf8 += 1;
                        continue;
                    };
                    let wire = format!("{}/{}", root.name, rel_str);
                    if check_wire(&wire).is_err() {
                        index.skipped.not_utf8 += 1;
                        continue;
                    }
                    let stamp = Stamp::of(&meta);
                    let manifest = match reuse.and_then(|p| p.files.get(&wire)) {
                        Some(old) if old.stamp == stamp => old.manifest.clone(),
                        _ => match Manifest::of_file(&path, chunk_bytes) {
                            Ok(m) => m,
                            Err(e) => {
                                index.skipped.unreadable.push((path, e.to_string()));
                                continue;
                            }
                        },
                    };
                    index.files.insert(
                        wire.clone(),
                        Entry {
                            wire,
                            root: ri,
                            rel,
                            path,
                            manifest,
                            stamp,
                        },
                    );
                }
            }
        }
        Ok(index)
    }

    /// Every indexed file, by wire name.
    pub fn files(&self) -> impl Iterator<Item = &Entry> {
        self.files.values()
    }

    /// Number of indexed files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Total size of the indexed files, bytes.
    pub fn bytes(&self) -> u64 {
        self.files.values().map(|e| e.manifest.size_bytes).sum()
    }

    /// The entry named `wire`, if indexed.
    pub fn get(&self, wire: &str) -> Option<&Entry> {
        self.files.get(wire)
    }

    /// The wire name of a file given by its path relative to root `root`.
    pub fn wire_of(&self, root: usize, rel: &Path) -> Option<String> {
        let r = self.roots.get(root)?;
        let rel = rel.to_str()?;
        Some(format!("{}/{}", r.name, rel))
    }

    /// The entry a peer may read for `wire`, or why not.
    pub fn resolve(&self, wire: &str) -> Result<&Entry, Refusal> {
        check_wire(wire)?;
        self.files
            .get(wire)
            .ok_or_else(|| Refusal::NotIndexed(wire.to_string()))
    }

    /// Open an entry for serving: beneath its root without following any
    /// symbolic link, and only if it is still the file that was hashed.
    pub fn open(&self, e: &Entry) -> Result<File, Refusal> {
        let changed = || Refusal::Changed(e.wire.clone());
        let root = &self.roots[e.root];
        let f = open_beneath(&root.dir, &e.rel).map_err(|_| changed())?;
        let meta = f.metadata().map_err(|_| changed())?;
        if !meta.is_file() || Stamp::of(&meta) != e.stamp {
            return Err(changed());
        }
        Ok(f)
    }
}

/// Open `rel` read-only beneath `dir`, refusing `..` escapes and every
/// symbolic link on the way (`openat2`, Linux 5.6). On older kernels the
/// canonical path is opened with `O_NOFOLLOW` and must stay beneath `dir`.
fn open_beneath(dir: &Path, rel: &Path) -> std::io::Result<File> {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(std::io::ErrorKind::InvalidInput.into());
    }
    let dirf = File::open(dir)?;
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match openat2(&dirf, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(File::from(fd)),
        Err(rustix::io::Errno::NOSYS) => {
            let full = dir.join(rel);
            let canon = std::fs::canonicalize(&full)?;
            if canon != full {
                return Err(std::io::ErrorKind::InvalidInput.into());
            }
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&canon)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Root) {
        let t = tempfile::tempdir().unwrap();
        let app = t.path().join("app");
        std::fs::create_dir_all(app.join("lib")).unwrap();
        std::fs::write(app.join("bin"), vec![7u8; 10_000]).unwrap();
        std::fs::write(app.join("lib/a.so"), b"hello").unwrap();
        std::fs::write(t.path().join("secret"), b"outside").unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), app.join("escape")).unwrap();
        std::os::unix::fs::symlink("../secret", app.join("lib/up")).unwrap();
        let root = Root::parse(&format!("app={}", app.display())).unwrap();
        (t, root)
    }

    #[test]
    fn walks_regular_files_and_skips_links() {
        let (_t, root) = tree();
        let idx = Index::build(&[root], 4096, None).unwrap();
        let names: Vec<&str> = idx.files().map(|e| e.wire.as_str()).collect();
        assert_eq!(names, ["app/bin", "app/lib/a.so"]);
        assert_eq!(idx.skipped.not_regular, 2);
        assert_eq!(idx.bytes(), 10_005);
        let e = idx.get("app/bin").unwrap();
        assert_eq!(e.manifest.chunk_count(), 3);
        assert_eq!(e.manifest, Manifest::of_file(&e.path, 4096).unwrap());
    }

    #[test]
    fn refuses_escapes_and_unindexed_names() {
        let (t, root) = tree();
        let idx = Index::build(&[root], 4096, None).unwrap();
        for bad in [
            "../etc/passwd",
            "app/../secret",
            "app/lib/../../secret",
            "/etc/passwd",
            "app//bin",
            "app/./bin",
            "",
            "app/bin\0",
        ] {
            assert!(
                matches!(idx.resolve(bad), Err(Refusal::BadPath(_))),
                "{bad:?}"
            );
        }
        for missing in ["app/escape", "app/lib/up", "app/nope", "etc/passwd", "app"] {
            assert!(
                matches!(idx.resolve(missing), Err(Refusal::NotIndexed(_))),
                "{missing}"
            );
        }
        let e = idx.resolve("app/lib/a.so").unwrap();
        assert!(idx.open(e).is_ok());
        // replace an indexed file by a link to a file outside the root:
        // the name is still indexed, but opening refuses to follow it
        let p = t.path().join("app/lib/a.so");
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), &p).unwrap();
        assert_eq!(
            idx.open(idx.resolve("app/lib/a.so").unwrap()).unwrap_err(),
            Refusal::Changed("app/lib/a.so".into())
        );
    }

    #[test]
    fn changed_files_are_refused_and_rehashed_on_rescan() {
        let (t, root) = tree();
        let idx = Index::build(std::slice::from_ref(&root), 4096, None).unwrap();
        std::fs::write(t.path().join("app/bin"), vec![8u8; 10_001]).unwrap();
        let e = idx.resolve("app/bin").unwrap();
        assert!(matches!(idx.open(e), Err(Refusal::Changed(_))));
        let again = Index::build(&[root], 4096, Some(&idx)).unwrap();
        let e2 = again.get("app/bin").unwrap();
        assert_eq!(e2.manifest.size_bytes, 10_001);
        assert_ne!(e2.manifest.root, e.manifest.root);
        // the untouched file kept its manifest
        assert_eq!(
            again.get("app/lib/a.so").unwrap().manifest,
            idx.get("app/lib/a.so").unwrap().manifest
        );
    }

    #[test]
    fn root_names_and_errors() {
        let t = tempfile::tempdir().unwrap();
        let r = Root::parse(t.path().to_str().unwrap()).unwrap();
        assert_eq!(
            r.name,
            std::fs::canonicalize(t.path()).unwrap().to_str().unwrap()[1..]
        );
        let e = Root::parse("/no/such/dir/x").unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("/no/such/dir/x"),
            "{e}"
        );
        let e = Root::parse(&format!("..={}", t.path().display())).unwrap_err();
        assert!(e.to_string().contains("root name"), "{e}");
        let dup = [r.clone(), r];
        let e = Index::build(&dup, 4096, None).unwrap_err();
        assert!(e.to_string().contains("two roots"), "{e}");
    }
}
